"""`wmtp predict`, `wmtp models`, `wmtp hardware`, `wmtp engines`: answers from the registries and the model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from wmtp.cli.common import (DEFAULT_DEPTH, DEFAULT_SINK, DEFAULT_TASK, DEFAULT_WINDOW, MAX_DEPTH, AccOpt, BatchOpt,
                             ConfigOpt, CtxOpt, DepthOpt, FrameworkOpt, HwOpt, JsonOpt, KvOpt, ModelOpt, ProfileOpt,
                             SinkOpt, SolOpt, TaskOpt, TpOpt, WdOpt, WindowOpt, WmtpError, echo_json, file_to_write,
                             handles_errors, int_option, parse_accept, parse_depth, refuse_overwriting_inputs,
                             resolve_model, warn)


@handles_errors
def predict(
    model: ModelOpt = None,
    config: ConfigOpt = None,
    hw: HwOpt = "h200",
    ctx: CtxOpt = "1M",
    depth: DepthOpt = str(DEFAULT_DEPTH),
    window: WindowOpt = DEFAULT_WINDOW,
    sink: SinkOpt = DEFAULT_SINK,
    batch: BatchOpt = 1,
    kv_dtype: KvOpt = None,
    weight_dtype: WdOpt = None,
    accept_length: AccOpt = None,
    profile: ProfileOpt = None,
    speed_of_light: SolOpt = False,
    tp: TpOpt = 1,
    tree_width: Annotated[int, int_option(
        "--tree-width", help="Tree speculation width k (ring n_sink + W + d*k).")] = 1,
    framework: FrameworkOpt = None,
    task: TaskOpt = DEFAULT_TASK,
    headroom: Annotated[bool, typer.Option(
        "--headroom", help="Per component: the engine's kernels (the shipped <gpu>-flashinfer profile, or --profile "
                           "when it was measured with an engine backend) against wmtp's own kernels and the "
                           "measured floor, on the same GPU.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Step cost, TPOT, memory and decisions for dense / native MTP / windowed MTP."""
    from wmtp.decisions import odd_input_warnings
    from wmtp.profile import cost_model_for
    from wmtp.hardware import get_hardware
    from wmtp.predict import predict as run_predict
    from wmtp.units import MAX_TOKENS, parse_tokens

    if batch < 1:
        raise WmtpError(f"--batch must be >= 1, got {batch}")
    if sink < 0:
        raise WmtpError(f"--sink must be >= 0, got {sink}")
    if tp < 1:
        raise WmtpError(f"--tp must be >= 1, got {tp}")
    if tree_width < 1:
        raise WmtpError(f"--tree-width must be >= 1, got {tree_width}")
    if tree_width > MAX_TOKENS:  # k branches of d tokens each: wider than any context is not a tree
        raise WmtpError(f"--tree-width {tree_width} is wider than the largest context wmtp models "
                        f"({MAX_TOKENS:,} tokens)")
    if headroom and speed_of_light:  # the headroom compares measured kernel profiles; --speed-of-light reads none
        raise WmtpError("--headroom compares measured kernel profiles and --speed-of-light ignores them: give one, "
                        "not both")
    d = parse_depth(depth)
    if d != "auto" and not 2 <= d <= MAX_DEPTH:
        raise WmtpError(f"--depth must lie in 2..{MAX_DEPTH} or be 'auto', got {d}")
    ctx_tokens, window_tokens = parse_tokens(ctx, "--ctx"), parse_tokens(window, "--window")
    spec = resolve_model(model, config, weight_dtype, kv_dtype, framework)
    gpu = get_hardware(hw)
    result = run_predict(
        spec, gpu, ctx_tokens, d, window_tokens, sink, batch,
        parse_accept(accept_length), cost=cost_model_for(gpu, profile, speed_of_light, framework), tp=tp,
        tree_width=tree_width, frameworks=framework, task=task,
    )
    odd = odd_input_warnings(ctx_tokens, window_tokens, sink, tree_width)  # already among result.warnings
    room = None
    if headroom:
        from wmtp.headroom import headroom_report

        depths = {m: result.methods[m].cost.depth for m in ("native", "window")}  # --depth auto: each its best
        als = {m: result.methods[m].accept_length for m in ("native", "window")}  # the draft extends AL tokens
        room = headroom_report(spec, gpu, profile, ctx_tokens, depths, result.window, sink, batch, tp, als)
    if as_json:
        echo_json({**result.to_json(), **({"headroom": room} if room else {})})
        for w in odd:
            warn(w)
        return
    from wmtp.cli.render import render_headroom, render_prediction

    render_prediction(result)
    if room:
        render_headroom(room)


@handles_errors
def models(as_json: JsonOpt = False) -> None:
    """The model registry."""
    from wmtp.cli.render import render_models

    render_models(as_json)


@handles_errors
def hardware(as_json: JsonOpt = False) -> None:
    """The hardware registry."""
    from wmtp.cli.render import render_hardware

    render_hardware(as_json)


@handles_errors
def engines(
    fit: Annotated[Optional[Path], typer.Option(
        "--fit", help="Fit a new engine preset to a points CSV (columns: model, method, ctx, d_lo, d_hi, quantity "
                      "step|slope, value_ms, source; see calibrate/engines/*.points.csv).")] = None,
    hw: Annotated[str, typer.Option(
        "--hw", help="With --fit: the GPU the step times were observed on (see `wmtp hardware`).")] = "b200",
    profile: Annotated[Optional[Path], typer.Option(
        "--profile", help="With --fit: the kernel profile the engine's terms are fitted over (default: the structure "
                          "file's kernel_profile where one is beside --fit, else the shipped one for --hw, else the "
                          "H200's scaled).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="With --fit: preset JSON to write (and a .md).",
                                                parser=file_to_write)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Serving-engine overhead presets for --framework, or fit one to observed step times (--fit)."""
    from wmtp.engine import load_preset, preset_names

    if fit is not None:
        from wmtp.calibrate.engine_fit import fit_file
        from wmtp.calibrate.engine_inputs import structure_path_for
        from wmtp.fileio import read_text

        read_text(fit, "engine points CSV", WmtpError)  # binary or unreadable: one error line
        # the default out, beside the points (as fit_file names it): checked like a given one (shipped points wrote
        # over the shipped preset)
        opt = "--out" if out is not None else "the default --out (beside --fit)"
        out = out if out is not None else fit.with_name(f"{fit.name.split('.')[0]}.json")
        refuse_overwriting_inputs([(opt, out), (f"{opt} (its .md)", out.with_suffix(".md"))],  # the structure too:
                                  [("--fit", fit), ("--profile", profile),  # it was replaced by the preset
                                   ("engine structure (beside --fit)", structure_path_for(fit))])

        preset = fit_file(fit, hw, out, None, profile)
        rows = [preset]
    else:
        stray = [o for o, given in (("--profile", profile is not None), ("--out", out is not None),
                                    ("--hw", hw != "b200")) if given]
        if stray:
            raise WmtpError(f"{' and '.join(stray)} {'works' if len(stray) == 1 else 'work'} only with --fit: "
                            "listing the presets fits nothing")
        rows = [load_preset(n) for n in preset_names()]
    summary = [{"name": p["name"], "hardware": p["hardware"], "cost_model": p["cost_model"],
                "kernel_profile": p.get("kernel_profile"), "memory": p.get("memory"),
                "models": sorted(p["per_model"]), "terms": p["terms"], "per_model": p["per_model"],
                "fit": p["fit"], "points": p.get("points", {}).get("file"),
                "source": f"engine preset {p['name']} (its terms fitted to the points of "
                          f"{p.get('points', {}).get('file')}, the named kernels' as the preset names them)"}
               for p in rows]
    if as_json:
        echo_json(summary)
        return
    from wmtp.calibrate.engine_fit import summary_line

    for p, full in zip(summary, rows):
        kernels = f"the measured kernels {p['kernel_profile']}" if p["kernel_profile"] else p["cost_model"]
        typer.echo(f"engine preset {p['name']} ({p['hardware']}, over {kernels}, points {p['points']}): "
                   f"{summary_line(full)}")
        typer.echo("  shared: " + ", ".join(f"{k} {v:.3g}" for k, v in p["terms"].items()))
        for m, v in p["per_model"].items():
            typer.echo(f"  {m}: " + ", ".join(f"{k} {x:.3g}" for k, x in v.items()))


def register(app: typer.Typer) -> None:
    for fn in (predict, models, hardware, engines):
        app.command()(fn)
