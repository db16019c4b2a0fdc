"""File reading and writing every command shares.

Writes are atomic: the text goes to a temporary file in the target's folder, is fsynced, and is
renamed over the target, so readers never see a partial file and an interrupted write loses
nothing. The file gets the mode a plain `open(path, "w")` would give it (0666 less the umask, or
the mode of the file it replaces), not the temporary file's 0600. A target that exists and is not
a regular file (a directory, a device such as /dev/full, a FIFO) is refused: the rename would
replace it. Reads refuse binary, oversized and malformed input with one `error` sentence.
"""

from __future__ import annotations

import codecs
import errno
import json
import math
import os
import stat
import sys
import tempfile
from pathlib import Path

from wmtp.errors import WmtpError

MAX_READ_BYTES = 64 * 1024 * 1024  # a config, profile or preset is kilobytes; refuse anything absurd
INT_DIGITS = sys.get_int_max_str_digits() or 4300  # the digits int() reads (0: no limit set; 4300 is the default)


class WriteError(WmtpError, OSError):
    """An output file that cannot be written (one `error:` line in the CLI; still an OSError)."""


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _creatable(path: str | Path, prefix: str) -> None:
    """A path that does not exist yet can be created: its nearest existing ancestor is a writable folder."""
    parent = Path(path).parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise WriteError(f"{prefix}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise WriteError(f"{prefix}: folder {parent} is not writable")


def check_output_path(path: str | Path, what: str = "output file") -> Path:
    """`path` as a write target: a new path or an existing regular file (a symlink to one is
    followed); anything else raises `WriteError` before any work is done."""
    if str(path).strip() == "":
        raise WriteError(f"{what} path is empty")
    if str(path).strip() == "-":  # no wmtp output streams to stdout: '-' was written as a file of that name
        raise WriteError(f"{what} path '-': wmtp writes a file, not to stdout; give a file name")
    p = Path(path)
    try:
        if p.is_symlink():
            p = p.resolve(strict=False)
        st = p.stat()
    except FileNotFoundError:
        _creatable(p, f"cannot write {what} {path}")
        return p
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop (pathlib's resolve, Python < 3.13)
        why = getattr(e, "strerror", None) or ("a symlink loop" if isinstance(e, RuntimeError) else e)
        raise WriteError(f"cannot write {what} {path}: {why}") from None
    if stat.S_ISDIR(st.st_mode):
        raise WriteError(f"cannot write {what} {path}: it is a folder; give a file name")
    if not stat.S_ISREG(st.st_mode):
        raise WriteError(f"refusing to write {what} {path}: it exists and is not a regular file")
    return p


def check_output_folder(path: str | Path, what: str = "output folder") -> Path:
    """`path` as a folder to write into: an existing writable folder, or a new one under a writable folder;
    anything else (a file, a path through one) raises `WriteError` before any work is done (a GPU run met it at
    its first write, after setting up the device: a FileExistsError traceback)."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        _creatable(p, f"cannot write into {what} {path}")
        return p
    except OSError as e:  # a path through a file (ENOTDIR), a symlink loop
        raise WriteError(f"cannot write into {what} {path}: {e.strerror or e}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise WriteError(f"cannot write into {what} {path}: it exists and is not a folder")
    if not os.access(p, os.W_OK | os.X_OK):
        raise WriteError(f"cannot write into {what} {path}: the folder is not writable")
    return p


def atomic_write_text(path: str | Path, text: str, what: str = "output file") -> None:
    """Write via a temporary file in the same folder, fsync, and rename over the target."""
    atomic_write_bytes(path, text.encode("utf-8"), what)


def atomic_write_bytes(path: str | Path, data: bytes, what: str = "output file") -> None:
    """`atomic_write_text` for bytes (a gzip file, say)."""
    p = check_output_path(path, what)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(p.stat().st_mode)  # replacing a file keeps its mode
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as e:
        raise WriteError(f"cannot write {what} {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and not isinstance(e, WmtpError):
            raise WriteError(f"cannot write {what} {path}: {e.strerror or e}") from None
        raise


def check_lookup(path: str | Path, what: str, error: type[Exception] = WmtpError) -> None:
    """`path` as one the file system will look up: a name longer than it allows (ENAMETOOLONG), a folder on the way
    that may not be searched (EACCES) or a NUL byte raises `error`. Python 3.11's Path.exists() and is_dir() raise
    those instead of answering (3.12 answers False), a traceback wherever a reader probed first; a missing path, a
    path through a file or a symlink loop passes (the readers say so)."""
    try:
        os.stat(path)
    except ValueError:  # an embedded NUL byte
        raise error(f"cannot read {what} {str(path)[:80]!r}: a path holds no NUL byte") from None
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            shown = str(path) if len(str(path)) <= 80 else str(path)[:77] + "..."
            raise error(f"cannot read {what} {shown}: {e.strerror or e}") from None


def open_without_waiting(path: str | Path):
    """`path` opened for binary reading. A FIFO nobody writes to would block open() forever: it is opened without
    waiting for a writer, then read blocking (EOF at once when there is none; a process substitution's pipe reads
    as it fills). Raises OSError."""
    nonblock = getattr(os, "O_NONBLOCK", 0)  # 0 on Windows, which has no FIFOs
    f = os.fdopen(os.open(path, os.O_RDONLY | nonblock), "rb")
    if nonblock:
        os.set_blocking(f.fileno(), True)
    return f


_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
              (codecs.BOM_UTF16_BE, "UTF-16"))  # UTF-32's little-endian mark begins with UTF-16's: tried first


def read_text(path: str | Path, what: str, error: type[Exception], max_bytes: int = MAX_READ_BYTES) -> str:
    """The UTF-8 text of a regular file; missing, unreadable, binary or oversized raises `error`."""
    p = Path(path)
    try:
        if p.is_dir():
            raise error(f"cannot read {what} {p}: it is a folder")
        with open_without_waiting(p) as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise error(f"cannot read {what} {p}: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise error(f"{what} {p} is larger than {max_bytes // 2**20} MiB: not a {what}")
    wide = next((name for bom, name in _WIDE_BOMS if data.startswith(bom)), None)
    if wide:  # a UTF-16 file (Windows editors, PowerShell's `>`) was called a binary file
        raise error(f"{what} {p} is {wide} text; wmtp reads UTF-8: convert it (e.g. iconv -f {wide} -t UTF-8)")
    if b"\x00" in data:
        raise error(f"{what} {p} is a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise error(f"{what} {p} is not UTF-8 text (a binary file?)") from None


def json_int(text: str) -> int:
    """A JSON integer literal (json.loads' `parse_int`): one of more than `INT_DIGITS` digits, which int() refuses
    with a message about `sys.set_int_max_str_digits`, is a ValueError in wmtp's words."""
    digits = len(text) - text.startswith("-")
    if digits > INT_DIGITS:
        raise ValueError(f"a number of {digits} digits (more than {INT_DIGITS} digits): too long to be a count or any "
                         "other value wmtp reads")
    return int(text)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _unique_keys(pairs: list) -> dict:
    """An object whose keys are all different: a repeated key would silently keep only its last value."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"key {dup[:40]!r} appears twice in one object")
    return obj


def read_json(path: str | Path, what: str, error: type[Exception]):
    """Parse a JSON file; a missing, binary or malformed file raises `error` with one clear sentence.
    NaN and Infinity (which Python's json would accept) and a key repeated in one object are malformed."""
    p = Path(path)
    text = read_text(p, what, error)
    if not text.strip():
        raise error(f"{what} {p} is empty")
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys, parse_int=json_int)
    except json.JSONDecodeError as e:
        raise error(f"{what} {p} is corrupt: not valid JSON ({e.msg} at line {e.lineno})") from None
    except (ValueError, RecursionError) as e:  # NaN/Infinity, a 5000-digit integer, absurd nesting
        msg = str(e).splitlines()[0] if isinstance(e, ValueError) else "nested too deeply"
        raise error(f"{what} {p} is corrupt: {msg}") from None


def finite_number(value, what: str, error: type[Exception] = WmtpError, *, lo: float | None = None,
                  hi: float | None = None) -> float:
    """`value` as a finite float within [lo, hi] (bools and strings are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(f"{what} must be a number, got {value!r}")
    try:
        x = float(value)
    except OverflowError:
        raise error(f"{what} is out of range: {value!r}") from None
    if not math.isfinite(x):
        raise error(f"{what} must be finite, got {value!r}")
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        raise error(f"{what} must lie in [{lo:g}, {hi:g}], got {value!r}")
    return x


def read_versioned_json(path: str | Path, what: str, kind: str, version: int, error: type[Exception]) -> dict:
    """A JSON object whose `kind` and `schema_version` must match; anything else raises `error`."""
    return check_versioned(read_json(path, what, error), path, what, kind, version, error)


def check_versioned(doc, path: str | Path, what: str, kind: str, version: int, error: type[Exception]) -> dict:
    """`doc` (parsed from `path`) if it is a `kind` object of schema `version`; else raise `error`."""
    p = Path(path)
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        raise error(f"{p} is not a wmtp {what}")
    if isinstance(doc.get("schema_version"), bool) or doc.get("schema_version") != version:  # True == 1
        raise error(f"{what} {p} has schema version {doc.get('schema_version')!r}; this wmtp reads version {version}")
    return doc
