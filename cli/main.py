"""The `wmtp` command line: thin typer commands that call one library function each.

A `WmtpError` becomes one `error: ...` line on stderr and exit code 1; any other exception is a bug
and keeps its traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from wmtp.errors import WmtpError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Windowed-MTP cost model: predict, measure and calibrate speculative decoding at long context.")

ModelOpt = Annotated[Optional[str], typer.Option("--model", "-m", help="Registry key (see `wmtp models`).")]
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help="A Hugging Face config.json instead of --model.")]
HwOpt = Annotated[str, typer.Option("--hw", help="Hardware key (see `wmtp hardware`).")]
CtxOpt = Annotated[str, typer.Option("--ctx", help="Context tokens: 1048576, 256K, 1M (=1048576), 1.04M.")]
DepthOpt = Annotated[str, typer.Option("--depth", "-d", help="Draft tokens per step d = gamma + 1 (2..64), or 'auto'.")]
WindowOpt = Annotated[str, typer.Option("--window", "-W", help="Draft window W (tokens).")]
SinkOpt = Annotated[int, typer.Option("--sink", help="Attention-sink tokens n_sink.")]
BatchOpt = Annotated[int, typer.Option("--batch", "-B", help="Concurrent requests B.")]
KvOpt = Annotated[Optional[str], typer.Option("--kv-dtype", help="KV cache dtype: bf16 or fp8 (default: the model row's).")]
WdOpt = Annotated[Optional[str], typer.Option("--weight-dtype", help="Weight dtype: bf16, fp8 or nvfp4 (default: the model row's).")]
AccOpt = Annotated[Optional[str], typer.Option(
    "--accept-length", help="Measured AL at --depth: one value for both methods, or NATIVE:WINDOW.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of tables.")]
ProfileOpt = Annotated[Optional[Path], typer.Option(
    "--profile", help="Measured latency profile (default: the shipped one for --hw, else the H200's scaled).")]
SolOpt = Annotated[bool, typer.Option("--speed-of-light", help="Ignore measured profiles: datasheet speed of light.")]
FrameworkOpt = Annotated[Optional[list[str]], typer.Option(
    "--framework", help="Serving-engine overhead on top of the kernels: an engine preset (`wmtp engines`, e.g. "
                        "sglang-b200-paper) or a framework profile JSON from `wmtp calibrate-logs` (one per method); "
                        "repeatable. Default: kernels only.")]
TaskOpt = Annotated[str, typer.Option("--task", help="Which paper acceptance preset (e.g. cwe, vt, niah_multivalue).")]


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(1)


def parse_accept(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    parts = text.split(":")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise WmtpError(f"--accept-length takes a number or NATIVE:WINDOW, got {text!r}") from None
    if len(values) == 1:
        return values[0], values[0]
    if len(values) == 2:
        return values[0], values[1]
    raise WmtpError(f"--accept-length takes a number or NATIVE:WINDOW, got {text!r}")


def parse_depth(text: str) -> int | str:
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise WmtpError(f"--depth takes an integer d >= 2 or 'auto', got {text!r}") from None


def resolve_model(model: str | None, config: Path | None, weight_dtype: str | None, kv_dtype: str | None):
    from wmtp.hf_config import load_config
    from wmtp.models import get_model

    if (model is None) == (config is None):
        raise WmtpError("give exactly one of --model KEY or --config path/to/config.json")
    spec = get_model(model) if model else load_config(config)
    return spec.with_dtypes(weight_dtype=weight_dtype, kv_dtype=kv_dtype)


@app.command()
def predict(
    model: ModelOpt = None,
    config: ConfigOpt = None,
    hw: HwOpt = "h200",
    ctx: CtxOpt = "1M",
    depth: DepthOpt = "7",
    window: WindowOpt = "4032",
    sink: SinkOpt = 64,
    batch: BatchOpt = 1,
    kv_dtype: KvOpt = None,
    weight_dtype: WdOpt = None,
    accept_length: AccOpt = None,
    profile: ProfileOpt = None,
    speed_of_light: SolOpt = False,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel GPUs (heads, experts and vocabulary split).")] = 1,
    tree_width: Annotated[int, typer.Option("--tree-width", help="Tree speculation width k (ring n_sink + W + d*k).")] = 1,
    framework: FrameworkOpt = None,
    task: TaskOpt = "niah_multiquery_enum",
    as_json: JsonOpt = False,
) -> None:
    """Step cost, TPOT, memory and decisions for dense / native MTP / windowed MTP."""
    from wmtp.calibrate.profile import cost_model_for
    from wmtp.hardware import get_hardware
    from wmtp.predict import predict as run_predict
    from wmtp.units import parse_tokens

    try:
        spec = resolve_model(model, config, weight_dtype, kv_dtype)
        if batch < 1:
            raise WmtpError(f"--batch must be >= 1, got {batch}")
        if sink < 0:
            raise WmtpError(f"--sink must be >= 0, got {sink}")
        gpu = get_hardware(hw)
        result = run_predict(
            spec, gpu, parse_tokens(ctx), parse_depth(depth), parse_tokens(window), sink, batch,
            parse_accept(accept_length), cost=cost_model_for(gpu, profile, speed_of_light), tp=tp,
            tree_width=tree_width, frameworks=framework, task=task,
        )
    except WmtpError as e:
        _fail(str(e))
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
        return
    from wmtp.cli.render import render_prediction

    render_prediction(result)


@app.command()
def models(as_json: JsonOpt = False) -> None:
    """The model registry."""
    from wmtp.cli.render import render_models

    render_models(as_json)


@app.command()
def hardware(as_json: JsonOpt = False) -> None:
    """The hardware registry."""
    from wmtp.cli.render import render_hardware

    render_hardware(as_json)


@app.command()
def engines(
    fit: Annotated[Optional[Path], typer.Option(
        "--fit", help="Fit a new engine preset to a points CSV (columns: model, method, ctx, d_lo, d_hi, quantity "
                      "step|slope, value_ms, source; see calibrate/engines/*.points.csv).")] = None,
    hw: HwOpt = "b200",
    profile: ProfileOpt = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="With --fit: preset JSON to write (and a .md).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Serving-engine overhead presets for --framework, or fit one to observed step times (--fit)."""
    from wmtp.engine import load_preset, preset_names

    try:
        if fit is not None:
            from wmtp.calibrate.engine_fit import fit_file

            preset = fit_file(fit, hw, out, None, profile)
            rows = [preset]
        else:
            rows = [load_preset(n) for n in preset_names()]
    except WmtpError as e:
        _fail(str(e))
    summary = [{"name": p["name"], "hardware": p["hardware"], "cost_model": p["cost_model"],
                "models": sorted(p["per_model"]), "terms": p["terms"], "per_model": p["per_model"],
                "fit": p["fit"], "points": p.get("points", {}).get("file")} for p in rows]
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    for p in summary:
        f = p["fit"]
        typer.echo(f"{p['name']}: fitted on {p['hardware']} over {p['cost_model']} to {f['points']} points "
                   f"({p['points']}) for {', '.join(p['models'])}; |error| median {100 * f['median_abs_rel_error']:.1f} %"
                   f", leave-one-out median {100 * f['loo_median_abs_rel_error']:.1f} % / max "
                   f"{100 * f['loo_max_abs_rel_error']:.1f} %")
        typer.echo("  shared: " + ", ".join(f"{k} {v:.3g}" for k, v in p["terms"].items()))
        for m, v in p["per_model"].items():
            typer.echo(f"  {m}: " + ", ".join(f"{k} {x:.3g}" for k, x in v.items()))


measure_app = typer.Typer(no_args_is_help=True, help="Run and time the project's kernels on this GPU.")
app.add_typer(measure_app, name="measure")


@measure_app.command("kernels")
def measure_kernels(
    model: Annotated[str, typer.Option("--model", "-m", help="Comma-separated registry keys.")] = "q35",
    ctx: Annotated[str, typer.Option("--ctx", help="Comma-separated contexts.")] = "64K,256K,1M",
    batch: Annotated[str, typer.Option("--batch", "-B", help="Comma-separated batch sizes.")] = "1,4,16",
    out: Annotated[Path, typer.Option("--out", help="Output folder (kernels.csv, kernels.meta.json, summary.md).")] = Path("measure/results/run"),
    variants: Annotated[bool, typer.Option(help="Also time tuning variants at the largest ctx, B=1.")] = True,
    components: Annotated[bool, typer.Option(help="Also time non-attention components.")] = True,
    sdpa: Annotated[bool, typer.Option(help="Also time torch SDPA on contiguous K/V.")] = True,
    resume: Annotated[bool, typer.Option(help="Append to an existing kernels.csv.")] = False,
) -> None:
    """Time the KV-index build, paged decode / verify / extend attention and components (GPU only)."""
    from wmtp.models import get_model
    from wmtp.units import parse_int_list

    try:
        specs = [get_model(k) for k in model.split(",") if k.strip()]
        ctxs = parse_int_list(ctx, what="--ctx")
        batches = [int(b) for b in batch.split(",") if b.strip()]
        if not batches or min(batches) < 1:
            raise WmtpError("--batch takes positive integers, e.g. 1,4,16")
        from wmtp.measure.run import run_kernels

        path = run_kernels(specs, ctxs, batches, out, variants=variants, components=components, sdpa=sdpa,
                           resume=resume)
    except ValueError as e:
        _fail(f"--batch: {e}")
    except WmtpError as e:
        _fail(str(e))
    except KeyboardInterrupt:
        _fail(f"interrupted: the samples taken so far are in {out / 'kernels.csv'}")
    typer.echo(f"wrote {path} and {path.parent / 'summary.md'}")


@app.command()
def calibrate(
    models: Annotated[str, typer.Option("--models", help="Comma-separated registry keys to sweep.")] = "q35,q122,nem",
    quick: Annotated[bool, typer.Option("--quick", help="Corners of the grid only (about 2 minutes on an H200).")] = False,
    out: Annotated[Path, typer.Option("--out", help="Output folder: raw.csv, raw.meta.json, profile.json, profile.md.")] = Path("calibration"),
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted sweep in --out.")] = False,
    from_raw: Annotated[Optional[Path], typer.Option("--from-raw", help="Refit an existing raw.csv (no GPU needed).")] = None,
    add_tp: Annotated[Optional[Path], typer.Option(
        "--add-tp", help="Merge the all-reduce fit of a tp_bench run (its --out folder) into --out/profile.json.")] = None,
    from_logs: Annotated[Optional[list[str]], typer.Option(
        "--from-logs", help="LOG:D decode logs of runs at depth D (repeatable): top-down framework profile "
                            "(--out/framework.json) for the one model in --models; see `wmtp calibrate-logs`.")] = None,
    hw: HwOpt = "h200",
    ctx: CtxOpt = "1M",
    method: Annotated[str, typer.Option(help="With --from-logs: native, window or dense.")] = "native",
    min_gamma: Annotated[Optional[int], typer.Option(help="With --from-logs: fit only gamma >= this.")] = None,
) -> None:
    """Sweep the latency components on this GPU and fit a profile (or refit one with --from-raw, or fit a
    framework profile from serving logs with --from-logs)."""
    from wmtp.models import get_model

    if from_logs:
        from wmtp.cli.acceptance_cmds import calibrate_logs

        keys = [k for k in models.split(",") if k.strip()]
        if len(keys) != 1:
            _fail("--from-logs calibrates one model: give --models KEY")
        calibrate_logs(from_logs, keys[0], hw, ctx, method, None, "4032", 64, None, min_gamma, out / "framework.json")
        return

    if add_tp is not None:
        from wmtp.calibrate.fitting import merge_tp

        try:
            added = merge_tp(out / "profile.json", add_tp)
        except WmtpError as e:
            _fail(str(e))
        typer.echo(f"added {', '.join(added)} to {out / 'profile.json'}")
        return
    try:
        specs = [get_model(k) for k in models.split(",") if k.strip()]
        if from_raw is not None:
            from wmtp.calibrate.fitting import fit_raw_to_profile
            from wmtp.fileio import read_json

            meta_path = from_raw.with_name(from_raw.stem + ".meta.json")
            meta = read_json(meta_path, "raw-data metadata", WmtpError) if meta_path.exists() else {}
            path = fit_raw_to_profile(from_raw, out / "profile.json", meta, [s.key for s in specs])
        else:
            from wmtp.measure.run import run_calibrate

            path = run_calibrate(specs, out, quick=quick, resume=resume)
    except WmtpError as e:
        _fail(str(e))
    except KeyboardInterrupt:
        _fail(f"interrupted: the samples taken so far are in {out / 'raw.csv'}; `wmtp calibrate --resume` continues")
    typer.echo(f"wrote {path} and {path.with_suffix('.md')}")


@app.command()
def validate(
    profile: Annotated[Path, typer.Option("--profile", help="Profile to validate.")] = Path("calibration/profile.json"),
    models: Annotated[str, typer.Option("--models", help="Comma-separated registry keys.")] = "q35,q122,nem",
    ctx: Annotated[str, typer.Option("--ctx", help="Comma-separated contexts.")] = "64K,256K,1M",
    depths: Annotated[str, typer.Option("--depths", help="Comma-separated d values.")] = "3,5,7",
    out: Annotated[Path, typer.Option("--out", help="Output folder: validation.csv, validation.md.")] = Path("calibration"),
) -> None:
    """Time whole composed speculative iterations on this GPU and compare them with the profile (GPU only)."""
    from wmtp.models import get_model
    from wmtp.units import parse_int_list

    try:
        from wmtp.measure import require_gpu

        require_gpu()
        from wmtp.calibrate.profile import load_profile

        load_profile(profile)
        specs = [get_model(k) for k in models.split(",") if k.strip()]
        ctxs = parse_int_list(ctx, what="--ctx")
        ds = [int(x) for x in depths.split(",") if x.strip()]
        from wmtp.measure.run import _progress
        from wmtp.measure.validate import run_validate, validation_summary
        from wmtp.fileio import atomic_write_text

        with _progress() as bar:
            path = run_validate(profile, specs, out, tuple(ctxs), tuple(ds), progress=bar)
        atomic_write_text(out / "validation.md", validation_summary(path))
    except ValueError as e:
        _fail(f"--depths: {e}")
    except WmtpError as e:
        _fail(str(e))
    typer.echo(f"wrote {path} and {out / 'validation.md'}")


def main() -> None:  # console-script entry point
    app()


from wmtp.cli import acceptance_cmds, analysis, report  # noqa: E402,F401  (register their commands on `app`)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
