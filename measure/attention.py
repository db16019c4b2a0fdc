"""Attention and index-build measurements: one case = one kernel at one shape through one backend,
timed by the harness over the model's KV pool (`harness.Pools`). The kernel benchmark
(`bench.py`) and the calibration sweep (`sweep.py`) differ only in the grid of cases they build
(`bench_cases`, `sweep_cases`) and in how their rows are labelled.

Bytes and flops: attention reads each K and V row of its index set once (B * n * kv_bytes_per_token)
and computes 4 * q_heads * head_dim flops per (query row, key); the sweep takes both from the
`wmtp.latency` work item of the same shape, so the fit and the model speak of the same quantity.
The index build reads and writes one int32 per entry (ring: writes only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

from wmtp.defaults import guess_ms
from wmtp.kernel_plan import default_kernel
from wmtp.latency import attention_flops, draft_ctx_work, draft_fwd_work, verify_work
from wmtp.measure import components as comp
from wmtp.measure.backends import AttentionBackend
from wmtp.measure.harness import Pools, RowWriter, error_status, impl_name, timed
from wmtp.specs import ModelSpec

INDEX_MODES = {"wmtp": ("native", "window", "ring"), "flashinfer": ("native", "window"),
               "engine-index": ("native", "window")}


@dataclass
class AttnCase:
    kernel: str  # decode_attn | verify_attn | extend_attn | index_build
    ctx: int  # tokens of each request's req_to_token row
    batch: int
    d: int = 1  # query rows per request
    mode: str = "native"  # index set: native (all ctx keys) | window (sink + last W) | ring
    window: int = 0
    sink: int = 0
    row: dict = field(default_factory=dict)  # row fields: config, bytes, flops, window / sink labels
    variants: list = field(default_factory=lambda: [{}])  # tuning options; the first is the shipped default


def model_fields(spec: ModelSpec) -> dict:
    return dict(model=spec.key, q_heads=spec.q_heads, kv_heads=spec.kv_heads, head_dim=spec.head_dim, dtype="bf16")


def plan_call(backend: AttentionBackend, case: AttnCase, spec: ModelSpec, k, v, paged, kw: dict) -> Callable[[], object]:
    """Plan the case's kernel once (fresh random queries); the returned call only launches it."""
    if case.kernel == "index_build":
        return backend.index_build(paged, **kw)
    q = torch.randn(case.batch * case.d, spec.q_heads, spec.head_dim, device=comp.DEVICE, dtype=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    if case.kernel == "decode_attn":
        return backend.decode(k, v, paged, q, out, **kw)
    if case.kernel == "verify_attn":
        return backend.verify(k, v, paged, q, out, case.d, **kw)
    return backend.extend(k, v, paged, q, out, case.d, **kw)


def run_case(writer: RowWriter, pools: Pools, backend: AttentionBackend, case: AttnCase) -> None:
    """Time every variant of `case` into rows (skipped and failed shapes are rows too)."""
    spec = pools.spec
    base = {**model_fields(spec), "kernel": case.kernel, "impl": backend.name, "ctx": case.ctx, "batch": case.batch,
            "d": case.d, **case.row, **({"dtype": spec.kv_dtype} if case.kernel != "index_build" else {})}
    if not pools.fits(writer, base, case.ctx, case.batch):
        return
    pool = pools.pool()
    paged = pool.index_set(case.ctx, case.batch, case.mode, case.window, case.sink)
    for i, kw in enumerate(case.variants):
        labelled = {**base, "impl": impl_name(backend.name, i, kw)}
        try:
            call = plan_call(backend, case, spec, pool.k, pool.v, paged, kw)
        except Exception as e:  # a shape the backend cannot plan is a row with its reason
            writer.write(labelled, None, "", status=error_status(e))
            continue
        timed(writer, labelled, [call], guess_ms(float(base.get("bytes") or 0.0)))


def _attention_row(spec: ModelSpec, n: int, batch: int, d: int, config: str) -> dict:
    kv_tok = spec.kv_bytes_per_token_layer
    return dict(config=config, bytes=batch * n * kv_tok, flops=batch * attention_flops(spec, d, n))


def _pinned(tune: dict, spec: ModelSpec, batch: int, q_len: dict) -> dict:
    """wmtp's attention tuning variants (block_n, num_warps, ...) tune the kernels chosen before the ws kernel:
    each names the one `default_kernel` picks without ws, so they run where ws is now the default (it takes
    none of those options)."""
    out = {}
    for (kind, mode), variants in tune.items():
        if kind in ("decode_attn", "verify_attn", "extend_attn"):
            k = default_kernel(batch, spec.group_size, q_len.get(kind, 1), spec.head_dim)
            variants = [v | {"kernel": k} for v in variants]
        out[(kind, mode)] = variants
    return out


def bench_cases(spec: ModelSpec, backend: str, ctx: int, batch: int, *, depth: int, extend_queries: int,
                window: int, sink: int, tune: dict | None = None) -> list[AttnCase]:
    """The kernel benchmark at one (ctx, B): index builds (native, window, ring where the backend has
    it), decode over the native and windowed sets, verify (d = depth, native), draft extend
    (window and native). `tune` maps (kernel, mode) to extra variants, timed beside the default."""
    tune = tune or {}
    if backend == "wmtp":
        tune = _pinned(tune, spec, batch, {"verify_attn": depth, "extend_attn": extend_queries})
    s_win = min(ctx, window + sink)
    sizes = {"native": ctx, "window": s_win, "ring": s_win}
    cases = []
    for mode in INDEX_MODES.get(backend, ()):
        n = sizes[mode]
        cases.append(AttnCase("index_build", ctx, batch, 1, mode, window, sink,
                              dict(config=mode, bytes=(4 if mode == "ring" else 8) * batch * n, flops=0,
                                   window=window, sink=sink),
                              [{}] + tune.get(("index_build", mode), [])))
    if backend not in ("wmtp", "flashinfer"):
        return cases
    for mode in ("native", "window"):
        cases.append(AttnCase("decode_attn", ctx, batch, 1, mode, window, sink,
                              _attention_row(spec, sizes[mode], batch, 1, mode)
                              | dict(window=window, sink=sink), [{}] + tune.get(("decode_attn", mode), [])))
    for d, mode, kernel in ((depth, "native", "verify_attn"), (extend_queries, "window", "extend_attn"),
                            (extend_queries, "native", "extend_attn")):
        cases.append(AttnCase(kernel, ctx, batch, d, mode, window, sink,
                              _attention_row(spec, sizes[mode], batch, d, mode) | dict(window=window, sink=sink),
                              [{}] + tune.get((kernel, mode), [])))
    return cases


def _work_row(work, **shape) -> dict:
    return dict(config=work.name, bytes=work.bytes, flops=work.flops, **shape)


def decode_case(spec: ModelSpec, ctx: int, batch: int, mode: str, window: int, sink: int) -> AttnCase:
    n = ctx if mode == "native" else min(ctx, window + sink)
    w = [x for x in draft_fwd_work(spec, n, batch) if x.kind == "decode_attn"][0]
    return AttnCase("decode_attn", ctx, batch, 1, mode, window, sink,
                    _work_row(w, window=window if mode == "window" else "", sink=sink))


def verify_case(spec: ModelSpec, ctx: int, batch: int, d: int) -> AttnCase:
    w = [x for x in verify_work(spec, ctx - d, d, batch) if x.kind == "verify_attn"][0]
    return AttnCase("verify_attn", ctx, batch, d, "native", 0, 0, _work_row(w))


def extend_case(spec: ModelSpec, ctx: int, batch: int, d: int, mode: str, window: int, sink: int) -> AttnCase:
    n = ctx if mode == "native" else min(ctx, window + sink)
    w = [x for x in draft_ctx_work(spec, n, batch, float(d)) if x.kind == "extend_attn"][0]
    return AttnCase("extend_attn", ctx, batch, d, mode, window, sink,
                    _work_row(w, window=window if mode == "window" else "", sink=sink))


def index_case(spec: ModelSpec, ctx: int, batch: int, mode: str, window: int, sink: int) -> AttnCase:
    n = ctx if mode == "native" else min(ctx, window + sink)
    w = [x for x in draft_ctx_work(spec, n, batch, 1.0) if x.kind == "index_build"][0]
    return AttnCase("index_build", ctx, batch, 1, mode, window, sink,
                    _work_row(w, window=window if mode != "native" else "", sink=sink))


def sweep_cases(spec: ModelSpec, ctxs, batches, depths, windows, sink: int,
                extend_depths=()) -> Iterator[tuple[str, AttnCase]]:
    """The calibration sweep's attention grid, labelled for `--resume`: decode and index builds per
    (S, B); verify per (S, d) at B = 1 and per B at d = 7; windowed decode and index builds per
    (W, B) at the largest S; draft extends (native, window) per d in `extend_depths`."""
    for ctx in ctxs:
        for b in batches:
            yield f"{spec.key} decode S={ctx} B={b}", decode_case(spec, ctx, b, "native", 0, sink)
            yield f"{spec.key} index S={ctx} B={b}", index_case(spec, ctx, b, "native", 0, sink)
        for d in depths:
            yield f"{spec.key} verify S={ctx} d={d}", verify_case(spec, ctx, 1, d)
        for b in batches[1:]:
            yield f"{spec.key} verify S={ctx} B={b}", verify_case(spec, ctx, b, 7)
        for d in extend_depths:
            yield f"{spec.key} extend S={ctx} d={d}", extend_case(spec, ctx, 1, d, "native", 0, sink)
    big = max(ctxs)
    for win in windows:
        for b in batches:
            yield f"{spec.key} window W={win} B={b}", decode_case(spec, big, b, "window", win, sink)
            yield f"{spec.key} window-index W={win} B={b}", index_case(spec, big, b, "window", win, sink)
        for d in extend_depths:
            yield f"{spec.key} window extend W={win} d={d}", extend_case(spec, big, 1, d, "window", win, sink)
