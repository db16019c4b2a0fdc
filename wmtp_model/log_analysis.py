"""One file's TPOT and acceptance evidence, in one streaming pass: `collect` feeds every record to its
accumulator (SGLang runs, vLLM windows and spec lines, summaries, events); `analyse` turns them into the
headline TPOT and AL, each naming its estimator and source lines, and the notes on what was set aside."""

from __future__ import annotations

import math

from wmtp.acceptance import check_accept_length
from wmtp.errors import WmtpError
from wmtp.log_blocks import stream_blocks
from wmtp.log_records import MAX_VALUE
from wmtp.log_sources import SpecLines, Summaries
from wmtp.log_vllm_batch import VllmBatch
from wmtp.logs import DecodeLine, Event, ParseStats, PrefillLine, Refused, Value, VllmSpecLine, VllmThroughput, stream
from wmtp.logstats import MAX_ROWS, SglangRuns, VllmWindows


def collect(path, gap_s: float = 60.0, reference: bool = False) -> tuple:
    """One streaming pass over a file: (parse stats, SGLang runs, vLLM windows, vLLM spec lines, summaries,
    event counts, event line numbers). Read in blocks (`wmtp.log_blocks`; most vLLM lines go to the windows and
    spec lines a block at a time, `wmtp.log_vllm_batch`), or with `reference` line by line (`wmtp.logs.stream`,
    what the block reader is tested against)."""
    stats = ParseStats()
    runs, windows, spec, summ = SglangRuns(gap_s), VllmWindows(), SpecLines(), Summaries()
    events = {"retraction": 0, "oom": 0, "preemption": 0}
    event_lines: list[int] = []
    add_run = runs.add
    records = stream(path, stats, decode=runs.decode) if reference else \
        stream_blocks(path, stats, runs, VllmBatch(windows, spec))
    for r in records:  # most decode lines go to the runs directly, not through here
        if type(r) is PrefillLine or type(r) is DecodeLine:
            add_run(r)
        elif isinstance(r, Value):
            summ.add(r)
        elif isinstance(r, VllmThroughput):
            windows.add(r)
        elif isinstance(r, VllmSpecLine):
            windows.pair(r.pid, r.secs, spec.add(r))
        elif isinstance(r, Event):
            events[r.kind] += r.count
            if len(event_lines) < MAX_ROWS:
                event_lines.append(r.line_no)
        elif type(r) is Refused:
            raise WmtpError(f"{path}:{r.line_no}: {r.why}")
    summ.finish()
    return stats, runs, windows, spec, summ, events, event_lines


def own_depth(al: dict) -> int | None:
    """The depth d = gamma + 1 an AL result shows by itself: its histogram's bins (n = 0..gamma accepted) or its
    per-position rates plus the bonus token; None for a bare mean."""
    if al.get("histogram"):
        return len(al["histogram"])
    if al.get("per_position_conflict"):  # rates of k positions that contradict the counts: still d = k + 1
        return al["per_position_conflict"][0] + 1
    return len(al["per_position"]) + 1 if al.get("per_position") else None


def refuse_undrafted(path, spec: SpecLines) -> None:
    """vLLM spec lines with Accepted tokens and Drafted: 0 on every line (Accepted > Drafted = 0, `contradicted`):
    nothing to divide by, so one error naming the first (among lines that drafted, a `damage_notes` note)."""
    if spec.contradicted[0] and not spec.rate_drafted:
        raise WmtpError(f"{path}:{spec.contradicted[1]}: vLLM spec line(s) with Accepted tokens but Drafted: 0 "
                        f"({spec.contradicted[0]} line(s); impossible: no draft accepts a token it never drafted): "
                        "no acceptance length in these counts")


MIN_TPOT_MS = 1e-3  # 1 us per token (a million tokens a second for one request): below it no engine's TPOT


_SET_ASIDE = "TPOT set aside: "


def _sourced_tpot(tpot: dict, src: str, notes: list[str]) -> dict | None:
    """`tpot` with its source (`src`:lines) if its value is a time per token (finite, at least MIN_TPOT_MS, at most
    MAX_VALUE ms), else None and a note naming what was set aside: a quotient of a file's numbers (sum / count,
    E2E - TTFT over tokens) whose divisor is 1e-320 or whose numerator is 0 printed `TPOT: inf ms` or `0.00 ms`."""
    tpot["source"] = f"{src}:{tpot['lines'][0]}-{tpot['lines'][1]}"
    v = tpot["value_ms"]
    if isinstance(v, (int, float)) and math.isfinite(v) and MIN_TPOT_MS <= v <= MAX_VALUE:
        return tpot
    est = tpot["estimator"] if len(tpot["estimator"]) <= 90 else tpot["estimator"][:87] + "..."
    got = f"{v:.4g} ms" if isinstance(v, (int, float)) and math.isfinite(v) else "no finite time"
    notes.append(f"{_SET_ASIDE}{est} gives {got} ({tpot['source']}), not a time per token ({MIN_TPOT_MS:g} to "
                 f"{MAX_VALUE:g} ms): its numbers are corrupt")
    return None


def damage_notes(stats: ParseStats, spec: SpecLines, summ: Summaries) -> list[str]:
    """What the reader says about damaged input it still read: vLLM spec lines that contradict themselves, lines that
    held several records (`wmtp.log_joined`), an AIPerf histogram set aside (`wmtp.log_aiperf`: its line, read as a
    record, is counted garbled once the AL is known)."""
    notes = list(summ.aiperf.notes)
    stats.garbled, stats.other = stats.garbled + summ.aiperf.unused, stats.other - summ.aiperf.unused
    if spec.contradicted[0]:
        notes.append(f"{spec.contradicted[0]} vLLM spec line(s) with more Accepted than Drafted tokens (impossible; "
                     f"first: line {spec.contradicted[1]}): their counts pooled as printed, not their mean AL")
    if stats.joined_n:
        shown = ", ".join(map(str, stats.joined)) + (" and more" if stats.joined_n > len(stats.joined) else "")
        notes.append(f"{stats.joined_n} line(s) held several records with no line end between them (line {shown}: "
                     "processes writing one stream?): each record read on its own")
    return notes


def analyse(path, requested_batch: int | None = None, gap_s: float = 60.0, reference: bool = False,
            depth: int | None = None) -> dict:
    """Everything one file says about TPOT and acceptance, in one streaming pass: SGLang runs, vLLM
    windows and spec lines, summary blocks, meta_info, llama.cpp stats, retractions/OOM/stalls. The
    headline `tpot` and `al` name their estimator and source lines; `notes` say what was set aside.
    `reference`: read line by line (`collect`); `depth`: the user's d, the bound of an AL without its own."""
    stats, runs, windows, spec, summ, events, event_lines = collect(path, gap_s, reference)
    if stats.lines == 0:
        raise WmtpError(f"{path}: empty file")
    refuse_undrafted(path, spec)
    segs = runs.estimates(requested_batch)
    notes: list[str] = []
    src = str(path)

    tpot = summ.tpot()
    with_tpot = [s for s in segs if s.tpot_line_ms is not None]
    if tpot is None and with_tpot:
        best = max(with_tpot, key=lambda s: (s.tpot_samples, s.index))
        tpot = {"value_ms": best.tpot_line_ms, "estimator": best.tpot_estimator, "samples": best.tpot_samples,
                "batch": best.tpot_batch, "confidence": best.confidence, "run": best.index,
                "lines": [best.first_line, best.last_line]}
        if len(segs) > 1:
            notes.append(f"{len(segs)} runs; the headline is run {best.index} (most usable lines)")
    vw = windows.result()
    if tpot is None and vw is not None:
        tpot = {k: vw[k] for k in ("value_ms", "estimator", "samples", "batch", "confidence", "lines")}
        if vw["note"]:
            notes.append(vw["note"])
    if tpot is None:
        tpot = summ.meta_tpot()
    if summ.note:
        notes.append(summ.note)
    tpot = _sourced_tpot(tpot, src, notes) if tpot is not None else None
    if windows.idle:
        notes.append(f"{windows.idle} vLLM windows with Running: 0 reqs (no per-request TPOT)")

    al = summ.meta_al() or spec.result() or summ.summary_al()
    if al and al.get("value") is None and al.get("accept_rate") is not None and summ.get("spec_k"):
        k = int(summ.get("spec_k"))  # lines with only Accepted / Drafted (2025's first V1 format): k from the config
        al.update(value=1 + k * al["accept_rate"], estimator=f"1 + k x Accepted / Drafted, k = {k} from the file's "
                  "speculative config (full-length drafts assumed; the lines give no per-position rates)")
    if (al is None or al.get("value") is None) and any(s.speculative for s in segs):
        spec_segs = [s for s in segs if s.speculative and s.accept_length is not None]
        if spec_segs:
            best = max(spec_segs, key=lambda s: (s.tpot_samples, s.index))
            al = {"value": best.accept_length, "kind": "SGLang decode lines", "samples": best.tpot_samples or best.lines,
                  "lines": [best.first_line, best.last_line],
                  "estimator": f"mean accept len over the decode lines of run {best.index} used for TPOT"}
        elif al is None:
            rate = [s.accept_rate for s in segs if s.accept_rate is not None]
            al = {"value": None, "kind": "SGLang decode lines", "lines": [segs[0].first_line, segs[-1].last_line],
                  "estimator": f"accept len lost from the lines (accept rate {rate[0]:.2f}): AL unknown"
                  if rate else "AL unknown", "samples": 0}
    if al is not None and al.get("lines"):
        al["source"] = f"{src}:{al['lines'][0]}-{al['lines'][1]}"
    if al is not None and al.get("value") is not None:  # one check for every reader's AL, at the file's own d
        check_accept_length(al["value"], own_depth(al) or depth, al["source"] if (al.get("lines") or [None])[0] else src)
    stalls = sum(s.stalls for s in segs)
    if stalls:
        notes.append(f"{stalls} stalled decode lines (#token frozen, throughput collapsed) not used for TPOT")
    dropped = sum(s.dropped_after_prefill for s in segs)
    if dropped:
        notes.append(f"{dropped} decode lines right after a prefill set aside (their throughput counts idle time)")
    retracted = sum(s.retracted_max for s in segs)
    if events["retraction"] or events["oom"] or retracted:
        notes.append(f"retractions: {events['retraction']} events (max #retracted-req per line {retracted}); "
                     f"out-of-memory: {events['oom']}")
    if tpot is None and al is not None and al.get("value") is not None and \
            not any(n.startswith(_SET_ASIDE) for n in notes):
        notes.append("no TPOT in this file (acceptance only; `wmtp accept` gives the per-position profile)")
    notes += damage_notes(stats, spec, summ)
    if summ.repeated or summ.aiperf.repeated:
        notes.append("summary keys repeat (several blocks): the last value of each is reported")
    return {"file": src, "lines": stats.lines, "garbled": stats.garbled, "skipped": stats.skipped,
            "records": {"sglang_decode": stats.decode, "vllm_spec": stats.vllm, "other": stats.other},
            "tpot_ms": tpot["value_ms"] if tpot else None, "accept_length": al.get("value") if al else None,
            "tpot": tpot, "al": al, "runs": [s.to_dict() for s in segs],
            "vllm_windows": ({"rows": windows.rows, **vw} if vw else {"rows": windows.rows}) if windows.rows else None,
            "events": {**events, "retracted_max": retracted, "stalls": stalls, "lines": event_lines},
            "summary": {k: v[0] for k, v in summ.values.items()}, "notes": notes}
