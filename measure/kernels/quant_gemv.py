"""GEMV-style Triton kernel of `wmtp.measure.kernels.quant_gemm` for a few rows (decode, M <= `GEMV_MAX_M`): no
`tl.dot`, so no operand goes through shared memory and every weight load of a step is independent.

One program owns BLOCK_N outputs of every row of its row block (dense: all M rows; grouped: the rows of one
expert, found by the same in-kernel router as the tensor-core kernel) and a range of K (split-K, reduced in the
kernel by the same per-tile semaphore, `quant_kernels.finish_tile`). Each step streams G 128-wide K groups of BLOCK_N
weight rows (G = 4 or 8: 512 or 1024 K) with wide vector loads and unpacks them in registers:
- FP8 (`_fp8_gemv_step`): fp8 bytes loaded directly as e4m3 (16 per thread and load), converted to fp32; tile
  [BLOCK_N, G groups, 128]. The tile's rows share one 128x128 block scale per group (BLOCK_N divides 128), so the
  scale multiplies group sums, not weights. Activations are W8A8 as on the tensor-core path: bf16 / fp16 / fp32
  rows are quantized per 1x128 group inside this kernel (the arithmetic of `quant_formats._act_quant_kernel`,
  so pre-quantized fp8 + scales give bit-identical outputs); no separate quantization launch.
- int4, round 2 (`_int4_gemv_step`, I4_MODE 0): the packed weights read as int32 words of 8 codes ([N, K/8],
  K % 8 == 0), a tile [BLOCK_N, groups, 16 words]; nibble i of word c of a group is element 8c + i;
  `(word >> 4i) & 15 | 0x4B000000` is the float 2^23 + code, and subtracting 2^23 + 8 gives code - 8 exactly.
  Row sums over each group are multiplied by the row's group scale. I4_MODE 1..4: `quant_gemv_int4` (round 4:
  contiguous activations shared by the tile's rows; packed bf16x2 dequant and FMAs for bf16 activations).
Accumulation is fp32 (round 4's packed step: bf16 within a word, module `quant_gemv_int4`), summed over K per step
(`tl.sum`; round 4: once at the end).
"""

from __future__ import annotations

import triton
import triton.language as tl

from wmtp.measure.kernels.quant_formats import fp8_group_quant
from wmtp.measure.kernels.quant_gemv_int4 import int4_gemv_v4
from wmtp.measure.kernels.quant_kernels import finish_tile, program_rows
from wmtp.measure.kernels.quant_pdl import LINE_BYTES, pdl_enter

MAGIC_F32 = 0x4B000000  # bits of 2^23: OR-ing a 4-bit code into the low mantissa gives 2^23 + code


@triton.jit
def _row(vec, r, ar):
    """Element r of a small vector (as a scalar)."""
    return tl.sum(tl.where(ar == r, vec, 0), 0)


@triton.jit
def _fp8_gemv_step(acc, A, A_s, a_row, r_ok, w_base, ws_base, c_ok, g, g_ok, K, stride_am, stride_asm,
                   A_FP8: tl.constexpr, ROWS: tl.constexpr, BLOCK_M: tl.constexpr, ROUND_FP32: tl.constexpr,
                   FP8_MAX_C: tl.constexpr, EPS: tl.constexpr, IEEE_DIV: tl.constexpr):
    kk = g[:, None] * 128 + tl.arange(0, 128)[None, :]  # [G, 128]
    k_ok = g_ok[:, None] & (kk < K)
    w = tl.load(w_base[:, None, None] + kk[None, :, :], mask=c_ok[:, None, None] & k_ok[None, :, :], other=0.0)
    w = w.to(tl.float32)  # [BN, G, 128]
    ws = tl.load(ws_base + g, mask=g_ok, other=0.0)  # the tile's 128x128 block scale of each group
    ar = tl.arange(0, BLOCK_M)
    for r in tl.static_range(ROWS):
        a_r = _row(a_row, r, ar)
        ok = k_ok & ((k_ok.to(tl.int32) * 0 + _row(r_ok.to(tl.int32), r, ar)) > 0)  # a tensor (interpreter: no scalar mask)
        x = tl.load(A + a_r * stride_am + kk, mask=ok, other=0.0)
        if A_FP8:  # pre-quantized: q * s
            x_s = tl.load(A_s + a_r * stride_asm + g, mask=g_ok, other=0.0)
            x = x.to(tl.float32)
        else:  # quantize per group of 128 as `quant_formats._act_quant_kernel` does (same arithmetic)
            x = x.to(tl.float32)
            q, x_s = fp8_group_quant(x, tl.maximum(tl.max(tl.abs(x), 1), EPS), FP8_MAX_C, IEEE_DIV, ROUND_FP32, True)
            x = q.to(tl.float8e4nv).to(tl.float32)
        part = tl.sum(tl.sum(w * x[None, :, :], 2) * (x_s * ws)[None, :], 1)  # [BN]
        acc += tl.where(ar[:, None] == r, part[None, :], 0.0)
    return acc


@triton.jit
def _int4_gemv_step(acc, A, a_row, r_ok, w_base, ws_base, c_ok, g, g_ok, K, stride_am,
                    ROWS: tl.constexpr, BLOCK_M: tl.constexpr, MAGIC: tl.constexpr):
    kw = g[:, None] * 16 + tl.arange(0, 16)[None, :]  # [G, 16] word index along the row (8 codes a word)
    k_ok = g_ok[:, None] & (kw * 8 < K)
    wd = tl.load(w_base[:, None, None] + kw[None, :, :], mask=c_ok[:, None, None] & k_ok[None, :, :], other=0)
    s = tl.load(ws_base[:, None] + g[None, :], mask=c_ok[:, None] & g_ok[None, :], other=0.0).to(tl.float32)
    ar = tl.arange(0, BLOCK_M)
    for r in tl.static_range(ROWS):
        a_r = _row(a_row, r, ar)
        ok = k_ok & ((k_ok.to(tl.int32) * 0 + _row(r_ok.to(tl.int32), r, ar)) > 0)
        x_ptr = A + a_r * stride_am + kw * 8
        t = tl.zeros(wd.shape, tl.float32)
        for i in tl.static_range(8):
            code = (((wd >> (4 * i)) & 0xF) | MAGIC).to(tl.float32, bitcast=True) - 8388616.0  # code - 8, exact
            t += code * tl.load(x_ptr + i, mask=ok, other=0.0).to(tl.float32)[None, :, :]
        part = tl.sum(tl.sum(t, 2) * s, 1)  # [BN]: group sums times the row's group scales
        acc += tl.where(ar[:, None] == r, part[None, :], 0.0)
    return acc


@triton.jit(do_not_specialize=["M"])
def quant_gemv_kernel(
    A, A_s, W, W_s, Out, Part, Count, route_w, ids, sorted_pairs, counts, starts, cum_blocks,
    M, N, K, KW, E, top_k, kb_per_split, n_split,
    stride_am, stride_asm, stride_we, stride_wn, stride_wse, stride_wsn, stride_ps, stride_om,
    INT4: tl.constexpr, A_FP8: tl.constexpr, GROUPED: tl.constexpr, A_IS_PAIRS: tl.constexpr,
    SCALE: tl.constexpr, SPLIT: tl.constexpr, SORTED: tl.constexpr, LOG_E: tl.constexpr, E_BINS: tl.constexpr,
    CHUNK_P: tl.constexpr, ROWS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    G: tl.constexpr, MAGIC: tl.constexpr, ROUND_FP32: tl.constexpr, FP8_MAX_C: tl.constexpr, EPS: tl.constexpr,
    I4_MODE: tl.constexpr, PDL: tl.constexpr = False, IEEE_DIV: tl.constexpr = False,
):
    """Out rows [M, N] (grouped: M = token-expert pairs) = rows of A @ dequant(W[e])^T, ROWS <= BLOCK_M rows per
    program; W is fp8 [.., N, K] or int32 words [.., N, K/8] (strides in elements of W's type)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    if PDL:  # dense only (`quant_pdl`): this program's first step of weight rows asked for, then the wait
        pf_rows = W + tl.minimum(pid_n * BLOCK_N + tl.arange(0, BLOCK_N), N - 1).to(tl.int64) * stride_wn
        if INT4:  # int32 words: 16 per 128-group, 32 per 128-byte line
            pdl_enter(pf_rows, pid_k * kb_per_split * 16, KW - 1, (G + 1) // 2, LINE_BYTES // 4)
        else:  # fp8 bytes: one line per 128-group
            pdl_enter(pf_rows, pid_k * kb_per_split * 128, K - 1, G, LINE_BYTES)
    live, e, a_row, out_row, r_ok = program_rows(pid_m, ids, M, sorted_pairs, counts, starts, cum_blocks, E, top_k,
                                                 SORTED, GROUPED, A_IS_PAIRS, E_BINS, CHUNK_P, LOG_E, BLOCK_M)
    if not live:
        return
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ok = cols < N
    w_base = W + e.to(tl.int64) * stride_we + cols.to(tl.int64) * stride_wn  # [BN]
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    g_lo = pid_k * kb_per_split  # this split's 128-wide K groups: [g_lo, g_hi)
    g_hi = tl.minimum(g_lo + kb_per_split, tl.cdiv(K, 128))
    if INT4:
        ws_base = W_s + e.to(tl.int64) * stride_wse + cols.to(tl.int64) * stride_wsn  # [BN]: per row and group
        if I4_MODE == 0:  # round 2's step
            for g0 in range(g_lo, g_hi, G):
                g = g0 + tl.arange(0, G)
                acc = _int4_gemv_step(acc, A, a_row, r_ok, w_base, ws_base, c_ok, g, g < g_hi, K, stride_am,
                                      ROWS, BLOCK_M, MAGIC)
        else:  # `quant_gemv_int4`: contiguous shared activations, packed bf16 or fp32 arithmetic
            acc = int4_gemv_v4(A, a_row, r_ok, w_base, ws_base, c_ok, g_lo, g_hi, KW, stride_am, BLOCK_M, BLOCK_N,
                               G, I4_MODE)
    else:
        ws_base = W_s + e.to(tl.int64) * stride_wse + ((pid_n * BLOCK_N) // 128) * stride_wsn  # one 128-row block
        for g0 in range(g_lo, g_hi, G):
            g = g0 + tl.arange(0, G)
            acc = _fp8_gemv_step(acc, A, A_s, a_row, r_ok, w_base, ws_base, c_ok, g, g < g_hi, K, stride_am,
                                 stride_asm, A_FP8, ROWS, BLOCK_M, ROUND_FP32, FP8_MAX_C, EPS, IEEE_DIV)
    if SCALE:
        acc = acc * tl.load(route_w + out_row, mask=r_ok, other=0.0)[:, None]
    finish_tile(acc, Out, Part, Count, out_row, cols, r_ok, c_ok, pid_m * tl.num_programs(1) + pid_n, pid_k, n_split,
            stride_ps, stride_om, SPLIT)
