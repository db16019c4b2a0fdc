"""The model against the Windowed-MTP paper's published numbers (reference/paper-results.md).

    python -m wmtp.reports.paper_check --out reports/paper_check.md

The paper's figures are data: `paper_figures.csv` next to this module, one row per figure (id, what it
is, the paper's value `paper_lo == paper_hi` for a point or its stated range, unit, kind point|range,
the paper's section, whether it was a fit input of the `sglang-b200-paper` engine preset, the function
below that computes the tool's value, the model and that function's arguments). `fit_input` is `yes`
(one of the preset's fit points, wmtp_model/data/engines/sglang-b200-paper.points.csv), `derived`
(arithmetic on fit inputs and the paper's acceptance presets only, so no test of the model) or `no`
(held out: the model predicts it).

Every tool value goes through the public API: `wmtp.predict.predict` with the shipped H200 profile scaled
to the B200, the paper's acceptance presets and `frameworks=["sglang-b200-paper"]` (or none, for the
kernel-level column), at the paper's configuration (1,040,000 tokens, d 7, W 4032 + 64, B 1) unless the
figure's arguments say otherwise. Nothing here knows how the engine model works.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

from wmtp import __version__, defaults
from wmtp.fileio import atomic_write_text
from wmtp.hardware import get_hardware
from wmtp.models import get_model
from wmtp.predict import Prediction, predict
from wmtp.profile import cost_model_for

ENGINE = "sglang-b200-paper"
ONE_M = 1_040_000  # the paper's "1M" prompt
BEST_DEPTH_GRID = (3, 5, 7, 9)  # the paper's best-depth grid (Table 3)
FIT_GAMMAS = (4, 5, 6, 7)  # the paper's post-cliff latency fit (App. B)
SHORT_CTX = 4096  # a context where attention is negligible: isolates constant per-step terms
FIGURES_CSV = Path(__file__).resolve().with_name("paper_figures.csv")
ROLES = ("yes", "derived", "no")
COUNT_UNITS = ("d", "requests", "B")  # whole numbers: printed exactly, no rounding to allow for


# ------------------------------------------------------------------------------ the figure table
@dataclass(frozen=True)
class Figure:
    id: str
    figure: str
    lo: float
    hi: float
    unit: str
    kind: str  # point | range
    section: str
    fit_input: str  # yes | derived | no
    fn: str
    model: str
    args: dict = field(default_factory=dict)

    @property
    def held_out(self) -> bool:
        return self.fit_input == "no"

    def paper_text(self) -> str:
        return f"{self.lo:g}" if self.kind == "point" else f"{self.lo:g} .. {self.hi:g}"


def _parse_args(text: str) -> dict:
    out = {}
    for item in filter(None, (text or "").split(";")):
        k, v = item.split("=", 1)
        out[k.strip()] = int(v) if v.strip().isdigit() else v.strip()
    return out


def load_figures(path: Path = FIGURES_CSV) -> list[Figure]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    figs = [Figure(r["id"], r["figure"], float(r["paper_lo"]), float(r["paper_hi"]), r["unit"], r["kind"],
                   r["section"], r["fit_input"], r["fn"], r["model"], _parse_args(r["args"])) for r in rows]
    for g in figs:
        if g.kind not in ("point", "range") or g.fit_input not in ROLES or g.fn not in FUNCTIONS or g.lo > g.hi:
            raise ValueError(f"{path.name}: bad row {g.id!r}")
    if len({g.id for g in figs}) != len(figs):
        raise ValueError(f"{path.name}: duplicate ids")
    return figs


# ------------------------------------------------------------------------------ one prediction
@lru_cache(maxsize=None)
def prediction(model: str, *, engine: bool = True, ctx: int = ONE_M, depth: int = defaults.DEPTH, batch: int = 1,
               tp: int = 1, kv: str | None = None, weights: str | None = None, hw: str = "b200",
               task: str = defaults.TASK, accept: tuple | None = None) -> Prediction:
    """`wmtp.predict.predict` at the paper's configuration, with the overrides given."""
    gpu = get_hardware(hw)
    spec = get_model(model)
    if kv or weights:
        spec = spec.with_dtypes(kv_dtype=kv, weight_dtype=weights)
    return predict(spec, gpu, ctx, depth, defaults.WINDOW, defaults.SINK, batch, accept_length=accept,
                   cost=cost_model_for(gpu, None, frameworks=[ENGINE] if engine else None),
                   frameworks=[ENGINE] if engine else None, task=task, tp=tp)


def _method(p: Prediction, method: str):
    return p.methods[method]


# ------------------------------------------------------------------------------ the tool's values
def step_ms(model, *, method, **kw) -> float:
    return _method(prediction(model, **kw), method).cost.step_ms


def step_ratio_pct(model, **kw) -> float:
    """step_native / step_window - 1 (the paper's matched-acceptance cost ratio), in %."""
    return 100 * (step_ms(model, method="native", **kw) / step_ms(model, method="window", **kw) - 1)


def step_saving_ms(model, **kw) -> float:
    return step_ms(model, method="native", **kw) - step_ms(model, method="window", **kw)


def tpot_ms(model, *, method, **kw) -> float:
    return _method(prediction(model, **kw), method).tpot_ms


def speedup(model, *, method, over, **kw) -> float:
    return tpot_ms(model, method=over, **kw) / tpot_ms(model, method=method, **kw)


def _linfit(xs, ys) -> tuple[float, float]:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return slope, my - slope * mx


def latency_fit(model, method, **kw) -> tuple[float, float]:
    """(slope ms per draft forward, intercept c) of T_iter(gamma) over the paper's post-cliff gammas,
    at a fixed AL of 4 (the fit is acceptance-free: T_iter, not TPOT)."""
    steps = [step_ms(model, method=method, depth=g + 1, accept=(4.0, 4.0), **kw) for g in FIT_GAMMAS]
    return _linfit(FIT_GAMMAS, steps)


def fit_slope_ms(model, *, method, **kw) -> float:
    return latency_fit(model, method, **kw)[0]


def slope_drop_ms(model, **kw) -> float:
    return latency_fit(model, "native", **kw)[0] - latency_fit(model, "window", **kw)[0]


def slope_drop_pct(model, **kw) -> float:
    return 100 * slope_drop_ms(model, **kw) / latency_fit(model, "native", **kw)[0]


def intercept_drop_ms(model, **kw) -> float:
    return latency_fit(model, "native", **kw)[1] - latency_fit(model, "window", **kw)[1]


def tiling_step_ms(model, **kw) -> float:
    """Native T_iter at d 5 minus d 4 (the paper's gamma 3 -> 4 verify-kernel tiling step)."""
    return step_ms(model, method="native", depth=5, **kw) - step_ms(model, method="native", depth=4, **kw)


def _verify_ms(model, method, **kw) -> float:
    return _method(prediction(model, **kw), method).cost.t_verify.time_ms


def spec_overhead_pct(model, *, method, engine=True, **kw) -> float:
    """What speculation adds on top of the bare target verify (paper App. B Table 7: t_draft + the
    verify bookkeeping over t_verify^base), in %. t_verify^base is the target's forward, i.e. the verify's kernels
    (with the engine's attention factor and the engine's own MoE kernel where a preset names one); the bookkeeping
    (the paper: tree build, index, sampling) is what the engine adds around them: its per-step host terms and its
    per-request index builds over the context."""
    p = prediction(model, engine=engine, **kw)
    verify = _method(p, method).cost.t_verify
    bookkeeping = 0.0
    ov = p.overheads.get(method)
    if engine and ov is not None:
        bookkeeping = (ov.host_step_ms + ov.step_ms + ov.request_ms * p.batch
                       + sum(x.time_ms for x in verify.items if x.work.name.endswith(".engine_index")))
    base = verify.time_ms - bookkeeping
    return 100 * (step_ms(model, method=method, engine=engine, **kw) / base - 1)


def best_depth(model, *, method, task, **kw) -> int:
    by_d = prediction(model, task=task, **kw).tpot_by_depth[method]
    return min(BEST_DEPTH_GRID, key=by_d.get)


def best_depth_gain(model, *, task, **kw) -> float:
    """Native TPOT at its best depth over the window's at its own (paper Table 3)."""
    by_d = prediction(model, task=task, **kw).tpot_by_depth
    return min(by_d["native"][d] for d in BEST_DEPTH_GRID) / min(by_d["window"][d] for d in BEST_DEPTH_GRID)


def requests_seated(model, *, method, **kw) -> int:
    return prediction(model, **kw).memory.max_batch[method]


def extra_window_requests(model, **kw) -> int:
    return requests_seated(model, method="window", **kw) - requests_seated(model, method="native", **kw)


def extra_window_requests_at_largest_mfs(model, **kw) -> int:
    """Requests the window seats beyond native with each method at the largest mem_fraction_static it fits at (the
    paper's batch sweeps raised it per arm, App. A); without an engine's accounting, at the analytical budget."""
    mem = prediction(model, **kw).memory
    return mem.extra_requests_window if mem.extra_requests_window_max is None else mem.extra_requests_window_max


def draft_pool_share_pct(model, **kw) -> float:
    return 100 * prediction(model, **kw).memory.draft_pool_share


def per_user_tok_s(model, *, method, batch=1, **kw) -> float:
    return 1e3 / tpot_ms(model, method=method, batch=batch, **kw)


def per_user_ratio(model, *, over, **kw) -> float:
    return per_user_tok_s(model, method="window", **kw) / per_user_tok_s(model, method=over, **kw)


def batch_curve(model, method, **kw) -> dict[int, float]:
    """Per-GPU tokens/s for B = 1 .. the largest batch that fits (at TP1)."""
    limit = requests_seated(model, method=method, **kw)
    return {b: b * per_user_tok_s(model, method=method, batch=b, **kw) for b in range(1, limit + 1)}


def peak_batch(model, *, method, **kw) -> int:
    curve = batch_curve(model, method, **kw)
    return max(curve, key=curve.get)


def peak_per_gpu_tok_s(model, *, method, **kw) -> float:
    return max(batch_curve(model, method, **kw).values())


def peak_ratio(model, *, over, **kw) -> float:
    return peak_per_gpu_tok_s(model, method="window", **kw) / peak_per_gpu_tok_s(model, method=over, **kw)


FUNCTIONS = {f.__name__: f for f in (
    step_ms, step_ratio_pct, step_saving_ms, tpot_ms, speedup, fit_slope_ms, slope_drop_ms, slope_drop_pct,
    intercept_drop_ms, tiling_step_ms, spec_overhead_pct, best_depth, best_depth_gain, requests_seated,
    extra_window_requests, extra_window_requests_at_largest_mfs, draft_pool_share_pct, per_user_tok_s, per_user_ratio, peak_batch,
    peak_per_gpu_tok_s, peak_ratio)}


def tool_value(fig: Figure, engine: bool = True) -> float:
    """The tool's value of one figure, with the engine preset or at kernel level."""
    return float(FUNCTIONS[fig.fn](fig.model, engine=engine, **fig.args))


# ------------------------------------------------------------------------------ scoring
def score(fig: Figure, tool: float) -> dict:
    """Point: signed relative error. Range: inside or not (the printed bounds widened by their rounding), and how
    far outside (in the figure's unit)."""
    out = {"id": fig.id, "figure": fig.figure, "model": fig.model, "unit": fig.unit, "kind": fig.kind,
           "section": fig.section, "paper": fig.lo if fig.kind == "point" else [fig.lo, fig.hi], "tool": tool,
           "fit_input": fig.fit_input != "no", "role": fig.fit_input}
    if fig.kind == "point":
        out["rel_err"] = (tool - fig.lo) / fig.lo
    else:  # the paper prints its bounds rounded: a value that rounds onto a bound is inside
        r = 0.0 if fig.unit in COUNT_UNITS else 1.0
        lo, hi = fig.lo - r * printed_half_unit(fig.lo), fig.hi + r * printed_half_unit(fig.hi)
        out["inside"] = lo <= tool <= hi
        out["outside_by"] = max(lo - tool, tool - hi, 0.0)
    return out


def printed_half_unit(x: float) -> float:
    """Half a unit of the last digit the paper printed (figures are stored as printed: 2.55 -> 0.005)."""
    s = f"{x:g}"
    return 0.5 * 10 ** -(len(s.split(".")[1]) if "." in s else 0)


def heldout_scores(engine: bool = True) -> list[dict]:
    """Every figure of paper_figures.csv scored against the tool; `fit_input` False marks the held-out ones."""
    return [score(g, tool_value(g, engine)) for g in load_figures()]


def summary(scores: list[dict], held_out: bool = True) -> dict:
    """Median and worst |relative error| over point figures, and the range figures' hits and misses."""
    sel = [s for s in scores if s["fit_input"] != held_out]
    points = [s for s in sel if s["kind"] == "point"]
    ranges = [s for s in sel if s["kind"] == "range"]
    worst = max(points, key=lambda s: abs(s["rel_err"]), default=None)
    return {"points": len(points),
            "median_abs_rel_err": statistics.median(abs(s["rel_err"]) for s in points) if points else None,
            "worst": (worst["id"], worst["rel_err"]) if worst else None,
            "ranges": len(ranges), "inside": sum(s["inside"] for s in ranges),
            "outside": [(s["id"], s["tool"], s["outside_by"]) for s in ranges if not s["inside"]]}


# ------------------------------------------------------------------------------ the report
def _fmt(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 99.95 or x == int(x) else f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}"


def _check(s: dict) -> str:
    if s["kind"] == "point":
        return f"{100 * s['rel_err']:+.1f} %"
    return "inside" if s["inside"] else f"outside by {_fmt(s['outside_by'])}"


def _summary_lines(name: str, sm: dict) -> list[str]:
    med = "-" if sm["median_abs_rel_err"] is None else f"{100 * sm['median_abs_rel_err']:.1f} %"
    worst = "-" if sm["worst"] is None else f"`{sm['worst'][0]}` ({100 * sm['worst'][1]:+.0f} %)"
    outside = ", ".join(f"`{i}` ({_fmt(t)}, by {_fmt(d)})" for i, t, d in sm["outside"]) or "none"
    return [f"- {name}: {sm['points']} point figures, median |error| {med}, worst {worst}; "
            f"{sm['inside']} of {sm['ranges']} range figures inside the paper's range; outside: {outside}."]


def table_lines(figs: list[Figure], engine: list[dict], kernel: list[dict]) -> list[str]:
    lines = ["| id | section | figure | unit | paper | kernels | + engine | error / range | fit input |",
             "|---|---|---|---|---|---|---|---|---|"]
    for g, e, k in zip(figs, engine, kernel):
        lines.append(f"| {g.id} | {g.section} | {g.model}: {g.figure} | {g.unit} | {g.paper_text()} | "
                     f"{_fmt(k['tool'])} | {_fmt(e['tool'])} | {_check(e)} | {g.fit_input} |")
    return lines


def markdown() -> str:
    figs = load_figures()
    engine, kernel = heldout_scores(True), heldout_scores(False)
    lines = ["# The model against the Windowed-MTP paper", "",
             f"Generated by `python -m wmtp.reports.paper_check` (wmtp {__version__}, "
             f"{datetime.now(timezone.utc).strftime('%Y-%m-%d')}) from `reports/paper_figures.csv`. Costs: the "
             "shipped H200 profile scaled to the B200 (`kernels`), plus the engine preset `" + ENGINE + "` "
             "(`+ engine`). Acceptance: the paper presets. `fit input`: `yes` = a point of the preset's fit, "
             "`derived` = arithmetic on fit inputs and acceptance presets, `no` = held out. Errors are the "
             "engine column's: relative for point figures, distance outside the paper's range for range figures.",
             "", "## Summary (+ engine)", ""]
    lines += _summary_lines("held out", summary(engine, True))
    lines += _summary_lines("fit inputs and derived", summary(engine, False))
    lines += _summary_lines("held out, kernels only", summary(kernel, True))
    lines += fit_lines()
    lines += ["", "## Figures", ""] + table_lines(figs, engine, kernel)
    return "\n".join(lines) + "\n"


def fit_lines() -> list[str]:
    """The preset's own fit beside the figures: in sample, leave-one-point-out, leave-context-out (fit at 1M,
    predict 261K) and leave-model-out (a model's per-model terms from the others), from the preset's file."""
    from wmtp.engine import load_preset

    fit = load_preset(ENGINE)["fit"]

    def stat(key: str, what: str) -> str:
        f = fit.get(key) or {}
        if not f.get("n"):
            return f"- {what}: none"
        return f"- {what}: {f['n']} points, |error| median {100 * f['median']:.1f} %, max {100 * f['max']:.1f} %"

    return ["", f"## The preset's fit ({fit['fit_points']} of {fit['points']} published points, "
            f"{fit['parameters']} parameters; per point in wmtp_model/data/engines/{ENGINE}.md)", "",
            stat("in_sample", "in sample"), stat("loo", "leave-one-point-out"),
            stat("leave_context_out", "leave-context-out (fit at 1M only, predict 261K)"),
            stat("leave_model_out", "leave-model-out (a model's per-model terms: the other models' mean)"),
            stat("held_out_points", "its points not fitted (the 261K steps)")]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    text = markdown()
    if args.out:
        atomic_write_text(args.out, text)
        print(f"wrote {args.out}")
    else:
        print(text)


if __name__ == "__main__":
    main()
