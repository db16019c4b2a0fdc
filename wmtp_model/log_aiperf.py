"""NVIDIA AIPerf's spec-decode outputs (ai-dynamo/aiperf), where a value spans lines or needs the lines around it, and
its profile exports (`wmtp.logs.parse_other` calls `parse_aiperf`; `wmtp.log_sources.Summaries` keeps an `AiperfParts`):

- the console line under the `Spec Decode` table (`src/aiperf/exporters/console_spec_decode_exporter.py`,
  `format_acceptance_histogram_line`, 2026): `Accepted drafts per step (% of steps):  0: 61%   1: 3%   2: 18%`, the
  share of verify steps that accepted j drafts (`.0f` percent of the pooled histogram's steps), buckets 0 up to the
  largest seen, any j >= 8 folded into a last `>=8: p%`; before, PR #1191: `Accepted-draft histogram (% steps):`.
  rich's `console.print` wraps it at a space at the console's width (80 columns when stdout is no terminal: a CI
  log, `| tee`), so five buckets or more go on two lines, cut between any two words (`4:` / `12%`).
- `profile_export_aiperf.json` (`src/aiperf/common/models/export_models.py`, `JsonExportData`, written by
  `model_dump_json(indent=2)`; genai-perf's `profile_export_genai_perf.json` has its metric objects): one `{"unit":
  ..., "avg": ...}` object per metric (`inter_token_latency`: the per-request (latency - TTFT) / (OSL - 1);
  `spec_decode_token_weighted_acceptance_length`: 1 + accepted drafts / verify steps over the run, unit `ratio`;
  `spec_decode_acceptance_length`, its per-request mean; the totals `total_accepted_draft_tokens` (unit `tokens`) and
  `total_spec_decode_steps` (`count`), `src/aiperf/metrics/types/spec_decode_metrics.py`), the run-level
  `pooled_spec_decode_acceptance_histogram` (`{"j": steps}`, keys decimal strings, no cap, its counts summing to
  `total_spec_decode_steps`) over several lines, and `warmup_metrics`: the same objects over the warm-up requests
  only, never read (`wmtp.log_wrap.ArraysJoined` blanks it in a pretty document; `cut_warmup` on one line).
- `profile_export_aiperf.csv` (`src/aiperf/exporters/csv_exporter.py`): a `Metric,avg,min,max,p1,...,std` section of
  per-request metrics (`Inter Token Latency (ms),15.00,...`, `Acceptance Length (ratio),2.90,...`), a blank line, a
  `Metric,Value` section of run-level ones (`Token-Weighted Acceptance Length (ratio),2.50`, `Total Accepted Draft
  Tokens (tokens),7680.00`, `Total Spec Decode Steps,5120.00`: unit `count` not written), numbers `%.2f`, column 1
  the avg / value in both; the histogram is JSON-only. genai-perf's `profile_export_genai_perf.csv`: the same
  sections (`Metric,avg,min,max,p99,...`).

Definition used for a histogram H[j] of verify steps by accepted drafts j (the bonus token not in j): a step emits
j + 1 tokens, so AL = 1 + sum_j j H[j] / sum_j H[j] (AIPerf's token-weighted AL); the unconditional rate at draft
position i is the share of steps that accepted at least i drafts, sum_{j >= i} H[j] / sum_j H[j] (DESIGN.md's
alpha_i is its ratio to position i - 1's). Shares in whole percents are normalised by their own sum.
"""

from __future__ import annotations

import csv
import math
import re

from wmtp.acceptance import MAX_DEPTH
from wmtp.log_records import MAX_VALUE, Refused, Value, finite, num, ungroup

_SHARES = re.compile(r"Accepted[- ]drafts?\b[^:]*\(%\s*(?:of\s+)?steps\)\s*:(.*)$", re.IGNORECASE)
_TOKEN = re.compile(r"\s*(?:(>=)?(\d+)\s*:|([-+]?(?:\d+(?:\.\d*)?|\.\d+|nan|inf(?:inity)?))\s*%)", re.IGNORECASE)
_PIECE = re.compile(r"(?:\s*(?:(?:>=)?\d+\s*:|\d+(?:\.\d+)?\s*%))+\s*$")  # a wrapped line's rest: buckets only
MAX_PIECES = 8  # continuation lines of one histogram line (9 buckets fit on two at 40 columns)


_CUT = re.compile(r"\s*\d+(?:\.\d*)?\s*$")  # a number that lost its `%` (and what followed: the line cut there)


def _tokens(body: str) -> list | None:
    """A histogram line's buckets and shares in order (`("j", j, folded)`, `("p", percent)`, a last `("cut",)` for a
    line cut inside a share); None where anything else stands among them."""
    out, i, body = [], 0, body.rstrip()
    while i < len(body):
        m = _TOKEN.match(body, i)
        if m is None:
            return out + [("cut",)] if _CUT.fullmatch(body, i) else None
        out.append(("j", int(m.group(2)), bool(m.group(1))) if m.group(2) else ("p", float(m.group(3))))
        i = m.end()
    return out


def parse_step_shares(line: str, own: str, n: int):
    """AIPerf's histogram line as `aiperf_shares` (its tokens; wrapped, the rest follows), a line of its wrapped rest
    as `aiperf_shares+`; Refused for a share no histogram holds (NaN, negative, over 100 %) or a bucket deeper than
    any draft; False for a histogram line with other text among its buckets; None for another line."""
    m = _SHARES.search(line)
    if m is None:
        if "%" not in own or _PIECE.match(own) is None:  # (a share in it: what `wmtp.log_layout.maybe_ours` looks for)
            return None
        return Value(n, "aiperf_shares+", _tokens(own))
    toks = _tokens(m.group(1))
    if toks is None:
        return False
    for t in toks:
        if t[0] == "p" and not 0 <= t[1] <= 100:  # (NaN fails too)
            return Refused(n, f"AIPerf accepted-draft histogram: a share of {t[1]:g}% is no share of verify steps "
                              "(0 to 100 %)")
        if t[0] == "j" and t[1] >= MAX_DEPTH:
            return Refused(n, f"AIPerf accepted-draft histogram: bucket {t[1]} (drafts accepted in one step) is "
                              f"deeper than any draft wmtp models (d = gamma + 1 <= {MAX_DEPTH})")
    return Value(n, "aiperf_shares", toks)


# ------------------------------------------------------------------------------------------ the JSON export
JSON_KEYS = {"inter_token_latency": "itl_mean_ms",
             "spec_decode_token_weighted_acceptance_length": "accept_length_steps",
             "spec_decode_acceptance_length": "accept_length_requests",
             "total_accepted_draft_tokens": "accepted_tokens", "total_spec_decode_steps": "drafts"}
_JSON_OBJ = re.compile(r'"(' + "|".join(JSON_KEYS) + r')"\s*:\s*\{\s*(?:"unit"\s*:\s*"([\w%/]+)"\s*,\s*)?'
                       r'(?:"avg"\s*:\s*(\S+?)\s*[,}])?')
_TO_MS = {"ms": 1.0, "s": 1e3, "sec": 1e3, "us": 1e-3, "ns": 1e-6}  # a unit in milliseconds
_OWN_UNIT = {"total_accepted_draft_tokens": "tokens", "total_spec_decode_steps": "count"}  # (the ALs': `ratio`)
UNITS = ("ms", "s", "sec", "us", "ns", "ratio", "tokens", "count")  # `json_unit`'s value: 1 + the unit's place here
_JSON_FIELD = re.compile(r'\s*"(unit|avg)"\s*:\s*("[\w%/]+"|[-+0-9.eE]+|null)\s*,?\s*$')
_POOL = re.compile(r'"pooled_spec_decode_acceptance_histogram"\s*:\s*(\{[^{}]*\}|\{\s*$)')
_BUCKET = re.compile(r'\s*"(\d+)"\s*:\s*([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|NaN|-?Infinity))\s*')
_POOL_NAME = "AIPerf pooled_spec_decode_acceptance_histogram"


def json_scale(key: str, unit: str) -> float:
    """What an export object's `avg` is multiplied by to give the reader's value (`JSON_KEYS[key]`), 0 for a unit that
    is not that value's: a time in ms for the ITL, a ratio for an acceptance length, tokens / a count for the totals."""
    if key == "inter_token_latency":
        return _TO_MS.get(unit, 0.0)
    return 1.0 if unit == _OWN_UNIT.get(key, "ratio") else 0.0


def cut_warmup(line: str) -> str:
    """`line` without a one-line document's `"warmup_metrics": {...}` (the warm-up requests' own objects)."""
    i = line.find('"warmup_metrics"')
    j = line.find("{", i) if i >= 0 else -1
    if j < 0:
        return line
    depth = 0
    for k in range(j, len(line)):
        depth += (line[k] == "{") - (line[k] == "}")
        if depth == 0:
            return line[:i] + line[k + 1:]
    return line[:i]  # never closed: the rest of the line is the warm-up's


def parse_pooled(line: str, n: int):
    """`aiperf_pool` for the export's pooled histogram on one line (joined by `wmtp.log_wrap.ArraysJoined` when pretty):
    its counts by j, zeros where a bucket is missing (None: opened and not closed on the line, the document cut there);
    Refused for a bucket that is no whole number of steps, given twice, or deeper than any draft; None for no such
    key."""
    m = _POOL.search(line)
    if m is None:
        return None
    if not m.group(1).endswith("}"):
        return Value(n, "aiperf_pool", None)
    counts: dict[int, float] = {}
    for item in m.group(1)[1:-1].split(","):
        if not item.strip():
            continue
        b = _BUCKET.fullmatch(item)
        if b is None:
            return Refused(n, f"{_POOL_NAME}: {item.strip()[:40]!r} is no `\"j\": steps` bucket")
        j, x = int(b.group(1)), float(b.group(2).replace("Infinity", "inf"))
        if j >= MAX_DEPTH or j in counts or not (math.isfinite(x) and 0 <= x <= MAX_VALUE and x == int(x)):
            why = (f"bucket {j} is deeper than any draft wmtp models (d = gamma + 1 <= {MAX_DEPTH})" if j >= MAX_DEPTH
                   else f"bucket {j} given twice" if j in counts else f"bucket {j}: {b.group(2)} is no count of steps")
            return Refused(n, f"{_POOL_NAME}: {why}")
        counts[j] = x
    return Value(n, "aiperf_pool", [counts.get(j, 0.0) for j in range(max(counts) + 1)] if counts else [])


def parse_json_itl(line: str, n: int):
    """For a one-line `"inter_token_latency": {"unit": "ms", "avg": X, ...}` object (or another of `JSON_KEYS`) its
    value (`itl_mean_ms`, `accept_length_steps`, `accept_length_requests`, `accepted_tokens`, `drafts`);
    `json_open:KEY` for one opened on its own line (its `unit` / `avg` fields follow: `json_unit`, 1 + the unit's
    place in UNITS, 0 for another; `json_avg`); the pooled histogram (`parse_pooled`); False for a bad number or a unit
    not the value's; None for any other line. A line of several objects (a one-line document): a list."""
    line = cut_warmup(line) if '"warmup_metrics"' in line else line
    out = []
    for m in _JSON_OBJ.finditer(line):
        key, unit, raw = m.groups()
        if raw is None:
            if line.rstrip().endswith("{") and m.end() >= len(line.rstrip()):
                out.append(Value(n, "json_open:" + key, 0.0))
            continue
        x, scale = finite(num(raw)), json_scale(key, unit or ("ms" if key == "inter_token_latency" else ""))
        if x is None or not scale:
            return False
        out.append(Value(n, JSON_KEYS[key], x * scale))
    if "pooled_spec" in line and (pool := parse_pooled(line, n)) is not None:
        if type(pool) is Refused:
            return pool
        out.append(pool)
    if out:
        return out if len(out) > 1 else out[0]
    m = _JSON_FIELD.match(line)
    if m is None:
        return None
    if m.group(1) == "unit":
        u = m.group(2).strip('"')
        return Value(n, "json_unit", UNITS.index(u) + 1.0 if u in UNITS else 0.0)
    x = finite(num(m.group(2))) if m.group(2) != "null" else None
    return Value(n, "json_avg", x) if x is not None else None


# ------------------------------------------------------------------------------------------- the CSV export
CSV_LABELS = {"inter token latency (ms)": "itl_mean_ms",
              "token-weighted acceptance length (ratio)": "accept_length_steps",
              "acceptance length (ratio)": "accept_length_requests",
              "total accepted draft tokens (tokens)": "accepted_tokens", "total spec decode steps": "drafts"}


_CSV_FLOAT = re.compile(r"\d{1,3}(?:,\d{3})*\.\d\d|\d+\.\d\d")  # `%.2f` (genai-perf's grouped: `"1,234.00"`)
_CSV_TOTAL = re.compile(r"\d{1,3}(?:,\d{3})*(?:\.\d\d)?|\d+(?:\.\d\d)?")  # a sum of counts: `%.2f` or `%d`


def parse_csv_row(own: str, n: int):
    """A profile export CSV row of `CSV_LABELS` as its value (column 1: `avg` or `Value`; an empty cell, AIPerf's None:
    None); False where that cell is not as the exporter writes it (`%.2f`; a total also `%d`: NaN, negative, a line cut
    inside its number) or out of range; None for any other line."""
    head = own.split(",", 1)[0].strip().strip('"').lower()
    key = CSV_LABELS.get(head)
    if key is None:
        return None
    try:
        cells = next(csv.reader([own.strip()]))
    except (csv.Error, StopIteration):
        return False
    if len(cells) < 2 or not cells[1].strip():
        return None
    cell = cells[1].strip()
    if (_CSV_TOTAL if key in ("accepted_tokens", "drafts") else _CSV_FLOAT).fullmatch(cell) is None:
        return False
    x = finite(num(ungroup(cell)), 0.0, MAX_VALUE)
    return Value(n, key, x) if x is not None and (key != "drafts" or x > 0) else False


def parse_aiperf(line: str, own: str, n: int):
    """AIPerf's records of one line (`parse_step_shares`, `parse_json_itl`, `parse_csv_row`), or None."""
    if "steps)" in line or own.rstrip()[-1:] in ("%", ":"):
        if (rec := parse_step_shares(line, own, n)) is not None:
            return rec
    if ('"inter_token_latency"' in line or '"avg"' in line or '"unit"' in line or "spec_decode_" in line
            or '"total_accepted_draft' in line) and (rec := parse_json_itl(line, n)) is not None:
        return rec
    if "," in own and (own[:1].isalpha() or own[:1] == '"'):
        return parse_csv_row(own, n)
    return None


# ------------------------------------------------------------------------------------------ the accumulator
class AiperfParts:
    """AIPerf's values that need the lines around them, as `wmtp.log_sources.Summaries` streams by (`values`: its
    `key -> (value, line)`): a JSON export object opened on a line, its `unit` and `avg` after it; the histogram line
    and the wrapped rest of it on the next lines; the pooled histogram. `al` gives the AL they hold (once); `notes`
    says what was not used and why, `unused` counts those lines (the analysis counts them garbled)."""

    def __init__(self, values: dict) -> None:
        self.values = values
        self.obj_open, self.obj_key = None, ""  # an open JSON object: its line, its key (then (key, scale))
        self.shares: list | None = None  # the histogram line's [first line, last line, tokens]
        self.pieces = 0
        self.pool: tuple | None = None  # (line, counts by j)
        self.notes: list[str] = []
        self.unused = self.repeated = 0  # (repeated: objects whose key an earlier one gave, a later document's)
        self._al: tuple | None = None

    def add(self, v: Value) -> None:
        if v.key == "aiperf_shares":  # (a later histogram line replaces an earlier one: the last run's)
            self.shares, self.pieces = [v.line_no, v.line_no, v.value], 0
        elif v.key == "aiperf_shares+":  # a wrapped rest: on the next line, else someone else's numbers
            if self.shares is not None and v.line_no == self.shares[1] + 1 and self.pieces < MAX_PIECES:
                self.shares[1], self.shares[2], self.pieces = v.line_no, self.shares[2] + v.value, self.pieces + 1
        elif v.key == "aiperf_pool":
            self.pool = (v.line_no, v.value)
        else:
            self._json_field(v)

    def _json_field(self, v: Value) -> None:
        """An export object of `JSON_KEYS` opened on a line (`json_open:KEY`), then its `"unit"` (the value's, else the
        object is not read) and `"avg"` within the next three lines: the ITL in ms (`itl_mean_ms`), an AL, a total."""
        if v.key.startswith("json_open:"):
            self.obj_open, self.obj_key = v.line_no, v.key[10:]
        elif self.obj_open is None or v.line_no - self.obj_open > 3:
            self.obj_open = None
        elif v.key == "json_unit":
            scale = json_scale(self.obj_key, UNITS[int(v.value) - 1]) if v.value else 0.0
            self.obj_open, self.obj_key = (self.obj_open, (self.obj_key, scale)) if scale else (None, "")
        elif v.key == "json_avg":
            self.obj_open = None
            key, scale = self.obj_key if type(self.obj_key) is tuple else (self.obj_key, json_scale(self.obj_key, "ms"))
            if scale:
                self.repeated += JSON_KEYS[key] in self.values
                self.values[JSON_KEYS[key]] = (v.value * scale, v.line_no)

    def al(self, get, line) -> dict | None:
        """The AL of the file's AIPerf histogram: the pooled counts of the JSON export (exact), else the console line's
        whole percents (the token-weighted AL kept as the value where the file has one); for a histogram not used, an
        AL-less result saying why when the file has no other AIPerf AL; None without a histogram."""
        if self._al is None:
            self._check_totals(get)
            self._al = (self._pool_al(get) if self.pool is not None else None,)
            if self._al[0] is None and self.shares is not None:
                self._al = (self._share_al(get, line),)
        return self._al[0]

    def _check_totals(self, get) -> None:
        """The export's totals (`accepted_tokens`, `drafts`), unless they contradict its token-weighted AL (a number cut
        by a truncated file: noted, and not read)."""
        tw, acc, steps = get("accept_length_steps"), get("accepted_tokens"), get("drafts")
        if tw is not None and acc is not None and steps and abs(1 + acc / steps - tw) > 0.006:
            a, b = sorted({self.values["accepted_tokens"][1], self.values["drafts"][1]} | {0})[-2:]
            where = f"lines {a}-{b}" if a else f"line {b}"
            self.notes.append(f"AIPerf's totals at {where} give AL 1 + {acc:g} / {steps:g} = {1 + acc / steps:.4f}, "
                              f"its token-weighted acceptance length {tw:g}: they contradict it (a number cut short?), "
                              "not used")
            self.unused += 1
            del self.values["accepted_tokens"], self.values["drafts"]

    def _unused(self, get, lines: list, why: str) -> dict | None:
        self.unused += 1
        if any(get(k) is not None for k in ("accept_length_steps", "accepted_tokens", "accept_length_requests",
                                            "accept_length")):
            self.notes.append(why)  # (the file's other AL is read; the histogram's per-position rates are not)
            return None
        return {"value": None, "lines": lines, "estimator": why}

    def _pool_al(self, get) -> dict | None:
        n, h = self.pool
        if h is None or not sum(h):
            return self._unused(get, [n, n], f"{_POOL_NAME} at line {n} " + (
                "not read whole (the document cut there, or an entry no `\"j\": steps` bucket): not used"
                if h is None else
                "holds no verify step (its counts sum to 0; AIPerf writes it only when spec decode ran): not used"))
        steps = sum(h)
        al = 1 + sum(j * c for j, c in enumerate(h)) / steps
        out = {"value": al, "lines": [n, n], "samples": steps,
               "estimator": f"{_POOL_NAME} ({steps:.0f} verify steps by accepted drafts j, the whole run): "
                            "1 + sum j H[j] / sum H[j]"}
        if len(h) >= 2:
            out["histogram"] = h
        tw = get("accept_length_steps")
        if tw is not None and abs(tw - al) > 0.006:  # (its console and CSV value: 2 decimals)
            return self._unused(get, [n, n], f"{_POOL_NAME} at line {n} gives AL {al:.4f}, its token-weighted "
                                f"acceptance length {tw:g} (both count every verify step): the histogram contradicts "
                                "the counts, not used")
        return out

    def _share_al(self, get, line) -> dict | None:
        first, last, toks = self.shares
        where = "AIPerf accepted-draft histogram at " + (f"lines {first}-{last}" if last > first else f"line {first}")
        labels, pcts = toks[0::2], [t[-1] for t in toks[1::2]]
        js = [t[1] if t[0] == "j" else -1 for t in labels]
        if len(labels) != len(pcts) or -1 in js or any(t[0] != "p" for t in toks[1::2]):
            why = "cut inside a bucket (its share missing or cut)"
        elif js != list(range(len(js))) or any(t[2] for t in labels[:-1]):
            why = "buckets not 0, 1, 2, ... in order"
        elif not sum(pcts) or abs(sum(pcts) - 100) > 0.5 * len(js) + 1e-9:
            why = (f"shares sum to {sum(pcts):g} % (whole percents of every step: 100 +- {0.5 * len(js):g} %; the "
                   "line cut short, or its wrapped rest lost?)")
        else:
            why = None
        if why is not None:
            return self._unused(get, [first, last], f"{where}: {why}: not used")
        if js == [0]:  # `0: 100%`: AIPerf's only bucket is 0 (no step accepted a draft), AL 1 exactly
            return self._zero_al(get, line, where, first, last)
        shares = [p / sum(pcts) for p in pcts]
        al = 1 + sum(j * s for j, s in enumerate(shares))
        out = {"value": al, "lines": [first, last], "per_position": [min(sum(shares[j:]), 1.0) for j in
                                                                     range(1, len(shares))], "drafts": None,
               "estimator": "AIPerf accepted-draft histogram (% of verify steps, whole percents): 1 + sum j x share_j"}
        tw = get("accept_length_steps")
        if tw is not None:
            ls = [first, last] + [x for x in line("accept_length_steps") if x is not None]
            out.update(value=tw, lines=[min(ls), max(ls)], estimator="AIPerf Token-Weighted Acceptance Length (1 + "
                       "accepted drafts / verify steps, pooled); per-position rates from its accepted-draft histogram")
        if labels[-1][2]:  # `>=8`: the steps that accepted 8 or more drafts, in one bucket
            c = js[-1]
            if tw is not None and tw > c + 1:  # deeper than the folded rates' own d = c + 1: no profile of this AL
                del out["per_position"], out["drafts"]
                out["estimator"] = out["estimator"].split(";")[0]
            out["note"] = (f"{where} folds the steps that accepted {c} or more drafts into `>={c}` ({pcts[-1]:g} % of "
                           f"steps): per-position rates known to position {c} only, the run's own depth unknown" + (
                               f"; AL {al:.3f} counts them as {c} accepted: a lower bound (exact for d <= {c + 1})"
                               if tw is None else f" (AL by depth stops at d = {c + 1})" if "per_position" in out
                               else f"; not kept beside its AL {tw:g}, deeper than d = {c + 1}"))
            self.notes.append(out["note"])
        return out

    def _zero_al(self, get, line, where: str, first: int, last: int) -> dict | None:
        """The histogram line `0: 100%` (`format_acceptance_histogram_line` writes buckets up to the largest seen: one
        bucket is a run whose every verify step accepted 0 drafts): AL 1, no per-position rate beyond position 1's 0
        (the draft depth is not in the line); the token-weighted AL, where the file has one, must say the same."""
        out = {"value": 1.0, "lines": [first, last], "estimator": "AIPerf accepted-draft histogram `0: 100%`: every "
               "verify step accepted 0 drafts, AL 1 (the bonus token only; the draft depth not in the line)"}
        tw = get("accept_length_steps")
        if tw is None:
            return out
        if abs(tw - 1) > 0.006:  # (2 decimals)
            return self._unused(get, [first, last], f"{where} says no step accepted a draft (`0: 100%`), its "
                                f"token-weighted acceptance length {tw:g}: they contradict, the histogram not used")
        ls = [first, last] + [x for x in line("accept_length_steps") if x is not None]
        out.update(value=tw, lines=[min(ls), max(ls)], estimator="AIPerf Token-Weighted Acceptance Length (1 + "
                   "accepted drafts / verify steps, pooled); its accepted-draft histogram `0: 100%` agrees: no draft "
                   "accepted")
        return out
