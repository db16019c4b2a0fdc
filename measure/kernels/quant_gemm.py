"""Quantized-weight GEMMs for decode batches (M = 1..256 rows): FP8 W8A8 block-scaled and int4 W4A16, dense and MoE.

Formats (what the launchers accept; `quantize_*` in `quant_formats` produce them):
- FP8 block (Qwen / DeepSeek FP8 releases): weight float8_e4m3fn [N, K] (MoE: [E, N, K]) with float32 scales
  [ceil(N/128), ceil(K/128)] per 128x128 block, w = q * s. Activations are quantized per token and per group of 128
  along K (SGLang / vLLM `per_token_group_quant_fp8`): s = max(|x_group|, 1e-10) / 448, q = fp8(clamp(x / s, -448,
  448)), inside the GEMM (or by `quantize_act_fp8`, then passed with `x_scale`); y = sum_kb (q_x . q_w)_kb *
  s_x[m, kb] * s_w[n // 128, kb], accumulated in fp32.
- int4 group (W4A16): weight uint8 [N, K/2], two 4-bit codes per byte along K (element 2j in the low nibble, 2j+1 in
  the high nibble), symmetric with zero point 8: w = (code - 8) * s, one scale per output row and group of 128 along
  K, scales [N, ceil(K/128)] (bf16 by default; fp16 / fp32 accepted). Activations bf16 / fp16; the codes enter the
  tensor cores exactly (as 2^k + code), the group scale multiplies each group's partial sum (`quant_mma_i4`: the
  same math from repacked weights).

Decode is bandwidth-bound. One program owns a BLOCK_M x BLOCK_N output tile (BLOCK_M 16..128 by M, BLOCK_N by N)
and a share of K, walked in steps of `block_k` (1, 2 or 4 groups of 128, `BLOCK_K_AUTO` by default; int4 optionally
one step ahead); the launchers split K (`split_k`, automatic by default) until the tiles give about `_CTAS_PER_SM`
programs per SM, and the kernel reduces the splits itself (a per-tile semaphore; the last split sums, in split
order). One launch per call: FP8 activations are quantized in the kernel, grouped GEMMs route in it
(`quant_kernels`); each routed expert's weights are read once per call. The semaphores live in a per-device buffer
every launch leaves re-armed (no concurrent calls on two streams). Under TRITON_INTERPRET=1 (CPU tests) operands are
upcast to fp32 before `tl.dot`, fp8 stores pre-rounded to the e4m3 grid (the interpreter's cast mis-rounds).
"""

from __future__ import annotations

import torch
import triton

from wmtp.measure.kernels.quant_formats import (FP8_EPS, FP8_MAX, GROUP, check_2d,  # noqa: F401  (re-exported)
                                                check_fp8_weight, check_int4_weight, check_routing, same_device,
                                                dequantize_fp8_block, dequantize_int4_group, interpreting,
                                                quantize_act_fp8, quantize_fp8_block, quantize_int4_group,
                                                splits_wanted, weight_bytes)
from wmtp.measure.kernels.moe import route_pairs
from wmtp.measure.kernels.quant_gemv import MAGIC_F32, quant_gemv_kernel
from wmtp.measure.kernels.quant_gemv_int4 import int4_mode, launch_quad
from wmtp.measure.kernels.quant_mma_i4 import mma_auto, mma_call, moe_mma_call
from wmtp.measure.kernels.quant_kernels import quant_gemm_kernel
from wmtp.measure.kernels.quant_moe import moe_pair_call
from wmtp.measure.kernels.quant_pdl import pdl_launch
from wmtp.measure.kernels.quant_swap import launch_swap
from wmtp.measure.kernels.quant_swap_i4 import launch_int4_swap

_FP8, _ACT_DTYPES = torch.float8_e4m3fn, (torch.bfloat16, torch.float16)
_MAGIC = {torch.bfloat16: (0x4300, 136.0), torch.float16: (0x6400, 1032.0)}  # 2^k with ulp 1, and 2^k + 8
_CTAS_PER_SM = 4
_CHUNK_P = 256  # routed ids read per step by the in-kernel router (>= the threads of 8 warps)
_ROUTE_IN_KERNEL_MAX = 256  # pairs up to which grouped GEMMs route in the kernel; above, `moe.route_pairs`
# path='auto' takes the GEMV kernel (`quant_gemv`) up to these rows (dense) and mean rows per routed expert (grouped;
# 0: never), from measure/results/h200-quant-v3 (fp8) and h200-quant-v5 (int4, round 4's packed step: faster than
# the tensor-core kernel on 15 / 15 / 15 / 13 / 3 of 15 dense shapes at M = 1 / 2 / 4 / 8 / 16)
GEMV_MAX_M = {"fp8_block": 1, "int4_group": 8}
# fp8 GEMV: activation division (`quant_formats.fp8_group_quant`) 'nodiv' (h200-quant-v9: 1.20-1.37x faster above 18 MB)
# or 'rn' (IEEE: the same codes); GEMV_FP8_WIDE: 64-wide tiles, not 16, where 32 leave SMs idle (h200-quant-v10)
GEMV_ACT_DIV, GEMV_FP8_WIDE = "nodiv", True
GEMV_MAX_MOE_ROWS = {"fp8_block": 0, "int4_group": 1}
# programs per SM the GEMV plan aims for (split-K) with dense int4 up to 2 rows (None: `_CTAS_PER_SM`): 2, from
# measure/results/h200-quant-v6 ([pk-c2]: geomean 1.08x / 1.06x faster at M = 1 / 2, at most 6 % slower on a shape)
INT4_GEMV_CTAS = 2
# int4 GEMV: 'packed' / 'f32' / 'words' (round 2) steps (`quant_gemv_int4.int4_mode`), or `int4_quad_kernel`: 'quad',
# 'quad_xs' (activations via shared memory); INT4_QUAD_G: its 128-groups per step (None: `quad_plan`'s)
INT4_GEMV_STEP, INT4_QUAD_G = "packed", None
# dense int4, path='auto', from h200-quant-v7: rows [lo, hi] take the swap-AB kernel (`quant_swap_i4`); one row with at
# most INT4_QUAD_AUTO_BYTES of codes the quad-word GEMV with 4-wide tiles (1.03-1.35x on 8 of 9 such shapes)
INT4_SWAP_AUTO_M, INT4_QUAD_AUTO_BYTES = (2, 16), 16 << 20
_GEMV_ROWS_MAX, _PATHS = 16, ("auto", "gemv", "dot", "swap")  # the most rows path='gemv' takes (one program)
# dense fp8 rows [lo, hi] that path='auto' gives the swap-AB kernel (`quant_swap`), from measure/results/h200-quant-v6:
# faster than the tensor-core kernel on 14 / 14 / 12 / 12 of 15 dense shapes at M = 2 / 4 / 8 / 16 (one BLOCK_M = 16
# tile for every M <= 16), slower on 13 of 15 at M = 64 and than the GEMV kernel on 13 of 15 at M = 1. SWAP_ACT: where
# it quantizes bf16 / fp16 / fp32 activations ('pre': `quantize_act_fp8` first, a second launch; 'loop' (3 stages: within
# 2 % of 'pre' at M = 1..8, 6 % faster at 16) / 'prologue' (slower): in the kernel); SWAP_STAGES: pipeline stages
# (with 'pre', 4 fastest of 2 / 3 / 4); split-K for at most SWAP_CTAS programs an SM (SWAP_FIT: `swap_plan(fit=True)`;
# 2 of the 128-wide build reside, 4 of the 64-wide; h200-quant-v13 run3: 0.91-0.97x geomean at 2-16 rows, both widths)
SWAP_AUTO_M, SWAP_ACT, SWAP_STAGES, SWAP_CTAS, SWAP_FIT = (2, 16), "pre", 4, 2, True
# (block_k, prefetch) of the tensor-core kernel unless named (`_dot_config`): 128, no prefetch (h200-quant-v4's best)
BLOCK_K_AUTO = {"fp8_block": (128, False), "int4_group": (128, False)}


def _fp8_dot_ok(device: torch.device) -> bool:
    """fp8 operands in tl.dot need sm_89+ (Ada / Hopper); elsewhere upcast to fp32 (exact for e4m3 in tf32)."""
    if interpreting() or device.type != "cuda":
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


_SM_COUNT: dict = {}
_COUNTERS: dict = {}


def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 4
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


def _counters(device: torch.device, n: int) -> torch.Tensor:
    """The split-K semaphores: zeroed once, re-armed by every launch that uses them."""
    key = str(device)
    buf = _COUNTERS.get(key)
    if buf is None or buf.numel() < n:
        buf = torch.zeros(max(n, 4096), dtype=torch.int32, device=device)
        _COUNTERS[key] = buf
    return buf


def _check_block(block_m: int | None, block_n: int | None) -> None:
    for name, b in (("block_m", block_m), ("block_n", block_n)):
        if b is not None and (b < 16 or b & (b - 1)):
            raise ValueError(f"{name} must be a power of two >= 16, got {b}")


def _default_block_m(rows: int) -> int:
    return 16 if rows <= 16 else 32 if rows <= 32 else 64 if rows <= 64 else 128


def _default_block_n(n: int, m_tiles: int, device, fmt: str) -> int:
    """int4: 64, or 32 where 64-wide tiles would leave SMs without a program (narrow N, few rows). fp8: the
    widest of 128 / 64 / 32 that still gives half an SM's worth of tiles (split-K fills the rest); 128 timed
    best on the H200 for the wide projections (measure/results/h200-quant-v2, --tune rows)."""
    sm = _sm_count(device)
    if fmt == "int4_group":
        return 64 if m_tiles * triton.cdiv(n, 64) >= 2 * sm else 32
    return next((bn for bn in (128, 64) if 2 * m_tiles * triton.cdiv(n, bn) >= sm), 32)


def _split_plan(m_tiles, n_tiles, k_blocks, rows, n, w_bytes, device, split_k, g_step=1):
    """(split, 128-groups per split). Auto: split K until about `_CTAS_PER_SM` programs per SM stream weights,
    while the fp32 partials (written and read once, 4 B each) stay under a quarter of the weight bytes; each split
    a whole number of `g_step`-group steps. An explicit split_k counts 128-groups (a split may end mid-step)."""
    if split_k is None:
        want = splits_wanted(_CTAS_PER_SM, _sm_count(device), m_tiles * n_tiles)
        cap = max(1, w_bytes // (4 * 8 * max(rows * n, 1)))
        per = triton.cdiv(triton.cdiv(k_blocks, max(1, min(want, k_blocks, cap))), g_step) * g_step
        return triton.cdiv(k_blocks, per), per
    if not 1 <= split_k <= max(k_blocks, 1):
        raise ValueError(f"split_k must be in [1, {k_blocks}] (K blocks of {GROUP}), got {split_k}")
    per = triton.cdiv(k_blocks, split_k)
    return triton.cdiv(k_blocks, per), per  # no empty splits


def _dot_config(fmt, block_m, block_n, block_k, prefetch, num_stages):
    """(block_k, prefetch, num_stages) of the tensor-core kernel: block_k 128 / 256 / 512 (None: `BLOCK_K_AUTO`);
    prefetch (int4 only; None: with the auto block_k); fp8 stages reduced until the staged operands fit in 216 KiB
    of shared memory (Triton stages num_stages - 1 buffers for mma.sync tiles, num_stages for wgmma, BLOCK_M >= 64)."""
    auto_k, auto_pf = BLOCK_K_AUTO[fmt]
    block_k = block_k or auto_k
    if block_k not in (GROUP, 2 * GROUP, 4 * GROUP):
        raise ValueError(f"block_k must be 128, 256 or 512, got {block_k}")
    prefetch = (auto_pf if prefetch is None else prefetch) and fmt == "int4_group"
    if fmt == "fp8_block":
        while num_stages > 2 and (num_stages - (block_m < 64)) * block_k * (block_n + block_m) > 216 << 10:
            num_stages -= 1
    return block_k, bool(prefetch), num_stages


def _output(out, shape, dtype, device):
    """The caller's `out` (checked) or a new tensor."""
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    if tuple(out.shape) != shape or out.dtype != dtype or out.device != device or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {dtype} {shape} tensor on {device}, got "
                         f"{tuple(out.shape)} {out.dtype} on {out.device}")
    return out


def _launch(x, x_scale, w, w_scale, out, ids, route_w, rows, m_tiles, block_m, block_n, split_k, w_bytes,
            int4, grouped, a_is_pairs, top_k, num_warps, num_stages, quant_a=False, block_k=None, prefetch=None):
    """Plan split-K and launch `quant_gemm_kernel` once; returns `out`."""
    n, k = out.shape[1], x.shape[1]
    n_tiles = triton.cdiv(n, block_n)
    block_k, prefetch, num_stages = _dot_config("int4_group" if int4 else "fp8_block", block_m, block_n, block_k,
                                                prefetch, num_stages)
    split, g_per_split = _split_plan(m_tiles, n_tiles, triton.cdiv(k, GROUP), rows, n, w_bytes, x.device, split_k,
                                     block_k // GROUP)
    part = torch.empty((split, rows, n), dtype=torch.float32, device=x.device) if split > 1 else out
    count = _counters(x.device, m_tiles * n_tiles) if split > 1 else out
    n_exp = w.shape[0] if grouped else 1
    magic, bias = _MAGIC.get(x.dtype, (0, 0.0))
    sort = grouped and rows > _ROUTE_IN_KERNEL_MAX
    routing = route_pairs(ids, n_exp, block_m) if sort else (out,) * 4  # sorted pairs, counts, starts, cum blocks
    if num_warps is None:
        num_warps = 8 if block_m * block_n >= 64 * 128 else 4
    quant_gemm_kernel[(m_tiles, n_tiles, split)](
        x, x_scale if x_scale is not None else x, w, w_scale, out, part, count,
        route_w if route_w is not None else out, ids if ids is not None else out, *routing,
        rows, n, k, n_exp, top_k, g_per_split, split,
        x.stride(0), x_scale.stride(0) if x_scale is not None else 0, w.stride(0) if grouped else 0,
        w.stride(-2), w_scale.stride(0) if grouped else 0, w_scale.stride(-2),
        part.stride(0) if split > 1 else 0, out.stride(0),
        INT4=int4, QUANT_A=quant_a, GROUPED=grouped, A_IS_PAIRS=a_is_pairs,
        SCALE=route_w is not None, SPLIT=split > 1, SORTED=sort, LOG_E=max(1, int(n_exp).bit_length()),
        E_BINS=triton.next_power_of_2(n_exp + 1), CHUNK_P=_CHUNK_P,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, PREFETCH=prefetch,
        UPCAST=(not _fp8_dot_ok(x.device)) if not int4 else interpreting(), ROUND_FP32=interpreting(),
        MAGIC=magic, BIAS=bias, FP8_MAX_C=FP8_MAX, EPS=FP8_EPS, num_warps=num_warps, num_stages=num_stages,
    )
    return out


def _use_gemv(path, fmt, rows, k, limits=GEMV_MAX_M):
    """Whether the call takes the GEMV kernel: 'gemv', or 'auto' with rows <= GEMV_MAX_M; int4 needs K % 8 == 0
    (whole int32 words of codes per row)."""
    if path not in _PATHS or (path == "swap" and fmt != "fp8_block"):
        raise ValueError(f"path must be one of {', '.join(_PATHS[:3 + (fmt == 'fp8_block')])}, got {path!r}")
    if path == "gemv":
        if fmt == "int4_group" and k % 8:
            raise ValueError(f"the int4 GEMV path reads 8 codes per int32 word: K must be a multiple of 8, got {k}")
        if rows > _GEMV_ROWS_MAX:
            raise ValueError(f"the GEMV path takes at most {_GEMV_ROWS_MAX} rows per tile, got {rows}")
        return True
    return path == "auto" and rows <= limits[fmt] and (fmt == "fp8_block" or k % 8 == 0)


def _moe_gemv(path, fmt, w, topk_ids, k):
    """`_use_gemv` for a grouped GEMM: rows = mean pairs per routed expert."""
    pairs = topk_ids.numel()
    return _use_gemv(path, fmt, triton.cdiv(pairs, max(1, min(w.shape[0], pairs))), k, GEMV_MAX_MOE_ROWS)


def _gemv_plan(rows, live_tiles, n, k, w_bytes, device, split_k, block_n, fmt, ctas=None):
    """(block_n, G = 128-groups per step, split, groups per split) of the GEMV kernel: 32-wide tiles (16 where they
    leave SMs idle; fp8 with GEMV_FP8_WIDE: 64 there, with more split-K), steps of 512 K
    (int4 <= 2 rows: 1024; round 4's step 1024 / rows, >= 128), split-K as `_split_plan` with each split a whole
    number of steps when automatic."""
    groups, g_step = triton.cdiv(k, GROUP), 8 if fmt == "int4_group" and rows <= 2 else 4
    if fmt == "int4_group" and INT4_GEMV_STEP != "words":  # round 4's step: 8 / 4 / 2 / 1 for 1 / 2 / 4 / 8+ rows
        g_step = max(1, 8 // triton.next_power_of_2(rows))
    sm = _sm_count(device)
    if block_n is None:
        fill = live_tiles * triton.cdiv(n, 32) >= sm
        block_n = 32 if fill else 64 if fmt == "fp8_block" and GEMV_FP8_WIDE else 16
    if fmt == "fp8_block" and block_n > GROUP:
        raise ValueError(f"the fp8 GEMV path needs block_n <= {GROUP} (one weight scale block per tile)")
    n_tiles = triton.cdiv(n, block_n)
    if split_k is None:
        want = splits_wanted(ctas or _CTAS_PER_SM, sm, live_tiles * n_tiles)
        cap = max(1, w_bytes // (4 * 8 * max(rows * n, 1)))
        per = triton.cdiv(triton.cdiv(groups, max(1, min(want, groups, cap))), g_step) * g_step
    elif not 1 <= split_k <= max(groups, 1):
        raise ValueError(f"split_k must be in [1, {groups}] (K blocks of {GROUP}), got {split_k}")
    else:
        per = triton.cdiv(groups, split_k)
    return block_n, min(g_step, triton.next_power_of_2(per)), triton.cdiv(groups, per), per


def _launch_gemv(x, x_scale, w, w_scale, out, ids, route_w, rows, tile_rows, live_tiles, m_tiles, block_n,
                 split_k, w_bytes, fmt, grouped, a_is_pairs, top_k, num_warps, num_stages):
    """Plan and launch `quant_gemv_kernel` once (x bf16 / fp16, or fp8 with x_scale); returns `out`."""
    n, k = out.shape[1], x.shape[1]
    int4 = fmt == "int4_group"
    ctas = INT4_GEMV_CTAS if int4 and not grouped and tile_rows <= 2 else None
    block_n, g_step, split, per = _gemv_plan(tile_rows, live_tiles, n, k, w_bytes, x.device, split_k, block_n, fmt,
                                             ctas)
    n_tiles = triton.cdiv(n, block_n)
    part = torch.empty((split, rows, n), dtype=torch.float32, device=x.device) if split > 1 else out
    count = _counters(x.device, m_tiles * n_tiles) if split > 1 else out
    wv = w.view(torch.int32) if int4 else w  # [.., N, K/8] words of 8 codes
    n_exp = w.shape[0] if grouped else 1
    block_m = triton.next_power_of_2(tile_rows)
    sort = grouped and rows > _ROUTE_IN_KERNEL_MAX
    routing = route_pairs(ids, n_exp, block_m) if sort else (out,) * 4
    quant_gemv_kernel[(m_tiles, n_tiles, split)](
        x, x_scale if x_scale is not None else x, wv, w_scale, out, part, count,
        route_w if route_w is not None else out, ids if ids is not None else out, *routing,
        rows, n, k, k // 8, n_exp, top_k, per, split,
        x.stride(0), x_scale.stride(0) if x_scale is not None else 0, wv.stride(0) if grouped else 0,
        wv.stride(-2), w_scale.stride(0) if grouped else 0, w_scale.stride(-2),
        part.stride(0) if split > 1 else 0, out.stride(0),
        INT4=int4, A_FP8=x_scale is not None, GROUPED=grouped, A_IS_PAIRS=a_is_pairs,
        SCALE=route_w is not None, SPLIT=split > 1, SORTED=sort, LOG_E=max(1, int(n_exp).bit_length()),
        E_BINS=triton.next_power_of_2(n_exp + 1), CHUNK_P=_CHUNK_P, ROWS=tile_rows if not grouped else block_m,
        BLOCK_M=block_m, BLOCK_N=block_n, G=g_step, MAGIC=MAGIC_F32, ROUND_FP32=interpreting(),
        FP8_MAX_C=FP8_MAX, EPS=FP8_EPS, I4_MODE=int4_mode(INT4_GEMV_STEP, x.dtype, interpreting()),
        IEEE_DIV=GEMV_ACT_DIV == "rn", num_warps=num_warps or 4, num_stages=num_stages, **pdl_launch(x.device, not grouped),
    )
    return out


def _fp8_inputs(x, x_scale, fuse):
    """(activations, scales, quantize in the GEMM): fp8 + per-group scales as given; bf16/fp16/fp32 quantized by
    `quantize_act_fp8` first, or in the GEMM itself with `fuse` (one launch, but slower on an H200 so far)."""
    if x.dtype == _FP8:
        check_2d("x", x, (_FP8,))
        if x_scale is None or x_scale.dtype != torch.float32 or tuple(x_scale.shape) != (x.shape[0], triton.cdiv(x.shape[1], GROUP)):
            raise ValueError("fp8 x needs x_scale float32 [M, ceil(K/128)] (per-token-group scales)")
        return x, x_scale, False
    if x_scale is not None:
        raise ValueError("x_scale is only accepted with pre-quantized fp8 x")
    check_2d("x", x, _ACT_DTYPES + (torch.float32,))
    return (x, None, True) if fuse else (*quantize_act_fp8(x), False)


# launchers


def _dense(x, x_scale, w, w_scale, out, out_dtype, fmt, block_m, block_n, split_k, num_warps, num_stages,
           quant_a=False, gemv=False, bk=(None, None)):
    m, k = x.shape
    n = w.shape[0]
    if m == 0 or n == 0 or k == 0:
        raise ValueError(f"empty problem: M, N, K = {m}, {n}, {k}")
    if gemv:  # one program holds all M rows (block_m unused)
        _check_block(None, block_n)
        out = _output(out, (m, n), out_dtype, x.device)
        w_bytes = weight_bytes(fmt, n, k, scale_bytes=w_scale.element_size())
        return _launch_gemv(x, x_scale, w, w_scale, out, None, None, m, m, 1, 1, block_n, split_k, w_bytes, fmt,
                            False, False, 1, num_warps, num_stages)
    block_m = block_m or _default_block_m(m)
    _check_block(block_m, block_n)
    m_tiles = triton.cdiv(m, block_m)
    block_n = block_n or _default_block_n(n, m_tiles, x.device, fmt)
    out = _output(out, (m, n), out_dtype, x.device)
    w_bytes = weight_bytes(fmt, n, k, scale_bytes=w_scale.element_size())
    return _launch(x, x_scale, w, w_scale, out, None, None, m, m_tiles, block_m, block_n, split_k, w_bytes,
                   fmt == "int4_group", False, False, 1, num_warps, num_stages, quant_a, *bk)


def fp8_gemm(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, x_scale: torch.Tensor | None = None,
             out_dtype: torch.dtype = torch.bfloat16, split_k: int | None = None, block_m: int | None = None,
             block_n: int | None = None, num_warps: int | None = None, num_stages: int | None = None,
             out: torch.Tensor | None = None, fuse_act_quant: bool = False, path: str = "auto",
             block_k: int | None = None) -> torch.Tensor:
    """y [M, N] = x [M, K] @ dequant(w [N, K], w_scale)^T with x quantized per 1x128 group (W8A8). path: 'dot'
    (tensor cores; K step block_k = 128 / 256 / 512), 'gemv' (M <= 16; activations always quantized inside the
    kernel), 'swap' (`quant_swap`, M <= 64, weights in the MMA's M slot) or 'auto' (by M; 'dot' when block_m,
    block_n or block_k is given)."""
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [M, K], got {tuple(x.shape)}")
    if out_dtype not in _ACT_DTYPES + (torch.float32,):
        raise ValueError(f"out_dtype must be bf16, fp16 or fp32, got {out_dtype}")
    check_fp8_weight(w, w_scale, x.shape[1], grouped=False)
    same_device(x, w, w_scale)
    gemv = _use_gemv(path, "fp8_block", x.shape[0], x.shape[1])
    tiles_named = (block_m, block_n, block_k) != (None, None, None)  # a tensor-core launch configuration: 'dot'
    lo, hi = SWAP_AUTO_M
    if path == "swap" or (path == "auto" and not gemv and not tiles_named and lo <= x.shape[0] <= hi):
        x, x_scale, quant_a = _fp8_inputs(x, x_scale, fuse_act_quant or SWAP_ACT != "pre")
        out = _output(out, (x.shape[0], w.shape[0]), out_dtype, x.device)
        return launch_swap(x, x_scale, w, w_scale, out, (SWAP_ACT if SWAP_ACT != "pre" else "loop") if quant_a else
                           "pre", _sm_count(x.device), lambda n: _counters(x.device, n), block_n, split_k, num_warps,
                           num_stages or SWAP_STAGES, SWAP_CTAS, not _fp8_dot_ok(x.device), SWAP_FIT)
    x, x_scale, quant_a = _fp8_inputs(x, x_scale, fuse_act_quant or gemv)
    return _dense(x, x_scale, w, w_scale, out, out_dtype, "fp8_block", block_m, block_n, split_k, num_warps,
                  num_stages or 4, quant_a, gemv, (block_k, None))


def int4_gemm(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, split_k: int | None = None,
              block_m: int | None = None, block_n: int | None = None, num_warps: int = 4, num_stages: int = 4,
              out: torch.Tensor | None = None, path: str = "auto", block_k: int | None = None,
              prefetch: bool | None = None, w_mma: torch.Tensor | None = None) -> torch.Tensor:
    """y [M, N] = x [M, K] @ dequant(w [N, K/2] uint8, w_scale [N, K/128])^T, W4A16, output in x.dtype. path: 'dot'
    (tensor cores; K step block_k, prefetch: one step ahead), 'gemv' (M <= 16, K % 8 == 0; INT4_GEMV_STEP 'quad':
    `int4_quad_kernel`), 'swap' (`quant_swap_i4`, M <= 64), 'mma' (`quant_mma_i4`, w_mma = `pack_int4_mma(w)`) or 'auto'
    (by M: 'mma' where w_mma is given and `mma_auto`, else INT4_SWAP_AUTO_M, INT4_QUAD_AUTO_BYTES, GEMV_MAX_M)."""
    check_2d("x", x, _ACT_DTYPES)
    check_int4_weight(w, w_scale, x.shape[1], grouped=False)
    same_device(x, w, w_scale)
    (m, k), n, (lo, hi) = x.shape, w.shape[0], INT4_SWAP_AUTO_M
    plain = path == "auto" and (block_m, block_n, block_k) == (None, None, None)  # a named tile: the earlier paths
    if path == "mma" or (plain and w_mma is not None and mma_auto(x, n, k)):
        return mma_call(x, w_mma, w_scale, n, out, split_k, _sm_count(x.device), lambda t: _counters(x.device, t))
    swap, small = path == "swap" or (plain and lo <= m <= hi), plain and m == 1 and n * k // 2 <= INT4_QUAD_AUTO_BYTES
    quad = (small and k % 8 == 0) or (INT4_GEMV_STEP.startswith("quad") and _use_gemv(path, "int4_group", m, k))
    if 0 not in (m, n, k) and (swap or quad):
        out, sm = _output(out, (m, n), x.dtype, x.device), _sm_count(x.device)
        counters = lambda t: _counters(x.device, t)  # noqa: E731
        if swap:
            return launch_int4_swap(x, w, w_scale, out, sm, counters, block_n, split_k, num_warps, num_stages,
                                    _CTAS_PER_SM)
        ctas = INT4_GEMV_CTAS if INT4_GEMV_CTAS is not None and m <= 2 else _CTAS_PER_SM
        return launch_quad(x, w, w_scale, out, int4_mode("packed", x.dtype, interpreting()), sm, counters,
                           4 if small else block_n, split_k, num_warps, ctas, INT4_GEMV_STEP == "quad_xs",
                           INT4_QUAD_G)
    return _dense(x, None, w, w_scale, out, x.dtype, "int4_group", block_m, block_n, split_k, num_warps,
                  num_stages, gemv=_use_gemv(path, "int4_group", x.shape[0], x.shape[1]), bk=(block_k, prefetch))


def _grouped(x, x_scale, w, w_scale, topk_ids, topk_weights, a_is_pairs, out, out_dtype, fmt, block_m, block_n,
             split_k, num_warps, num_stages, quant_a=False, gemv=False, bk=(None, None)):
    t_len, top_k = check_routing(x, topk_ids, topk_weights, a_is_pairs)
    n_exp, n, k = w.shape[0], w.shape[1], x.shape[1]
    pairs = t_len * top_k
    out = _output(out, (pairs, n), out_dtype, x.device)
    if pairs == 0 or n == 0:
        return out
    routed = max(1, min(n_exp, pairs))  # experts read at most
    if gemv:  # rows of an expert per program: about the mean
        _check_block(None, block_n)
        rows = triton.next_power_of_2(triton.cdiv(pairs, routed))
        w_bytes = routed * weight_bytes(fmt, n, k, scale_bytes=w_scale.element_size())
        return _launch_gemv(x, x_scale, w, w_scale, out, topk_ids, topk_weights, pairs, rows,
                            triton.cdiv(pairs, rows), triton.cdiv(pairs, rows) + routed, block_n, split_k, w_bytes,
                            fmt, True, a_is_pairs, top_k, num_warps, num_stages)
    block_m = block_m or _default_block_m(triton.cdiv(pairs, routed))  # mean rows per routed expert
    _check_block(block_m, block_n)
    m_tiles = triton.cdiv(pairs, block_m) + routed  # >= the row blocks of any routing; the rest exit at once
    block_n = block_n or _default_block_n(n, routed, x.device, fmt)
    w_bytes = routed * weight_bytes(fmt, n, k, scale_bytes=w_scale.element_size())
    return _launch(x, x_scale, w, w_scale, out, topk_ids, topk_weights, pairs, m_tiles, block_m, block_n, split_k,
                   w_bytes, fmt == "int4_group", True, a_is_pairs, top_k, num_warps, num_stages, quant_a, *bk)


def fp8_moe_gemm(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, topk_ids: torch.Tensor,
                 topk_weights: torch.Tensor | None = None, a_is_pairs: bool = False,
                 out_dtype: torch.dtype = torch.bfloat16, split_k: int | None = None, block_m: int | None = None,
                 block_n: int | None = None, num_warps: int | None = None, num_stages: int = 4,
                 out: torch.Tensor | None = None, fuse_act_quant: bool = False, path: str = "auto",
                 block_k: int | None = None) -> torch.Tensor:
    """Grouped W8A8 (path as in `fp8_gemm` by the mean rows per routed expert, or 'pair': `quant_moe`): out [T*k,
    N], row p = t*k + j is x[t] (x[p] if a_is_pairs) @ dequant(w[topk_ids[t, j]])^T, times topk_weights[t, j] if
    given; w [E, N, K] fp8, w_scale [E, ceil(N/128), ceil(K/128)]; ids in [0, E), unchecked (a host sync)."""
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [T or T*k, K], got {tuple(x.shape)}")
    if out_dtype not in _ACT_DTYPES + (torch.float32,):
        raise ValueError(f"out_dtype must be bf16, fp16 or fp32, got {out_dtype}")
    check_fp8_weight(w, w_scale, x.shape[1], grouped=True)
    same_device(x, w, w_scale)
    if (y := moe_pair_call(path, "fp8_block", x, w, w_scale, topk_ids, topk_weights, a_is_pairs, out, out_dtype,
                           (block_m, block_n, block_k), split_k, num_warps, _counters, fuse_act_quant)) is not None:
        return y  # path 'pair', or 'auto' at the tokens `quant_moe.MOE_PAIR_AUTO` lists
    gemv = _moe_gemv(path, "fp8_block", w, topk_ids, x.shape[1])
    x, x_scale, quant_a = _fp8_inputs(x, None, fuse_act_quant or gemv)
    return _grouped(x, x_scale, w, w_scale, topk_ids, topk_weights, a_is_pairs, out, out_dtype, "fp8_block",
                    block_m, block_n, split_k, num_warps, num_stages, quant_a, gemv, (block_k, None))


def int4_moe_gemm(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, topk_ids: torch.Tensor,
                  topk_weights: torch.Tensor | None = None, a_is_pairs: bool = False, split_k: int | None = None,
                  block_m: int | None = None, block_n: int | None = None, num_warps: int = 4, num_stages: int = 4,
                  out: torch.Tensor | None = None, path: str = "auto", block_k: int | None = None,
                  prefetch: bool | None = None, w_mma: torch.Tensor | None = None) -> torch.Tensor:
    """Grouped W4A16, rows, path, block_k and prefetch as in `fp8_moe_gemm` / `int4_gemm` ('mma' and 'auto' given w_mma:
    `quant_mma_i4.moe_mma_call`): w [E, N, K/2] uint8, w_scale [E, N, ceil(K/128)]; out in x.dtype."""
    check_2d("x", x, _ACT_DTYPES)
    check_int4_weight(w, w_scale, x.shape[1], grouped=True)
    same_device(x, w, w_scale)
    if (y := moe_mma_call(path, (block_m, block_n, block_k), x, w_mma, w_scale, topk_ids, topk_weights, a_is_pairs,
                          out, split_k, _sm_count(x.device), lambda t: _counters(x.device, t))) is not None:
        return y
    if (y := moe_pair_call(path, "int4_group", x, w, w_scale, topk_ids, topk_weights, a_is_pairs, out, x.dtype,
                           (block_m, block_n, block_k), split_k, num_warps, _counters)) is not None:
        return y  # path 'pair', or 'auto' at the tokens `quant_moe.MOE_PAIR_AUTO` lists
    return _grouped(x, None, w, w_scale, topk_ids, topk_weights, a_is_pairs, out, x.dtype, "int4_group",
                    block_m, block_n, split_k, num_warps, num_stages,
                    gemv=_moe_gemv(path, "int4_group", w, topk_ids, x.shape[1]), bk=(block_k, prefetch))
