"""Paged split-KV attention, warp-specialized ("ws", Hopper only; Gluon): loads and MMAs of one program run in
different warps, so the K/V stream need not stop while the tensor cores work. One program per (request, KV head, row
block, split), with the rows kernel's partial-output format (MidO, MidL: base-2 log-sum-exp) and merge. Inside:
- a producer partition (`P_WARPS` warps) gathers K/V tiles of `BLOCK_N` keys through the page table into a ring of
  `STAGES` shared-memory stages with `cp.async`, whose copies arrive on the stage's `ready` barrier as they land
  (`cp.async.mbarrier.arrive.noinc`); the page table is read one tile ahead;
- consumers (the default partition of one or two warpgroups: 64 or 128 rows; or two or three partitions of one
  warpgroup each: 128 or 192 rows below head dim 256) run S = Q K^T and O += P V on the warpgroup MMA with an online
  softmax (base 2) and release each stage on its `empty` barrier;
- fp8 K/V (KV8): a converter partition turns each fp8 stage into fp16 in a second ring, which the consumers read.
Head dim 64, 128 or 256; rows packed as in the rows kernel (row g: head g // n_q, token g % n_q), spelled again here:
a Gluon function cannot call the Triton ones of `paged_attention` / `paged_rows`."""

from __future__ import annotations

import math
import os
import warnings

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier
from triton.experimental.gluon.language.nvidia.ampere import async_copy

from wmtp.kernel_plan import AttentionPlan, ws_plan
from wmtp.measure.kernels.gluon_support import hopper
from wmtp.measure.kernels.paged_merge import FP8, merge_splits
from wmtp.measure.kernels.paged_ws_loop import LOOPS, plan_loop, ws_loop

LOG2E = 1.4426950408889634
_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
# cp.async into shared memory: `async_copy_global_to_shared` in Triton 3.6 (the lent H200's), `async_load` later
async_load = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared
# (producer, worker consumer) registers a thread by consumer partitions; the default consumer takes what is left of
# the SM's 64K. Three: 64 + 2 x 144 leave it 160, no spill (Triton 3.6, sm_90); four consumers spilled at any split.
REGS = {1: (80, 208), 2: (80, 208), 3: (64, 144)}
REGS8 = {1: (56, 0, 80), 2: (56, 184, 80)}  # fp8 K/V: (producer, worker consumer, converter)
_partition_barrier = getattr(gl, "thread_barrier", None) or gl.barrier  # a barrier of one partition's warps
_BROKEN: list[str] = []  # why the kernel cannot compile with this Triton, once a launch found out


@gluon.jit
def _launch_dependents():
    """griddepcontrol.launch_dependents: a dependent grid (PDL) may be scheduled once every program of this grid has
    issued it (the first issue in a program counts) or exited; it still waits on this grid's end for its inputs."""
    gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=gl.int32, is_pure=False,
                              pack=1)


@gluon.jit
def _ws_producer(args, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr, P_WARPS: gl.constexpr):
    """Gather K/V tiles of [lo, hi) into the ring; the slots of tile i + 1 load while tile i's copies fly (two or
    three tiles ahead were no faster, bf16 or fp8: measure/results/h200-merge, h200-ws-fp8)."""
    (K, V, kv_indices, kv_start, lo, hi, kvh, stride_kt, stride_kh, stride_vt, stride_vh, k_bufs, v_bufs, ready,
     empty) = args
    VEC: gl.constexpr = 128 // K.dtype.element_ty.primitive_bitwidth  # 16-byte copies: 8 bf16 or 16 fp8 elements
    TPW_D: gl.constexpr = HEAD_DIM // VEC if HEAD_DIM // VEC < 32 else 32
    layout: gl.constexpr = gl.BlockedLayout([1, VEC], [32 // TPW_D, TPW_D], [P_WARPS, 1], [1, 0])
    rows_l: gl.constexpr = gl.SliceLayout(1, layout)
    dims = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, layout))
    n_tiles = gl.cdiv(hi - lo, BLOCK_N)
    offs = lo + gl.arange(0, BLOCK_N, layout=rows_l)
    slots = gl.load(kv_indices + kv_start + offs, mask=offs < hi, other=0).to(gl.int64)
    for i in range(n_tiles):
        s = i % STAGES
        ok = offs < hi
        nxt = offs + BLOCK_N
        slots_next = gl.load(kv_indices + kv_start + nxt, mask=nxt < hi, other=0).to(gl.int64)
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        k_ptrs = K + slots[:, None] * stride_kt + kvh * stride_kh + dims[None, :]
        v_ptrs = V + slots[:, None] * stride_vt + kvh * stride_vh + dims[None, :]
        async_load(k_bufs.index(s), k_ptrs, mask=ok[:, None])
        async_load(v_bufs.index(s), v_ptrs, mask=ok[:, None])
        async_copy.mbarrier_arrive(ready.index(s), increment_count=False)
        offs = nxt
        slots = slots_next


@gluon.jit
def _ws_converter(args, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
                  CSTAGES: gl.constexpr, CHUNK: gl.constexpr):
    """fp8 K/V: each fp8 stage into an fp16 one, CHUNK keys at a time (the fp8 stage released once read)."""
    (k8, v8, ready8, empty8, k_bufs, v_bufs, ready, empty, lo, hi) = args
    TPW_D: gl.constexpr = HEAD_DIM // 16 if HEAD_DIM // 16 < 32 else 32
    layout: gl.constexpr = gl.BlockedLayout([1, 16], [32 // TPW_D, TPW_D], [gl.num_warps(), 1], [1, 0])
    for i in range(gl.cdiv(hi - lo, BLOCK_N)):
        s = i % STAGES
        t = i % CSTAGES
        mbarrier.wait(ready8.index(s), (i // STAGES) & 1)
        mbarrier.wait(empty.index(t), ((i // CSTAGES) & 1) ^ 1)
        for c in gl.static_range(BLOCK_N // CHUNK):
            kx = k8.index(s).slice(c * CHUNK, CHUNK).load(layout)
            vx = v8.index(s).slice(c * CHUNK, CHUNK).load(layout)
            k_bufs.index(t).slice(c * CHUNK, CHUNK).store(kx.to(gl.float16))
            v_bufs.index(t).slice(c * CHUNK, CHUNK).store(vx.to(gl.float16))
        fence_async_shared()  # this thread's generic-proxy writes, before the MMAs read them (async proxy)
        _partition_barrier()  # every thread has read the fp8 stage and written the fp16 one
        mbarrier.arrive(empty8.index(s), count=1)
        mbarrier.arrive(ready.index(t), count=1)


@gluon.jit
def _ws_consumer(q_smem, shared, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                 STAGES: gl.constexpr, DECODE: gl.constexpr, ROW_OFF: gl.constexpr, SUB_M: gl.constexpr,
                 TRIGGER: gl.constexpr = 0, LOOP: gl.constexpr = 0, NC: gl.constexpr = 1, OPTS: gl.constexpr = 0):
    """Online softmax over the ring's tiles for rows ROW_OFF .. ROW_OFF + SUB_M of the row block (q_smem holds
    those rows); writes the split's partial output and base-2 log-sum-exp. `shared`: what every consumer of the
    program takes alike (`_ws_partitions`). TRIGGER 2: let the dependent merge (PDL) be scheduled once the loop is
    done (`ws_attention`'s pdl='late'). Issuing the next S = Q K^T early was dropped (measure/results/h200-ws).
    LOOP: the loop's order (`paged_ws_loop`), NC consumers in all; OPTS: `ws_loop`'s options (bits)."""
    (k_bufs, v_bufs, ready, empty, turns, MidO, MidL, q_start, n_q, n_kv, lo, hi, mb, kvh, group, split, qk_scale,
     v_scale, stride_oh, stride_ot, stride_os, stride_lt, stride_lh) = shared
    nw: gl.constexpr = gl.num_warps()
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[nw, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[nw, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    g = mb * BLOCK_M + ROW_OFF + gl.arange(0, SUB_M, layout=row_s)
    if DECODE:
        qi = g * 0
    else:
        qi = g % n_q
    limit = n_kv - n_q + qi  # last key each row may see
    full_hi = gl.minimum(hi, n_kv - n_q + 1)  # keys below this are seen by every row
    m_i = gl.full([SUB_M], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.zeros([SUB_M], gl.float32, layout=row_s)
    acc = gl.zeros([SUB_M, HEAD_DIM], gl.float32, layout=o_layout)
    zero_s = gl.zeros([SUB_M, BLOCK_N], gl.float32, layout=s_layout)
    acc, m_i, l_i = ws_loop(q_smem, k_bufs, v_bufs, ready, empty, turns, acc, m_i, l_i, zero_s, lo, full_hi, hi,
                            limit, qk_scale, s_layout, row_o, p_layout, BLOCK_N, STAGES, LOOP, ROW_OFF // SUB_M, NC,
                            OPTS)
    if TRIGGER == 2:
        _launch_dependents()

    # the row -> (query head, query token) mapping is spelled out here and in the kernel body, not shared: a Gluon
    # helper for it compiled to other SASS than the kernel the shipped profile measured (dc575be)
    g_o = mb * BLOCK_M + ROW_OFF + gl.arange(0, SUB_M, layout=row_o)
    if DECODE:
        h_local = g_o
        qi_o = g_o * 0
    else:
        h_local = g_o // n_q
        qi_o = g_o % n_q
    row_ok = g_o < group * n_q
    head = kvh * group + h_local
    t = (q_start + qi_o).to(gl.int64)
    l_o = gl.convert_layout(l_i, row_o)
    l_safe = gl.where(l_o == 0.0, 1.0, l_o)
    lse = gl.where(l_o == 0.0, float("-inf"), gl.convert_layout(m_i, row_o) * qk_scale + gl.log2(l_safe))
    dims = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    o_ptrs = MidO + t[:, None] * stride_ot + head[:, None] * stride_oh + split * stride_os + dims[None, :]
    gl.store(o_ptrs, acc * (v_scale / l_safe)[:, None], mask=row_ok[:, None])
    gl.store(MidL + t * stride_lt + head * stride_lh + split, lse, mask=row_ok)


@gluon.jit
def _ws_split_kernel(
    Q, K, V, qo_indptr, kv_indptr, kv_indices, MidO, MidL,
    qk_scale, v_scale, num_splits, group,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
    stride_ot, stride_oh, stride_os, stride_lt, stride_lh,
    M_BLOCKS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
    STAGES: gl.constexpr, P_WARPS: gl.constexpr, P_REGS: gl.constexpr, DECODE: gl.constexpr,
    CONSUMERS: gl.constexpr, C_REGS: gl.constexpr, TRIGGER: gl.constexpr = 0, KV8: gl.constexpr = 0,
    X_REGS: gl.constexpr = 80, LOOP: gl.constexpr = 0, OPTS: gl.constexpr = 0,
):
    """Grid (M_BLOCKS * kv_heads, splits, B), as the rows kernel. CONSUMERS = 2 or 3: the row block's 64-row parts
    are partitions of one warpgroup each (the default one and workers of C_REGS registers), each with its own
    softmax, all reading every K/V tile: the ring's `empty` barriers count them all. KV8: K/V are fp8, converted to
    fp16 by a converter partition of X_REGS registers (`_ws_partitions8`); q is scaled into fp16 (|q| x qk_scale
    must stay below fp16's 65504, as the rows kernel's fp8 decode)."""
    if TRIGGER == 1:  # the merge, launched dependent (PDL), may be scheduled now and waits for this grid's writes
        _launch_dependents()
    mb = gl.program_id(0) % M_BLOCKS
    kvh = gl.program_id(0) // M_BLOCKS
    split = gl.program_id(1)
    b = gl.program_id(2)
    if DECODE:
        q_start = b
        n_q = 1
    else:
        q_start = gl.load(qo_indptr + b)
        n_q = gl.load(qo_indptr + b + 1) - q_start
    kv_start = gl.load(kv_indptr + b)
    n_kv = gl.load(kv_indptr + b + 1) - kv_start
    split_len = gl.cdiv(gl.cdiv(n_kv, num_splits), BLOCK_N) * BLOCK_N
    lo = split * split_len
    hi = gl.minimum(lo + split_len, n_kv)
    hi = gl.maximum(hi, lo)  # an empty split walks no tile and writes lse = -inf

    nw: gl.constexpr = gl.num_warps()
    TPW_D: gl.constexpr = HEAD_DIM // 8 if HEAD_DIM // 8 < 32 else 32
    q_layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 // TPW_D, TPW_D], [nw, 1], [1, 0])
    # 192 rows (three consumers) load and hold a 256-row Q tile: shapes are powers of two; rows past the group are 0
    Q_ROWS: gl.constexpr = 256 if BLOCK_M > 128 else BLOCK_M
    g = mb * BLOCK_M + gl.arange(0, Q_ROWS, layout=gl.SliceLayout(1, q_layout))
    if DECODE:
        h_local = g
        qi = g * 0
    else:
        h_local = g // n_q
        qi = g % n_q
    row_ok = g < group * n_q
    head = kvh * group + h_local
    dims = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, q_layout))
    q = gl.load(Q + (q_start + qi)[:, None].to(gl.int64) * stride_qt + head[:, None] * stride_qh + dims[None, :],
                mask=row_ok[:, None], other=0.0)
    if KV8:
        _ws_partitions8((q.to(gl.float32) * qk_scale).to(gl.float16), K, V, kv_indices, MidO, MidL, q_start, n_q,
                        n_kv, kv_start, lo, hi, mb, kvh, group, split, v_scale, stride_kt, stride_kh, stride_vt,
                        stride_vh, stride_ot, stride_oh, stride_os, stride_lt, stride_lh, Q_ROWS, BLOCK_M, BLOCK_N,
                        HEAD_DIM, STAGES, P_WARPS, P_REGS, DECODE, CONSUMERS, C_REGS, X_REGS, TRIGGER, OPTS)
        return
    _ws_partitions(q, K, V, kv_indices, MidO, MidL, q_start, n_q, n_kv, kv_start, lo, hi, mb, kvh, group, split,
                   qk_scale, v_scale, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh, stride_os,
                   stride_lt, stride_lh, Q_ROWS, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, P_WARPS, P_REGS, DECODE,
                   CONSUMERS, C_REGS, TRIGGER, LOOP, OPTS)


@gluon.jit
def _ws_partitions(q, K, V, kv_indices, MidO, MidL, q_start, n_q, n_kv, kv_start, lo, hi, mb, kvh, group, split,
                   qk_scale, v_scale, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh, stride_os,
                   stride_lt, stride_lh, Q_ROWS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                   HEAD_DIM: gl.constexpr, STAGES: gl.constexpr, P_WARPS: gl.constexpr, P_REGS: gl.constexpr,
                   DECODE: gl.constexpr, CONSUMERS: gl.constexpr, C_REGS: gl.constexpr, TRIGGER: gl.constexpr,
                   LOOP: gl.constexpr, OPTS: gl.constexpr):
    """The program's shared memory (the Q tile `q`, the K/V ring and its barriers) and its partitions: the producer
    and CONSUMERS consumer warpgroups."""
    dtype: gl.constexpr = q.dtype
    q_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([Q_ROWS, HEAD_DIM], dtype)
    kv_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [Q_ROWS, HEAD_DIM], q_sl, q)
    k_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_sl)
    v_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_sl)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=32 * P_WARPS)
        mbarrier.init(empty.index(s), count=CONSUMERS)
    if LOOP == 2 or LOOP == 4:  # the ping-pong orders' hand-over barriers (`paged_ws_loop`); the others take none
        turns = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
        for c in gl.static_range(4):
            mbarrier.init(turns.index(c), count=1)
    else:
        turns = empty
    fence_async_shared()

    SUB: gl.constexpr = BLOCK_M // CONSUMERS
    # consumer c takes rows c * SUB .. (c + 1) * SUB of the block (a constexpr cannot travel in a tuple variable,
    # and warp_specialize takes a literal list: one per consumer count)
    shared = (k_bufs, v_bufs, ready, empty, turns, MidO, MidL, q_start, n_q, n_kv, lo, hi, mb, kvh, group, split,
              qk_scale, v_scale, stride_oh, stride_ot, stride_os, stride_lt, stride_lh)
    prod = (K, V, kv_indices, kv_start, lo, hi, kvh, stride_kt, stride_kh, stride_vt, stride_vh, k_bufs, v_bufs, ready,
            empty)
    if CONSUMERS == 1:
        gl.warp_specialize([
            (_ws_consumer, (q_smem, shared, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, DECODE,
                            0, SUB, TRIGGER, LOOP, CONSUMERS, OPTS)),
            (_ws_producer, (prod, BLOCK_N, HEAD_DIM, STAGES, P_WARPS))], [P_WARPS], [P_REGS])
    elif CONSUMERS == 2:
        gl.warp_specialize([
            (_ws_consumer, (q_smem.slice(0, SUB), shared, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, DECODE,
                            0, SUB, TRIGGER, LOOP, CONSUMERS, OPTS)),
            (_ws_consumer, (q_smem.slice(SUB, SUB), shared, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, DECODE,
                            SUB, SUB, TRIGGER, LOOP, CONSUMERS, OPTS)),
            (_ws_producer, (prod, BLOCK_N, HEAD_DIM, STAGES, P_WARPS))], [4, P_WARPS], [C_REGS, P_REGS])
    else:
        gl.warp_specialize([
            (_ws_consumer, (q_smem.slice(0, SUB), shared, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, DECODE,
                            0, SUB, TRIGGER, LOOP, CONSUMERS, OPTS)),
            (_ws_consumer, (q_smem.slice(SUB, SUB), shared, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, DECODE,
                            SUB, SUB, TRIGGER, LOOP, CONSUMERS, OPTS)),
            (_ws_consumer, (q_smem.slice(2 * SUB, SUB), shared, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, DECODE,
                            2 * SUB, SUB, TRIGGER, LOOP, CONSUMERS, OPTS)),
            (_ws_producer, (prod, BLOCK_N, HEAD_DIM, STAGES, P_WARPS))], [4, 4, P_WARPS],
        [C_REGS, C_REGS, P_REGS])


@gluon.jit
def _ws_partitions8(q, K, V, kv_indices, MidO, MidL, q_start, n_q, n_kv, kv_start, lo, hi, mb, kvh, group, split,
                    v_scale, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh, stride_os, stride_lt,
                    stride_lh, Q_ROWS: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                    HEAD_DIM: gl.constexpr, STAGES: gl.constexpr, P_WARPS: gl.constexpr, P_REGS: gl.constexpr,
                    DECODE: gl.constexpr, CONSUMERS: gl.constexpr, C_REGS: gl.constexpr, X_REGS: gl.constexpr,
                    TRIGGER: gl.constexpr, OPTS: gl.constexpr):
    """fp8 K/V: producer -> STAGES fp8 stages -> converter -> two fp16 stages -> consumers; q is scaled (qk_scale 1)."""
    CST: gl.constexpr = 2
    q_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([Q_ROWS, HEAD_DIM], gl.float16)
    kv_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], gl.float16)
    k8_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], K.dtype.element_ty)
    q_smem = gl.allocate_shared_memory(gl.float16, [Q_ROWS, HEAD_DIM], q_sl, q)
    k8 = gl.allocate_shared_memory(K.dtype.element_ty, [STAGES, BLOCK_N, HEAD_DIM], k8_sl)
    v8 = gl.allocate_shared_memory(K.dtype.element_ty, [STAGES, BLOCK_N, HEAD_DIM], k8_sl)
    k_bufs = gl.allocate_shared_memory(gl.float16, [CST, BLOCK_N, HEAD_DIM], kv_sl)
    v_bufs = gl.allocate_shared_memory(gl.float16, [CST, BLOCK_N, HEAD_DIM], kv_sl)
    ready8 = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty8 = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [CST, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [CST, 1], mbarrier.MBarrierLayout())
    turns = empty  # the serial loop (the only order fp8 runs) takes no turns
    for s in gl.static_range(STAGES):
        mbarrier.init(ready8.index(s), count=32 * P_WARPS)
        mbarrier.init(empty8.index(s), count=1)
    for s in gl.static_range(CST):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=CONSUMERS)
    fence_async_shared()

    SUB: gl.constexpr = BLOCK_M // CONSUMERS
    shared = (k_bufs, v_bufs, ready, empty, turns, MidO, MidL, q_start, n_q, n_kv, lo, hi, mb, kvh, group, split,
              1.0, v_scale, stride_oh, stride_ot, stride_os, stride_lt, stride_lh)
    prod = (K, V, kv_indices, kv_start, lo, hi, kvh, stride_kt, stride_kh, stride_vt, stride_vh, k8, v8, ready8,
            empty8)
    conv = (k8, v8, ready8, empty8, k_bufs, v_bufs, ready, empty, lo, hi)
    if CONSUMERS == 1:
        gl.warp_specialize([
            (_ws_consumer, (q_smem, shared, BLOCK_M, BLOCK_N, HEAD_DIM, CST, DECODE, 0, SUB, TRIGGER, 0, CONSUMERS,
                            OPTS)),
            (_ws_producer, (prod, BLOCK_N, HEAD_DIM, STAGES, P_WARPS)),
            (_ws_converter, (conv, BLOCK_N, HEAD_DIM, STAGES, CST, 16))], [P_WARPS, 4], [P_REGS, X_REGS])
    else:
        gl.warp_specialize([
            (_ws_consumer, (q_smem.slice(0, SUB), shared, BLOCK_M, BLOCK_N, HEAD_DIM, CST, DECODE, 0, SUB, TRIGGER, 0,
                            CONSUMERS, OPTS)),
            (_ws_consumer, (q_smem.slice(SUB, SUB), shared, BLOCK_M, BLOCK_N, HEAD_DIM, CST, DECODE, SUB, SUB,
                            TRIGGER, 0, CONSUMERS, OPTS)),
            (_ws_producer, (prod, BLOCK_N, HEAD_DIM, STAGES, P_WARPS)),
            (_ws_converter, (conv, BLOCK_N, HEAD_DIM, STAGES, CST, 16))], [4, P_WARPS, 4], [C_REGS, P_REGS, X_REGS])


def _consumer_opts(q, k_pool, loop, q_regs, exp2, ablate, lazy) -> int:
    """`ws_attention`'s consumer options checked before any plan, as `paged_ws_loop.ws_loop`'s OPTS bits."""
    if exp2 not in ("mufu", "fma") or ablate not in (None, "softmax", "pv"):
        raise ValueError(f"exp2 must be 'mufu' or 'fma' and ablate None, 'softmax' or 'pv', got {exp2!r}, {ablate!r}")
    if loop is not None and loop not in LOOPS:
        raise ValueError(f"loop must be one of {', '.join(LOOPS)}, got {loop!r}")
    if k_pool.dtype in FP8 and loop not in (None, "serial"):  # measured with bf16 K/V only (measure/results/h200-ws4)
        raise ValueError("fp8 K/V runs the serial loop only")
    if q_regs and q.shape[-1] > 128:
        raise ValueError(f"q_regs holds Q in registers at head dim 128 and below, got {q.shape[-1]}")
    if (q_regs or exp2 != "mufu" or ablate or lazy) and k_pool.dtype in FP8:  # q_regs: wrong on the H200 (h200-ws5)
        raise ValueError("q_regs, exp2, ablate and lazy run with bf16 / fp16 K/V only")
    return int(q_regs) | {"mufu": 0, "fma": 2}[exp2] | {None: 0, "softmax": 4, "pv": 8}[ablate] | 16 * int(lazy)


def ws_available(q: torch.Tensor, k_pool: torch.Tensor) -> bool:
    """Whether the ws kernel can run these tensors: a Hopper GPU (`hopper`), not Triton's interpreter, bf16 / fp16
    q and K/V of q's dtype or fp8, and no launch has found that it does not compile with this Triton."""
    return (not _BROKEN and q.is_cuda and not _INTERPRET and hopper(q.device)
            and q.dtype in (torch.bfloat16, torch.float16) and k_pool.dtype in (q.dtype, *FP8))


def ws_broken(err: Exception) -> str:
    """Record that the kernel does not compile with this Triton (every later launch takes the other kernels) and
    warn once; returns the reason in one line."""
    import triton

    lines = [ln for ln in str(err).splitlines() if ln.strip()]
    why = f"Triton {triton.__version__}: {type(err).__name__}: {lines[-1][:200] if lines else ''}"
    if not _BROKEN:
        warnings.warn(f"the warp-specialized attention kernel does not compile ({why}); using the rows / v1 kernels",
                      RuntimeWarning, stacklevel=3)
        _BROKEN.append(why)
    return why


def ws_attention(q, k_pool, v_pool, kv_indptr, kv_indices, qo_indptr, max_q: int, max_kv: int,
                 sm_scale: float | None = None, out: torch.Tensor | None = None, plan: AttentionPlan | None = None,
                 p_warps: int = 4, p_regs: int | None = None, c_regs: int | None = None,
                 sm_count: int | None = None, pdl: bool | str = "late", merge: dict | None = None,
                 k_scale: float = 1.0, v_scale: float = 1.0, x_regs: int | None = None, loop: str | None = None,
                 q_regs: bool = False, exp2: str = "mufu", ablate: str | None = None, lazy: bool = False,
                 **tune) -> torch.Tensor:
    """Same contract as `paged_attention.paged_attention` (qo_indptr None: decode). `plan` (`ws_plan`) or its options in
    `tune` (num_splits, block_n, num_stages, waves, max_rows, consumers); p_warps / p_regs / c_regs / x_regs: the
    producer's warps and registers, each worker consumer's and the converter's (defaults: `REGS`, `REGS8`); pdl: the
    merge as a programmatic dependent launch, scheduled from the split kernel's start (True or 'start'), from the end of
    its consumers' loops ('late', the default: measure/results/h200-merge), or not (False); merge: options of
    `merge_splits`. fp8 K/V (e4m3 / e5m2, with k_scale / v_scale): converted to fp16 by the converter partition, row
    blocks of at most 128 rows. loop: the consumers' order over the ring, 'serial', 'paired', 'pingpong', 'overlap' or
    'overlap-pp' (`paged_ws_loop`; all but the first bf16 K/V only); None: `paged_ws_loop.default_loop`. q_regs: each
    consumer holds its Q rows in registers, so S = Q K^T reads only K from shared memory (head dim 128 and below: 64
    rows of 256 dims would take 64 more registers a thread beside the 128 of the accumulator). exp2: the softmax's
    exponentials on the MUFU ('mufu', the default) or as a cubic on the FMA pipes ('fma', relative error < 1e-4:
    `paged_ws_loop.exp2_fma`). ablate (timing only, the output is wrong): 'softmax' skips the softmax (P = S), 'pv' the
    P V MMA: where a tile's time goes. lazy (the overlapped orders): a row's running maximum moves only by more than
    2^8, and the accumulator is rescaled only on tiles where one moved (`paged_ws_loop`)."""
    opts = _consumer_opts(q, k_pool, loop, q_regs, exp2, ablate, lazy)
    trigger = {False: 0, True: 1, "start": 1, "late": 2}.get(pdl)
    if trigger is None:
        raise ValueError(f"pdl must be False, True, 'start' or 'late', got {pdl!r}")
    decode = qo_indptr is None
    total_q, hq, hd = q.shape
    hkv = k_pool.shape[1]
    bsz = kv_indptr.numel() - 1
    kv8 = k_pool.dtype in FP8
    if (v_pool.dtype != k_pool.dtype or k_pool.dtype not in (q.dtype, *FP8)
            or q.dtype not in (torch.bfloat16, torch.float16)):
        raise ValueError("the ws kernel takes bf16 / fp16 q, and K and V of q's dtype or both fp8 (e4m3 / e5m2)")
    if not kv8 and (k_scale != 1.0 or v_scale != 1.0):
        raise ValueError("k_scale / v_scale apply to fp8 K/V only")
    if plan is None:
        sm = sm_count or torch.cuda.get_device_properties(q.device).multi_processor_count
        plan = ws_plan(bsz, hkv, hq // hkv, max_q, hd, max_kv, sm, kv_fp8=kv8, **tune)
    elif kv8 and (plan.block_m > 128 or plan.consumers > 2):
        raise ValueError("fp8 K/V runs row blocks of at most 128 rows (two consumers at most)")
    elif tune:
        raise ValueError("give a plan or its options, not both")
    loop = plan_loop(plan.consumers, kv8, loop, q_regs, ablate, lazy)
    sm_scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(hd)
    out = torch.empty_like(q) if out is None else out
    if total_q == 0:
        return out
    splits = plan.splits
    mid_o = torch.empty((total_q, hq, splits, hd), dtype=torch.float32, device=q.device)
    mid_l = torch.empty((total_q, hq, splits), dtype=torch.float32, device=q.device)
    qo = kv_indptr if decode else qo_indptr
    regs = REGS8[plan.consumers] if kv8 else (*REGS[plan.consumers], 0)
    p_regs = regs[0] if p_regs is None else p_regs
    c_regs = regs[1] if c_regs is None else c_regs
    _ws_split_kernel[(plan.m_blocks * hkv, splits, bsz)](
        q, k_pool, v_pool, qo, kv_indptr, kv_indices, mid_o, mid_l,
        sm_scale * k_scale * LOG2E, v_scale, splits, hq // hkv,
        q.stride(0), q.stride(1), k_pool.stride(0), k_pool.stride(1), v_pool.stride(0), v_pool.stride(1),
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2), mid_l.stride(0), mid_l.stride(1),
        M_BLOCKS=plan.m_blocks, BLOCK_M=plan.block_m, BLOCK_N=plan.block_n, HEAD_DIM=hd, STAGES=plan.num_stages,
        P_WARPS=p_warps, P_REGS=p_regs, DECODE=decode, CONSUMERS=plan.consumers, C_REGS=c_regs, TRIGGER=trigger,
        KV8=int(kv8), X_REGS=regs[2] if x_regs is None else x_regs, LOOP=LOOPS[loop], OPTS=opts,
        num_warps=plan.num_warps // plan.consumers)
    return merge_splits(mid_o, mid_l, out, pdl=trigger > 0, **(merge or {}))
