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
    from wmtp.measure.bench import BenchConfig, plan, summarize
    from wmtp.measure.provenance import atomic_write_text, collect

    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, done = out_dir / "kernels.csv", out_dir / "kernels.steps-done"
    if not resume:
        done.unlink(missing_ok=True)
    cfg = BenchConfig(ctxs=ctxs, batches=batches, variants=variants, components=components, sdpa=sdpa)
    meta = collect("cuda-graph replay, CUDA events, L2 flushed (256 MiB read) before each replay", {
        "command": "wmtp measure kernels", "models": [s.key for s in specs], "ctxs": ctxs, "batches": batches,
        "depth": cfg.depth, "window": cfg.window, "sink": cfg.sink, "status": "running"})
    try:
        _recorded_run(list(plan(specs, cfg)), csv_path, done, out_dir / "kernels.meta.json", meta, resume, console,
                      "`wmtp measure kernels --resume` continues")
    finally:
        if _has_rows(csv_path):
            atomic_write_text(out_dir / "summary.md", summarize(csv_path))
    return csv_path


def _has_rows(csv_path: Path) -> bool:
    """A CSV with at least one data row below its header."""
    if not csv_path.exists():
        return False
    with open(csv_path) as f:
        return sum(1 for _, _ in zip(range(2), f)) == 2


def _recorded_run(steps, csv_path: Path, done: Path, meta_path: Path, meta: dict, resume: bool, console,
                  resume_hint: str) -> None:
    """Run labelled measurement steps into `csv_path` (rows appended as measured), keeping the
    provenance sidecar's status and row count current even when interrupted."""
    from wmtp.measure.bench import RowWriter
    from wmtp.measure.provenance import write_meta

    write_meta(meta_path, meta)
    writer = RowWriter(csv_path, resume=resume)
    try:
        _run_steps(steps, writer, done, console)
        meta["status"] = "complete"
    except KeyboardInterrupt:
        meta["status"] = f"interrupted after {writer.rows} rows this run; {resume_hint}"
        raise
    finally:
        writer.close()
        meta["rows_this_run"] = writer.rows
        write_meta(meta_path, meta)


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
    from wmtp.measure.bench import ceiling_rows
    from wmtp.measure.provenance import collect
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
    steps = [("ceilings", ceiling_rows)] + sweep_plan(specs, cfg)
    _recorded_run(steps, raw, done, out_dir / "raw.meta.json", meta, resume, console,
                  "`wmtp calibrate --resume` continues")
    return fit_to_profile(raw, out_dir / "profile.json", meta, [s.key for s in specs])


def fit_to_profile(raw: Path, profile_path: Path, meta: dict, models: list[str]) -> Path:
    from wmtp.calibrate.fitting import fit_raw_to_profile

    return fit_raw_to_profile(raw, profile_path, meta, models)
