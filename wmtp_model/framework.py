"""Framework profiles (top-down calibration from serving logs, Windowed-MTP paper, Appendix B): reading.
Fitting and saving one is `wmtp.calibrate.framework_fit`.

From decode logs of runs at several depths, T_iter per run (the artifact's estimator), then
    T_iter(gamma) = gamma * t_fwd + c          (least squares; optionally only gamma >= min_gamma,
                                                past a verify-kernel tiling cliff)
and the framework overhead = measured step - kernel-predicted step at the same model, GPU, ctx,
batch and method, fitted as `const_ms + per_forward_ms * gamma`. `wmtp predict --framework PATH`
adds it to the kernel-level step of that method (const to t_verify, per_forward to t_fwd), so a
user's predictions match their engine.
"""

from __future__ import annotations

from pathlib import Path

from wmtp.errors import WmtpError
from wmtp.fileio import check_versioned, read_json

SCHEMA_VERSION = 1
KIND = "wmtp-framework-profile"


def load(path: str | Path, doc: dict | None = None) -> dict:
    """A framework profile from `path` (or `doc`, already parsed from it), validated."""
    p = Path(path)
    doc = read_json(p, "framework profile", WmtpError) if doc is None else doc
    prof = check_versioned(doc, p, "framework profile", KIND, SCHEMA_VERSION, WmtpError)
    try:
        float(prof["overhead"]["const_ms"]), float(prof["overhead"]["per_forward_ms"])
        str(prof["method"])
    except (KeyError, TypeError, ValueError):
        raise WmtpError(f"framework profile {p} is corrupt: no overhead fit") from None
    return prof
