"""A log or acceptance file that is not a regular file: a FIFO, a process substitution (`<(zcat x.gz)`), a
character device. The readers open a file more than once (a look at its head, then the stream), which a pipe does
not allow, and opening a FIFO nobody writes to blocks forever. Such an input is read once, without waiting for a
writer, into an anonymous temporary file, and read from there."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from wmtp.errors import WmtpError
from wmtp.fileio import open_without_waiting

CHUNK = 1 << 20
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
                gz = chunk[:2] == b"\x1f\x8b" if gz is None else gz  # gzip (read by its magic later) has NUL bytes
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
