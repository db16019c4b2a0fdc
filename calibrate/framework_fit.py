"""Fitting a framework profile from serving logs at several depths (reading one is `wmtp.framework`).

    T_iter(gamma) = gamma * t_fwd + c        (least squares; optionally only gamma >= min_gamma)
and the framework overhead = measured step - kernel-predicted step, fitted as
`const_ms + per_forward_ms * gamma`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from wmtp.errors import WmtpError
from wmtp.fileio import atomic_write_text
from wmtp.framework import KIND, SCHEMA_VERSION
from wmtp.acceptance import MAX_DEPTH
from wmtp.latency import MAX_BATCH, step_cost


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
            rest_x = xs[:i] + xs[i + 1:]
            if len(set(rest_x)) < 2:  # the only run at its depth left out: the rest fit no line, and predict nothing
                continue
            s, k = _linfit(rest_x, ys[:i] + ys[i + 1:])
            errs.append(abs((s * xs[i] + k) / ys[i] - 1))
    return {"t_fwd_ms": t_fwd, "c_ms": c, "points_used": len(pts),
            "heldout_median_rel": sorted(errs)[len(errs) // 2] if errs else None}  # None: < 3 runs, no held-out


def _check(name: str, x: float, what: str) -> None:
    if not math.isfinite(x) or x < 0:
        raise WmtpError(f"the fit gives {name} = {x:.4g} ms ({what}); a framework profile needs finite, non-negative "
                        "terms: give logs of the method you fit, at several depths, with a steady batch")


def build(points: list[dict], spec, hw, cost, ctx: int, method: str, batch: int, window: int, sink: int,
          min_gamma: int | None, sources: list[str]) -> dict:
    """Fit T_iter(gamma) and the overhead over the kernel model; a fit with a negative or NaN term raises."""
    for p in points:
        if not (math.isfinite(p["t_iter_ms"]) and p["t_iter_ms"] > 0):
            raise WmtpError(f"{p.get('file', 'a log')}: no positive, finite T_iter")
    fit = fit_t_iter(points, min_gamma)
    _check("t_fwd_ms", fit["t_fwd_ms"], "T_iter falls as the depth grows")
    _check("c_ms", fit["c_ms"], "the constant part of T_iter")
    used = [p for p in points if min_gamma is None or p["gamma"] >= min_gamma]
    over = []
    for p in used:
        kernel = step_cost(spec, hw, cost, method, ctx, p["gamma"] + 1, batch, window, sink,
                           accept_length=max(1.0, p.get("mean_accept_length") or 1.0)).step_ms
        over.append({"gamma": p["gamma"], "overhead_ms": p["t_iter_ms"] - kernel, "kernel_ms": kernel})
    per_fwd, const = _linfit([o["gamma"] for o in over], [o["overhead_ms"] for o in over])
    _check("overhead const_ms", const, "the logged steps are faster than the kernel model at gamma 0")
    _check("overhead per_forward_ms", per_fwd, "the logged steps grow slower with depth than the kernel model")
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "model": spec.key, "hardware": hw.key, "ctx": ctx,
            "method": method, "batch": batch, "window": window, "sink": sink, "cost_model": cost.name,
            "points": points, "t_iter_fit": fit, "overhead": {"const_ms": const, "per_forward_ms": per_fwd,
                                                               "by_gamma": over},
            "sources": sources}


def save(profile: dict, path: str | Path) -> None:
    try:  # NaN / Infinity are not JSON: `wmtp.framework.load` would refuse the file this writes
        text = json.dumps(profile, indent=1, allow_nan=False)
    except ValueError:
        raise WmtpError("the framework fit holds a non-finite number; nothing written") from None
    atomic_write_text(path, text + "\n")




def points_from_logs(runs: list[str], batch: int | None, method: str = "native") -> tuple[list[dict], list[str]]:
    """`LOG:D` pairs -> one T_iter point per log (its longest steady segment of `method`: speculative for
    native/window, dense for dense) and the source files. Segments of the other kind are refused."""
    from wmtp.logs import stream
    from wmtp.logstats import estimate_segments

    import os

    want_spec = method != "dense"
    points, sources = [], []
    seen: dict[str, str] = {}
    for run in runs:
        path, _, d = run.rpartition(":")
        if not path or not (d.isascii() and d.isdigit() and len(d) <= 4) or not 1 <= int(d) <= MAX_DEPTH:
            raise WmtpError(f"runs are LOG:D pairs (d in 1..{MAX_DEPTH}), got {run[-200:]!r}")
        first = seen.setdefault(os.path.realpath(path), run)
        if first is not run:  # one run weighed twice in the fit, or one run's T_iter fitted at two depths
            raise WmtpError(f"{path} is given twice ({first[-100:]!r}, {run[-100:]!r}): a log is one run at one "
                            "depth; give each log once")
        segs = estimate_segments(stream(path), batch)
        fit = [s for s in segs if s.speculative == want_spec and s.t_iter_ms is not None]
        if not fit:
            other = sum(1 for s in segs if s.speculative != want_spec)
            kind = "speculative (accept len)" if want_spec else "dense (no accept len)"
            raise WmtpError(f"{path}: no steady {kind} segment to fit --method {method}"
                            + (f" ({other} segment(s) of the other kind refused)" if other else
                               " (a fit needs a batch size held for >= 5 decode lines)"))
        best = max(fit, key=lambda s: s.n_steady)
        if want_spec and best.mean_accept_length is None:
            raise WmtpError(f"{path}: speculative segment without accept len; cannot fit --method {method}")
        points.append({"gamma": int(d) - 1, "t_iter_ms": best.step_ms, "mean_accept_length": best.mean_accept_length,
                       "b_eff": best.b_eff, "file": path, "segment": best.index})
        sources.append(path)
    return points, sources


def fit_from_logs(runs: list[str], spec, hw, cost, ctx: int, method: str, batch: int | None, window: int, sink: int,
                  min_gamma: int | None, out: str | Path) -> dict:
    """The whole top-down calibration: read the logs, fit, write the framework profile to `out`."""
    if method not in ("native", "window", "dense"):
        raise WmtpError("--method is native, window or dense")
    if batch is not None and not 1 <= batch <= MAX_BATCH:
        raise WmtpError(f"--batch must lie in 1..{MAX_BATCH:,}, got {batch}")
    if min_gamma is not None and not 1 <= min_gamma <= MAX_DEPTH - 1:  # gamma = d - 1: below 1 filtered nothing
        raise WmtpError(f"--min-gamma must lie in 1..{MAX_DEPTH - 1} (gamma = d - 1 draft forwards), got {min_gamma}")
    points, sources = points_from_logs(runs, batch, method)
    b = batch or max(p["b_eff"] or 1 for p in points)
    prof = build(points, spec, hw, cost, ctx, method, b, window, sink, min_gamma, sources)
    save(prof, out)
    return prof
