"""Decode-sized grouped MoE GEMMs (issue 17, round 7): one launch over token-expert pairs, no routing prologue.

The grouped path of `quant_kernels.quant_gemm_kernel` finds each program's expert and rows by scanning the routed ids
with a histogram over the next power of two of E + 1 bins (`quant_kernels.moe_rows`), in every program, and launches
row blocks for the worst case (pairs / BLOCK_M + E programs per N tile). Here the grid is (pair p, N tile, K split):
- GROUP off (`mode` 'pair' / 'swap-p'): program p reads its expert id straight from topk_ids[p] and computes row p
  only; a repeated expert is streamed again by each of its pairs (from L2 when they run together; the benchmark still
  counts only the routed experts' bytes);
- GROUP on ('pair-g' / 'swap'): program p loads the P routed ids once ([P_BLOCK] vector), takes its rank among the
  pairs of its expert, and works only if that rank is a multiple of BLOCK_M: then it owns that chunk of the expert's
  pairs (found by a cumulative count of the matches); the others exit at once. Each expert is read once per chunk.
Math per program (weights [BLOCK_N, K range] of one expert, split-K by the semaphore of `quant_kernels.finish_tile`,
one semaphore per (p, N tile)):
- DOT off (GEMV, BLOCK_M rows): FP8 by `_fp8_rows_step` (`quant_gemv`'s fp8 step: activations quantized per 1x128
  group in the loop, or pre-quantized with their scales), int4 by `quant_gemv_int4.int4_gemv_v4` (round 4's packed
  bf16 step);
- DOT on (swap-AB, as `quant_swap` / `quant_swap_i4`): the expert's weight tile in the MMA's M slot, the chunk's
  rows (BLOCK_M = 16, padded) in its N slot, one `tl.dot` per 128-group; FP8 activations come pre-quantized
  (`quant_formats.quantize_act_fp8`, a second launch: the timed form) or are quantized in the K loop (the same
  values, one launch), int4 weights are dequantized once per weight in registers.
Under TRITON_INTERPRET=1 dot operands are upcast to fp32 (UPCAST) and fp8 stores pre-rounded (ROUND_FP32).
Expert ids must lie in [0, E) (not checked, as in `quant_gemm`).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from wmtp.measure.kernels.quant_formats import (FP8_EPS, FP8_MAX, GROUP, check_routing, interpreting,
                                                quantize_act_fp8, splits_wanted)
from wmtp.measure.kernels.quant_gemv_int4 import MODE_F32, MODE_PACKED, MODE_PACKED_EMU, int4_gemv_v4
from wmtp.measure.kernels.quant_kernels import finish_tile, fp8_act, pair_rows

# mode -> (DOT, GROUP): 'pair' GEMV per pair, 'pair-g' GEMV per chunk of an expert's pairs, 'swap' swap-AB per chunk
# of 16 pairs of one expert, 'swap-p' swap-AB per pair (rows padded to 16)
MOE_MODES = {"pair": (False, False), "pair-g": (False, True), "swap": (True, True), "swap-p": (True, False)}
MOE_GROUP_MAX_PAIRS = 1024  # GROUP programs hold a [BLOCK_M, next_pow2(pairs)] match table in registers
# `quant_gemm.fp8_moe_gemm` / `int4_moe_gemm`: path='pair' takes MOE_PAIR_MODE; path='auto' (no tile named) takes
# the mode of the (lo, hi, mode) range of MOE_PAIR_AUTO[fmt] holding the tokens T (else the earlier paths). From
# measure/results/h200-quant-v8: at T = 1, 2, 4, 8, 16 these modes were faster than the earlier auto paths on all 6
# MoE shapes (q35 / q122 / nem experts_up / _down): fp8 1.82x at T = 1 ('pair'), 1.64 / 1.50 / 1.46 / 1.32x at
# T = 2 / 4 / 8 / 16 ('swap-p'); int4 ('pair') 2.19 / 2.44 / 2.61 / 2.77 / 2.06x (geomeans). Only with at least
# MOE_PAIR_AUTO_MIN_EXPERTS experts (measured: E = 256 / 512, at most 1.4 pairs per routed expert; with few experts
# most pairs repeat an expert, which 'pair' / 'swap-p' stream again per pair)
MOE_PAIR_MODE = {"fp8_block": "pair", "int4_group": "pair"}
MOE_PAIR_AUTO = {"fp8_block": ((1, 1, "pair"), (2, 16, "swap-p")), "int4_group": ((1, 16, "pair"),)}
MOE_PAIR_AUTO_MIN_EXPERTS = 256


@triton.jit
def _chunk_rows(pid_p, ids, P, top_k, A_IS_PAIRS: tl.constexpr, GROUP_ON: tl.constexpr, P_BLOCK: tl.constexpr,
                BLOCK_M: tl.constexpr):
    """(live, expert, activation rows, output rows = pair ids, row mask) of program `pid_p` (module docstring)."""
    e = tl.load(ids + pid_p).to(tl.int32)
    r = tl.arange(0, BLOCK_M)
    if GROUP_ON:
        ps = tl.arange(0, P_BLOCK)
        match = (tl.load(ids + ps, mask=ps < P, other=-1).to(tl.int32) == e).to(tl.int32)
        rank = tl.sum(tl.where(ps < pid_p, match, 0), 0)  # pairs of this expert before p
        live = rank % BLOCK_M == 0
        want = rank + r  # ranks of this chunk's rows
        r_ok = want < tl.sum(match, 0)
        hit = (match[None, :] == 1) & ((tl.cumsum(match, 0) - 1)[None, :] == want[:, None])  # [BLOCK_M, P_BLOCK]
        pair = tl.sum(tl.where(hit, ps[None, :], 0), 1)
    else:
        live = pid_p >= 0
        r_ok = r == 0
        pair = pid_p + r * 0
    return pair_rows(live, e, pair, r_ok, top_k, A_IS_PAIRS)


@triton.jit
def _codes(b):
    """Bytes (int32) -> code - 8 of the low nibble (fp32, exact: 2^23 + code minus 2^23 + 8; as `quant_swap_i4`)."""
    return ((b & 0xF) | 0x4B000000).to(tl.float32, bitcast=True) - 8388616.0


@triton.jit
def _fp8_rows_step(acc, A, A_s, a_row, r_ok, w_base, ws_base, c_ok, g, g_ok, K, stride_am, stride_asm,
                   A_FP8: tl.constexpr, BLOCK_M: tl.constexpr, ROUND_FP32: tl.constexpr, FP8_MAX_C: tl.constexpr,
                   EPS: tl.constexpr):
    """acc [BLOCK_M, BN] += the G groups g of weight rows w_base [BN] (fp8, one 128x128 block scale per group at
    ws_base + g) against each row's activations, quantized per 1x128 group here (`quant_kernels.fp8_act`) unless
    A_FP8 (then with their scales A_s); the arithmetic of `quant_gemv`'s fp8 step."""
    kk = g[:, None] * 128 + tl.arange(0, 128)[None, :]  # [G, 128]
    k_ok = g_ok[:, None] & (kk < K)
    w = tl.load(w_base[:, None, None] + kk[None, :, :], mask=c_ok[:, None, None] & k_ok[None, :, :], other=0.0)
    w = w.to(tl.float32)  # [BN, G, 128]
    ws = tl.load(ws_base + g, mask=g_ok, other=0.0)
    ar = tl.arange(0, BLOCK_M)
    for r in tl.static_range(BLOCK_M):
        a_r = tl.sum(tl.where(ar == r, a_row, 0), 0)
        ok = k_ok & ((k_ok.to(tl.int32) * 0 + tl.sum(tl.where(ar == r, r_ok.to(tl.int32), 0), 0)) > 0)  # a tensor
        x = tl.load(A + a_r * stride_am + kk, mask=ok, other=0.0)  # [G, 128]
        if A_FP8:
            x_s = tl.load(A_s + a_r * stride_asm + g, mask=g_ok, other=0.0)
            x = x.to(tl.float32)
        else:
            q, x_s = fp8_act(x, tl.float8e4nv, FP8_MAX_C, EPS, ROUND_FP32)
            x = q.to(tl.float32)
        part = tl.sum(tl.sum(w * x[None, :, :], 2) * (x_s * ws)[None, :], 1)  # [BN]
        acc += tl.where(ar[:, None] == r, part[None, :], 0.0)
    return acc


@triton.jit
def _dot_loop(A, A_s, W, W_s, e64, a_row, r_ok, cols, c_ok, g_lo, g_hi, K, KW, stride_am, stride_asm, stride_we,
              stride_wn, stride_wse, stride_wsn, INT4: tl.constexpr, A_FP8: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, UPCAST: tl.constexpr, ROUND_FP32: tl.constexpr, FP8_MAX_C: tl.constexpr,
              EPS: tl.constexpr):
    """[BLOCK_N, BLOCK_M] = dequant(W[e] rows cols, groups [g_lo, g_hi)) @ rows a_row of A^T (swap-AB); fp8 activations
    pre-quantized with scales A_s (A_FP8) or quantized per 1x128 group in the loop (`quant_kernels.fp8_act`, the
    arithmetic of `quantize_act_fp8`: the same fp8 values and scales)."""
    w_base = W + e64 * stride_we + cols.to(tl.int64)[:, None] * stride_wn  # [BN, 1]
    a_base = A + a_row[:, None] * stride_am  # [BM, 1]
    if INT4:
        ws_base = W_s + e64 * stride_wse + cols.to(tl.int64) * stride_wsn  # one scale per row and group
    else:
        ws_base = W_s + e64 * stride_wse + (cols // 128) * stride_wsn  # each row's 128-row block
    acc = tl.zeros([BLOCK_N, BLOCK_M], tl.float32)
    for g in range(g_lo, g_hi):
        ks = g * 128 + tl.arange(0, 128)
        a = tl.load(a_base + ks[None, :], mask=r_ok[:, None] & (ks < K)[None, :], other=0.0)  # [BM, 128]
        w_s = tl.load(ws_base + g, mask=c_ok, other=0.0).to(tl.float32)
        if INT4:  # bytes [BN, 64] (KW bytes a row): element 2j is the low nibble of byte j
            kb = g * 64 + tl.arange(0, 64)
            b = tl.load(w_base + kb[None, :], mask=c_ok[:, None] & (kb < KW)[None, :], other=0).to(tl.int32)
            w = tl.reshape(tl.join(_codes(b), _codes(b >> 4)), [BLOCK_N, 128])
            if UPCAST:
                a = a.to(tl.float32)
            else:
                w = w.to(a.dtype)
            acc += tl.dot(w, tl.trans(a)) * w_s[:, None]
        else:
            w = tl.load(w_base + ks[None, :], mask=c_ok[:, None] & (ks < K)[None, :], other=0.0)  # [BN, 128] fp8
            if A_FP8:
                a_s = tl.load(A_s + a_row * stride_asm + g, mask=r_ok, other=0.0)
            else:
                a, a_s = fp8_act(a, W.dtype.element_ty, FP8_MAX_C, EPS, ROUND_FP32)
            if UPCAST:
                a = a.to(tl.float32)
                w = w.to(tl.float32)
            acc += tl.dot(w, tl.trans(a)) * w_s[:, None] * a_s[None, :]
    return acc


@triton.jit(do_not_specialize=["P"])
def moe_pair_kernel(A, A_s, W, W_s, Out, Part, Count, route_w, ids, P, N, K, KW, top_k, g_per_split, n_split,
                    stride_am, stride_asm, stride_we, stride_wn, stride_wse, stride_wsn, stride_ps, stride_om,
                    INT4: tl.constexpr, DOT: tl.constexpr, A_FP8: tl.constexpr, A_IS_PAIRS: tl.constexpr,
                    SCALE: tl.constexpr, SPLIT: tl.constexpr, GROUP_ON: tl.constexpr, P_BLOCK: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, G: tl.constexpr, I4_MODE: tl.constexpr,
                    UPCAST: tl.constexpr, ROUND_FP32: tl.constexpr, FP8_MAX_C: tl.constexpr, EPS: tl.constexpr):
    """Out [P, N]: row p = A[p // top_k] (A[p] if A_IS_PAIRS) @ dequant(W[ids[p]])^T (times route_w[p] if SCALE).
    W: fp8 [E, N, K]; int4 GEMV: int32 words [E, N, KW = K / 8]; int4 DOT: bytes [E, N, KW = ceil(K / 2)]."""
    pid_p = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    live, e, a_row, out_row, r_ok = _chunk_rows(pid_p, ids, P, top_k, A_IS_PAIRS, GROUP_ON, P_BLOCK, BLOCK_M)
    if not live:
        return
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ok = cols < N
    e64 = e.to(tl.int64)
    g_lo = pid_k * g_per_split
    g_hi = tl.minimum(g_lo + g_per_split, tl.cdiv(K, 128))
    if DOT:
        acc = tl.trans(_dot_loop(A, A_s, W, W_s, e64, a_row, r_ok, cols, c_ok, g_lo, g_hi, K, KW, stride_am,
                                 stride_asm, stride_we, stride_wn, stride_wse, stride_wsn, INT4, A_FP8, BLOCK_M,
                                 BLOCK_N, UPCAST, ROUND_FP32, FP8_MAX_C, EPS))
    elif INT4:
        w_base = W + e64 * stride_we + cols.to(tl.int64) * stride_wn  # [BN] words
        ws_base = W_s + e64 * stride_wse + cols.to(tl.int64) * stride_wsn
        acc = int4_gemv_v4(A, a_row, r_ok, w_base, ws_base, c_ok, g_lo, g_hi, KW, stride_am, BLOCK_M, BLOCK_N, G,
                           I4_MODE)
    else:
        w_base = W + e64 * stride_we + cols.to(tl.int64) * stride_wn  # [BN]
        ws_base = W_s + e64 * stride_wse + ((pid_n * BLOCK_N) // 128) * stride_wsn  # the tile's 128-row block
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for g0 in range(g_lo, g_hi, G):
            g = g0 + tl.arange(0, G)
            acc = _fp8_rows_step(acc, A, A_s, a_row, r_ok, w_base, ws_base, c_ok, g, g < g_hi, K, stride_am,
                                 stride_asm, A_FP8, BLOCK_M, ROUND_FP32, FP8_MAX_C, EPS)
    if SCALE:
        acc = acc * tl.load(route_w + out_row, mask=r_ok, other=0.0)[:, None]
    finish_tile(acc, Out, Part, Count, out_row, cols, r_ok, c_ok, pid_p * tl.num_programs(1) + pid_n, pid_k, n_split,
                stride_ps, stride_om, SPLIT)


def expected_routed(pairs: int, n_exp: int) -> float:
    """Expected distinct experts among `pairs` uniform random picks of `n_exp` (the plan's live-chunk estimate)."""
    return n_exp * (1.0 - (1.0 - 1.0 / n_exp) ** pairs) if n_exp else 0.0


def moe_plan(pairs, n_exp, n, k, sm, fmt, mode, block_n=None, split_k=None, ctas=4, rows=2):
    """(block_m, block_n, G, split, groups per split) of `moe_pair_kernel`. BLOCK_M: 1 ('pair'), `rows` ('pair-g'),
    16 (swap). BLOCK_N: 64 (swap), 32 (GEMV; 16 where 32-wide tiles of the live programs leave SMs idle); fp8 GEMV
    tiles divide 128. G: 128-groups per GEMV step (fp8 4; int4 8 / BLOCK_M). Split-K (automatic) until about `ctas`
    programs per SM over the live programs (pairs, or the expected routed experts when grouped), each split a whole
    number of steps."""
    if mode not in MOE_MODES:
        raise ValueError(f"mode must be one of {', '.join(MOE_MODES)}, got {mode!r}")
    dot, group = MOE_MODES[mode]
    if group and pairs > MOE_GROUP_MAX_PAIRS:
        raise ValueError(f"mode {mode!r} takes at most {MOE_GROUP_MAX_PAIRS} token-expert pairs, got {pairs}")
    if block_n is not None and (block_n < 16 or block_n & (block_n - 1) or (fmt == "fp8_block" and block_n > 128)
                                or (dot and block_n not in (64, 128))):
        raise ValueError(f"block_n must be a power of two in [16, 128] (swap: 64 or 128), got {block_n}")
    if not 1 <= rows <= 16 or rows & (rows - 1):
        raise ValueError(f"rows must be a power of two in [1, 16], got {rows}")
    block_m = 16 if dot else rows if group else 1
    live = max(1, math.ceil(expected_routed(pairs, n_exp)) if group else pairs)
    if block_n is None:
        block_n = 64 if dot else 32 if live * triton.cdiv(n, 32) >= sm else 16
    g_step = 1 if dot else 4 if fmt == "fp8_block" else max(1, 8 // block_m)
    groups = triton.cdiv(k, GROUP)
    if split_k is None:
        want = splits_wanted(ctas, sm, live * triton.cdiv(n, block_n))
        per = triton.cdiv(triton.cdiv(groups, max(1, min(want, groups))), g_step) * g_step
    elif not 1 <= split_k <= groups:
        raise ValueError(f"split_k must be in [1, {groups}] (K blocks of {GROUP}), got {split_k}")
    else:
        per = triton.cdiv(groups, split_k)
    return block_m, block_n, min(g_step, triton.next_power_of_2(per)), triton.cdiv(groups, per), per


def launch_moe(x, x_scale, w, w_scale, ids, route_w, out, a_is_pairs, mode, sm, counters, block_n=None,
               split_k=None, num_warps=None, num_stages=4, ctas=4, rows=2):
    """Plan (`moe_plan`) and launch `moe_pair_kernel` once. x: bf16 / fp16 activations [T or T*k, K] (int4; fp8
    quantized per 1x128 group in the kernel), or fp8 with x_scale [.., ceil(K/128)] (fp8, pre-quantized); w: fp8
    [E, N, K] + scales [E, ceil(N/128), ceil(K/128)], or int4 uint8 [E, N, ceil(K/2)] + scales [E, N, ceil(K/128)];
    ids [T, k] int32 / int64 (contiguous); route_w None or fp32 [T, k]; out [T*k, N] contiguous; `counters(n)` the
    split-K semaphores. Returns `out`."""
    int4 = w.dtype == torch.uint8
    fmt = "int4_group" if int4 else "fp8_block"
    dot, group = MOE_MODES.get(mode, (False, False))
    pairs, (n_exp, n), k = ids.numel(), w.shape[:2], x.shape[1]
    if int4 and not dot and k % 8:
        raise ValueError(f"the int4 GEMV modes read 8 codes per int32 word: K must be a multiple of 8, got {k}")
    block_m, block_n, g_step, split, per = moe_plan(pairs, n_exp, n, k, sm, fmt, mode, block_n, split_k, ctas, rows)
    if pairs == 0 or n == 0:
        return out
    n_tiles = triton.cdiv(n, block_n)
    part = torch.empty((split, pairs, n), dtype=torch.float32, device=x.device) if split > 1 else out
    count = counters(pairs * n_tiles) if split > 1 else out
    wv = w.view(torch.int32) if int4 and not dot else w  # GEMV: [E, N, K/8] words of 8 codes
    kw = k // 8 if int4 and not dot else w.shape[2]
    interp = interpreting()
    i4_mode = (MODE_PACKED_EMU if interp else MODE_PACKED) if x.dtype == torch.bfloat16 else MODE_F32
    moe_pair_kernel[(pairs, n_tiles, split)](
        x, x_scale if x_scale is not None else x, wv, w_scale, out, part, count,
        route_w if route_w is not None else out, ids, pairs, n, k, kw, ids.shape[1], per, split,
        x.stride(0), x_scale.stride(0) if x_scale is not None else 0, wv.stride(0), wv.stride(1),
        w_scale.stride(0), w_scale.stride(1), part.stride(0) if split > 1 else 0, out.stride(0),
        INT4=int4, DOT=dot, A_FP8=x_scale is not None, A_IS_PAIRS=a_is_pairs, SCALE=route_w is not None,
        SPLIT=split > 1, GROUP_ON=group, P_BLOCK=triton.next_power_of_2(pairs) if group else 1, BLOCK_M=block_m,
        BLOCK_N=block_n,
        G=g_step, I4_MODE=i4_mode, UPCAST=interp, ROUND_FP32=interp, FP8_MAX_C=FP8_MAX, EPS=FP8_EPS,
        num_warps=num_warps or 4, num_stages=num_stages,
    )
    return out


def moe_pair_call(path, fmt, x, w, w_scale, ids, route_w, a_is_pairs, out, out_dtype, tiles, split_k, num_warps,
                  counters, fuse=False):
    """The grouped launchers' dispatch to this module: None where (path, tokens) take the earlier paths, else the
    output of `launch_moe` with MOE_PAIR_MODE (path 'pair') or MOE_PAIR_AUTO (path 'auto' with tiles = (block_m,
    block_n, block_k) all None and >= MOE_PAIR_AUTO_MIN_EXPERTS experts; int4 GEMV modes only with K % 8 == 0). FP8 activations: quantized in the kernel (GEMV
    modes; swap modes with `fuse`) or by `quantize_act_fp8` first (swap modes). counters(device, n): the launchers'
    split-K semaphores."""
    if path == "pair":
        mode = MOE_PAIR_MODE[fmt]
    elif (path == "auto" and tiles == (None, None, None) and ids.dim() == 2
          and w.shape[0] >= MOE_PAIR_AUTO_MIN_EXPERTS):
        mode = next((m for lo, hi, m in MOE_PAIR_AUTO[fmt] if lo <= ids.shape[0] <= hi), None)
        if mode is not None and fmt == "int4_group" and not MOE_MODES[mode][0] and x.shape[1] % 8:
            mode = None
    else:
        return None
    if mode is None:
        return None
    if fmt == "fp8_block" and x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"x must be bf16, fp16 or fp32 (quantized per 1x128 group in the call), got {x.dtype}")
    t_len, top_k = check_routing(x, ids, route_w, a_is_pairs)
    shape = (t_len * top_k, w.shape[1])
    if out is None:
        out = torch.empty(shape, dtype=out_dtype, device=x.device)
    elif tuple(out.shape) != shape or out.dtype != out_dtype or out.device != x.device or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {out_dtype} {shape} tensor on {x.device}, got "
                         f"{tuple(out.shape)} {out.dtype} on {out.device}")
    x_scale = None
    if fmt == "fp8_block" and MOE_MODES[mode][0] and not fuse:
        x, x_scale = quantize_act_fp8(x)
    sm = torch.cuda.get_device_properties(x.device).multi_processor_count if x.device.type == "cuda" else 4
    return launch_moe(x, x_scale, w, w_scale, ids, route_w, out, a_is_pairs, mode, sm,
                      lambda n: counters(x.device, n), tiles[1], split_k, num_warps)
