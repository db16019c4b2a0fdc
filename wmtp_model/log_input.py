"""A log or acceptance file that is not a regular file: a FIFO, a process substitution (`<(zcat x.gz)`), a
character device. The readers open a file more than once (a look at its head, then the stream), which a pipe does
not allow, and opening a FIFO nobody writes to blocks forever. Such an input is read once, without waiting for a
writer, into an anonymous temporary file, and read from there."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from wmtp.errors import WmtpError

CHUNK = 1 << 20


def is_stream(path: Path) -> bool:
    """Whether `path` exists and is neither a regular file nor a folder."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def spool(path: Path):
    """The whole content of the stream at `path` in a binary temporary file positioned at its start (deleted when
    closed). A FIFO with no writer reads as empty at once."""
    nonblock = getattr(os, "O_NONBLOCK", 0)  # 0 on Windows, which has no FIFOs
    out = tempfile.TemporaryFile()
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | nonblock), "rb") as f:
            if nonblock:
                os.set_blocking(f.fileno(), True)
            shutil.copyfileobj(f, out, CHUNK)
    except OSError as e:
        out.close()
        raise WmtpError(f"cannot read {path}: {e.strerror or e}") from None
    if out.tell() == 0:
        out.close()
        raise WmtpError(f"{path} is empty (a pipe or device that gave no data)")
    out.seek(0)
    return out
