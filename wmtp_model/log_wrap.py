"""Terminal-wrapped pastes: a log copied from a terminal (or `script`, tmux) whose long lines were cut into
pieces of exactly the terminal's width. `wrap_width` finds that width in a file's first 64 KiB (the longest
line, at least 60 characters, with the pieces after it not starting like a line of their own); `Unwrapped`
joins each run of full-width pieces with the piece after it, and leaves a blank line in place of every piece
it joined, so the joined line keeps the line number of its first piece and the lines after it keep theirs."""

from __future__ import annotations

import re

from wmtp.log_summary import FileView

MIN_WIDTH, MAX_WIDTH = 60, 512
_TERMINAL = (80, 100, 120, 132, 160, 200)  # usual terminal widths
# what starts a line of its own, surely: a blank line, a level name, a date or time, a process prefix, a known
# kind; and, for finding the width, also what likely does: an indent of two or more (a traceback), a bracket,
# a quote or a markup character (a piece cut at the width may start with any of these, though)
_SURE = (r"\s*$|(?:INFO|WARN|WARNING|ERROR|DEBUG|CRITICAL|TRACE)\b|\[?\d{4}-\d\d-\d\d|\[?\d\d:\d\d:\d\d|"
         r"\d\d-\d\d[ T]\d\d:|[A-Z][a-z]{2} [ \d]\d \d\d:|\(\w+ pid=\d+\)|(?:Decode|Prefill) batch")
_START, _LIKELY = re.compile(_SURE), re.compile(_SURE + r"|\s\s|[\[(<{\"'#|>`=]|={3}|-{3}")
_ZERO = str.maketrans("123456789", "000000000")


def starts_a_line(piece: str, before: str, likely: bool = False) -> bool:
    """Whether `piece` starts a line of its own after the line that began with `before`: it starts like
    a line (`_START`, or with `likely` `_LIKELY`) or like that one (its first 8 characters the same but for
    digits: a shared prefix)."""
    return ((_LIKELY if likely else _START).match(piece) is not None
            or piece[:8].translate(_ZERO) == before[:8].translate(_ZERO))


def wrap_width(head: str, whole: bool) -> int | None:
    """The width the lines of `head` (a file's first characters; `whole`: all of it) were cut at, or None:
    the length (60 to 512) of most lines that another line continues, if at least half the lines of that
    length are continued, and either two are or the length is a usual terminal width (longer lines, such
    as a comment added to the paste, may stand among them)."""
    lines = head.split("\n")
    if not whole:
        lines.pop()  # cut by the head's end, not by the terminal
    lines = [ln.rstrip("\r") for ln in lines]
    cut: dict[int, int] = {}
    for a, b in zip(lines, lines[1:]):
        if MIN_WIDTH <= len(a) <= MAX_WIDTH and not starts_a_line(b, a, likely=True):
            cut[len(a)] = cut.get(len(a), 0) + 1
    if not cut:
        return None
    for width in sorted(cut, key=lambda w: (cut[w], w), reverse=True):  # (a long comment line, such as a paste's
        full = sum(1 for ln in lines if len(ln) == width)  # heading, may look continued too: the next width is tried)
        if 2 * cut[width] >= full and (cut[width] >= 2 or width in _TERMINAL):
            return width
    return None


class Unwrapped(FileView):
    """A text file whose pieces of exactly `width` characters are joined with the pieces that continue them."""

    def __init__(self, f, width: int) -> None:
        self.f, self.width = f, width
        self._it = self._lines()

    def _lines(self):
        held, blanks = None, 0
        for line in self.f:
            piece = line.rstrip("\r\n")
            if held is not None:
                if not starts_a_line(piece, held):
                    held, blanks = held + piece, blanks + 1
                    if len(piece) == self.width:
                        continue
                    yield held + (line[len(piece):] or "\n")
                    yield "\n" * blanks
                    held, blanks = None, 0
                    continue
                yield held + "\n"
                if blanks:
                    yield "\n" * blanks
                held, blanks = None, 0
            if len(piece) == self.width:
                held = piece
            else:
                yield line
        if held is not None:
            yield held + "\n"
            if blanks:
                yield "\n" * blanks

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
