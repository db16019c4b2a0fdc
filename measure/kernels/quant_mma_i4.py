"""4-bit weight-only GEMM for decode rows (M <= 16) on the tensor cores, from a weight layout made for them
(issue 17, round 10).

Why: the GEMV kernels (`quant_gemv_int4`) spend about 26 instructions per 32-bit word of 8 codes and thread
(h200-quant-v5 to v11): 11 to dequantize, 7 for the packed bf16 dot, the rest for activations, masks and addresses,
and run at about half the issue rate; no tile, step, occupancy or activation-sharing variant moved them past ~55 % of
copy (h200-quant-v11). Here one `mma.sync.m16n8k16` (bf16 in, fp32 accumulate) does a warp's 32 words' dot products,
so a word costs its dequantization (`quant_gemv_int4.DEQ_ASM`, exact: code - 8 as bf16 pairs) and one MMA issue
(two above 8 rows).

Layout (`pack_int4_mma`, an offline repacking as engines repack for Marlin-class kernels): the N rows in tiles of 16,
K in chunks of 64 (two per 128-group), words int32 [ceil(N / 16), 2 ceil(K / 128), 32 lanes, 4]. Lane l = 4 g + q
of a warp holds, for chunk c64 and sub-tile c (the 4 words of its 16-byte load), the MMA A-fragment registers of its
tile: the dequantized pair j of `DEQ_ASM` (nibbles j, j + 4) is register j of the fragment (rows g / g + 8 of the
tile, two k each). K is permuted inside each chunk (the MMA sums over k in any order as long as A and B agree) so
that the B fragment of lane l (token g, its 4 sub-tiles) is the contiguous 32 bytes x[g, 64 c64 + 16 q .. + 15]:
fragment k (2 q + e, 2 q + 8 + e) of sub-tile c is physical k 64 c64 + 16 q + 4 c + (e, 2 + e), e = 0, 1.
Nibble j of word (tile, c64, l, c) is the code at row 16 tile + g + 8 hi, k = 64 c64 + 16 q + 4 c + e with
j = hi + 2 (e >> 1) + 4 (e & 1). Padding rows / k hold code 8 (= 0); the group scales stay [N, ceil(K / 128)].

Each program runs NW warps, warp w on row tile NW pid + w, over its split's 128-groups: per group two chunks (one
16-byte weight load and two 16-byte activation loads per lane and chunk, 8 dequantizations, 8 MMAs into a fresh fp32
fragment), then the fragment times the rows' group scales into the accumulators. D fragment of lane (g, q): rows
g, g + 8, tokens 2 q, 2 q + 1. Every per-thread tensor has NW x 32 elements, element i in lane i % 32 of warp i // 32
(the blocked layout of a [NW * 32, 4] load of 16 contiguous bytes per row): the inline MMA relies on it, and the GPU
tests check the result against fp32 torch. Under the interpreter (CPU tests) `EMU` computes each MMA's sums from
the same registers in fp32 tensor arithmetic (the MMA and its emulation: `quant_mma_frag`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wmtp.measure.kernels.quant_formats import GROUP, splits_wanted
from wmtp.measure.kernels.quant_kernels import finish_at
from wmtp.measure.kernels.quant_mma_frag import mma, quarters
from wmtp.measure.kernels.quant_moe import MOE_PAIR_AUTO, MOE_PAIR_AUTO_MIN_EXPERTS

N_TILE, MAX_ROWS = 8, 16  # tokens: an MMA's N tile of 8, two of them (`TOK2`) above N_TILE
# `quant_gemm.int4_gemm`, path='auto' with repacked weights, from measure/results/h200-quant-v11 (run2): this kernel
# (the -136 MMA, split-K for AUTO_CTAS programs per SM) for bf16 rows M <= AUTO_MAX_ROWS, >= AUTO_BYTES of codes
AUTO_CTAS, AUTO_BYTES, AUTO_MAX_ROWS = 8, 8 << 20, 8
# ... planned (`mma_plan(fit=True)`) for at most AUTO_FIT_CTAS programs per SM: the 4-warp kernel's <= 56 registers
# (ptxas for sm_90, tests/i4_compile_probe.py) let 9 reside on an SM, so the grid runs in one wave; the plan above had
# q122 lin_in at 1280 programs, 1.08 waves (h200-quant-v13 run1: 0.87x the time at M = 1..8, the other shapes alike)
AUTO_FIT_CTAS = 9
# the register prefetch (`int4_mma_gemm(prefetch=True)`) is not taken: h200-quant-v13 run1, 1.03-1.15x geomean
# >= AUTO_W1_BYTES of codes: 1 warp a program, AUTO_W1_CTAS per SM (h200-quant-v12 run1: lm_heads 0.77-0.86x)
AUTO_W1_BYTES, AUTO_W1_CTAS = 64 << 20, 16
# grouped experts: code - 8 by the packed FMA, not the -136 MMA (h200-quant-v11 run4: faster at 4-16 tokens; run5: 1-2)
MOE_SUB_MMA = False
# from MOE_W1_MIN_TOKENS: 1 warp a program, MOE_W1_CTAS per SM (h200-quant-v12: 0.70-0.96x: 0.7-0.96x at 1-16 tokens)
MOE_W1_MIN_TOKENS, MOE_W1_CTAS = 1, 16


def pack_int4_mma(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [..., N, K / 2] (`quant_formats.quantize_int4_group`'s codes; MoE: [E, N, K / 2]) -> int32 words
    [..., ceil(N/16), 2 ceil(K/128), 32, 4] in the layout of the module docstring."""
    if packed.dim() not in (2, 3) or packed.dtype != torch.uint8:
        raise ValueError(f"pack_int4_mma takes uint8 [N, K/2] or [E, N, K/2] codes, got {packed.dtype} "
                         f"{tuple(packed.shape)}")
    lead, n, k = packed.shape[:-2], packed.shape[-2], packed.shape[-1] * 2
    p = packed.to(torch.int64)
    codes = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(*lead, n, k)
    t, kc = triton.cdiv(n, 16), 2 * triton.cdiv(k, GROUP)
    full = torch.full((*lead, 16 * t, 64 * kc), 8, dtype=torch.int64, device=packed.device)
    full[..., :n, :k] = codes
    # [.., tile, hi, g, chunk, q, c, e]: row 16 tile + 8 hi + g, k = 64 chunk + 16 q + 4 c + e
    v = full.reshape(-1, t, 2, 8, kc, 4, 4, 4)
    words = torch.zeros(v.shape[0], t, kc, 8, 4, 4, dtype=torch.int64, device=packed.device)  # [.., chunk, g, q, c]
    for hi in range(2):
        for e in range(4):
            j = hi + 2 * (e >> 1) + 4 * (e & 1)
            words |= v[:, :, hi, :, :, :, :, e].permute(0, 1, 3, 2, 4, 5) << (4 * j)
    words = torch.where(words >= 1 << 31, words - (1 << 32), words)
    return words.reshape(*lead, t, kc, 32, 4).to(torch.int32).contiguous()


@triton.jit
def _lanes(tp, N, NW: tl.constexpr):
    """Per lane of program tile group tp: (lane, g, q, its row tile clamped to the last, row0, row-g ok, row-g+8 ok)."""
    i = tl.arange(0, NW * 32)
    lane = i % 32
    g = lane // 4
    tile = tp * NW + i // 32
    n_tiles = tl.cdiv(N, 16)
    t_ok = tile < n_tiles
    row0 = tile * 16 + g
    return lane, g, lane % 4, tl.minimum(tile, n_tiles - 1), row0, t_ok & (row0 < N), t_ok & (row0 + 8 < N)


@triton.jit
def _group_loads(w_base, s_lo, s_hi, grp, j4):
    """Group grp's two chunks of words ([R, 4] each: the lane's 16 bytes a chunk) and its rows' two scales."""
    return (tl.load(w_base[:, None] + 2 * grp * 128 + j4), tl.load(w_base[:, None] + (2 * grp + 1) * 128 + j4),
            tl.load(s_lo + grp), tl.load(s_hi + grp))


@triton.jit
def _tiles(W, W_s, lane, q, tile, row0, x_base, x_base2, N, K2, n_groups, g_lo, g_hi, stride_wsn, NW: tl.constexpr,
           EMU: tl.constexpr, SUB_MMA: tl.constexpr, EVEN_K: tl.constexpr, TOK2: tl.constexpr, PF: tl.constexpr):
    """The fp32 accumulators of each lane (D fragment rows g / g + 8, tokens 2 q / 2 q + 1; with TOK2 also tokens
    8 + 2 q / 9 + 2 q) over 128-groups [g_lo, g_hi) of the lane's row tile (W, W_s: this matrix's words and group
    scales; x_base / x_base2: the lane's token rows, pairs 8 q ..). Loads unmasked: a tile past the last reads the
    last, a row past N reads row N - 1's scales (their results are never stored; padding codes are 8)."""
    w_base = W + (tile.to(tl.int64) * (2 * n_groups) * 32 + lane) * 4  # [R]: the lane's words of chunk 0
    s_lo = W_s + tl.minimum(row0, N - 1).to(tl.int64) * stride_wsn
    s_hi = W_s + tl.minimum(row0 + 8, N - 1).to(tl.int64) * stride_wsn
    j4 = tl.arange(0, 4)[None, :]
    acc0 = tl.zeros(q.shape, tl.float32)
    acc1 = tl.zeros(q.shape, tl.float32)
    acc2 = tl.zeros(q.shape, tl.float32)
    acc3 = tl.zeros(q.shape, tl.float32)
    acc4 = tl.zeros(q.shape, tl.float32)
    acc5 = tl.zeros(q.shape, tl.float32)
    acc6 = tl.zeros(q.shape, tl.float32)
    acc7 = tl.zeros(q.shape, tl.float32)
    if PF:  # group g_lo's words and scales, ahead of the loop (a program's split is never empty)
        wa, wb, sl, sh = _group_loads(w_base, s_lo, s_hi, g_lo, j4)
    for grp in range(g_lo, g_hi):
        if PF:  # the next group's loads issued before this group's MMAs wait on theirs (the last group: itself again)
            na, nb, nsl, nsh = _group_loads(w_base, s_lo, s_hi, tl.minimum(grp + 1, g_hi - 1), j4)
        else:
            wa, wb, sl, sh = _group_loads(w_base, s_lo, s_hi, grp, j4)
        c0, c1, c2, c3, c4, c5, c6, c7 = _group_chunk(wa, x_base, x_base2, 2 * grp, q, K2, j4, NW, EMU, SUB_MMA,
                                                      EVEN_K, TOK2)
        e0, e1, e2, e3, e4, e5, e6, e7 = _group_chunk(wb, x_base, x_base2, 2 * grp + 1, q, K2, j4, NW, EMU,
                                                      SUB_MMA, EVEN_K, TOK2)
        fl = sl.to(tl.float32)
        fh = sh.to(tl.float32)
        acc0 += (c0 + e0) * fl
        acc1 += (c1 + e1) * fl
        acc2 += (c2 + e2) * fh
        acc3 += (c3 + e3) * fh
        if TOK2:
            acc4 += (c4 + e4) * fl
            acc5 += (c5 + e5) * fl
            acc6 += (c6 + e6) * fh
            acc7 += (c7 + e7) * fh
        if PF:
            wa, wb, sl, sh = na, nb, nsl, nsh
    return acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7


@triton.jit(do_not_specialize=["M"])
def int4_mma_kernel(A32, W, W_s, Out, Part, Count, M, N, K2, n_groups, g_per_split, n_split,
                    stride_am, stride_wsn, stride_ps, stride_om, NW: tl.constexpr, SPLIT: tl.constexpr,
                    EMU: tl.constexpr, SUB_MMA: tl.constexpr, EVEN_K: tl.constexpr, TOK2: tl.constexpr,
                    PF: tl.constexpr):
    """Out [M, N] = A [M, K] @ dequant(W, W_s)^T for M <= 8 (TOK2: M <= 16, a second MMA N tile on the same
    dequantized words; A32: A's bf16 pairs as int32, K2 = K / 2 of them per row); program (pid, pid_k): row tiles
    NW pid .. + NW - 1, 128-groups [pid_k g_per_split, ..)."""
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    lane, g, q, tile, row0, r_lo_ok, r_hi_ok = _lanes(pid, N, NW)
    x_base = A32 + tl.minimum(g, M - 1).to(tl.int64) * stride_am + q * 8  # token g (past M: row M - 1, not stored)
    x_base2 = A32 + tl.minimum(g + 8, M - 1).to(tl.int64) * stride_am + q * 8
    g_lo = pid_k * g_per_split
    acc = _tiles(W, W_s, lane, q, tile, row0, x_base, x_base2, N, K2, n_groups, g_lo,
                 tl.minimum(g_lo + g_per_split, n_groups), stride_wsn, NW, EMU, SUB_MMA, EVEN_K, TOK2, PF)
    _finish(Out, Part, Count, acc, row0, 2 * q, r_lo_ok, r_hi_ok, M, pid, pid_k, n_split, stride_ps, stride_om, SPLIT,
            TOK2)


@triton.jit(do_not_specialize=["P"])
def int4_mma_moe_kernel(A32, W, W_s, Out, Part, Count, route_w, ids, P, N, K2, n_groups, g_per_split, n_split, top_k,
                        stride_am, stride_we, stride_wse, stride_wsn, stride_ps, stride_om, NW: tl.constexpr,
                        SPLIT: tl.constexpr, EMU: tl.constexpr, SUB_MMA: tl.constexpr, EVEN_K: tl.constexpr,
                        A_IS_PAIRS: tl.constexpr, SCALE: tl.constexpr, PF: tl.constexpr):
    """Grouped, one program per (token-expert pair p, tile group, K split) as `quant_moe`'s 'pair' mode: Out row p =
    A[p // top_k] (A[p] if A_IS_PAIRS) @ dequant(W[ids[p]])^T (times route_w[p] if SCALE); W: [E, tiles, chunks, 32,
    4] words. Every lane's B fragment is row p's (only token 0 is stored)."""
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    progs = tl.cdiv(tl.cdiv(N, 16), NW)
    pair = pid // progs
    e = tl.load(ids + pair).to(tl.int64)
    lane, g, q, tile, row0, r_lo_ok, r_hi_ok = _lanes(pid % progs, N, NW)
    a_row = pair if A_IS_PAIRS else pair // top_k
    x_base = A32 + a_row.to(tl.int64) * stride_am + q * 8
    g_lo = pid_k * g_per_split
    acc = _tiles(W + e * stride_we, W_s + e * stride_wse, lane, q, tile, row0, x_base, x_base, N, K2, n_groups, g_lo,
                 tl.minimum(g_lo + g_per_split, n_groups), stride_wsn, NW, EMU, SUB_MMA, EVEN_K, False, PF)
    if SCALE:
        rw = tl.load(route_w + pair).to(tl.float32)
        acc = acc[0] * rw, acc[1] * rw, acc[2] * rw, acc[3] * rw, acc[4], acc[5], acc[6], acc[7]
    row_off = pair.to(tl.int64) * stride_om
    _finish(Out + row_off, Part + row_off, Count, acc, row0, 2 * q, r_lo_ok, r_hi_ok, 1, pid, pid_k, n_split,
            stride_ps, stride_om, SPLIT, False)


@triton.jit
def _x_pairs(x_base, kc, q, K2, j4, EVEN_K: tl.constexpr):
    """The lane's 8 bf16 pairs of chunk kc (two 16-byte loads), as the B registers of its 4 sub-tiles."""
    if EVEN_K:
        xa = tl.load(x_base[:, None] + kc * 32 + j4)
        xb = tl.load(x_base[:, None] + kc * 32 + 4 + j4)
    else:  # K % 8 == 0: the lane's 4 pairs from p0 are all in K or all out
        p0 = kc * 32 + q * 8
        xa = tl.load(x_base[:, None] + kc * 32 + j4, mask=(p0 < K2)[:, None], other=0)
        xb = tl.load(x_base[:, None] + kc * 32 + 4 + j4, mask=(p0 + 4 < K2)[:, None], other=0)
    x0, x1, x2, x3 = quarters(xa)  # pairs 2c, 2c + 1 of sub-tile c: (x0, x1) c = 0, (x2, x3) c = 1
    x4, x5, x6, x7 = quarters(xb)
    return x0, x1, x2, x3, x4, x5, x6, x7


@triton.jit
def _group_chunk(wd, x_base, x_base2, kc, q, K2, j4, NW: tl.constexpr, EMU: tl.constexpr, SUB_MMA: tl.constexpr,
                 EVEN_K: tl.constexpr, TOK2: tl.constexpr):
    """Chunk kc of 64 k (a group's half; wd [R, 4]: the lane's words of its 4 sub-tiles) into fresh fp32 D fragments
    (tokens 0..7; with TOK2 also 8..15 from x_base2, on the same dequantized words): a group's two chunks' MMA chains
    are independent."""
    c0 = tl.zeros(q.shape, tl.float32)
    c1 = tl.zeros(q.shape, tl.float32)
    c2 = tl.zeros(q.shape, tl.float32)
    c3 = tl.zeros(q.shape, tl.float32)
    c4 = tl.zeros(q.shape, tl.float32)
    c5 = tl.zeros(q.shape, tl.float32)
    c6 = tl.zeros(q.shape, tl.float32)
    c7 = tl.zeros(q.shape, tl.float32)
    w0, w1, w2, w3 = quarters(wd)
    x0, x1, x2, x3, x4, x5, x6, x7 = _x_pairs(x_base, kc, q, K2, j4, EVEN_K)
    c0, c1, c2, c3 = mma(w0, x0, x1, c0, c1, c2, c3, NW, EMU, SUB_MMA)
    c0, c1, c2, c3 = mma(w1, x2, x3, c0, c1, c2, c3, NW, EMU, SUB_MMA)
    c0, c1, c2, c3 = mma(w2, x4, x5, c0, c1, c2, c3, NW, EMU, SUB_MMA)
    c0, c1, c2, c3 = mma(w3, x6, x7, c0, c1, c2, c3, NW, EMU, SUB_MMA)
    if TOK2:
        y0, y1, y2, y3, y4, y5, y6, y7 = _x_pairs(x_base2, kc, q, K2, j4, EVEN_K)
        c4, c5, c6, c7 = mma(w0, y0, y1, c4, c5, c6, c7, NW, EMU, SUB_MMA)
        c4, c5, c6, c7 = mma(w1, y2, y3, c4, c5, c6, c7, NW, EMU, SUB_MMA)
        c4, c5, c6, c7 = mma(w2, y4, y5, c4, c5, c6, c7, NW, EMU, SUB_MMA)
        c4, c5, c6, c7 = mma(w3, y6, y7, c4, c5, c6, c7, NW, EMU, SUB_MMA)
    return c0, c1, c2, c3, c4, c5, c6, c7


@triton.jit
def _join4(a0, a1, a2, a3):
    return tl.join(tl.join(a0, a1), tl.join(a2, a3))


@triton.jit
def _fragment(row0, tok0, r_lo_ok, r_hi_ok, M, stride_om):
    """Out offsets and masks of a D fragment, joined as its accumulators are: (row0, tok0), (row0, tok0 + 1),
    (row0 + 8, tok0), (row0 + 8, tok0 + 1)."""
    o0 = tok0.to(tl.int64) * stride_om + row0
    o1 = o0 + stride_om
    ok = _join4(r_lo_ok & (tok0 < M), r_lo_ok & (tok0 + 1 < M), r_hi_ok & (tok0 < M), r_hi_ok & (tok0 + 1 < M))
    return _join4(o0, o1, o0 + 8, o1 + 8), ok


@triton.jit
def _finish(Out, Part, Count, acc, row0, tok0, r_lo_ok, r_hi_ok, M, tile, pid_k, n_split, stride_ps, stride_om,
            SPLIT: tl.constexpr, TOK2: tl.constexpr):
    """The accumulators (acc: 8, the second four for tokens tok0 + 8 with TOK2) to Out[token, row], or with split-K
    through the partials and semaphore of `quant_kernels.finish_at` (one release per program)."""
    off, ok = _fragment(row0, tok0, r_lo_ok, r_hi_ok, M, stride_om)
    a = _join4(acc[0], acc[1], acc[2], acc[3])
    if TOK2:
        off2, ok2 = _fragment(row0, tok0 + 8, r_lo_ok, r_hi_ok, M, stride_om)
        finish_at(tl.join(a, _join4(acc[4], acc[5], acc[6], acc[7])), Out, Part, Count, tl.join(off, off2),
                  tl.join(ok, ok2), tile, pid_k, n_split, stride_ps, SPLIT)
    else:
        finish_at(a, Out, Part, Count, off, ok, tile, pid_k, n_split, stride_ps, SPLIT)


def mma_plan(m, n, k, sm, num_warps=4, split_k=None, ctas=4, fit=False):
    """(programs, split, groups per split): num_warps row tiles of 16 per program; split-K (automatic) until about
    `ctas` programs per SM (`fit`: at most, so that a grid of `ctas` resident programs an SM runs in one wave) while
    the fp32 partials (4 B per output and split) stay under an eighth of the weight bytes (K / 2 per row)."""
    groups = triton.cdiv(k, GROUP)
    progs = triton.cdiv(triton.cdiv(n, 16), num_warps)
    if split_k is None:
        split_k = max(1, min(splits_wanted(ctas, sm, progs, fit), groups, k // (64 * m)))
    elif not 1 <= split_k <= groups:
        raise ValueError(f"split_k must be in [1, {groups}] (K blocks of {GROUP}), got {split_k}")
    per = triton.cdiv(groups, split_k)
    return progs, triton.cdiv(groups, per), per


def int4_mma_gemm(x, w_mma, w_scale, n, out=None, split_k=None, num_warps=4, ctas=4, sm=None, counters=None,
                  emulate=None, sub_mma=True, prefetch=False, fit=False):
    """y [M, N] = x [M, K] (bf16, M <= 16, K % 8 == 0) @ dequant(w)^T with w in `pack_int4_mma`'s layout (w_mma) and its
    group scales w_scale [N, ceil(K / 128)]; out bf16. `counters(n)`: zeroed int32 split-K semaphores (default: new).
    `prefetch`: each warp loads the next group's words and scales before this group's MMAs (two groups in flight);
    `fit`: `mma_plan`'s one-wave split."""
    m, k = x.shape
    if x.dtype != torch.bfloat16 or not 1 <= m <= MAX_ROWS or k % 8 or x.stride(1) != 1 or x.stride(0) % 8:
        raise ValueError(f"int4_mma_gemm takes bf16 x [1..{MAX_ROWS}, K % 8 == 0] with contiguous, 16-byte aligned "
                         f"rows, got {x.dtype} {tuple(x.shape)} strides {x.stride()}")
    t, kc = triton.cdiv(n, 16), 2 * triton.cdiv(k, GROUP)
    if tuple(w_mma.shape) != (t, kc, 32, 4) or w_mma.dtype != torch.int32 or tuple(w_scale.shape) != (n, kc // 2):
        raise ValueError(f"w_mma must be int32 [{t}, {kc}, 32, 4] and w_scale [{n}, {kc // 2}], got "
                         f"{tuple(w_mma.shape)} {w_mma.dtype} and {tuple(w_scale.shape)}")
    if w_scale.stride(1) != 1:
        raise ValueError("w_scale must be contiguous along K's groups")
    if sm is None:
        sm = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    progs, split, per = mma_plan(m, n, k, sm, num_warps, split_k, ctas, fit)
    out = torch.empty((m, n), dtype=torch.bfloat16, device=x.device) if out is None else out
    part = torch.empty((split, m, n), dtype=torch.float32, device=x.device) if split > 1 else out
    count = (counters(progs) if counters else torch.zeros(progs, dtype=torch.int32, device=x.device)) if split > 1 \
        else out
    emu = (not x.is_cuda) if emulate is None else emulate
    int4_mma_kernel[(progs, split)](
        x.view(torch.int32), w_mma, w_scale, out, part, count, m, n, k // 2, kc // 2, per, split,
        x.stride(0) // 2, w_scale.stride(0), part.stride(0) if split > 1 else 0, out.stride(0),
        NW=num_warps, SPLIT=split > 1, EMU=emu, SUB_MMA=sub_mma, EVEN_K=k % GROUP == 0, TOK2=m > N_TILE, PF=prefetch,
        num_warps=num_warps)
    return out


def mma_auto(x, n, k) -> bool:
    """Whether `quant_gemm.int4_gemm` path='auto' (given the repacked weights) takes this kernel for rows x, [N, K]."""
    return x.dtype == torch.bfloat16 and x.shape[0] <= AUTO_MAX_ROWS and k % 8 == 0 and n * k // 2 >= AUTO_BYTES


def mma_call(x, w_mma, w_scale, n, out, split_k, sm, counters):
    """`quant_gemm.int4_gemm`'s path 'mma' (and 'auto' where `mma_auto`): `int4_mma_gemm`, its plan by size."""
    if w_mma is None:
        raise ValueError("path 'mma' needs the weights in its layout: w_mma = quant_mma_i4.pack_int4_mma(w)")
    one = n * (x.shape[1] // 2) >= AUTO_W1_BYTES
    fit = not one and x.shape[0] <= N_TILE  # TOK2 (path 'mma' only): its build's 72 registers let 7 reside
    return int4_mma_gemm(x, w_mma, w_scale, n, out=out, split_k=split_k, num_warps=1 if one else 4,  # 1 warp: fma
                         ctas=AUTO_W1_CTAS if one else AUTO_FIT_CTAS if fit else AUTO_CTAS, sm=sm, counters=counters,
                         sub_mma=not one, fit=fit)


def moe_plan(pairs, n, k, sm, num_warps=4, split_k=None, ctas=AUTO_CTAS, fit=False):
    """(programs per pair, split, groups per split) of `int4_mma_moe_kernel`, as `mma_plan` over the pairs' programs
    (partials under an eighth of the routed weight bytes: split <= K / 64)."""
    groups = triton.cdiv(k, GROUP)
    progs = triton.cdiv(triton.cdiv(n, 16), num_warps)
    if split_k is None:
        split_k = max(1, min(splits_wanted(ctas, sm, max(1, pairs) * progs, fit), groups, k // 64))
    elif not 1 <= split_k <= groups:
        raise ValueError(f"split_k must be in [1, {groups}] (K blocks of {GROUP}), got {split_k}")
    per = triton.cdiv(groups, split_k)
    return progs, triton.cdiv(groups, per), per


def int4_mma_moe(x, w_mma, w_scale, ids, route_w, a_is_pairs, n, out=None, split_k=None, num_warps=4,
                 ctas=AUTO_CTAS, sm=None, counters=None, emulate=None, sub_mma=True, prefetch=False, fit=False):
    """Grouped W4A16 over token-expert pairs (`int4_mma_moe_kernel`): out [T*k, N] bf16, row p = x[p // k] (x[p] if
    a_is_pairs) @ dequant(expert ids[p])^T (times route_w[p]); x bf16 [T or T*k, K], K % 8 == 0; w_mma =
    `pack_int4_mma(w [E, N, K/2])`, w_scale [E, N, ceil(K/128)]; ids [T, k] int32 / int64; prefetch, fit: as
    `int4_mma_gemm`'s."""
    k = x.shape[1]
    if x.dtype != torch.bfloat16 or x.dim() != 2 or k % 8 or x.stride(1) != 1 or x.stride(0) % 8:
        raise ValueError(f"int4_mma_moe takes bf16 x [rows, K % 8 == 0] with contiguous, 16-byte aligned rows, got "
                         f"{x.dtype} {tuple(x.shape)}")
    t, kc = triton.cdiv(n, 16), 2 * triton.cdiv(k, GROUP)
    n_exp = w_mma.shape[0]
    if (w_mma.dim() != 5 or tuple(w_mma.shape[1:]) != (t, kc, 32, 4) or w_mma.dtype != torch.int32
            or tuple(w_scale.shape) != (n_exp, n, kc // 2) or w_scale.stride(2) != 1):
        raise ValueError(f"w_mma must be int32 [E, {t}, {kc}, 32, 4] and w_scale [E, {n}, {kc // 2}], got "
                         f"{tuple(w_mma.shape)} {w_mma.dtype} and {tuple(w_scale.shape)}")
    if ids.dim() != 2 or not ids.is_contiguous() or x.shape[0] != (ids.numel() if a_is_pairs else ids.shape[0]):
        raise ValueError(f"ids must be a contiguous [T, k] tensor with x's {x.shape[0]} rows as "
                         f"{'pairs' if a_is_pairs else 'tokens'}, got {tuple(ids.shape)}")
    pairs = ids.numel()
    if sm is None:
        sm = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    progs, split, per = moe_plan(pairs, n, k, sm, num_warps, split_k, ctas, fit)
    out = torch.empty((pairs, n), dtype=torch.bfloat16, device=x.device) if out is None else out
    if pairs == 0 or n == 0:
        return out
    part = torch.empty((split, pairs, n), dtype=torch.float32, device=x.device) if split > 1 else out
    live = pairs * progs
    count = (counters(live) if counters else torch.zeros(live, dtype=torch.int32, device=x.device)) if split > 1 \
        else out
    int4_mma_moe_kernel[(live, split)](
        x.view(torch.int32), w_mma, w_scale, out, part, count, route_w if route_w is not None else out, ids, pairs,
        n, k // 2, kc // 2, per, split, ids.shape[1], x.stride(0) // 2, w_mma.stride(0), w_scale.stride(0),
        w_scale.stride(1), part.stride(0) if split > 1 else 0, out.stride(0), NW=num_warps, SPLIT=split > 1,
        EMU=(not x.is_cuda) if emulate is None else emulate, SUB_MMA=sub_mma, EVEN_K=k % GROUP == 0,
        A_IS_PAIRS=a_is_pairs, SCALE=route_w is not None, PF=prefetch, num_warps=num_warps)
    return out


def moe_mma_call(path, tiles, x, w_mma, w_scale, ids, route_w, a_is_pairs, out, split_k, sm, counters):
    """`quant_gemm.int4_moe_gemm`'s path 'mma' (needs w_mma), and 'auto' (no tile named) given w_mma for bf16 rows,
    K % 8 == 0, the tokens and experts of `quant_moe.MOE_PAIR_AUTO` (pairs rarely repeat an expert, which this
    kernel, like 'pair', streams again per pair); None where neither applies."""
    if path == "mma" and w_mma is None:
        raise ValueError("path 'mma' needs the weights in its layout: w_mma = quant_mma_i4.pack_int4_mma(w)")
    auto = (path == "auto" and tiles == (None, None, None) and w_mma is not None and x.dtype == torch.bfloat16
            and x.shape[1] % 8 == 0 and ids.dim() == 2 and ids.shape[0] <= MOE_PAIR_AUTO["int4_group"][-1][1]
            and w_mma.shape[0] >= MOE_PAIR_AUTO_MIN_EXPERTS)
    if path != "mma" and not auto:
        return None
    one = ids.shape[0] >= MOE_W1_MIN_TOKENS
    return int4_mma_moe(x, w_mma, w_scale, ids, route_w, a_is_pairs, w_scale.shape[1], out=out, split_k=split_k,
                        num_warps=1 if one else 4, ctas=MOE_W1_CTAS if one else AUTO_CTAS, sm=sm, counters=counters,
                        sub_mma=MOE_SUB_MMA)
