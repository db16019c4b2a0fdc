"""Fit a serving engine's overhead (`wmtp.engine.EngineOverhead`) to observed step times.

Input: a points CSV — per row a model, method, ctx, depth range, and either a step time
(`quantity=step`, d_lo = d_hi = d) or a per-draft-forward slope of T_iter over d_lo..d_hi
(`quantity=slope`), in ms, with where it came from. The kernel-level model (a cost model for the
GPU) prices every point; the engine's extra time is linear in its terms, so each term's column is
obtained by pricing the same step with that term set to one — the physics stays in `step_cost`.
Terms shared by the engine: dense_step_ms, index_ns_per_token, draft_attn_factor - 1; per model:
step_ms, fwd_ms, verify_attn_factor - 1 (the verify kernel's efficiency depends on the model's head
layout: query rows per KV group = d x q_heads / kv_heads, head_dim). All >= 0 (NNLS on relative error), so the
engine is never faster than our kernels. Leave-one-point-out errors are reported.

    python -m wmtp.calibrate.engine_fit calibrate/engines/sglang-b200-paper.points.csv --hw b200
"""

from __future__ import annotations

import csv
import io
import hashlib
import json
import math
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from wmtp import __version__
from wmtp.engine import KIND, SCHEMA_VERSION, EngineOverhead
from wmtp.errors import WmtpError
from wmtp.fileio import atomic_write_text, read_text
from wmtp.hardware import HardwareSpec
from wmtp.latency import CostModel, step_cost
from wmtp.models import get_model
from wmtp import defaults

SHARED = ("dense_step_ms", "index_ns_per_token", "draft_attn_factor")
PER_MODEL = ("step_ms", "fwd_ms", "verify_attn_factor")
COLUMNS = ("model", "method", "ctx", "d_lo", "d_hi", "quantity", "value_ms", "source")


def read_points(path: str | Path) -> list[dict]:
    p = Path(path)
    rows = list(csv.DictReader(io.StringIO(read_text(p, "engine points", WmtpError))))
    if not rows or any(c not in rows[0] for c in COLUMNS):
        raise WmtpError(f"engine points {p} need the columns {', '.join(COLUMNS)}")
    out = []
    for i, r in enumerate(rows, start=2):
        try:
            pt = {"model": r["model"], "method": r["method"], "ctx": int(r["ctx"]), "d_lo": int(r["d_lo"]),
                  "d_hi": int(r["d_hi"]), "quantity": r["quantity"], "value_ms": float(r["value_ms"]),
                  "source": r["source"], "derivation": r.get("derivation") or ""}
        except (TypeError, ValueError):
            raise WmtpError(f"engine points {p}, line {i}: ctx, d_lo, d_hi must be integers and value_ms a number") \
                from None
        get_model(pt["model"])
        if pt["method"] not in ("dense", "native", "window") or pt["quantity"] not in ("step", "slope"):
            raise WmtpError(f"engine points {p}, line {i}: method is dense/native/window, quantity step/slope")
        if not (pt["value_ms"] > 0 and math.isfinite(pt["value_ms"])):
            raise WmtpError(f"engine points {p}, line {i}: value_ms must be a positive number")
        if pt["quantity"] == "slope" and not pt["d_hi"] > pt["d_lo"]:
            raise WmtpError(f"engine points {p}, line {i}: a slope needs d_hi > d_lo")
        out.append(pt)
    return out


def _unit(term: str) -> dict:
    """An overhead with one term at unit strength (factors: 2, i.e. factor - 1 = 1)."""
    return {term: 2.0 if term.endswith("factor") else 1.0}


def _step(pt: dict, d: int, hw: HardwareSpec, cost: CostModel, window: int, sink: int,
          overhead: EngineOverhead | None) -> float:
    spec = get_model(pt["model"])
    depth = 1 if pt["method"] == "dense" else d
    return step_cost(spec, hw, cost, pt["method"], pt["ctx"], depth, 1, window, sink, accept_length=None,
                     overhead=overhead).step_ms


def _value(pt, hw, cost, window, sink, overhead=None) -> float:
    if pt["quantity"] == "step":
        return _step(pt, pt["d_lo"], hw, cost, window, sink, overhead)
    hi = _step(pt, pt["d_hi"], hw, cost, window, sink, overhead)
    lo = _step(pt, pt["d_lo"], hw, cost, window, sink, overhead)
    return (hi - lo) / (pt["d_hi"] - pt["d_lo"])


def design(points: list[dict], hw, cost, window: int = defaults.WINDOW, sink: int = defaults.SINK) -> tuple[np.ndarray, np.ndarray, list]:
    """(A, kernel values, parameter names): observed = kernel + A @ theta."""
    models = sorted({p["model"] for p in points})
    names = list(SHARED) + [f"{m}.{t}" for m in models for t in PER_MODEL]
    a = np.zeros((len(points), len(names)))
    kernel = np.zeros(len(points))
    for i, pt in enumerate(points):
        kernel[i] = _value(pt, hw, cost, window, sink)
        for j, name in enumerate(names):
            model, _, term = name.rpartition(".")
            if model and model != pt["model"]:
                continue
            ov = EngineOverhead("unit", **_unit(term))
            a[i, j] = _value(pt, hw, cost, window, sink, ov) - kernel[i]
    return a, kernel, names


def _solve(a: np.ndarray, y: np.ndarray, kernel: np.ndarray, rows) -> np.ndarray:
    w = 1.0 / y[rows]  # relative error
    theta, _ = nnls(a[rows] * w[:, None], (y[rows] - kernel[rows]) * w)
    return theta


def fit(points: list[dict], hw: HardwareSpec, cost: CostModel, name: str, window: int = defaults.WINDOW,
        sink: int = 64) -> dict:
    if len(points) < 2:
        raise WmtpError("an engine fit needs at least two points")
    a, kernel, names = design(points, hw, cost, window, sink)
    y = np.array([p["value_ms"] for p in points])
    everything = np.arange(len(points))
    theta = _solve(a, y, kernel, everything)
    pred = kernel + a @ theta
    loo = []
    for i in everything:
        t = _solve(a, y, kernel, everything[everything != i])
        loo.append(float((kernel[i] + a[i] @ t) / y[i] - 1))
    value = dict(zip(names, theta.tolist()))
    constrained = {n: bool(np.any(a[:, j] != 0)) for j, n in enumerate(names)}
    def term(name: str) -> float:
        return value[name] + (1.0 if name.endswith("factor") else 0.0)

    terms = {t: term(t) for t in SHARED}
    per_model = {m: {t: term(f"{m}.{t}") for t in PER_MODEL} for m in sorted({p["model"] for p in points})}
    residuals = [{**{k: p[k] for k in ("model", "method", "ctx", "d_lo", "d_hi", "quantity", "value_ms")},
                  "kernel_ms": float(kernel[i]), "fitted_ms": float(pred[i]), "rel_error": float(pred[i] / y[i] - 1),
                  "loo_rel_error": loo[i]} for i, p in enumerate(points)]
    abs_err = sorted(abs(r["rel_error"]) for r in residuals)
    abs_loo = sorted(abs(x) for x in loo)
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "name": name, "hardware": hw.key,
            "cost_model": cost.name, "window": window, "sink": sink, "batch": 1,
            "terms": terms, "per_model": per_model,
            "unconstrained": [n for n, c in constrained.items() if not c],
            "fit": {"points": len(points), "parameters": len(names),
                    "median_abs_rel_error": abs_err[len(abs_err) // 2], "max_abs_rel_error": abs_err[-1],
                    "loo_median_abs_rel_error": abs_loo[len(abs_loo) // 2], "loo_max_abs_rel_error": abs_loo[-1]},
            "residuals": residuals}


def markdown(preset: dict, points_path: str) -> str:
    t, f = preset["terms"], preset["fit"]
    lines = [f"# Engine preset `{preset['name']}`", "",
             f"Fitted by `python -m wmtp.calibrate.engine_fit {points_path} --hw {preset['hardware']}` "
             f"(wmtp {preset['provenance']['wmtp_version']}, git {preset['provenance']['git_sha']}, "
             f"{preset['provenance']['utc_time']}) over the kernel-level model `{preset['cost_model']}` on "
             f"{preset['hardware']}, B = 1, W = {preset['window']} + {preset['sink']}.", "",
             "Every input point and its derivation is in the points CSV (sha256 "
             f"`{preset['points']['sha256'][:16]}...`).", "",
             "## Terms (engine minus our kernels)", "",
             "| term | value |", "|---|---|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in t.items()]
    lines += ["", "| model | " + " | ".join(PER_MODEL) + " |", "|---" * (len(PER_MODEL) + 1) + "|"]
    lines += [f"| {m} | " + " | ".join(f"{v[k]:.3f}" for k in PER_MODEL) + " |" for m, v in preset["per_model"].items()]
    lines += ["", "step_ms: per speculative step (bookkeeping); fwd_ms: per draft forward; verify_attn_factor: the "
              "engine's verify attention / ours on the same bytes; draft_attn_factor: the same for the draft's "
              "attention; index_ns_per_token: the engine's draft index builds per S_eff token per step; "
              "dense_step_ms: per dense step."]
    if preset["unconstrained"]:
        lines += ["", f"Not constrained by any point (left at zero): {', '.join(preset['unconstrained'])}."]
    lines += ["", f"## Fit: {f['points']} points, {f['parameters']} parameters", "",
              f"In-sample |error| median {100 * f['median_abs_rel_error']:.1f} %, max "
              f"{100 * f['max_abs_rel_error']:.1f} %; leave-one-point-out median "
              f"{100 * f['loo_median_abs_rel_error']:.1f} %, max {100 * f['loo_max_abs_rel_error']:.1f} %.", "",
              "| model | method | ctx | d | quantity | observed ms | kernels only ms | fitted ms | error | LOO error |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in preset["residuals"]:
        d = str(r["d_lo"]) if r["d_lo"] == r["d_hi"] else f"{r['d_lo']}-{r['d_hi']}"
        lines.append(f"| {r['model']} | {r['method']} | {r['ctx']:,} | {d} | {r['quantity']} | {r['value_ms']:.3f} | "
                     f"{r['kernel_ms']:.3f} | {r['fitted_ms']:.3f} | {100 * r['rel_error']:+.1f} % | "
                     f"{100 * r['loo_rel_error']:+.1f} % |")
    return "\n".join(lines) + "\n"


def fit_file(points_path: str | Path, hw_key: str, out: str | Path | None = None, name: str | None = None,
             profile: str | Path | None = None) -> dict:
    from wmtp.profile import cost_model_for
    from wmtp.hardware import get_hardware
    from wmtp.measure.provenance import git_sha

    points_path = Path(points_path)
    name = name or points_path.name.split(".")[0]
    hw = get_hardware(hw_key)
    preset = fit(read_points(points_path), hw, cost_model_for(hw, profile), name)
    preset["points"] = {"file": points_path.name, "sha256": hashlib.sha256(points_path.read_bytes()).hexdigest()}
    preset["provenance"] = {"wmtp_version": __version__, "git_sha": git_sha(),
                            "utc_time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    out = Path(out) if out else points_path.with_name(f"{name}.json")
    atomic_write_text(out, json.dumps(preset, indent=1) + "\n")
    atomic_write_text(out.with_suffix(".md"), markdown(preset, str(points_path)))
    return preset


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("points")
    ap.add_argument("--hw", default="b200")
    ap.add_argument("--out")
    ap.add_argument("--name")
    ap.add_argument("--profile")
    args = ap.parse_args(argv)
    try:
        preset = fit_file(args.points, args.hw, args.out, args.name, args.profile)
    except WmtpError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    f = preset["fit"]
    print(f"{preset['name']}: {f['points']} points, |error| median {100 * f['median_abs_rel_error']:.1f} %, "
          f"LOO max {100 * f['loo_max_abs_rel_error']:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
