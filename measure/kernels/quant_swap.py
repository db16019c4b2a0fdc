"""Swap-AB tensor-core kernel of `wmtp.measure.kernels.quant_gemm` for dense FP8 W8A8 at decode rows (M <= 64).

The tensor-core kernel (`quant_kernels.quant_gemm_kernel`) puts the M activation rows in the MMA's M slot: on Hopper
that slot is 64 rows per warpgroup, so at M = 1..16 most of each MMA and of its shared-memory staging is padding, and
BLOCK_M < 64 tiles fall back to mma.sync. Here the roles swap: C^T [N, M] = W [N, K] @ A^T [K, M]. Each program owns
BLOCK_N weight rows (64 or 128, the MMA's M slot, so wgmma applies) and all M rows (BLOCK_M = 16..64, the MMA's N
slot), and a range of K (split-K, reduced in the kernel by the semaphore of `quant_kernels.finish_tile`). Per K step
of one 128-group: the weight tile [BLOCK_N, 128] fp8 (K-major, as fp8 wgmma needs for A) and the activation tile
[BLOCK_M, 128] (K-major for B, through `tl.trans`), one `tl.dot`, then that group's scales: the weight block scale
per output row (BLOCK_N <= 128 rows share one or two 128-row scale blocks: one scale per row is loaded) times the
activation group scale per column. Activations are quantized per 1x128 group in the kernel (QUANT_A, the arithmetic
of `quant_kernels.fp8_act`) or come pre-quantized with their scales. The loop is a plain load / dot loop, so
Triton's pipeliner stages `num_stages` steps of both tiles in shared memory (cp.async). Under TRITON_INTERPRET=1
operands are upcast to fp32 before the dot (UPCAST).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wmtp.measure.kernels.quant_formats import FP8_EPS, FP8_MAX, GROUP, interpreting, splits_wanted
from wmtp.measure.kernels.quant_kernels import fp8_act, finish_tile
from wmtp.measure.kernels.quant_pdl import LINE_BYTES, pdl_enter, pdl_launch

SWAP_MAX_M = 64  # the most rows the swap-AB kernel takes (one program holds them all)
ACT_MODES = {"pre": 0, "loop": 1, "prologue": 2}  # activations: pre-quantized, quantized per K step, or first


@triton.jit
def _quantize_rows(A, Aq, Aq_s, rows, r_ok, g_lo, g_hi, K, stride_am, stride_qm, stride_qsm,
                   FP8_MAX_C: tl.constexpr, EPS: tl.constexpr, ROUND_FP32: tl.constexpr):
    """ACT 'prologue': groups [g_lo, g_hi) of every row quantized (`fp8_act`) into the scratch Aq / Aq_s. Programs of
    one split write the same bytes (same values); each reads back only what it wrote, after a CTA barrier."""
    for g in range(g_lo, g_hi):
        ks = g * 128 + tl.arange(0, 128)
        ok = r_ok[:, None] & (ks < K)[None, :]
        a = tl.load(A + rows[:, None] * stride_am + ks[None, :], mask=ok, other=0.0)
        q, s = fp8_act(a, Aq.dtype.element_ty, FP8_MAX_C, EPS, ROUND_FP32)
        tl.store(Aq + rows[:, None] * stride_qm + ks[None, :], q, mask=ok)
        tl.store(Aq_s + rows * stride_qsm + g, s, mask=r_ok)
    tl.debug_barrier()  # the CTA's stores are visible to all its threads before the loop reads them


@triton.jit(do_not_specialize=["M"])
def fp8_swap_kernel(A, A_s, Aq, Aq_s, W, W_s, Out, Part, Count, M, N, K, g_per_split, n_split,
                    stride_am, stride_asm, stride_qm, stride_qsm, stride_wn, stride_wsn, stride_ps, stride_om,
                    ACT: tl.constexpr, SPLIT: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
                    UPCAST: tl.constexpr, ROUND_FP32: tl.constexpr, FP8_MAX_C: tl.constexpr, EPS: tl.constexpr,
                    PDL: tl.constexpr = False, PF_LINES: tl.constexpr = 4):
    """Out [M, N] = A [M, K] @ dequant(W [N, K])^T, computed transposed per tile; see the module docstring.
    ACT 0: A fp8 with scales A_s; 1: A quantized in the loop; 2: quantized into Aq / Aq_s first (`_quantize_rows`)."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = tl.arange(0, BLOCK_M)
    r_ok = rows < M
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ok = cols < N
    if PDL:  # `quant_pdl`: the first PF_LINES 128-groups of this program's weight rows asked for, then the wait
        pdl_enter(W + tl.minimum(cols, N - 1).to(tl.int64) * stride_wn, pid_k * g_per_split * 128, K - 1, PF_LINES,
                  LINE_BYTES)
    w_base = W + cols.to(tl.int64)[:, None] * stride_wn  # [BN, 1]
    ws_base = W_s + (cols // 128) * stride_wsn  # [BN]: each row's 128-row scale block
    acc = tl.zeros([BLOCK_N, BLOCK_M], tl.float32)
    g_lo = pid_k * g_per_split
    g_hi = tl.minimum(g_lo + g_per_split, tl.cdiv(K, 128))
    if ACT == 2:
        _quantize_rows(A, Aq, Aq_s, rows.to(tl.int64), r_ok, g_lo, g_hi, K, stride_am, stride_qm, stride_qsm,
                       FP8_MAX_C, EPS, ROUND_FP32)
        a_base = Aq + rows.to(tl.int64)[:, None] * stride_qm  # [BM, 1]
        as_base = Aq_s + rows * stride_qsm
    else:
        a_base = A + rows.to(tl.int64)[:, None] * stride_am
        as_base = A_s + rows * stride_asm
    for g in range(g_lo, g_hi):
        ks = g * 128 + tl.arange(0, 128)
        k_ok = ks < K
        w = tl.load(w_base + ks[None, :], mask=c_ok[:, None] & k_ok[None, :], other=0.0)  # [BN, 128] fp8
        w_s = tl.load(ws_base + g, mask=c_ok, other=0.0)
        a = tl.load(a_base + ks[None, :], mask=r_ok[:, None] & k_ok[None, :], other=0.0)  # [BM, 128]
        if ACT == 1:
            a, a_s = fp8_act(a, W.dtype.element_ty, FP8_MAX_C, EPS, ROUND_FP32)
        else:
            a_s = tl.load(as_base + g, mask=r_ok, other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc += tl.dot(w, tl.trans(a)) * w_s[:, None] * a_s[None, :]
    finish_tile(tl.trans(acc), Out, Part, Count, rows.to(tl.int64), cols, r_ok, c_ok, pid_n, pid_k, n_split,
                stride_ps, stride_om, SPLIT)


def swap_plan(m, n, k, sm, block_n=None, split_k=None, ctas_per_sm=4, fit=False):
    """(block_m, block_n, split, groups per split): BLOCK_M the power of two >= M (>= 16); BLOCK_N 128 where that
    gives a tile per SM, else 64; split-K (automatic) until about `ctas_per_sm` programs per SM, while the fp32
    partials (written and read once) stay under half the weight bytes; `fit`: at most `ctas_per_sm` programs per SM
    (one wave where that many reside)."""
    if n == 0 or k == 0:
        raise ValueError(f"empty problem: M, N, K = {m}, {n}, {k}")
    if not 1 <= m <= SWAP_MAX_M:
        raise ValueError(f"the swap path takes 1..{SWAP_MAX_M} rows, got {m}")
    if block_n is not None and block_n not in (64, 128):
        raise ValueError(f"the swap path needs block_n 64 or 128, got {block_n}")
    block_m = max(16, triton.next_power_of_2(m))
    block_n = block_n or (128 if triton.cdiv(n, 128) >= sm else 64)
    groups = triton.cdiv(k, GROUP)
    n_tiles = triton.cdiv(n, block_n)
    if split_k is None:
        want = splits_wanted(ctas_per_sm, sm, n_tiles, fit)
        cap = max(1, (n * k) // (2 * 8 * m * n))  # partials 8 B per output and split <= half the weight bytes
        split_k = max(1, min(want, groups, cap))
    elif not 1 <= split_k <= groups:
        raise ValueError(f"split_k must be in [1, {groups}] (K blocks of {GROUP}), got {split_k}")
    per = triton.cdiv(groups, split_k)
    return block_m, block_n, triton.cdiv(groups, per), per


def launch_swap(x, x_scale, w, w_scale, out, act, sm, counters, block_n=None, split_k=None, num_warps=None,
                num_stages=4, ctas_per_sm=4, upcast=False, fit=False):
    """Plan and launch `fp8_swap_kernel` once; act 'pre' (x fp8 with x_scale), 'loop' or 'prologue' (x bf16 / fp16 /
    fp32, quantized in the kernel: `ACT_MODES`); `counters(n)` gives the split-K semaphores (zeroed, re-armed by each
    launch). Returns `out`."""
    m, k = x.shape
    n = w.shape[0]
    block_m, block_n, split, per = swap_plan(m, n, k, sm, block_n, split_k, ctas_per_sm, fit)
    n_tiles = triton.cdiv(n, block_n)
    part = torch.empty((split, m, n), dtype=torch.float32, device=x.device) if split > 1 else out
    count = counters(n_tiles) if split > 1 else out
    mode = ACT_MODES[act]
    if mode == 2:
        xq = torch.empty((m, k), dtype=w.dtype, device=x.device)
        xq_s = torch.empty((m, triton.cdiv(k, GROUP)), dtype=torch.float32, device=x.device)
    else:
        xq, xq_s = x, out
    fp8_swap_kernel[(n_tiles, split)](
        x, x_scale if x_scale is not None else x, xq, xq_s, w, w_scale, out, part, count, m, n, k, per, split,
        x.stride(0), x_scale.stride(0) if x_scale is not None else 0, xq.stride(0), xq_s.stride(0) if mode == 2 else 0,
        w.stride(0), w_scale.stride(0), part.stride(0) if split > 1 else 0, out.stride(0),
        ACT=mode, SPLIT=split > 1, BLOCK_N=block_n, BLOCK_M=block_m, UPCAST=upcast,
        ROUND_FP32=interpreting(), FP8_MAX_C=FP8_MAX, EPS=FP8_EPS, num_warps=num_warps or 4, num_stages=num_stages,
        **pdl_launch(x.device),
    )
    return out
