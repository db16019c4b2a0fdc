"""The latency model of DESIGN.md section 2 (Windowed-MTP paper, Eq. 1):

    step(S, d, B, W) = t_verify(S, d, B) + t_ctx(S_eff, B) + gamma * t_fwd(S_eff, B)
    S_eff = S (native) or min(S, W + n_sink) (windowed);  gamma = d - 1
    TPOT = step / AL;  throughput = B * AL / step;  dense = t_verify at d = 1, no bookkeeping.

This module turns a model row into *work items* (bytes moved, flops, kernels, shape) per
component; a `CostModel` prices each item in milliseconds and says where the number comes from.
`SpeedOfLight` prices from the hardware row; `wmtp.profile.ProfileCostModel` from a
measured profile. Windowing changes only t_ctx and t_fwd.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wmtp.acceptance import window_covers_context
from wmtp.engine import EngineOverhead, engine_moe_ms, extra_ms, index_walks, verify_factor_applies
from wmtp.errors import WmtpError
from wmtp.hardware import HardwareSpec
from wmtp.specs import ModelSpec
from wmtp.weights import attn_rows, bytes_per_param, expert_rows, ffn_rows, linear_rows, moe_dense_rows, part_bytes
from wmtp.tp import per_gpu_spec, tp_collectives
from wmtp.provenance import Origin, Source, combine, source
from wmtp.work import CostModel, Priced, Work
from wmtp import defaults

METHODS = ("dense", "native", "window")
INDEX_BYTES_PER_ENTRY = 8  # int32 read from req_to_token + int32 written to kv_indices
MAX_BATCH = 1 << 20  # concurrent requests: far past any engine's max_running_requests; more is a typo
MAX_STEP_MS = 1e8  # one decode step of more than 28 hours is an absurd input (a rate of 1e-300 TB/s), not an answer


def _compute_dtype(spec: ModelSpec, work: Work) -> str:
    """The format a weight-bound item's weights are stored in (its `wdtype`; the row's weight dtype otherwise)."""
    return work.shape.get("wdtype") or spec.weight_dtype


def _wbytes(spec: ModelSpec, part: str, params: float, rows: float) -> float:
    """Bytes a kernel reads for `params` parameters in `rows` output rows of one kind of weight
    (`ModelSpec.weight_format`), scales included; int4 at the row's group size, zero points where the weights are
    asymmetric (`wmtp.weights.part_bytes`). Rows matter only to per-channel int4 (one scale per output row)."""
    return part_bytes(spec, part, params, rows, read=True)


class SpeedOfLight:
    """bytes / (HBM bandwidth x bw_eff) against flops / (peak x flop_eff), plus a per-kernel overhead.

    Draft attention whose working set fits in L2 (`shape['l2_resident']`) is read at the L2
    estimate instead of HBM bandwidth (the gamma back-to-back draft forwards re-read it).
    """

    name = "speed-of-light"

    def price(self, work: Work, hw: HardwareSpec, spec: ModelSpec) -> Priced:
        if work.kind == "allreduce":
            return price_allreduce(work, hw)
        bw = hw.hbm_bw_tbps * 1e12 * hw.bw_eff
        if work.shape.get("l2_resident"):
            bw = hw.l2_bw_tbps * 1e12 * hw.bw_eff
        dtype = _compute_dtype(spec, work) if work.kind in ("gemm", "moe", "lm_head") else "bf16"
        rate = hw.tflops_for(dtype) * 1e12 * hw.flop_eff
        t_s = max(work.bytes / bw, work.flops / rate) + work.kernels * hw.kernel_overhead_us * 1e-6
        return Priced(work, t_s * 1e3 * work.count, Source("speed-of-light", Origin.SPEED_OF_LIGHT))


def cost_label(cost, hw: HardwareSpec) -> str:
    """A cost model's name as a header prints it: where a profile measured on another GPU prices this one, it says
    so (the per-component tags did; the header did not)."""
    measured_on = getattr(cost, "hw_key", None)
    return cost.name + (f", scaled to {hw.key} by bandwidth and flop ratios"
                        if measured_on and measured_on != hw.key else "")


def price_allreduce(work: Work, hw: HardwareSpec) -> Priced:
    """Ring all-reduce from the hardware row: alpha + 2 (tp - 1) / tp * bytes / link bandwidth."""
    tp = int(work.shape.get("tp", 1))
    t_s = hw.allreduce_latency_us * 1e-6 + 2.0 * (tp - 1) / tp * work.bytes / (hw.link_bw_gbps * 1e9)
    return Priced(work, t_s * 1e3 * work.count, Source("analytical (speed-of-light TP model)", Origin.ANALYTICAL))


# ---------------------------------------------------------------------------- work items
def attention_flops(spec: ModelSpec, queries: float, keys: float) -> float:
    """QK^T and PV for `queries` query tokens over `keys` keys, all heads (MLA: absorbed form)."""
    if spec.attn_kind == "mla":
        return 2.0 * spec.q_heads * queries * keys * (spec.head_dim + spec.head_dim - spec.mla_rope)
    return 4.0 * spec.q_heads * queries * keys * spec.head_dim


def experts_touched(spec: ModelSpec, tokens: int) -> float:
    """Expected distinct experts read by `tokens` tokens, each routed to top_k of E experts uniformly:
    E * (1 - (1 - k/E)^T). Never more than DESIGN's bound min(E, T*k), and close to it while
    T*k << E; at large batches it approaches E more slowly than the bound, as measured routing does."""
    e, k = spec.n_experts, spec.top_k
    return e * (1.0 - (1.0 - k / e) ** tokens)


def _ffn_work(spec: ModelSpec, tokens: int, prefix: str, moe: bool, count: int, mtp: bool = False) -> list[Work]:
    part = "mtp_" if mtp else ""
    act = 2.0 * tokens * spec.hidden * 2  # bf16 activations in and out
    if moe:
        touched = experts_touched(spec, tokens)
        router = spec.hidden * spec.n_experts  # kept in bf16 by quantized checkpoints (wmtp.weights)
        weights = (_wbytes(spec, part + "experts", touched * spec.expert_params, touched * expert_rows(spec))
                   + _wbytes(spec, part + "dense", spec.moe_dense_params - router, moe_dense_rows(spec))
                   + router * bytes_per_param("bf16"))
        flops = 2.0 * tokens * (spec.top_k * spec.expert_params + spec.moe_dense_params)
        return [Work("moe", f"{prefix}.moe", weights + act, flops, 4, count,
                     {"tokens": tokens, "experts_touched": touched, "wdtype": spec.weight_format(part + "experts")})]
    params = spec.dense_ffn_params
    wbytes = _wbytes(spec, part + "dense", params, ffn_rows(spec, spec.hidden, spec.dense_ffn))
    return [Work("gemm", f"{prefix}.ffn", wbytes + act, 2.0 * tokens * params, 2, count,
                 {"tokens": tokens, "wdtype": spec.weight_format(part + "dense")})]


def _lm_head_work(spec: ModelSpec, tokens: int, prefix: str) -> Work:
    wbytes = spec.lm_head_params * bytes_per_param(spec.weight_format("lm_head"))  # never int4 (wmtp.weights)
    return Work("lm_head", f"{prefix}.lm_head", wbytes + tokens * spec.vocab * 4,
                2.0 * tokens * spec.lm_head_params, 1, 1, {"tokens": tokens, "wdtype": spec.weight_format("lm_head")})


def state_traffic_states(d: int) -> int:
    """Recurrent states a linear-attention layer's update moves per request over d tokens: the state read and the
    final state written, and with speculation (d >= 2) one intermediate state written per draft token, which an
    engine keeps to roll back to the accepted position (SGLang's `intermediate_ssm` / conv windows, vLLM's per-token
    state slots). Not counted: the engine's copy of the accepted state into its slot afterwards (SGLang:
    `update_mamba_state_after_mtp_verify`, one more read and write)."""
    return 2 + (d if d >= 2 else 0)


def verify_work(spec: ModelSpec, ctx: int, d: int, batch: int) -> list[Work]:
    """Target forward over B*d tokens: F attention layers over S keys, linear layers, FFNs, lm_head."""
    tokens = batch * d
    kv = spec.kv_bytes_per_token_layer
    wdtype = spec.weight_format("dense")
    act = 2.0 * tokens * spec.hidden * 2
    # one query token per request (dense decoding) runs the decode kernel, so the decode fit prices it; the verify
    # fit is measured at d >= 2 only
    items = [
        Work("decode_attn" if d == 1 else "verify_attn", "verify.attention", batch * (ctx * kv + d * kv),
             batch * attention_flops(spec, d, ctx), 2, spec.n_full_attn,
             {"ctx": ctx, "d": d, "batch": batch}),
        Work("gemm", "verify.attn_proj", _wbytes(spec, "dense", spec.attn_params, attn_rows(spec)) + act,
             2.0 * tokens * spec.attn_params, 2, spec.n_full_attn, {"tokens": tokens, "wdtype": wdtype}),
    ]
    if spec.n_linear:
        items += [
            Work("linear_state", f"verify.{spec.linear_kind}_state", batch * state_traffic_states(d)
                 * spec.ssm_state_bytes_per_layer, batch * d * 6.0 * spec.ssm_state_bytes_per_layer / 4, 2,
                 spec.n_linear, {"batch": batch, "d": d}),
            Work("gemm", f"verify.{spec.linear_kind}_proj",
                 _wbytes(spec, "dense", spec.linear_params, linear_rows(spec)) + act,
                 2.0 * tokens * spec.linear_params, 2, spec.n_linear, {"tokens": tokens, "wdtype": wdtype}),
        ]
    if spec.n_moe:
        items += _ffn_work(spec, tokens, "verify", True, spec.n_moe)
    if spec.n_dense_ffn:
        items += _ffn_work(spec, tokens, "verify", False, spec.n_dense_ffn)
    items.append(_lm_head_work(spec, tokens, "verify"))
    return items


def _mtp_dense_work(spec: ModelSpec, tokens: int, prefix: str) -> list[Work]:
    params = 2 * spec.hidden * spec.hidden + spec.attn_params
    act = 2.0 * tokens * spec.hidden * 2
    wbytes = _wbytes(spec, "mtp_dense", params, spec.hidden + attn_rows(spec))  # eh projection 2h -> h, attention
    return [Work("gemm", f"{prefix}.mtp_proj", wbytes + act, 2.0 * tokens * params, 3, 1,
                 {"tokens": tokens, "wdtype": spec.weight_format("mtp_dense")})]


def draft_fwd_work(spec: ModelSpec, s_eff: int, batch: int, l2_resident: bool = False) -> list[Work]:
    """One draft forward: 1-query attention over S_eff keys, MTP projections, its FFN, lm_head."""
    kv = spec.kv_bytes_per_token_layer
    items = [
        Work("decode_attn", "fwd.attention", batch * s_eff * kv, batch * attention_flops(spec, 1, s_eff), 2, 1,
             {"ctx": s_eff, "batch": batch, "l2_resident": l2_resident}),
        *_mtp_dense_work(spec, batch, "fwd"),
        *_ffn_work(spec, batch, "fwd", spec.mtp_moe, 1, mtp=True),
        _lm_head_work(spec, batch, "fwd"),
    ]
    return items


def draft_ctx_work(spec: ModelSpec, s_eff: int, batch: int, accept_length: float) -> list[Work]:
    """Once per step: the draft KV-index build over S_eff entries and the draft-extend pass."""
    kv = spec.kv_bytes_per_token_layer
    q = max(1, math.ceil(accept_length))
    tokens = batch * q
    return [
        Work("index_build", "ctx.index_build", batch * s_eff * INDEX_BYTES_PER_ENTRY, 0.0, 1, 1,
             {"ctx": s_eff, "batch": batch}),
        Work("extend_attn", "ctx.extend_attention", batch * (s_eff * kv + q * kv),
             batch * attention_flops(spec, q, s_eff), 2, 1, {"ctx": s_eff, "d": q, "batch": batch}),
        *_mtp_dense_work(spec, tokens, "ctx"),
        *_ffn_work(spec, tokens, "ctx", spec.mtp_moe, 1, mtp=True),
    ]


# ---------------------------------------------------------------------------- phases and steps
@dataclass(frozen=True)
class Phase:
    items: tuple[Priced, ...]

    @property
    def time_ms(self) -> float:
        return sum(p.time_ms for p in self.items)

    @property
    def source(self) -> Source:
        return combine_sources(p.source for p in self.items)


def combine_sources(sources) -> Source:
    """The source of a sum of priced items (`wmtp.provenance.combine`)."""
    return combine(sources)


@dataclass(frozen=True)
class StepCost:
    method: str
    ctx: int
    depth: int
    batch: int
    s_eff: int
    t_verify: Phase
    t_ctx: Phase
    t_fwd: Phase

    @property
    def gamma(self) -> int:
        return self.depth - 1 if self.method != "dense" else 0

    @property
    def step_ms(self) -> float:
        return self.t_verify.time_ms + self.t_ctx.time_ms + self.gamma * self.t_fwd.time_ms

    @property
    def source(self) -> str:
        phases = [self.t_verify] + ([self.t_ctx, self.t_fwd] if self.method != "dense" else [])
        return combine_sources(p.source for p in phases for p in p.items)


def effective_ctx(method: str, ctx: int, window: int, sink: int) -> int:
    """Keys the draft reads: S natively, min(S, W + n_sink) windowed (degenerates to native)."""
    if method == "window":
        return min(ctx, window + sink)
    return ctx


def l2_resident(spec: ModelSpec, hw: HardwareSpec, s_eff: int, batch: int) -> bool:
    """Whether the draft KV working set stays in L2 across the gamma back-to-back draft forwards."""
    return batch * s_eff * spec.kv_bytes_per_token_layer <= 0.5 * hw.l2_bytes


def step_cost(
    spec: ModelSpec,
    hw: HardwareSpec,
    cost: CostModel,
    method: str,
    ctx: int,
    depth: int,
    batch: int = 1,
    window: int = defaults.WINDOW,
    sink: int = defaults.SINK,
    accept_length: float | None = None,
    tp: int = 1,
    overhead: EngineOverhead | None = None,
) -> StepCost:
    """One step of `method`; with tp > 1 the work of one GPU of `tp` plus the collectives; with
    `overhead`, plus a serving engine's overhead (`wmtp.engine`)."""
    if method not in METHODS:
        raise WmtpError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    if ctx <= 0 or batch <= 0:
        raise WmtpError("ctx and batch must be positive")
    if batch > MAX_BATCH:
        raise WmtpError(f"batch {batch} is more than {MAX_BATCH:,} concurrent requests; wmtp models at most that")
    if window < 0 or sink < 0:
        raise WmtpError("window and sink must be >= 0")
    if method != "dense" and not 2 <= depth <= 64:
        raise WmtpError(f"depth d must be in 2..64 (d = gamma + 1), got {depth}")

    full, spec = spec, per_gpu_spec(spec, tp)
    # A window that holds the whole context (W + n_sink >= S) is the native draft: no ring (`wmtp.memory`), the same
    # keys, and so the same engine path (its eager extend and planned draft forwards); priced as native throughout.
    draft = "native" if method == "window" and window_covers_context(window, sink, ctx) else method
    attn_kind = {"verify": "verify_attn", "ctx": "extend_attn", "fwd": "decode_attn"}
    factor = overhead is not None and verify_factor_applies(cost, hw)

    def priced(items, phase, tokens, s_eff):
        items = list(items) + tp_collectives(full, tp, phase, tokens)
        out = tuple(cost.price(w, hw, spec) for w in items)
        if overhead is not None and overhead.moe_tbps > 0:  # the engine's own MoE kernel, named by its preset
            out = tuple(_engine_moe(p, overhead, hw, spec) for p in out)
        if overhead is not None:  # the serving engine's overhead on top of the kernels (wmtp.engine)
            walks = index_walks(overhead, phase, draft)
            if walks:  # the engine's per-request index builds, priced by the cost model like any index build
                keys = s_eff + (depth if phase == "verify" else 0)
                out += (cost.price(Work("index_build", f"{phase}.engine_index", batch * keys * INDEX_BYTES_PER_ENTRY,
                                        0.0, 1, walks, {"ctx": keys, "batch": batch}), hw, spec),)
            attn = sum(p.time_ms for p in out if p.work.kind == attn_kind[phase])
            ms = extra_ms(overhead, phase, draft, attn, batch, s_eff, factor)
            out += (Priced(Work("engine", f"{phase}.engine", 0.0, 0.0, 0), ms, source(overhead.source)),)
        return Phase(out)

    if method == "dense":
        empty = Phase(())
        return _checked(StepCost(method, ctx, 1, batch, ctx, priced(verify_work(spec, ctx, 1, batch), "verify", batch,
                                                                       ctx), empty, empty), overhead)
    s_eff = effective_ctx(method, ctx, window, sink)
    al = accept_length if accept_length is not None else depth
    resident = l2_resident(spec, hw, s_eff, batch)
    return _checked(StepCost(
        method, ctx, depth, batch, s_eff,
        priced(verify_work(spec, ctx, depth, batch), "verify", batch * depth, ctx),
        priced(draft_ctx_work(spec, s_eff, batch, al), "ctx", batch * max(1, math.ceil(al)), s_eff),
        priced(draft_fwd_work(spec, s_eff, batch, resident), "fwd", batch, s_eff),
    ), overhead)


def _engine_moe(p: Priced, ov: EngineOverhead, hw: HardwareSpec, spec: ModelSpec) -> Priced:
    ms = engine_moe_ms(ov, p.work, hw, p.work.shape.get("wdtype") or spec.weight_dtype)
    if ms is None:
        return p
    return Priced(p.work, ms, source(f"{ov.source}: the engine's MoE kernel on {hw.key} (named, not measured)",
                                     Origin.ENGINE))


def _checked(c: StepCost, overhead: EngineOverhead | None) -> StepCost:
    """`c` if every phase takes a finite, non-negative time and the step a positive one. Kernel prices are
    validated where they are read; what can break this is an engine or framework overhead with negative terms
    larger than the kernels they sit on, so the error names it."""
    phases = {"t_verify": c.t_verify.time_ms, "t_ctx": c.t_ctx.time_ms, "t_fwd": c.t_fwd.time_ms}
    bad = [f"{k} {v:.4g} ms" for k, v in phases.items() if not 0 <= v <= MAX_STEP_MS]  # NaN fails too
    if bad or not 0 < c.step_ms <= MAX_STEP_MS:
        by = f" with the engine overhead of {overhead.source}" if overhead is not None else ""
        raise WmtpError(f"the {c.method} step at ctx {c.ctx}, d {c.depth}, batch {c.batch} prices to "
                        f"{', '.join(bad) or f'{c.step_ms:.4g} ms'}{by}: a time must be positive and finite, and a "
                        f"step at most {MAX_STEP_MS:.0e} ms (28 hours)")
    return c
