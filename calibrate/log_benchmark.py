"""Benchmark: parse large SGLang, vLLM V1, vLLM V0 and mixed logs the way `wmtp logs` does
(`wmtp.log_analysis.analyse`: the stream, run separation, the per-line and the artifact's estimators, vLLM
windows and spec lines), in bounded memory.

    python -m wmtp.calibrate.log_benchmark --size-mb 1024 --out calibrate/benchmarks/log_parse.md

Each log is generated first (seeded). SGLang: decode lines in the `Decode batch.`, `Decode batch,` and
`Decode batch [N],` spellings, dense and hybrid (`#full token`, `mamba usage`) variants, prefill lines
and truncated lines, with timestamps and segment changes. vLLM V1: `Engine 000:` throughput and
`SpecDecoding metrics:` lines between HTTP access lines; V0: `Avg generation throughput` and cumulative
`Speculative metrics:` lines, the same way. Mixed: blocks of the three, and of other chatter. Reported per
log: lines per second and MB per second of the parse alone, over wall and over CPU time (the machine may
be shared), and the parse's peak resident memory above the baseline (ru_maxrss, measured in a fresh
process so generation does not count).
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

FORMATS = ("sglang", "vllm-v1", "vllm-v0", "mixed")


def _sglang_line(rng: random.Random, n: int) -> str:
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
        return (f"{ts} Decode batch. #running-req: {b}, #token: {rng.randint(1, 10**6)}, token usage: 0.41, "
                f"accept len: {al:.2f}, cuda graph: True, gen throughput (token/s): {thr:.2f}, #queue-req: 0")
    if r < 0.70:
        return (f"{ts} Decode batch [{n % 97}], #running-req: {b}, #full token: {rng.randint(1, 10**6)}, "
                f"full token usage: 0.40, mamba num: {b}, mamba usage: 0.02, accept len: {al:.2f}, "
                f"accept rate: {al / 7:.2f}, cuda graph: True, gen throughput (token/s): {thr:.2f}, #queue-req: 0")
    if r < 0.80:
        return (f"{ts} Decode batch, #running-req: {b}, #token: 20800, token usage: 0.29, cuda graph: True, "
                f"gen throughput (token/s): {thr / al:.2f}, #queue-req: 0")
    if r < 0.97:
        return (f"{ts} Prefill batch. #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: 0.05, "
                f"#running-req: {b}, #queue-req: 0")
    return f"{ts} Decode batch. #running-req: {b}, #token: 37787, token usage: 0.13, accept len: 2.6"


def _vllm_line(rng: random.Random, n: int, v0: bool) -> str:
    """An interval of 8 lines: throughput, spec metrics, 6 HTTP access lines (V0: cumulative counters)."""
    sec = n // 8 * 10
    ts = f"11-{1 + (sec // 86400) % 28:02d} {(sec // 3600) % 24:02d}:{(sec // 60) % 60:02d}:{sec % 60:02d}"
    b, k = 1 + (n // 400000) % 8, 3
    if n % 8 == 0:
        thr = b / rng.uniform(0.018, 0.022)
        if v0:
            return (f"INFO {ts} metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
                    f"{thr:.1f} tokens/s, Running: {b} reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: "
                    "4.2%, CPU KV cache usage: 0.0%.")
        return (f"(APIServer pid=5020) INFO {ts} [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
                f"Avg generation throughput: {thr:.1f} tokens/s, Running: {b} reqs, Waiting: 0 reqs, "
                "GPU KV cache usage: 4.2%, Prefix cache hit rate: 0.0%")
    if n % 8 == 1:
        pos = sorted((rng.uniform(0.3, 0.9) for _ in range(k)), reverse=True)
        drafts = rng.randint(100, 400)
        acc = round(drafts * sum(pos))
        if v0:
            steps = n // 8 * 300
            return (f"INFO {ts} metrics.py:367] Speculative metrics: Draft acceptance rate: {acc / drafts / k:.3f}, "
                    f"System efficiency: 0.598, Number of speculative tokens: {k}, Number of accepted tokens: "
                    f"{steps * 2}, Number of draft tokens: {steps * k}, Number of emitted tokens: {steps * 3}.")
        return (f"(APIServer pid=5020) INFO {ts} [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
                f"{1 + acc / drafts:.2f}, Accepted throughput: {acc / 10:.2f} tokens/s, Drafted throughput: "
                f"{drafts * k / 10:.2f} tokens/s, Accepted: {acc} tokens, Drafted: {drafts * k} tokens, "
                f"Per-position acceptance rate: {', '.join(f'{p:.3f}' for p in pos)}, Avg Draft acceptance rate: "
                f"{100 * acc / drafts / k:.1f}%")
    return (f"(APIServer pid=5020) INFO:     127.0.0.1:{40000 + n % 20000} - \"POST /v1/chat/completions "
            "HTTP/1.1\" 200 OK")


def _mixed_line(rng: random.Random, n: int) -> str:
    """Blocks of 5000 lines: SGLang (one server: its clock and runs go on from block to block), vLLM V1,
    vLLM V0, other chatter."""
    block = (n // 5000) % 4
    if block == 3:
        return f"[2026-11-01 00:00:{n % 60:02d}] WARNING: request {n} took {rng.uniform(1, 9):.2f} s (tokenizer: slow)"
    if block == 0:
        return _sglang_line(rng, n // 20000 * 5000 + n % 5000)
    return _vllm_line(rng, n, v0=block == 2)


def generate(path: Path, size_mb: int, seed: int = 0, fmt: str = "sglang") -> int:
    rng = random.Random(seed)
    line = {"sglang": _sglang_line, "vllm-v1": lambda r, n: _vllm_line(r, n, False),
            "vllm-v0": lambda r, n: _vllm_line(r, n, True), "mixed": _mixed_line}[fmt]
    target = size_mb * 1024 * 1024
    written, n = 0, 0
    with open(path, "w") as f:
        while written < target:
            chunk = "\n".join(line(rng, n := n + 1) for _ in range(1000)) + "\n"
            f.write(chunk)
            written += len(chunk)
    return n


def _parse_child(path: str) -> None:
    from wmtp.log_analysis import analyse

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    rep = analyse(path)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rec = rep["records"]
    print(f"{rep['lines']} {rec['sglang_decode'] + rec['vllm_spec']} {rep['garbled']} {len(rep['runs'])} {dt:.3f} "
          f"{cpu:.3f} {(peak - base) / 1024:.1f} {peak / 1024:.1f}")


def _run(fmt: str, size_mb: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / f"{fmt}.log"
        generate(log, size_mb, fmt=fmt)
        size = log.stat().st_size
        load = os.getloadavg()[0]
        res = subprocess.run([sys.executable, "-m", "wmtp.calibrate.log_benchmark", "--child", str(log)],
                             capture_output=True, text=True, check=True)
    lines, spec, garbled, segs, dt, cpu, rss_delta, rss_peak = res.stdout.split()
    lines, dt, cpu = int(lines), float(dt), float(cpu)
    return (f"| {fmt} | {size / 2**20:.0f} | {lines:,} | {int(spec):,} | {int(garbled):,} | {lines / dt:,.0f} | "
            f"{lines / cpu:,.0f} | {size / 2**20 / dt:.1f} | {dt:.1f} | {segs} | {rss_delta} | {rss_peak} | "
            f"{load:.1f} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--formats", default=",".join(FORMATS), help="comma-separated, of " + ", ".join(FORMATS))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _parse_child(args.child)
        return
    fmts = [f for f in args.formats.split(",") if f]
    bad = [f for f in fmts if f not in FORMATS]
    if bad:
        ap.error(f"unknown format {bad[0]!r}: one of {', '.join(FORMATS)}")
    rows = [_run(f, args.size_mb) for f in fmts]
    text = "\n".join([
        "# Log parsing benchmark", "",
        f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}, Python {platform.python_version()} on "
        f"{platform.machine()} ({os.cpu_count()} cores), `python -m wmtp.calibrate.log_benchmark --size-mb "
        f"{args.size_mb}`. Generated logs (seeded); `wmtp.log_analysis.analyse` (the `wmtp logs` path: stream, "
        "runs, per-line and artifact estimators, vLLM windows and spec lines) in a fresh process per log. "
        "Speed over wall and over CPU time (the machine may be shared: load is the 1-minute load average "
        "when the parse started). Spec/decode lines: SGLang decode plus vLLM spec-metrics lines read.", "",
        "| log | MiB | lines | decode/spec lines | garbled | lines/s (wall) | lines/s (CPU) | MiB/s (wall) | "
        "parse s (wall) | SGLang runs | peak RSS above start (MiB) | peak RSS (MiB) | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|", *rows, ""])
    if args.out:
        atomic_write_text(args.out, text)
    print(text)


if __name__ == "__main__":
    main()
