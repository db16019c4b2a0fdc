"""llama.cpp lines as `wmtp.logs.parse_other` reads them: llama-server `print_timing` (`eval time = ... ms per
token`, `draft acceptance = R (A accepted / G generated)`, `mean acceptance length = X` / `mean len = X`,
progress `n_decoded|n_gen = N, tg = X t/s`), `statistics <impl>: ... #gen drafts = D, ... #acc tokens = A`
(cumulative per speculative implementation), the per-round verbose `update_slots` line `accepted A/D draft tokens,
new n_tokens = N` (one verify round each: A accepted of D drafted), and the speculative examples' `decoded N tokens
in S seconds`."""

from __future__ import annotations

import math
import re

from wmtp.acceptance import MAX_DEPTH
from wmtp.log_records import MAX_VALUE, Value, finite

_G = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"  # a number, its thousands maybe grouped (`12,345.67`)
_EVAL = re.compile(rf"(prompt )?eval time\s*=\s*(?:{_G})\s*ms\s*/\s*({_G})\s*(?:tokens|runs)\s*\(\s*({_G}) ms per token")
_DRAFT = re.compile(rf"draft acceptance(?: rate)?\s*=\s*({_G})\s*\(\s*({_G}) accepted\s*/\s*({_G}) generated\)")
_MEAN = re.compile(rf"mean (?:acc(?:eptance)? )?len(?:gth)?\s*=\s*({_G})")
_POS = re.compile(r"(?:acceptance rate per position|acc rate/pos)\s*=\s*\(([^)]*)\)")
_STATS = re.compile(rf"statistics\s+(\S+):.*#gen drafts\s*=\s*({_G}),.*#acc tokens\s*=\s*({_G})")
_TG = re.compile(rf"n_(?:gen|decoded)\s*=\s*{_G},\s*tg\s*=\s*({_G}) t/s")
_ROUND = re.compile(r"\baccepted\s+(\d+)\s*/\s*(\d+)\s+draft tokens\b")
_DECODED = re.compile(rf"decoded\s+({_G}) tokens in\s+({_G}) seconds")
SKIP = "skip"  # a llama.cpp line with nothing for us (prompt eval time)


_ITEM = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


_BIN = re.compile(r'\s*"(\d{1,3})"\s*:\s*(\S+?)\s*')  # a sparse histogram's `"j": count` (vLLM's per-choice stats)


def number_list(text: str, whole: bool = False) -> list[float] | None:
    """The numbers of a printed list ('[10, 3, 1]', '0.8, 0.6'), or None where an item is no number: picking the
    numbers out of '[10, null, 1]' shifted every later bin down by one. `whole`: each a whole number (histogram
    counts); then also a sparse object of bins ('{"0": 39, "1": 1, "3": 3}', the missing ones 0; none given twice)."""
    if whole and text.lstrip().startswith("{"):
        bins = [_BIN.fullmatch(i) for i in text.strip().strip("{}").split(",")]
        if not all(bins) or len({int(b.group(1)) for b in bins}) < len(bins):
            return None
        xs, top = number_list(",".join(b.group(2) for b in bins), whole=True), max(int(b.group(1)) for b in bins)
        if xs is None or top >= MAX_DEPTH:  # (bins 0..gamma, d = gamma + 1 <= MAX_DEPTH)
            return None
        dense = [0.0] * (top + 1)
        for b, x in zip(bins, xs):
            dense[int(b.group(1))] = x
        return dense
    items = text.strip().strip("[]()").split(",")
    if not all(_ITEM.fullmatch(i.strip()) for i in items):
        return None
    xs = [float(i) for i in items]
    ok = all(math.isfinite(x) and 0 <= x <= MAX_VALUE and (not whole or x == int(x)) for x in xs)
    return xs if ok else None


def _f(text: str) -> float:
    return float(text.replace(",", ""))


def parse_llama(line: str, n: int):
    """`Value`s of a llama.cpp line, SKIP, False (a draft-acceptance/statistics line without its numbers) or
    None (not a llama.cpp line: the caller goes on)."""
    if "ms per token" in line:
        m = _EVAL.search(line)
        if m:
            if m.group(1):
                return SKIP  # prompt eval
            return [Value(n, "llama_eval_ms_per_token", _f(m.group(3))), Value(n, "llama_eval_tokens", _f(m.group(2)))]
    if "draft acceptance" in line or "#mean acc len" in line or "#gen drafts" in line:
        m = _STATS.search(line)
        out = [Value(n, "llama_stat_drafts:" + m.group(1), _f(m.group(2))),
               Value(n, "llama_stat_acc:" + m.group(1), _f(m.group(3)))] if m else []
        m = _DRAFT.search(line)
        if m:
            out += [Value(n, "llama_accepted", _f(m.group(2))), Value(n, "llama_generated", _f(m.group(3)))]
        m = _MEAN.search(line)
        if m:
            out.append(Value(n, "accept_length", _f(m.group(1))))
        m = _POS.search(line)
        if m and number_list(m.group(1)):
            out.append(Value(n, "llama_per_position", number_list(m.group(1))))
        return out or False
    if " tg = " in line:
        m = _TG.search(line)  # llama-server progress: cumulative t/s of the running task
        if m and finite(_f(m.group(1))):
            return [Value(n, "llama_tg", _f(m.group(1)))]
    if " draft tokens" in line:
        m = _ROUND.search(line)  # one verify round: its accepted drafts (the drafted count is 0 in old builds)
        return [Value(n, "llama_round", [float(m.group(1)), float(m.group(2))])] if m else None
    if "decoded " in line and " tokens in " in line:
        m = _DECODED.search(line)
        if m and _f(m.group(1)) > 0:
            return [Value(n, "llama_decoded_tokens", _f(m.group(1))), Value(n, "llama_decoded_s", _f(m.group(2)))]
    return None
