"""`wmtp validate`: composed speculative iterations on the GPU against the profile's prediction.

For each model (layer counts scaled down where the bf16 weights do not fit, and predicted for the
same scaled row), method (dense, native, window), ctx and d: build the iteration of
`composed.py`, replay it as a CUDA graph, and compare its median time with
`wmtp.latency.step_cost` priced by the profile. Rows are written as they are measured.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import torch

from wmtp.acceptance import choose_acceptance
from wmtp.calibrate.profile import ProfileCostModel
from wmtp.hardware import get_hardware
from wmtp.latency import step_cost
from wmtp.measure import composed
from wmtp.measure.bench import _free_bytes, _l2_bytes
from wmtp.specs import ModelSpec

COLUMNS = ["model", "layers", "method", "ctx", "d", "window", "sink", "extend_queries", "predicted_ms",
           "measured_ms", "measured_p10_ms", "measured_p90_ms", "rel_err", "reps", "predicted_source", "status"]


def validation_plan(ctxs, depths):
    for ctx in ctxs:
        yield "dense", ctx, 1
        for d in depths:
            for method in ("native", "window"):
                yield method, ctx, d


def run_validate(profile_path: Path, specs: list[ModelSpec], out_dir: Path, ctxs=(65536, 262144, 1048576),
                 depths=(3, 5, 7), window: int = 4032, sink: int = 64, progress=None) -> Path:
    cost = ProfileCostModel.from_path(profile_path)
    hw = get_hardware(cost.hw_key)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "validation.csv"
    f = open(path, "w", newline="")
    w = csv.DictWriter(f, fieldnames=COLUMNS)
    w.writeheader()
    plan = list(validation_plan(ctxs, depths))
    task = progress.add_task("validating", total=len(plan) * len(specs)) if progress else None
    try:
        for spec in specs:
            budget = 0.80 * _free_bytes()
            trunc, note = composed.fit_layers(spec, max(ctxs), budget)
            model = composed.ComposedModel(trunc, max(ctxs), _l2_bytes())
            layers = f"F={trunc.n_full_attn} linear={trunc.n_linear} moe={trunc.n_moe} dense={trunc.n_dense_ffn}" + (
                "" if note == "full model" else " (scaled: " + note + ")")
            for method, ctx, d in plan:
                if progress:
                    progress.update(task, description=f"{spec.key} {method} S={ctx} d={d}")
                al = choose_acceptance(spec.key, max(d, 2), None).native.accept_length(max(d, 2)) if d > 1 else 1.0
                ext = max(1, min(d, math.ceil(al)))
                row = dict(model=spec.key, layers=layers, method=method, ctx=ctx, d=d, window=window, sink=sink,
                           extend_queries=ext)
                try:
                    pred = step_cost(trunc, hw, cost, method, ctx, d if method != "dense" else 1, 1, window, sink,
                                     accept_length=float(ext))
                    calls = model.step(method, ctx, d, window, sink, ext)
                    samples = sorted(composed.time_step(calls))
                    del calls
                    med = samples[len(samples) // 2]
                    row.update(predicted_ms=pred.step_ms, measured_ms=med, measured_p10_ms=samples[len(samples) // 10],
                               measured_p90_ms=samples[(9 * len(samples)) // 10], rel_err=pred.step_ms / med - 1,
                               reps=len(samples), predicted_source=pred.source, status="ok")
                except Exception as e:  # a step that cannot be built or timed is a row with its reason
                    row.update(status=f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                w.writerow(row)
                f.flush()
                torch.cuda.empty_cache()
                if progress:
                    progress.advance(task)
            del model
            torch.cuda.empty_cache()
    finally:
        f.close()
    return path


def validation_summary(csv_path: Path) -> str:
    import pandas as pd

    df = pd.read_csv(csv_path)
    ok = df[df.status == "ok"].copy()
    lines = ["# Composed-step validation: predicted vs measured", ""]
    if ok.empty:
        return "\n".join(lines + ["No step was measured."]) + "\n"
    ok["abs_err"] = ok.rel_err.abs()
    lines += ["| method | steps | median abs err | worst abs err | target (median <= 5 %, worst <= 10 %) |",
              "|---|---|---|---|---|"]
    for method, g in ok.groupby("method"):
        met = g.abs_err.median() <= 0.05 and g.abs_err.max() <= 0.10
        lines.append(f"| {method} | {len(g)} | {g.abs_err.median():.1%} | {g.abs_err.max():.1%} | "
                     f"{'met' if met else 'NOT met'} |")
    lines += ["", "| model | layers | method | ctx | d | predicted ms | measured ms (p10-p90) | error |",
              "|---|---|---|---|---|---|---|---|"]
    for r in ok.itertuples():
        lines.append(f"| {r.model} | {r.layers} | {r.method} | {r.ctx} | {r.d} | {r.predicted_ms:.3f} | "
                     f"{r.measured_ms:.3f} ({r.measured_p10_ms:.3f}-{r.measured_p90_ms:.3f}) | {r.rel_err:+.1%} |")
    bad = df[df.status != "ok"]
    if len(bad):
        lines += ["", "Steps that did not run:", ""] + [f"- {r.model} {r.method} S={r.ctx} d={r.d}: {r.status}"
                                                       for r in bad.itertuples()]
    return "\n".join(lines) + "\n"
