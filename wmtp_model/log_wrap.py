"""Terminal-wrapped pastes: a log copied from a terminal (or `script`, tmux) whose long lines were cut into
pieces of exactly the terminal's width. `wrap_width` finds that width in a file's first 64 KiB (the longest
line, at least 60 characters, with the pieces after it not starting like a line of their own); `Unwrapped`
joins each run of full-width pieces with the piece after it, and leaves a blank line in place of every piece
it joined, so the joined line keeps the line number of its first piece and the lines after it keep theirs.
Lines wrapped at a space instead (an editor's or mail client's wrap, `soft_wrapped`) are joined by `SoftJoined`: an
engine line that stops before its last needed field, with the lines that complete it."""

from __future__ import annotations

import re

from wmtp.log_summary import FileView

MIN_WIDTH, MAX_WIDTH = 60, 512
_TERMINAL = (80, 100, 120, 132, 160, 200)  # usual terminal widths
# what starts a line of its own, surely: a blank line, a level name, a date or time (TensorRT-LLM's `[MM/DD/YYYY-`
# too), a process prefix, a known kind, a whole Prometheus sample (`name{labels} value`: a scrape's lines of one
# length are no terminal's cut); and, for finding the width, also what likely does: an indent of two or more (a
# traceback), a bracket, a quote or a markup character (a piece cut at the width may start with any of these, though)
_SURE = (r"\s*$|(?:INFO|WARN|WARNING|ERROR|DEBUG|CRITICAL|TRACE)\b|\[?\d{4}-\d\d-\d\d|\[?\d\d:\d\d:\d\d|"
         r"\d\d-\d\d[ T]\d\d:|[A-Z][a-z]{2} [ \d]\d \d\d:|\(\w+ pid=\d+\)|(?:Decode|Prefill) batch|\[\d\d/\d\d/\d{4}-|\[TRT-LLM\]|\[TensorRT-LLM\]|"
         r"[A-Za-z_:][\w:]*\w(?:\{[^{}\n]*\})? +[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|NaN|Inf)(?: +-?\d+)?\s*$")
_START, _LIKELY = re.compile(_SURE), re.compile(_SURE + r"|\s\s|[\[(<{\"'#|>`=\u2500-\u257f]|={3}|-{3}|\+[-=]")
_ZERO = str.maketrans("123456789", "000000000")
# a whole table row or rule: it starts and ends with a bar, a `+` corner or a box-drawing character (tabulate's grids,
# rich's boxes: genai-perf / AIPerf, AISBench, EvalScope): every row of a table has one length, none is a cut piece
_ROW = re.compile(r"\s*[|+\u2500-\u257f].*[|+\u2500-\u257f]\s*$")


def starts_a_line(piece: str, before: str, likely: bool = False) -> bool:
    """Whether `piece` starts a line of its own after the line that began with `before`: it starts like
    a line (`_START`, or with `likely` `_LIKELY`) or like that one (its first 8 characters the same but for
    digits: a shared prefix)."""
    return ((_LIKELY if likely else _START).match(piece) is not None
            or piece[:8].translate(_ZERO) == before[:8].translate(_ZERO))


def wrap_width(head: str, whole: bool, strict: bool = False) -> int | None:
    """The width the lines of `head` (a file's first characters; `whole`: all of it) were cut at, or None:
    the length (60 to 512) of most lines that another line continues, if at least half the lines of that
    length are continued, and either two are or (not `strict`: the file shows a wrap at spaces) the length is a usual
    terminal width (longer lines, such as a comment added to the paste, may stand among them), and fewer lines of
    lengths within 20 of it are continued (many such: a wrap at spaces, `soft_wrapped`, not a terminal's cut)."""
    lines = head.split("\n")
    if not whole:
        lines.pop()  # cut by the head's end, not by the terminal
    lines = [ln.rstrip("\r") for ln in lines]
    cut: dict[int, int] = {}
    for a, b in zip(lines, lines[1:]):  # (a `# ` heading or comment followed by text is no cut line)
        if MIN_WIDTH <= len(a) <= MAX_WIDTH and not a.startswith("# ") and not starts_a_line(b, a, likely=True) \
                and not _ROW.match(a):
            cut[len(a)] = cut.get(len(a), 0) + 1
    if not cut:
        return None
    for width in sorted(cut, key=lambda w: (cut[w], w), reverse=True):  # (a long comment line, such as a paste's
        full = sum(1 for ln in lines if len(ln) == width and not _ROW.match(ln))  # heading, may look continued too:
        # the next width is tried; a table's rows, all of one length, are not lines a terminal could have cut)
        near = sum(c for w, c in cut.items() if 0 < abs(w - width) <= 20)
        if 2 * cut[width] >= full and (cut[width] >= 2 or width in _TERMINAL and not strict) and near < cut[width]:
            return width
    return None


class _Joined(FileView):
    """A text file read through `_lines` (lines, and after a joined line one chunk of the blank lines it leaves)."""

    def __iter__(self):
        for chunk in self._it:  # a joined line's blank lines come as one chunk
            if chunk.count("\n") > 1 and not chunk.strip():
                yield from ["\n"] * len(chunk)
            else:
                yield chunk

    def read(self, size: int = -1) -> str:
        out, n = [], 0
        for chunk in self._it:
            out.append(chunk)
            n += len(chunk)
            if 0 <= size <= n:
                break
        return "".join(out)


class Unwrapped(_Joined):
    """A text file whose pieces of exactly `width` characters are joined with the pieces that continue them."""

    def __init__(self, f, width: int) -> None:
        self.f, self.width = f, width
        self._it = self._lines()

    def _lines(self):
        held: list = []  # the full-width pieces of a line, then the piece that ends it
        for line in self.f:
            piece = line.rstrip("\r\n")
            if held:
                if not starts_a_line(piece, held[0]):
                    held.append(piece)
                    if len(piece) == self.width:
                        continue
                    yield _join(held) + (line[len(piece):] or "\n")
                    yield "\n" * (len(held) - 1)
                    held = []
                    continue
                yield _join(held) + "\n"
                if len(held) > 1:
                    yield "\n" * (len(held) - 1)
                held = []
            if len(piece) == self.width and not _ROW.match(piece):
                held = [piece]
            else:
                yield line
        if held:
            yield _join(held) + "\n"
            if len(held) > 1:
                yield "\n" * (len(held) - 1)


# the words of engine lines: between two of them a cut took a space away, inside one (`r|eqs`, `acc|ept`) nothing
_WORDS = frozenset("""gen throughput token tokens usage accept acceptance len length rate cuda npu graph queue running
    prompt generation avg cache hit prefix gpu cpu kv per position number of speculative emitted system efficiency
    mean eval time total ms second draft drafted accepted reqs waiting swapped pending full mamba swa batch decode
    prefill new seq cached input engine engines aggregated deferred preemptions external metrics specdecoding
    retracted transfer prealloc pre allocated largest statistics acc gen drafts calls dur""".split())
_GROUP = re.compile(r"\d{3}(?![\d.])")  # the rest of a number's thousands group (`1,010`)
_TAIL, _HEAD = re.compile(r"[A-Za-z]+$"), re.compile(r"[A-Za-z]+")


def _sep(out: str, p: str) -> str:
    """What a cut between `out` and `p` took away: a space where the line had one for sure (after `,` or `:`, not in
    a number's thousands or a time; between `%`, `]`, `)` or a digit and a word; before `(`, `[`, `#`), or between two
    engine-line words (`_WORDS`) that glued make none; else nothing (a terminal cuts inside words)."""
    a, b = out[-1:], p[:1]
    if not a or not b or a.isspace() or b.isspace():
        return ""
    if a == "," or a == ":":
        return "" if out[-2:-1].isdigit() and (b.isdigit() if a == ":" else _GROUP.match(p)) else " "
    if (a in "%])" or a.isdigit()) and (b.isalpha() or b in "#([\"") or a in "%])" and b.isdigit():
        return " "
    if b in "([#\"" and (a.isalnum() or a in "%])"):
        return " "
    if a.isalpha() and b.isalpha():
        w1, w2 = _TAIL.search(out).group(0).lower(), _HEAD.match(p).group(0).lower()
        return " " if w1 in _WORDS and w2 in _WORDS and w1 + w2 not in _WORDS else ""
    return ""


def _join(pieces: list) -> str:
    """The line a terminal or a wrap at spaces cut into `pieces` (`_sep` puts back what each cut took away)."""
    out = pieces[0]
    for p in pieces[1:]:
        out += _sep(out, p) + p
    return out


# engine lines (by a word that a wrap does not split off the line's start) and the field each cannot end before
_DONE = (("Decode batch", re.compile(r"gen throughput \(token/s\): *\d")),
         ("Avg prompt", re.compile(r"Running: *\d+ reqs")),
         ("SpecDecoding", re.compile(r"Drafted: *\d+ tokens|Mean acceptance length: *\d(?!.*Accepted)")),
         ("peculative metrics", re.compile(r"[Ee]mitted tokens: *\d")),
         ("eval time", re.compile(r"ms per token")), ("draft acceptance", re.compile(r"generated\)")),
         ("#calls(b,g,a)", re.compile(r"#acc tokens *= *\d")), ("Engine 0", re.compile(r"Running: *\d+ reqs")),
         ("Engines Aggregated", re.compile(r"Running: *\d+ reqs")), ("] Avg", re.compile(r"Running: *\d+ reqs")))


def incomplete(line: str) -> bool:
    """Whether `line` starts an engine line (`_DONE`) but stops before its last needed field, on a `:`, or (a spec
    line, whose per-position rates may go on) on a `,`."""
    for mark, done in _DONE:
        if mark in line:
            end = line.rstrip()[-1:]
            return done.search(line) is None or end == ":" or (end == "," and mark == "SpecDecoding")
    return False


def soft_wrapped(head: str) -> set:
    """The lengths of the engine lines of `head` (a file's first characters) wrapped where a space was, or at one: an
    `incomplete` line that the next ones (up to five, none a line of its own) complete, with no cut inside a word
    between them (that, a terminal's cut at a width, is `wrap_width`'s to find). Lengths other than a terminal's width
    show a wrap at spaces (an editor's or a mail client's)."""
    lines, out = head.split("\n"), set()
    for i, a in enumerate(lines):
        if incomplete(a):
            joined = a.rstrip("\r")
            for b in lines[i + 1:i + 6]:  # up to five pieces after it
                b = b.rstrip("\r")
                if starts_a_line(b, a) or (joined[-1:].isalnum() and b[:1].isalnum() and not _sep(joined, b)):
                    break
                joined += _sep(joined, b) + b
                if not incomplete(joined):
                    out.add(len(a.rstrip("\r")))
                    break
    return out


class SoftJoined(_Joined):
    """A text file whose `incomplete` engine lines are joined (`_join`) with up to five lines after them that complete
    them and do not start lines of their own; an incomplete line that nothing completes is left as it is."""

    def __init__(self, f) -> None:
        self.f = f
        self._it = self._lines()

    def _lines(self):
        pending: list = []  # an incomplete line and the pieces after it
        for line in self.f:
            if pending and (starts_a_line(line.rstrip("\r\n"), pending[0]) or len(pending) > 5):
                yield from pending  # not continued
                pending = []
            if not pending:
                if incomplete(line):
                    pending.append(line)
                else:
                    yield line
                continue
            pending.append(line)
            joined = _join([q.rstrip("\r\n") for q in pending])
            if not incomplete(joined):
                yield joined + "\n"
                yield "\n" * (len(pending) - 1)
                pending = []
        yield from pending


# a pretty-printed JSON document (`jq .`, `python -m json.tool`, `json.dumps(indent=...)`): an array of numbers one element
# a line (MLC-LLM's `"accept_count": [`, vLLM's per-position rates) or an object of `"j": count` bins one a line
# (AIPerf's `"pooled_spec_decode_acceptance_histogram": {`), which the line parsers read only whole
_OPEN_ARRAY = re.compile(r'\s*"[^"]+"\s*:\s*\[\s*$')
_OPEN_OBJECT = re.compile(r'(\s*)"([^"]+)"\s*:\s*\{\s*$')
_ELEMENT = re.compile(r"\s*[-+0-9.eE]+\s*,?\s*$|\s*\]\s*,?\s*$")
_BIN = re.compile(r'\s*"\d+"\s*:\s*(?:[-+0-9.eE]+|NaN|-?Infinity)\s*,?\s*$|\s*\}\s*,?\s*$')
_DOC = re.compile(r'\s*(?:\{\s*"|\[\s*[\[{])')  # an object or an array of them: not a `[2025-...` log line
MAX_ARRAY_LINES = 4096
# objects a reader of run-level numbers never reads: AIPerf's `warmup_metrics` (its metric objects again, over the
# warm-up requests only: `src/aiperf/common/models/export_models.py`), written after the profiling ones
SKIPPED = frozenset(("warmup_metrics",))


def pretty_json(head: str) -> bool:
    """Whether `head` (a file's first characters; `#` comment lines before it, a paste's note, left out) is a
    pretty-printed JSON document with an array or object opened on a line of its own."""
    while head.startswith("#") and "\n" in head:
        head = head.split("\n", 1)[1]
    return _DOC.match(head) is not None and any(_OPEN_ARRAY.match(ln) or _OPEN_OBJECT.match(ln)
                                                for ln in head.split("\n", 2000)[:2000])


class ArraysJoined(_Joined):
    """A pretty-printed JSON document whose arrays of numbers (`"key": [` then one number a line, then `]`) and objects
    of bins (`"key": {` then `"j": count` a line, then `}`) are each joined onto their key's line (a blank line left
    for each line joined); anything else within one, or more than MAX_ARRAY_LINES elements, leaves it as it is. A
    SKIPPED object is blank lines to its closing brace (at its key's indent)."""

    def __init__(self, f) -> None:
        self.f = f
        self._it = self._lines()

    def _lines(self):
        held: list = []
        close = skip = None  # the held opener's closing bracket; a skipped object's closing line
        for line in self.f:
            if skip is not None:
                skip = None if line.rstrip().rstrip(",") == skip else skip
                yield "\n"
                continue
            if held:
                if (_ELEMENT if close == "]" else _BIN).match(line) and len(held) <= MAX_ARRAY_LINES:
                    held.append(line)
                    if line.strip().startswith(close):
                        yield " ".join(x.strip() for x in held) + "\n"
                        yield "\n" * (len(held) - 1)
                        held = []
                    continue
                yield from held
                held = []
            m = None if _OPEN_ARRAY.match(line) else _OPEN_OBJECT.match(line)
            if m is not None and m.group(2) in SKIPPED:
                skip = m.group(1) + "}"
                yield "\n"
            elif m is not None or _OPEN_ARRAY.match(line):
                held, close = [line], "}" if m is not None else "]"
            else:
                yield line
        yield from held


# a box table (tabulate's `fancy_grid` / `grid`, rich's boxes: AISBench, AIPerf, EvalScope) hard-wrapped by a terminal
# narrower than the wrap reader's MIN_WIDTH (a phone's SSH client, a split tmux pane): each row in pieces of the width,
# trailing spaces trimmed by the capture, a cut anywhere (inside a number: `│ 2` then `5.0 ms │`)
_BOX = frozenset(chr(c) for c in range(0x2500, 0x2580))
_TOP_LEFT, _TOP_RIGHT = "╒┌┏╔╭+", "╕┐┓╗╮+"
_ROW_START = frozenset("│┃║╒╞├╘┌└┏┡┣┗╔╠╚╭╰╟╓╙")
MIN_BOX_WIDTH, MAX_BOX_PIECES = 20, 64


def box_width(head: str) -> tuple[int, int] | None:
    """(the width a box table's rows were cut at, the length of a whole row) from its top rule in `head` (a file's
    first characters): a rule of box characters 20 to 59 long that does not end in a corner, continued by rule pieces
    up to one that does; None when no such rule is there."""
    lines = [ln.rstrip("\r") for ln in head.split("\n")]
    for i, a in enumerate(lines):
        if not (MIN_BOX_WIDTH <= len(a) < MIN_WIDTH and a[0] in _TOP_LEFT and a[-1] not in _TOP_RIGHT
                and set(a) <= _BOX):
            continue
        total = len(a)
        for b in lines[i + 1:i + MAX_BOX_PIECES]:
            if not b or not set(b) <= _BOX or len(b) > len(a):
                break
            total += len(b)
            if b[-1] in _TOP_RIGHT:
                return len(a), total
            if len(b) < len(a):
                break
    return None


class BoxJoined(_Joined):
    """A text file whose box-table rows, cut into pieces of `width` characters (each trimmed of its trailing spaces),
    are joined back: a row's first piece (it starts with a box character) and the pieces after it, each but the last
    padded back to the width, up to the length of the table's top rule (`total`, measured again at each table's top
    rule: its pieces up to the one that ends in a corner); a piece that starts a line of its own (`_START`: a blank
    line, a log line) ends the row early, and the pieces are left as they are."""

    def __init__(self, f, width: int, total: int) -> None:
        self.f, self.width, self.total = f, width, total
        self._it = self._lines()

    def _done(self, held: list) -> bool:
        """Whether the pieces `held` make a whole row (a top rule: one that ends in a corner, and its length is the
        table's from now on)."""
        size = self.width * (len(held) - 1) + len(held[-1])
        if held[0][0] in _TOP_LEFT and set(held[0]) <= _BOX:
            if held[-1][-1:] in _TOP_RIGHT and set(held[-1]) <= _BOX and len(held) > 1:
                self.total = size
                return True
            return False
        return size >= self.total

    def _lines(self):
        held: list = []
        for line in self.f:
            piece = line.rstrip("\r\n")
            if held:
                if _START.match(piece) or len(held) >= MAX_BOX_PIECES:
                    yield from (p + "\n" for p in held)
                    held = []
                else:
                    held.append(piece)
                    if self._done(held):
                        yield "".join(p.ljust(self.width) for p in held[:-1]) + piece + "\n"
                        yield "\n" * (len(held) - 1)
                        held = []
                    continue
            if piece[:1] in _ROW_START:
                if piece[0] in _TOP_LEFT and piece[-1] in _TOP_RIGHT and set(piece) <= _BOX:
                    self.total = len(piece)  # a table narrower than the terminal: its rows are whole
                elif len(piece) < self.total:  # a piece of a row wider than the terminal (trimmed of its trailing
                    held = [piece]  # spaces it is shorter than the width, and may end in a bar)
                    continue
            yield line
        yield from (p + "\n" for p in held)
