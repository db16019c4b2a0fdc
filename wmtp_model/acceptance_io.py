"""Acceptance from what serving engines write: SGLang per-request `meta_info`, plain histograms,
per-step accept lengths, vLLM SpecDecoding metric lines, SGLang decode logs (mean AL only).

`meta_info` fields (sglang): `spec_verify_ct` (verify passes), `spec_accept_length`
(= completion_tokens / spec_verify_ct), `spec_correct_drafts_histogram` (verify passes that accepted
exactly n drafts, n = 0..block; sum = spec_verify_ct) and, in older versions, `spec_accept_histogram`.
vLLM's per-position rate is unconditional (accepted at position i / drafts); conditional
acceptance is its ratio to the previous position's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from wmtp.acceptance import AcceptanceProfile, from_histogram, geometric, load_histogram, wilson_interval
from wmtp.errors import WmtpError
from wmtp.logs import DecodeLine, ParseStats, VllmSpecLine, open_text, stream

HIST_KEYS = ("spec_correct_drafts_histogram", "spec_accept_histogram")


def _add(total: list[float], h) -> None:
    for i, c in enumerate(h):
        if i >= len(total):
            total.extend([0.0] * (i + 1 - len(total)))
        total[i] += float(c)


def histogram_from_meta(objs) -> list[float]:
    """Sum the per-request histograms of meta_info objects (or responses holding `meta_info`)."""
    total: list[float] = []
    for o in objs:
        if not isinstance(o, dict):
            continue
        m = o.get("meta_info", o)
        for k in HIST_KEYS:
            if isinstance(m.get(k), list):
                _add(total, m[k])
                break
    return total


def _json_content(path: Path) -> tuple[object, list]:
    """(the whole file as one JSON document or None, the JSONL objects when it is not one)."""
    with open_text(path) as f:
        text = f.read()
    try:
        return json.loads(text), []
    except json.JSONDecodeError:
        pass
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a garbled line is skipped
    return None, out


def _steps_profile(values: list, p: Path, info: dict) -> AcceptanceProfile | None:
    steps = [o.get("accept_length") if isinstance(o, dict) else o for o in values]
    steps = [int(s) for s in steps if isinstance(s, (int, float)) and not isinstance(s, bool) and s >= 1]
    if not steps:
        return None
    h = [0.0] * max(steps)
    for s in steps:
        h[s - 1] += 1  # a step that emitted s tokens accepted s - 1 drafts
    info.update(kind="per-step accept lengths", steps=len(steps))
    return from_histogram(h, f"per-step accept lengths {p.name}")


def profile_from_file(path: str | Path, depth: int | None = None) -> tuple[AcceptanceProfile, dict]:
    """The best acceptance a file gives, and how it was read. JSON documents: meta_info objects (or a
    list of them) give summed histograms; a list of counts or an object n -> count is a histogram.
    JSONL: meta_info lines, or per-step accept lengths (numbers or {"accept_length": n}). CSV: n,count.
    Logs: vLLM SpecDecoding lines (per position), SGLang decode lines (mean AL: needs `depth`)."""
    p = Path(path)
    if not p.exists():
        raise WmtpError(f"no such file: {p}")
    info: dict = {"file": str(p)}
    name = p.name[:-3] if p.name.endswith(".gz") else p.name
    if name.endswith((".json", ".jsonl")):
        doc, lines = _json_content(p)
        objs = (doc if isinstance(doc, list) else [doc]) if doc is not None else lines
        hist = histogram_from_meta(objs)
        if hist and sum(hist) > 0:
            info.update(kind="sglang meta_info histograms", requests=len(objs))
            return from_histogram(hist, f"meta_info histograms {p.name}"), info
        if doc is None:
            prof = _steps_profile(lines, p, info)
            if prof is not None:
                return prof, info
        else:
            info["kind"] = "histogram"
            return load_histogram(p), info
    if name.endswith(".csv"):
        info["kind"] = "histogram"
        return load_histogram(p), info
    stats = ParseStats()
    vllm, al_sum, al_n = [], 0.0, 0
    for r in stream(p, stats):
        if isinstance(r, VllmSpecLine):
            vllm.append(r)
        elif isinstance(r, DecodeLine) and r.accept_len is not None:
            al_sum += r.accept_len
            al_n += 1
    info.update(lines=stats.lines, skipped=stats.skipped, garbled=stats.garbled)
    if vllm:
        info["kind"] = "vLLM SpecDecoding lines"
        return profile_from_vllm(vllm, f"vLLM metrics {p.name}"), info
    if al_n:
        if depth is None:
            raise WmtpError(f"{p}: SGLang decode lines give only a mean accept length; say at which --depth")
        info["kind"] = "SGLang decode lines (mean accept len)"
        mean = al_sum / al_n
        return geometric(min(max(mean, 1.0), depth), depth, f"SGLang log mean accept len {mean:.2f} ({p.name})"), info
    raise WmtpError(f"{p}: no usable acceptance data ({stats.lines} lines, {stats.garbled} garbled)")


def profile_from_vllm(lines: list[VllmSpecLine], source: str) -> AcceptanceProfile:
    """Pool vLLM metric intervals: drafts = Drafted / k; accepted at position i = rate_i * drafts."""
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
        drafts = r.drafted / k
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
