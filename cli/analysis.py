"""`wmtp sweep` and `wmtp simulate`: thin commands over `wmtp.decisions` and `wmtp.simulate`."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from wmtp.cli.main import (AccOpt, BatchOpt, ConfigOpt, CtxOpt, FrameworkOpt, HwOpt, JsonOpt, KvOpt, ModelOpt,
                           ProfileOpt, SinkOpt, SolOpt, TaskOpt, WdOpt, WindowOpt, _fail, app, parse_accept,
                           resolve_model)
from wmtp.engine import label as engine_label
from wmtp.errors import WmtpError

CsvOpt = Annotated[Optional[Path], typer.Option("--csv", help="Also write the rows to this CSV file.")]
TpOpt = Annotated[int, typer.Option("--tp", help="Tensor-parallel GPUs.")]


def _scenario(model, config, hw, ctx, depth, window, sink, batch, kv_dtype, weight_dtype, profile, speed_of_light, tp,
              framework=None):
    """(Scenario, warnings) from the shared options."""
    from wmtp.calibrate.profile import cost_model_for
    from wmtp.decisions import Scenario
    from wmtp.engine import resolve as resolve_engine
    from wmtp.hardware import get_hardware
    from wmtp.units import parse_tokens

    spec = resolve_model(model, config, weight_dtype, kv_dtype)
    gpu = get_hardware(hw)
    if batch < 1 or sink < 0:
        raise WmtpError("--batch must be >= 1 and --sink >= 0")
    if depth < 2:
        raise WmtpError("--depth must be >= 2")
    overheads, warnings = resolve_engine(spec.key, gpu.key, framework)
    return Scenario(spec, gpu, cost_model_for(gpu, profile, speed_of_light), parse_tokens(ctx), depth,
                    parse_tokens(window), sink, batch, tp, overheads or None), warnings


def _emit(rows: list[dict], extra: dict, as_json: bool, csv_path: Path | None, title: str) -> None:
    if csv_path is not None:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        from wmtp.fileio import atomic_write_text

        atomic_write_text(csv_path, buf.getvalue())
    if as_json:
        typer.echo(json.dumps({**extra, "rows": rows}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    cols = [c for c in rows[0] if not c.endswith("_source")]
    for c in cols:
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(*[f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in cols])
    con = Console()
    con.print(t)
    for k, v in extra.items():
        con.print(f"{k}: {v}")


@app.command()
def sweep(
    what: Annotated[str, typer.Argument(help="ctx | depth | window | batch")],
    model: ModelOpt = None, config: ConfigOpt = None, hw: HwOpt = "h200", ctx: CtxOpt = "1M",
    depth: Annotated[int, typer.Option("--depth", "-d", help="Draft tokens per step d.")] = 7,
    window: WindowOpt = "4032", sink: SinkOpt = 64, batch: BatchOpt = 1, kv_dtype: KvOpt = None,
    weight_dtype: WdOpt = None, accept_length: AccOpt = None, profile: ProfileOpt = None,
    speed_of_light: SolOpt = False, tp: TpOpt = 1, framework: FrameworkOpt = None,
    task: TaskOpt = "niah_multiquery_enum",
    threshold: Annotated[float, typer.Option(help="ctx sweep: the break-even context is where the window is this much faster.")] = 0.05,
    al_window: Annotated[Optional[str], typer.Option(
        "--al-window", help="window sweep: measured (W, AL) points at --depth as W:AL,... (AL(W) model; native AL at W=S).")] = None,
    as_json: JsonOpt = False, csv_out: CsvOpt = None,
) -> None:
    """Decision curves: TPOT against context, depth, window or batch, with the break-even points."""
    from wmtp import decisions as dec
    from wmtp.acceptance import DEFAULT_TASK, WINDOW_PRESETS, choose_acceptance

    try:
        sc, warnings = _scenario(model, config, hw, ctx, depth, window, sink, batch, kv_dtype, weight_dtype, profile,
                                 speed_of_light, tp, framework)
        acc = choose_acceptance(sc.spec.key, depth, parse_accept(accept_length), task)
        extra = {"model": sc.spec.key, "hardware": sc.hw.key, "cost_model": sc.cost.name,
                 "engine_overhead": engine_label(sc.overheads),
                 "acceptance": {"native": acc.native.tag(depth), "window": acc.window.tag(depth)}}
        warnings = ([acc.warning] if acc.warning else []) + warnings
        if warnings:
            extra["warning"] = "; ".join(warnings)
        if what == "depth":
            rows = dec.depth_curve(sc, acc)
            extra["best_depth"] = dec.best_depths(rows)
        elif what == "ctx":
            ctxs = [2**k for k in range(12, 23)]
            rows = dec.context_curve(sc, acc, ctxs)
            extra["break_even_ctx"] = dec.break_even_context(sc, acc, threshold)
            extra["break_even_threshold"] = threshold
        elif what == "window":
            al_model = None if accept_length or task != DEFAULT_TASK else WINDOW_PRESETS.get((sc.spec.key, DEFAULT_TASK))
            if al_window:
                from wmtp.acceptance import WindowAcceptance
                from wmtp.units import parse_tokens

                try:
                    pts = tuple((parse_tokens(w), float(a)) for w, a in (p.split(":") for p in al_window.split(",")))
                except ValueError:
                    raise WmtpError(f"--al-window takes W:AL,..., got {al_window!r}") from None
                al_model = WindowAcceptance(pts, acc.native.accept_length(depth), depth, "--al-window points")
            if al_model is not None and al_model.depth != depth:
                extra["note"] = f"AL(W) measured at d={al_model.depth}; other depths via a geometric profile"
            rows = dec.window_curve(sc, acc, [256, 512, 1024, 2048, 4032, 8192, 16384, 65536, 262144], al_model)
            extra["break_even_window"] = dec.break_even_window(rows)
        elif what == "batch":
            rows = dec.batch_frontier(sc, acc)
            extra["pareto"] = [f"{r['method']} B={r['batch']}" for r in rows if r["pareto"]]
            if not rows:
                raise WmtpError(f"no request of {sc.ctx} tokens fits on {sc.hw.key}")
        else:
            raise WmtpError(f"sweep takes ctx, depth, window or batch, not {what!r}")
    except WmtpError as e:
        _fail(str(e))
    _emit(rows, extra, as_json, csv_out, f"wmtp sweep {what}: {sc.spec.key} on {sc.hw.key}, ctx {sc.ctx}")


@app.command()
def simulate(
    model: ModelOpt = None, config: ConfigOpt = None, hw: HwOpt = "h200", ctx: CtxOpt = "1M",
    depth: Annotated[str, typer.Option("--depth", "-d", help="A depth d, or 'adaptive'.")] = "7",
    method: Annotated[str, typer.Option(help="native or window")] = "window",
    window: WindowOpt = "4032", sink: SinkOpt = 64, kv_dtype: KvOpt = None, weight_dtype: WdOpt = None,
    profile: ProfileOpt = None, speed_of_light: SolOpt = False, tp: TpOpt = 1, framework: FrameworkOpt = None,
    tokens: Annotated[int, typer.Option(help="Output tokens to decode.")] = 4096,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    phases: Annotated[Optional[str], typer.Option(
        help="Acceptance over time: ALPHA:TOKENS,... (constant per-position acceptance per phase). "
             "Default: the model's preset profile.")] = None,
    trace: Annotated[Optional[Path], typer.Option(help="Recorded accepted counts per step, one integer a line.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Monte Carlo decode with the latency model: TPOT with a 95 % interval, fixed or adaptive depth."""
    from dataclasses import asdict

    from wmtp.acceptance import choose_acceptance
    from wmtp.simulate import simulate as run

    try:
        if method not in ("native", "window"):
            raise WmtpError("--method is native or window")
        policy = "adaptive" if depth == "adaptive" else int(depth) if depth.isdigit() else None
        if policy is None:
            raise WmtpError(f"--depth takes an integer or 'adaptive', got {depth!r}")
        sc, warnings = _scenario(model, config, hw, ctx, 7, window, sink, 1, kv_dtype, weight_dtype, profile,
                                 speed_of_light, tp, framework)
        if phases:
            try:
                ph = [(int(t), [float(a)] * 16) for a, t in (p.split(":") for p in phases.split(","))]
            except ValueError:
                raise WmtpError(f"--phases takes ALPHA:TOKENS,..., got {phases!r}") from None
            if any(not 0 <= a[0] <= 1 or t < 1 for t, a in ph):
                raise WmtpError("--phases: alpha in [0, 1] and tokens >= 1")
        else:
            prof = getattr(choose_acceptance(sc.spec.key, 7, None), method)
            ph = [(tokens, list(prof.alphas_at(16)))]
        tr = None
        if trace is not None:
            try:
                tr = [int(x) for x in trace.read_text().split()]
            except (OSError, ValueError) as e:
                raise WmtpError(f"cannot read trace {trace}: {e}") from None
            if not tr or min(tr) < 0:
                raise WmtpError(f"trace {trace} holds no non-negative accepted counts")
        al_cache: dict = {}

        def step_ms(d: int) -> float:
            if d not in al_cache:
                al_cache[d] = sc.tpot(method, None, depth=d, accept_length=float(d) if d > 1 else 1.0)[1]
            return al_cache[d]

        res = run(step_ms, ph, tokens, policy, seed, tr)
    except WmtpError as e:
        _fail(str(e))
    out = asdict(res)
    out.update(model=sc.spec.key, hardware=sc.hw.key, method=method, cost_model=sc.cost.name,
               engine_overhead=engine_label(sc.overheads), warnings=warnings,
               source="Monte Carlo over the latency model" + (" and a recorded trace" if tr else ""))
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    lo, hi = res.tpot_ci95
    typer.echo(f"{sc.spec.key} {method} on {sc.hw.key}, policy {res.policy}: {res.tokens} tokens in {res.steps} steps, "
               f"TPOT {res.tpot_ms:.3f} ms (95 % CI {lo:.3f}-{hi:.3f}), mean AL {res.mean_accept_length:.2f}, "
               f"depths used {res.depth_histogram} [simulated; step costs: {sc.cost.name}; engine overhead: "
               f"{engine_label(sc.overheads)}]")
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
