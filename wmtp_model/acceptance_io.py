"""Acceptance from what serving engines write: SGLang per-request `meta_info` (JSON, JSONL, Python dict
repr, recognised by content), plain histograms, per-step accept lengths, vLLM V0/V1 spec-decoding metric
lines, bench/offline summaries, llama.cpp stats, SGLang decode logs (mean accept len only).

Estimators (bonus token included: AL = tokens emitted per verify step):
  meta_info   histogram H[n] -> AL = sum (n + 1) H[n] / sum H[n]; without one, sum completion_tokens /
              sum spec_verify_ct; vLLM per-request: acceptance_histogram, else 1 + accepted / num_spec_steps.
  vLLM V1     pooled over intervals: AL = 1 + sum Accepted / sum (Drafted / k), k = number of per-position
              rates (or Drafted from the printed mean AL when no rates; Accepted / (mean AL - 1) on a line
              whose printed AL disagrees with Drafted / k); per-position rates are unconditional
              (accepted at position i / drafts), conditional acceptance is their ratio.
  vLLM V0     counters are cumulative: the last line, AL = emitted / (draft tokens / k).
  summaries   bench/offline: 1 + accepted tokens / drafts, else the printed acceptance length.
  llama.cpp   the printed mean acceptance length, else (inferred) emitted / (emitted - accepted).
  SGLang logs mean `accept len` over the decode lines used for TPOT (see wmtp.logstats).
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import zlib
from pathlib import Path

from wmtp.acceptance import (MAX_DEPTH, AcceptanceProfile, check_accept_length, from_histogram, geometric,
                             histogram_count, is_chain, load_histogram, wilson_interval)
from wmtp.errors import WmtpError
from wmtp.fileio import check_lookup, json_int
from wmtp.log_input import is_stream, open_text, spool
from wmtp.log_records import v1_drafts
from wmtp.log_meta import HIST_KEYS, add_histogram
from wmtp.logs import VllmSpecLine
from wmtp.log_analysis import analyse, own_depth



def histogram_from_meta(objs, used: list | None = None) -> list[float]:
    """Sum the per-request histograms of meta_info objects (or responses holding `meta_info`); `used`, when given,
    gets the index of each object that gave one."""
    total: list[float] = []
    for i, o in enumerate(objs):
        if not isinstance(o, dict):
            continue
        m = o.get("meta_info", o)
        for k in HIST_KEYS:
            if isinstance(m, dict) and isinstance(m.get(k), list):  # each count checked: a negative one cancelled
                where = f"request {i + 1}'s {k}"
                add_histogram(total, [histogram_count(c, f"{where} bin n={n}") for n, c in enumerate(m[k])])
                if used is not None:
                    used.append(i)
                break
    return total


def _json_content(path: Path) -> tuple[object, list, list[int]]:
    """(the whole file as one JSON document or None, the JSONL (line number, object) pairs when it is not one, the
    numbers of the lines that are not JSON)."""
    with open_text(path) as f:
        text = f.read()
    try:  # (a number too long for int() is `json_int`'s ValueError: the file's error, not a garbled line)
        return json.loads(text, parse_int=json_int), [], []
    except (json.JSONDecodeError, RecursionError):
        pass
    out, garbled = [], []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line:
            try:
                out.append((n, json.loads(line, parse_int=json_int)))
            except (json.JSONDecodeError, RecursionError):
                garbled.append(n)  # skipped (a line cut short by an interrupted write), and said so
    return None, out, garbled


def _garbled_note(info: dict, garbled: list[int]) -> None:
    """Say which lines of a JSONL file were skipped: a request's histogram left out was a silently smaller sum."""
    if garbled:
        shown = ", ".join(map(str, garbled[:5])) + (f" and {len(garbled) - 5} more" if len(garbled) > 5 else "")
        info["note"] = f"{len(garbled)} line(s) not JSON, skipped: line {shown}"


def _step_length(n: int, value, p: Path) -> int:
    """One per-step accept length (tokens a verify step emitted): a whole number in 1..MAX_DEPTH; 3.9 was read as 3,
    and 0, 5000 or "4" dropped, silently."""
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= MAX_DEPTH
            or value != int(value)):  # (the range first: isfinite() of 400 digits is an OverflowError; NaN fails it)
        raise WmtpError(f"{p}: line {n}: accept_length {str(value)[:40]!r} is not a per-step accept length (a whole "
                        f"number of tokens in 1..{MAX_DEPTH})")
    return int(value)


def _metrics_csv(p: Path) -> bool:
    """Whether a `.csv` file is a benchmark's metrics export (AIPerf's / genai-perf's `profile_export_*.csv`: its first
    row `Metric,...`), read as a log, not as `n,count` histogram lines."""
    try:
        with open_text(p) as f:
            first = next((ln for ln in f if ln.strip() and not ln.startswith("#")), "")  # (a `#` note: a paste's)
            return first.lstrip().startswith(("Metric,", '"Metric",'))
    except (OSError, UnicodeError, EOFError, zlib.error, WmtpError):
        return False


def _legacy(p: Path, info: dict) -> AcceptanceProfile | None:
    """Strict JSON / JSONL / CSV inputs: meta_info histograms, a histogram, per-step accept lengths."""
    name = p.name[:-3] if p.name.endswith(".gz") else p.name
    if name.endswith(".csv") and not _metrics_csv(p):
        info.update(kind="histogram", estimator="histogram")
        return load_histogram(p)
    if not name.endswith((".json", ".jsonl")):
        return None
    doc, numbered, garbled = _json_content(p)
    lines = [o for _, o in numbered]
    objs = (doc if isinstance(doc, list) else [doc]) if doc is not None else lines
    used: list[int] = []
    hist = histogram_from_meta(objs, used)
    if hist and sum(hist) > 0:  # requests: those whose histogram is in the sum (it said all of the file's objects)
        info.update(kind="sglang meta_info histograms", requests=len(used), estimator="summed histograms")
        _garbled_note(info, garbled)
        if len(used) < len(objs):
            took = set(used)
            left = next(i for i in range(len(objs)) if i not in took)
            first = f"line {numbered[left][0]}" if doc is None else f"object {left + 1}"
            info["note"] = "; ".join(filter(None, [info.get("note"), (
                f"{len(objs) - len(used)} of {len(objs)} objects hold no acceptance histogram, left out of the sum "
                f"(the first: {first})")]))
        return from_histogram(hist, f"meta_info histograms {p.name}")
    if doc is None:
        given = ((n, o.get("accept_length") if isinstance(o, dict) else o) for n, o in numbered
                 if isinstance(o, dict) or isinstance(o, (int, float)) and not isinstance(o, bool))
        steps = [_step_length(n, s, p) for n, s in given if s is not None]
        if not steps:
            return None
        h = [0.0] * max(steps)
        for s in steps:
            h[s - 1] += 1  # a step that emitted s tokens accepted s - 1 drafts
        info.update(kind="per-step accept lengths", steps=len(steps), estimator="histogram of per-step lengths")
        _garbled_note(info, garbled)
        return from_histogram(h, f"per-step accept lengths {p.name}")
    if isinstance(doc, list) and all(isinstance(x, (int, float)) for x in doc) or (
            isinstance(doc, dict) and doc and all(str(k).isdigit() for k in doc)):
        info.update(kind="histogram", estimator="histogram")
        return load_histogram(p)
    return None


def _unconditional_profile(rates: list[float], drafts: float | None, source: str) -> AcceptanceProfile | None:
    """Unconditional per-position rates (accepted at i / drafts) -> a histogram of drafts (scaled by the
    number of drafts when known, so Wilson intervals mean something)."""
    if not rates:
        return None
    if not is_chain([1.0, *rates]):  # clamped, 1.8 was alpha_1 = 1 and a rising pair alpha = 1 at the second
        shown = ", ".join(f"{r:.3f}" for r in rates[:8]) + (", ..." if len(rates) > 8 else "")
        raise WmtpError(f"{source}: per-position acceptance rates ({shown}) are no chain's: accepted at position i / "
                        "drafts lies in [0, 1] and never rises with i (a draft accepted at i + 1 was accepted at i)")
    scale = drafts if drafts and drafts > 0 else 1.0
    reached = [1.0] + [min(max(r, 0.0), 1.0) for r in rates]
    for i in range(1, len(reached)):
        reached[i] = min(reached[i], reached[i - 1])
    hist = [(reached[i] - reached[i + 1]) * scale for i in range(len(rates))] + [reached[-1] * scale]
    prof = from_histogram(hist, source)
    return prof if drafts else AcceptanceProfile(prof.alphas, prof.measured_depth, source, "per-position")


def profile_of(al: dict, source: str) -> AcceptanceProfile | None:
    """The per-position profile an AL result carries (histogram or unconditional rates), if any; none from rates
    that contradict the counts of their line (their AL at the run's depth was printed beside another headline)."""
    if al.get("per_position_conflict"):
        k, rates, counts = al["per_position_conflict"]
        raise WmtpError(f"{source}: the per-position acceptance rates give AL {1 + rates:.3f} at d={k + 1}, the "
                        f"Accepted / drafts counts of the same lines {1 + counts:.3f} (each rate is accepted at position "
                        "i / drafts: they sum to Accepted / drafts): the lines contradict themselves")
    if al.get("histogram"):
        h = al["histogram"]
        return from_histogram(h, source) if len(h) >= 2 and sum(h) > 0 else None
    if al.get("per_position"):
        return _unconditional_profile(al["per_position"], al.get("drafts"), source)
    return None


def read_acceptance(path: str | Path, depth: int | None = None) -> tuple[AcceptanceProfile | None, dict]:
    """(a per-position profile or None, info with `accept_length`, estimator, source lines) for one file."""
    p = Path(path)
    check_lookup(p, "acceptance file")  # Python 3.11's exists() raises on a name too long to look up
    if not p.exists():
        raise WmtpError(f"no such file: {p}")
    # a pipe (`<(cat h.json)`), or standard input redirected from a file (`- < h.json`: /dev/stdin is then the file,
    # and its name no .json: the histogram was read as a log): read once, into a file named for what it holds
    if is_stream(p) or str(p) == "/dev/stdin" or str(p).startswith(("/dev/fd/", "/proc/self/fd/")):
        return _read_stream(p, depth)
    info: dict = {"file": str(p)}
    try:
        prof = _legacy(p, info) if p.is_file() else None
    except (OverflowError, ValueError, TypeError, AttributeError) as e:
        raise WmtpError(f"{p}: not a usable histogram or meta_info file ({e})") from None
    if prof is not None:
        info.update(accept_length=prof.accept_length(prof.measured_depth), lines=None)
        return prof, info
    rep = analyse(p, depth=depth)
    al = rep["al"]
    if al is None or al.get("value") is None:
        has = f"a TPOT ({rep['tpot']['value_ms']:.2f} ms; `wmtp logs` reads it)" if rep["tpot"] else "nothing usable"
        why = (" (dense decode lines: no speculative decoding)" if rep["runs"] and not any(r["speculative"] for r in rep["runs"])
               else f" ({al['estimator']})" if al else "")
        raise WmtpError(f"{p}: no acceptance length in this file{why}; it has {has} "
                        f"({rep['lines']} lines, {rep['garbled']} garbled)")
    if depth is not None and own_depth(al) is None:  # a bare mean: the run's depth is the one the user gives
        check_accept_length(al["value"], depth, al["source"] if (al.get("lines") or [None])[0] else str(p))
    info.update(kind=al["kind"], estimator=al["estimator"], lines=al["lines"], samples=al.get("samples"),
                accept_length=al["value"])
    prof = profile_of(al, f"{al['kind']} {p.name}")
    if prof is None and depth is not None:
        mean = al["value"]
        what = "SGLang log mean accept len" if al["kind"].startswith("SGLang decode") else f"{al['kind']} mean AL"
        prof = geometric(min(max(mean, 1.0), depth), depth, f"{what} {mean:.2f} ({p.name})")
        info["note"] = f"a mean AL only: geometric profile at --depth {depth}"
    elif prof is None:
        info["note"] = "a mean AL only: give --depth for a (geometric) per-position profile"
    if al.get("note"):  # what the reader says about this AL's profile (AIPerf's folded `>=8` bucket)
        info["note"] = "; ".join(filter(None, (al["note"], info.get("note"))))
    return prof, info


def _read_stream(p: Path, depth: int | None) -> tuple[AcceptanceProfile | None, dict]:
    """A pipe's content, copied once into a file named for what it holds: JSON or JSONL (a histogram, meta_info)
    when it starts like JSON, else a log."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / "stream"
        with open(tmp, "w+b") as f:
            spool(p, f)
            head = f.read(4096)
        suffix = ".json" if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[") else ".log"
        named = tmp.rename(tmp.with_suffix(suffix))
        try:
            prof, info = read_acceptance(named, depth)
        except WmtpError as e:  # the message names what the user gave, not the temporary copy (by path or name)
            raise WmtpError(str(e).replace(str(named), str(p)).replace(named.name, str(p))) from None
    info["file"] = str(p)
    if prof is not None and named.name in prof.source:  # the source tag too: 'histogram stream.json' was no file
        prof = dataclasses.replace(prof, source=prof.source.replace(named.name, str(p)))
    return prof, info


def profile_from_file(path: str | Path, depth: int | None = None) -> tuple[AcceptanceProfile, dict]:
    """The best per-position profile a file gives (a mean AL alone needs `depth`), and how it was read."""
    prof, info = read_acceptance(path, depth)
    if prof is None:
        raise WmtpError(f"{path}: {info.get('kind', 'this file')} gives only a mean accept length "
                        f"({info['accept_length']:.2f}); say at which --depth")
    return prof, info


def profile_from_vllm(lines: list[VllmSpecLine], source: str) -> AcceptanceProfile:
    """Pool vLLM metric intervals: drafts = Drafted / k (`v1_drafts`: or Accepted / (mean AL - 1) where the
    printed AL disagrees with that); accepted at position i = rate_i * drafts."""
    k = max((len(r.per_position) for r in lines), default=0)
    if k == 0:
        acc = sum(r.accepted or 0 for r in lines)
        dr = sum(r.drafted or 0 for r in lines)
        if dr == 0:
            raise WmtpError("vLLM lines report no drafted tokens")
        raise WmtpError("vLLM lines without per-position rates give only the draft acceptance rate "
                        f"({acc / dr:.3f}); rerun with a vLLM that logs per-position acceptance")
    reached = [0.0] * (k + 1)  # reached[i]: drafts that accepted at least i tokens
    for r in lines:
        if len(r.per_position) != k or not r.drafted:
            continue
        drafts = v1_drafts(k, r.drafted, r.accepted, r.mean_al)
        reached[0] += drafts
        for i, rate in enumerate(r.per_position):
            reached[i + 1] += rate * drafts
    hist = [reached[i] - reached[i + 1] for i in range(k)] + [reached[k]]
    return from_histogram([max(h, 0.0) for h in hist], source)


def compare(native: AcceptanceProfile, window: AcceptanceProfile) -> list[dict]:
    """Position by position: alpha_j of each, and whether they differ at the 5 % level
    (two-proportion z-test; needs counts on both sides)."""
    rows = []
    for j in range(1, max(len(native.alphas), len(window.alphas)) + 1):
        row = {"position": j}
        for name, prof in (("native", native), ("window", window)):
            row[name] = prof.alphas[j - 1] if j <= len(prof.alphas) else math.nan
        if native.counts and window.counts and j < len(native.counts) and j < len(window.counts):
            n1, s1 = sum(native.counts[j - 1:]), sum(native.counts[j:])
            n2, s2 = sum(window.counts[j - 1:]), sum(window.counts[j:])
            if n1 and n2:
                p = (s1 + s2) / (n1 + n2)
                se = math.sqrt(max(p * (1 - p) * (1 / n1 + 1 / n2), 1e-300))
                z = (s1 / n1 - s2 / n2) / se
                row.update(z=z, significant=abs(z) > 1.959964,
                           native_ci=wilson_interval(s1, n1), window_ci=wilson_interval(s2, n2))
        rows.append(row)
    return rows
