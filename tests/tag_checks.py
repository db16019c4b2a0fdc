"""Checkers for the rule "every number the tool prints says where it came from" (tests/test_audit24.py), by parsing
what a command printed: its text (rich tables and lines) and its --json document.

What counts as a priced number, in text: a decimal (3.966, 2.36x, 7.7 %, 1.99 GiB, 27.0 s), a percentage or a
ratio, a byte size; and the integers a line or table row derives (best depth, requests seated, break-even context,
optimal window, Pareto points). Inputs echoed back (ctx 1M, d 7, W 4032 + sink 64, B 1) and counts (lines,
steps, runs) are integers outside those phrases and need no tag; names with digits (q122, Qwen3.5, h200) are not
numbers.

Where its tag may be:
- a boxed table cell: in the cell, in the row's cell under a 'source' header, or in the table's title (a table
  whose numbers share one source says it once, `TITLE_SOURCE`: '(analytical, ...)', '(measured: ...)');
- a compact (rule-under-the-header) table row: under a 'source' column (the row holds a tag), a source word in the
  title or header, else a tag right after every priced number of the row;
- any other line: a tag on the line; an indented line under a tagged line belongs to it (a preset's terms).
Legend and explanation lines ('sources:', 'tags:', 'acceptance:', 'costs:', 'note:', 'warning:', '!') are not
results and are not checked.

In JSON: a number's record (its dict) or an enclosing one holds a source: 'source', a '*_source' key or 'sources';
an acceptance number (accept_length, accept_rate, alpha) needs an acceptance source ('accept*source',
'acceptance*', 'profile_source'), in an acceptance reader's document (`wmtp logs`, `wmtp accept`) also 'source' or
'file' (every number there is read from that file). Keys that echo inputs or count things are exempt (INPUT_KEYS).
"""

from __future__ import annotations

import re

SHORT_TAGS = r"(?:meas|interp|extrap|sol|scaled|model|engine|fw|preset|flag|generic|native|trace|-)\*?"
TAG_TOKEN = re.compile(rf"^{SHORT_TAGS}(?:/{SHORT_TAGS})*!?$")
TAG_WORDS = re.compile(r"\b(measured|interpolated|extrapolated|speed-of-light|analytical|estimate|simulated|"
                       r"engine preset|engine accounting|framework profile|scaled from|model:|preset|datasheet)\b|"
                       r"\[[^\]]*(?:lines \d+-\d+|:\d+-\d+|whole file)[^\]]*\]")
# a table title's source statement: '(analytical, mem_fraction 0.85)', '(engine accounting: sglang)', '(measured: ...)';
# not a profile's name ('(measured profile h200 ...)'), which says which profile, not where the numbers come from
TITLE_SOURCE = re.compile(r"\((?:measured|analytical|engine accounting|speed-of-light|interpolated|extrapolated)"
                          r"(?:[:,)]| /| per-)|: datasheet ")
_NUM = r"(?<![\w.])(?<!\w-)[-+]?\d[\d,]*(?:\.\d+)?"  # not inside a name ('q122', 'Qwen3.5', 'GLM-4.5')
PRICED = re.compile(rf"(?<![\w.])(?<!\w-)[-+]?\d[\d,]*\.\d+(?![\w.])|{_NUM}\s?(?:%|x\b|GiB|MiB|KiB|TiB|GB\b|ms\b)")
DERIVED = re.compile(r"best depth|seats|break-even|max concurrent|Pareto|TPOT-optimal|largest mem_fraction")
SKIP = re.compile(r"^\s*(sources:|tags:|acceptance:|costs:|source:|note:|warning:|floor \(sol\):|! |wrote )")
BOX_ROW, BOX_HEAD = "│", "┃"


def priced_numbers(text: str) -> list[re.Match]:
    return list(PRICED.finditer(text))


def has_tag(text: str) -> bool:
    """A tag anywhere in `text` (a title, a heading, a source cell)."""
    return bool(TAG_WORDS.search(text)) or any(TAG_TOKEN.match(t) for t in text.split())


def cell_tagged(text: str) -> bool:
    """A cell's numbers each followed by a tag ('9.350 interp*', '1.00 -'), or a tag word in it."""
    return bool(TAG_WORDS.search(text)) or all(_number_tagged(text, m) for m in priced_numbers(text))


def line_tagged(text: str) -> bool:
    """A line's tag: a tag word, a short tag closing it ('... (3.884 ms) interp*'; not 'native' or '-', which end
    lines as words), or a tag after one of its numbers."""
    tokens = text.split()
    last = bool(tokens) and tokens[-1] not in ("native", "-") and bool(TAG_TOKEN.match(tokens[-1]))
    return bool(TAG_WORDS.search(text)) or last or any(_number_tagged(text, m) for m in priced_numbers(text))


def _number_tagged(text: str, m: re.Match) -> bool:
    """A tag token right after the number (and its unit): '3.966 interp*', '2.36x interp*', '2.133 meas !'."""
    rest = text[m.end():].split()
    rest = rest[1:] if rest and rest[0] in ("ms", "s", "GiB", "MiB", "KiB", "%", "x") else rest
    return bool(rest) and bool(TAG_TOKEN.match(rest[0]))


def _is_priced(text: str) -> bool:
    return bool(priced_numbers(text)) or bool(DERIVED.search(text) and re.search(_NUM, text))


def _box_table(lines: list[str], i: int, title: list[str]) -> tuple[list[str], int]:
    """Offending rows of the boxed table whose top border is lines[i]; and the index after its bottom border."""
    header: list[str] = []
    bad = []
    j = i + 1
    while j < len(lines) and not lines[j].startswith("└"):
        ln = lines[j]
        if ln.startswith(BOX_HEAD):
            header = [h.strip() for h in ln.strip(BOX_HEAD).split(BOX_HEAD)] if not header else header
        elif ln.startswith(BOX_ROW):
            cells = [c.strip() for c in ln.strip(BOX_ROW).split(BOX_ROW)]
            src = [c for h, c in zip(header, cells) if "source" in h.lower()]
            if not (any(TITLE_SOURCE.search(t) for t in title) or any(has_tag(c) for c in src)):
                bad += [f"{ln.strip()}  <- cell {c!r}" for c in cells[1:] if _is_priced(c) and not cell_tagged(c)]
                if _is_priced(cells[0]) and not any(has_tag(c) for c in cells):  # 'max concurrent requests'
                    bad.append(ln.strip())
        j += 1
    return bad, j + 1


def _compact_table(lines: list[str], i: int) -> tuple[list[str], int, int]:
    """Offending rows of the compact table whose rule is lines[i]: its heading is the lines of the rule's width
    above it (title and column headers), its rows the lines of that width below. Returns (bad, first heading line,
    index after the last row)."""
    width = len(lines[i])
    h = i
    while h > 0 and len(lines[h - 1]) == width and lines[h - 1].strip() and not lines[h - 1].startswith("─"):
        h -= 1
    heading = " ".join(lines[h:i])
    j, bad = i + 1, []
    while j < len(lines) and len(lines[j]) == width and not set(lines[j].strip()) <= {"─"}:
        row = lines[j]
        if _is_priced(row):
            if "source" in heading.lower():  # the source column closes the row
                ok = bool(TAG_TOKEN.match(row.split()[-1])) or bool(TAG_WORDS.search(row))
            else:
                ok = bool(TITLE_SOURCE.search(heading)) or all(_number_tagged(row, m) for m in priced_numbers(row))
            if not ok:
                bad.append(row.strip())
        j += 1
    return bad, h, j


def untagged_text(text: str) -> list[str]:
    """The units (table cells or rows, lines) of a command's text output that hold a priced number without a tag."""
    lines = [ln.rstrip("\n") for ln in text.splitlines()]
    bad: list[str] = []
    in_table = [False] * len(lines)
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("┏") or ln.startswith("┌"):
            width, k = len(ln), i
            while k > 0 and len(lines[k - 1]) == width and not lines[k - 1][:1] in "└│┃":
                k -= 1
            found, end = _box_table(lines, i, lines[k:i])
            bad += found
            for t in range(k, min(end, len(lines))):
                in_table[t] = True
            i = end
            continue
        if ln.strip() and set(ln.strip()) == {"─"} and len(ln.strip()) > 10:
            found, start, end = _compact_table(lines, i)
            bad += found
            for t in range(start, end):
                in_table[t] = True
            i = end
            continue
        i += 1
    parent_tagged = False
    for ln, tabled in zip(lines, in_table):
        if tabled or not ln.strip():
            continue
        if SKIP.match(ln):
            parent_tagged = not ln.startswith(" ") or parent_tagged
            continue
        indented = ln.startswith("  ")
        tagged = line_tagged(ln) or (indented and parent_tagged)
        if not indented:
            parent_tagged = line_tagged(ln)
        if _is_priced(ln) and not tagged:
            bad.append(ln.strip())
    return bad


# --- JSON --------------------------------------------------------------------------------------------------------

INPUT_KEYS = {"ctx", "depth", "window", "sink", "batch", "tp", "tree_width", "count", "times", "position", "lines",
              "first_line", "last_line", "index", "records", "garbled", "skipped", "schema_version", "measured_depth",
              "n", "points", "fit_points", "parameters", "samples", "wmtp_version", "verify_index_walks",
              "draft_index_walks", "tokens", "seed", "steps"}
ACCEPT_KEY = re.compile(r"accept_length|accept_rate|^al$|alpha")


def _source_keys(d: dict) -> tuple[bool, bool, bool]:
    """(cost source, acceptance source, file) keys in one record."""
    keys = [k for k in d if isinstance(k, str)]
    acc = any(re.search(r"accept.*source|^acceptance|profile_source", k) for k in keys)
    cost = any(k in ("source", "sources") or (k.endswith("_source") and "accept" not in k) for k in keys)
    return cost, acc, "file" in keys


def untagged_json(doc, reader: bool = False) -> list[tuple[str, float]]:
    """(path, value) of every number in `doc` without a source in its record or an enclosing one (see the module
    docstring); `reader`: an acceptance reader's document (`wmtp logs`, `wmtp accept`)."""
    out: list[tuple[str, float]] = []

    def walk(node, path: str, cost: bool, acc: bool) -> None:
        if isinstance(node, dict):
            c, a, f = _source_keys(node)
            cost, acc = cost or c or (reader and f), acc or a or (reader and (c or f))
            for k, v in node.items():
                walk(v, f"{path}.{k}", cost, acc)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]", cost, acc)
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            keys = [p for p in re.split(r"[.\[\]]", path) if p and not p.isdigit()]
            key = keys[-1] if keys else ""
            if key in INPUT_KEYS:
                return
            needs_acc = bool(ACCEPT_KEY.search(key)) or any(ACCEPT_KEY.search(p) for p in keys[-3:])
            if not (acc if needs_acc else cost):
                out.append((path, node))

    walk(doc, "$", False, False)
    return out


# --- HTML (wmtp report) ---------------------------------------------------------------------------------------------

def _html_text(fragment: str) -> str:
    import html

    return html.unescape(re.sub(r"<[^>]+>", " ", fragment)).strip()


def untagged_html(doc: str) -> list[str]:
    """The report's text (figures aside: plotly's own JSON) that holds a priced number without a tag: a table cell
    without its own tag (a <small> origin) in a table with no 'source' row, or a clause ('; ') of a paragraph without
    one."""
    body = re.sub(r"<script.*?</script>|<style.*?</style>|<div class=\"wmtp-figure\".*?</section>", "", doc, flags=re.S)
    bad = []
    for table in re.findall(r"<table>(.*?)</table>", body, flags=re.S):
        rows = [re.findall(r"<t[dh]>(.*?)</t[dh]>", r, flags=re.S) for r in re.findall(r"<tr>(.*?)</tr>", table,
                                                                                      flags=re.S)]
        sourced = any(r and _html_text(r[0]).startswith("source") for r in rows)
        for r in rows:
            for c in r[1:]:
                text = _html_text(c)
                if _is_priced(text) and not sourced and not cell_tagged(text):
                    bad.append(f"cell {text!r} in row {_html_text(r[0])!r}")
    for para in re.findall(r"<p[^>]*>(.*?)</p>", re.sub(r"<table>.*?</table>", "", body, flags=re.S), flags=re.S):
        for clause in _html_text(para).split("; "):  # a paragraph of facts: each its own tag
            if _is_priced(clause) and not line_tagged(clause) and not clause.startswith(("warning:", "! ")):
                bad.append(clause)
    return bad
