"""`wmtp measure kernels`, `wmtp calibrate` and `wmtp validate`: the GPU commands, and refits on the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from wmtp import defaults
from wmtp.cli.common import (check_count, comma_list, fail, handles_errors, int_option,
                             refuse_overwriting_inputs, refuse_shipped_folder)
from wmtp.errors import WmtpError
from wmtp.fileio import check_output_folder
from wmtp.units import printable

DEFAULT_HW = "h200"  # the GPU of logs or of a sidecar-less raw sweep when --hw is not given
CalHwOpt = Annotated[Optional[str], typer.Option("--hw", help="Hardware key (see `wmtp hardware`) of logs, or of a "
                                                 "raw sweep without a provenance sidecar (default h200).")]

measure_app = typer.Typer(no_args_is_help=True, help="Run and time the project's kernels on this GPU.")
BackendOpt = Annotated[str, typer.Option(
    "--backend", help="Attention kernels to measure: wmtp (the project's own), flashinfer (as SGLang plans it; "
                      "pip install flashinfer-python).")]

# measured on the lent H200 (2026-12-02): --quick 56 s, the full sweep 85 s once Triton's kernels were compiled
PartsOpt = Annotated[Optional[str], typer.Option(
    "--parts", help="Re-measure only these parts of the sweep (comma-separated: attention, components, loop), e.g. "
                    "after a kernel change; needs --base-raw for the rest. kv-fp8 (never in the default sweep): "
                    "decode and verify over an fp8 KV cache, fitted as decode_attn@fp8 / verify_attn@fp8.")]
QuickOpt = Annotated[bool, typer.Option(
    "--quick", help="Corners of the grid only (under a minute on an H200; the full sweep about 2).")]
CalOutOpt = Annotated[Path, typer.Option(
    "--out", help="Output folder: raw.csv, raw.meta.json, profile.json, profile.md.")]
ResumeOpt = Annotated[bool, typer.Option("--resume", help="Continue an interrupted sweep in --out, with the same "
                                         "options; an --out holding none (no raw.csv and raw.steps-done) is an "
                                         "error, not a fresh start.")]


@handles_errors
def measure_kernels(
    model: Annotated[str, typer.Option("--model", "-m", help="Comma-separated registry keys.")] = "q35",
    ctx: Annotated[str, typer.Option("--ctx", help="Comma-separated contexts.")] = "64K,256K,1M",
    batch: Annotated[str, typer.Option("--batch", "-B", help="Comma-separated batch sizes.")] = "1,4,16",
    out: Annotated[Path, typer.Option(
        "--out", help="Output folder (kernels.csv, kernels.meta.json, summary.md).")] = Path("measure/results/run"),
    variants: Annotated[bool, typer.Option(help="Also time tuning variants at the largest ctx, B=1.")] = True,
    components: Annotated[bool, typer.Option(help="Also time non-attention components.")] = True,
    sdpa: Annotated[bool, typer.Option(help="Also time torch SDPA on contiguous K/V.")] = True,
    resume: Annotated[bool, typer.Option(help="Continue an interrupted run in --out, with the same options (rows "
                                              "appended to its kernels.csv); none there is an error.")] = False,
    backend: BackendOpt = "wmtp",
) -> None:
    """Time the KV-index build, paged decode / verify / extend attention and components (GPU only)."""
    from wmtp.measure.backends import check_name
    from wmtp.models import get_model
    from wmtp.units import parse_int_list

    check_name(backend, attention=True)
    specs = [get_model(k) for k in comma_list(model, "--model")]
    ctxs = parse_int_list(ctx, what="--ctx")
    batches = parse_int_list(batch, what="--batch", whole=True)  # '1K' read as 1024 requests, silently
    from wmtp.latency import MAX_BATCH

    check_count(max(batches), "--batch", 1, MAX_BATCH)
    check_output_folder(out, "--out folder")
    refuse_shipped_folder("--out", out)
    from wmtp.measure.run import run_kernels

    try:
        path = run_kernels(specs, ctxs, batches, out, variants=variants, components=components, sdpa=sdpa,
                           resume=resume, backend=backend)
    except KeyboardInterrupt:
        fail(f"interrupted: the samples taken so far are in {out / 'kernels.csv'}")
    typer.echo(f"wrote {path} and {path.parent / 'summary.md'}")


@handles_errors
def calibrate(
    models: Annotated[str, typer.Option("--models", help="Comma-separated registry keys to sweep.")] = "q35,q122,nem",
    quick: QuickOpt = False,
    out: CalOutOpt = Path("calibration"),
    resume: ResumeOpt = False,
    from_raw: Annotated[Optional[Path], typer.Option(
        "--from-raw", help="Refit an existing raw.csv (no GPU needed). A measurement it holds twice (a block of "
                           ">= 4 replays, >= 3 distinct times, copied with every time equal) is an error; the same "
                           "shape measured again is kept.")] = None,
    add_tp: Annotated[Optional[Path], typer.Option(
        "--add-tp", help="Merge the all-reduce fit of a tp_bench run (its --out folder) into "
                         "--out/profile.json.")] = None,
    from_logs: Annotated[Optional[list[str]], typer.Option(
        "--from-logs", help="LOG:D decode logs of runs at depth D (repeatable): top-down framework profile "
                            "(--out/framework.json) for the one model in --models; see `wmtp calibrate-logs`.")] = None,
    hw: CalHwOpt = None,
    ctx: Annotated[str, typer.Option(
        "--ctx", help="With --from-logs: the context the logged runs decoded at (1048576, 256K, 1M, ...).")] = "1M",
    method: Annotated[str, typer.Option(help="With --from-logs: native, window or dense.")] = "native",
    min_gamma: Annotated[Optional[int], int_option(help="With --from-logs: fit only gamma >= this.")] = None,
    backend: BackendOpt = "wmtp",
    parts: PartsOpt = None,
    base_raw: Annotated[Optional[Path], typer.Option(
        "--base-raw", help="With --parts: the raw data of a full run (e.g. the shipped "
                           "wmtp_model/data/profiles/h200.raw.csv.gz) whose other parts complete the fit.")] = None,
    moe_backend: Annotated[str, typer.Option(
        "--moe-backend", help="Routed-expert kernel of the moe rows: wmtp (its own) or sglang (SGLang's fused MoE "
                              "Triton kernel, from a copy of SGLang's files: "
                              "measure/backends/sglang_moe.py).")] = "wmtp",
) -> None:
    """Sweep the latency components on this GPU and fit a profile (or refit one with --from-raw, or fit a
    framework profile from serving logs with --from-logs)."""
    from wmtp.models import get_model

    _one_mode({"--from-logs": bool(from_logs), "--add-tp": add_tp is not None, "--from-raw": from_raw is not None},
              {"--resume": resume, "--quick": quick, "--parts": parts is not None, "--base-raw": base_raw is not None,
               "--backend": backend != "wmtp", "--moe-backend": moe_backend != "wmtp"},
              {"--method": method != "native", "--min-gamma": min_gamma is not None, "--ctx": ctx != "1M"},
              bool(from_logs))
    _refuse_hw_models(add_tp is not None, bool(from_logs) or from_raw is not None, hw, models)
    if from_logs:
        from wmtp.calibrate.framework_fit import fit_from_logs
        from wmtp.hardware import get_hardware
        from wmtp.profile import cost_model_for
        from wmtp.units import parse_tokens

        keys = comma_list(models, "--models")
        if len(keys) != 1:
            raise WmtpError("--from-logs calibrates one model: give --models KEY")
        spec, gpu = get_model(keys[0]), get_hardware(hw or DEFAULT_HW)
        target = out / "framework.json"
        refuse_overwriting_inputs([("--out", target)], [("--from-logs", r.rpartition(":")[0] or r) for r in from_logs])
        prof = fit_from_logs(from_logs, spec, gpu, cost_model_for(gpu, None), parse_tokens(ctx, "--ctx"), method, None,
                             defaults.WINDOW, defaults.SINK, min_gamma, target)
        typer.echo(framework_fit_summary(prof, target))
        return
    if add_tp is not None:
        return _add_tp(out / "profile.json", add_tp)
    specs = [get_model(k) for k in comma_list(models, "--models")]
    try:
        if from_raw is not None:
            from wmtp.calibrate.fitting import refit_raw

            refuse_overwriting_inputs([("--out", out / "profile.json"), ("--out", out / "profile.md")],
                                      [("--from-raw", from_raw)])

            path = refit_raw(from_raw, out / "profile.json", [s.key for s in specs], hw,
                             explicit_models=models != "q35,q122,nem")
        else:
            from wmtp.calibrate.sweep_run import parse_parts, run_calibrate
            from wmtp.measure.backends import check_name

            check_output_folder(out, "--out folder")
            refuse_shipped_folder("--out", out)
            path = run_calibrate(specs, out, quick=quick, resume=resume, backend=check_name(backend, attention=True),
                                 parts=parse_parts(parts), base_raw=base_raw, moe_impl=moe_backend)
    except KeyboardInterrupt:
        fail(f"interrupted: the samples taken so far are in {out / 'raw.csv'}; `wmtp calibrate --resume` continues")
    _note_rows_not_fitted(path)
    typer.echo(f"wrote {path} and {path.with_suffix('.md')}")


def _note_rows_not_fitted(profile: Path) -> None:
    """One `note:` line on stderr counting the raw rows the fit left (failed or skipped shapes, unknown kernels;
    `wmtp.calibrate.raw_rows`): they were dropped without a word. Nothing where it fitted every row."""
    from wmtp.calibrate.raw_rows import skipped_note_of

    note = skipped_note_of(profile)
    if note:
        typer.echo(f"note: {printable(note)}", err=True)


def _add_tp(target: Path, tp_dir: Path) -> None:
    """--add-tp: the all-reduce fits merged into --out's profile, in place (never a shipped profile)."""
    from wmtp.calibrate.fitting import merge_tp

    refuse_overwriting_inputs([("--out", target)], [])
    added = merge_tp(target, tp_dir)
    typer.echo(f"added {', '.join(added)} to {target}")


def _one_mode(modes: dict[str, bool], sweep_opts: dict[str, bool], log_opts: dict[str, bool], logs: bool) -> None:
    """calibrate runs one mode: a sweep, or one of --from-logs / --add-tp / --from-raw; an option of another
    mode is refused, not silently ignored."""
    given = [k for k, on in modes.items() if on]
    if len(given) > 1:
        raise WmtpError(f"give one of {', '.join(modes)}, not {' and '.join(given)}")
    stray = [k for k, on in sweep_opts.items() if on and given] + [k for k, on in log_opts.items() if on and not logs]
    if stray:
        mode = given[0] if given else "a sweep"
        raise WmtpError(f"{', '.join(stray)} does not apply to {mode}")


def _refuse_hw_models(add_tp: bool, reads_hw: bool, hw: str | None, models: str) -> None:
    """--hw names the GPU of logs or of a raw sweep without a sidecar; a sweep measures the GPU it runs on, and
    --add-tp merges into --out's profile as it is: there both were silently unused."""
    mode = "--add-tp" if add_tp else None if reads_hw else "a sweep"
    for opt, given in (("--hw", hw is not None), ("--models", models != "q35,q122,nem" and add_tp)):
        if given and mode:
            raise WmtpError(f"{opt} does not apply to {mode}")


def framework_fit_summary(prof: dict, out: Path) -> str:
    f = prof["t_iter_fit"]
    return (f"T_iter = {f['t_fwd_ms']:.3f} ms x gamma + {f['c_ms']:.3f} ms over {f['points_used']} runs (measured: "
            f"fitted to the logged steps); framework overhead {prof['overhead']['const_ms']:.3f} ms + "
            f"{prof['overhead']['per_forward_ms']:.3f} ms x gamma over the kernel model ({prof['cost_model']}) "
            f"(framework profile: the logged steps less the kernel model); wrote {out}")


@handles_errors
def validate(
    profile: Annotated[Path, typer.Option("--profile", help="Profile to validate.")] = Path("calibration/profile.json"),
    models: Annotated[str, typer.Option("--models", help="Comma-separated registry keys.")] = "q35,q122,nem",
    ctx: Annotated[str, typer.Option("--ctx", help="Comma-separated contexts.")] = "64K,256K,1M",
    depths: Annotated[str, typer.Option("--depths", help="Comma-separated d values.")] = "3,5,7",
    out: Annotated[Path, typer.Option(
        "--out", help="Output folder: validation.csv, validation.md.")] = Path("calibration"),
    backend: Annotated[Optional[str], typer.Option(
        "--backend", help="Attention kernels of the composed steps (default: the profile's own backend).")] = None,
    moe_backend: Annotated[Optional[str], typer.Option(
        "--moe-backend", help="Routed-expert kernel of the composed steps: wmtp or sglang (default: the one the "
                              "profile's moe rows were measured with).")] = None,
    kv_dtype: Annotated[str, typer.Option(
        "--kv-dtype", help="KV cache of every composed step, target and draft: bf16, or fp8 (e4m3, priced by the "
                           "profile's @fp8 attention fits: `wmtp calibrate --parts kv-fp8`).")] = "bf16",
) -> None:
    """Time whole composed speculative iterations on this GPU and compare them with the profile (GPU only)."""
    from wmtp.models import get_model
    from wmtp.units import parse_int_list

    from wmtp.acceptance import MAX_DEPTH
    from wmtp.calibrate.validate import moe_backend_for, profile_backend
    from wmtp.measure import require_gpu
    from wmtp.measure.backends import check_name
    from wmtp.profile import load_profile

    from wmtp.specs import KV_DTYPES

    if kv_dtype not in KV_DTYPES:
        raise WmtpError(f"--kv-dtype must be one of {', '.join(KV_DTYPES)}, got {kv_dtype!r}")
    for opt, value in (("--backend", backend), ("--moe-backend", moe_backend)):
        if value is not None and not value.strip():
            raise WmtpError(f"{opt} is empty; leave it out for the profile's own")
    prof = load_profile(profile)
    moe_backend = moe_backend_for(prof, moe_backend)  # SGLang's files absent: an error now
    check_name(backend or profile_backend(prof), attention=True)
    specs = [get_model(k) for k in comma_list(models, "--models")]  # every option checked before the GPU is
    ctxs = parse_int_list(ctx, what="--ctx")
    ds = parse_int_list(depths, what="--depths", whole=True)  # '3K' was depth 3072 (then refused as out of range)
    bad = [d for d in ds if not 2 <= d <= MAX_DEPTH]
    if bad:
        raise WmtpError(f"--depths must lie in 2..{MAX_DEPTH}, got {bad[0]}")
    check_output_folder(out, "--out folder")
    refuse_shipped_folder("--out", out)
    require_gpu()
    from wmtp.calibrate.validate import run_validate

    path, md = run_validate(profile, specs, out, tuple(ctxs), tuple(ds), backend=backend, moe_backend=moe_backend,
                            kv_dtype=kv_dtype)
    typer.echo(f"wrote {path} and {md}")


def register(app: typer.Typer) -> None:
    measure_app.command("kernels")(measure_kernels)
    app.add_typer(measure_app, name="measure")
    app.command()(calibrate)
    app.command()(validate)
