"""Provenance sidecars for measured data, and atomic file writes."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from wmtp import __version__
from wmtp.fileio import atomic_write_text  # noqa: F401  (re-exported for measure/)

SCHEMA_VERSION = 1


def git_sha() -> str:
    env = os.environ.get("WMTP_GIT_SHA")
    if env:
        return env
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _driver() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def collect(timer: str, extra: dict | None = None) -> dict:
    import torch
    import triton

    meta = {
        "schema_version": SCHEMA_VERSION,
        "wmtp_version": __version__,
        "git_sha": git_sha(),
        "utc_time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "timer": timer,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
    }
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        meta.update(gpu_name=p.name, gpu_sm_count=p.multi_processor_count, gpu_memory_bytes=p.total_memory,
                    gpu_l2_bytes=getattr(p, "L2_cache_size", None), driver=_driver())
    meta.update(extra or {})
    return meta


def write_meta(path: str | Path, meta: dict) -> None:
    atomic_write_text(path, json.dumps(meta, indent=2, sort_keys=True) + "\n")
