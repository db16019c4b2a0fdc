"""Entry points behind `wmtp measure ...`: progress bar, output files, provenance."""

from __future__ import annotations

import signal
from pathlib import Path

from wmtp.measure import require_gpu
from wmtp.specs import ModelSpec


def run_kernels(specs: list[ModelSpec], ctxs: list[int], batches: list[int], out_dir: Path, *, variants: bool = True,
                components: bool = True, sdpa: bool = True, resume: bool = False, console=None) -> Path:
    """Benchmark on this GPU: kernels.csv (rows appended as measured), kernels.meta.json, summary.md.
    `resume` appends and skips the steps an interrupted run finished."""
    require_gpu()
    from wmtp.measure.bench import BenchConfig, RowWriter, plan, summarize
    from wmtp.measure.provenance import atomic_write_text, collect, write_meta

    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, done = out_dir / "kernels.csv", out_dir / "kernels.steps-done"
    if not resume:
        done.unlink(missing_ok=True)
    cfg = BenchConfig(ctxs=ctxs, batches=batches, variants=variants, components=components, sdpa=sdpa)
    meta = collect("cuda-graph replay, CUDA events, L2 flushed (256 MiB read) before each replay", {
        "command": "wmtp measure kernels", "models": [s.key for s in specs], "ctxs": ctxs, "batches": batches,
        "depth": cfg.depth, "window": cfg.window, "sink": cfg.sink, "status": "running"})
    write_meta(out_dir / "kernels.meta.json", meta)
    writer = RowWriter(csv_path, resume=resume)
    try:
        _run_steps(list(plan(specs, cfg)), writer, done, console)
        meta["status"] = "complete"
    except KeyboardInterrupt:
        meta["status"] = f"interrupted after {writer.rows} rows this run; --resume continues"
        raise
    finally:
        writer.close()
        meta["rows"] = writer.rows
        write_meta(out_dir / "kernels.meta.json", meta)
        if csv_path.exists() and writer.rows:
            atomic_write_text(out_dir / "summary.md", summarize(csv_path))
    return csv_path


def _progress(console=None):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), console=console)


def _run_steps(steps, writer, done_path: Path, console=None) -> int:
    """Run labelled steps, recording each finished label so that `--resume` skips it."""
    done = set(done_path.read_text().splitlines()) if done_path.exists() else set()
    todo = [(label, step) for label, step in steps if label not in done]

    def _term(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _term)
    try:
        with _progress(console) as bar, open(done_path, "a") as log:
            task = bar.add_task("calibrating", total=len(todo))
            for label, step in todo:
                bar.update(task, description=label)
                step(writer)
                log.write(label + "\n")
                log.flush()
                bar.advance(task)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return len(todo)


def run_calibrate(specs: list[ModelSpec], out_dir: Path, quick: bool = False, resume: bool = False,
                  console=None) -> Path:
    """Sweep on this GPU (raw.csv, appended as measured), fit, write profile.json. Returns its path."""
    require_gpu()
    from wmtp.measure.bench import RowWriter, ceiling_rows
    from wmtp.measure.provenance import collect, write_meta
    from wmtp.measure.sweep import SweepConfig, sweep_plan

    out_dir.mkdir(parents=True, exist_ok=True)
    raw = out_dir / "raw.csv"
    done = out_dir / "raw.steps-done"
    if not resume:
        done.unlink(missing_ok=True)
    cfg = SweepConfig.quick() if quick else SweepConfig()
    meta = collect("cuda-graph replay, CUDA events, L2 flushed (256 MiB read) before each replay", {
        "command": "wmtp calibrate" + (" --quick" if quick else ""), "models": [s.key for s in specs],
        "sweep": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(cfg).items()}, "status": "running"})
    write_meta(out_dir / "raw.meta.json", meta)
    writer = RowWriter(raw, resume=resume)
    steps = [("ceilings", ceiling_rows)] + sweep_plan(specs, cfg)
    try:
        _run_steps(steps, writer, done, console)
        meta["status"] = "complete"
    except KeyboardInterrupt:
        meta["status"] = f"interrupted after {writer.rows} rows this run; `wmtp calibrate --resume` continues"
        raise
    finally:
        writer.close()
        meta["rows_this_run"] = writer.rows
        write_meta(out_dir / "raw.meta.json", meta)
    return fit_to_profile(raw, out_dir / "profile.json", meta, [s.key for s in specs])


def fit_to_profile(raw: Path, profile_path: Path, meta: dict, models: list[str]) -> Path:
    from wmtp.calibrate.fitting import fit_raw_to_profile

    return fit_raw_to_profile(raw, profile_path, meta, models)
