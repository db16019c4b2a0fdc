"""`wmtp report`: one self-contained HTML file from a prediction (plotly imported only here)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from wmtp.cli.common import (DEFAULT_DEPTH, DEFAULT_SINK, DEFAULT_TASK, DEFAULT_WINDOW, MAX_DEPTH, AccOpt, BatchOpt,
                             ConfigOpt, CtxOpt, FrameworkOpt, HwOpt, KvOpt, ModelOpt, ProfileOpt, SinkOpt, SolOpt,
                             TaskOpt, WdOpt, WindowOpt, fail, file_to_write, handles_errors, parse_accept, parse_depth,
                             refuse_overwriting_inputs, resolve_model)
from wmtp.errors import WmtpError


@handles_errors
def report(
    model: ModelOpt = None, config: ConfigOpt = None, hw: HwOpt = "h200", ctx: CtxOpt = "1M",
    depth: Annotated[str, typer.Option(
        "--depth", "-d", help=f"Draft tokens per step d (2..{MAX_DEPTH}).")] = str(DEFAULT_DEPTH),
    window: WindowOpt = DEFAULT_WINDOW, sink: SinkOpt = DEFAULT_SINK, batch: BatchOpt = 1, kv_dtype: KvOpt = None,
    weight_dtype: WdOpt = None, accept_length: AccOpt = None, profile: ProfileOpt = None,
    speed_of_light: SolOpt = False, framework: FrameworkOpt = None, task: TaskOpt = DEFAULT_TASK,
    histogram: Annotated[Optional[list[str]], typer.Option(
        "--histogram", "--logs",
        help="METHOD=FILE (native or window): acceptance data for the per-position figure — a histogram, "
             "sglang meta_info JSON/JSONL, per-step accept lengths, or a vLLM/SGLang log; repeatable.")] = None,
    out: Annotated[Path, typer.Option("--out", help="HTML file to write.", parser=file_to_write)] = Path("report.html"),
) -> None:
    """Write one self-contained HTML report (works offline) for a prediction."""
    try:
        from wmtp.reports.html import build_report, write_report
    except ImportError as e:
        fail(f"wmtp report needs plotly ({e.name} is missing): pip install 'wmtp[reports]'")
    from wmtp.acceptance import AcceptanceChoice, choose_acceptance
    from wmtp.profile import ProfileCostModel, cost_model_for
    from wmtp.decisions import Scenario
    from wmtp.engine import memory_config
    from wmtp.hardware import get_hardware
    from wmtp.predict import predict as run_predict
    from wmtp.units import parse_tokens

    from wmtp.fileio import check_output_path

    check_output_path(out, "report")  # a folder, a device, an unwritable place: say so before any work
    refuse_overwriting_inputs([("--out", out)], [("--profile", profile), ("--config", config)] + [
        ("--framework", f) for f in framework or []] + [("--histogram", h.partition("=")[2]) for h in histogram or []]
        + [("validation table", t) for t in _validation_tables(profile, get_hardware(hw), framework)])
    d = parse_depth(depth)
    if d == "auto":
        raise WmtpError("wmtp report takes a fixed --depth (the depth curve shows every d)")
    if not 2 <= d <= MAX_DEPTH:
        raise WmtpError(f"--depth must lie in 2..{MAX_DEPTH}, got {d}")
    if batch < 1:
        raise WmtpError(f"--batch must be >= 1, got {batch}")
    if sink < 0:
        raise WmtpError(f"--sink must be >= 0, got {sink}")
    spec = resolve_model(model, config, weight_dtype, kv_dtype, framework)
    gpu = get_hardware(hw)
    cost = cost_model_for(gpu, profile, speed_of_light, framework)
    acc_len = parse_accept(accept_length)
    p = run_predict(spec, gpu, parse_tokens(ctx, "--ctx"), d, parse_tokens(window, "--window"), sink, batch, acc_len,
                    cost=cost, frameworks=framework, task=task)
    acc = choose_acceptance(spec.key, d, acc_len, task)
    profiles = _acceptance_files(histogram or [], {"native": acc.native, "window": acc.window}, d)
    # measured window acceptance (a window=FILE histogram, as --accept-length) replaces the task's AL(W) preset
    measured_window = any(h.partition("=")[0] == "window" for h in histogram or [])
    acc = AcceptanceChoice(profiles["native"], profiles["window"], acc.warning,
                           None if measured_window else acc.window_al)
    sc = Scenario(spec, gpu, cost, p.ctx, d, p.window, sink, batch, 1, p.overheads or None,
                  memory_config(spec.key, framework))
    meta, validation = {}, None
    if isinstance(cost, ProfileCostModel):
        prov = cost.profile.get("provenance", {})
        meta = {k: prov.get(k) for k in ("gpu_name", "driver", "torch", "triton", "git_sha", "utc_time")}
        meta["hardware"] = cost.hw_key
        meta["raw data sha256"] = cost.profile.get("raw_data", {}).get("sha256")
        validation = next((c for c in _validation_tables(profile, gpu, framework) if c.exists()), None)
    sources = {"acceptance (native)": profiles["native"].tag(d), "acceptance (window)": profiles["window"].tag(d),
               "validation data": str(validation) if validation else "none",
               "engine overhead": p.engine_overhead}
    from wmtp.headroom import headroom_report

    try:  # the headroom section, where an engine-backend profile of the same GPU ships (or --profile is one)
        room = headroom_report(spec, gpu, profile, p.ctx, d, p.window, sink, batch,
                               accept_lengths={m: p.methods[m].accept_length for m in ("native", "window")})
    except WmtpError:
        room = None
    write_report(out, build_report(p, sc, acc, profiles, meta, validation, sources, room))
    typer.echo(f"wrote {out}")


def _validation_tables(profile, gpu, framework) -> list[Path]:
    """Where the report looks for the validation of the profile it prices with: validation.csv beside --profile, or
    the shipped table of the shipped profile in use (calibrate/validation/NAME.csv). It looked in
    wmtp_model/data/validation, which does not exist since the profiles moved: the shipped table was never shown."""
    import os

    from wmtp.cli.common import validation_dir
    from wmtp.engine import kernel_profile
    from wmtp.profile import PROFILES_DIR, shipped_profile_path

    if profile is not None:
        shipped = {os.path.realpath(p): p.stem for p in PROFILES_DIR.glob("*.json")}
        stem = shipped.get(os.path.realpath(profile))
        return [Path(profile).with_name("validation.csv")] + ([validation_dir() / f"{stem}.csv"] if stem else [])
    kernels = kernel_profile(framework)
    used = (PROFILES_DIR / f"{kernels}.json" if kernels else None) or shipped_profile_path(gpu.key) \
        or shipped_profile_path("h200")
    return [validation_dir() / f"{Path(used).stem}.csv"] if used else []


def _acceptance_files(items: list[str], profiles: dict, d: int) -> dict:
    """`profiles` (method -> acceptance profile) with each --histogram/--logs METHOD=FILE read over its method's."""
    from wmtp.acceptance_io import profile_from_file

    given: set[str] = set()
    for item in items:
        method, _, path = item.partition("=")
        if method not in profiles or not path:
            raise WmtpError(f"--histogram/--logs take native=FILE or window=FILE, got {item!r}")
        if method in given:  # the second would silently replace the first
            raise WmtpError(f"--histogram/--logs give {method}= twice; give one file per method")
        given.add(method)
        profiles[method] = profile_from_file(path, d)[0]
    return profiles


def register(app: typer.Typer) -> None:
    app.command()(report)
