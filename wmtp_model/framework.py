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
from wmtp.fileio import check_versioned, finite_number, read_json

SCHEMA_VERSION = 1
KIND = "wmtp-framework-profile"
METHODS = ("native", "window", "dense")  # one framework profile fits one of them


def load(path: str | Path, doc: dict | None = None) -> dict:
    """A framework profile from `path` (or `doc`, already parsed from it), validated: the fields the engine
    model reads (`wmtp.engine.from_framework_profile`) are present and of their types, or `WmtpError` names them."""
    p = Path(path)
    doc = read_json(p, "framework profile", WmtpError) if doc is None else doc
    prof = check_versioned(doc, p, "framework profile", KIND, SCHEMA_VERSION, WmtpError)
    overhead = prof.get("overhead")
    if not isinstance(overhead, dict) or not {"const_ms", "per_forward_ms"} <= overhead.keys():
        raise WmtpError(f"framework profile {p} is corrupt: no overhead fit (overhead.const_ms, overhead.per_forward_ms)")
    for key in ("const_ms", "per_forward_ms"):  # times: below 0 takes time off a step, above 1e6 ms is no engine's
        finite_number(overhead[key], f"framework profile {p}: overhead.{key}", lo=0, hi=1e6)
    if prof.get("method") not in METHODS:
        raise WmtpError(f"framework profile {p} is corrupt: method must be one of {', '.join(METHODS)}, "
                        f"got {prof.get('method')!r}")
    for key in ("model", "hardware"):
        if not isinstance(prof.get(key), str) or not prof[key]:
            raise WmtpError(f"framework profile {p} is corrupt: {key} must be a registry key, got {prof.get(key)!r}")
    if isinstance(prof.get("ctx"), bool) or not isinstance(prof.get("ctx"), int) or prof["ctx"] <= 0:
        raise WmtpError(f"framework profile {p} is corrupt: ctx must be a positive integer, got {prof.get('ctx')!r}")
    return prof
