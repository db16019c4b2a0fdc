"""Atomic file writes: readers never see a partial file, an interrupted write loses nothing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write via a temporary file in the same folder, fsync, and rename over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: str | Path, what: str, error: type[Exception]):
    """Parse a JSON file; a missing or malformed file raises `error` with one clear sentence."""
    import json

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise error(f"cannot read {what} {p}: {e.strerror or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{what} {p} is corrupt: not valid JSON ({e.msg} at line {e.lineno})") from None


def read_versioned_json(path: str | Path, what: str, kind: str, version: int, error: type[Exception]) -> dict:
    """A JSON object whose `kind` and `schema_version` must match; anything else raises `error`."""
    return check_versioned(read_json(path, what, error), path, what, kind, version, error)


def check_versioned(doc, path: str | Path, what: str, kind: str, version: int, error: type[Exception]) -> dict:
    """`doc` (parsed from `path`) if it is a `kind` object of schema `version`; else raise `error`."""
    p = Path(path)
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        raise error(f"{p} is not a wmtp {what}")
    if doc.get("schema_version") != version:
        raise error(f"{what} {p} has schema version {doc.get('schema_version')!r}; this wmtp reads version {version}")
    return doc
