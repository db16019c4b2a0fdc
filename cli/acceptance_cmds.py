"""`wmtp logs`, `wmtp accept` and `wmtp calibrate-logs`: serving logs and acceptance data."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Optional

import typer

from wmtp.cli.common import (DEFAULT_SINK, DEFAULT_WINDOW, CtxOpt, HwOpt, JsonOpt, ModelOpt, ProfileOpt, SinkOpt,
                             WindowOpt, handles_errors)
from wmtp import defaults
from wmtp.errors import WmtpError


@handles_errors
def logs(
    files: Annotated[list[Path], typer.Argument(help="SGLang scheduler logs (.gz allowed).")],
    batch: Annotated[Optional[int], typer.Option("--batch", "-B", help="The requested batch size, if known.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """TPOT per run segment by the artifact's estimator (B_eff, steady lines, T_iter, mean AL)."""
    from wmtp.logs import ParseStats, stream
    from wmtp.logstats import estimate_segments

    out = []
    for f in files:
        stats = ParseStats()
        segs = estimate_segments(stream(f, stats), batch)
        if not segs or all(s.tpot_ms is None for s in segs):
            raise WmtpError(f"{f}: no usable decode line ({stats.lines} lines read, {stats.garbled} garbled, "
                            f"{stats.skipped} skipped)")
        out.append({"file": str(f), "lines": stats.lines, "decode_lines": stats.decode, "garbled": stats.garbled,
                    "skipped": stats.skipped, "segments": [asdict(s) for s in segs]})
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    con = Console()
    for f in out:
        t = Table(title=f"{f['file']}: {f['lines']} lines, {f['decode_lines']} decode, {f['garbled']} garbled, "
                        f"{f['skipped']} other", title_justify="left")
        for c in ("segment", "lines", "spec", "B_eff", "steady", "T_iter ms", "step ms", "mean AL", "TPOT ms",
                  "TPOT ms (old est.)"):
            t.add_column(c, justify="right")
        for s in f["segments"]:
            def fmt(x, p=3):
                return "-" if x is None else f"{x:.{p}f}"
            t.add_row(str(s["index"]), f"{s['first_line']}-{s['last_line']}", "yes" if s["speculative"] else "dense",
                      str(s["b_eff"]), str(s["n_steady"]), fmt(s["t_iter_ms"]), fmt(s["step_ms"]),
                      fmt(s["mean_accept_length"], 2),
                      fmt(s["tpot_ms"]), fmt(s["tpot_biased_ms"]))
        con.print(t)
    con.print("[dim]measured from the log (artifact estimator: median T_iter x B_eff / mean AL); the old estimator "
              "B / median(throughput) is biased by integer-snapped accept lengths[/dim]")


@handles_errors
def accept(
    files: Annotated[list[Path], typer.Argument(help="meta_info JSON/JSONL, histogram JSON/CSV, per-step JSONL, "
                                                     "vLLM or SGLang logs.")],
    depth: Annotated[Optional[int], typer.Option("--depth", "-d", help="Depth of the run (needed for SGLang logs).")] = None,
    compare: Annotated[bool, typer.Option("--compare", help="Two files: native then window; test each position.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Per-position acceptance alpha_j with 95 % Wilson intervals, AL, and AL at other depths."""
    from wmtp.acceptance import alpha_intervals
    from wmtp.acceptance_io import compare as cmp
    from wmtp.acceptance_io import profile_from_file

    profs = [profile_from_file(f, depth) for f in files]
    if compare and len(profs) != 2:
        raise WmtpError("--compare takes exactly two files: native, then window")
    result = []
    for prof, info in profs:
        d = prof.measured_depth
        iv = alpha_intervals(prof) if prof.counts else [(a, float("nan"), float("nan")) for a in prof.alphas]
        result.append({**info, "source": prof.source, "measured_depth": d, "accept_length": prof.accept_length(d),
                       "alphas": [{"position": j + 1, "alpha": a, "ci95": [lo, hi]} for j, (a, lo, hi) in enumerate(iv)],
                       "al_by_depth": {str(k): {"al": prof.accept_length(k), "extrapolated": prof.is_extrapolated(k)}
                                       for k in defaults.DEPTH_GRID}})
    comparison = cmp(profs[0][0], profs[1][0]) if compare else None
    if as_json:
        typer.echo(json.dumps({"files": result, "comparison": comparison}, indent=2, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    con = Console()
    for r in result:
        t = Table(title=f"{r['file']} ({r['kind']}): AL {r['accept_length']:.3f} at d={r['measured_depth']}",
                  title_justify="left")
        for c in ("j", "alpha_j", "95 % CI"):
            t.add_column(c, justify="right")
        for a in r["alphas"]:
            lo, hi = a["ci95"]
            t.add_row(str(a["position"]), f"{a['alpha']:.3f}", "-" if lo != lo else f"{lo:.3f}-{hi:.3f}")
        con.print(t)
        con.print("AL by depth: " + ", ".join(f"d={k}: {v['al']:.2f}{' (extrap.)' if v['extrapolated'] else ''}"
                                             for k, v in r["al_by_depth"].items()))
    if comparison:
        t = Table(title="native vs window, position by position", title_justify="left")
        for c in ("j", "native", "window", "z", "significant (5 %)"):
            t.add_column(c, justify="right")
        for row in comparison:
            t.add_row(str(row["position"]), f"{row['native']:.3f}", f"{row['window']:.3f}",
                      f"{row['z']:.2f}" if "z" in row else "-", str(row.get("significant", "n/a")))
        con.print(t)


@handles_errors
def calibrate_logs(
    runs: Annotated[list[str], typer.Argument(help="LOG:D pairs: a decode log and the depth d it ran at.")],
    model: ModelOpt = None, hw: HwOpt = "h200", ctx: CtxOpt = "1M",
    method: Annotated[str, typer.Option(help="native, window or dense (what the logged runs used).")] = "native",
    batch: Annotated[Optional[int], typer.Option("--batch", "-B", help="The requested batch size.")] = None,
    window: WindowOpt = DEFAULT_WINDOW, sink: SinkOpt = DEFAULT_SINK, profile: ProfileOpt = None,
    min_gamma: Annotated[Optional[int], typer.Option(help="Fit only gamma >= this (past a tiling cliff).")] = None,
    out: Annotated[Path, typer.Option("--out", help="Framework profile JSON to write.")] = Path("framework.json"),
) -> None:
    """Top-down calibration: fit T_iter(gamma) = gamma * t_fwd + c from logs at several d, and the
    framework overhead over the kernel model; `wmtp predict --framework` uses it."""
    from wmtp.calibrate.framework_fit import fit_from_logs
    from wmtp.cli.measure_cmds import framework_fit_summary
    from wmtp.hardware import get_hardware
    from wmtp.models import get_model
    from wmtp.profile import cost_model_for
    from wmtp.units import parse_tokens

    if not model:
        raise WmtpError("calibrate-logs needs --model")
    spec, gpu = get_model(model), get_hardware(hw)
    prof = fit_from_logs(runs, spec, gpu, cost_model_for(gpu, profile), parse_tokens(ctx), method, batch,
                         parse_tokens(window), sink, min_gamma, out)
    typer.echo(framework_fit_summary(prof, out))


def register(app: typer.Typer) -> None:
    app.command()(logs)
    app.command()(accept)
    app.command("calibrate-logs")(calibrate_logs)
