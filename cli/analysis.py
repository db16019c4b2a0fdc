"""`wmtp sweep` and `wmtp simulate`: thin commands over `wmtp.decisions` and `wmtp.simulate`."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from wmtp.cli.common import (DEFAULT_DEPTH, DEFAULT_SINK, DEFAULT_TASK, DEFAULT_WINDOW, AccOpt, BatchOpt, ConfigOpt, CsvOpt, CtxOpt,
                             FrameworkOpt, HwOpt, JsonOpt, KvOpt, ModelOpt, ProfileOpt, SinkOpt, SolOpt, TaskOpt, TpOpt,
                             WdOpt, WindowOpt, fail, handles_errors, parse_accept, resolve_model)
from wmtp.engine import label as engine_label
from wmtp.errors import WmtpError



def scenario(opts: dict, depth: int):
    """(Scenario, warnings) from the options every analysis command shares (`opts`: their values by name)."""
    from wmtp.decisions import Scenario
    from wmtp.engine import resolve as resolve_engine
    from wmtp.hardware import get_hardware
    from wmtp.profile import cost_model_for
    from wmtp.units import parse_tokens

    spec = resolve_model(opts["model"], opts["config"], opts["weight_dtype"], opts["kv_dtype"])
    gpu = get_hardware(opts["hw"])
    if opts["batch"] < 1 or opts["sink"] < 0:
        raise WmtpError("--batch must be >= 1 and --sink >= 0")
    if depth < 2:
        raise WmtpError("--depth must be >= 2")
    overheads, warnings = resolve_engine(spec.key, gpu.key, opts["framework"])
    return Scenario(spec, gpu, cost_model_for(gpu, opts["profile"], opts["speed_of_light"]), parse_tokens(opts["ctx"]),
                    depth, parse_tokens(opts["window"]), opts["sink"], opts["batch"], opts["tp"],
                    overheads or None), warnings


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


@handles_errors
def sweep(
    what: Annotated[str, typer.Argument(help="ctx | depth | window | batch")],
    model: ModelOpt = None, config: ConfigOpt = None, hw: HwOpt = "h200", ctx: CtxOpt = "1M",
    depth: Annotated[int, typer.Option("--depth", "-d", help="Draft tokens per step d.")] = 7,
    window: WindowOpt = DEFAULT_WINDOW, sink: SinkOpt = DEFAULT_SINK, batch: BatchOpt = 1, kv_dtype: KvOpt = None,
    weight_dtype: WdOpt = None, accept_length: AccOpt = None, profile: ProfileOpt = None,
    speed_of_light: SolOpt = False, tp: TpOpt = 1, framework: FrameworkOpt = None,
    task: TaskOpt = DEFAULT_TASK,
    threshold: Annotated[float, typer.Option(help="ctx sweep: the break-even context is where the window is this much faster.")] = 0.05,
    al_window: Annotated[Optional[str], typer.Option(
        "--al-window", help="window sweep: measured (W, AL) points at --depth as W:AL,... (AL(W) model; native AL at W=S).")] = None,
    as_json: JsonOpt = False, csv_out: CsvOpt = None,
) -> None:
    """Decision curves: TPOT against context, depth, window or batch, with the break-even points."""
    from wmtp.acceptance import choose_acceptance, window_model
    from wmtp.decisions import sweep as run_sweep

    opts = dict(model=model, config=config, hw=hw, ctx=ctx, window=window, sink=sink, batch=batch, kv_dtype=kv_dtype,
                weight_dtype=weight_dtype, profile=profile, speed_of_light=speed_of_light, tp=tp, framework=framework)
    sc, warnings = scenario(opts, depth)
    acc = choose_acceptance(sc.spec.key, depth, parse_accept(accept_length), task)
    extra = {"model": sc.spec.key, "hardware": sc.hw.key, "cost_model": sc.cost.name,
             "engine_overhead": engine_label(sc.overheads),
             "acceptance": {"native": acc.native.tag(depth), "window": acc.window.tag(depth)}}
    warnings = ([acc.warning] if acc.warning else []) + warnings
    if warnings:
        extra["warning"] = "; ".join(warnings)
    al_model = window_model(sc.spec.key, depth, acc, accept_length is not None, task, al_window) if what == "window" else None
    rows, found = run_sweep(what, sc, acc, threshold=threshold, al_model=al_model)
    extra.update(found)
    _emit(rows, extra, as_json, csv_out, f"wmtp sweep {what}: {sc.spec.key} on {sc.hw.key}, ctx {sc.ctx}")


@handles_errors
def simulate(
    model: ModelOpt = None, config: ConfigOpt = None, hw: HwOpt = "h200", ctx: CtxOpt = "1M",
    depth: Annotated[str, typer.Option("--depth", "-d", help="A depth d, or 'adaptive'.")] = "7",
    method: Annotated[str, typer.Option(help="native or window")] = "window",
    window: WindowOpt = DEFAULT_WINDOW, sink: SinkOpt = DEFAULT_SINK, kv_dtype: KvOpt = None, weight_dtype: WdOpt = None,
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
    from wmtp.simulate import parse_phases, read_trace, step_time_fn
    from wmtp.simulate import simulate as run

    if method not in ("native", "window"):
        raise WmtpError("--method is native or window")
    policy = "adaptive" if depth == "adaptive" else int(depth) if depth.isdigit() else None
    if policy is None:
        raise WmtpError(f"--depth takes an integer or 'adaptive', got {depth!r}")
    opts = dict(model=model, config=config, hw=hw, ctx=ctx, window=window, sink=sink, batch=1, kv_dtype=kv_dtype,
                weight_dtype=weight_dtype, profile=profile, speed_of_light=speed_of_light, tp=tp, framework=framework)
    sc, warnings = scenario(opts, DEFAULT_DEPTH)
    if phases:
        ph = parse_phases(phases)
    else:
        prof = getattr(choose_acceptance(sc.spec.key, DEFAULT_DEPTH, None), method)
        ph = [(tokens, list(prof.alphas_at(16)))]
    tr = read_trace(trace) if trace is not None else None
    res = run(step_time_fn(sc, method), ph, tokens, policy, seed, tr)
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


def register(app: typer.Typer) -> None:
    app.command()(sweep)
    app.command()(simulate)
