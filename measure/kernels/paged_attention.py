"""Paged split-KV attention (flash-decoding) for the draft decode and the verify / draft-extend pass.

KV pool `[slots, kv_heads, head_dim]` (page size 1) addressed through `kv_indptr` / `kv_indices`
(any index set: full, window, ring). Queries `[total_q, q_heads, head_dim]` with `qo_indptr`:
request b owns query rows qo_indptr[b]:qo_indptr[b+1] (n_q tokens, the newest positions of its
n_kv keys) and query i may see keys 0 .. n_kv - n_q + i (causal among the new tokens).

Stage 1, grid (B, kv_heads * m_blocks, splits): one program takes a KV group's query heads times
the request's n_q query tokens as the rows of one tile, so each K/V tile is loaded once for all of
them (a verify costs about one decode read), and walks its share of the keys with an online
softmax (base 2). Stage 2, grid (total_q, q_heads, head_dim / 64): merges the splits by log-sum-exp.
Decode is the case n_q = 1.
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

from wmtp.kernel_plan import ROWS_MAX, AttentionPlan, attention_plan, default_kernel, rows_plan, sub_plan, ws_plan
from wmtp.measure.kernels.paged_merge import FP8, merge_splits
from wmtp.measure.kernels.paged_rows import kv_tile, softmax_tile_step, split_bounds, sub_attention

LOG2E = 1.4426950408889634
_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _attn_split_kernel(
    Q, K, V, qo_indptr, kv_indptr, kv_indices, MidO, MidL,
    qk_scale, num_splits,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
    stride_ot, stride_oh, stride_os, stride_lt, stride_lh,
    GROUP: tl.constexpr, HEADS_PER_BLOCK: tl.constexpr, Q_PAD: tl.constexpr, M_BLOCKS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, UPCAST: tl.constexpr,
    DECODE: tl.constexpr,
):
    b = tl.program_id(0)
    kvh = tl.program_id(1) // M_BLOCKS
    mb = tl.program_id(1) % M_BLOCKS
    split = tl.program_id(2)

    if DECODE:  # one query row per request: no qo_indptr to read
        q_start = b
        n_q = 1
    else:
        q_start = tl.load(qo_indptr + b)
        n_q = tl.load(qo_indptr + b + 1) - q_start
    kv_start = tl.load(kv_indptr + b)
    n_kv = tl.load(kv_indptr + b + 1) - kv_start
    split_len = tl.cdiv(n_kv, num_splits)
    lo = split * split_len
    hi = tl.minimum(lo + split_len, n_kv)

    rows = tl.arange(0, BLOCK_M)
    h_local = mb * HEADS_PER_BLOCK + rows // Q_PAD
    qi = rows % Q_PAD
    row_ok = (rows // Q_PAD < HEADS_PER_BLOCK) & (h_local < GROUP) & (qi < n_q)
    head = kvh * GROUP + h_local
    dims = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + (q_start + qi)[:, None].to(tl.int64) * stride_qt + head[:, None] * stride_qh + dims[None, :]
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
    if UPCAST:  # Triton's CPU interpreter computes bf16 dots wrongly; it runs them in fp32
        q = q.to(tl.float32)
    limit = n_kv - n_q + qi  # last key each row may see

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        n_ok = offs_n < hi
        slots = tl.load(kv_indices + kv_start + offs_n, mask=n_ok, other=0).to(tl.int64)
        k = tl.load(K + slots[:, None] * stride_kt + kvh * stride_kh + dims[None, :], mask=n_ok[:, None], other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where(n_ok[None, :] & (offs_n[None, :] <= limit[:, None]), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        v = tl.load(V + slots[:, None] * stride_vt + kvh * stride_vh + dims[None, :], mask=n_ok[:, None], other=0.0)
        if UPCAST:
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new

    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.math.log2(l_safe))
    t = (q_start + qi).to(tl.int64)
    o_ptrs = MidO + t[:, None] * stride_ot + head[:, None] * stride_oh + split * stride_os + dims[None, :]
    tl.store(o_ptrs, acc / l_safe[:, None], mask=row_ok[:, None])
    tl.store(MidL + t * stride_lt + head * stride_lh + split, lse, mask=row_ok)


@triton.jit
def _rows_tile(q, acc, m_i, l_i, K, V, kv_indices, kv_start, start_n, hi, limit, kvh, dims,
               stride_kt, stride_kh, stride_vt, stride_vh, qk_scale,
               BLOCK_N: tl.constexpr, MASK: tl.constexpr):
    """One K/V tile against all rows of the tile (online softmax, base 2). MASK: the split's last
    partial tile or the causal diagonal; otherwise every row sees every key and no mask is built."""
    offs_n, n_ok, k, v = kv_tile(K, V, kv_indices, kv_start, start_n, hi, kvh, dims, stride_kt, stride_kh, stride_vt,
                                 stride_vh, BLOCK_N, MASK)
    return softmax_tile_step(q, acc, m_i, l_i, k, v, offs_n, n_ok, limit, qk_scale, MASK)


@triton.jit
def _rows_split_kernel(
    Q, K, V, qo_indptr, kv_indptr, kv_indices, MidO, MidL,
    qk_scale, v_scale, num_splits, group, kv_heads,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
    stride_ot, stride_oh, stride_os, stride_lt, stride_lh,
    M_BLOCKS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
    UPCAST: tl.constexpr, DECODE: tl.constexpr, F16: tl.constexpr = False,
):
    """Packed rows: tile row r of row block mb is the KV group's row g = mb * BLOCK_M + r, query head
    g // n_q, query token g % n_q. Row blocks of one (KV head, split) are neighbours in launch order,
    so a group cut into several blocks re-reads its K/V from L2. Grid (M_BLOCKS * kv_heads, splits, B).
    F16 (fp8 KV): the dots run in fp16, so K/V tiles convert fp8 -> fp16, not -> bf16; q is multiplied by the score
    scale before its one conversion (|q| * qk_scale must stay below fp16's 65504, not |q| itself)."""
    mb = tl.program_id(0) % M_BLOCKS
    kvh = tl.program_id(0) // M_BLOCKS
    split = tl.program_id(1)
    b = tl.program_id(2)
    q_start, n_q, kv_start, n_kv, lo, hi = split_bounds(qo_indptr, kv_indptr, b, split, num_splits, BLOCK_N, DECODE)

    g = mb * BLOCK_M + tl.arange(0, BLOCK_M)
    if DECODE:
        h_local = g
        qi = g * 0
    else:
        h_local = g // n_q
        qi = g % n_q
    row_ok = g < group * n_q
    head = kvh * group + h_local
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + (q_start + qi)[:, None].to(tl.int64) * stride_qt + head[:, None] * stride_qh + dims[None, :],
                mask=row_ok[:, None], other=0.0)
    if F16:  # the score scale goes into q before the fp16 conversion (range), so the scores need no multiply
        q = (q.to(tl.float32) * qk_scale).to(tl.float16)
        qk_scale = 1.0
    if UPCAST:  # Triton's CPU interpreter computes bf16 dots wrongly; it runs them in fp32
        q = q.to(tl.float32)
    limit = n_kv - n_q + qi  # last key each row may see; keys < n_kv - n_q + 1 are seen by every row
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    full_hi = tl.minimum(hi, n_kv - n_q + 1)
    full_end = lo + tl.maximum(full_hi - lo, 0) // BLOCK_N * BLOCK_N
    for start_n in range(lo, full_end, BLOCK_N):
        acc, m_i, l_i = _rows_tile(q, acc, m_i, l_i, K, V, kv_indices, kv_start, start_n, hi, limit, kvh, dims,
                                   stride_kt, stride_kh, stride_vt, stride_vh, qk_scale, BLOCK_N, False)
    for start_n in range(full_end, hi, BLOCK_N):
        acc, m_i, l_i = _rows_tile(q, acc, m_i, l_i, K, V, kv_indices, kv_start, start_n, hi, limit, kvh, dims,
                                   stride_kt, stride_kh, stride_vt, stride_vh, qk_scale, BLOCK_N, True)

    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.math.log2(l_safe))
    t = (q_start + qi).to(tl.int64)
    o_ptrs = MidO + t[:, None] * stride_ot + head[:, None] * stride_oh + split * stride_os + dims[None, :]
    tl.store(o_ptrs, acc * (v_scale / l_safe)[:, None], mask=row_ok[:, None])
    tl.store(MidL + t * stride_lt + head * stride_lh + split, lse, mask=row_ok)


def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        idx = device.index or 0
        if idx not in _SM_COUNT:
            _SM_COUNT[idx] = torch.cuda.get_device_properties(device).multi_processor_count
        return _SM_COUNT[idx]
    return 4


_SM_COUNT: dict = {}


def _check(q, k_pool, v_pool, kv_indptr, kv_indices, qo_indptr):
    if k_pool.shape != v_pool.shape or k_pool.dim() != 3:
        raise ValueError("k_pool and v_pool must both be [slots, kv_heads, head_dim]")
    if q.dim() != 3 or q.shape[2] != k_pool.shape[2]:
        raise ValueError("q must be [tokens, q_heads, head_dim] with the pool's head_dim")
    if k_pool.dtype != v_pool.dtype or (q.dtype != k_pool.dtype and k_pool.dtype not in FP8):
        raise ValueError("k_pool and v_pool must share q's dtype (or both be fp8: float8_e4m3fn, float8_e5m2)")
    if q.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"dtype {q.dtype} not supported (bfloat16, float16)")
    hd = q.shape[2]
    if hd not in (16, 32, 64, 128, 256):
        raise ValueError(f"head_dim {hd} not supported (16, 32, 64, 128, 256)")
    if q.shape[1] % k_pool.shape[1]:
        raise ValueError("q_heads must be a multiple of kv_heads")
    for name, t in (("kv_indptr", kv_indptr), ("kv_indices", kv_indices), ("qo_indptr", qo_indptr)):
        if t.dtype != torch.int32:
            raise ValueError(f"{name} must be int32")
    if q.stride(2) != 1 or k_pool.stride(2) != 1 or v_pool.stride(2) != 1:
        raise ValueError("head_dim must be the contiguous (last) dimension")


def _ws_ok(q, k_pool) -> bool:
    """Whether the warp-specialized kernel (`paged_ws`, Gluon) can run here."""
    try:
        from wmtp.measure.kernels.paged_ws import ws_available
    except ImportError:  # a Triton without Gluon's Hopper language
        return False
    return ws_available(q, k_pool)


def _options(plan, ws_ok: bool, kv_fp8: bool, decode: bool, scaled: bool, fp8_dot: str, merge: str,
             prefetch: bool) -> str:
    """Check the options against the planned kernel; returns the fp8 dot type ("auto" resolved)."""
    if plan.kernel == "ws" and (not ws_ok or (scaled and not kv_fp8)):
        raise ValueError("the ws kernel needs a Hopper GPU (no interpreter), and bf16 / fp16 K/V without scales or "
                         "fp8 K/V")
    if plan.kernel == "v1" and (kv_fp8 or scaled):
        raise ValueError("fp8 KV (and KV scales) need the rows kernel (or the sub kernel)")
    if fp8_dot not in ("auto", "bf16", "f16"):
        raise ValueError(f"fp8_dot must be 'auto', 'bf16' or 'f16', got {fp8_dot!r}")
    if fp8_dot == "auto":  # fp16 dots for the rows kernel's fp8 decode (measure/results/h200-kernels-v4, round 3)
        fp8_dot = "f16" if plan.kernel == "rows" and kv_fp8 and decode else "bf16"
    if fp8_dot == "f16" and (plan.kernel != "rows" or not kv_fp8):
        raise ValueError("fp8_dot='f16' applies to the rows kernel with fp8 KV only")
    if (merge != "kernel" or prefetch) and plan.kernel != "sub":
        raise ValueError("merge='pdl' / 'fused' and prefetch apply to the sub kernel only")
    return fp8_dot


def _try_ws(asked: bool, q, k_pool, v_pool, kv_indptr, kv_indices, qo_indptr, max_q, max_kv, sm_scale, out,
            plan, k_scale: float = 1.0, v_scale: float = 1.0) -> bool:
    """Run the ws kernel into `out`; False where it does not compile with this Triton (its Gluon differs from the
    one the kernel was written for) and it was the default choice (asked for by name: an error)."""
    from wmtp.measure.kernels.gluon_support import build_failure
    from wmtp.measure.kernels.paged_ws import ws_attention, ws_broken
    try:
        ws_attention(q, k_pool, v_pool, kv_indptr, kv_indices, qo_indptr, max_q, max_kv, sm_scale, out, plan=plan,
                     k_scale=k_scale, v_scale=v_scale)
    except Exception as e:
        if not build_failure(e):
            raise
        why = ws_broken(e)
        if asked:
            raise ValueError(f"the ws kernel does not compile here: {why}") from None
        return False
    return True


WS_OPTIONS = ("num_splits", "block_n", "num_stages", "waves", "max_rows", "consumers")  # `ws_plan`'s


def _plan(kernel, bsz, hkv, group, max_q, hd, max_kv, sm, tune: dict, kv_fp8: bool = False,
          ws: bool = False) -> AttentionPlan:
    """The launch plan of `kernel` ("v1", "rows", "sub", "ws", or None: the default for the shape; `ws`: whether
    the ws kernel can run here; fp8 K/V: `default_kernel`'s fp8 rule)."""
    kernel = kernel or default_kernel(bsz, group, max_q, hd, ws=ws, kv_fp8=kv_fp8)
    if kernel == "ws":
        bad = [k for k in tune if k not in WS_OPTIONS]
        if bad:  # num_warps too: the ws kernel's warps follow its row block
            raise ValueError(f"the ws kernel has no option {' / '.join(bad)} (its options: {', '.join(WS_OPTIONS)})")
        return ws_plan(bsz, hkv, group, max_q, hd, max_kv, sm, kv_fp8=kv_fp8,
                       **{k: v for k, v in tune.items() if v is not None})
    if "consumers" in tune:
        raise ValueError("consumers applies to the ws kernel only")
    if (tune.get("max_rows") or 0) > ROWS_MAX:  # the ws kernel's 192-row block, where the ws kernel does not run
        tune = {**tune, "max_rows": ROWS_MAX}
    if kernel == "sub":
        return sub_plan(bsz, hkv, group, max_q, hd, max_kv, sm, **tune)
    if "part_max" in tune or "pow2" in tune:
        raise ValueError("part_max / pow2 apply to the sub kernel only")
    if kernel == "rows":
        return rows_plan(bsz, hkv, group, max_q, hd, max_kv, sm, kv_fp8=kv_fp8, **tune)
    if kernel != "v1":
        raise ValueError(f"unknown attention kernel {kernel!r} (v1, rows, sub, ws)")
    tune = {k: v for k, v in tune.items() if v is not None}
    if "waves" in tune or "min_keys" in tune:
        raise ValueError("waves / min_keys apply to the rows kernel only")
    return attention_plan(bsz, hkv, group, max_q, hd, max_kv, sm, **tune)


def paged_attention(
    q: torch.Tensor,  # [total_q, Hq, D]
    k_pool: torch.Tensor,  # [slots, Hkv, D] (q's dtype, or fp8 with k_scale)
    v_pool: torch.Tensor,  # [slots, Hkv, D]
    kv_indptr: torch.Tensor,  # [B+1] int32
    kv_indices: torch.Tensor,  # [nnz] int32 slots
    qo_indptr: torch.Tensor | None,  # [B+1] int32 (None: decode, one query row per request)
    max_q: int,  # longest n_q (host int)
    max_kv: int,  # longest n_kv (host int)
    sm_scale: float | None = None,
    out: torch.Tensor | None = None,
    kernel: str | None = None,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    merge: str = "kernel",  # sub kernel: "kernel", "pdl" or "fused" (`paged_rows`)
    fp8_dot: str = "auto",  # rows kernel, fp8 KV: the dots' input type ("bf16", "f16", or "auto": f16 for decode)
    prefetch: bool = False,  # sub kernel: L2 prefetch of the next K/V tile (CUDA only)
    **tune,  # num_splits, block_n, max_rows, num_warps, num_stages (all); waves, min_keys (rows, sub);
    # part_max, pow2 (sub)
) -> torch.Tensor:
    """Tiling and split count from `wmtp.kernel_plan` (`attention_plan` for v1, `rows_plan` for rows, `sub_plan`
    for sub)."""
    decode = qo_indptr is None
    _check(q, k_pool, v_pool, kv_indptr, kv_indices, kv_indptr if decode else qo_indptr)
    if decode and max_q != 1:
        raise ValueError("without qo_indptr every request has exactly one query row")
    if max_q < 1 or max_q > 64:
        raise ValueError(f"query tokens per request must be in 1..64, got {max_q}")
    total_q, hq, hd = q.shape
    hkv = k_pool.shape[1]
    group = hq // hkv
    bsz = kv_indptr.numel() - 1
    kv_fp8 = k_pool.dtype in FP8
    ws_ok = _ws_ok(q, k_pool)
    plan = _plan(kernel, bsz, hkv, group, max_q, hd, max_kv, _sm_count(q.device), tune, kv_fp8, ws_ok)
    fp8_dot = _options(plan, ws_ok, kv_fp8, decode, k_scale != 1.0 or v_scale != 1.0, fp8_dot, merge, prefetch)
    splits = plan.splits
    sm_scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(hd)
    if out is None:
        out = torch.empty_like(q)
    if total_q == 0:
        return out
    upcast = _INTERPRET and q.dtype == torch.bfloat16
    qo = kv_indptr if decode else qo_indptr
    if plan.kernel == "ws":
        if _try_ws(kernel == "ws", q, k_pool, v_pool, kv_indptr, kv_indices, None if decode else qo_indptr, max_q,
                   max_kv, sm_scale, out, plan, k_scale, v_scale):
            return out
        plan = _plan(None, bsz, hkv, group, max_q, hd, max_kv, _sm_count(q.device), tune, kv_fp8, False)
        splits = plan.splits
    if plan.kernel == "sub":
        return sub_attention(q, k_pool, v_pool, qo, kv_indptr, kv_indices, out, plan, sm_scale * k_scale * LOG2E,
                             v_scale, decode, upcast, merge, prefetch=prefetch)
    mid_o = torch.empty((total_q, hq, splits, hd), dtype=torch.float32, device=q.device)
    mid_l = torch.empty((total_q, hq, splits), dtype=torch.float32, device=q.device)
    strides = (q.stride(0), q.stride(1), k_pool.stride(0), k_pool.stride(1), v_pool.stride(0), v_pool.stride(1),
               mid_o.stride(0), mid_o.stride(1), mid_o.stride(2), mid_l.stride(0), mid_l.stride(1))
    if plan.kernel == "rows":
        _rows_split_kernel[(plan.m_blocks * hkv, splits, bsz)](
            q, k_pool, v_pool, qo, kv_indptr, kv_indices, mid_o, mid_l,
            sm_scale * k_scale * LOG2E, v_scale, splits, group, hkv, *strides,
            M_BLOCKS=plan.m_blocks, BLOCK_M=plan.block_m, BLOCK_N=plan.block_n, HEAD_DIM=hd, UPCAST=upcast,
            DECODE=decode, F16=fp8_dot == "f16", num_warps=plan.num_warps, num_stages=plan.num_stages)
    else:
        _attn_split_kernel[(bsz, hkv * plan.m_blocks, splits)](
            q, k_pool, v_pool, qo, kv_indptr, kv_indices, mid_o, mid_l, sm_scale * LOG2E, splits, *strides,
            GROUP=group, HEADS_PER_BLOCK=plan.heads_per_block, Q_PAD=max_q, M_BLOCKS=plan.m_blocks,
            BLOCK_M=plan.block_m, BLOCK_N=plan.block_n, HEAD_DIM=hd, UPCAST=upcast,
            DECODE=decode, num_warps=plan.num_warps, num_stages=plan.num_stages)
    return merge_splits(mid_o, mid_l, out)


def decode_attention(q, k_pool, v_pool, kv_indptr, kv_indices, max_kv: int, **kw) -> torch.Tensor:
    """One query token per request: q [B, Hq, D]."""
    bsz = kv_indptr.numel() - 1
    if q.shape[0] != bsz:
        raise ValueError(f"decode needs one query row per request: q has {q.shape[0]}, batch is {bsz}")
    return paged_attention(q, k_pool, v_pool, kv_indptr, kv_indices, None, 1, max_kv, **kw)


def verify_attention(q, k_pool, v_pool, kv_indptr, kv_indices, qo_indptr, max_q: int, max_kv: int,
                     **kw) -> torch.Tensor:
    """d query tokens per request (verify, or ~AL tokens for the draft-extend pass), causal among them."""
    return paged_attention(q, k_pool, v_pool, kv_indptr, kv_indices, qo_indptr, max_q, max_kv, **kw)
