"""Opening a log (`open_text`: plain or gzip, colour codes dropped, wrapped pastes joined), and a log or acceptance
file that is not a regular file: a FIFO, a process substitution (`<(zcat x.gz)`), a character device. The readers open a file more than once (a look at its head, then the stream), which a pipe does
not allow, and opening a FIFO nobody writes to blocks forever. Such an input is read once, without waiting for a
writer, into an anonymous temporary file, and read from there."""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
import tempfile
import zlib
from pathlib import Path

from wmtp.errors import WmtpError
from wmtp.fileio import check_lookup, open_without_waiting
from wmtp.log_summary import ANSI, FileView, NoAnsi
from wmtp.log_wrap import (ArraysJoined, BoxJoined, SoftJoined, Unwrapped, box_width, pretty_json, soft_wrapped,
                           wrap_width)

CHUNK = 1 << 20
# byte-order marks of the wide Unicode encodings (UTF-32 first: its little-endian mark starts like UTF-16's). A log
# saved by Windows PowerShell 5.1's `>` / `Out-File` (`docker logs sglang > server.log`) is UTF-16LE with a mark.
WIDE_BOMS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"), (b"\xff\xfe", "utf-16"),
             (b"\xfe\xff", "utf-16"))
MAX_SPOOL = 16 << 30  # bytes a pipe or device may give: more (/dev/zero, a runaway producer) is an error, not a full disk


def is_stream(path: Path) -> bool:
    """Whether `path` exists and is neither a regular file nor a folder."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def spool(path: Path, out=None):
    """The whole content of the stream at `path` copied into `out` (a binary file; default: an anonymous temporary
    file, deleted when closed), positioned at its start. A FIFO with no writer reads as empty at once. A NUL byte in a
    stream that does not start as gzip (binary data: /dev/zero, /dev/urandom) or more than MAX_SPOOL bytes is an error,
    at once."""
    own = out is None
    out = tempfile.TemporaryFile() if own else out
    try:
        with open_without_waiting(path) as f:
            gz = None
            while chunk := f.read(CHUNK):
                # gzip (read by its magic later) and UTF-16 / UTF-32 text (by its byte-order mark) have NUL bytes
                gz = chunk[:2] == b"\x1f\x8b" or wide_encoding(chunk) is not None if gz is None else gz
                if not gz and b"\0" in chunk:
                    raise WmtpError(f"{path} gives binary data (NUL bytes), not a text log or JSON: decompress or "
                                    "convert it first")
                if out.tell() + len(chunk) > MAX_SPOOL:
                    raise WmtpError(f"{path} gives more than {MAX_SPOOL >> 30} GiB: save it to a file and pass the "
                                    "file")
                out.write(chunk)
        if out.tell() == 0:
            raise WmtpError(f"{path} is empty (a pipe or device that gave no data)")
    except OSError as e:
        if own:
            out.close()
        raise WmtpError(f"cannot read {path}: {e.strerror or e}") from None
    except WmtpError:
        if own:
            out.close()
        raise
    out.seek(0)
    return out


def wide_encoding(head: bytes) -> str | None:
    """"utf-16" / "utf-32" when `head` starts with that encoding's byte-order mark, else None."""
    return next((enc for bom, enc in WIDE_BOMS if head.startswith(bom)), None)


def open_text(path: str | Path):
    """A text handle on a log: a plain or gzip file, or a stream read once (`spool`), a byte-order mark and terminal
    colour codes dropped, terminal-wrapped lines joined back (`wmtp.log_wrap`); UTF-16 / UTF-32 text with a byte-order
    mark (Windows PowerShell's `>`) decoded as such; a pretty-printed JSON document's arrays of numbers joined onto one
    line each (`wmtp.log_wrap.ArraysJoined`); a folder, a binary or misnamed file,
    or a path too long to look up raises WmtpError."""
    path = Path(path)
    check_lookup(path, "log")  # Python 3.11's is_dir() raises on a name too long to look up
    if path.is_dir():
        raise WmtpError(f"{path} is a folder, not a log file")
    raw = spool(path) if is_stream(path) else None  # a pipe or FIFO: read once, then from a temporary file
    try:
        if raw is None:
            with open(path, "rb") as f:
                head = f.read(65536)
        else:
            head = raw.read(65536)
            raw.seek(0)
    except OSError as e:
        raise WmtpError(f"cannot read {path}: {e.strerror or e}") from None
    # utf-8-sig: a byte-order mark at the start is not part of the first line; a UTF-16 / UTF-32 one names the codec
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=raw) if raw is not None else gzip.open(path, "rb") as g:
                head = g.read(65536)
        except (OSError, EOFError, zlib.error) as e:
            raise WmtpError(f"{path}: damaged gzip file ({e})") from None
        enc = wide_encoding(head) or "utf-8-sig"
        if raw is not None:
            raw.seek(0)
            opener = lambda: io.TextIOWrapper(gzip.GzipFile(fileobj=raw), enc, "replace")  # noqa: E731
        else:
            opener = lambda: gzip.open(path, "rt", encoding=enc, errors="replace")  # noqa: E731
    elif path.name.endswith(".gz"):
        raise WmtpError(f"{path}: named .gz but not gzip-compressed")
    else:
        enc = wide_encoding(head) or "utf-8-sig"
        if raw is not None:
            opener = lambda: io.TextIOWrapper(raw, enc, "replace")  # noqa: E731
        else:
            opener = lambda: open(path, encoding=enc, errors="replace")  # noqa: E731
    if enc == "utf-8-sig" and b"\x00" in head:
        raise WmtpError(f"{path}: binary data, not a text log")
    f = NoAnsi(opener() if enc == "utf-8-sig" else InStep(opener(), path, enc))  # (colour codes may come anywhere)
    # (a wide head cut inside a character ends in one replacement character: only the wrap-width look sees it)
    text = head.decode("utf-8", "replace") if enc == "utf-8-sig" else head.decode(enc, "replace").lstrip("\ufeff")
    text = ANSI.sub("", text) if "\x1b" in text else text
    if pretty_json(text.lstrip("\ufeff")):  # a pretty-printed JSON document: its arrays of numbers joined, no terminal's wrap
        return ArraysJoined(f)
    box = box_width(text)  # a box table cut below the terminal widths the wrap reader looks for
    if box:
        return BoxJoined(f, *box)
    soft = soft_wrapped(text)  # wrapped engine lines' lengths (then one full-width line continued shows no cut)
    width = wrap_width(text, len(head) < 65536, strict=bool(soft))
    return SoftJoined(f) if soft else Unwrapped(f, width) if width else f  # (engine lines: joined either way)


# A wide text out of step by one byte (a byte inserted or lost: `sed` or `tr` run over a UTF-16 log) decodes without an
# error, each ASCII character as the one whose high byte it is (`[` as U+5B00, `0` as U+3000, `%` as U+2500) and the
# line ends as U+0A00 / U+0D00; UTF-32 out of step decodes as replacement characters. Six letters so decoded close
# together are in no log (box rules, U+2500, and CJK text's U+3000 spaces are not letters); nor are 8 replacements.
_SWAPPED = "".join(chr(c << 8) for c in (9, 10, 13, *range(0x20, 0x7f)))
_LETTERS = "".join(chr(c << 8) for c in (*range(0x41, 0x5b), *range(0x61, 0x7b)))
_OUT_OF_STEP = re.compile(f"(?:[{_LETTERS}][{_SWAPPED}]{{0,4}}){{6}}|\ufffd{{8}}")


class InStep(FileView):
    """A UTF-16 / UTF-32 text handle that raises WmtpError, naming the line, where the text is out of step with its
    encoding (a line of byte-swapped ASCII: read on, the file gave every other line, silently)."""

    def __init__(self, f, path, enc: str) -> None:
        super().__init__(f)
        self.path, self.enc, self.lines = path, enc, 0

    def _checked(self, text: str) -> str:
        m = _OUT_OF_STEP.search(text)
        if m is not None:
            at = self.lines + text.count("\n", 0, m.start()) + 1
            raise WmtpError(f"{self.path}: {self.enc.upper()} text out of step at line {at} (a byte added or lost: "
                            "edited as bytes?): it does not decode as text past there")
        self.lines += text.count("\n")
        return text

    def read(self, size: int = -1) -> str:
        return self._checked(self.f.read(size))

    def readline(self) -> str:
        return self._checked(self.f.readline())

    def __iter__(self):
        for line in self.f:
            yield self._checked(line)
