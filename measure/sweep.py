"""`wmtp calibrate` on a GPU: the sweep that feeds the latency-model fit.

Every row is one component (a `wmtp.latency` work kind) at one shape, timed like the kernel
benchmark (`timing.py`: CUDA-graph replay, CUDA events, L2 flushed before each replay, every
replay a row). The shapes span what predictions ask for: draft attention over S in
{4K, 16K, 64K, 256K, 1M} (2M where memory allows) and windows W in {1K, 2K, 4K, 8K}; verify
attention with d in 2..9; batches B in {1, 2, 4, 8}; the non-attention components at the token
counts a draft forward (B) and a verify (B*d) touch. The draft loop is also timed in place, as
gamma = 1..8 consecutive draft forwards of one request batch (attention + MTP head), so L2 reuse at
short context is in the data. `quick` keeps the corners of the grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from wmtp.latency import Work, _attention_flops, draft_ctx_work, draft_fwd_work, verify_work
from wmtp.measure import components as comp
from wmtp.measure.bench import RowWriter, _l2_bytes, _free_bytes, _timed
from wmtp.measure.kernels.index_build import build_kv_indices
from wmtp.measure.kernels.paged_attention import decode_attention, verify_attention
from wmtp.specs import ModelSpec

K = 1024


@dataclass
class SweepConfig:
    ctxs: tuple = (4 * K, 16 * K, 64 * K, 256 * K, K * K)
    batches: tuple = (1, 2, 4, 8)
    depths: tuple = (2, 3, 4, 5, 6, 7, 8, 9)
    windows: tuple = (1 * K, 2 * K, 4 * K - 64, 8 * K)
    gammas: tuple = (1, 2, 4, 8)
    sink: int = 64
    extra_ctx: int = 2 * K * K  # measured at B=1 where memory allows

    @classmethod
    def quick(cls) -> "SweepConfig":
        return cls(ctxs=(16 * K, 256 * K, K * K), batches=(1, 4), depths=(2, 5, 9), windows=(4 * K - 64,),
                   gammas=(1, 4), extra_ctx=0)


def _row(spec: ModelSpec, work: Work, **shape) -> dict:
    return dict(kernel=work.kind, impl="wmtp", model=spec.key, q_heads=spec.q_heads, kv_heads=spec.kv_heads,
                head_dim=spec.head_dim, dtype="bf16", bytes=work.bytes, flops=work.flops,
                config=work.name, **shape)


class Pool:
    """One KV pool per head shape, sized for the largest B * S of the sweep; index sets are carved
    from random permutations of its slots."""

    def __init__(self, spec: ModelSpec, slots: int):
        self.spec = spec
        self.slots = slots
        shape = (slots, spec.kv_heads, spec.head_dim)
        self.k = torch.randn(shape, device=comp.DEVICE, dtype=torch.bfloat16)
        self.v = torch.randn(shape, device=comp.DEVICE, dtype=torch.bfloat16)

    def indices(self, ctx: int, batch: int, mode: str, window: int, sink: int):
        perm = torch.randperm(self.slots, device=comp.DEVICE)[: ctx * batch].to(torch.int32).view(batch, ctx)
        seq = torch.full((batch,), ctx, device=comp.DEVICE, dtype=torch.int32)
        n = ctx if mode == "native" else min(ctx, window + sink)
        ptr = torch.arange(batch + 1, device=comp.DEVICE, dtype=torch.int32) * n
        out = torch.empty(batch * n, device=comp.DEVICE, dtype=torch.int32)
        build_kv_indices(perm, seq, mode, sink, window, 1, max_len=ctx, kv_indptr=ptr, out=out)
        return perm, seq, ptr, out, n


def attention_steps(spec: ModelSpec, cfg: SweepConfig) -> Iterator[tuple[str, Callable[[RowWriter], None]]]:
    max_tokens = max(cfg.ctxs) * max(cfg.batches)
    state: dict = {}

    def pool() -> Pool:
        """The largest pool this GPU holds, up to the sweep's largest B * S (a smaller GPU measures
        what fits; the shapes beyond it become `skipped` rows)."""
        if "pool" not in state:
            per_token = spec.kv_bytes_per_token_layer
            fits = int((0.9 * _free_bytes() - 2 * 2**30) // per_token)
            state["pool"] = Pool(spec, max(0, min(max_tokens, fits)))
        return state["pool"]

    def fits(writer, kind, ctx, batch, d=1) -> bool:
        p = pool()
        if ctx * batch <= p.slots:
            return True
        writer.write(dict(kernel=kind, impl="wmtp", model=spec.key, ctx=ctx, batch=batch, d=d, dtype="bf16"), None, "",
                     status=f"skipped: needs {ctx * batch * spec.kv_bytes_per_token_layer / 2**30:.1f} GiB of KV; "
                            f"this GPU holds {p.slots * spec.kv_bytes_per_token_layer / 2**30:.1f} GiB for the sweep")
        return False

    def decode(writer, ctx, batch, mode, window):
        if not fits(writer, "decode_attn", ctx, batch):
            return
        p = pool()
        _, _, ptr, ind, n = p.indices(ctx, batch, mode, window, cfg.sink)
        q = torch.randn(batch, spec.q_heads, spec.head_dim, device=comp.DEVICE, dtype=torch.bfloat16)
        o = torch.empty_like(q)
        w = [x for x in draft_fwd_work(spec, n, batch) if x.kind == "decode_attn"][0]
        _timed(writer, _row(spec, w, ctx=ctx, batch=batch, d=1, window=window if mode == "window" else "",
                            sink=cfg.sink),
               [lambda: decode_attention(q, p.k, p.v, ptr, ind, n, out=o)], w.bytes / 3e9)

    def verify(writer, ctx, batch, d):
        if not fits(writer, "verify_attn", ctx, batch, d):
            return
        p = pool()
        _, _, ptr, ind, n = p.indices(ctx, batch, "native", 0, 0)
        q = torch.randn(batch * d, spec.q_heads, spec.head_dim, device=comp.DEVICE, dtype=torch.bfloat16)
        o = torch.empty_like(q)
        qo = torch.arange(batch + 1, device=comp.DEVICE, dtype=torch.int32) * d
        w = [x for x in verify_work(spec, ctx - d, d, batch) if x.kind == "verify_attn"][0]
        _timed(writer, _row(spec, w, ctx=ctx, batch=batch, d=d),
               [lambda: verify_attention(q, p.k, p.v, ptr, ind, qo, d, n, out=o)], w.bytes / 3e9)

    def index(writer, ctx, batch, mode, window):
        if not fits(writer, "index_build", ctx, batch):
            return
        p = pool()
        r2t, seq, ptr, out, n = p.indices(ctx, batch, mode, window, cfg.sink)
        w = [x for x in draft_ctx_work(spec, n, batch, 1.0) if x.kind == "index_build"][0]
        _timed(writer, _row(spec, w, ctx=ctx, batch=batch, d=1, window=window if mode != "native" else "",
                            sink=cfg.sink),
               [lambda: build_kv_indices(r2t, seq, mode, cfg.sink, window, 1, max_len=ctx, kv_indptr=ptr, out=out)],
               w.bytes / 3e9)

    for ctx in cfg.ctxs:
        for b in cfg.batches:
            yield f"{spec.key} decode S={ctx} B={b}", lambda w, ctx=ctx, b=b: decode(w, ctx, b, "native", 0)
            yield f"{spec.key} index S={ctx} B={b}", lambda w, ctx=ctx, b=b: index(w, ctx, b, "native", 0)
        for d in cfg.depths:
            yield f"{spec.key} verify S={ctx} d={d}", lambda w, ctx=ctx, d=d: verify(w, ctx, 1, d)
        for b in cfg.batches[1:]:
            yield f"{spec.key} verify S={ctx} B={b}", lambda w, ctx=ctx, b=b: verify(w, ctx, b, 7)
    big = max(cfg.ctxs)
    for win in cfg.windows:
        for b in cfg.batches:
            yield f"{spec.key} window W={win} B={b}", lambda w, win=win, b=b: decode(w, big, b, "window", win)
            yield f"{spec.key} window-index W={win} B={b}", lambda w, win=win, b=b: index(w, big, b, "window", win)
    yield f"{spec.key} free pool", lambda w: (state.clear(), torch.cuda.empty_cache())
    if cfg.extra_ctx:
        def extra(writer):
            need = cfg.extra_ctx * spec.kv_bytes_per_token_layer + 2 * 2**30
            if need > 0.9 * _free_bytes():
                return
            state["pool"] = Pool(spec, cfg.extra_ctx)
            decode(writer, cfg.extra_ctx, 1, "native", 0)
            verify(writer, cfg.extra_ctx, 1, 7)
            state.clear()
            torch.cuda.empty_cache()
        yield f"{spec.key} decode/verify S={cfg.extra_ctx}", extra


def component_steps(spec: ModelSpec, cfg: SweepConfig) -> Iterator[tuple[str, Callable[[RowWriter], None]]]:
    """Non-attention components at the token counts a draft forward (B) and a verify (B*d) touch."""
    draft_tokens = sorted(set(cfg.batches) | {b * q for b in cfg.batches for q in (2, 5)})
    verify_tokens = sorted({b * d for b in cfg.batches for d in cfg.depths if b * d <= 72})

    def run(writer, build):
        try:
            c = build()
        except Exception as e:  # a component that cannot be built here is a row with its reason
            writer.write(dict(kernel="component", impl="wmtp", model=spec.key, dtype="bf16"), None, "",
                         status=f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            return
        tokens = c.work.shape.get("tokens", "")
        _timed(writer, _row(spec, c.work, ctx="", batch=c.work.shape.get("batch", ""), d=c.work.shape.get("d", ""),
                            window="", sink="") | {"config": f"{c.name};tokens={tokens}"}, c.calls, c.work.bytes / 3e9)
        del c
        torch.cuda.empty_cache()

    l2 = _l2_bytes()
    for t in draft_tokens:
        yield f"{spec.key} mtp T={t}", lambda w, t=t: run(w, lambda: comp.gemm_component(spec, t, l2, "mtp"))
        if spec.mtp_moe:
            yield f"{spec.key} draft moe T={t}", lambda w, t=t: run(w, lambda: comp.moe_component(spec, t, l2, "fwd"))
        yield f"{spec.key} lm_head T={t}", lambda w, t=t: run(w, lambda: comp.lm_head_component(spec, t, l2))
    for t in verify_tokens:
        if t not in draft_tokens:
            yield f"{spec.key} lm_head T={t}", lambda w, t=t: run(w, lambda: comp.lm_head_component(spec, t, l2))
        yield f"{spec.key} attn proj T={t}", lambda w, t=t: run(w, lambda: comp.gemm_component(spec, t, l2, "attn"))
        if spec.n_linear:
            yield f"{spec.key} linear proj T={t}", lambda w, t=t: run(w, lambda: comp.gemm_component(spec, t, l2, "linear"))
        if spec.n_moe:
            yield f"{spec.key} moe T={t}", lambda w, t=t: run(w, lambda: comp.moe_component(spec, t, l2, "verify"))
        if spec.n_dense_ffn:
            yield f"{spec.key} ffn T={t}", lambda w, t=t: run(w, lambda: comp.dense_ffn_component(spec, t, l2))
    if spec.n_linear:
        for b in cfg.batches:
            for d in (1,) + tuple(cfg.depths):
                yield (f"{spec.key} state B={b} d={d}",
                       lambda w, b=b, d=d: run(w, lambda: comp.linear_state_component(spec, b, d, l2)))


def draft_loop_steps(spec: ModelSpec, cfg: SweepConfig) -> Iterator[tuple[str, Callable[[RowWriter], None]]]:
    """gamma consecutive draft forwards (attention + MTP projections + FFN + lm_head) in one graph:
    each row's time is per forward (graph time / gamma), kernel 'draft_loop'."""
    l2 = _l2_bytes()

    def loop(writer, ctx, batch, mode, window):
        need = ctx * batch * spec.kv_bytes_per_token_layer + 4 * 2**30
        if need > 0.9 * _free_bytes():
            writer.write(dict(kernel="draft_loop", model=spec.key, ctx=ctx, batch=batch), None, "",
                         status=f"skipped: needs {need / 2**30:.1f} GiB")
            return
        pool = Pool(spec, ctx * batch)
        _, _, ptr, ind, n = pool.indices(ctx, batch, mode, window, cfg.sink)
        q = torch.randn(batch, spec.q_heads, spec.head_dim, device=comp.DEVICE, dtype=torch.bfloat16)
        o = torch.empty_like(q)
        parts = [comp.gemm_component(spec, batch, l2, "mtp"), comp.lm_head_component(spec, batch, l2)]
        if spec.mtp_moe:
            parts.append(comp.moe_component(spec, batch, l2, "fwd"))
        head = [p.calls[0] for p in parts]

        def forward():
            decode_attention(q, pool.k, pool.v, ptr, ind, n, out=o)
            for h in head:
                h()

        for gamma in cfg.gammas:
            items = draft_fwd_work(spec, n, batch)
            total = sum(w.bytes for w in items)
            _timed(writer, dict(kernel="draft_loop", impl="wmtp", model=spec.key, ctx=ctx, batch=batch, d=gamma + 1,
                                window=window if mode == "window" else "", sink=cfg.sink, q_heads=spec.q_heads,
                                kv_heads=spec.kv_heads, head_dim=spec.head_dim, dtype="bf16", bytes=total,
                                flops=sum(w.flops for w in items), config=f"gamma={gamma};{mode}"),
                   [forward] * gamma, total / 3e9, flush=True)
        del pool, parts, head
        torch.cuda.empty_cache()

    for ctx in cfg.ctxs:
        for b in (1, max(cfg.batches)):
            yield f"{spec.key} draft loop S={ctx} B={b}", lambda w, ctx=ctx, b=b: loop(w, ctx, b, "native", 0)
    win = cfg.windows[len(cfg.windows) // 2]
    yield f"{spec.key} draft loop window", lambda w: loop(w, max(cfg.ctxs), 1, "window", win)


def sweep_plan(specs: list[ModelSpec], cfg: SweepConfig) -> list[tuple[str, Callable[[RowWriter], None]]]:
    steps = []
    for spec in specs:
        steps += list(attention_steps(spec, cfg))
        steps += list(component_steps(spec, cfg))
        steps += list(draft_loop_steps(spec, cfg))
    return steps

