"""Per-request TPOT from serving-engine decode logs, in bounded memory.

Per-line estimator (the headline, DESIGN section on logs; engines print batch totals):
    TPOT_line = #running-req / gen throughput            (SGLang decode lines; vLLM `Running: N reqs` /
                                                           `Avg generation throughput`, windows with N > 0)
per run, at the batch size held longest if it has >= 3 usable lines, else pooled over every line (a ramp
or a drain, where the batch changes every line); the median, with a confidence flag by sample count
(>= 8 lines high, 3-7 medium, fewer low). Not used: the first decode line of a rank after a `Prefill
batch` line (its throughput counts idle or prefill time; used only when a run has nothing else),
stalls (#token frozen while the throughput falls below half the previous line's), `#full token: 0`.

A log may hold several runs: a new run starts when lines switch between speculative and dense, the
time goes backwards (> 2 s) or jumps by more than `gap_s`, or the same DP rank reappears under another
process id (a restart). Lines of several DP ranks in the same run are steps of those ranks, pooled.

The Windowed-MTP artifact's estimator sits beside it (reference/paper-results.md, last section):
T_iter_i = accept_len_i / gen_throughput_i at the steady batch B_eff (the requested B if it appears in
>= 5 lines, else the largest #running-req held for >= 5 lines), first 2 steady lines dropped, lines
within [0.4, 2.5] x median T_iter kept, TPOT = median(T_iter) * B_eff / mean(accept_len); `calibrate
--from-logs` fits its T_iter. Medians come from log-spaced bins 0.1 % wide, so memory stays bounded.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Iterable

from wmtp.logs import DecodeLine, PrefillLine, VllmThroughput

_R = math.log(1.001)
BIN_WIDTH = _R  # log-spaced bins 0.1 % wide
_log = math.log
MAX_ROWS = 200  # rows of per-window / per-event detail kept for display (counts are always complete)
# A generation throughput below this (tok/s) is no decode rate: one token per 11.6 days; such a line counts as one
# without a throughput (stall / idle), and its TPOT (1 / throughput) cannot overflow the log-spaced bins.
MIN_THROUGHPUT = 1e-6


def _bin(x: float) -> int:
    return round(math.log(x) / _R)


def _unbin(i: int) -> float:
    return math.exp(i * _R)


def median_of_bins(bins: dict) -> float:
    """Median of binned values (count per bin): the mean of the two middle values for an even count."""
    total = sum(bins.values())
    if total == 0:
        raise ValueError("empty")
    lo_rank, hi_rank = (total + 1) // 2, total // 2 + 1
    run, lo = 0, None
    for k in sorted(bins):
        run += bins[k]
        if lo is None and run >= lo_rank:
            lo = _unbin(k)
        if run >= hi_rank:
            return 0.5 * (lo + _unbin(k))
    raise ValueError("unreachable")


def confidence(n: int) -> str:
    return "high" if n >= 8 else "medium" if n >= 3 else "low"


class TpotBins:
    """Per-line TPOT values by batch size, binned; gives the headline estimate and the TPOT-vs-batch table."""

    def __init__(self) -> None:
        self.by_batch: dict[int, dict[int, int]] = {}
        self.lo = self.hi = None

    def add(self, batch: int, tpot_ms: float) -> None:
        b = self.by_batch.setdefault(batch, {})
        k = _bin(tpot_ms)
        b[k] = b.get(k, 0) + 1

    @property
    def n(self) -> int:
        return sum(sum(b.values()) for b in self.by_batch.values())

    def table(self) -> list[dict]:
        rows = []
        for batch in sorted(self.by_batch):
            b = self.by_batch[batch]
            n = sum(b.values())
            rows.append({"batch": batch, "lines": n, "tpot_ms": median_of_bins(b), "min_ms": _unbin(min(b)),
                         "max_ms": _unbin(max(b)), "confidence": confidence(n)})
        return rows

    def headline(self) -> tuple[float, int, int | None, str] | None:
        """(TPOT ms, samples, batch or None when pooled, estimator text)."""
        if not self.by_batch:
            return None
        counts = {b: sum(v.values()) for b, v in self.by_batch.items()}
        modal = max(counts, key=lambda b: (counts[b], b))
        if counts[modal] >= 3:
            return (median_of_bins(self.by_batch[modal]), counts[modal], modal,
                    f"median of #running-req / gen throughput over {counts[modal]} lines at batch {modal}")
        pooled: dict[int, int] = {}
        for v in self.by_batch.values():
            for k, c in v.items():
                pooled[k] = pooled.get(k, 0) + c
        n = sum(counts.values())
        return (median_of_bins(pooled), n, None,
                f"median of #running-req / gen throughput over {n} lines pooled across batch sizes "
                f"{min(counts)}-{max(counts)} (ramp or drain)")


@dataclass(slots=True)
class PerBatch:
    log_ms: float  # log(batch * 1e3): per-line TPOT in ms = exp(log_ms - log(throughput))
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
    tpot_ms: float | None  # the artifact's estimator
    tpot_biased_ms: float | None
    note: str = ""
    # the per-line estimator (headline) and what it saw
    tpot_line_ms: float | None = None
    tpot_samples: int = 0
    tpot_batch: int | None = None
    tpot_estimator: str = ""
    confidence: str = "none"
    tpot_by_batch: list = field(default_factory=list)
    accept_length: float | None = None  # mean accept len over the lines used for TPOT
    accept_rate: float | None = None
    ranks: list = field(default_factory=list)
    dropped_after_prefill: int = 0
    stalls: int = 0
    stall_lines: list = field(default_factory=list)
    retracted_max: int = 0

    @property
    def step_ms(self) -> float | None:
        """One speculative iteration: T_iter (per-request-normalised) times the batch."""
        return None if self.t_iter_ms is None or self.b_eff is None else self.t_iter_ms * self.b_eff

    def to_dict(self) -> dict:
        return {**asdict(self), "step_ms": self.step_ms}


_LOG_AL: dict = {}  # log(accept len) by value (logged with two decimals: few distinct values)


class _Segment:
    """One run's evidence; `SglangRuns.decode` fills it, `estimate` reads it."""

    def __init__(self, index: int, line_no: int, speculative: bool):
        self.index, self.first_line, self.last_line, self.lines = index, line_no, line_no, 0
        self.speculative = speculative
        self.per_batch: dict[int, PerBatch] = {}
        self.ranks: dict = {}  # DP rank -> pid
        self.tpot, self.after_prefill = TpotBins(), TpotBins()
        self.al = [0.0, 0, 0.0, 0]  # sum, n over used lines; sum, n over all lines
        self.rate = [0.0, 0]
        self.dropped = self.stalls = self.retracted = 0
        self.stall_lines: list[int] = []

    def estimate(self, requested_batch: int | None) -> SegmentEstimate:
        est = SegmentEstimate(**self._artifact_estimate(requested_batch))
        bins, note = self.tpot, []
        if not bins.by_batch and self.after_prefill.by_batch:
            bins = self.after_prefill
            note.append("only decode lines right after a prefill: their throughput counts prefill/idle time")
        head = bins.headline()
        if head:
            est.tpot_line_ms, est.tpot_samples, est.tpot_batch, est.tpot_estimator = head
            est.confidence = "low" if bins is self.after_prefill else confidence(head[1])
            if head[2] is None and est.confidence == "high":
                est.confidence = "medium"
            est.tpot_by_batch = bins.table()
        s, n, s_all, n_all = self.al
        est.accept_length = s / n if n else (s_all / n_all if n_all else None)
        est.accept_rate = self.rate[0] / self.rate[1] if self.rate[1] else None
        if self.speculative and est.accept_length is None:
            note.append("speculative (accept rate logged) but accept len lost: AL unknown")
        est.ranks = sorted(str(k) for k in self.ranks if k is not None)
        est.dropped_after_prefill, est.stalls, est.stall_lines = self.dropped, self.stalls, self.stall_lines
        est.retracted_max = self.retracted
        est.note = "; ".join(x for x in [est.note, *note] if x)
        return est

    def _artifact_estimate(self, requested_batch: int | None) -> dict:
        held = {b: pb.seen for b, pb in self.per_batch.items() if pb.seen >= 5}
        if requested_batch is not None and held.get(requested_batch, 0) >= 5:
            b_eff = requested_batch
        else:
            b_eff = max(held) if held else None
        base = dict(index=self.index, first_line=self.first_line, last_line=self.last_line, lines=self.lines,
                    speculative=self.speculative, b_eff=b_eff, n_steady=0, t_iter_ms=None,
                    mean_accept_length=None, tpot_ms=None, tpot_biased_ms=None)
        if b_eff is None:
            return {**base, "note": "artifact estimator: no batch size held for 5 lines"}
        pb = self.per_batch[b_eff]
        med = _unbin(_median_bin(pb.bins))
        kept = {k: v for k, v in pb.bins.items() if 0.4 * med <= _unbin(k) <= 2.5 * med}
        n = sum(v[0] for v in kept.values())
        if n == 0:
            return {**base, "note": "artifact estimator: no steady line"}
        t_iter = _unbin(_median_bin(kept))
        mean_al = sum(v[1] for v in kept.values()) / n
        thr_med = _unbin(_median_bin({k: [c] for k, c in pb.thr.items()}))
        return {**base, "n_steady": n, "t_iter_ms": t_iter * 1e3, "mean_accept_length": mean_al,
                "tpot_ms": t_iter * b_eff / mean_al * 1e3, "tpot_biased_ms": b_eff / thr_med * 1e3}


def _median_bin(bins: dict) -> int:
    total = sum(v[0] for v in bins.values())
    run = 0
    for k in sorted(bins):
        run += bins[k][0]
        if 2 * run >= total:
            return k
    raise ValueError("empty")


class SglangRuns:
    """Collects SGLang decode and prefill lines into runs (feed them in order, then `estimates`): records
    through `add`, or the fields alone through `prefill` and `decode` (what `wmtp.logs.stream` hands on)."""

    def __init__(self, gap_s: float = 60.0):
        self.gap_s = gap_s
        self.segs: list[_Segment] = []
        self.cur: _Segment | None = None
        self.last_t: float | None = None
        self.state: dict = {}  # (pid, dp) -> [after a prefill, last #token, last throughput]

    def add(self, r) -> None:
        if type(r) is PrefillLine:
            self.prefill(r.pid, r.dp)
        else:
            self.decode(r.line_no, r.time, r.running, r.tokens, r.accept_len, r.accept_rate, r.gen_throughput,
                        r.cuda_graph, r.queue, r.secs, r.pid, r.dp, r.retracted)

    def prefill(self, pid: str | None, dp: int | None) -> None:
        st = self.state.get((pid, dp))
        if st is None:
            self.state[(pid, dp)] = [True, None, None]
        else:
            st[0] = True

    def decode(self, line_no: int, time, running: int, tokens: int | None, al: float | None, rate: float | None,
               thr: float, cuda_graph, queue, secs: float | None, pid: str | None, dp: int | None,
               retracted: int | None = None) -> None:
        """One decode line, as DecodeLine's fields (positional, in its order). The whole line in one
        function, the run's bins included: this runs on every line of multi-GB logs."""
        st = self.state.get((pid, dp))
        if st is None:
            st = self.state[(pid, dp)] = [False, None, None]
        cur, last_t = self.cur, self.last_t
        spec = al is not None or rate is not None
        if (cur is None or spec != cur.speculative
                or (secs is not None and last_t is not None and (secs < last_t - 2 or secs - last_t > self.gap_s))
                or (pid is not None and cur.ranks.get(dp, pid) != pid)):
            self.cur = cur = _Segment(len(self.segs), line_no, spec)
            self.segs.append(cur)
        if secs is not None:
            self.last_t = secs
        after_prefill, last_tokens, last_thr = st
        st[0], st[1], st[2] = False, tokens, thr
        cur.lines += 1
        cur.last_line = line_no
        if dp not in cur.ranks:
            cur.ranks[dp] = pid
        if retracted and retracted > cur.retracted:
            cur.retracted = retracted
        if al is not None:
            cur.al[2] += al
            cur.al[3] += 1
        if rate is not None:
            cur.rate[0] += rate
            cur.rate[1] += 1
        if tokens == 0 or running <= 0:
            return
        if thr < MIN_THROUGHPUT or (last_thr is not None and thr < 0.5 * last_thr and tokens is not None and tokens == last_tokens):
            cur.stalls += 1  # #token frozen while the throughput collapsed (or no throughput at all)
            if len(cur.stall_lines) < MAX_ROWS:
                cur.stall_lines.append(line_no)
            return
        # one log per line: bins of per-line TPOT, of the artifact's T_iter and of the throughput
        lt = _log(thr)
        pb = cur.per_batch.get(running)
        if pb is None:
            pb = cur.per_batch[running] = PerBatch(_log(running * 1e3))
        by_batch = (cur.after_prefill if after_prefill else cur.tpot).by_batch
        b = by_batch.get(running)
        if b is None:
            b = by_batch[running] = {}
        k = round((pb.log_ms - lt) / _R)
        b[k] = b.get(k, 0) + 1
        if after_prefill:
            cur.dropped += 1
        elif al is not None:
            cur.al[0] += al
            cur.al[1] += 1
        pb.seen += 1
        if pb.seen <= 2:  # the first 2 lines at a batch size are warm-up (dropped if it is B_eff)
            return
        if al is None:
            al = 1.0
        la = _LOG_AL.get(al)
        if la is None:
            la = _log(al)
            if len(_LOG_AL) < 4096:
                _LOG_AL[al] = la
        b = pb.bins.get(k := round((la - lt) / _R))
        if b is None:
            b = pb.bins[k] = [0, 0.0]
        b[0] += 1
        b[1] += al
        k = round(lt / _R)
        pb.thr[k] = pb.thr.get(k, 0) + 1

    def estimates(self, requested_batch: int | None = None) -> list[SegmentEstimate]:
        return [s.estimate(requested_batch) for s in self.segs]


def estimate_segments(records: Iterable, requested_batch: int | None = None, gap_s: float = 60.0) -> list[SegmentEstimate]:
    runs = SglangRuns(gap_s)
    for r in records:
        if isinstance(r, (DecodeLine, PrefillLine)):
            runs.add(r)
    return runs.estimates(requested_batch)


class VllmWindows:
    """vLLM throughput windows: per-request TPOT = Running / Avg generation throughput, by batch; each
    window paired with the spec line of the same process printed in the same second."""

    def __init__(self) -> None:
        self.engine, self.agg = TpotBins(), TpotBins()
        self.decode, self.agg_decode = TpotBins(), TpotBins()  # the windows that ran no prefill (prompt 0 tok/s)
        self.rows: list[dict] = []
        self.lines = [None, None, None, None]  # first/last line of engine windows, of aggregated windows
        self.idle = self.prefill_windows = 0
        self._open: dict = {}  # pid -> (row, secs) awaiting its spec line

    def add(self, r: VllmThroughput) -> None:
        agg = r.engine.startswith("agg")
        tpot = None
        if r.running > 0 and r.gen_thr >= MIN_THROUGHPUT:
            tpot = r.running / r.gen_thr * 1e3
            (self.agg if agg else self.engine).add(r.running, tpot)
            if r.prompt_thr <= 0:
                (self.agg_decode if agg else self.decode).add(r.running, tpot)
            i = 2 if agg else 0
            self.lines[i] = self.lines[i] or r.line_no
            self.lines[i + 1] = r.line_no
            self.prefill_windows += r.prompt_thr > 0
        else:
            self.idle += 1
        row = None  # a row only for display (the first MAX_ROWS): the spec line paired with it fills it in
        if len(self.rows) < MAX_ROWS:
            row = {"line": r.line_no, "engine": r.engine, "pid": r.pid, "running": r.running, "gen_tok_s": r.gen_thr,
                   "prompt_tok_s": r.prompt_thr, "tpot_ms": tpot, "accept_length": None}
            self.rows.append(row)
        self._open[r.pid] = (row, r.secs)

    def settled(self) -> bool:
        """Whether the windows kept for display are filled and none awaits its spec line: pairing a spec
        line with its window changes nothing from here on."""
        return len(self.rows) >= MAX_ROWS and all(row is None for row, _ in self._open.values())

    def pair(self, pid, secs, al: float | None) -> None:
        row, t = self._open.pop(pid, (None, None))
        if row is not None and (t is None or secs is None or abs(t - secs) <= 1):
            row["accept_length"] = al

    def result(self) -> dict | None:
        """The TPOT headline. A window that also ran prefill spends part of its interval on prompt tokens, so
        its generation throughput understates the decode rate: where some windows ran none, only those count."""
        bins, decode, lines = ((self.engine, self.decode, self.lines[:2]) if self.engine.by_batch
                               else (self.agg, self.agg_decode, self.lines[2:]))
        left_out = bins.n - decode.n
        if decode.by_batch and left_out:
            bins = decode
        head = bins.headline()
        if head is None:
            return None
        conf = confidence(head[1]) if head[2] is not None else min(confidence(head[1]), "medium", key=["low", "medium", "high"].index)
        if bins is decode:
            note = (f"{left_out} window(s) that also ran prefill left out (their generation throughput counts "
                    "prefill time)")
        else:
            note = (f"{self.prefill_windows} of {head[1]} windows also ran prefill (their throughput is diluted)"
                    if self.prefill_windows else "")
        return {"value_ms": head[0], "samples": head[1], "batch": head[2], "confidence": conf, "lines": lines,
                "estimator": "vLLM " + head[3].replace("#running-req / gen throughput", "Running / Avg generation throughput")
                             .replace("lines", "windows") + (" without prefill" if bins is decode else ""),
                "by_batch": bins.table(), "note": note}
