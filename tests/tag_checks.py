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


# --- the report's figures (plotly's JSON in the HTML) -----------------------------------------------------------------
# A figure's numbers show in its hover boxes (and, for `markers+text` traces, written on the plot); a line drawn at a
# value (a shape in data coordinates) shows one through its label. Their tags are words: TAG_WORDS, the bare origin
# an HTML cell's <small> shows for another GPU's profile ('scaled'), the CLI's tag of the generic acceptance profile
# ('generic': the mean of the paper presets), and 'assumed' (the report's 5 % model error where none was held out).
FIGURE_TAG = re.compile(TAG_WORDS.pattern + r"|\b(?:scaled|generic|assumed)\b")


def report_figures(doc: str) -> dict[str, dict]:
    """div id -> {"data": traces, "layout": layout} of each `Plotly.newPlot("ID", DATA, LAYOUT, CONFIG)` call in a
    report (plotly writes both as JSON literals)."""
    import json

    dec, figs = json.JSONDecoder(), {}
    for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', doc):
        data, end = dec.raw_decode(doc, m.end())
        layout, _ = dec.raw_decode(doc, re.compile(r"\s*,\s*").match(doc, end).end())
        figs[m.group(1)] = {"data": data, "layout": layout}
    return figs


def _fig_tagged(text) -> bool:
    return isinstance(text, str) and bool(FIGURE_TAG.search(_html_text(text)))


def _in_data(ref) -> bool:
    """A `yref` that places a shape or label at a data value ('y', 'y2'), not on the paper or an axis's domain."""
    return str(ref or "y").startswith("y") and not str(ref).endswith("domain")


def _trace_untagged(t: dict) -> list[str]:
    """Why one trace's numbers lack a tag (empty when they have one). With a hovertemplate, the box shows what it
    says: a tag in its fixed text, or, where it shows `%{customdata}` (a source per point), in every drawn point's
    customdata; without one, the box shows the trace's name and text. A trace drawn with no hover (a guide, a
    shaded range) needs a tag only for a priced number in its name."""
    name, ht = t.get("name") or "", t.get("hovertemplate")
    if t.get("hoverinfo") in ("skip", "none"):
        return [f"trace {name!r}: priced name, no tag"] if _is_priced(name) and not _fig_tagged(name) else []
    ys = t.get("y")
    points = [i for i, y in enumerate(ys) if isinstance(y, (int, float)) and not isinstance(y, bool)] \
        if isinstance(ys, list) else None  # (a typed array: every point drawn)
    if points == []:
        return []
    bad = []
    text = t.get("text")
    if "text" in (t.get("mode") or "") and re.search(r"\d", str(text)) and not _fig_tagged(name):
        bad.append(f"trace {name!r}: numbers written on the plot, no tag in its legend name")
    if ht is None:
        shown = t.get("hovertext") or text
        each = isinstance(shown, list) and all(i < len(shown) and _fig_tagged(shown[i])
                                               for i in (points if points is not None else range(len(shown))))
        if not (_fig_tagged(name) or each):
            bad.append(f"trace {name!r}: its hover shows the numbers and the name, no tag")
    elif "%{customdata" in ht:
        cd = t.get("customdata")
        cd = cd if isinstance(cd, list) else []
        missing = [i for i in (points if points is not None else range(max(len(cd), 1)))
                   if not (i < len(cd) and _fig_tagged(cd[i]))]
        if missing:
            bad.append(f"trace {name!r}: point(s) {missing[:5]} with no tag in their customdata")
    elif not _fig_tagged(re.sub(r"%\{[^}]*\}", " ", ht)):
        bad.append(f"trace {name!r}: hovertemplate {ht!r} holds no tag")
    return bad


def untagged_figures(figs: dict[str, dict]) -> list[str]:
    """What in a report's figures (`report_figures`) shows a number without a tag: a trace (`_trace_untagged`), an
    annotation at a data value or holding a priced number, a line or band drawn at a value with no tagged label at
    its y, a priced title."""
    bad = []
    for fid, fig in figs.items():
        layout = fig["layout"]
        bad += [f"{fid}: {why}" for t in fig["data"] for why in _trace_untagged(t)]
        notes = layout.get("annotations", [])
        for a in notes:
            text = a.get("text", "")
            if (_in_data(a.get("yref")) or _is_priced(_html_text(text))) and not _fig_tagged(text):
                bad.append(f"{fid}: annotation {text!r}")
        for s in layout.get("shapes", []):
            at = {s.get("y0"), s.get("y1")}
            labelled = any(_fig_tagged(a.get("text", "")) and a.get("y") in at for a in notes)
            if _in_data(s.get("yref")) and not labelled:
                bad.append(f"{fid}: a {s.get('type')} at y={sorted(at)} with no tagged label")
        title = (layout.get("title") or {}).get("text", "")
        if _is_priced(_html_text(title)) and not _fig_tagged(title):
            bad.append(f"{fid}: title {title!r}")
    return bad
