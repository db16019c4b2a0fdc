"""Quantized-weight GEMMs for decode-sized batches (M = 1..256 rows): FP8 W8A8 block-scaled and
int4 W4A16 group-scaled, dense and grouped-by-expert (MoE).

Formats (what the launchers accept; `quantize_*` below produce them):
- FP8 block (Qwen / DeepSeek FP8 releases): weight float8_e4m3fn [N, K] (MoE: [E, N, K]) with
  float32 scales [ceil(N/128), ceil(K/128)] per 128x128 block, w = q * s. Activations are quantized
  per token and per group of 128 along K (SGLang / vLLM `per_token_group_quant_fp8`):
  s = max(|x_group|, 1e-10) / 448, q = fp8(clamp(x / s, -448, 448)), by `quantize_act_fp8`.
  y = sum_kb (q_x . q_w)_kb * s_x[m, kb] * s_w[n // 128, kb], accumulated in fp32.
- int4 group (W4A16): weight uint8 [N, K/2], two 4-bit codes per byte along K (element 2j in the
  low nibble, 2j+1 in the high nibble), symmetric with zero point 8: w = (code - 8) * s, one scale
  per output row and group of 128 along K, scales [N, ceil(K/128)] (bf16 by default; fp16 / fp32
  accepted). Activations bf16 / fp16; the integer codes enter the dot exactly and the group scale
  multiplies the partial sum (BLOCK_K = group), so no rounding of dequantized weights.

Decode is bandwidth-bound: one program owns a BLOCK_M x BLOCK_N output tile, BLOCK_M small (16);
the launchers split K across programs (fp32 partials summed by a second small kernel) when the
M x N tiles alone cannot keep about four programs per SM streaming weights (`split_k` overrides). The grouped launchers sort
token-expert pairs by expert with `moe.route_pairs` and find a program's expert with
`moe.find_expert`, so each routed expert's weights are read once per call (min(E, T*k) experts).
Under TRITON_INTERPRET=1 (CPU tests) operands are upcast to fp32 before `tl.dot`, and fp8 stores
are pre-rounded to the e4m3 grid (the interpreter's fp32 -> fp8 cast mis-rounds across binades).
"""

from __future__ import annotations


import torch
import triton
import triton.language as tl

from wmtp.measure.kernels.moe import find_expert, route_pairs
from wmtp.measure.kernels.quant_formats import (GROUP, check_2d, dequantize_fp8_block,  # noqa: F401  (re-exported)
                                                dequantize_int4_group, interpreting, quantize_act_fp8,
                                                quantize_fp8_block, quantize_int4_group, weight_bytes)

_FP8 = torch.float8_e4m3fn
_ACT_DTYPES = (torch.bfloat16, torch.float16)


@triton.jit
def _tile_rows(pid_m, M, sorted_pairs, counts, starts, cum_blocks, E, top_k,
               GROUPED: tl.constexpr, A_IS_PAIRS: tl.constexpr, LOG_E: tl.constexpr, BLOCK_M: tl.constexpr):
    """Expert, activation rows, output rows and row mask of this program's M tile."""
    if GROUPED:
        e = find_expert(cum_blocks, E, pid_m, LOG_E)
        rows = (pid_m - tl.load(cum_blocks + e)) * BLOCK_M + tl.arange(0, BLOCK_M)
        r_ok = rows < tl.load(counts + e)
        out_row = tl.load(sorted_pairs + tl.load(starts + e) + rows, mask=r_ok, other=0)
        if A_IS_PAIRS:
            a_row = out_row
        else:
            a_row = out_row // top_k
    else:
        e = pid_m * 0
        out_row = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        r_ok = out_row < M
        a_row = out_row
    return e, a_row.to(tl.int64), out_row.to(tl.int64), r_ok


@triton.jit(do_not_specialize=["M"])
def _fp8_gemm_kernel(
    A, A_s, W, W_s, Out, route_w, sorted_pairs, counts, starts, cum_blocks,
    M, N, K, E, top_k, kb_per_split,
    stride_am, stride_asm, stride_we, stride_wn, stride_wse, stride_wsn, stride_os, stride_om,
    GROUPED: tl.constexpr, A_IS_PAIRS: tl.constexpr, SCALE: tl.constexpr, LOG_E: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    if GROUPED:
        live = tl.load(cum_blocks + E)
    else:
        live = tl.num_programs(0)
    if pid_m >= live:
        return
    e, a_row, out_row, r_ok = _tile_rows(pid_m, M, sorted_pairs, counts, starts, cum_blocks, E, top_k,
                                         GROUPED, A_IS_PAIRS, LOG_E, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ok = cols < N
    w_base = W + e.to(tl.int64) * stride_we + cols.to(tl.int64)[None, :] * stride_wn  # [1, BN]
    ws_base = W_s + e.to(tl.int64) * stride_wse + (cols // BLOCK_K) * stride_wsn  # [BN]; 128 rows per scale = BLOCK_K
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for i in range(0, kb_per_split):  # the last split may run past K: operands masked to 0 there
        kb = pid_k * kb_per_split + i
        kb_s = tl.minimum(kb, (K - 1) // BLOCK_K)  # scale column, kept in bounds
        ks = kb * BLOCK_K + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = tl.load(A + a_row[:, None] * stride_am + ks[None, :], mask=r_ok[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w_base + ks[:, None], mask=k_ok[:, None] & c_ok[None, :], other=0.0)  # [BK, BN]
        a_s = tl.load(A_s + a_row * stride_asm + kb_s, mask=r_ok, other=0.0)
        w_s = tl.load(ws_base + kb_s, mask=c_ok, other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc += tl.dot(a, w) * a_s[:, None] * w_s[None, :]
    if SCALE:
        acc = acc * tl.load(route_w + out_row, mask=r_ok, other=0.0)[:, None]
    tl.store(Out + pid_k * stride_os + out_row[:, None] * stride_om + cols[None, :], acc.to(Out.dtype.element_ty),
             mask=r_ok[:, None] & c_ok[None, :])


@triton.jit(do_not_specialize=["M"])
def _int4_gemm_kernel(
    A, W, W_s, Out, route_w, sorted_pairs, counts, starts, cum_blocks,
    M, N, K, E, top_k, kb_per_split,
    stride_am, stride_we, stride_wn, stride_wse, stride_wsn, stride_os, stride_om,
    GROUPED: tl.constexpr, A_IS_PAIRS: tl.constexpr, SCALE: tl.constexpr, LOG_E: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    if GROUPED:
        live = tl.load(cum_blocks + E)
    else:
        live = tl.num_programs(0)
    if pid_m >= live:
        return
    e, a_row, out_row, r_ok = _tile_rows(pid_m, M, sorted_pairs, counts, starts, cum_blocks, E, top_k,
                                         GROUPED, A_IS_PAIRS, LOG_E, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ok = cols < N
    w_base = W + e.to(tl.int64) * stride_we + cols.to(tl.int64)[None, :] * stride_wn  # [1, BN]
    ws_base = W_s + e.to(tl.int64) * stride_wse + cols.to(tl.int64) * stride_wsn  # [BN]
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for i in range(0, kb_per_split):  # the last split may run past K: operands masked to 0 there
        kb = pid_k * kb_per_split + i
        kb_s = tl.minimum(kb, (K - 1) // BLOCK_K)  # scale column, kept in bounds
        j = kb * (BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)  # byte column: elements 2j (low nibble) and 2j+1 (high)
        j_ok = 2 * j < K
        p = tl.load(w_base + j[:, None], mask=j_ok[:, None] & c_ok[None, :], other=0)  # [BK/2, BN] uint8
        lo = (p & 0xF).to(tl.float32) - 8.0
        hi = ((p >> 4) & 0xF).to(tl.float32) - 8.0
        a_ptr = A + a_row[:, None] * stride_am + 2 * j[None, :]
        a_ok = r_ok[:, None] & j_ok[None, :]
        a_even = tl.load(a_ptr, mask=a_ok, other=0.0)
        a_odd = tl.load(a_ptr + 1, mask=a_ok, other=0.0)
        if UPCAST:
            a_even = a_even.to(tl.float32)
            a_odd = a_odd.to(tl.float32)
        else:
            lo = lo.to(a_even.dtype)
            hi = hi.to(a_even.dtype)
        part = tl.dot(a_even, lo) + tl.dot(a_odd, hi)
        acc += part * tl.load(ws_base + kb_s, mask=c_ok, other=0.0).to(tl.float32)[None, :]
    if SCALE:
        acc = acc * tl.load(route_w + out_row, mask=r_ok, other=0.0)[:, None]
    tl.store(Out + pid_k * stride_os + out_row[:, None] * stride_om + cols[None, :], acc.to(Out.dtype.element_ty),
             mask=r_ok[:, None] & c_ok[None, :])


@triton.jit
def _splitk_sum_kernel(P, Out, numel, split, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < numel
    acc = tl.load(P + offs, mask=ok, other=0.0)
    for s in range(1, split):
        acc += tl.load(P + s * numel + offs, mask=ok, other=0.0)
    tl.store(Out + offs, acc.to(Out.dtype.element_ty), mask=ok)


# ---------------------------------------------------------------------------------------------
# launchers


def _fp8_dot_ok(device: torch.device) -> bool:
    """fp8 operands in tl.dot need sm_89+ (Ada / Hopper); elsewhere upcast to fp32 (exact for e4m3 in tf32)."""
    if interpreting() or device.type != "cuda":
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


_SM_COUNT: dict = {}


def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 4
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


def _check_block(block_m: int | None, block_n: int) -> None:
    for name, b in (("block_m", block_m), ("block_n", block_n)):
        if b is not None and (b < 16 or b & (b - 1)):
            raise ValueError(f"{name} must be a power of two >= 16, got {b}")


def _default_block_m(rows: int) -> int:
    return 16 if rows <= 16 else 32 if rows <= 32 else 64


def _split_plan(m_tiles, n_tiles, k_blocks, m, n, w_bytes, device, split_k):
    """(split, K blocks per split). Auto: split K until about four programs per SM stream weights, while the
    fp32 partials (written and read once, 4 B each) stay under a quarter of the weight bytes."""
    if split_k is None:
        want = triton.cdiv(4 * _sm_count(device), m_tiles * n_tiles)
        cap = max(1, w_bytes // (4 * 8 * max(m * n, 1)))
        split_k = max(1, min(want, k_blocks, cap))
    if not 1 <= split_k <= max(k_blocks, 1):
        raise ValueError(f"split_k must be in [1, {k_blocks}] (K blocks of {GROUP}), got {split_k}")
    kb_per_split = triton.cdiv(k_blocks, split_k)
    return triton.cdiv(k_blocks, kb_per_split), kb_per_split  # no empty splits


def _split_dst(out, split_k):
    """Where the GEMM kernel writes: the output itself, or fp32 partials [split, rows, N] for `_dense_finish`."""
    if split_k == 1:
        return out, 0
    dst = torch.empty((split_k,) + tuple(out.shape), dtype=torch.float32, device=out.device)
    return dst, dst.stride(0)


def _output(out, shape, dtype, device):
    """The caller's `out` (checked) or a new tensor."""
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    if tuple(out.shape) != shape or out.dtype != dtype or out.device != device or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {dtype} {shape} tensor on {device}, got "
                         f"{tuple(out.shape)} {out.dtype} on {out.device}")
    return out


def _dense_plan(m, n, k, device, block_m, block_n, split_k, w_bytes, out_dtype, out):
    """Output, split-K destination and its split stride, grid, K blocks per split, BLOCK_M."""
    block_m = block_m or _default_block_m(m)
    _check_block(block_m, block_n)
    out = _output(out, (m, n), out_dtype, device)
    m_tiles, n_tiles = triton.cdiv(m, block_m), triton.cdiv(n, block_n)
    split_k, kb_per_split = _split_plan(m_tiles, n_tiles, triton.cdiv(k, GROUP), m, n, w_bytes, device, split_k)
    dst, stride_os = _split_dst(out, split_k)
    return out, dst, stride_os, (m_tiles, n_tiles, split_k), kb_per_split, block_m


def _dense_finish(out, dst):
    if dst is not out:
        block = 1024
        _splitk_sum_kernel[(triton.cdiv(out.numel(), block),)](dst, out, out.numel(), dst.shape[0], BLOCK=block)
    return out


def _fp8_inputs(x, x_scale):
    """Quantize activations unless they come pre-quantized (fp8 + per-group scales)."""
    if x.dtype == _FP8:
        check_2d("x", x, (_FP8,))
        if x_scale is None or x_scale.dtype != torch.float32 or tuple(x_scale.shape) != (x.shape[0], triton.cdiv(x.shape[1], GROUP)):
            raise ValueError("fp8 x needs x_scale float32 [M, ceil(K/128)] (per-token-group scales)")
        return x, x_scale
    if x_scale is not None:
        raise ValueError("x_scale is only accepted with pre-quantized fp8 x")
    return quantize_act_fp8(x)


def _check_fp8_weight(w, w_scale, k, grouped):
    dims = 3 if grouped else 2
    shape = "[E, N, K]" if grouped else "[N, K]"
    if w.dim() != dims or w.dtype != _FP8:
        raise ValueError(f"w must be float8_e4m3fn {shape}, got {tuple(w.shape)} {w.dtype}")
    if w.shape[-1] != k or w.stride(-1) != 1:
        raise ValueError(f"w's last dimension must be K = {k} and contiguous, got {tuple(w.shape)}")
    want = tuple(w.shape[:-2]) + (triton.cdiv(w.shape[-2], GROUP), triton.cdiv(k, GROUP))
    if w_scale.dtype != torch.float32 or tuple(w_scale.shape) != want:
        raise ValueError(f"w_scale must be float32 {want} (one per 128x128 block), got {tuple(w_scale.shape)} {w_scale.dtype}")


def fp8_gemm(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, x_scale: torch.Tensor | None = None,
             out_dtype: torch.dtype = torch.bfloat16, split_k: int | None = None, block_m: int | None = None,
             block_n: int = 64, num_warps: int = 4, num_stages: int = 4, out: torch.Tensor | None = None) -> torch.Tensor:
    """y [M, N] = x [M, K] @ dequant(w [N, K], w_scale)^T with x quantized per 1x128 group (W8A8)."""
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [M, K], got {tuple(x.shape)}")
    if out_dtype not in _ACT_DTYPES + (torch.float32,):
        raise ValueError(f"out_dtype must be bf16, fp16 or fp32, got {out_dtype}")
    m, k = x.shape
    _check_fp8_weight(w, w_scale, k, grouped=False)
    if w.device != x.device or w_scale.device != x.device:
        raise ValueError("x, w and w_scale must be on one device")
    xq, xs = _fp8_inputs(x, x_scale)
    n = w.shape[0]
    if m == 0 or n == 0 or k == 0:
        raise ValueError(f"empty problem: M, N, K = {m}, {n}, {k}")
    out, dst, stride_os, grid, kb_per_split, block_m = _dense_plan(m, n, k, x.device, block_m, block_n, split_k,
                                                        weight_bytes("fp8_block", n, k), out_dtype, out)
    _fp8_gemm_kernel[grid](
        xq, xs, w, w_scale, dst, xs, xs, xs, xs, xs,  # route_w, pairs, counts, starts, cum_blocks unused
        m, n, k, 1, 1, kb_per_split,
        xq.stride(0), xs.stride(0), 0, w.stride(0), 0, w_scale.stride(0), stride_os, dst.stride(-2),
        GROUPED=False, A_IS_PAIRS=False, SCALE=False, LOG_E=1, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=GROUP,
        UPCAST=not _fp8_dot_ok(x.device), num_warps=num_warps, num_stages=num_stages,
    )
    return _dense_finish(out, dst)


def _check_int4_weight(w, w_scale, k, grouped):
    dims = 3 if grouped else 2
    shape = "[E, N, K/2]" if grouped else "[N, K/2]"
    if k % 2:
        raise ValueError(f"int4 weights pack two codes per byte along K: K must be even, got {k}")
    if w.dim() != dims or w.dtype != torch.uint8:
        raise ValueError(f"w must be uint8 {shape} (two int4 per byte), got {tuple(w.shape)} {w.dtype}")
    if w.shape[-1] * 2 != k or w.stride(-1) != 1:
        raise ValueError(f"w's last dimension must be K/2 = {k // 2} and contiguous, got {tuple(w.shape)}")
    want = tuple(w.shape[:-1]) + (triton.cdiv(k, GROUP),)
    if w_scale.dtype not in _ACT_DTYPES + (torch.float32,) or tuple(w_scale.shape) != want:
        raise ValueError(f"w_scale must be bf16/fp16/fp32 {want} (one per row and 128 K), got "
                         f"{tuple(w_scale.shape)} {w_scale.dtype}")


def int4_gemm(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, split_k: int | None = None,
              block_m: int | None = None, block_n: int = 64, num_warps: int = 4, num_stages: int = 4,
              out: torch.Tensor | None = None) -> torch.Tensor:
    """y [M, N] = x [M, K] @ dequant(w [N, K/2] uint8, w_scale [N, K/128])^T, W4A16, output in x.dtype."""
    check_2d("x", x, _ACT_DTYPES)
    m, k = x.shape
    _check_int4_weight(w, w_scale, k, grouped=False)
    if w.device != x.device or w_scale.device != x.device:
        raise ValueError("x, w and w_scale must be on one device")
    n = w.shape[0]
    if m == 0 or n == 0:
        raise ValueError(f"empty problem: M, N, K = {m}, {n}, {k}")
    out, dst, stride_os, grid, kb_per_split, block_m = _dense_plan(
        m, n, k, x.device, block_m, block_n, split_k, weight_bytes("int4_group", n, k, w_scale.element_size()), x.dtype, out)
    _int4_gemm_kernel[grid](
        x, w, w_scale, dst, w_scale, w_scale, w_scale, w_scale, w_scale,  # route_w, pairs, counts, starts, cum unused
        m, n, k, 1, 1, kb_per_split,
        x.stride(0), 0, w.stride(0), 0, w_scale.stride(0), stride_os, dst.stride(-2),
        GROUPED=False, A_IS_PAIRS=False, SCALE=False, LOG_E=1, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=GROUP,
        UPCAST=interpreting(), num_warps=num_warps, num_stages=num_stages,
    )
    return _dense_finish(out, dst)


def _moe_plan(x, topk_ids, topk_weights, n_exp, n, k, a_is_pairs, block_m, block_n, split_k, expert_bytes,
              out_dtype, out):
    """Validate routing inputs, sort pairs by expert; output [T*k, N], split-K destination, grid and routing."""
    if topk_ids.dim() != 2 or topk_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"topk_ids must be an int32/int64 [T, k] tensor, got {tuple(topk_ids.shape)} {topk_ids.dtype}")
    t_len, top_k = topk_ids.shape
    rows = t_len * top_k if a_is_pairs else t_len
    if x.shape[0] != rows:
        raise ValueError(f"x must have {'T*k' if a_is_pairs else 'T'} = {rows} rows, got {x.shape[0]}")
    if topk_weights is not None and (topk_weights.shape != topk_ids.shape or topk_weights.dtype != torch.float32):
        raise ValueError("topk_weights must be float32 with the shape of topk_ids")
    if topk_ids.device != x.device or (topk_weights is not None and topk_weights.device != x.device):
        raise ValueError("topk_ids / topk_weights must be on x's device")
    pairs = t_len * top_k
    routed = max(1, min(n_exp, pairs))  # experts read at most; at least this many M tiles run
    if block_m is None:  # mean rows per routed expert
        block_m = _default_block_m(triton.cdiv(pairs, routed))
    _check_block(block_m, block_n)
    out = _output(out, (pairs, n), out_dtype, x.device)
    n_tiles = triton.cdiv(n, block_n)
    split_k, kb_per_split = _split_plan(max(routed, triton.cdiv(pairs, block_m)), n_tiles, triton.cdiv(k, GROUP),
                                        pairs, n, routed * expert_bytes, x.device, split_k)
    dst, stride_os = _split_dst(out, split_k)
    order, counts, starts, cum_blocks = route_pairs(topk_ids, n_exp, block_m)
    route_w = topk_weights.reshape(-1).contiguous() if topk_weights is not None else counts
    grid = (triton.cdiv(pairs, block_m) + routed, n_tiles, split_k)
    meta = dict(LOG_E=max(1, int(n_exp).bit_length()), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=GROUP)
    return out, dst, stride_os, grid, kb_per_split, top_k, (route_w, order, counts, starts, cum_blocks), meta


def fp8_moe_gemm(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, topk_ids: torch.Tensor,
                 topk_weights: torch.Tensor | None = None, a_is_pairs: bool = False,
                 out_dtype: torch.dtype = torch.bfloat16, split_k: int | None = None, block_m: int | None = None,
                 block_n: int = 64, num_warps: int = 4, num_stages: int = 4,
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """Grouped W8A8: out [T*k, N], row p = t*k + j is x[t] (x[p] if a_is_pairs) @ dequant(w[e])^T, e = topk_ids[t, j],
    times topk_weights[t, j] when given. w [E, N, K] fp8, w_scale [E, ceil(N/128), ceil(K/128)]. Expert ids must lie
    in [0, E) (not checked: that would cost a host sync)."""
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [T or T*k, K], got {tuple(x.shape)}")
    if out_dtype not in _ACT_DTYPES + (torch.float32,):
        raise ValueError(f"out_dtype must be bf16, fp16 or fp32, got {out_dtype}")
    _check_fp8_weight(w, w_scale, x.shape[1], grouped=True)
    if w.device != x.device or w_scale.device != x.device:
        raise ValueError("x, w and w_scale must be on one device")
    n_exp, n, k = w.shape
    out, dst, stride_os, grid, kb_per_split, top_k, routing, meta = _moe_plan(
        x, topk_ids, topk_weights, n_exp, n, k, a_is_pairs, block_m, block_n, split_k,
        weight_bytes("fp8_block", n, k), out_dtype, out)
    if out.numel() == 0:
        return out
    xq, xs = _fp8_inputs(x, None)
    _fp8_gemm_kernel[grid](
        xq, xs, w, w_scale, dst, *routing,
        x.shape[0], n, k, n_exp, top_k, kb_per_split,
        xq.stride(0), xs.stride(0), w.stride(0), w.stride(1), w_scale.stride(0), w_scale.stride(1), stride_os,
        dst.stride(-2), GROUPED=True, A_IS_PAIRS=a_is_pairs, SCALE=topk_weights is not None, **meta,
        UPCAST=not _fp8_dot_ok(x.device), num_warps=num_warps, num_stages=num_stages,
    )
    return _dense_finish(out, dst)


def int4_moe_gemm(x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, topk_ids: torch.Tensor,
                  topk_weights: torch.Tensor | None = None, a_is_pairs: bool = False, split_k: int | None = None,
                  block_m: int | None = None, block_n: int = 64, num_warps: int = 4, num_stages: int = 4,
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """Grouped W4A16, rows as in `fp8_moe_gemm`: w [E, N, K/2] uint8, w_scale [E, N, ceil(K/128)]; out in x.dtype."""
    check_2d("x", x, _ACT_DTYPES)
    _check_int4_weight(w, w_scale, x.shape[1], grouped=True)
    if w.device != x.device or w_scale.device != x.device:
        raise ValueError("x, w and w_scale must be on one device")
    n_exp, n, k = w.shape[0], w.shape[1], x.shape[1]
    out, dst, stride_os, grid, kb_per_split, top_k, routing, meta = _moe_plan(
        x, topk_ids, topk_weights, n_exp, n, k, a_is_pairs, block_m, block_n, split_k,
        weight_bytes("int4_group", n, k, scale_bytes=w_scale.element_size()), x.dtype, out)
    if out.numel() == 0:
        return out
    _int4_gemm_kernel[grid](
        x, w, w_scale, dst, *routing,
        x.shape[0], n, k, n_exp, top_k, kb_per_split,
        x.stride(0), w.stride(0), w.stride(1), w_scale.stride(0), w_scale.stride(1), stride_os, dst.stride(-2),
        GROUPED=True, A_IS_PAIRS=a_is_pairs, SCALE=topk_weights is not None, **meta,
        UPCAST=interpreting(), num_warps=num_warps, num_stages=num_stages,
    )
    return _dense_finish(out, dst)


# ---------------------------------------------------------------------------------------------
# formats: quantize (test / benchmark weights), dequantize, bytes read
