"""GPU timing used by every benchmark in wmtp.

Method: the work (a list of callables run back to back) is captured once in a CUDA graph, warmed up
by `warmup` replays, then replayed `reps` times; each replay is bracketed by CUDA events and yields
one sample = elapsed / len(work) (per call). Optionally the L2 cache is flushed before each replay
by writing a 256 MiB buffer outside the timed region. Where capture fails, the calls are timed
eagerly with the same events (timer = "cuda-events-eager"). Every sample is returned: medians
are computed at analysis time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

_FLUSH_BYTES = 256 * 1024**2
_flush_buf: torch.Tensor | None = None


def flush_l2() -> None:
    global _flush_buf
    if _flush_buf is None:
        _flush_buf = torch.empty(_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    _flush_buf.zero_()


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
    return Timing([s.elapsed_time(e) / n for s, e in zip(starts, ends)], timer + ("+l2flush" if flush else ""))


def reps_for(estimate_ms: float, budget_ms: float = 250.0, lo: int = 10, hi: int = 100) -> int:
    """Repetitions so that one measurement stays within about `budget_ms` of device time."""
    if estimate_ms <= 0:
        return hi
    return int(max(lo, min(hi, budget_ms / estimate_ms)))
