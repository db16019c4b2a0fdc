"""Summary lines that a tool's own table layout makes readable only with the rows around them, or that no labelled
`key: value` reader knows (`wmtp.logs.parse_other` calls these; `wmtp.log_bench_values` turns the values into TPOT / AL):

- guidellm's console tables (vllm-project/guidellm). 0.3 (`src/guidellm/benchmark/output.py`): `Benchmarks Stats:`, a
  sections row (`Metadata | Request Stats || ... | ITL (ms) ||| TPOT (ms) ||`: a section of c columns ends in c bars, the
  last in c - 1), a header row (`mean| median| p99` under each latency section), then one row per benchmark, cells
  right-justified and no edge bars. 0.7 (`src/guidellm/utils/console.py`, `benchmark/outputs/console.py`): `Request
  Latency Statistics`, three header rows [group, name, units] whose identical neighbours are merged (`| ITL || TPOT ||`:
  the span's later cells empty), `Mdn | p95` units, `|`-edged rows. The rows start with a strategy (`synchronous`,
  `constant@4.00`, `throughput`). guidellm's TPOT is request latency / output tokens, the first token's wait included
  (`src/guidellm/schemas/request_stats.py`); its ITL, (last token - first token) / (output tokens - 1), is the decode
  time per token.
- a box-drawn table's first cell wrapped over several rows (rich fits a table to the console: 80 columns when stdout is
  no terminal, as in a CI log or `| tee`, so AIPerf's `Inter Token Latency (ms)` prints as `Inter` / `Token` / `Latency` /
  `(ms)`): a row of numbers under a text label starts a cell (`box:`), a row with only a label fragment continues it
  (`box+:`).
- MLC-LLM's `/metrics` text (`python/mlc_llm/serve/engine_base.py`, `EngineMetrics.prometheus_text`: a scope's numbers as
  `name<TAB>value`): `spec_decode_accept_len_accept_len{step=j}` (tokens per step counting positions 0..j) and
  `spec_decode_accept_prob_accept_prob{step=j}` (steps that emitted more than j tokens / steps that drafted j).

AIPerf's accepted-draft histogram line and its JSON / CSV exports are `wmtp.log_aiperf`'s.
"""

from __future__ import annotations

import re

from wmtp.log_records import Value, finite, num

_STRATEGY = re.compile(r"(?:synchronous|throughput|concurrent|constant|poisson|async|sweep)(?:@[\d.#]+)?")
_SECTION = re.compile(r"([^|]+?)\s*(\|+|$)")
_NO_VALUE = frozenset(("", "--", "N/A", "n/a", "-"))


def _edged(line: str) -> list[str] | None:
    """The cells of a `|`-edged row (one edge bar off each end: a merged header's last empty cell is kept)."""
    s = line.strip()
    return [c.strip() for c in s[1:-1].split("|")] if len(s) > 2 and s[0] == "|" and s[-1] == "|" else None


def _guidellm_head(cells: list[str], own: str, n: int) -> Value | None:
    """A `table_head` (kind 1: the ITL mean column, 0.3; kind 2: the ITL median column, 0.7) for a guidellm header."""
    if own.lstrip().startswith("Metadata") and "ITL (ms)" in own and "TPOT (ms)" in own:  # 0.3's sections row
        spans = [(m.group(1).strip(), len(m.group(2))) for m in _SECTION.finditer(own.strip())
                 if m.group(1).strip()]
        if not spans:
            return None
        counts = [c for _, c in spans[:-1]] + [spans[-1][1] + 1]
        names = [name for name, _ in spans]
        if "ITL (ms)" not in names:
            return None
        col = sum(counts[:names.index("ITL (ms)")])
        return Value(n, "table_head", [-1.0, -1.0, float(col), float(sum(counts)), 1.0])
    if cells and cells[0] == "Benchmark" and "ITL" in cells and ("TPOT" in cells or "TTFT" in cells):  # 0.7's groups
        return Value(n, "table_head", [-1.0, -1.0, float(cells.index("ITL")), float(len(cells)), 2.0])
    return None


def _box_row(cells: list[str], n: int):
    """`box+:` for a row that continues a wrapped first cell (a label fragment, every other cell empty), `box:` for a
    row that starts one (a text label, a number next to it); None for any other row."""
    if len(cells) < 3 or not cells[0] or len(cells[0]) > 64 or num(cells[0]) is not None:
        return None
    if not any(cells[1:]):
        return Value(n, "box+:" + cells[0], 0.0)
    x = finite(num(cells[1]), -1e18, 1e18) if cells[1] not in _NO_VALUE else None
    return Value(n, "box:" + cells[0], x) if x is not None else None


def parse_table_line(own: str, n: int, boxed: bool):
    """guidellm's header and benchmark rows as `table_head` / `table_row` Values (a row's strategy cell NaN); for a
    box-drawn row (`boxed`) its wrapped-cell marker (`_box_row`); None for anything else. `own`: the line's own text,
    box-drawing bars already `|`."""
    cells = _edged(own)
    plain = cells if cells is not None else [c.strip() for c in own.strip().split("|")]
    head = _guidellm_head(cells or [], own, n) if "ITL" in own else None
    if head is not None:
        return head
    if plain and _STRATEGY.fullmatch(plain[0]):
        xs = [float("nan")] + [x if (x := finite(num(c))) is not None and c not in _NO_VALUE else float("nan")
                               for c in plain[1:]]
        return Value(n, "table_row", xs)
    return _box_row(cells, n) if boxed and cells is not None else None


_MLC = re.compile(r"\s*spec_decode_accept_(len|prob)_accept_\1\{step=(\d+)\}\s+(\S+)\s*$")


def parse_mlc_metric(line: str, n: int):
    """`mlc_len:j` / `mlc_prob:j` for MLC-LLM's per-step acceptance samples, False for one with a bad number, None
    for another line."""
    m = _MLC.match(line)
    if m is None:
        return None
    x = finite(num(m.group(3)), 0.0, 1000.0)
    return Value(n, f"mlc_{m.group(1)}:{int(m.group(2))}", x) if x is not None else False
