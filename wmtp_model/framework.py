"""Top-down calibration from serving logs (Windowed-MTP paper, Appendix B).

From decode logs of runs at several depths, T_iter per run (the artifact's estimator), then
    T_iter(gamma) = gamma * t_fwd + c          (least squares; optionally only gamma >= min_gamma,
                                                past a verify-kernel tiling cliff)
and the framework overhead = measured step - kernel-predicted step at the same model, GPU, ctx,
batch and method, fitted as `const_ms + per_forward_ms * gamma`. `wmtp predict --framework PATH`
adds it to the kernel-level step of that method (const to t_verify, per_forward to t_fwd), so a
user's predictions match their engine.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from wmtp.errors import WmtpError
from wmtp.fileio import atomic_write_text

SCHEMA_VERSION = 1
KIND = "wmtp-framework-profile"


def _linfit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise WmtpError("the logs cover a single depth: give runs at two or more depths")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def fit_t_iter(points: list[dict], min_gamma: int | None = None) -> dict:
    """points: [{gamma, t_iter_ms}] -> {t_fwd_ms, c_ms, heldout_median_rel} (leave-one-out when >= 3)."""
    pts = [p for p in points if min_gamma is None or p["gamma"] >= min_gamma]
    if len(pts) < 2:
        raise WmtpError(f"need runs at >= 2 depths{' past the cliff' if min_gamma else ''}, got {len(pts)}")
    xs, ys = [float(p["gamma"]) for p in pts], [float(p["t_iter_ms"]) for p in pts]
    t_fwd, c = _linfit(xs, ys)
    errs = []
    if len(pts) >= 3:
        for i in range(len(pts)):
            s, k = _linfit(xs[:i] + xs[i + 1:], ys[:i] + ys[i + 1:])
            errs.append(abs((s * xs[i] + k) / ys[i] - 1))
    return {"t_fwd_ms": t_fwd, "c_ms": c, "points_used": len(pts),
            "heldout_median_rel": sorted(errs)[len(errs) // 2] if errs else math.nan}


def build(points: list[dict], spec, hw, cost, ctx: int, method: str, batch: int, window: int, sink: int,
          min_gamma: int | None, sources: list[str]) -> dict:
    from wmtp.latency import step_cost

    fit = fit_t_iter(points, min_gamma)
    used = [p for p in points if min_gamma is None or p["gamma"] >= min_gamma]
    over = []
    for p in used:
        kernel = step_cost(spec, hw, cost, method, ctx, p["gamma"] + 1, batch, window, sink,
                           accept_length=max(1.0, p.get("mean_accept_length") or 1.0)).step_ms
        over.append({"gamma": p["gamma"], "overhead_ms": p["t_iter_ms"] - kernel, "kernel_ms": kernel})
    per_fwd, const = _linfit([o["gamma"] for o in over], [o["overhead_ms"] for o in over])
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "model": spec.key, "hardware": hw.key, "ctx": ctx,
            "method": method, "batch": batch, "window": window, "sink": sink, "cost_model": cost.name,
            "points": points, "t_iter_fit": fit, "overhead": {"const_ms": const, "per_forward_ms": per_fwd,
                                                               "by_gamma": over},
            "sources": sources}


def save(profile: dict, path: str | Path) -> None:
    atomic_write_text(path, json.dumps(profile, indent=1) + "\n")


def load(path: str | Path, doc: dict | None = None) -> dict:
    """A framework profile from `path` (or `doc`, already parsed from it), validated."""
    from wmtp.fileio import check_versioned, read_json

    p = Path(path)
    doc = read_json(p, "framework profile", WmtpError) if doc is None else doc
    prof = check_versioned(doc, p, "framework profile", KIND, SCHEMA_VERSION, WmtpError)
    try:
        float(prof["overhead"]["const_ms"]), float(prof["overhead"]["per_forward_ms"])
        str(prof["method"])
    except (KeyError, TypeError, ValueError):
        raise WmtpError(f"framework profile {p} is corrupt: no overhead fit") from None
    return prof
