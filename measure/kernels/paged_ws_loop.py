"""The ws kernel's consumer loop over the K/V ring (`paged_ws`): one tile's online softmax, and the loop in five
orders, picked by the constexpr LOOP:
- 0, serial (the default with one consumer partition and with fp8 K/V): per tile, S = Q K^T, wait, softmax,
  O += P V, wait, release the stage;
- 1, paired: tile i's S = Q K^T is issued together with tile i - 1's P V (the MMAs of a warpgroup back to back,
  no wait between them), then both are waited for, the stage of tile i - 1 released, and tile i's softmax runs; the
  last P V after the loop. A stage is released one tile later than in the serial order;
- 2, paired and turn-taking: as 1, and the consumer partitions of a program issue their MMA pairs in turn (consumer
  c waits for its turn on `turns[c]` and hands it to c + 1), so that one warpgroup's softmax runs while another's
  MMAs hold the tensor cores, not all softmaxes at once (FA3's "ping-pong" schedule). With one consumer partition
  it is order 1;
- 3, overlapped: tile i's S = Q K^T is issued, then tile i - 1's P V; S alone is waited for, tile i's softmax runs
  while that P V is on the tensor cores, then the P V is waited for and the stage of tile i - 1 released (the
  intra-warpgroup overlap of FA3, one tile deep);
- 4, overlapped and turn-taking: as 3, the consumer partitions issuing their MMA pairs in turn as in 2 (FA3's two
  schedules together).
Every consumer of a program walks the same tiles, so each takes n_tiles + 1 turns (one when it has no tile): the
hand-over cannot dead-lock. Measured on the H200: orders 1 and 2 move nem's verify (two or three consumers) by no
more than the spread between CUDA graphs (measure/results/h200-ws4); order 3 takes 0.94-0.97x the serial order's
time there at 1M, B = 1, d = 5..16 (h200-ws5), and is the default with two or three consumer partitions
(`default_loop`); with one 8-warp partition (head dim 256, 128 rows) orders 1-3 are 1.5-1.7x slower
(ptxas spills): 0 stays its default."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, warpgroup_mma,
                                                              warpgroup_mma_wait)

LOOPS = {"serial": 0, "paired": 1, "pingpong": 2, "overlap": 3, "overlap-pp": 4}


def plan_loop(consumers: int, kv8: bool, loop, q_regs, ablate, lazy) -> str:
    """The loop order a launch of `consumers` consumer partitions runs (`default_loop` unless named), with the
    `paged_ws.ws_attention` options that need the plan checked."""
    if q_regs and consumers == 3:  # ptxas spills (tests/ws_compile_probe.py)
        raise ValueError("q_regs with 3 consumer partitions spills registers: it takes one or two")
    if ablate and loop not in (None, "serial"):
        raise ValueError(f"ablate runs in the serial order only (run 2 of h200-ws5 ablated it), not {loop!r}")
    if loop is None:  # the ablations are of the serial order, whatever the plan's default
        loop = "serial" if ablate else default_loop(consumers, kv8)
    if lazy and loop not in ("overlap", "overlap-pp"):
        why = " (the default with one consumer partition)" if loop == "serial" and consumers == 1 else ""
        raise ValueError(f"lazy runs in the overlapped orders only, not {loop!r}{why}")
    return loop


def default_loop(consumers: int, kv_fp8: bool) -> str:
    """The consumers' loop order a plan runs unless one is named: 'overlap' with two or three consumer partitions and
    bf16 / fp16 K/V (nem at 1M, B = 1, d = 5..13: 0.91-0.97x the serial order's time in four calls, d = 10 0.997x; at
    B = 4 0.94-1.08x, geomean 0.997: measure/results/h200-ws5), else 'serial' (one 8-warp partition spills in the
    other orders and is 1.6x slower; fp8 K/V runs the serial order only)."""
    return "overlap" if consumers > 1 and not kv_fp8 else "serial"


# 2^f on [-0.5, 0.5], a cubic fitted for relative error (max 7.7e-5: below bf16's 3.9e-3 step of P)
EXP2_C = (0.9999289403695095, 0.6932762416819622, 0.24260405145949604, 0.05508868380751621)
_C0, _C1, _C2, _C3 = (gl.constexpr(c) for c in EXP2_C)
_ROUND = gl.constexpr(12582912.0)  # 1.5 * 2^23: x + _ROUND rounds x to an integer, held in the low mantissa bits
LAZY_LOG2 = gl.constexpr(8.0)  # the lazy maximum's slack, log2 units: P < 256 (FA4's threshold)


@gluon.jit
def exp2_fma(x):
    """2^x on the FMA / integer pipes, not the MUFU: x = j + f (j the nearest integer, |f| <= 1/2), 2^f by a cubic,
    j added to its exponent bits; below 2^-125 (and -inf) 0."""
    xc = gl.maximum(x, -127.0)
    t = xc + _ROUND
    f = xc - (t - _ROUND)
    p = ((_C3 * f + _C2) * f + _C1) * f + _C0
    bits = p.to(gl.int32, bitcast=True) + (t.to(gl.int32, bitcast=True) << 23)
    return gl.where(xc > -125.0, bits.to(gl.float32, bitcast=True), 0.0)


@gluon.jit
def ws_softmax(sc, m_i, l_i, start, full_hi, hi, limit, qk_scale, s_layout: gl.constexpr, row_o: gl.constexpr,
               p_layout: gl.constexpr, dtype: gl.constexpr, BLOCK_N: gl.constexpr, EXP: gl.constexpr = 0,
               LAZY: gl.constexpr = 0):
    """One tile's online-softmax update (base 2) on raw scores `sc`: the running maximum is kept in raw units, so
    each probability is one fused multiply-add and an exp2 (EXP 1: `exp2_fma`). LAZY: a row's maximum moves only
    when the tile's exceeds it by more than 2^LAZY_LOG2 (P then stays below that, exact after the final division), so
    most tiles leave every factor 1 (FA4's conditional rescale). Returns P (MMA operand), the accumulator's rescale
    factor (its row layout), and the new maximum and sum."""
    if start + BLOCK_N > full_hi:  # the split's partial last tile, or the causal diagonal
        keys = start + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        see = (keys[None, :] < hi) & (keys[None, :] <= limit[:, None])
        sc = gl.where(see, sc, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(sc, 1))
    if LAZY:  # (-inf) - (-inf) is NaN: a row that has seen no key keeps -inf
        m_new = gl.where((m_new - m_i) * qk_scale > LAZY_LOG2, m_new, m_i)
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new) * qk_scale
    if EXP:
        p = exp2_fma(sc * qk_scale - m_safe[:, None])
    else:
        p = gl.exp2(sc * qk_scale - m_safe[:, None])
    alpha = gl.exp2(m_i * qk_scale - m_safe)
    l_i = l_i * alpha + gl.sum(p, 1)
    return gl.convert_layout(p.to(dtype), p_layout), gl.convert_layout(alpha, row_o), m_new, l_i


@gluon.jit
def _rescaled(acc, alpha, resc):
    """acc * alpha (per row) where some row's factor is not 1 (`resc`: the consumer's rows, reduced), else acc."""
    if resc > 0:
        acc = acc * alpha[:, None]
    return acc


@gluon.jit
def _turn_wait(turns, k, C: gl.constexpr, NC: gl.constexpr):
    """Consumer C's k-th turn: consumer 0's first passes at once (a fresh barrier's parity-1 wait), every other
    waits for the hand-over of the consumer before it."""
    if NC > 1:
        if C == 0:
            mbarrier.wait(turns.index(0), (k & 1) ^ 1)
        else:
            mbarrier.wait(turns.index(C), k & 1)


@gluon.jit
def _turn_pass(turns, C: gl.constexpr, NC: gl.constexpr):
    if NC > 1:
        mbarrier.arrive(turns.index((C + 1) % NC), count=1)


@gluon.jit
def ws_loop(q_smem, k_bufs, v_bufs, ready, empty, turns, acc, m_i, l_i, zero_s, lo, full_hi, hi, limit, qk_scale,
            s_layout: gl.constexpr, row_o: gl.constexpr, p_layout: gl.constexpr, BLOCK_N: gl.constexpr,
            STAGES: gl.constexpr, LOOP: gl.constexpr, C: gl.constexpr, NC: gl.constexpr, OPTS: gl.constexpr = 0):
    """The tiles of [lo, hi) in order LOOP (module doc) for consumer C of NC; returns (acc, m_i, l_i). OPTS bits:
    1, the consumer's Q rows are loaded into registers once (the MMA's A operand), so S = Q K^T reads only K from
    shared memory (else every tile's MMA reads Q there too); 2, exponentials by `exp2_fma`; 4 / 8 (serial order,
    timing only: the result is wrong), no softmax (P = S, no rescale) / no P V MMA; 16 (orders 3, 4), the lazy
    maximum (`ws_softmax`'s LAZY), the accumulator rescaled only on tiles where some row's maximum moved."""
    dtype: gl.constexpr = q_smem.dtype
    EXP: gl.constexpr = (OPTS // 2) % 2
    ABL: gl.constexpr = (OPTS // 4) % 4
    LAZY: gl.constexpr = (OPTS // 16) % 2
    if OPTS % 2:
        q_op = q_smem.load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    else:
        q_op = q_smem
    n_tiles = gl.cdiv(hi - lo, BLOCK_N)
    if LOOP == 0:
        acc, m_i, l_i = _serial_loop(q_op, k_bufs, v_bufs, ready, empty, turns, acc, m_i, l_i, zero_s, lo, full_hi,
                                     hi, limit, qk_scale, n_tiles, s_layout, row_o, p_layout, dtype, BLOCK_N, STAGES,
                                     EXP, ABL)
    else:
        acc, m_i, l_i = _pipelined_loop(q_op, k_bufs, v_bufs, ready, empty, turns, acc, m_i, l_i, zero_s, lo,
                                        full_hi, hi, limit, qk_scale, n_tiles, s_layout, row_o, p_layout, dtype,
                                        BLOCK_N, STAGES, LOOP, C, NC, EXP, LAZY)
    return acc, m_i, l_i


@gluon.jit
def _serial_loop(q_op, k_bufs, v_bufs, ready, empty, turns, acc, m_i, l_i, zero_s, lo, full_hi, hi, limit, qk_scale,
                 n_tiles, s_layout: gl.constexpr, row_o: gl.constexpr, p_layout: gl.constexpr, dtype: gl.constexpr,
                 BLOCK_N: gl.constexpr, STAGES: gl.constexpr, EXP: gl.constexpr, ABL: gl.constexpr):
    """Order 0 (`ws_loop`), with the timing-only ablations ABL."""
    for i in range(n_tiles):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        fence_async_shared()  # cp.async wrote through the generic proxy; the MMA reads through the async proxy
        sc = warpgroup_mma(q_op, k_bufs.index(s).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        sc = warpgroup_mma_wait(num_outstanding=0, deps=(sc, ))
        if ABL == 1:
            acc = warpgroup_mma(gl.convert_layout(sc.to(dtype), p_layout), v_bufs.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        else:
            p16, alpha, m_i, l_i = ws_softmax(sc, m_i, l_i, lo + i * BLOCK_N, full_hi, hi, limit, qk_scale,
                                              s_layout, row_o, p_layout, dtype, BLOCK_N, EXP)
            if ABL == 2:
                acc = acc * alpha[:, None]
            else:
                acc = warpgroup_mma(p16, v_bufs.index(s), acc * alpha[:, None], is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(empty.index(s), count=1)
    return acc, m_i, l_i


@gluon.jit
def _pipelined_loop(q_op, k_bufs, v_bufs, ready, empty, turns, acc, m_i, l_i, zero_s, lo, full_hi, hi, limit,
                    qk_scale, n_tiles, s_layout: gl.constexpr, row_o: gl.constexpr, p_layout: gl.constexpr,
                    dtype: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, LOOP: gl.constexpr,
                    C: gl.constexpr, NC: gl.constexpr, EXP: gl.constexpr, LAZY: gl.constexpr):
    """Orders 1-4 (`ws_loop`): a tile's S and the previous tile's P V issued together."""
    NT: gl.constexpr = NC if LOOP == 2 or LOOP == 4 else 1
    if n_tiles > 0:
        mbarrier.wait(ready.index(0), 0)
        fence_async_shared()
        _turn_wait(turns, 0, C, NT)
        sc = warpgroup_mma(q_op, k_bufs.index(0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        _turn_pass(turns, C, NT)
        sc = warpgroup_mma_wait(num_outstanding=0, deps=(sc, ))
        p16, alpha, m_i, l_i = ws_softmax(sc, m_i, l_i, lo, full_hi, hi, limit, qk_scale, s_layout, row_o,
                                          p_layout, dtype, BLOCK_N, EXP, LAZY)
        if LAZY:
            resc = gl.max((alpha != 1.0).to(gl.int32), 0)
        for i in range(1, n_tiles):
            s = i % STAGES
            prev = (i + STAGES - 1) % STAGES
            mbarrier.wait(ready.index(s), (i // STAGES) & 1)
            fence_async_shared()
            _turn_wait(turns, i, C, NT)
            if LOOP >= 3:  # S first, then P V; the softmax runs while P V holds the tensor cores
                sc_t = warpgroup_mma(q_op, k_bufs.index(s).permute((1, 0)), zero_s, use_acc=False, is_async=True)
                if LAZY:
                    acc_in = _rescaled(acc, alpha, resc)
                else:
                    acc_in = acc * alpha[:, None]
                acc_t = warpgroup_mma(p16, v_bufs.index(prev), acc_in, is_async=True)
                _turn_pass(turns, C, NT)
                sc = warpgroup_mma_wait(num_outstanding=1, deps=(sc_t, ))
                p_next, alpha, m_i, l_i = ws_softmax(sc, m_i, l_i, lo + i * BLOCK_N, full_hi, hi, limit,
                                                     qk_scale, s_layout, row_o, p_layout, dtype, BLOCK_N, EXP,
                                                     LAZY)
                if LAZY:
                    resc = gl.max((alpha != 1.0).to(gl.int32), 0)
                acc, p16 = warpgroup_mma_wait(num_outstanding=0, deps=(acc_t, p16))  # P held till P V is done
                mbarrier.arrive(empty.index(prev), count=1)
                p16 = p_next
            else:
                acc_t = warpgroup_mma(p16, v_bufs.index(prev), acc * alpha[:, None], is_async=True)
                sc_t = warpgroup_mma(q_op, k_bufs.index(s).permute((1, 0)), zero_s, use_acc=False, is_async=True)
                _turn_pass(turns, C, NT)
                sc, acc = warpgroup_mma_wait(num_outstanding=0, deps=(sc_t, acc_t))
                mbarrier.arrive(empty.index(prev), count=1)
                p16, alpha, m_i, l_i = ws_softmax(sc, m_i, l_i, lo + i * BLOCK_N, full_hi, hi, limit, qk_scale,
                                                  s_layout, row_o, p_layout, dtype, BLOCK_N, EXP)
        last = (n_tiles + STAGES - 1) % STAGES
        _turn_wait(turns, n_tiles, C, NT)
        if LAZY:
            acc_in = _rescaled(acc, alpha, resc)
        else:
            acc_in = acc * alpha[:, None]
        acc_t = warpgroup_mma(p16, v_bufs.index(last), acc_in, is_async=True)
        _turn_pass(turns, C, NT)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc_t, ))
        mbarrier.arrive(empty.index(last), count=1)
    else:  # no tile: the one turn every consumer takes here too
        _turn_wait(turns, 0, C, NT)
        _turn_pass(turns, C, NT)
    return acc, m_i, l_i
