"""The typed records the log reader (`wmtp.logs`) yields, and the number helpers its parsers share."""

from __future__ import annotations

import math
import re
from datetime import date
from dataclasses import dataclass, field

MAX_VALUE = 1e12  # larger counts or rates are not something an engine printed
NUM_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf", re.I)
GROUPED_RE = re.compile(r"\s*\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])")


@dataclass(slots=True)
class DecodeLine:
    line_no: int
    time: str | None
    running: int
    tokens: int | None
    accept_len: float | None
    accept_rate: float | None
    gen_throughput: float
    cuda_graph: bool | None
    queue: int | None
    secs: float | None = None  # seconds (since 1970 with a date; of the day with a time only)
    pid: str | None = None
    dp: int | None = None
    retracted: int | None = None

    @property
    def speculative(self) -> bool:
        return self.accept_len is not None or self.accept_rate is not None


@dataclass(slots=True)
class PrefillLine:
    line_no: int
    secs: float | None
    pid: str | None
    dp: int | None


@dataclass(slots=True)
class VllmThroughput:
    line_no: int
    secs: float | None
    pid: str | None
    engine: str  # "000", or "agg3" for `3 Engines Aggregated`, or "" (V0)
    prompt_thr: float
    gen_thr: float
    running: int


@dataclass
class VllmSpecLine:
    line_no: int
    mean_al: float | None
    accepted: int | None
    drafted: int | None
    per_position: list[float] = field(default_factory=list)
    secs: float | None = None
    pid: str | None = None
    k: int | None = None  # V0 prints it; V1 gives it as len(per_position)
    emitted: int | None = None  # V0 only (cumulative counters)
    accept_rate: float | None = None


@dataclass(slots=True)
class Value:
    """One number from a summary block, an offline/llama.cpp report or a meta_info object."""
    line_no: int
    key: str
    value: float | list


@dataclass(slots=True)
class Event:
    line_no: int
    kind: str  # retraction | oom | preemption
    count: int = 1


@dataclass(slots=True)
class Refused:
    """A line that reads as its kind but holds numbers its engine cannot print (a vLLM rates list with `nan` beside
    numbers, an SGLang accept len deeper than any draft): the reader (`wmtp.log_analysis.collect`) stops there
    with one error naming the file and this line."""
    line_no: int
    why: str


@dataclass
class ParseStats:
    lines: int = 0
    decode: int = 0
    vllm: int = 0
    garbled: int = 0
    skipped: int = 0
    other: int = 0  # prefill, throughput, summary values, events
    joined: list = field(default_factory=list)  # lines that held several records (`wmtp.log_joined`), the first 5
    joined_n: int = 0


def strict_float(t: str) -> float:
    """float(t), but `1_000` (float() reads 1000; no engine prints it) is a ValueError: garbage on every decode path."""
    return float(t if "_" not in t else "_")


def whole_num(t: str) -> float | None:
    """float(t) for a text that is one number and nothing else (`4e`, a number cut short: None)."""
    try:
        return float(t)
    except ValueError:
        return None


class CheckedField(dict):
    """text -> checked value, for a field with few distinct texts (a batch size, an accept len, a queue):
    float(text) converted and range-checked once, then looked up. A text outside [lo, hi] raises
    ValueError, or reads None with `else_none`; what raises is not remembered."""

    def __init__(self, lo: float, hi: float, to_int: bool = False, else_none: bool = False):
        super().__init__()
        self.lo, self.hi, self.to_int, self.else_none = lo, hi, to_int, else_none

    def __missing__(self, text: str):
        x = strict_float(text)
        if self.lo <= x <= self.hi:
            x = int(x) if self.to_int else x
        elif self.else_none:
            x = None
        else:
            raise ValueError(text)
        if len(self) < 65536:
            self[text] = x
        return x


def v1_drafts(k: int, drafted: float, accepted: float | None, mean_al: float | None) -> float:
    """The drafts of one vLLM V1 `SpecDecoding metrics` interval (k >= 1 per-position rates, Drafted > 0):
    Drafted / k, unless the printed mean acceptance length (1 + Accepted / drafts, `%.2f`) differs from what that
    gives by more than its rounding: below it, drafts were shorter than k (suffix decoding, dynamic draft length,
    drafts cut to the token budget); above it, a draft held more than k tokens (a tree of candidates counted in
    Drafted, per-position rates for its k depths: tree-verifying forks print `Avg tree nodes per depth`). Either
    way the line's own Accepted / (mean AL - 1) counts them. Accepted > Drafted contradicts itself (no draft accepts
    more tokens than it holds): Drafted / k kept, so the AL it gives is above d and the AL check refuses it."""
    d = drafted / k
    if mean_al is not None and mean_al > 1 and accepted and abs(1 + accepted / d - mean_al) > 0.0051 \
            and accepted <= drafted:
        return accepted / (mean_al - 1)
    return d


def finite(x: float | None, lo: float = 0.0, hi: float = MAX_VALUE) -> float | None:
    return x if x is not None and lo <= x <= hi else None  # NaN fails both comparisons


def num(v: str | None) -> float | None:
    """float(v), else the first number in v (`535.49 tokens/s`, `75.6%`); NaN for an infinite one."""
    if v is None:
        return None
    x = None
    if not isinstance(v, str) or (" " not in (s := v.strip()) and "%" not in s):  # else float() would refuse it:
        try:  # spare the (slow) exception
            x = float(v)
        except ValueError:
            pass
    if x is None:
        m = GROUPED_RE.match(v) if "," in v else None  # `2,833 tokens`: thousands separators
        m = m or NUM_RE.search(v)
        if not m:
            return None
        x = float(m.group(0).replace(",", ""))
    return x if math.isfinite(x) else math.nan


def ungroup(t: str) -> str:
    """`1,010` -> `1010` (thousands separators); any other text unchanged."""
    return t.replace(",", "") if "," in t and GROUPED_RE.fullmatch(t.strip()) else t


def after(body: str, key: str) -> float | None:
    i = body.find(key)
    if i < 0:
        return None
    i += len(key)
    j = body.find(", ", i)  # fields end at `, ` (a comma inside a number groups its thousands)
    return num(body[i:] if j < 0 else body[i:j])


_day_cache: dict = {}


def day_seconds(y: str, mo: str, d: str) -> int:
    """Seconds from 1970 to the start of a day (0 for no such day), as `wmtp.logs`' prefixes add them (remembered)."""
    key = (y, mo, d)
    if key not in _day_cache:
        try:
            _day_cache[key] = (date(int(y), int(mo), int(d)).toordinal() - 719163) * 86400
        except ValueError:
            _day_cache[key] = 0
    return _day_cache[key]


# vLLM spec-metrics fields, as `wmtp.logs.parse_vllm` reads them
def vllm_field_name(key: str) -> str | None:
    """The field a vLLM spec-metrics key names (by keyword, so the typo variants and orders read the same)."""
    key = key.lower()
    return ("emitted" if "emitted" in key else "k" if "speculative tokens" in key or "spec tokens" in key
            else "rate" if "acceptance rate" in key else "mean_al" if "acceptance length" in key
            else None if "throughput" in key or "efficiency" in key
            else "accepted" if "accepted" in key else "drafted" if "draft" in key else None)


def rates_list(tail: str) -> list[float]:
    """The numbers of a comma-separated list up to the next labelled field (`, Avg Draft ...`), `-----` as 0, `nan`
    and `inf` as themselves (numpy's text for 0 / 0 and x / 0: every entry kept, none cut off)."""
    tail = _NEXT_FIELD.split(tail, 1)[0]
    return [0.0 if x.startswith("-") else float(x) for x in _RATE_ITEM.findall(tail)]


_NEXT_FIELD = re.compile(r",\s*(?!(?:nan|inf)\b)[A-Za-z]", re.I)
_RATE_ITEM = re.compile(r"\d+\.\d+|\d+|-{2,}|\bnan\b|\binf\b", re.I)


def nan_rates(pos: list[float], acc: float | None, dr: float | None) -> bool | str | None:
    """A rates list holding `nan`: vLLM divides every position's accepted tokens by one count of drafts, so `nan`
    (0 / 0) is every entry or none. True: every one, with Accepted and Drafted 0 (an interval that drafted nothing);
    else why the line cannot be read. None: no `nan`."""
    nans = [i for i, x in enumerate(pos) if x != x]
    if not nans:
        return None
    if len(nans) == len(pos) and acc == 0 and dr == 0:
        return True
    shown = ", ".join(str(i + 1) for i in nans[:4]) + (" ..." if len(nans) > 4 else "")
    counts = "" if acc is None or dr is None else f" with Accepted: {acc:.12g}, Drafted: {dr:.12g}"
    return (f"vLLM per-position acceptance rate is nan at position {shown} of {len(pos)}{counts}; vLLM divides every "
            "position by the same drafts count, so nan (0 / 0) is at every position of an interval that drafted "
            "nothing, or at none: the rates cannot be read")
