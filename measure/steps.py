"""Running a measurement as labelled steps: a progress bar, rows appended as measured, a provenance
sidecar whose status stays current when interrupted, and `--resume` skipping finished steps."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Callable, Iterable

from wmtp.measure.harness import RowWriter
from wmtp.measure.provenance import write_meta

Step = tuple[str, Callable[[RowWriter], None]]


def progress_bar(console=None):
    """The rich progress bar every long GPU command shows."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), console=console)


def has_rows(csv_path: Path) -> bool:
    """A CSV with at least one data row below its header."""
    if not csv_path.exists():
        return False
    with open(csv_path) as f:
        return sum(1 for _, _ in zip(range(2), f)) == 2


def run_steps(steps: Iterable[Step], writer: RowWriter, done_path: Path, console=None) -> int:
    """Run labelled steps, recording each finished label so that `--resume` skips it."""
    done = set(done_path.read_text().splitlines()) if done_path.exists() else set()
    todo = [(label, step) for label, step in steps if label not in done]

    def _term(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _term)
    try:
        with progress_bar(console) as bar, open(done_path, "a") as log:
            task = bar.add_task("measuring", total=len(todo))
            for label, step in todo:
                bar.update(task, description=label)
                step(writer)
                log.write(label + "\n")
                log.flush()
                bar.advance(task)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return len(todo)


def recorded_run(steps: Iterable[Step], csv_path: Path, done: Path, meta_path: Path, meta: dict, resume: bool,
                 console, resume_hint: str) -> None:
    """Run labelled measurement steps into `csv_path` (rows appended as measured), keeping the
    provenance sidecar's status and row count current even when interrupted."""
    write_meta(meta_path, meta)
    writer = RowWriter(csv_path, resume=resume)
    try:
        run_steps(steps, writer, done, console)
        meta["status"] = "complete"
    except KeyboardInterrupt:
        meta["status"] = f"interrupted after {writer.rows} rows this run; {resume_hint}"
        raise
    finally:
        writer.close()
        meta["rows_this_run"] = writer.rows
        write_meta(meta_path, meta)
