"""The one measurement harness every GPU command uses (`wmtp measure kernels`, `wmtp calibrate`,
`wmtp validate`, the TP and backend benchmarks): device facts, the tidy row writer, timing a
list of calls into rows, the ceilings of the run, and KV pools with their index sets built once.

Method (see `timing.py`): each timed row is one CUDA-graph replay bracketed by CUDA events, the L2
flushed before each replay unless said otherwise; every replay is stored as its own row (`rep`),
medians are taken at analysis time. A shape that fails, or does not fit this GPU, is a row whose
`status` holds the reason, never a missing row.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Callable

import torch

from wmtp.measure import components as comp
from wmtp.measure import timing
from wmtp.measure.backends.base import Paged
from wmtp.measure.kernels.index_build import build_kv_indices
from wmtp.specs import ModelSpec

COLUMNS = ["kernel", "impl", "model", "ctx", "batch", "d", "window", "sink", "q_heads", "kv_heads", "head_dim",
           "dtype", "rep", "time_ms", "bytes", "flops", "status", "config", "timer"]
HEADROOM_BYTES = 2 * 2**30  # left free beside a pool: workspaces, index sets, the L2 flush buffer
FILL = 0.9  # fraction of free memory a pool may take


class RowWriter:
    """Appends rows to a CSV as they are measured, so an interrupted run keeps its samples."""

    def __init__(self, path: Path, resume: bool = False, columns: list[str] | None = None):
        self.path = path
        new = not (resume and path.exists())
        self.f = open(path, "w" if new else "a", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=columns or COLUMNS)
        if new:
            self.w.writeheader()
        self.rows = 0

    def write(self, base: dict, samples: list[float] | None, timer: str, status: str = "ok") -> None:
        for rep, t in enumerate(samples or [float("nan")]):
            self.w.writerow({**base, "rep": rep, "time_ms": t, "status": status, "timer": timer})
            self.rows += 1
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def free_bytes() -> int:
    """Free device memory now."""
    return torch.cuda.mem_get_info()[0]


def l2_bytes() -> int:
    """The device's L2 size (60 MiB when the driver does not say)."""
    return getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 60 * 2**20)


def error_status(e: BaseException) -> str:
    """The `status` of a row whose shape failed: the exception's type and first line."""
    return f"error: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def timed(writer: RowWriter, base: dict, work: list[Callable], est_ms: float, flush: bool = True,
          graph: bool = True) -> list[float] | None:
    """Time `work` (calls run back to back, per-call samples) into rows; a failure is a row."""
    try:
        t = timing.time_calls(work, reps=timing.reps_for(est_ms * len(work)), flush=flush, graph=graph)
        writer.write(base, t.samples_ms, t.timer)
        return t.samples_ms
    except Exception as e:  # a failing shape is a row, not a missing row
        writer.write(base, None, "", status=error_status(e))
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return None


def impl_name(backend: str, i: int, kw: dict) -> str:
    """Variant 0 (the shipped defaults) is the backend's name; tuning variants name their settings."""
    return backend if i == 0 or not kw else backend + "[" + ",".join(f"{k}={v}" for k, v in kw.items()) + "]"


def ceiling_rows(writer: RowWriter) -> None:
    """The run's own ceilings: device-to-device copy of 2 GiB (bytes read + written), bf16 GEMM 8192^3."""
    n = 2 * 1024**3 // 2
    src = torch.randn(n, device=comp.DEVICE, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    timed(writer, dict(kernel="copy", impl="torch", dtype="bf16", bytes=4 * n, flops=0, config="2GiB copy_ eager"),
          [lambda: dst.copy_(src)], 1.0, flush=False, graph=False)
    timed(writer, dict(kernel="copy", impl="torch", dtype="bf16", bytes=4 * n, flops=0, config="2GiB mul(1) graph"),
          [lambda: torch.mul(src, 1, out=dst)], 1.0, flush=False)
    del src, dst
    a = torch.randn(8192, 8192, device=comp.DEVICE, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=comp.DEVICE, dtype=torch.bfloat16)
    timed(writer, dict(kernel="gemm_peak", impl="torch", dtype="bf16", bytes=3 * 8192 * 8192 * 2,
                       flops=2 * 8192**3, config="8192^3 random"), [lambda: a @ b], 1.5, flush=False)
    del a, b
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class KVPool:
    """One KV pool `[slots, kv_heads, head_dim]` for a head shape, in the spec's KV dtype (bf16, or fp8 e4m3 of
    N(0, 1) values, unit scales), and index sets carved from random permutations of its slots (as a serving
    engine's pool looks after churn), built once per (ctx, batch, mode, window, sink)."""

    def __init__(self, spec: ModelSpec, slots: int):
        self.spec, self.slots = spec, slots
        shape = (slots, spec.kv_heads, spec.head_dim)
        self.k, self.v = kv_tensor(shape, spec.kv_dtype), kv_tensor(shape, spec.kv_dtype)
        self._sets: dict = {}

    def holds(self, ctx: int, batch: int) -> bool:
        return ctx * batch <= self.slots

    def index_set(self, ctx: int, batch: int, mode: str = "native", window: int = 0, sink: int = 0) -> Paged:
        key = (ctx, batch, mode, window, sink)
        if key not in self._sets:
            if len(self._sets) >= 8:  # bounded: sets of 1M-token requests are not small
                self._sets.pop(next(iter(self._sets)))
            dev = comp.DEVICE
            r2t = torch.randperm(self.slots, device=dev)[: ctx * batch].to(torch.int32).view(batch, ctx)
            seq = torch.full((batch,), ctx, device=dev, dtype=torch.int32)
            n = ctx if mode == "native" else min(ctx, window + sink)
            ptr = torch.arange(batch + 1, device=dev, dtype=torch.int32) * n
            out = torch.empty(batch * n, device=dev, dtype=torch.int32)
            build_kv_indices(r2t, seq, mode, sink, window, 1, max_len=ctx, kv_indptr=ptr, out=out)
            self._sets[key] = Paged(r2t, seq, ptr, out, ctx, batch, n, mode, window, sink)
        return self._sets[key]


def kv_tensor(shape, kv_dtype: str = "bf16", chunk: int = 1 << 20) -> torch.Tensor:
    """A K or V pool of N(0, 1) draws in a spec's KV dtype: bf16, or e4m3 (unit scale) made a chunk of rows at a
    time (no bf16 copy of the whole pool)."""
    if kv_dtype == "bf16":
        return torch.randn(shape, device=comp.DEVICE, dtype=torch.bfloat16)
    if kv_dtype != "fp8":
        raise ValueError(f"KV dtype {kv_dtype!r}: pools are bf16 or fp8")
    out = torch.empty(shape, device=comp.DEVICE, dtype=torch.float8_e4m3fn)
    for i in range(0, shape[0], chunk):
        rows = out[i:i + chunk]
        rows.copy_(torch.randn(rows.shape, device=comp.DEVICE, dtype=torch.bfloat16))
    return out


class Pools:
    """The largest KV pool this GPU holds for a model, up to `max_tokens` (a smaller GPU measures what
    fits; the shapes beyond it become `skipped` rows), built on first use and kept until `release`."""

    def __init__(self, spec: ModelSpec, max_tokens: int, reserve_bytes: float = 0.0):
        self.spec, self.max_tokens, self.reserve_bytes = spec, max_tokens, reserve_bytes
        self._pool: KVPool | None = None

    def pool(self) -> KVPool:
        if self._pool is None:
            per_token = self.spec.kv_bytes_per_token_layer
            fits = int((FILL * free_bytes() - HEADROOM_BYTES - self.reserve_bytes) // per_token)
            self._pool = KVPool(self.spec, max(0, min(self.max_tokens, fits)))
        return self._pool

    def fits(self, writer: RowWriter, base: dict, ctx: int, batch: int) -> bool:
        """True if the pool holds `batch` requests of `ctx` tokens; else write a `skipped` row."""
        p = self.pool()
        if p.holds(ctx, batch):
            return True
        kv = self.spec.kv_bytes_per_token_layer
        writer.write(base, None, "", status=f"skipped: needs {ctx * batch * kv / 2**30:.1f} GiB of KV; "
                                            f"this GPU holds {p.slots * kv / 2**30:.1f} GiB for the run")
        return False

    def release(self) -> None:
        self._pool = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

