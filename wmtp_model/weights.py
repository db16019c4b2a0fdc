"""Weight storage formats and a checkpoint's weight bytes: values and scales at their real sizes, and the layers a
quantized checkpoint keeps in bf16.

Formats (bytes of one [N, K] matrix, N output rows, K the reduction dimension):

- `bf16`: 2 N K.
- `fp8` (fine-grained FP8, W8A8): e4m3 values, one fp32 scale per 128 x 128 block:
  N K + 4 ceil(N/128) ceil(K/128). Source: Hugging Face Transformers, "Fine-grained FP8"
  (huggingface.co/docs/transformers/quantization/finegrained_fp8: weights quantized per 2-D block,
  weight_block_size = (128, 128), the scheme of the DeepSeek-V3 / Qwen FP8 releases); NVIDIA Transformer Engine,
  "FP8 Blockwise Scaling" (one FP32 scale per 128 x 128 block). Our kernels read the same layout
  (`wmtp.measure.kernels.quant_formats.weight_bytes('fp8_block', ...)`).
- `int4` (4-bit weight-only, W4A16): two codes per byte, one bf16 (or fp16) scale per row and per 128 along K:
  N ceil(K/2) + 2 N ceil(K/128) (`quant_formats.weight_bytes('int4_group', ...)`; GPTQ / AWQ group size 128). A
  checkpoint's own group size g (`ModelSpec.int4_group`, from its quantization_config) gives 2 N ceil(K/g); group_size
  -1 (per channel) one scale per output row for the whole row: N ceil(K/2) + 2 N. Zero points, where the checkpoint
  stores them (`ModelSpec.int4_zeros`), add a 4-bit zero per scale, eight packed to an int32: 0.5 N ceil(K/g)
  (0.5 N per channel). Sources (read for this model, in our words): AutoGPTQ `qlinear_cuda_old.QuantLinear` and
  GPTQModel `GPTQQuantLinear._register_gptq_buffers` register `qzeros` int32 [ceil(K/g), N/8] beside `scales`
  [ceil(K/g), N] whatever `sym` says (a symmetric checkpoint stores the midpoint zero); AutoAWQ
  `WQLinear_GEMM` registers `qzeros` int32 [K/g, N/8] likewise; compressed-tensors `PackedQuantizationCompressor`
  (`compressors/pack_quantized/base.py`) names `weight_zero_point` among a module's tensors only when
  `weights.symmetric` is false (default true) and packs it 4-bit along N, the symmetric zero point being dropped.
  Not counted: GPTQ's `g_idx` (int32 per input column, 4 K bytes a matrix, < 0.1 % of the codes for N >= 8192).

  What a W4A16 kernel reads (the latency model, `part_bytes(..., read=True)`): codes and scales, and the zero points
  only for asymmetric weights (`ModelSpec.int4_asym`). vLLM's `gptq_marlin.py` (the kernel vLLM and SGLang pick
  for GPTQ on CUDA) takes only symmetric GPTQ and builds its kernel with `zero_points=False`, so a symmetric
  checkpoint's stored `qzeros` are loaded but not read; its `awq_marlin.py` passes AWQ's `qzeros` to the kernel
  (`weight_zp`); its compressed-tensors `wNa16` scheme creates `weight_zero_point` only for asymmetric schemes.
- `nvfp4`: e2m1 values two per byte, one fp8 e4m3 scale per 16 consecutive values along K, one fp32 scale per
  tensor: N ceil(K/2) + N ceil(K/16) + 4. Source: Intel Neural Compressor, "NVFP4 Quantization" (element E2M1,
  4 bits; scaling block 16; scale UE4M3, 8 bits; global tensor-wise scale FP32, 32 bits); NVIDIA NeMo AutoModel
  `quantization.nvfp4` (the ModelOpt checkpoint layout: `weight_scale` e4m3 per 16 columns, `weight_scale_2`
  fp32 per tensor, 0.5625 bytes per parameter).

Which layers a quantized checkpoint keeps in bf16 (`BF16_PARTS`): the token embedding and the lm_head, every norm,
the MoE routers (`mlp.gate`) and the linear-attention conv1d weights. Source: NVIDIA ModelOpt's `NVFP4_DEFAULT_CFG`
disables quantization of `*lm_head*`, `*router*`, `*mlp.gate.*`, `*block_sparse_moe.gate*` and
`*linear_attn.conv1d*` (as quoted by the natfii/Qwen3.6-27B-VLM-NVFP4-MTP model card); the Qwen3.6-35B-A3B NVFP4
recipe of AEON-7 lists lm_head, embed_tokens, the MoE routing gates and all norms as preserved bf16; embeddings
are looked up, not multiplied, so no GEMM format applies to them. Fine-grained FP8 releases are taken to keep the
same layers in bf16 (as DeepSeek-V3's release does for lm_head, embeddings, routers and norms; an assumption for the
Qwen FP8 releases, not re-read from their checkpoints here).

Assumption (not a fact from a checkpoint we read): the MTP block's linear layers are stored in the checkpoint's
format like the target's. Community NVFP4 checkpoints that graft the MTP head on keep `mtp.*` in bf16 (the natfii
card above); a row can say so with `ModelSpec.mtp_bf16=True`.

The latency model (`wmtp.latency`) reads each weight-bound work item's bytes from `part_bytes(..., read=True)`: the
item's part in its own format (`ModelSpec.weight_format`: the lm_head and routers in bf16 when quantized), int4 at
the row's group size with the zero points the kernel reads. The profiles' int4 fits were measured with group-128
kernels without zero points (`gemm@int4`, `moe@int4`): another group size or zero points are priced at the fitted
rate per byte, an assumption (a zero-point kernel's extra dequantization work is not modelled). This module is the
memory side too (`wmtp.memory`, and `wmtp.engine_memory` through `model_weight_bytes`).
"""

from __future__ import annotations

import math

BLOCK_FP8 = 128  # fp8 scale block, both dimensions
GROUP_INT4 = 128  # int4 scale group along K
GROUP_NVFP4 = 16  # nvfp4 scale group along K
SCALE_INT4_BYTES = 2  # bf16 / fp16 scale
ZERO_INT4_BYTES = 0.5  # 4-bit zero point, eight to an int32
SCALE_FP8_BYTES = 4  # fp32 block scale
SCALE_NVFP4_BYTES = 1  # fp8 e4m3 group scale
TENSOR_SCALE_NVFP4_BYTES = 4  # fp32 per-tensor scale

FORMATS = ("bf16", "fp16", "fp8", "int4", "nvfp4")
BF16_PARTS = ("embed", "lm_head", "norms", "routers", "conv")


def matrix_bytes(fmt: str, n: int, k: int, group: int = GROUP_INT4, zeros: bool = False) -> float:
    """Bytes of one [N, K] weight matrix in `fmt`, values and scales (module docstring); `group`: int4's scale group
    along K, 0 for one scale per output row (GPTQ / AWQ group_size -1); `zeros`: int4 with a 4-bit zero point per
    scale."""
    if n < 0 or k < 0:
        raise ValueError(f"matrix dimensions must be >= 0, got {n} x {k}")
    if fmt in ("bf16", "fp16"):
        return 2 * n * k
    if fmt == "fp8":
        return n * k + SCALE_FP8_BYTES * math.ceil(n / BLOCK_FP8) * math.ceil(k / BLOCK_FP8)
    if fmt == "int4":
        per_scale = SCALE_INT4_BYTES + (ZERO_INT4_BYTES if zeros else 0)
        return n * math.ceil(k / 2) + per_scale * n * (math.ceil(k / group) if group else 1)
    if fmt == "nvfp4":
        return n * math.ceil(k / 2) + SCALE_NVFP4_BYTES * n * math.ceil(k / GROUP_NVFP4) + TENSOR_SCALE_NVFP4_BYTES
    raise ValueError(f"unknown weight format {fmt!r}; known: {', '.join(FORMATS)}")


def bytes_per_param(fmt: str) -> float:
    """Bytes per parameter of a large matrix whose dimensions are multiples of the format's blocks (the per-tensor
    nvfp4 scale, 4 bytes, is left to `model_weight_bytes`)."""
    rates = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0 + SCALE_FP8_BYTES / BLOCK_FP8**2,
             "int4": 0.5 + SCALE_INT4_BYTES / GROUP_INT4, "nvfp4": 0.5 + SCALE_NVFP4_BYTES / GROUP_NVFP4}
    try:
        return rates[fmt]
    except KeyError:
        raise ValueError(f"unknown weight format {fmt!r}; known: {', '.join(FORMATS)}") from None


def int4_bytes(params: float, rows: float, group: int, zeros: bool) -> float:
    """Bytes of `params` int4 parameters in `rows` output rows: codes, a bf16 scale per `group` along K (0: one per
    output row) and, where `zeros`, a 4-bit zero point per scale (module docstring)."""
    per_scale = SCALE_INT4_BYTES + (ZERO_INT4_BYTES if zeros else 0)
    if group == 0:
        return params * 0.5 + per_scale * rows
    return params * (0.5 + per_scale / group)


def part_bytes(spec, part: str, params: float, rows: float, read: bool = False) -> float:
    """Bytes of `params` parameters in `rows` output rows of one kind of weight (`ModelSpec.weight_format`), scales
    included; int4 at the row's group size (`int4_group`) with the zero points the checkpoint stores
    (`int4_zeros`: the memory model), or with `read` those the kernel reads (`int4_asym`: the latency model). The
    nvfp4 per-tensor scale is left to the caller."""
    fmt = spec.weight_format(part)
    if fmt == "int4":
        return int4_bytes(params, rows, spec.int4_group, spec.int4_asym if read else spec.int4_zeros)
    return params * bytes_per_param(fmt)


def _mats_per_ffn(spec) -> int:
    return 3 if spec.ffn_act == "swiglu" else 2


def ffn_rows(spec, width: int, ffn: int) -> int:
    """Output rows of one FFN: gate and up (ffn each), down (width)."""
    return (_mats_per_ffn(spec) - 1) * ffn + width


def attn_rows(spec) -> int:
    """Output rows of one attention layer's projections (`ModelSpec.attn_params`, matrix by matrix)."""
    if spec.attn_kind == "mla":
        qk_head = spec.mla_nope + spec.mla_rope
        q = spec.mla_q_rank + spec.q_heads * qk_head if spec.mla_q_rank else spec.q_heads * qk_head
        return q + spec.head_dim + spec.q_heads * (spec.mla_nope + spec.mla_v_dim) + spec.hidden
    return spec.q_heads * spec.head_dim * (2 if spec.attn_out_gate else 1) + 2 * spec.kv_heads * spec.head_dim + spec.hidden


def linear_rows(spec) -> int:
    """Output rows of one linear-attention layer's in- and out-projections (`ModelSpec.linear_params`)."""
    v = spec.lin_v_heads * spec.lin_head_dim
    if spec.linear_kind == "gdn":
        return 2 * spec.lin_k_heads * spec.lin_head_dim + 2 * v + 2 * spec.lin_v_heads + spec.hidden
    return 2 * v + 2 * spec.ssm_groups * spec.ssm_state + spec.lin_v_heads + spec.hidden


def moe_dense_rows(spec) -> int:
    """Output rows of an MoE layer's quantized non-expert matrices (shared experts, latent projections; the router
    is bf16): `ModelSpec.moe_dense_params` less the router."""
    return spec.n_shared * ffn_rows(spec, spec.hidden, spec.shared_ffn) + (
        spec.moe_latent + spec.hidden if spec.moe_latent else 0)


def expert_rows(spec) -> int:
    """Output rows of one routed expert (`ModelSpec.expert_params`)."""
    return ffn_rows(spec, spec.moe_latent or spec.hidden, spec.expert_ffn)


def _quantized_block(spec, attn: bool, linear: bool, moe: bool, dense: bool) -> dict[str, tuple[float, int, int]]:
    """{"dense": (params, matrices, output rows), "experts": (...)} of one decoder block's quantized linear layers:
    routed experts apart from the rest (a mixed-precision checkpoint stores them in another format). Rows count the
    scales of a per-channel format (one per output row)."""
    params, mats, rows = 0.0, 0, 0
    if attn:
        params, mats, rows = params + spec.attn_params, mats + 4, rows + attn_rows(spec)
    if linear:
        params, mats = params + spec.linear_params, mats + (3 if spec.linear_kind == "gdn" else 2)
        rows += linear_rows(spec)
    experts = (0.0, 0, 0)
    if moe:
        router = spec.hidden * spec.n_experts
        params += spec.moe_dense_params - router
        mats += _mats_per_ffn(spec) * spec.n_shared + (2 if spec.moe_latent else 0)
        rows += moe_dense_rows(spec)
        experts = (float(spec.n_experts * spec.expert_params), _mats_per_ffn(spec) * spec.n_experts,
                   spec.n_experts * expert_rows(spec))
    if dense:
        params, mats = params + spec.dense_ffn_params, mats + _mats_per_ffn(spec)
        rows += ffn_rows(spec, spec.hidden, spec.dense_ffn)
    return {"dense": (params, mats, rows), "experts": experts}


def _stored(parts: dict[str, tuple[float, int, int]], spec, prefix: str = "") -> float:
    """Bytes of a block's quantized layers, each kind in its own format (`ModelSpec.weight_format`; int4 at the row's
    group size and stored zero points, `part_bytes`), plus nvfp4's per-tensor scale per matrix."""
    total = 0.0
    for kind, (params, mats, rows) in parts.items():
        nvfp4 = spec.weight_format(prefix + kind) == "nvfp4"
        total += part_bytes(spec, prefix + kind, params, rows) + mats * (TENSOR_SCALE_NVFP4_BYTES if nvfp4 else 0)
    return total


def weight_parts(spec) -> dict[str, float]:
    """Bytes per part of the checkpoint: the `target`'s and the `mtp` block's quantized linear layers (values +
    scales; routed experts in `weight_dtype`, the other layers in `dense_weight_dtype` where the checkpoint is mixed
    precision), and the bf16 parts (`BF16_PARTS`; `mtp_bf16` the MTP block's own norms and router). The MTP head
    shares the target's embedding and lm_head (Qwen3-Next / Qwen3.5 / DeepSeek-V3 MTP modules), so they are
    counted once."""
    bf16 = bytes_per_param("bf16")
    target = 0.0
    for count, flags in ((spec.n_full_attn, (True, False, False, False)), (spec.n_linear, (False, True, False, False)),
                         (spec.n_moe, (False, False, True, False)), (spec.n_dense_ffn, (False, False, False, True))):
        if count:
            target += count * _stored(_quantized_block(spec, *flags), spec)
    # Norms: two per Qwen / DeepSeek / GLM layer (input, post-attention), one per Nemotron-H block, one final.
    norms_per_layer = 1 if spec.family == "nemotron_h" else 2
    conv_ch = _conv_channels(spec)
    out = {
        "target": target,
        "embed": spec.vocab * spec.hidden * bf16,
        "lm_head": 0.0 if spec.tied_embeddings else spec.lm_head_params * bytes_per_param(spec.weight_format("lm_head")),
        "norms": (norms_per_layer * spec.n_layers + 1) * spec.hidden * bf16,
        "routers": spec.n_moe * spec.hidden * spec.n_experts * bf16,
        "conv": spec.n_linear * conv_ch * spec.conv_kernel * bf16,
    }
    if spec.n_mtp:
        # MTP block: eh projection (2h -> h), one attention layer, its FFN; norms enorm, hnorm, input, post, final.
        block = _quantized_block(spec, True, False, spec.mtp_moe, not spec.mtp_moe)
        p, m, r = block["dense"]
        block["dense"] = (p + 2 * spec.hidden * spec.hidden, m + 1, r + spec.hidden)
        router = spec.hidden * spec.n_experts if spec.mtp_moe else 0
        out["mtp"] = spec.n_mtp * _stored(block, spec, "mtp_")
        out["mtp_bf16"] = spec.n_mtp * (router + 5 * spec.hidden) * bf16
    else:
        out["mtp"] = out["mtp_bf16"] = 0.0
    return out


def _conv_channels(spec) -> int:
    if spec.linear_kind == "gdn":
        return (2 * spec.lin_k_heads + spec.lin_v_heads) * spec.lin_head_dim
    if spec.linear_kind == "mamba2":
        return spec.lin_v_heads * spec.lin_head_dim + 2 * spec.ssm_groups * spec.ssm_state
    return 0


def model_weight_bytes(spec, with_mtp: bool) -> float:
    """All weight bytes one copy of the checkpoint holds (`spec` may be a tensor-parallel slice: its counts are
    the slice's), with the MTP block when `with_mtp`."""
    parts = weight_parts(spec)
    skip = () if with_mtp else ("mtp", "mtp_bf16")
    return float(sum(v for k, v in parts.items() if k not in skip))
