"""Paged split-KV verify attention in the swap-AB form ("swap"): the keys take the MMA's M slot and the query rows
its N slot, so a KV group's rows are padded to a multiple of 16, not to a power of two, and every piece runs on
the warpgroup MMA (an N of 16 is legal there; an M of 16 is not).

Rows and keys as in `paged_attention`: row g of a KV group is query head g // n_q, query token g % n_q. One
program holds one KV head's rows for one split of the keys, as up to three pieces of R0 / R1 / R2 rows (powers of
two, 16..128; `wmtp.kernel_plan.swap_pieces`): 80 rows run as 64 + 16, 144 as 128 + 16. Per K/V tile of BLOCK_N
keys and per piece, S^T = K Q^T ([BLOCK_N, R]), an online softmax down the keys (base 2), and
O^T += V^T P^T ([head_dim, R]). The partials are written in `paged_attention`'s layout and merged by its merge
kernel (`merge_partials`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wmtp.measure.kernels.paged_rows import kv_tile, split_bounds


@triton.jit
def _piece_init(Q, q_start, n_q, n_kv, kvh, group, stride_qt, stride_qh, dims, OFF: tl.constexpr, R: tl.constexpr,
                HEAD_DIM: tl.constexpr, UPCAST: tl.constexpr):
    """A piece's transposed queries [HEAD_DIM, R], row mask, heads, token rows, last visible keys, empty state."""
    g = OFF + tl.arange(0, R)
    h_local = g // n_q
    qi = g % n_q
    ok = g < group * n_q
    head = kvh * group + h_local
    q_t = tl.load(Q + (q_start + qi)[None, :].to(tl.int64) * stride_qt + head[None, :] * stride_qh + dims[:, None],
                  mask=ok[None, :], other=0.0)
    if UPCAST:  # Triton's CPU interpreter computes bf16 dots wrongly; it runs them in fp32
        q_t = q_t.to(tl.float32)
    acc = tl.zeros([HEAD_DIM, R], tl.float32)
    m_i = tl.full([R], float("-inf"), tl.float32)
    return q_t, ok, head, (q_start + qi).to(tl.int64), n_kv - n_q + qi, acc, m_i, tl.zeros([R], tl.float32)


@triton.jit
def _kv_tile_t(K, V, kv_indices, kv_start, start_n, hi, kvh, dims, stride_kt, stride_kh, stride_vt, stride_vh,
               BLOCK_N: tl.constexpr, MASK: tl.constexpr):
    """Slots, K [BLOCK_N, D] and V loaded transposed, V^T [D, BLOCK_N] (so no transposed view feeds the MMA)."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    n_ok = offs_n < hi
    if MASK:
        slots = tl.load(kv_indices + kv_start + offs_n, mask=n_ok, other=0).to(tl.int64)
        k = tl.load(K + slots[:, None] * stride_kt + kvh * stride_kh + dims[None, :], mask=n_ok[:, None], other=0.0)
        v_t = tl.load(V + slots[None, :] * stride_vt + kvh * stride_vh + dims[:, None], mask=n_ok[None, :],
                      other=0.0)
    else:
        slots = tl.load(kv_indices + kv_start + offs_n).to(tl.int64)
        k = tl.load(K + slots[:, None] * stride_kt + kvh * stride_kh + dims[None, :])
        v_t = tl.load(V + slots[None, :] * stride_vt + kvh * stride_vh + dims[:, None])
    return offs_n, n_ok, k, v_t


@triton.jit
def _load_tile(K, V, kv_indices, kv_start, start_n, hi, kvh, dims, stride_kt, stride_kh, stride_vt, stride_vh,
               BLOCK_N: tl.constexpr, MASK: tl.constexpr, VT: tl.constexpr):
    """The tile's keys; V as loaded ([BLOCK_N, D], VT False) or transposed ([D, BLOCK_N], VT True)."""
    if VT:
        tile = _kv_tile_t(K, V, kv_indices, kv_start, start_n, hi, kvh, dims, stride_kt, stride_kh, stride_vt,
                          stride_vh, BLOCK_N, MASK)
    else:
        tile = kv_tile(K, V, kv_indices, kv_start, start_n, hi, kvh, dims, stride_kt, stride_kh, stride_vt, stride_vh,
                       BLOCK_N, MASK)
    return tile


@triton.jit
def _piece_step(q_t, acc, m_i, l_i, k, v, offs_n, n_ok, limit, qk_scale, MASK: tl.constexpr, VT: tl.constexpr):
    """One K/V tile against one piece: S^T = K Q^T, softmax down the keys, O^T += V^T P^T (v is V^T when VT)."""
    s = tl.dot(k.to(q_t.dtype), q_t) * qk_scale
    if MASK:
        s = tl.where(n_ok[:, None] & (offs_n[:, None] <= limit[None, :]), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_new = tl.maximum(m_i, tl.max(s, 0))
        m_safe = m_new
    p = tl.math.exp2(s - m_safe[None, :])
    alpha = tl.math.exp2(m_i - m_safe)
    if VT:
        acc = acc * alpha[None, :] + tl.dot(v.to(q_t.dtype), p.to(q_t.dtype))
    else:
        acc = acc * alpha[None, :] + tl.dot(tl.trans(v.to(q_t.dtype)), p.to(q_t.dtype))
    return acc, m_new, l_i * alpha + tl.sum(p, 0)


@triton.jit
def _piece_store(acc, m_i, l_i, ok, head, t, split, dims, MidO, MidL, v_scale,
                 stride_ot, stride_oh, stride_os, stride_lt, stride_lh):
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.math.log2(l_safe))
    o_ptrs = MidO + t[None, :] * stride_ot + head[None, :] * stride_oh + split * stride_os + dims[:, None]
    tl.store(o_ptrs, acc * (v_scale / l_safe)[None, :], mask=ok[None, :])
    tl.store(MidL + t * stride_lt + head * stride_lh + split, lse, mask=ok)


@triton.jit
def _swap_tile(k, v, offs_n, n_ok, qk_scale, q0, a0, m0, l0, t0, q1, a1, m1, l1, t1, q2, a2, m2, l2, t2,
               R1: tl.constexpr, R2: tl.constexpr, MASK: tl.constexpr, VT: tl.constexpr):
    a0, m0, l0 = _piece_step(q0, a0, m0, l0, k, v, offs_n, n_ok, t0, qk_scale, MASK, VT)
    if R1 > 0:
        a1, m1, l1 = _piece_step(q1, a1, m1, l1, k, v, offs_n, n_ok, t1, qk_scale, MASK, VT)
    if R2 > 0:
        a2, m2, l2 = _piece_step(q2, a2, m2, l2, k, v, offs_n, n_ok, t2, qk_scale, MASK, VT)
    return a0, m0, l0, a1, m1, l1, a2, m2, l2


@triton.jit
def _swap_split_kernel(
    Q, K, V, qo_indptr, kv_indptr, kv_indices, MidO, MidL,
    qk_scale, v_scale, num_splits, group,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
    stride_ot, stride_oh, stride_os, stride_lt, stride_lh,
    R0: tl.constexpr, R1: tl.constexpr, R2: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
    UPCAST: tl.constexpr, VT: tl.constexpr = False,
):
    """Grid (kv_heads, splits, B)."""
    kvh = tl.program_id(0)
    split = tl.program_id(1)
    b = tl.program_id(2)
    q_start, n_q, kv_start, n_kv, lo, hi = split_bounds(qo_indptr, kv_indptr, b, split, num_splits, BLOCK_N, False)
    dims = tl.arange(0, HEAD_DIM)
    q0, ok0, h0, r0, t0, a0, m0, l0 = _piece_init(Q, q_start, n_q, n_kv, kvh, group, stride_qt, stride_qh, dims,
                                                  0, R0, HEAD_DIM, UPCAST)
    q1, ok1, h1, r1, t1, a1, m1, l1 = q0, ok0, h0, r0, t0, a0, m0, l0  # stand-ins for absent pieces
    q2, ok2, h2, r2, t2, a2, m2, l2 = q0, ok0, h0, r0, t0, a0, m0, l0
    if R1 > 0:
        q1, ok1, h1, r1, t1, a1, m1, l1 = _piece_init(Q, q_start, n_q, n_kv, kvh, group, stride_qt, stride_qh,
                                                      dims, R0, R1, HEAD_DIM, UPCAST)
    if R2 > 0:
        q2, ok2, h2, r2, t2, a2, m2, l2 = _piece_init(Q, q_start, n_q, n_kv, kvh, group, stride_qt, stride_qh,
                                                      dims, R0 + R1, R2, HEAD_DIM, UPCAST)
    full_hi = tl.minimum(hi, n_kv - n_q + 1)  # keys below it are seen by every row
    full_end = lo + tl.maximum(full_hi - lo, 0) // BLOCK_N * BLOCK_N
    for start_n in range(lo, full_end, BLOCK_N):
        offs_n, n_ok, k, v = _load_tile(K, V, kv_indices, kv_start, start_n, hi, kvh, dims, stride_kt, stride_kh,
                                        stride_vt, stride_vh, BLOCK_N, False, VT)
        a0, m0, l0, a1, m1, l1, a2, m2, l2 = _swap_tile(k, v, offs_n, n_ok, qk_scale, q0, a0, m0, l0, t0,
                                                        q1, a1, m1, l1, t1, q2, a2, m2, l2, t2, R1, R2, False,
                                                        VT)
    for start_n in range(full_end, hi, BLOCK_N):
        offs_n, n_ok, k, v = _load_tile(K, V, kv_indices, kv_start, start_n, hi, kvh, dims, stride_kt, stride_kh,
                                        stride_vt, stride_vh, BLOCK_N, True, VT)
        a0, m0, l0, a1, m1, l1, a2, m2, l2 = _swap_tile(k, v, offs_n, n_ok, qk_scale, q0, a0, m0, l0, t0,
                                                        q1, a1, m1, l1, t1, q2, a2, m2, l2, t2, R1, R2, True,
                                                        VT)
    _piece_store(a0, m0, l0, ok0, h0, r0, split, dims, MidO, MidL, v_scale, stride_ot, stride_oh, stride_os,
                 stride_lt, stride_lh)
    if R1 > 0:
        _piece_store(a1, m1, l1, ok1, h1, r1, split, dims, MidO, MidL, v_scale, stride_ot, stride_oh, stride_os,
                     stride_lt, stride_lh)
    if R2 > 0:
        _piece_store(a2, m2, l2, ok2, h2, r2, split, dims, MidO, MidL, v_scale, stride_ot, stride_oh, stride_os,
                     stride_lt, stride_lh)


def swap_split(q, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices, mid_o, mid_l, *, pieces: tuple[int, ...],
               splits: int, block_n: int, num_warps: int, num_stages: int, qk_scale: float, v_scale: float,
               upcast: bool, vt: bool = False) -> None:
    """Launch the swap-AB split kernel: every (request, KV head, split) writes its rows' partials into `mid_o`
    [total_q, q_heads, splits, head_dim] and `mid_l` [total_q, q_heads, splits] (log2-sum-exp)."""
    if not 1 <= len(pieces) <= 3 or any(p < 16 or p & (p - 1) for p in pieces):
        raise ValueError(f"pieces must be one to three powers of two >= 16, got {pieces}")
    r = tuple(pieces) + (0,) * (3 - len(pieces))
    hkv = k_pool.shape[1]
    bsz = kv_indptr.numel() - 1
    _swap_split_kernel[(hkv, splits, bsz)](
        q, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices, mid_o, mid_l,
        qk_scale, v_scale, splits, q.shape[1] // hkv,
        q.stride(0), q.stride(1), k_pool.stride(0), k_pool.stride(1), v_pool.stride(0), v_pool.stride(1),
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2), mid_l.stride(0), mid_l.stride(1),
        R0=r[0], R1=r[1], R2=r[2], BLOCK_N=block_n, HEAD_DIM=q.shape[2], UPCAST=upcast, VT=vt,
        num_warps=num_warps, num_stages=num_stages)


def swap_partials(q, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices, **kw) -> tuple[torch.Tensor, torch.Tensor]:
    """Allocate the partial buffers and run `swap_split` (the merge is the caller's)."""
    total_q, hq, hd = q.shape
    splits = kw["splits"]
    mid_o = torch.empty((total_q, hq, splits, hd), dtype=torch.float32, device=q.device)
    mid_l = torch.empty((total_q, hq, splits), dtype=torch.float32, device=q.device)
    swap_split(q, k_pool, v_pool, qo_indptr, kv_indptr, kv_indices, mid_o, mid_l, **kw)
    return mid_o, mid_l


def swap_pieces(rows: int, max_piece: int = 128, max_pieces: int = 3) -> tuple[int, ...]:
    """Row pieces (powers of two, 16..max_piece, largest first) covering `rows` rows padded to a multiple of 16:
    80 -> (64, 16), 112 -> (64, 32, 16), 144 -> (128, 16); rounded up further only where `max_pieces` pieces cannot
    cover it (240 -> (128, 64, 32, 16) is four, so (128, 128))."""
    if not 1 <= rows <= max_piece * max_pieces:
        raise ValueError(f"rows must be in 1..{max_piece * max_pieces}, got {rows}")
    padded = -(-rows // 16) * 16
    while True:
        pieces, rest, size = [], padded, max_piece
        while rest and size >= 16:
            while rest >= size:
                pieces.append(size)
                rest -= size
            size //= 2
        if len(pieces) <= max_pieces:
            return tuple(pieces)
        padded += 16
