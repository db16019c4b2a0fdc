"""SGLang's own fused-MoE Triton kernel (unquantized, Hopper), for the sweep's `moe` rows with impl `sglang`.

What SGLang 0.5.12 runs per MoE layer at decode (bf16 weights, TP 1, no expert parallelism; read from
`sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe.py`, `_prepare_fused_moe_run` and
`_fused_moe_kernel_sequence`): the block config from `try_get_optimal_moe_config`; `moe_align_block_size`
(sgl_kernel, CUDA); `invoke_fused_moe_kernel` on w13 [E, 2F or F, K]; the activation (`silu_and_mul`, a
sglang.jit_kernel CUDA kernel, for SwiGLU; `torch.square(F.relu(...))` for a non-gated relu^2); `invoke_fused_moe_kernel`
on w2 [E, K, F] with the routing weights, top_k 1, into [T, top_k, K]; the sum over top_k (a torch.compile'd
sum for T <= 32, sgl_kernel `moe_sum_reduce` above).

SGLang's code is not in this repository: the two Triton files (`fused_moe_triton_kernels.py`,
`fused_moe_triton_config.py`) and the `configs/` folder beside them are read from a copy of SGLang's package,
`$WMTP_SGLANG_DIR` or `.devcarry/sgl` (the folder that holds `sglang/`), with stand-ins for the heavy modules
they import. The fused_moe kernel and the config choice are SGLang's; three pieces are stand-ins because their
CUDA ops (sgl_kernel, sglang.jit_kernel) are not available: the alignment (`align_block_size`: one Triton program,
the same outputs as sgl_kernel's), `silu_and_mul` (one Triton program per row) and the final sum (`torch.sum`,
one kernel, as the compiled sum is).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

import torch
import triton
import triton.language as tl

from wmtp.errors import WmtpError
from wmtp.fileio import check_lookup

_PKG = "sglang.srt.layers.moe.moe_runner.triton_utils"
_REL = Path("sglang/srt/layers/moe/moe_runner/triton_utils")
_mods: dict = {}


def sglang_dir() -> Path:
    """The folder holding a copy of SGLang's `sglang/` package (only the files named above are read)."""
    env = os.environ.get("WMTP_SGLANG_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / ".devcarry" / "sgl"


def _stub(name: str, **attrs) -> types.ModuleType:
    mod = sys.modules.get(name)
    if mod is None:
        mod = types.ModuleType(name)
        mod.__path__ = []  # a package, so submodules resolve
        sys.modules[name] = mod
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


def _unavailable(name: str):
    def f(*a, **k):
        raise WmtpError(f"{name} (a quantized path) is not available in wmtp's SGLang stand-ins")
    return f


def _server_args():
    return types.SimpleNamespace(enable_deterministic_inference=False, enable_fused_moe_sum_all_reduce=False)


def _install_stubs() -> None:
    """Stand-ins for what SGLang's two Triton files import: the server args at their defaults, the platform
    probes for a CUDA GPU, no MoE padding (SGLANG_MOE_PADDING unset), no batch-invariant mode, no config override."""
    for name in ("sglang", "sglang.srt", "sglang.srt.layers", "sglang.srt.layers.moe", "sglang.srt.layers.moe.moe_runner",
                 "sglang.srt.layers.quantization"):
        _stub(name)
    _stub(_PKG, get_config=lambda: None).__path__ = [str(sglang_dir() / _REL)]
    _stub("sglang.srt.layers.moe.utils", get_moe_padding_size=lambda is_aiter: 0)
    _stub("sglang.srt.batch_invariant_ops", is_batch_invariant_mode_enabled=lambda: False)
    _stub("sglang.srt.server_args", get_global_server_args=_server_args)
    _stub("sglang.srt.layers.quantization.fp8_kernel", **{n: _unavailable(n) for n in (
        "per_token_group_quant_fp8", "scaled_fp8_quant", "sglang_per_token_group_quant_fp8")})
    _stub("sglang.srt.layers.quantization.int8_kernel", **{n: _unavailable(n) for n in (
        "per_token_group_quant_int8", "per_token_quant_int8", "sglang_per_token_group_quant_int8")})
    cuda = torch.cuda.is_available()
    _stub("sglang.srt.utils", cpu_has_amx_support=lambda: False, is_cpu=lambda: False, is_hip=lambda: False,
          is_cuda=lambda: cuda, get_bool_env_var=lambda n, d="false": os.environ.get(n, d).lower() in ("1", "true"),
          is_sm90_supported=lambda: cuda and torch.cuda.get_device_capability()[0] >= 9,
          get_device_name=lambda device_id=0: torch.cuda.get_device_name(device_id) if cuda else "cpu")


def load() -> tuple[types.ModuleType, types.ModuleType]:
    """SGLang's (kernels, config) modules; a WmtpError naming the folder when the copy is absent."""
    if _mods:
        return _mods["kernels"], _mods["config"]
    base = sglang_dir() / _REL
    files = {"kernels": base / "fused_moe_triton_kernels.py", "config": base / "fused_moe_triton_config.py"}
    for p in files.values():  # a WMTP_SGLANG_DIR too long to look up: one error, not an OSError from is_file()
        check_lookup(p, "SGLang's file")
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise WmtpError(f"the sglang MoE backend needs SGLang's Triton MoE files, not found: {', '.join(missing)} "
                        "(copy them from an SGLang 0.5.x package into that folder, or set WMTP_SGLANG_DIR)")
    _install_stubs()
    for key, stem in (("kernels", "fused_moe_triton_kernels"), ("config", "fused_moe_triton_config")):
        spec = importlib.util.spec_from_file_location(f"{_PKG}.{stem}", files[key])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        _mods[key] = mod
    return _mods["kernels"], _mods["config"]


def moe_config(w13_shape, w2_shape, top_k: int, tokens: int) -> tuple[dict, dict | None]:
    """SGLang's choice for this shape: (gate/up config, down config or None), as `_prepare_fused_moe_run` asks."""
    _, cfg = load()
    config, (down, _) = cfg.try_get_optimal_moe_config(tuple(w13_shape), tuple(w2_shape), top_k, None, tokens,
                                                       return_down_config=True)
    return dict(config), (dict(down) if down else None)


def padded_sizes(pairs: int, n_experts: int, block: int) -> tuple[int, int]:
    """(max padded rows, max row blocks) of SGLang's moe_align_block_size for `pairs` token-expert pairs."""
    rows = pairs * block if pairs < n_experts + 1 else pairs + (n_experts + 1) * (block - 1)
    return rows, triton.cdiv(rows, block)


@triton.jit
def _align_kernel(ids_ptr, sorted_ptr, expert_ids_ptr, post_pad_ptr, scratch_ptr, P, E, max_rows, max_blocks,
                  BS: tl.constexpr, BLOCK_P: tl.constexpr, BINS: tl.constexpr, FILL: tl.constexpr,
                  CHUNK_E: tl.constexpr, BLOCK_B: tl.constexpr):
    p = tl.arange(0, BLOCK_P)
    ids = tl.load(ids_ptr + p, mask=p < P, other=E).to(tl.int32)  # padding lanes: expert E, sorted last
    e = tl.arange(0, BINS)
    counts = tl.where(e < E, tl.histogram(ids, BINS), 0)
    padded = (counts + BS - 1) // BS * BS
    end = tl.cumsum(padded, 0)
    tl.store(scratch_ptr + e, end - padded)  # padded start of each expert's rows
    tl.store(scratch_ptr + BINS + e, tl.cumsum(counts, 0) - counts)  # its first position among sorted pairs
    tl.store(scratch_ptr + 2 * BINS + e, end)
    tl.store(post_pad_ptr, tl.sum(padded, 0))
    for s in range(0, max_rows, FILL):
        o = s + tl.arange(0, FILL)
        tl.store(sorted_ptr + o, tl.zeros([FILL], tl.int32) + P, mask=o < max_rows)
    tl.debug_barrier()
    keys = tl.sort(ids * BLOCK_P + p)  # by expert, then by pair: a stable order
    es = keys // BLOCK_P
    valid = es < E
    first = tl.load(scratch_ptr + BINS + es, mask=valid, other=0)
    start = tl.load(scratch_ptr + es, mask=valid, other=0)
    tl.store(sorted_ptr + start + (p - first), keys % BLOCK_P, mask=valid)
    for b0 in range(0, max_blocks, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        owner = tl.zeros([BLOCK_B], tl.int32)
        for e0 in range(0, E, CHUNK_E):
            ee = e0 + tl.arange(0, CHUNK_E)
            ends = tl.load(scratch_ptr + 2 * BINS + ee, mask=ee < E, other=2**30)
            owner += tl.sum((ends[None, :] <= (b * BS)[:, None]).to(tl.int32), 1)
        tl.store(expert_ids_ptr + b, tl.minimum(owner, E - 1), mask=b < max_blocks)


def align_block_size(topk_ids: torch.Tensor, block: int, n_experts: int):
    """Stand-in for sgl_kernel's moe_align_block_size, one Triton program, no host sync: (sorted pair ids padded
    per expert to a multiple of `block` with the sentinel T*k, each row block's expert, the padded row count)."""
    flat = topk_ids.reshape(-1)
    pairs = flat.numel()
    if pairs > 4096:
        raise WmtpError(f"the alignment stand-in handles decode sizes (<= 4096 token-expert pairs), not {pairs}")
    rows, blocks = padded_sizes(pairs, n_experts, block)
    dev = flat.device
    sorted_ids = torch.empty(rows, dtype=torch.int32, device=dev)
    expert_ids = torch.empty(blocks, dtype=torch.int32, device=dev)
    post_pad = torch.empty(1, dtype=torch.int32, device=dev)
    bins = triton.next_power_of_2(n_experts + 1)
    scratch = torch.empty(3 * bins, dtype=torch.int32, device=dev)
    _align_kernel[(1,)](flat, sorted_ids, expert_ids, post_pad, scratch, pairs, n_experts, rows, blocks,
                        BS=block, BLOCK_P=max(16, triton.next_power_of_2(pairs)), BINS=bins, FILL=1024,
                        CHUNK_E=64, BLOCK_B=128, num_warps=8)
    return sorted_ids, expert_ids, post_pad


@triton.jit
def _silu_mul_kernel(x_ptr, out_ptr, F, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, F, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        ok = cols < F
        g = tl.load(x_ptr + row * 2 * F + cols, mask=ok, other=0.0).to(tl.float32)
        u = tl.load(x_ptr + row * 2 * F + F + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * F + cols, (g / (1.0 + tl.exp(-g)) * u).to(out_ptr.dtype.element_ty), mask=ok)


def silu_and_mul(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Stand-in for sglang.jit_kernel's silu_and_mul: out = silu(x[:, :F]) * x[:, F:], one program per row."""
    f = x.shape[1] // 2
    _silu_mul_kernel[(x.shape[0],)](x, out, f, BLOCK=min(1024, triton.next_power_of_2(f)), num_warps=4)
    return out


def fused_experts(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, topk_ids: torch.Tensor,
                  topk_weights: torch.Tensor, act: str = "swiglu") -> torch.Tensor:
    """SGLang's unquantized fused-MoE sequence (module docstring) -> [T, K]. w13 [E, 2F (SwiGLU) or F, K],
    w2 [E, K, F], topk_ids int [T, k], topk_weights fp32 [T, k] (the argument order of wmtp's `moe_experts`)."""
    if topk_ids.is_floating_point() or not topk_weights.is_floating_point():
        raise WmtpError("topk_ids must be integers and topk_weights floats (ids come before weights)")
    if act not in ("swiglu", "relu2"):
        raise WmtpError(f"unknown activation {act!r}")
    kernels, _ = load()
    t_len, k_in = x.shape
    n_exp, n_up, k_w = w13.shape
    ffn = n_up // 2 if act == "swiglu" else n_up
    if k_w != k_in or tuple(w2.shape[::2]) != (n_exp, ffn) or topk_ids.shape != topk_weights.shape:
        raise WmtpError("shapes do not match: x [T, K], w13 [E, 2F or F, K], w2 [E, K_out, F], topk [T, k]")
    top_k = topk_ids.shape[1]
    config, down = moe_config(w13.shape, w2.shape, top_k, t_len)
    sorted_ids, expert_ids, post_pad = align_block_size(topk_ids, config["BLOCK_SIZE_M"], n_exp)
    common = dict(compute_type=tl.bfloat16 if x.dtype == torch.bfloat16 else tl.float16, use_fp8_w8a8=False,
                  use_int8_w8a8=False, use_int8_w8a16=False, use_int4_w4a16=False, per_channel_quant=False,
                  filter_expert=False)  # TP 1, no expert parallelism: num_experts == num_local_experts
    cache1 = torch.empty((t_len * top_k, n_up), device=x.device, dtype=x.dtype)
    kernels.invoke_fused_moe_kernel(x, w13, None, cache1, None, None, None, topk_weights, topk_ids, sorted_ids,
                                    expert_ids, post_pad, False, top_k, config, **common)
    if act == "swiglu":
        cache2 = silu_and_mul(cache1, torch.empty((t_len * top_k, ffn), device=x.device, dtype=x.dtype))
    else:
        cache2 = torch.square(torch.nn.functional.relu(cache1))
    cache3 = torch.empty((t_len, top_k, w2.shape[1]), device=x.device, dtype=x.dtype)
    kernels.invoke_fused_moe_kernel(cache2, w2, None, cache3, None, None, None, topk_weights, topk_ids, sorted_ids,
                                    expert_ids, post_pad, True, 1, down or config, router_topk=top_k, **common)
    return cache3.sum(dim=1)
