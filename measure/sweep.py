"""`wmtp calibrate` on a GPU: the sweep that feeds the latency-model fit.

Every row is one component (a `wmtp.latency` work kind) at one shape, timed like the kernel
benchmark (`timing.py`: CUDA-graph replay, CUDA events, L2 flushed before each replay, every
replay a row). The shapes span what predictions ask for: draft attention over S in
{4K, 16K, 64K, 256K, 1M} (2M where memory allows) and windows W in {1K, 2K, 4K, 8K}; verify
attention with d in 2..9; batches B in {1, 2, 4, 8}; the non-attention components at the token
counts a draft forward (B) and a verify (B*d) touch. The draft loop is also timed in place, as
gamma = 1..8 consecutive draft forwards of one request batch (attention + MTP head), so L2 reuse at
short context is in the data. `quick` keeps the corners of the grid.

The attention rows and the draft loop run through one attention backend (`measure/backends`:
`wmtp` by default); every attention row's `impl` names it, so a profile fitted on the rows is
that backend's. The non-attention components are the same torch calls for every backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from wmtp.defaults import guess_ms
from wmtp.latency import draft_fwd_work
from wmtp.measure import PARTS
from wmtp.measure import components as comp
from wmtp.measure.attention import decode_case, model_fields, run_case, sweep_cases, verify_case
from wmtp.measure.backends import AttentionBackend, get_backend
from wmtp.measure.harness import KVPool, Pools, RowWriter, error_status, free_bytes, l2_bytes, timed
from wmtp.specs import ModelSpec

K = 1024
Step = tuple[str, Callable[[RowWriter], None]]


@dataclass
class SweepConfig:
    ctxs: tuple = (4 * K, 16 * K, 64 * K, 256 * K, K * K)
    batches: tuple = (1, 2, 4, 8)
    depths: tuple = (2, 3, 4, 5, 6, 7, 8, 9)
    windows: tuple = (1 * K, 2 * K, 4 * K - 64, 8 * K)
    gammas: tuple = (1, 2, 4, 8)
    sink: int = 64
    extra_ctx: int = 2 * K * K  # measured at B=1 where memory allows
    # Draft extends (accepted tokens + 1 query rows) timed on their own where the backend runs them with
    # another kernel than the verify (FlashInfer: causal prefill without the verify's custom mask).
    extend_depths: tuple = (2, 4, 6, 8)

    @classmethod
    def quick(cls) -> "SweepConfig":
        return cls(ctxs=(16 * K, 256 * K, K * K), batches=(1, 4), depths=(2, 5, 9), windows=(4 * K - 64,),
                   gammas=(1, 4), extra_ctx=0, extend_depths=(2, 5))


def _component_row(spec: ModelSpec, work, impl: str = "wmtp", **shape) -> dict:
    return dict(kernel=work.kind, impl=impl, **model_fields(spec), bytes=work.bytes, flops=work.flops,
                config=work.name, **shape)


def _empty_cache() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def attention_steps(spec: ModelSpec, cfg: SweepConfig, backend: AttentionBackend | None = None) -> Iterator[Step]:
    """Decode, verify and index-build rows over one KV pool for the model (the largest this GPU holds,
    up to the sweep's largest B * S), then decode and verify at `extra_ctx` where memory allows."""
    backend = backend or get_backend()
    pools = Pools(spec, max(cfg.ctxs) * max(cfg.batches))
    extends = cfg.extend_depths if backend.separate_extend else ()
    for label, case in sweep_cases(spec, cfg.ctxs, cfg.batches, cfg.depths, cfg.windows, cfg.sink, extends):
        yield label, lambda w, case=case: run_case(w, pools, backend, case)
    yield f"{spec.key} free pool", lambda w: pools.release()
    if cfg.extra_ctx:
        yield f"{spec.key} decode/verify S={cfg.extra_ctx}", lambda w: _extra_ctx(w, spec, cfg, backend)


def kv_fp8_steps(spec: ModelSpec, cfg: SweepConfig, backend: AttentionBackend | None = None) -> Iterator[Step]:
    """The `kv-fp8` part: the attention grid's decode and verify cases (and draft extends where the backend runs
    them apart) over an e4m3 KV pool, their bytes the fp8 cache's (`ModelSpec.with_dtypes`); index builds read no
    K/V and are left out."""
    backend = backend or get_backend()
    spec8 = spec.with_dtypes(kv_dtype="fp8")
    pools = Pools(spec8, max(cfg.ctxs) * max(cfg.batches))
    extends = cfg.extend_depths if backend.separate_extend else ()
    for label, case in sweep_cases(spec8, cfg.ctxs, cfg.batches, cfg.depths, cfg.windows, cfg.sink, extends):
        if case.kernel != "index_build":
            yield f"{label} fp8-kv", lambda w, case=case: run_case(w, pools, backend, case)
    yield f"{spec.key} free fp8 pool", lambda w: pools.release()


def _extra_ctx(writer: RowWriter, spec: ModelSpec, cfg: SweepConfig, backend: AttentionBackend) -> None:
    need = cfg.extra_ctx * spec.kv_bytes_per_token_layer + 2 * 2**30
    if need > 0.9 * free_bytes():
        return
    pools = Pools(spec, cfg.extra_ctx)
    run_case(writer, pools, backend, decode_case(spec, cfg.extra_ctx, 1, "native", 0, cfg.sink))
    run_case(writer, pools, backend, verify_case(spec, cfg.extra_ctx, 1, 7))
    pools.release()


def component_steps(spec: ModelSpec, cfg: SweepConfig, moe_impl: str = "wmtp") -> Iterator[Step]:
    """Non-attention components at the token counts a draft forward (B) and a verify (B*d) touch; the routed
    experts of the `moe` rows run through `moe_impl` (`wmtp`, or `sglang`: SGLang's fused MoE kernel)."""
    draft_tokens = sorted(set(cfg.batches) | {b * q for b in cfg.batches for q in (2, 5)})
    verify_tokens = sorted({b * d for b in cfg.batches for d in cfg.depths if b * d <= 72})

    def run(writer, build):
        try:
            c = build()
        except Exception as e:  # a component that cannot be built here is a row with its reason
            writer.write(dict(kernel="component", impl="wmtp", model=spec.key, dtype="bf16"), None, "",
                         status=error_status(e))
            return
        tokens = c.work.shape.get("tokens", "")
        row = _component_row(spec, c.work, c.impl, ctx="", batch=c.work.shape.get("batch", ""),
                             d=c.work.shape.get("d", ""), window="", sink="") | {"config": f"{c.name};tokens={tokens}"}
        timed(writer, row, c.calls, guess_ms(c.work.bytes))
        del c
        _empty_cache()

    l2 = l2_bytes()
    for t in draft_tokens:
        yield f"{spec.key} mtp T={t}", lambda w, t=t: run(w, lambda: comp.gemm_component(spec, t, l2, "mtp"))
        if spec.mtp_moe:
            yield f"{spec.key} draft moe T={t}", lambda w, t=t: run(
                w, lambda: comp.moe_component(spec, t, l2, "fwd", impl=moe_impl))
        yield f"{spec.key} lm_head T={t}", lambda w, t=t: run(w, lambda: comp.lm_head_component(spec, t, l2))
    for t in verify_tokens:
        if t not in draft_tokens:
            yield f"{spec.key} lm_head T={t}", lambda w, t=t: run(w, lambda: comp.lm_head_component(spec, t, l2))
        yield f"{spec.key} attn proj T={t}", lambda w, t=t: run(w, lambda: comp.gemm_component(spec, t, l2, "attn"))
        if spec.n_linear:
            yield f"{spec.key} linear proj T={t}", lambda w, t=t: run(w, lambda: comp.gemm_component(spec, t, l2, "linear"))
        if spec.n_moe:
            yield f"{spec.key} moe T={t}", lambda w, t=t: run(
                w, lambda: comp.moe_component(spec, t, l2, "verify", impl=moe_impl))
        if spec.n_dense_ffn:
            yield f"{spec.key} ffn T={t}", lambda w, t=t: run(w, lambda: comp.dense_ffn_component(spec, t, l2))
    if spec.n_linear:
        for b in cfg.batches:
            for d in (1,) + tuple(cfg.depths):
                yield (f"{spec.key} state B={b} d={d}",
                       lambda w, b=b, d=d: run(w, lambda: comp.linear_state_component(spec, b, d, l2)))


def draft_loop_steps(spec: ModelSpec, cfg: SweepConfig, backend: AttentionBackend | None = None) -> Iterator[Step]:
    """gamma consecutive draft forwards (attention + MTP projections + FFN + lm_head) in one graph:
    each row's time is per forward (graph time / gamma), kernel 'draft_loop'."""
    backend = backend or get_backend()
    for ctx in cfg.ctxs:
        for b in (1, max(cfg.batches)):
            yield (f"{spec.key} draft loop S={ctx} B={b}",
                   lambda w, ctx=ctx, b=b: _draft_loop(w, spec, cfg, backend, ctx, b, "native", 0))
    win = cfg.windows[len(cfg.windows) // 2]
    yield f"{spec.key} draft loop window", lambda w: _draft_loop(w, spec, cfg, backend, max(cfg.ctxs), 1, "window", win)


def _draft_loop(writer: RowWriter, spec: ModelSpec, cfg: SweepConfig, backend: AttentionBackend, ctx: int,
                batch: int, mode: str, window: int) -> None:
    base = dict(kernel="draft_loop", impl=backend.name, model=spec.key, ctx=ctx, batch=batch)
    need = ctx * batch * spec.kv_bytes_per_token_layer + 4 * 2**30
    if need > 0.9 * free_bytes():
        writer.write(base, None, "", status=f"skipped: needs {need / 2**30:.1f} GiB")
        return
    l2 = l2_bytes()
    pool = KVPool(spec, ctx * batch)
    paged = pool.index_set(ctx, batch, mode, window, cfg.sink)
    q = torch.randn(batch, spec.q_heads, spec.head_dim, device=comp.DEVICE, dtype=torch.bfloat16)
    o = torch.empty_like(q)
    parts = [comp.gemm_component(spec, batch, l2, "mtp"), comp.lm_head_component(spec, batch, l2)]
    if spec.mtp_moe:
        parts.append(comp.moe_component(spec, batch, l2, "fwd"))
    head = [p.calls[0] for p in parts]
    items = draft_fwd_work(spec, paged.n, batch)
    total = sum(w.bytes for w in items)
    row = {**base, **model_fields(spec), "d": "", "window": window if mode == "window" else "", "sink": cfg.sink,
           "bytes": total, "flops": sum(w.flops for w in items)}
    try:
        attend = backend.decode(pool.k, pool.v, paged, q, o)
    except Exception as e:  # a backend that cannot plan this shape: rows with the reason
        for gamma in cfg.gammas:
            writer.write({**row, "d": gamma + 1, "config": f"gamma={gamma};{mode}"}, None, "", status=error_status(e))
        return

    def forward():
        attend()
        for h in head:
            h()

    for gamma in cfg.gammas:
        timed(writer, {**row, "d": gamma + 1, "config": f"gamma={gamma};{mode}"}, [forward] * gamma, guess_ms(total),
              flush=True)
    del pool, parts, head
    _empty_cache()


def sweep_plan(specs: list[ModelSpec], cfg: SweepConfig, backend: AttentionBackend | None = None,
               parts: tuple[str, ...] = PARTS, moe_impl: str = "wmtp") -> list[Step]:
    """The sweep's steps for `parts` (`wmtp.calibrate.sweep_run.PART_KINDS` says which rows each part writes);
    `moe_impl` picks the routed-expert kernel of the `moe` rows."""
    backend = backend or get_backend()
    steps: list[Step] = []
    for spec in specs:
        if "attention" in parts:
            steps += list(attention_steps(spec, cfg, backend))
        if "components" in parts:
            steps += list(component_steps(spec, cfg, moe_impl))
        if "loop" in parts:
            steps += list(draft_loop_steps(spec, cfg, backend))
        if "kv-fp8" in parts:
            steps += list(kv_fp8_steps(spec, cfg, backend))
    return steps
