"""Paged split-KV attention, sub-block variant ("sub"): one program holds each K/V tile once for up to four
row sub-blocks of a KV group, so a group's rows are padded to a multiple of 16, not to a power of two.

Rows and keys as in `paged_attention` (tile row g of row block mb is the group's row mb * ROWS + g =
query head * n_q + query token). Row block mb covers ROWS rows, split into sub-blocks of SUB0..SUB3 rows
(powers of two, 0 = absent; `wmtp.kernel_plan.sub_parts`): 80 rows run as 64 + 16, not as 128. Every
sub-block keeps its own online softmax (base 2) over the same K/V tile.

The splits are merged one of three ways (`merge`):
- "kernel": a second kernel, grid (total_q, q_heads, head_dim / BLOCK_D), loads every split's log-sum-exp
  at once and the partial outputs in chunks that do not wait on them (two dependent loads, not two per
  chunk of splits);
- "pdl": the same kernel launched as a programmatic dependent launch (Hopper): it is scheduled while the
  split kernel runs and waits for it in-kernel (`griddepcontrol.wait`);
- "fused": no second launch: after writing its partial, each program takes a ticket from a per-tile
  semaphore; the last of the tile's splits merges all of them (in split order) and writes the output.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wmtp.kernel_plan import AttentionPlan

LOG2E = 1.4426950408889634
MERGE_CHUNK = 16  # splits per partial-output load in the merge kernel


@triton.jit
def kv_tile(K, V, kv_indices, kv_start, start_n, hi, kvh, dims, stride_kt, stride_kh, stride_vt, stride_vh,
             BLOCK_N: tl.constexpr, MASK: tl.constexpr):
    """Slots, K and V of one tile of keys (masked only for a split's last partial tile)."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    n_ok = offs_n < hi
    if MASK:
        slots = tl.load(kv_indices + kv_start + offs_n, mask=n_ok, other=0).to(tl.int64)
        k = tl.load(K + slots[:, None] * stride_kt + kvh * stride_kh + dims[None, :], mask=n_ok[:, None], other=0.0)
        v = tl.load(V + slots[:, None] * stride_vt + kvh * stride_vh + dims[None, :], mask=n_ok[:, None], other=0.0)
    else:
        slots = tl.load(kv_indices + kv_start + offs_n).to(tl.int64)
        k = tl.load(K + slots[:, None] * stride_kt + kvh * stride_kh + dims[None, :])
        v = tl.load(V + slots[:, None] * stride_vt + kvh * stride_vh + dims[None, :])
    return offs_n, n_ok, k, v


@triton.jit
def softmax_tile_step(q, acc, m_i, l_i, k, v, offs_n, n_ok, limit, qk_scale, MASK: tl.constexpr):
    """One K/V tile against a block of query rows (online softmax, base 2; the rows and sub kernels).
    Without MASK every row sees every key of the tile, so the running maximum is finite."""
    s = tl.dot(q, tl.trans(k.to(q.dtype))) * qk_scale
    if MASK:
        s = tl.where(n_ok[None, :] & (offs_n[None, :] <= limit[:, None]), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = m_new
    p = tl.math.exp2(s - m_safe[:, None])
    alpha = tl.math.exp2(m_i - m_safe)
    acc = acc * alpha[:, None] + tl.dot(p.to(q.dtype), v.to(q.dtype))
    l_i = l_i * alpha + tl.sum(p, 1)
    return acc, m_new, l_i


@triton.jit
def _step_all(k, v, offs_n, n_ok, qk_scale,
              q0, a0, m0, l0, t0, q1, a1, m1, l1, t1, q2, a2, m2, l2, t2, q3, a3, m3, l3, t3,
              SUB1: tl.constexpr, SUB2: tl.constexpr, SUB3: tl.constexpr, MASK: tl.constexpr):
    """The tile against every present sub-block (t*: each row's last visible key)."""
    a0, m0, l0 = softmax_tile_step(q0, a0, m0, l0, k, v, offs_n, n_ok, t0, qk_scale, MASK)
    if SUB1 > 0:
        a1, m1, l1 = softmax_tile_step(q1, a1, m1, l1, k, v, offs_n, n_ok, t1, qk_scale, MASK)
    if SUB2 > 0:
        a2, m2, l2 = softmax_tile_step(q2, a2, m2, l2, k, v, offs_n, n_ok, t2, qk_scale, MASK)
    if SUB3 > 0:
        a3, m3, l3 = softmax_tile_step(q3, a3, m3, l3, k, v, offs_n, n_ok, t3, qk_scale, MASK)
    return a0, m0, l0, a1, m1, l1, a2, m2, l2, a3, m3, l3


@triton.jit
def _sub_rows(Q, q_start, n_q, n_kv, mb, kvh, group, stride_qt, stride_qh, dims,
              ROWS: tl.constexpr, OFF: tl.constexpr, SUB: tl.constexpr, DECODE: tl.constexpr,
              UPCAST: tl.constexpr):
    """A sub-block's queries, row mask, query heads, token rows and last visible keys."""
    local = OFF + tl.arange(0, SUB)
    g = mb * ROWS + local
    if DECODE:
        h_local = g
        qi = g * 0
    else:
        h_local = g // n_q
        qi = g % n_q
    ok = (local < ROWS) & (g < group * n_q)
    head = kvh * group + h_local
    q = tl.load(Q + (q_start + qi)[:, None].to(tl.int64) * stride_qt + head[:, None] * stride_qh + dims[None, :],
                mask=ok[:, None], other=0.0)
    if UPCAST:  # Triton's CPU interpreter computes bf16 dots wrongly; it runs them in fp32
        q = q.to(tl.float32)
    return q, ok, head, (q_start + qi).to(tl.int64), n_kv - n_q + qi


@triton.jit
def _sub_init(Q, q_start, n_q, n_kv, mb, kvh, group, stride_qt, stride_qh, dims, ROWS: tl.constexpr,
              OFF: tl.constexpr, SUB: tl.constexpr, HEAD_DIM: tl.constexpr, DECODE: tl.constexpr,
              UPCAST: tl.constexpr):
    """A sub-block's rows (`_sub_rows`) and its empty online-softmax state."""
    q, ok, head, r, t = _sub_rows(Q, q_start, n_q, n_kv, mb, kvh, group, stride_qt, stride_qh, dims, ROWS, OFF,
                                  SUB, DECODE, UPCAST)
    acc = tl.zeros([SUB, HEAD_DIM], tl.float32)
    return q, ok, head, r, t, acc, tl.full([SUB], float("-inf"), tl.float32), tl.zeros([SUB], tl.float32)


@triton.jit
def _next_slots(kv_indices, kv_start, start, end, BLOCK_N: tl.constexpr):
    """Slots of the tile of keys at `start` (slot 0 past `end`: a harmless address to prefetch)."""
    offs = start + tl.arange(0, BLOCK_N)
    return tl.load(kv_indices + kv_start + offs, mask=offs < end, other=0).to(tl.int64)


@triton.jit
def _l2_prefetch(K, V, slots, kvh, stride_kt, stride_kh, stride_vt, stride_vh, LINES: tl.constexpr,
                 LINE_ELEMS: tl.constexpr):
    """Ask L2 for the K and V rows of `slots` (one `prefetch.global.L2` per 128-byte line); nothing waits on it."""
    lines = (tl.arange(0, LINES) * LINE_ELEMS)[None, :]
    tl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l",
                              [K + slots[:, None] * stride_kt + kvh * stride_kh + lines], dtype=tl.int32,
                              is_pure=False, pack=1)
    tl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l",
                              [V + slots[:, None] * stride_vt + kvh * stride_vh + lines], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def _sub_store(acc, m_i, l_i, ok, head, t, split, dims, MidO, MidL, v_scale,
               stride_ot, stride_oh, stride_os, stride_lt, stride_lh):
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.math.log2(l_safe))
    o_ptrs = MidO + t[:, None] * stride_ot + head[:, None] * stride_oh + split * stride_os + dims[None, :]
    tl.store(o_ptrs, acc * (v_scale / l_safe)[:, None], mask=ok[:, None])
    tl.store(MidL + t * stride_lt + head * stride_lh + split, lse, mask=ok)


@triton.jit
def _sub_merge(ok, head, t, dims, MidO, MidL, Out, num_splits, stride_ot, stride_oh, stride_os, stride_lt,
               stride_lh, stride_outt, stride_outh, SUB: tl.constexpr, HEAD_DIM: tl.constexpr,
               SPLIT_BLOCK: tl.constexpr):
    """The fused merge of one sub-block's rows over every split (run by the tile's last program; `.cg`
    loads: the partials were written by other multiprocessors)."""
    m = tl.full([SUB], float("-inf"), tl.float32)
    l_ptrs = MidL + t[:, None] * stride_lt + head[:, None] * stride_lh
    for s0 in range(0, num_splits, SPLIT_BLOCK):
        sp = s0 + tl.arange(0, SPLIT_BLOCK)
        lse = tl.load(l_ptrs + sp[None, :], mask=ok[:, None] & (sp[None, :] < num_splits), other=float("-inf"),
                      cache_modifier=".cg")
        m = tl.maximum(m, tl.max(lse, 1))
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    acc = tl.zeros([SUB, HEAD_DIM], tl.float32)
    den = tl.zeros([SUB], tl.float32)
    o_ptrs = MidO + t[:, None] * stride_ot + head[:, None] * stride_oh + dims[None, :]
    for s in range(0, num_splits):
        w = tl.math.exp2(tl.load(MidL + t * stride_lt + head * stride_lh + s, mask=ok, other=float("-inf"),
                                 cache_modifier=".cg") - m_safe)
        acc += w[:, None] * tl.load(o_ptrs + s * stride_os, mask=ok[:, None], other=0.0, cache_modifier=".cg")
        den += w
    tl.store(Out + t[:, None] * stride_outt + head[:, None] * stride_outh + dims[None, :],
             (acc / den[:, None]).to(Out.dtype.element_ty), mask=ok[:, None])


@triton.jit
def split_bounds(qo_indptr, kv_indptr, b, split, num_splits, BLOCK_N: tl.constexpr, DECODE: tl.constexpr):
    """Request b's query rows and keys, and split `split`'s key range [lo, hi): whole tiles, so that a split
    has one partial tile at most (the rows and sub kernels)."""
    if DECODE:  # one query row per request: no qo_indptr to read
        q_start = b
        n_q = 1
    else:
        q_start = tl.load(qo_indptr + b)
        n_q = tl.load(qo_indptr + b + 1) - q_start
    kv_start = tl.load(kv_indptr + b)
    n_kv = tl.load(kv_indptr + b + 1) - kv_start
    split_len = tl.cdiv(tl.cdiv(n_kv, num_splits), BLOCK_N) * BLOCK_N
    lo = split * split_len
    return q_start, n_q, kv_start, n_kv, lo, tl.minimum(lo + split_len, n_kv)


@triton.jit
def _sub_split_kernel(
    Q, K, V, qo_indptr, kv_indptr, kv_indices, MidO, MidL, Out, Count,
    qk_scale, v_scale, num_splits, group,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
    stride_ot, stride_oh, stride_os, stride_lt, stride_lh, stride_outt, stride_outh,
    M_BLOCKS: tl.constexpr, ROWS: tl.constexpr, SUB0: tl.constexpr, SUB1: tl.constexpr, SUB2: tl.constexpr,
    SUB3: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, UPCAST: tl.constexpr,
    DECODE: tl.constexpr, FUSED: tl.constexpr, PDL: tl.constexpr, SPLIT_BLOCK: tl.constexpr,
    PREFETCH: tl.constexpr = False, LINES: tl.constexpr = 1, LINE_ELEMS: tl.constexpr = 64,
):
    """Grid (M_BLOCKS * kv_heads, splits, B); row blocks of one (KV head, split) are launch neighbours."""
    if PDL:  # let the merge kernel be scheduled now; it waits for this grid in-kernel
        tl.extra.cuda.gdc_launch_dependents()
    mb = tl.program_id(0) % M_BLOCKS
    kvh = tl.program_id(0) // M_BLOCKS
    split = tl.program_id(1)
    b = tl.program_id(2)
    q_start, n_q, kv_start, n_kv, lo, hi = split_bounds(qo_indptr, kv_indptr, b, split, num_splits, BLOCK_N, DECODE)
    dims = tl.arange(0, HEAD_DIM)
    q0, ok0, h0, r0, t0, a0, m0, l0 = _sub_init(Q, q_start, n_q, n_kv, mb, kvh, group, stride_qt, stride_qh,
                                                dims, ROWS, 0, SUB0, HEAD_DIM, DECODE, UPCAST)
    q1, ok1, h1, r1, t1, a1, m1, l1 = q0, ok0, h0, r0, t0, a0, m0, l0  # stand-ins for absent sub-blocks
    q2, ok2, h2, r2, t2, a2, m2, l2 = q0, ok0, h0, r0, t0, a0, m0, l0
    q3, ok3, h3, r3, t3, a3, m3, l3 = q0, ok0, h0, r0, t0, a0, m0, l0
    if SUB1 > 0:
        q1, ok1, h1, r1, t1, a1, m1, l1 = _sub_init(Q, q_start, n_q, n_kv, mb, kvh, group, stride_qt, stride_qh,
                                                    dims, ROWS, SUB0, SUB1, HEAD_DIM, DECODE, UPCAST)
    if SUB2 > 0:
        q2, ok2, h2, r2, t2, a2, m2, l2 = _sub_init(Q, q_start, n_q, n_kv, mb, kvh, group, stride_qt, stride_qh,
                                                    dims, ROWS, SUB0 + SUB1, SUB2, HEAD_DIM, DECODE, UPCAST)
    if SUB3 > 0:
        q3, ok3, h3, r3, t3, a3, m3, l3 = _sub_init(Q, q_start, n_q, n_kv, mb, kvh, group, stride_qt, stride_qh,
                                                    dims, ROWS, SUB0 + SUB1 + SUB2, SUB3, HEAD_DIM, DECODE, UPCAST)
    full_hi = tl.minimum(hi, n_kv - n_q + 1)  # keys below it are seen by every row
    full_end = lo + tl.maximum(full_hi - lo, 0) // BLOCK_N * BLOCK_N
    if PREFETCH:  # the next full tile's K/V rows head for L2 while this tile is computed (slots one tile ahead)
        s_pf = _next_slots(kv_indices, kv_start, lo + BLOCK_N, full_end, BLOCK_N)
    for start_n in range(lo, full_end, BLOCK_N):
        if PREFETCH:
            _l2_prefetch(K, V, s_pf, kvh, stride_kt, stride_kh, stride_vt, stride_vh, LINES, LINE_ELEMS)
            s_pf = _next_slots(kv_indices, kv_start, start_n + 2 * BLOCK_N, full_end, BLOCK_N)
        offs_n, n_ok, k, v = kv_tile(K, V, kv_indices, kv_start, start_n, hi, kvh, dims, stride_kt, stride_kh,
                                      stride_vt, stride_vh, BLOCK_N, False)
        a0, m0, l0, a1, m1, l1, a2, m2, l2, a3, m3, l3 = _step_all(
            k, v, offs_n, n_ok, qk_scale, q0, a0, m0, l0, t0, q1, a1, m1, l1, t1, q2, a2, m2, l2, t2,
            q3, a3, m3, l3, t3, SUB1, SUB2, SUB3, False)
    for start_n in range(full_end, hi, BLOCK_N):
        offs_n, n_ok, k, v = kv_tile(K, V, kv_indices, kv_start, start_n, hi, kvh, dims, stride_kt, stride_kh,
                                      stride_vt, stride_vh, BLOCK_N, True)
        a0, m0, l0, a1, m1, l1, a2, m2, l2, a3, m3, l3 = _step_all(
            k, v, offs_n, n_ok, qk_scale, q0, a0, m0, l0, t0, q1, a1, m1, l1, t1, q2, a2, m2, l2, t2,
            q3, a3, m3, l3, t3, SUB1, SUB2, SUB3, True)
    _sub_store(a0, m0, l0, ok0, h0, r0, split, dims, MidO, MidL, v_scale, stride_ot, stride_oh, stride_os,
               stride_lt, stride_lh)
    if SUB1 > 0:
        _sub_store(a1, m1, l1, ok1, h1, r1, split, dims, MidO, MidL, v_scale, stride_ot, stride_oh, stride_os,
                   stride_lt, stride_lh)
    if SUB2 > 0:
        _sub_store(a2, m2, l2, ok2, h2, r2, split, dims, MidO, MidL, v_scale, stride_ot, stride_oh, stride_os,
                   stride_lt, stride_lh)
    if SUB3 > 0:
        _sub_store(a3, m3, l3, ok3, h3, r3, split, dims, MidO, MidL, v_scale, stride_ot, stride_oh, stride_os,
                   stride_lt, stride_lh)
    if FUSED:
        tl.debug_barrier()  # every thread's partial is stored before the release below
        tile = (b * tl.num_programs(0) + tl.program_id(0)).to(tl.int64)
        done = tl.atomic_add(Count + tile, 1, sem="acq_rel", scope="gpu")
        if done == num_splits - 1:
            _sub_merge(ok0, h0, r0, dims, MidO, MidL, Out, num_splits, stride_ot, stride_oh, stride_os, stride_lt,
                       stride_lh, stride_outt, stride_outh, SUB0, HEAD_DIM, SPLIT_BLOCK)
            if SUB1 > 0:
                _sub_merge(ok1, h1, r1, dims, MidO, MidL, Out, num_splits, stride_ot, stride_oh, stride_os,
                           stride_lt, stride_lh, stride_outt, stride_outh, SUB1, HEAD_DIM, SPLIT_BLOCK)
            if SUB2 > 0:
                _sub_merge(ok2, h2, r2, dims, MidO, MidL, Out, num_splits, stride_ot, stride_oh, stride_os,
                           stride_lt, stride_lh, stride_outt, stride_outh, SUB2, HEAD_DIM, SPLIT_BLOCK)
            if SUB3 > 0:
                _sub_merge(ok3, h3, r3, dims, MidO, MidL, Out, num_splits, stride_ot, stride_oh, stride_os,
                           stride_lt, stride_lh, stride_outt, stride_outh, SUB3, HEAD_DIM, SPLIT_BLOCK)
            tl.atomic_xchg(Count + tile, 0, sem="relaxed", scope="gpu")  # re-arm for the next launch


@triton.jit
def _merge2_kernel(
    MidO, MidL, Out, num_splits,
    stride_ot, stride_oh, stride_os, stride_lt, stride_lh, stride_outt, stride_outh,
    BLOCK_D: tl.constexpr, SPLIT_ALL: tl.constexpr, CHUNK: tl.constexpr, PDL: tl.constexpr,
):
    """Log-sum-exp merge of the splits: all split weights from one load, then the partial outputs in
    chunks whose loads do not depend on them."""
    if PDL:
        tl.extra.cuda.gdc_wait()
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    dims = tl.program_id(2) * BLOCK_D + tl.arange(0, BLOCK_D)
    l_row = MidL + t * stride_lt + h * stride_lh
    sp_all = tl.arange(0, SPLIT_ALL)
    lse_all = tl.load(l_row + sp_all, mask=sp_all < num_splits, other=float("-inf"))
    m = tl.max(lse_all, 0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    den = tl.sum(tl.math.exp2(lse_all - m_safe), 0)
    acc = tl.zeros([BLOCK_D], tl.float32)
    o_row = MidO + t * stride_ot + h * stride_oh + dims[None, :]
    for s0 in range(0, num_splits, CHUNK):
        sp = s0 + tl.arange(0, CHUNK)
        ok = sp < num_splits
        o = tl.load(o_row + sp[:, None] * stride_os, mask=ok[:, None], other=0.0)
        w = tl.math.exp2(tl.load(l_row + sp, mask=ok, other=float("-inf")) - m_safe)
        acc += tl.sum(w[:, None] * o, 0)
    tl.store(Out + t * stride_outt + h * stride_outh + dims, (acc / den).to(Out.dtype.element_ty))


_COUNTERS: dict = {}


def _counters(device: torch.device, n: int) -> torch.Tensor:
    """The fused merge's semaphores: zeroed once, re-armed by the program that merges."""
    key = str(device)
    buf = _COUNTERS.get(key)
    if buf is None or buf.numel() < n:
        buf = torch.zeros(max(n, 4096), dtype=torch.int32, device=device)
        _COUNTERS[key] = buf
    return buf


def sub_attention(q, k_pool, v_pool, qo, kv_indptr, kv_indices, out, plan: AttentionPlan, qk_scale: float,
                  v_scale: float, decode: bool, upcast: bool, merge: str = "kernel",
                  only: str | None = None, prefetch: bool = False) -> torch.Tensor:
    """Launch the sub-block kernel (and the merge kernel unless `merge` is "fused"); `qk_scale` includes
    log2(e). Inputs are checked by `paged_attention`. `only` ("split" or "merge": one of the two launches,
    on unset partials) exists for timing the two apart. `prefetch`: L2 prefetch of the next K/V tile (CUDA only;
    not measured yet, see measure/results/h200-kernels-v3)."""
    if merge not in ("kernel", "pdl", "fused"):
        raise ValueError(f"unknown merge {merge!r} (kernel, pdl, fused)")
    if merge == "pdl" and (q.device.type != "cuda" or torch.cuda.get_device_capability(q.device)[0] < 9):
        raise ValueError("merge='pdl' needs a Hopper (sm_90) or newer GPU")
    if prefetch and (q.device.type != "cuda" or upcast):
        raise ValueError("prefetch=True needs a CUDA GPU (inline PTX; the interpreter cannot run it)")
    total_q, hq, hd = q.shape
    hkv = k_pool.shape[1]
    bsz = kv_indptr.numel() - 1
    splits = plan.splits
    mid_o = torch.empty((total_q, hq, splits, hd), dtype=torch.float32, device=q.device)
    mid_l = torch.empty((total_q, hq, splits), dtype=torch.float32, device=q.device)
    grid0 = plan.m_blocks * hkv
    count = _counters(q.device, bsz * grid0) if merge == "fused" else mid_l
    subs = tuple(plan.subs) + (0,) * (4 - len(plan.subs))
    mids = (mid_o.stride(0), mid_o.stride(1), mid_o.stride(2), mid_l.stride(0), mid_l.stride(1))
    if only not in (None, "split", "merge"):
        raise ValueError(f"only must be None, 'split' or 'merge', got {only!r}")
    if only != "merge":
        _sub_split_kernel[(grid0, splits, bsz)](
            q, k_pool, v_pool, qo, kv_indptr, kv_indices, mid_o, mid_l, out, count,
            qk_scale, v_scale, splits, hq // hkv,
            q.stride(0), q.stride(1), k_pool.stride(0), k_pool.stride(1), v_pool.stride(0), v_pool.stride(1),
            *mids, out.stride(0), out.stride(1),
            M_BLOCKS=plan.m_blocks, ROWS=plan.block_m, SUB0=subs[0], SUB1=subs[1], SUB2=subs[2], SUB3=subs[3],
            BLOCK_N=plan.block_n, HEAD_DIM=hd, UPCAST=upcast, DECODE=decode, FUSED=merge == "fused",
            PDL=merge == "pdl", SPLIT_BLOCK=min(64, triton.next_power_of_2(splits)), PREFETCH=prefetch,
            LINES=max(1, hd * k_pool.element_size() // 128), LINE_ELEMS=128 // k_pool.element_size(),
            num_warps=plan.num_warps, num_stages=plan.num_stages)
    if merge == "fused" or only == "split":
        return out
    block_d = min(hd, 64)
    extra = {"launch_pdl": True} if merge == "pdl" else {}
    _merge2_kernel[(total_q, hq, hd // block_d)](
        mid_o, mid_l, out, splits, *mids, out.stride(0), out.stride(1),
        BLOCK_D=block_d, SPLIT_ALL=triton.next_power_of_2(splits), CHUNK=MERGE_CHUNK, PDL=merge == "pdl",
        num_warps=4, **extra)
    return out
