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


def check_resumable(csv_path: Path, done: Path, meta_path: Path, same: dict, command: str) -> None:
    """`--resume` with nothing to continue is an error (it started afresh, silently): no `csv_path`, or one without
    the record of finished steps (every step would run again and append beside its rows). An interrupted run of
    other settings (`same`: sidecar key -> this run's value; another backend, models, grid) is one too: its rows and
    this run's would be fitted as one measurement."""
    from wmtp.errors import WmtpError
    from wmtp.fileio import read_json

    folder = csv_path.parent
    if not csv_path.is_file():
        raise WmtpError(f"--resume: nothing to resume in {folder}: it holds no {csv_path.name} of an interrupted "
                        f"run; leave out --resume to start one")
    if not done.is_file():
        raise WmtpError(f"--resume: {csv_path} has no record of its finished steps ({done.name}), so every step "
                        f"would run again beside its rows; leave out --resume to start afresh (it replaces "
                        f"{csv_path.name})")
    old = read_json(meta_path, "run metadata", WmtpError) if meta_path.is_file() else {}
    for key, value in same.items():
        if isinstance(old, dict) and key in old and old[key] != value:
            was = (f"`{old[key]}`, this one is `{value}`" if key == "command" else
                   f"`{old.get('command', command)}` with {key} {old[key]!r}, this one has {value!r}")
            raise WmtpError(f"--resume: the interrupted run in {folder} was {was}; give the same options, or leave "
                            "out --resume to start afresh")


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
