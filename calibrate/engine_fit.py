"""Fit what cannot be measured of a serving engine (`wmtp.engine.EngineOverhead`) to observed step times.

Inputs: a points CSV — per row a model, method, ctx, depth range, and either a step time (`quantity=step`,
d_lo = d_hi = d) or a per-draft-forward slope of T_iter over d_lo..d_hi (`quantity=slope`), in ms, with
where it came from, and a `fit` column (yes / no: held out) — and an engine *structure* (JSON next to it,
`NAME.structure.json`): the measured kernel profile the engine's kernels come from (e.g. h200-flashinfer),
its structural counts (index walks per step, from the engine's code), its memory settings, and which host
terms are fitted engine-wide (`shared`) or per model (`per_model`).

Every point is priced by `step_cost` with the engine's measured kernels and structural counts; the host
terms are linear, so each term's column is the same step priced with that term at one (the physics stays in
`step_cost`). NNLS on relative error over the `fit = yes` points (terms >= 0). Reported: in-sample error,
leave-one-point-out, leave-context-out (fit at the largest context, predict the others) and leave-model-out
(fit without a model; its per-model terms then the others' mean), and every held-out point.

    python -m wmtp.calibrate.engine_fit wmtp_model/data/engines/sglang-b200-paper.points.csv --hw b200
"""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from wmtp import __version__
from wmtp.engine import KIND, SCHEMA_VERSION, EngineOverhead, check_preset
from wmtp.errors import WmtpError
from wmtp.fileio import atomic_write_text
from wmtp.hardware import HardwareSpec
from wmtp.latency import CostModel, step_cost
from wmtp.models import get_model
from wmtp import defaults
from wmtp.calibrate.engine_inputs import read_points, read_structure, structure_path_for

SHARED = ("dense_step_ms", "index_ns_per_token", "draft_attn_factor")  # v1 (no structure file)
PER_MODEL = ("step_ms", "fwd_ms", "verify_attn_factor")


def _unit(term: str) -> dict:
    """An overhead with one term at unit strength (factors: 2, i.e. factor - 1 = 1)."""
    return {term: 2.0 if term.endswith("factor") else 1.0}


def _step(pt: dict, d: int, hw: HardwareSpec, cost: CostModel, window: int, sink: int,
          overhead: EngineOverhead | None) -> float:
    """One point's step at depth d; the draft extend takes the paper's acceptance preset at d (its rows)."""
    from wmtp.acceptance import choose_acceptance

    spec = get_model(pt["model"])
    depth = 1 if pt["method"] == "dense" else d
    al = None
    if pt["method"] != "dense":
        al = getattr(choose_acceptance(spec.key, depth, None), pt["method"]).accept_length(depth)
    return step_cost(spec, hw, cost, pt["method"], pt["ctx"], depth, 1, window, sink, accept_length=al,
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


def _portable(name: str) -> str:
    """A cost model's name with the shipped profiles' folder named from the project root, not this machine's path
    (a preset is committed and shipped: it printed /work/main/... on every machine)."""
    from wmtp.profile import PROFILES_DIR

    return name.replace(str(PROFILES_DIR.resolve()), "wmtp_model/data/profiles").replace(str(PROFILES_DIR),
                                                                                          "wmtp_model/data/profiles")


def fit(points: list[dict], hw: HardwareSpec, cost: CostModel, name: str, window: int = defaults.WINDOW,
        sink: int = 64) -> dict:
    if len(points) < 2:
        raise WmtpError("an engine fit needs at least two points")
    a, kernel, names = design(points, hw, cost, window, sink)
    y = np.array([p["value_ms"] for p in points])
    rows = np.array([i for i, p in enumerate(points) if p.get("fit", True)], dtype=int)  # rows marked fit = no: held out
    if len(rows) < 2:
        raise WmtpError("an engine fit needs at least two points marked fit = yes")
    theta = _solve(a, y, kernel, rows)
    pred = kernel + a @ theta
    loo = []
    for i in range(len(points)):  # a held-out row is predicted by the fit itself; a fitted row without itself
        t = _solve(a, y, kernel, rows[rows != i]) if i in rows else theta
        loo.append(float((kernel[i] + a[i] @ t) / y[i] - 1))
    value = dict(zip(names, theta.tolist()))
    constrained = {n: bool(np.any(a[:, j] != 0)) for j, n in enumerate(names)}
    def term(name: str) -> float:
        return value[name] + (1.0 if name.endswith("factor") else 0.0)

    terms = {t: term(t) for t in SHARED}
    per_model = {m: {t: term(f"{m}.{t}") for t in PER_MODEL} for m in sorted({p["model"] for p in points})}
    residuals = [{**{k: p[k] for k in ("model", "method", "ctx", "d_lo", "d_hi", "quantity", "value_ms")},
                  "fit": bool(p.get("fit", True)), "kernel_ms": float(kernel[i]), "fitted_ms": float(pred[i]),
                  "rel_error": float(pred[i] / y[i] - 1), "loo_rel_error": loo[i]} for i, p in enumerate(points)]
    abs_err = sorted(abs(r["rel_error"]) for r in residuals if r["fit"])
    abs_loo = sorted(abs(loo[i]) for i in rows)
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "name": name, "hardware": hw.key,
            "cost_model": _portable(cost.name), "window": window, "sink": sink, "batch": 1,
            "terms": terms, "per_model": per_model,
            "unconstrained": [n for n, c in constrained.items() if not c],
            "fit": {"points": len(points), "fit_points": int(len(rows)), "parameters": len(names),
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
    from wmtp.hardware import get_hardware
    from wmtp.measure.provenance import git_sha
    from wmtp.profile import PROFILES_DIR, cost_model_for

    points_path = Path(points_path)
    name = _preset_name(name or points_path.name.split(".")[0])
    hw = get_hardware(hw_key)
    structure_path = structure_path_for(points_path)
    out = Path(out) if out else points_path.with_name(f"{name}.json")
    _check_outputs(out, [("points", points_path), ("engine structure", structure_path), ("--profile", profile)])
    if structure_path.exists():  # v2: the engine's measured kernels, structural counts, fitted host terms
        structure = read_structure(structure_path)
        cost = cost_model_for(hw, profile or (PROFILES_DIR / f"{structure['kernel_profile']}.json"))
        preset = fit_v2(read_points(points_path), hw, cost, name, structure)
        preset["structure"] = {"file": structure_path.name,
                               "sha256": hashlib.sha256(structure_path.read_bytes()).hexdigest()}
        render = markdown_v2
    else:
        preset = fit(read_points(points_path), hw, cost_model_for(hw, profile), name)
        render = markdown
    preset["points"] = {"file": points_path.name, "sha256": hashlib.sha256(points_path.read_bytes()).hexdigest()}
    preset["provenance"] = {"wmtp_version": __version__, "git_sha": git_sha(),
                            "utc_time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    try:
        text = json.dumps(preset, indent=1, allow_nan=False) + "\n"
    except ValueError:  # NaN / infinity: not JSON, and no preset
        raise WmtpError(f"the fit of {points_path} holds a non-finite number; no preset written") from None
    check_preset(json.loads(text), out)  # what --framework will read back: a preset it refuses is no fit
    atomic_write_text(out, text)
    atomic_write_text(out.with_suffix(".md"), render(preset, str(points_path)))
    return preset


def _preset_name(name: str) -> str:
    """A preset's name, which is also its file's stem beside the points: a plain file name ('../x' was a ValueError
    traceback from pathlib; 'a/b' a path into another folder)."""
    if name in (".", "..") or any(c in name for c in "/\\") or not name.isprintable():
        raise WmtpError(f"--name {name[:60]!r} must be a plain file name (no folder, no control characters)")
    return name


def _check_outputs(out: Path, inputs) -> None:
    """`out` and its summary `out.md` as write targets that destroy no input of the fit (`inputs`: (what, path or
    None) pairs): `python -m wmtp.calibrate.engine_fit P --out P` replaced the points CSV with the preset."""
    import os

    from wmtp.fileio import check_output_path

    if out.name in ("", ".", ".."):  # `--out .`: Path('.').with_suffix was a ValueError traceback
        raise WmtpError(f"--out {str(out)[:60]} names a folder; give the preset's file name, NAME.json")
    md = out.with_suffix(".md")
    if md == out:  # the summary goes beside the preset as NAME.md: it would replace it
        raise WmtpError(f"--out {out} ends in .md, the name of the preset's summary: give NAME.json")
    read = {os.path.realpath(p): what for what, p in inputs if p is not None and str(p).strip()}
    for target in (out, md):
        if os.path.realpath(target) in read:
            raise WmtpError(f"--out {out} would write {target}, the fit's {read[os.path.realpath(target)]} input: "
                            "writing it would destroy that input; give another path")
        check_output_path(target, "engine preset" if target == out else "engine preset summary")


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
    print(summary_line(preset))
    return 0


def summary_line(preset: dict) -> str:
    f = preset["fit"]
    if "in_sample" in f:
        return (f"{preset['name']}: {f['fit_points']} of {f['points']} points fitted, {f['parameters']} parameters; "
                f"|error| in sample median {100 * f['in_sample']['median']:.1f} %, held-out points median "
                f"{100 * (f['held_out_points']['median'] or 0):.1f} % / max {100 * (f['held_out_points']['max'] or 0):.1f} %")
    return (f"{preset['name']}: {f['points']} points, |error| median {100 * f['median_abs_rel_error']:.1f} %, "
            f"LOO max {100 * f['loo_max_abs_rel_error']:.1f} %")



def _overhead(structure: dict, values: dict, model: str) -> EngineOverhead:
    """The structure's counts, `model`'s named kernels (not fitted) and `values` of the fitted terms."""
    return EngineOverhead("fit", **structure["counts"], **structure.get("named", {}).get(model, {}), **values)


def design_v2(points: list[dict], hw, cost, structure: dict, window: int = defaults.WINDOW,
              sink: int = defaults.SINK) -> tuple[np.ndarray, np.ndarray, list]:
    """(A, base, names): observed = base + A @ theta; base = the engine's measured kernels and index walks."""
    models = sorted({p["model"] for p in points})
    names = list(structure.get("shared", [])) + [f"{m}.{t}" for m in models for t in structure.get("per_model", [])]
    a = np.zeros((len(points), len(names)))
    base = np.zeros(len(points))
    for i, pt in enumerate(points):
        base[i] = _value(pt, hw, cost, window, sink, _overhead(structure, {}, pt["model"]))
        for j, name in enumerate(names):
            model, _, term = name.rpartition(".")
            if model and model != pt["model"]:
                continue
            a[i, j] = _value(pt, hw, cost, window, sink, _overhead(structure, _unit(term), pt["model"])) - base[i]
    return a, base, names


def _predict_with(a, base, names, theta, rows_model: list[str], fill_model: str | None = None) -> np.ndarray:
    """Predictions; a model left out of the fit gets the mean of the other models' per-model terms."""
    t = dict(zip(names, theta))
    if fill_model is not None:
        per = {n.split(".", 1)[1] for n in names if "." in n}
        for term in per:
            others = [v for n, v in t.items() if n.endswith("." + term) and not n.startswith(fill_model + ".")]
            t[f"{fill_model}.{term}"] = sum(others) / len(others) if others else 0.0
    return base + a @ np.array([t[n] for n in names])


def _held_out_errors(points, a, base, y, names) -> dict:
    """Leave-one-point-out, leave-context-out (fit at the largest context) and leave-model-out errors."""
    fit_rows = np.array([i for i, p in enumerate(points) if p["fit"]])
    loo = {}
    for i in fit_rows:
        t = _solve(a, y, base, fit_rows[fit_rows != i])
        loo[int(i)] = float((base[i] + a[i] @ t) / y[i] - 1)
    top = max(p["ctx"] for p in points)
    at_top = np.array([i for i, p in enumerate(points) if p["ctx"] == top])
    t = _solve(a, y, base, at_top)
    lco = {int(i): float((base[i] + a[i] @ t) / y[i] - 1) for i in range(len(points)) if points[i]["ctx"] != top}
    lmo = {}
    for m in sorted({p["model"] for p in points}):
        keep = np.array([i for i in fit_rows if points[i]["model"] != m])
        if len(keep) < 2:
            continue
        pred = _predict_with(a, base, names, _solve(a, y, base, keep), [p["model"] for p in points], m)
        lmo.update({int(i): float(pred[i] / y[i] - 1) for i in range(len(points)) if points[i]["model"] == m})
    return {"loo": loo, "leave_context_out": lco, "leave_model_out": lmo}


def _abs_stats(errs) -> dict:
    e = sorted(abs(x) for x in errs)
    return {"n": len(e), "median": e[len(e) // 2] if e else None, "max": e[-1] if e else None}


def fit_v2(points: list[dict], hw: HardwareSpec, cost: CostModel, name: str, structure: dict) -> dict:
    fit_rows = np.array([i for i, p in enumerate(points) if p["fit"]])
    if len(fit_rows) < 2:
        raise WmtpError("an engine fit needs at least two points marked fit = yes")
    a, base, names = design_v2(points, hw, cost, structure)
    y = np.array([p["value_ms"] for p in points])
    theta = _solve(a, y, base, fit_rows)
    pred = base + a @ theta
    held = _held_out_errors(points, a, base, y, names)
    # a factor's parameter is factor - 1 (its unit column priced the step at factor 2)
    value = {n: v + (1.0 if n.endswith("factor") else 0.0) for n, v in zip(names, theta.tolist())}
    residuals = [{**{k: p[k] for k in ("model", "method", "ctx", "d_lo", "d_hi", "quantity", "value_ms", "fit")},
                  "kernels_ms": float(base[i]), "fitted_ms": float(pred[i]), "rel_error": float(pred[i] / y[i] - 1),
                  **{k: v.get(i) for k, v in held.items()}} for i, p in enumerate(points)]
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "name": name, "engine": structure.get("engine", ""),
            "hardware": hw.key, "cost_model": _portable(cost.name), "kernel_profile": structure["kernel_profile"],
            "window": defaults.WINDOW, "sink": defaults.SINK, "batch": 1,
            "terms": {**structure["counts"], **{t: value[t] for t in structure.get("shared", [])}},
            "per_model": {m: {**{t: value[f"{m}.{t}"] for t in structure.get("per_model", [])},
                              **structure.get("named", {}).get(m, {})}
                          for m in sorted({p["model"] for p in points})},
            "memory": structure.get("memory"), "structure_sources": structure.get("sources", {}),
            "unconstrained": [n for j, n in enumerate(names) if not np.any(a[fit_rows, j] != 0)],
            "fit": {"points": len(points), "fit_points": int(len(fit_rows)), "parameters": len(names),
                    "in_sample": _abs_stats([r["rel_error"] for r in residuals if r["fit"]]),
                    "held_out_points": _abs_stats([r["rel_error"] for r in residuals if not r["fit"]]),
                    **{k: _abs_stats(v.values()) for k, v in held.items()}},
            "residuals": residuals}


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f} %"


def markdown_v2(preset: dict, points_path: str) -> str:
    f = preset["fit"]
    lines = [f"# Engine preset `{preset['name']}` ({preset['engine']})", "",
             f"Fitted by `python -m wmtp.calibrate.engine_fit {points_path} --hw {preset['hardware']}` "
             f"(wmtp {preset['provenance']['wmtp_version']}, git {preset['provenance']['git_sha']}, "
             f"{preset['provenance']['utc_time']}).", "",
             f"Kernels: the measured profile `{preset['kernel_profile']}` ({preset['cost_model']}), scaled to "
             f"{preset['hardware']} by bandwidth and flop ratios. Structural counts (the engine's code, not fitted): "
             + ", ".join(f"{k} {v}" for k, v in preset["terms"].items() if k.endswith("walks")) + ".", "",
             "## Fitted host terms (ms)", "", "| term | value |", "|---|---|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in preset["terms"].items() if not k.endswith("walks")]
    lines += [f"| {m}.{k} | {v:.3f} |" for m, per in preset["per_model"].items() for k, v in per.items()]
    if preset["unconstrained"]:
        lines += ["", f"Not constrained by any fitted point (left at zero): {', '.join(preset['unconstrained'])}."]
    lines += ["", f"## Fit: {f['fit_points']} of {f['points']} points, {f['parameters']} parameters", ""]
    for key, label in (("in_sample", "in sample"), ("loo", "leave-one-point-out"),
                       ("leave_context_out", "leave-context-out (fit at the largest context only)"),
                       ("leave_model_out", "leave-model-out (its per-model terms: the others' mean)"),
                       ("held_out_points", "points not fitted (fit = no)")):
        st = f[key]
        if st["n"]:
            lines.append(f"- {label}: {st['n']} points, |error| median {100 * st['median']:.1f} %, "
                         f"max {100 * st['max']:.1f} %")
    lines += ["", "| model | method | ctx | d | quantity | fit | observed ms | kernels ms | fitted ms | error | LOO | "
              "leave-context-out | leave-model-out |", "|---" * 13 + "|"]
    for r in preset["residuals"]:
        d = str(r["d_lo"]) if r["d_lo"] == r["d_hi"] else f"{r['d_lo']}-{r['d_hi']}"
        lines.append(f"| {r['model']} | {r['method']} | {r['ctx']:,} | {d} | {r['quantity']} | "
                     f"{'yes' if r['fit'] else 'no'} | {r['value_ms']:.3f} | {r['kernels_ms']:.3f} | "
                     f"{r['fitted_ms']:.3f} | {_pct(r['rel_error'])} | {_pct(r['loo'])} | "
                     f"{_pct(r['leave_context_out'])} | {_pct(r['leave_model_out'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
