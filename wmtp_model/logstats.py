"""TPOT from SGLang decode logs by the Windowed-MTP artifact's estimator, in bounded memory.

Per decode line i: T_iter_i = accept_len_i / gen_throughput_i (dense lines: accept_len = 1); the
throughput counts the whole batch's tokens, so T_iter is the iteration time over B (B = 1: the step). Keep the
lines at the steady batch B_eff (the requested B if it appears in >= 5 lines, else the largest
#running-req held for >= 5 lines), drop the first 2 steady lines and lines with `#full token: 0`,
take the median of T_iter, keep lines within [0.4, 2.5] x that median, then
    TPOT = median(T_iter) * B_eff / mean(accept_len)            (over the kept lines)
The older estimator B_eff / median(gen_throughput) sits beside it (biased 15-40 % because logged
accept lengths snap to integers).

A log may hold several runs: a new segment starts where lines switch between speculative and dense,
or where the timestamps jump by more than `gap_s`. Medians come from log-spaced bins 0.1 % wide per
batch size, so memory stays bounded however long the log (results within 0.05 %).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable

from wmtp.logs import DecodeLine

_R = math.log(1.001)


def _bin(x: float) -> int:
    return round(math.log(x) / _R)


def _unbin(i: int) -> float:
    return math.exp(i * _R)


@dataclass
class _PerBatch:
    seen: int = 0
    bins: dict = field(default_factory=dict)  # T_iter bin -> [count, sum accept_len]
    thr: dict = field(default_factory=dict)  # throughput bin -> count


@dataclass
class SegmentEstimate:
    index: int
    first_line: int
    last_line: int
    lines: int
    speculative: bool
    b_eff: int | None
    n_steady: int
    t_iter_ms: float | None
    mean_accept_length: float | None
    tpot_ms: float | None
    tpot_biased_ms: float | None
    note: str = ""

    @property
    def step_ms(self) -> float | None:
        """One speculative iteration: T_iter (per-request-normalised) times the batch."""
        return None if self.t_iter_ms is None or self.b_eff is None else self.t_iter_ms * self.b_eff


class _Segment:
    def __init__(self, index: int, first: DecodeLine):
        self.index, self.first_line, self.last_line, self.lines = index, first.line_no, first.line_no, 0
        self.speculative = first.accept_len is not None
        self.per_batch: dict[int, _PerBatch] = {}

    def add(self, r: DecodeLine) -> None:
        self.lines += 1
        self.last_line = r.line_no
        if r.tokens == 0 or r.gen_throughput <= 0 or r.running <= 0:
            return
        pb = self.per_batch.setdefault(r.running, _PerBatch())
        pb.seen += 1
        if pb.seen <= 2:  # the first 2 lines at a batch size are warm-up (dropped if it is B_eff)
            return
        al = r.accept_len if r.accept_len is not None else 1.0
        b = pb.bins.setdefault(_bin(al / r.gen_throughput), [0, 0.0])
        b[0] += 1
        b[1] += al
        k = _bin(r.gen_throughput)
        pb.thr[k] = pb.thr.get(k, 0) + 1

    def estimate(self, requested_batch: int | None) -> SegmentEstimate:
        held = {b: pb.seen for b, pb in self.per_batch.items() if pb.seen >= 5}
        if requested_batch is not None and held.get(requested_batch, 0) >= 5:
            b_eff = requested_batch
        else:
            b_eff = max(held) if held else None
        base = dict(index=self.index, first_line=self.first_line, last_line=self.last_line, lines=self.lines,
                    speculative=self.speculative, b_eff=b_eff)
        if b_eff is None:
            return SegmentEstimate(**base, n_steady=0, t_iter_ms=None, mean_accept_length=None, tpot_ms=None,
                                   tpot_biased_ms=None, note="no batch size held for 5 lines")
        pb = self.per_batch[b_eff]
        med = _unbin(_median_bin(pb.bins))
        lo, hi = 0.4 * med, 2.5 * med
        kept = {k: v for k, v in pb.bins.items() if lo <= _unbin(k) <= hi}
        n = sum(v[0] for v in kept.values())
        if n == 0:
            return SegmentEstimate(**base, n_steady=0, t_iter_ms=None, mean_accept_length=None, tpot_ms=None,
                                   tpot_biased_ms=None, note="no steady line")
        t_iter = _unbin(_median_bin(kept))
        mean_al = sum(v[1] for v in kept.values()) / n
        thr_med = _unbin(_median_bin({k: [c] for k, c in pb.thr.items()}))
        return SegmentEstimate(**base, n_steady=n, t_iter_ms=t_iter * 1e3, mean_accept_length=mean_al,
                               tpot_ms=t_iter * b_eff / mean_al * 1e3, tpot_biased_ms=b_eff / thr_med * 1e3)


def _median_bin(bins: dict) -> int:
    total = sum(v[0] for v in bins.values())
    run = 0
    for k in sorted(bins):
        run += bins[k][0]
        if 2 * run >= total:
            return k
    raise ValueError("empty")


_last_ts: list = [None, None]  # (string, parsed): consecutive lines mostly share a timestamp


def _ts(r: DecodeLine):
    if r.time is None:
        return None
    if r.time != _last_ts[0]:
        try:
            parsed = datetime.fromisoformat(r.time)
        except ValueError:
            parsed = None
        _last_ts[0], _last_ts[1] = r.time, parsed
    return _last_ts[1]


def estimate_segments(records: Iterable, requested_batch: int | None = None, gap_s: float = 30.0) -> list[SegmentEstimate]:
    segs: list[_Segment] = []
    cur, last_t = None, None
    for r in records:
        if not isinstance(r, DecodeLine):
            continue
        t = _ts(r)
        new = cur is None or (r.accept_len is not None) != cur.speculative or (
            t is not None and last_t is not None and (t - last_t).total_seconds() > gap_s)
        if new:
            cur = _Segment(len(segs), r)
            segs.append(cur)
        cur.add(r)
        last_t = t or last_t
    return [s.estimate(requested_batch) for s in segs]
