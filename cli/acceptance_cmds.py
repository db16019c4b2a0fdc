"""`wmtp logs`, `wmtp accept` and `wmtp calibrate-logs`: serving logs and acceptance data."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from wmtp.cli.common import (DEFAULT_SINK, DEFAULT_WINDOW, CtxOpt, HwOpt, JsonOpt, ModelOpt, ProfileOpt, SinkOpt,
                             WindowOpt, check_count, echo_json, file_to_write, handles_errors, int_option,
                             refuse_overwriting_inputs, stdin_paths)
from wmtp import defaults
from wmtp.errors import WmtpError


def _f(x, p: int = 2) -> str:
    return "-" if x is None or x != x else f"{x:.{p}f}"  # x != x: NaN, a position the profile does not reach


def _render_logs(out: list[dict]) -> None:
    from rich.console import Console

    from wmtp.cli.render import add_columns, compact_table, shown

    con = Console(highlight=False)
    for f in out:
        con.print(f"[bold]{shown(f['file'])}[/bold]: {f['lines']} lines ({f['records']['sglang_decode']} SGLang decode, "
                  f"{f['records']['vllm_spec']} vLLM spec, {f['records']['other']} other records, "
                  f"{f['garbled']} garbled, {f['skipped']} skipped)", soft_wrap=True)
        t, a = f["tpot"], f["al"]
        tpot_txt = f"  [{t['estimator']}; {t['source']}; confidence {t['confidence']}]" if t else "  (none in this file)"
        al_txt = f"  [{a['estimator']}; {a.get('source', '')}]" if a else "  (no acceptance data)"
        con.print(f"  TPOT: {_f(t and t['value_ms'])} ms" + shown(tpot_txt), soft_wrap=True)
        con.print(f"  AL:   {_f(a and a.get('value'), 3)}" + shown(al_txt), soft_wrap=True)
        if f["runs"]:
            # compact: at 80 columns a boxed table cut 'art. ms' to '49.…'
            tab = compact_table("runs (measured: each from the SGLang decode lines in 'lines')")
            add_columns(tab, *[(c, True) for c in ("run", "lines", "mode", "DP", "used", "TPOT ms", "conf", "AL",
                                                   "drop", "stall", "art. ms")])
            for r in f["runs"]:
                tab.add_row(str(r["index"]), f"{r['first_line']}-{r['last_line']}", "spec" if r["speculative"] else "dense",
                            str(len(r["ranks"])), str(r["tpot_samples"]), _f(r["tpot_line_ms"]), r["confidence"],
                            _f(r["accept_length"]), str(r["dropped_after_prefill"]), str(r["stalls"]), _f(r["tpot_ms"]))
            con.print(tab)
        by_batch = [(f"run {r['index']}", b) for r in f["runs"] for b in r["tpot_by_batch"]]
        if f["vllm_windows"] and f["vllm_windows"].get("by_batch"):
            by_batch += [("vLLM", b) for b in f["vllm_windows"]["by_batch"]]
        if by_batch:
            tab = compact_table("per-request TPOT against batch size (measured: the run in 'from')")
            add_columns(tab, *[(c, True) for c in ("from", "batch", "lines", "median ms", "min ms", "max ms",
                                                   "confidence")])
            for src, b in by_batch:
                tab.add_row(src, str(b["batch"]), str(b["lines"]), _f(b["tpot_ms"]), _f(b["min_ms"]), _f(b["max_ms"]),
                            b["confidence"])
            con.print(tab)
        for n in f["notes"]:
            con.print(f"  note: {shown(n)}", soft_wrap=True)


@handles_errors
def logs(
    files: Annotated[list[Path], typer.Argument(help="Serving logs or summaries (.gz allowed; - reads standard input): "
                                                     "SGLang/vLLM/llama.cpp logs, bench summaries, offline output, meta_info.")],
    batch: Annotated[Optional[int], int_option("--batch", "-B", help="The requested batch size, if known.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Per-request TPOT (and AL) from what a serving engine wrote: per line #running-req / gen throughput,
    a TPOT-vs-batch table, runs, stalls, retractions; each result names its estimator and source lines."""
    from wmtp.latency import MAX_BATCH
    from wmtp.log_analysis import analyse

    check_count(batch, "--batch", 1, MAX_BATCH)
    files = stdin_paths(files)
    out = []
    for f in files:
        rep = analyse(f, batch)
        if rep["tpot"] is None and (rep["al"] is None or rep["al"].get("value") is None):
            why = f" ({rep['al']['estimator']})" if rep["al"] else f" ({rep['notes'][0]})" if rep["notes"] else ""
            raise WmtpError(f"{f}: no usable decode line, summary or acceptance data{why} ({rep['lines']} lines read, "
                            f"{rep['garbled']} garbled, {rep['skipped']} skipped)")
        out.append(rep)
    if as_json:
        echo_json(out)
        return
    _render_logs(out)


@handles_errors
def accept(
    files: Annotated[list[Path], typer.Argument(help="meta_info (JSON, JSONL, dict repr), histogram JSON/CSV, "
                                                     "per-step JSONL, vLLM/SGLang/llama.cpp logs, bench or offline "
                                                     "summaries (- reads standard input).")],
    depth: Annotated[Optional[int], int_option("--depth", "-d", help="Depth of the run (a mean AL alone becomes "
                                                                       "a geometric profile at this depth).")] = None,
    compare: Annotated[bool, typer.Option("--compare", help="Two files: native then window; test each position.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Acceptance length, and per-position acceptance alpha_j with 95 % Wilson intervals and AL at other depths
    where the file gives a per-position profile."""
    from wmtp.acceptance import MAX_DEPTH, alpha_intervals
    from wmtp.acceptance_io import compare as cmp
    from wmtp.acceptance_io import read_acceptance

    check_count(depth, "--depth", 2, MAX_DEPTH)
    if compare and len(files) != 2:
        raise WmtpError("--compare takes exactly two files: native, then window")
    files = stdin_paths(files)
    profs = [read_acceptance(f, depth) for f in files]
    _refuse_unread_depth(files, profs, depth)
    if compare and any(p is None for p, _ in profs):
        raise WmtpError("--compare needs per-position profiles; give --depth for files with a mean AL only")
    result = []
    for prof, info in profs:
        r = {**info, "source": prof.source if prof else info.get("kind"), "measured_depth": None, "alphas": [],
             "al_by_depth": {}}
        if prof is not None:
            iv = alpha_intervals(prof) if prof.counts else [(a, float("nan"), float("nan")) for a in prof.alphas]
            r.update(measured_depth=prof.measured_depth, profile_source=_profile_source(prof, info),
                     alphas=[{"position": j + 1, "alpha": a if a == a else None,  # NaN: a position no step reached
                              "ci95": [lo, hi] if lo == lo else None}  # NaN: no counts
                             for j, (a, lo, hi) in enumerate(iv)],
                     al_by_depth={str(k): {"al": prof.accept_length(k), "extrapolated": prof.is_extrapolated(k)}
                                  for k in defaults.DEPTH_GRID})
        result.append(r)
    comparison = cmp(profs[0][0], profs[1][0]) if compare else None
    compared = (f"native {result[0]['profile_source']}, window {result[1]['profile_source']}; z: two-proportion "
                "z-test at 5 %") if compare else None
    if as_json:
        for row in comparison or []:  # a position one profile does not reach: no value (NaN is not JSON)
            row.update({m: None for m in ("native", "window") if row[m] != row[m]})
        echo_json({"files": result, "comparison": comparison,
                   **({"comparison_source": compared} if compare else {})}, default=str)
        return
    _render_accept(result, comparison, compared)


def _render_accept(result: list[dict], comparison: list[dict] | None, compared: str | None) -> None:
    """`wmtp accept`'s text: per file its AL, the per-position profile with its origin, AL by depth; the
    comparison."""
    from rich.console import Console
    from rich.table import Table

    from wmtp.cli.render import shown

    con = Console(highlight=False)
    for r in result:
        where = f"lines {r['lines'][0]}-{r['lines'][1]}" if r.get("lines") else "whole file"
        con.print(f"[bold]{shown(r['file'])}[/bold] " + shown(
            f"({r['kind']}): AL {r['accept_length']:.3f}"
            f"{'' if r['measured_depth'] is None else ' at d=' + str(r['measured_depth'])} "
            f"[{r.get('estimator', '')}; {where}]"), soft_wrap=True)
        if r.get("note"):
            con.print(f"  note: {shown(r['note'])}", soft_wrap=True)
        if not r["alphas"]:
            continue
        con.print(f"per-position acceptance: {r['profile_source']}", soft_wrap=True)  # a title would wrap
        t = Table(title=f"alpha_j ({_tag_words(r['profile_source'])})", title_justify="left")
        for c in ("j", "alpha_j", "95 % CI"):
            t.add_column(c, justify="right", overflow="fold")  # folded, never cut to '…'
        for a in r["alphas"]:
            ci = a["ci95"]
            alpha = "-" if a["alpha"] is None else f"{a['alpha']:.3f}"
            t.add_row(str(a["position"]), alpha, "-" if ci is None else f"{ci[0]:.3f}-{ci[1]:.3f}")
        con.print(t)
        con.print(f"AL by depth ({_tag_words(r['profile_source'])} profile; extrap. = beyond d={r['measured_depth']}): "
                  + ", ".join(f"d={k}: {v['al']:.2f}{' (extrap.)' if v['extrapolated'] else ''}"
                              for k, v in r["al_by_depth"].items()), soft_wrap=True)
    if comparison:
        con.print(f"native vs window, position by position: {compared}", soft_wrap=True)
        t = Table(title=f"({' / '.join(_tag_words(r['profile_source']) for r in result)})", title_justify="left")
        for c in ("j", "native", "window", "z", "significant (5 %)"):
            t.add_column(c, justify="right", overflow="fold")  # folded, never cut to '…'
        for row in comparison:
            t.add_row(str(row["position"]), _f(row["native"], 3), _f(row["window"], 3),
                      f"{row['z']:.2f}" if "z" in row else "-", str(row.get("significant", "n/a")))
        con.print(t)


def _profile_source(prof, info: dict) -> str:
    """Where a file's per-position profile (its alphas and the AL at other depths) comes from: its origin, then
    what it is."""
    if prof.counts:
        return "measured (the file's per-position counts; 95 % Wilson intervals)"
    if str(info.get("note", "")).startswith("a mean AL only"):
        return f"analytical (a geometric profile: one alpha from the mean AL at d={prof.measured_depth})"
    return "measured (the per-position rates the file prints; no counts, no intervals)"


def _tag_words(profile_source: str) -> str:
    """The origin word of `_profile_source` ('measured', 'analytical')."""
    return profile_source.split(" (", 1)[0]


def _refuse_unread_depth(files, profs, depth: int | None) -> None:
    """--depth that no file read (each gives its own: histogram bins, per-position rates) and one contradicts: it
    was ignored, and the AL at other depths extrapolated from the file's own."""
    own = [(f, p.measured_depth) for f, (p, info) in zip(files, profs)
           if p is not None and not str(info.get("note", "")).startswith("a mean AL only")]
    if depth is not None and len(own) == len(files) and any(d != depth for _, d in own):
        f, d = next((f, d) for f, d in own if d != depth)
        raise WmtpError(f"{f}: the file gives its own depth, d = {d} (per-position data up to {d - 1} accepted), "
                        f"not --depth {depth}; leave --depth out (it is for a file with a mean AL only), or pad a "
                        "histogram with zero bins if the run drafted deeper")


@handles_errors
def calibrate_logs(
    runs: Annotated[list[str], typer.Argument(help="LOG:D pairs: a decode log and the depth d it ran at.")],
    model: ModelOpt = None, hw: HwOpt = "h200", ctx: CtxOpt = "1M",
    method: Annotated[str, typer.Option(help="native, window or dense (what the logged runs used).")] = "native",
    batch: Annotated[Optional[int], int_option("--batch", "-B", help="The requested batch size.")] = None,
    window: WindowOpt = DEFAULT_WINDOW, sink: SinkOpt = DEFAULT_SINK, profile: ProfileOpt = None,
    min_gamma: Annotated[Optional[int], int_option(help="Fit only gamma >= this (past a tiling cliff).")] = None,
    out: Annotated[Path, typer.Option("--out", help="Framework profile JSON to write.", parser=file_to_write)] = Path(
        "framework.json"),
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
    for opt, given in (("--window", window != DEFAULT_WINDOW), ("--sink", sink != DEFAULT_SINK)):
        if given and method in ("native", "dense"):  # the fit was the same; only the profile's label changed
            raise WmtpError(f"{opt} sizes the windowed draft, which --method {method} runs do not have; leave it out")
    refuse_overwriting_inputs([("--out", out)], [("--profile", profile)] + [("LOG:D", r.rpartition(":")[0] or r)
                                                                             for r in runs])
    spec, gpu = get_model(model), get_hardware(hw)
    prof = fit_from_logs(runs, spec, gpu, cost_model_for(gpu, profile), parse_tokens(ctx, "--ctx"), method, batch,
                         parse_tokens(window, "--window"), sink, min_gamma, out)
    typer.echo(framework_fit_summary(prof, out))


def register(app: typer.Typer) -> None:
    app.command()(logs)
    app.command()(accept)
    app.command("calibrate-logs")(calibrate_logs)
