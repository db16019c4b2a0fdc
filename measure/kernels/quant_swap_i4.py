"""Swap-AB tensor-core kernel of `wmtp.measure.kernels.quant_gemm` for dense int4 W4A16 at decode rows (M <= 64):
the layout of `quant_swap` (fp8) with int4 group-scaled weights (issue 17, round 6).

C^T [N, M] = W [N, K] @ A^T [K, M]: each program owns BLOCK_N weight rows (64 or 128, the MMA's M slot) and all M
activation rows (padded to BLOCK_M = 16..64, the MMA's N slot), and a range of K (split-K by the semaphore of
`quant_kernels.finish_tile`). Per 128-group: the packed tile [BLOCK_N, 64] bytes (two codes per byte, element 2j in
the low nibble) is dequantized once per weight in registers to code - 8 (exact in bf16 / fp16: the float
2^23 + code minus 2^23 + 8, converted), the two nibbles of each byte joined back into K order, one `tl.dot` with
the activation tile [BLOCK_M, 128] transposed, and the group's scale per weight row multiplies the fp32 group sum.
So each weight is dequantized once for all M rows, which the GEMV kernels cannot do (their cost per weight grows
with M). Under TRITON_INTERPRET=1 both operands are fp32 (UPCAST).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wmtp.measure.kernels.quant_formats import interpreting
from wmtp.measure.kernels.quant_kernels import finish_tile
from wmtp.measure.kernels.quant_swap import swap_plan


@triton.jit
def _codes(b):
    """Bytes (int32) -> code - 8 of the low nibble (fp32, exact)."""
    return ((b & 0xF) | 0x4B000000).to(tl.float32, bitcast=True) - 8388616.0


@triton.jit(do_not_specialize=["M"])
def int4_swap_kernel(A, W, W_s, Out, Part, Count, M, N, K, KB, g_per_split, n_split,
                     stride_am, stride_wn, stride_wsn, stride_ps, stride_om,
                     SPLIT: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, UPCAST: tl.constexpr):
    """Out [M, N] = A [M, K] @ dequant(W [N, KB = K / 2] uint8, W_s [N, groups])^T, computed transposed per tile (KB
    an argument of its own: Triton's divisibility specialization of it lets the masked byte loads vectorize)."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = tl.arange(0, BLOCK_M)
    r_ok = rows < M
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ok = cols < N
    w_base = W + cols.to(tl.int64)[:, None] * stride_wn  # [BN, 1]
    ws_base = W_s + cols.to(tl.int64) * stride_wsn  # [BN]
    a_base = A + rows.to(tl.int64)[:, None] * stride_am  # [BM, 1]
    acc = tl.zeros([BLOCK_N, BLOCK_M], tl.float32)
    g_lo = pid_k * g_per_split
    g_hi = tl.minimum(g_lo + g_per_split, tl.cdiv(K, 128))
    for g in range(g_lo, g_hi):
        kb = g * 64 + tl.arange(0, 64)  # byte index along the row
        b = tl.load(w_base + kb[None, :], mask=c_ok[:, None] & (kb < KB)[None, :], other=0).to(tl.int32)
        ks = g * 128 + tl.arange(0, 128)
        a = tl.load(a_base + ks[None, :], mask=r_ok[:, None] & (ks < K)[None, :], other=0.0)  # [BM, 128]
        w_s = tl.load(ws_base + g, mask=c_ok, other=0.0).to(tl.float32)
        w = tl.reshape(tl.join(_codes(b), _codes(b >> 4)), [BLOCK_N, 128])  # element 2j: low nibble of byte j
        if UPCAST:
            a = a.to(tl.float32)
        else:
            w = w.to(a.dtype)
        acc += tl.dot(w, tl.trans(a)) * w_s[:, None]
    finish_tile(tl.trans(acc), Out, Part, Count, rows.to(tl.int64), cols, r_ok, c_ok, pid_n, pid_k, n_split,
                stride_ps, stride_om, SPLIT)


def launch_int4_swap(x, w, w_scale, out, sm, counters, block_n=None, split_k=None, num_warps=None, num_stages=4,
                     ctas_per_sm=4):
    """Plan (`quant_swap.swap_plan`) and launch `int4_swap_kernel` once: x bf16 / fp16 [M <= 64, K], w uint8
    [N, K / 2], w_scale [N, ceil(K / 128)]; `counters(n)` gives the split-K semaphores. Returns `out`."""
    m, k = x.shape
    n = w.shape[0]
    block_m, block_n, split, per = swap_plan(m, n, k, sm, block_n, split_k, ctas_per_sm)
    n_tiles = triton.cdiv(n, block_n)
    part = torch.empty((split, m, n), dtype=torch.float32, device=x.device) if split > 1 else out
    count = counters(n_tiles) if split > 1 else out
    int4_swap_kernel[(n_tiles, split)](
        x, w, w_scale, out, part, count, m, n, k, k // 2, per, split,
        x.stride(0), w.stride(0), w_scale.stride(0), part.stride(0) if split > 1 else 0, out.stride(0),
        SPLIT=split > 1, BLOCK_N=block_n, BLOCK_M=block_m, UPCAST=interpreting(), num_warps=num_warps or 4,
        num_stages=num_stages,
    )
    return out

