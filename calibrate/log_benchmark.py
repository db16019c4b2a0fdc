"""Benchmark: parse a large SGLang decode log the way `wmtp logs` does (`wmtp.log_analysis.analyse`: the
stream, run separation, the per-line and the artifact's estimators), in bounded memory.

    python -m wmtp.calibrate.log_benchmark --size-mb 1024 --out calibrate/benchmarks/log_parse.md

The log is generated first (seeded): decode lines in the `Decode batch.`, `Decode batch,` and
`Decode batch [N],` spellings, dense and hybrid (`#full token`, `mamba usage`) variants, prefill and
other lines, and truncated lines, with timestamps and segment changes. Reported: lines per second
and MB per second of the parse alone, and the parse's peak resident memory above the baseline
(ru_maxrss, measured in a fresh process so generation does not count).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from wmtp.fileio import atomic_write_text


def generate(path: Path, size_mb: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    target = size_mb * 1024 * 1024
    written, n = 0, 0
    with open(path, "w") as f:
        while written < target:
            lines = []
            for _ in range(1000):
                n += 1
                sec = n // 50
                ts = f"[2026-11-{1 + (sec // 86400) % 28:02d} {(sec // 3600) % 24:02d}:{(sec // 60) % 60:02d}:{sec % 60:02d} TP0]"
                r = rng.random()
                if (n // 250000) % 4 == 3:  # every fourth run is a dense (no speculation) run
                    r = 0.75 if r < 0.8 else r
                elif 0.70 <= r < 0.80:
                    r = 0.5
                b = 1 + (n // 250000) % 8
                al = rng.uniform(1.0, 7.0)
                thr = b * al / rng.uniform(0.018, 0.022)
                if r < 0.55:
                    lines.append(f"{ts} Decode batch. #running-req: {b}, #token: {rng.randint(1, 10**6)}, token usage: 0.41, "
                                 f"accept len: {al:.2f}, cuda graph: True, gen throughput (token/s): {thr:.2f}, #queue-req: 0")
                elif r < 0.70:
                    lines.append(f"{ts} Decode batch [{n % 97}], #running-req: {b}, #full token: {rng.randint(1, 10**6)}, "
                                 f"full token usage: 0.40, mamba num: {b}, mamba usage: 0.02, accept len: {al:.2f}, "
                                 f"accept rate: {al / 7:.2f}, cuda graph: True, gen throughput (token/s): {thr:.2f}, #queue-req: 0")
                elif r < 0.80:
                    lines.append(f"{ts} Decode batch, #running-req: {b}, #token: 20800, token usage: 0.29, cuda graph: True, "
                                 f"gen throughput (token/s): {thr / al:.2f}, #queue-req: 0")
                elif r < 0.97:
                    lines.append(f"{ts} Prefill batch. #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: 0.05, "
                                 f"#running-req: {b}, #queue-req: 0")
                else:
                    lines.append(f"{ts} Decode batch. #running-req: {b}, #token: 37787, token usage: 0.13, accept len: 2.6")
            chunk = "\n".join(lines) + "\n"
            f.write(chunk)
            written += len(chunk)
    return n


def _parse_child(path: str) -> None:
    from wmtp.log_analysis import analyse

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    rep = analyse(path)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{rep['lines']} {rep['records']['sglang_decode']} {rep['garbled']} {len(rep['runs'])} {dt:.3f} "
          f"{(peak - base) / 1024:.1f} {peak / 1024:.1f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _parse_child(args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "decode.log"
        generate(log, args.size_mb)
        size = log.stat().st_size
        res = subprocess.run([sys.executable, "-m", "wmtp.calibrate.log_benchmark", "--child", str(log)],
                             capture_output=True, text=True, check=True)
    lines, decode, garbled, segs, dt, rss_delta, rss_peak = res.stdout.split()
    lines, dt = int(lines), float(dt)
    text = "\n".join([
        "# Log parsing benchmark", "",
        f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}, Python {platform.python_version()} on "
        f"{platform.machine()} ({os.cpu_count()} cores). Generated SGLang log: {size / 2**20:.0f} MiB, {lines:,} lines "
        f"({int(decode):,} decode, {int(garbled):,} truncated); `wmtp.log_analysis.analyse` "
        "(the `wmtp logs` path: stream, runs, per-line and artifact estimators) in a fresh process.", "",
        "| lines/s | MiB/s | parse s | segments | peak RSS above start (MiB) | peak RSS (MiB) |", "|---|---|---|---|---|---|",
        f"| {lines / dt:,.0f} | {size / 2**20 / dt:.1f} | {dt:.1f} | {segs} | {rss_delta} | {rss_peak} |", ""])
    if args.out:
        atomic_write_text(args.out, text)
    print(text)


if __name__ == "__main__":
    main()
