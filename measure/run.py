"""Entry points behind `wmtp measure ...`: progress bar, output files, provenance."""

from __future__ import annotations

import signal
from pathlib import Path

from wmtp.measure import require_gpu
from wmtp.specs import ModelSpec


def run_kernels(specs: list[ModelSpec], ctxs: list[int], batches: list[int], out_dir: Path, *, variants: bool = True,
                components: bool = True, sdpa: bool = True, resume: bool = False, console=None) -> Path:
    require_gpu()
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from wmtp.measure.bench import BenchConfig, RowWriter, plan, summarize
    from wmtp.measure.provenance import atomic_write_text, collect, write_meta

    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "kernels.csv"
    cfg = BenchConfig(ctxs=ctxs, batches=batches, variants=variants, components=components, sdpa=sdpa)
    meta = collect("cuda-graph replay, CUDA events, L2 flushed before each replay", {
        "command": "wmtp measure kernels", "models": [s.key for s in specs], "ctxs": ctxs, "batches": batches,
        "depth": cfg.depth, "window": cfg.window, "sink": cfg.sink, "status": "running"})
    write_meta(out_dir / "kernels.meta.json", meta)
    writer = RowWriter(csv_path, resume=resume)
    steps = list(plan(specs, cfg))

    def _term(signum, frame):  # `timeout` and job schedulers send SIGTERM: stop like Ctrl-C
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _term)
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task("measuring", total=len(steps))
            for label, step in steps:
                bar.update(task, description=label)
                step(writer)
                bar.advance(task)
        meta["status"] = "complete"
    except KeyboardInterrupt:
        meta["status"] = f"interrupted after {writer.rows} rows"
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        writer.close()
        meta["rows"] = writer.rows
        write_meta(out_dir / "kernels.meta.json", meta)
        if writer.rows:
            atomic_write_text(out_dir / "summary.md", summarize(csv_path))
    return csv_path
