"""Wall-clock benchmark of the user-facing commands (the targets: `wmtp predict --model q122 --ctx 1M`
well under a second, `wmtp report` on a 1M prediction under 5 s).

    python -m wmtp.reports.benchmark --runs 7 --out reports/benchmarks/cli_timing.md

Each run is a fresh process (imports included), timed with time.perf_counter around
subprocess.run; the table gives min / median / max over the runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from wmtp import __version__
from wmtp.fileio import atomic_write_text


def _time(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        out.append(time.perf_counter() - t0)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    wmtp = shutil.which("wmtp") or str(Path(sys.executable).with_name("wmtp"))
    with tempfile.TemporaryDirectory() as tmp:
        cases = {
            "wmtp predict --model q122 --ctx 1M": [wmtp, "predict", "--model", "q122", "--ctx", "1M"],
            "wmtp predict --model q122 --ctx 1M --json": [wmtp, "predict", "--model", "q122", "--ctx", "1M", "--json"],
            "wmtp report --model q122 --ctx 1M": [wmtp, "report", "--model", "q122", "--ctx", "1M", "--out",
                                                  os.path.join(tmp, "r.html")],
        }
        rows = {name: _time(cmd, args.runs) for name, cmd in cases.items()}
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = ["# CLI wall-clock timing", "",
             f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}, wmtp {__version__} at {sha or 'unknown'}, "
             f"Python {platform.python_version()} on {platform.machine()} ({os.cpu_count()} cores), "
             f"{args.runs} fresh processes each (imports included), time.perf_counter around subprocess.run.", "",
             "| command | min s | median s | max s |", "|---|---|---|---|"]
    for name, ts in rows.items():
        lines.append(f"| `{name}` | {min(ts):.3f} | {statistics.median(ts):.3f} | {max(ts):.3f} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        atomic_write_text(args.out, text)
    print(text)


if __name__ == "__main__":
    main()
