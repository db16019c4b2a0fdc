"""A whole speculative iteration built from the measured pieces, for validating the latency model.

At a model row's real shapes, every layer with its own random weights and its own KV pool (bf16, or e4m3 for fp8 KV):
  verify  for each full-attention layer: projections, verify attention (d queries over S keys),
          its FFN; for each linear-attention layer: projections, recurrent-state update, its FFN;
          then the lm_head over B*d tokens;
  draft   the KV-index build (native: all S positions; window: sink + last W), the draft-extend
          pass (ceil(AL) queries over S_eff keys, MTP projections, FFN), then gamma draft forwards
          (1-query attention over S_eff keys, MTP projections, FFN, the shared lm_head).
The attention kernels and index builds come from one attention backend (`measure/backends`:
`wmtp` by default, or `flashinfer` as SGLang plans it), planned once per step; the routed experts of
every MoE layer from one MoE kernel (`moe_impl`: wmtp's own, or `sglang`'s fused MoE).
The iteration is captured in one CUDA graph and replayed (CUDA events; L2 not flushed: one replay
follows another, as decode steps do). Where the weights do not fit, the layer counts are scaled
down together (`fit_layers`) and the prediction is made for the same truncated row.

`composed_rows` is the one row loop over (method, ctx, d) that `wmtp validate` and the
tensor-parallel benchmark share: it prices each step, builds and times it, and yields one row per
step (a step that cannot be built or timed is a row with its reason).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Iterable, Iterator

import torch

from wmtp.acceptance import choose_acceptance
from wmtp.measure import components as comp
from wmtp.measure.backends import AttentionBackend, Paged, get_backend
from wmtp.measure.harness import error_status, kv_tensor
from wmtp.measure.timing import time_calls
from wmtp.memory import weights_bytes
from wmtp.specs import ModelSpec


def fit_layers(spec: ModelSpec, ctx: int, budget_bytes: float) -> tuple[ModelSpec, str]:
    """The row itself if its bf16 weights and KV at `ctx` fit `budget_bytes`, else the same row with
    its layer counts scaled down together (at least one of each kind)."""
    s = spec.with_dtypes(weight_dtype="bf16")
    kv = (s.n_full_attn + 1) * s.kv_bytes_per_token_layer * ctx
    need = weights_bytes(s, with_mtp=True) + kv
    if need <= budget_bytes:
        return s, "full model"
    fixed = (s.lm_head_params + s.mtp_params + s.vocab * s.hidden) * 2 + s.kv_bytes_per_token_layer * ctx
    per_layers = need - fixed
    f = max(0.0, (budget_bytes - fixed) / per_layers)

    def scaled(n: int) -> int:
        return 0 if n == 0 else max(1, math.floor(n * f))

    t = replace(s, n_full_attn=scaled(s.n_full_attn), n_linear=scaled(s.n_linear), n_moe=scaled(s.n_moe),
                n_dense_ffn=scaled(s.n_dense_ffn))
    t = replace(t, n_layers=t.n_full_attn + t.n_linear if s.family != "nemotron_h" else t.n_full_attn + t.n_linear + t.n_moe)
    note = (f"weights do not fit in bf16 ({need / 2**30:.0f} GiB needed, {budget_bytes / 2**30:.0f} GiB budget): "
            f"layers scaled to F={t.n_full_attn}, linear={t.n_linear}, moe={t.n_moe}, dense={t.n_dense_ffn}")
    return t, note


class ComposedModel:
    """Weights and KV pools (in the row's KV dtype: bf16 or fp8 e4m3) for one (truncated) model at context up to
    `max_ctx`, batch 1."""

    def __init__(self, spec: ModelSpec, max_ctx: int, l2: float, backend: AttentionBackend | None = None,
                 moe_impl: str = "wmtp"):
        if moe_impl not in comp.MOE_IMPLS:
            raise ValueError(f"unknown MoE implementation {moe_impl!r}; known: {', '.join(comp.MOE_IMPLS)}")
        self.spec, self.max_ctx, self.moe_impl = spec, max_ctx, moe_impl
        s = spec
        self.l2 = l2
        self.backend = backend or get_backend()
        dev = comp.DEVICE
        shape = (max_ctx, s.kv_heads, s.head_dim)
        # the target's pools and the draft's in the row's KV dtype (an engine's --kv-cache-dtype holds for both)
        self.kv = [(kv_tensor(shape, s.kv_dtype), kv_tensor(shape, s.kv_dtype)) for _ in range(s.n_full_attn)]
        self.draft_kv = (kv_tensor(shape, s.kv_dtype), kv_tensor(shape, s.kv_dtype))
        self.lm_w = comp.rand_weight(s.vocab, s.hidden)
        self.r2t = torch.randperm(max_ctx, device=dev).to(torch.int32).view(1, max_ctx)

    def step(self, method: str, ctx: int, d: int, window: int, sink: int, extend_q: int,
             collective=None) -> list:
        """The calls of one iteration, in order (dense: method 'dense', d = 1, no draft).

        `collective(tokens, width)` returns a call that all-reduces a [tokens, width] bf16 buffer
        across tensor-parallel ranks: one after every mixer and FFN, and for the logits slice,
        as `wmtp.tp.tp_collectives` counts them."""
        s, l2, dev, moe = self.spec, self.l2, comp.DEVICE, self.moe_impl
        ar = collective or (lambda tokens, width: None)

        def add_ar(calls, tokens, width):
            c = ar(tokens, width)
            if c is not None:
                calls.append(c)
        if ctx > self.max_ctx:
            raise ValueError("ctx beyond the allocated pools")
        seq = torch.tensor([ctx], device=dev, dtype=torch.int32)
        r2t = self.r2t[:, :ctx].contiguous() if ctx < self.max_ctx else self.r2t
        if ctx < self.max_ctx:  # slots of a shorter request: a random subset of the pool
            r2t = torch.randperm(self.max_ctx, device=dev)[:ctx].to(torch.int32).view(1, ctx)
        nat = Paged(r2t, seq, torch.tensor([0, ctx], device=dev, dtype=torch.int32), r2t.view(-1), ctx, 1, ctx)
        attn = self.backend
        calls = []
        tokens = d
        qv = torch.randn(tokens, s.q_heads, s.head_dim, device=dev, dtype=torch.bfloat16)
        ov = torch.empty_like(qv)
        ffn = (lambda: comp.moe_component(s, tokens, l2, "verify", copies=1, impl=moe)) if s.n_moe else (
            lambda: comp.dense_ffn_component(s, tokens, l2, copies=1))
        n_ffn = s.n_moe + s.n_dense_ffn
        ffns = [ffn().calls[0] for _ in range(n_ffn)]
        for i in range(s.n_full_attn):
            calls.append(comp.gemm_component(s, tokens, l2, "attn", copies=1).calls[0])
            k, v = self.kv[i]
            # dense decoding's one token runs the engine's decode kernel (SGLang: the decode wrapper), not a verify
            dense = method == "dense"
            calls.append(attn.decode(k, v, nat, qv, ov) if dense else attn.verify(k, v, nat, qv, ov, tokens))
            add_ar(calls, tokens, s.hidden)
        for _ in range(s.n_linear):
            calls.append(comp.gemm_component(s, tokens, l2, "linear", copies=1).calls[0])
            calls.append(comp.linear_state_component(s, 1, tokens, l2, copies=1).calls[0])
            add_ar(calls, tokens, s.hidden)
        for f in ffns:
            calls.append(f)
            add_ar(calls, tokens, s.hidden)
        calls.append(comp.lm_head_component(s, tokens, l2, copies=1, weight=self.lm_w).calls[0])
        add_ar(calls, tokens, s.vocab)
        if method == "dense":
            return calls
        mode = "native" if method == "native" else "window"
        n = ctx if mode == "native" else min(ctx, window + sink)
        draft = Paged(r2t, seq, torch.tensor([0, n], device=dev, dtype=torch.int32),
                      torch.empty(n, device=dev, dtype=torch.int32), ctx, 1, n, mode, window, sink)
        build = attn.index_build(draft)
        build()  # the indices the draft's attention plans read
        calls.append(build)
        dk, dv = self.draft_kv
        qe = torch.randn(extend_q, s.q_heads, s.head_dim, device=dev, dtype=torch.bfloat16)
        oe = torch.empty_like(qe)
        calls.append(attn.extend(dk, dv, draft, qe, oe, extend_q))
        calls.append(comp.gemm_component(s, extend_q, l2, "mtp", copies=1).calls[0])
        mtp_ffn = comp.moe_component(s, extend_q, l2, "fwd", copies=1, impl=moe) if s.mtp_moe else comp.dense_ffn_component(
            s, extend_q, l2, copies=1)
        calls.append(mtp_ffn.calls[0])
        for _ in range(3):  # eh-projection, mixer, FFN
            add_ar(calls, extend_q, s.hidden)
        q1 = torch.randn(1, s.q_heads, s.head_dim, device=dev, dtype=torch.bfloat16)
        o1 = torch.empty_like(q1)
        fwd = [comp.gemm_component(s, 1, l2, "mtp", copies=1).calls[0],
               (comp.moe_component(s, 1, l2, "fwd", copies=1, impl=moe) if s.mtp_moe else
                comp.dense_ffn_component(s, 1, l2, copies=1)).calls[0],
               comp.lm_head_component(s, 1, l2, copies=1, weight=self.lm_w).calls[0]]
        fwd_ar = []
        for _ in range(3):
            add_ar(fwd_ar, 1, s.hidden)
        add_ar(fwd_ar, 1, s.vocab)
        decode = attn.decode(dk, dv, draft, q1, o1)
        for _ in range(d - 1):
            calls.append(decode)
            calls += fwd + fwd_ar
        return calls


def time_step(calls: list, reps: int = 20, graph: bool = True) -> list[float]:
    """Per-iteration samples in ms (graph replay of the whole iteration, or eager with `graph=False`)."""
    t = time_calls([lambda: [c() for c in calls]], reps=reps, warmup=3, flush=False, graph=graph)
    return t.samples_ms


def step_plan(ctxs: Iterable[int], depths: Iterable[int]) -> Iterator[tuple[str, int, int]]:
    """(method, ctx, d) of a validation: dense, then native and windowed at every depth, per ctx."""
    depths = tuple(depths)
    for ctx in ctxs:
        yield "dense", ctx, 1
        for d in depths:
            for method in ("native", "window"):
                yield method, ctx, d


def extend_queries(model_key: str, d: int) -> int:
    """Queries of the draft-extend pass: ceil(AL) of the model's acceptance preset at depth d, in 1..d."""
    if d <= 1:
        return 1
    al = choose_acceptance(model_key, max(d, 2), None).native.accept_length(max(d, 2))
    return max(1, min(d, math.ceil(al)))


def composed_rows(model: ComposedModel, model_key: str, plan: Iterable[tuple[str, int, int]],
                  predict: Callable[[str, int, int, int], object], *, window: int, sink: int, collective=None,
                  reduce_ms: Callable[[float], float] | None = None, reps: int = 20,
                  on_step: Callable[[str], None] | None = None) -> Iterator[dict]:
    """Price, build and time each (method, ctx, d) step of `plan` on `model`; one row per step.

    `predict(method, ctx, d, extend_queries)` returns the priced step (`.step_ms`, `.source`);
    `reduce_ms` turns this process's median into the reported one (TP: the slowest rank's)."""
    for method, ctx, d in plan:
        if on_step:
            on_step(f"{model_key} {method} S={ctx} d={d}")
        ext = extend_queries(model_key, d)
        row = dict(model=model_key, method=method, ctx=ctx, d=d, window=window, sink=sink, extend_queries=ext)
        try:
            pred = predict(method, ctx, d, ext)
            calls = model.step(method, ctx, d, window, sink, ext, collective=collective)
            samples = sorted(time_step(calls, reps=reps))
            del calls
            med = samples[len(samples) // 2]
            med = reduce_ms(med) if reduce_ms else med
            row.update(predicted_ms=pred.step_ms, measured_ms=med, measured_p10_ms=samples[len(samples) // 10],
                       measured_p90_ms=samples[(9 * len(samples)) // 10], rel_err=pred.step_ms / med - 1,
                       reps=len(samples), predicted_source=pred.source, status="ok")
        except Exception as e:  # a step that cannot be built or timed is a row with its reason
            row.update(status=error_status(e))
        yield row
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
