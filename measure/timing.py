"""GPU timing used by every benchmark in wmtp.

Method: the work (a list of callables run back to back) is captured once in a CUDA graph, warmed up
by `warmup` replays, then replayed `reps` times; each replay is bracketed by CUDA events and yields
one sample = elapsed / len(work) (per call). Optionally the L2 cache is flushed before each replay,
outside the timed region, by *reading* a 256 MiB buffer (a write would leave the L2 full of dirty
lines whose write-back the timed kernel would pay for). Where capture fails, the calls are timed
eagerly with the same events (timer = "cuda-events-eager"). Every sample is returned: medians
are computed at analysis time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

_FLUSH_BYTES = 256 * 1024**2
_flush: dict = {}


def flush_l2() -> None:
    if not _flush:
        _flush["buf"] = torch.ones(_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
        _flush["out"] = torch.empty((), dtype=torch.float32, device="cuda")
    torch.sum(_flush["buf"], dim=0, out=_flush["out"])


@dataclass
class Timing:
    samples_ms: list[float]
    timer: str


def time_calls(work: Sequence[Callable[[], object]], reps: int = 50, warmup: int = 5, flush: bool = True,
               graph: bool = True) -> Timing:
    if not torch.cuda.is_available():
        raise RuntimeError("timing needs a CUDA GPU")
    n = len(work)

    def run_all():
        for fn in work:
            fn()

    # Eager warm-up compiles Triton kernels and initialises cuBLAS before capture.
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            run_all()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()

    replay, timer = run_all, "cuda-events-eager"
    if graph:
        try:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                run_all()
            torch.cuda.synchronize()
            replay, timer = g.replay, "cuda-graph-replay"
        except Exception:  # capture unsupported for this work: fall back to eager timing
            torch.cuda.synchronize()
    for _ in range(warmup):
        replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if flush:
            flush_l2()
        starts[i].record()
        replay()
        ends[i].record()
    torch.cuda.synchronize()
    return Timing([s.elapsed_time(e) / n for s, e in zip(starts, ends)], timer + ("+l2flush(read)" if flush else ""))


def reps_for(estimate_ms: float, budget_ms: float = 250.0, lo: int = 10, hi: int = 100) -> int:
    """Repetitions so that one measurement stays within about `budget_ms` of device time."""
    if estimate_ms <= 0:
        return hi
    return int(max(lo, min(hi, budget_ms / estimate_ms)))
