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
from wmtp.fileio import open_without_waiting

CHUNK = 1 << 20


def is_stream(path: Path) -> bool:
    """Whether `path` exists and is neither a regular file nor a folder."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def spool(path: Path, out=None):
    """The whole content of the stream at `path` copied into `out` (a binary file; default: an anonymous temporary
    file, deleted when closed), positioned at its start. A FIFO with no writer reads as empty at once."""
    own = out is None
    out = tempfile.TemporaryFile() if own else out
    try:
        with open_without_waiting(path) as f:
            shutil.copyfileobj(f, out, CHUNK)
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
