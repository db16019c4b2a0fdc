"""Tensor parallelism (analytical until measured): what one of `tp` GPUs holds and moves.

Attention heads and KV heads are split across GPUs (KV heads replicated when there are fewer of
them than GPUs: 2 KV heads at TP 4 -> 1 per GPU, each held twice); linear-attention heads, every
expert's FFN (tensor-parallel MoE), the shared expert, dense FFNs and the vocabulary (lm_head) are
split; the router is replicated. Each target layer ends its mixer and its FFN with an all-reduce
of the layer's [tokens, hidden] activations, and the vocabulary-split logits are gathered; the MTP
layer does the same per draft pass. An all-reduce of m bytes costs
    alpha + 2 (tp - 1) / tp * m / link_bw            (ring; alpha and link_bw from the hardware row)
until a measured profile carries its own fit (`allreduce_tp<N>`).
"""

from __future__ import annotations

from dataclasses import replace

from wmtp.errors import WmtpError
from wmtp.work import Work
from wmtp.specs import ModelSpec


def kv_heads_per_gpu(spec: ModelSpec, tp: int) -> int:
    if spec.kv_heads % tp == 0:
        return spec.kv_heads // tp
    if tp % spec.kv_heads == 0:
        return 1  # replicated
    raise WmtpError(f"{spec.key}: {spec.kv_heads} KV heads cannot be split over tp={tp} GPUs")


def per_gpu_spec(spec: ModelSpec, tp: int) -> ModelSpec:
    """The slice of `spec` one of `tp` GPUs holds (same layer counts, fewer heads and columns)."""
    if tp < 1:
        raise WmtpError(f"tp must be >= 1, got {tp}")
    if tp == 1:
        return spec
    if spec.attn_kind != "gqa":
        raise WmtpError(f"{spec.key}: tensor parallelism is modelled for GQA attention only")
    if spec.q_heads % tp:
        raise WmtpError(f"{spec.key}: {spec.q_heads} query heads cannot be split over tp={tp} GPUs")
    kv = kv_heads_per_gpu(spec, tp)
    lin_ok = not spec.linear_kind or (spec.lin_v_heads % tp == 0 and (spec.lin_k_heads % tp == 0 or not spec.lin_k_heads))
    if not lin_ok:
        raise WmtpError(f"{spec.key}: linear-attention heads cannot be split over tp={tp} GPUs")
    return replace(
        spec, key=spec.key, q_heads=spec.q_heads // tp, kv_heads=kv,
        lin_k_heads=spec.lin_k_heads // tp if spec.lin_k_heads else 0,
        lin_v_heads=spec.lin_v_heads // tp if spec.lin_v_heads else 0,
        ssm_groups=max(1, spec.ssm_groups // tp) if spec.ssm_groups else 0,
        expert_ffn=-(-spec.expert_ffn // tp) if spec.expert_ffn else 0,
        shared_ffn=-(-spec.shared_ffn // tp) if spec.shared_ffn else 0,
        dense_ffn=-(-spec.dense_ffn // tp) if spec.dense_ffn else 0,
        vocab=-(-spec.vocab // tp),
    )


# Weight quantization blocks along the dimension tensor parallelism splits (FP8: 128 x 128 block scales; NVFP4: 16
# values per fp8 scale). 4-bit: the checkpoint's scale group along K (`ModelSpec.int4_group`, 128 by default; 0, one
# scale per output row, constrains no split of K).
QUANT_BLOCK = {"fp8": 128, "nvfp4": 16}


def quant_split_warning(spec: ModelSpec, tp: int) -> str | None:
    """A warning when `tp` GPUs would cut a weight-quantization block of an FFN's split dimension (None if not)."""
    block = spec.int4_group if spec.weight_dtype == "int4" else QUANT_BLOCK.get(spec.weight_dtype)
    if tp == 1 or not block:
        return None
    widths = {"routed expert": spec.expert_ffn, "shared expert": spec.shared_ffn, "dense FFN": spec.dense_ffn}
    bad = [f"{name} {w} / {tp} = {w / tp:g}" for name, w in widths.items() if w and (w % tp or (w // tp) % block)]
    if not bad:
        return None
    return (f"tp={tp} cuts {spec.weight_dtype} quantization blocks of {block} ({', '.join(bad)} columns per GPU): "
            "serving engines refuse such a split at load (every GPU must hold whole blocks); priced as if it ran")


def allreduce_work(spec: ModelSpec, tp: int, tokens: int, count: int, name: str) -> Work:
    """`count` all-reduces of [tokens, hidden] bf16 activations across `tp` GPUs."""
    return Work("allreduce", name, 2.0 * tokens * spec.hidden, 0.0, 1, count, {"tokens": tokens, "tp": tp})


def tp_collectives(spec: ModelSpec, tp: int, phase: str, tokens: int) -> list[Work]:
    """The collectives one phase adds at tensor-parallel degree `tp` (none at tp = 1)."""
    if tp == 1:
        return []
    # The vocabulary-split logits: modelled (and measured) as one all-reduce of each GPU's slice.
    logits = Work("allreduce", f"{phase}.logits_gather", 2.0 * tokens * -(-spec.vocab // tp), 0.0, 1, 1,
                  {"tokens": tokens, "tp": tp})
    if phase == "verify":
        # Nemotron-H blocks hold one mixer or one FFN each; Qwen/DeepSeek layers hold both.
        per_layer = 1 if spec.family == "nemotron_h" else 2
        return [allreduce_work(spec, tp, tokens, per_layer * spec.n_layers, f"{phase}.allreduce"), logits]
    items = [allreduce_work(spec, tp, tokens, 3 * spec.n_mtp, f"{phase}.allreduce")]  # eh-proj, mixer, FFN
    return items + ([logits] if phase == "fwd" else [])
