"""`wmtp predict`: one call that assembles latency, acceptance, memory and decisions."""

from __future__ import annotations

from dataclasses import dataclass, field

from wmtp import __version__
from wmtp.acceptance import AcceptanceChoice, AcceptanceProfile, choose_acceptance, window_profile
from wmtp.decisions import Scenario, draft_prefill_saving, odd_input_warnings
from wmtp.engine import label as engine_label
from wmtp.engine import memory_config
from wmtp.engine import resolve as resolve_engine
from wmtp.errors import WmtpError
from wmtp.hardware import HardwareSpec
from wmtp.latency import CostModel, SpeedOfLight, StepCost, combine_sources, cost_label
from wmtp.memory import MemoryReport, memory_report, weights_overflow_warning
from wmtp.profile import framework_warnings
from wmtp.provenance import Origin
from wmtp.specs import ModelSpec
from wmtp.tp import per_gpu_spec, quant_split_warning
from wmtp import defaults

DEPTH_RANGE = defaults.DEPTH_GRID


@dataclass(frozen=True)
class MethodResult:
    cost: StepCost
    accept_length: float
    accept_source: str

    @property
    def tpot_ms(self) -> float:
        return self.cost.step_ms / self.accept_length

    @property
    def throughput_tok_s(self) -> float:
        return self.cost.batch * self.accept_length / self.cost.step_ms * 1e3


@dataclass(frozen=True)
class Prediction:
    spec: ModelSpec
    hw: HardwareSpec
    cost_model: str
    ctx: int
    depth: int | str
    window: int
    sink: int
    batch: int
    methods: dict  # method -> MethodResult
    memory: MemoryReport
    best_depth: dict  # method -> int
    tpot_by_depth: dict  # method -> {d: tpot_ms}
    break_even_accept_ratio: float
    warnings: list = field(default_factory=list)
    tp: int = 1
    draft_prefill: dict = field(default_factory=dict)
    tree_width: int = 1
    overheads: dict = field(default_factory=dict)  # method -> EngineOverhead (wmtp.engine)
    source_by_depth: dict = field(default_factory=dict)  # method -> {d: step source}, beside tpot_by_depth

    @property
    def engine_overhead(self) -> str:
        """Which serving-engine overhead the steps include (wmtp.engine)."""
        return engine_label(self.overheads)

    def speedup(self, method: str, over: str) -> float:
        return self.methods[over].tpot_ms / self.methods[method].tpot_ms

    def to_json(self) -> dict:
        def phase(p):
            return {"ms": p.time_ms, "source": p.source}

        methods = {}
        for name, r in self.methods.items():
            c = r.cost
            methods[name] = {
                "depth": c.depth,
                "s_eff": c.s_eff,
                "step_ms": c.step_ms,
                "t_verify_ms": c.t_verify.time_ms,
                "t_ctx_ms": c.t_ctx.time_ms,
                "t_fwd_ms": c.t_fwd.time_ms,
                "accept_length": r.accept_length,
                "accept_source": r.accept_source,
                "tpot_ms": r.tpot_ms,
                "throughput_tok_s": r.throughput_tok_s,
                "speedup_over_dense": self.speedup(name, "dense"),
                "speedup_over_native": self.speedup(name, "native"),
                "source": c.source,
                "phases": {"t_verify": phase(c.t_verify), "t_ctx": phase(c.t_ctx), "t_fwd": phase(c.t_fwd)},
                "components": [
                    {"name": p.work.name, "kind": p.work.kind, "count": p.work.count, "ms": p.time_ms,
                     "bytes": p.work.bytes * p.work.count, "source": p.source}
                    for ph in (c.t_verify, c.t_ctx, c.t_fwd) for p in ph.items
                ],
            }
        m = self.memory
        return {
            "wmtp_version": __version__,
            "model": self.spec.key,
            "model_name": self.spec.name,
            "hardware": self.hw.key,
            "cost_model": self.cost_model,
            "engine_overhead": self.engine_overhead,
            "ctx": self.ctx,
            "depth": self.depth,
            "window": self.window,
            "sink": self.sink,
            "batch": self.batch,
            "tp": self.tp,
            "tree_width": self.tree_width,
            "weight_dtype": self.spec.weight_dtype,
            "kv_dtype": self.spec.kv_dtype,
            "methods": methods,
            "memory": {
                "source": f"engine accounting ({m.engine_source}, wmtp.engine_memory)" if m.engine else "analytical (DESIGN 3)",
                **({"engine": {k: engine_memory_json(e) for k, e in m.engine.items()}} if m.engine else {}),
                **({"engine_at_largest_mem_fraction": {
                    k: ({"mem_fraction_static": e.mem_fraction_static, "max_batch": e.max_batch} if e else None)
                    for k, e in m.engine_max.items()},
                    "extra_requests_window_at_largest_mem_fraction": m.extra_requests_window_max}
                   if m.engine_max else {}),
                "draft_pool_share": m.draft_pool_share,
                "reclaimable_bytes": m.reclaimable_bytes,
                "ring_slots": m.ring_slots,
                "per_request": {
                    k: {"target_kv_bytes": r.target_kv_bytes, "draft_kv_bytes": r.draft_kv_bytes,
                        "state_bytes": r.state_bytes, "total_bytes": r.total_bytes}
                    for k, r in m.per_request.items()
                },
                "weights_bytes": m.weights_bytes,
                "kv_budget_bytes": m.budget_bytes,
                "weights_fit": m.weights_fit,
                "max_batch": m.max_batch,
            },
            "decisions": {
                "best_depth": self.best_depth,
                "tpot_ms_by_depth": {k: {str(d): t for d, t in v.items()} for k, v in self.tpot_by_depth.items()},
                "break_even_accept_ratio": self.break_even_accept_ratio,
                "draft_prefill_ttft_saving": self.draft_prefill,
                "source": combine_sources(part for m in ("native", "window") for src in [self.methods[m].cost.source]
                                          for part in (src.parts or (src,))),  # both methods' steps
            },
            "warnings": self.warnings,
        }


def _method_result(sc, method: str, depth: int, profile: AcceptanceProfile | None) -> MethodResult:
    c, al = sc.step(method, profile, depth=depth)
    return MethodResult(c, al, profile.tag(depth) if profile is not None else "no speculation")


def predict(
    spec: ModelSpec,
    hw: HardwareSpec,
    ctx: int,
    depth: int | str = 7,
    window: int = defaults.WINDOW,
    sink: int = defaults.SINK,
    batch: int = 1,
    accept_length: tuple[float, float] | None = None,
    cost: CostModel | None = None,
    mem_fraction: float = 0.85,
    tree_width: int = 1,
    tp: int = 1,
    frameworks: list | None = None,
    task: str = defaults.TASK,
) -> Prediction:
    cost = cost or SpeedOfLight()
    gpu_spec = per_gpu_spec(spec, tp)  # validates tp against the heads
    overheads, engine_warnings = resolve_engine(spec.key, hw.key, frameworks)
    auto = depth == "auto"
    if not auto and (not isinstance(depth, int) or depth < 2):
        raise WmtpError(f"--depth must be an integer >= 2 or 'auto', got {depth!r}")
    if accept_length is not None and auto:
        raise WmtpError("--accept-length is measured at one depth: give --depth N with it, not auto")
    acc: AcceptanceChoice = choose_acceptance(spec.key, defaults.DEPTH if auto else depth, accept_length, task)
    profiles = {"native": acc.native, "window": window_profile(acc, window, sink, ctx)}
    engine_mem = memory_config(spec.key, frameworks)

    sc = Scenario(spec, hw, cost, ctx, defaults.DEPTH, window, sink, batch, tp, overheads or None, engine_mem)
    by_depth = {m: {d: _method_result(sc, m, d, profiles[m]) for d in DEPTH_RANGE} for m in profiles}
    tpot_by_depth = {m: {d: r.tpot_ms for d, r in rs.items()} for m, rs in by_depth.items()}
    fitting = depths_that_fit(gpu_spec, hw, ctx, window, sink, engine_mem, tp)
    best = {m: min([d for d in v if d in fitting[m]] or list(v), key=v.get) for m, v in tpot_by_depth.items()}

    methods = {"dense": _method_result(sc, "dense", 1, None)}
    for method in ("native", "window"):
        d = best[method] if auto else depth
        methods[method] = by_depth[method].get(d) or _method_result(sc, method, d, profiles[method])
    ratio = methods["window"].cost.step_ms / methods["native"].cost.step_ms
    mem_depth = {m: r.cost.depth for m, r in methods.items()}  # each method's memory at the depth it runs
    memory = memory_report(gpu_spec, hw, ctx, window, sink, mem_depth, tree_width, mem_fraction, engine=engine_mem,
                           engine_tp=tp, at_largest_mem_fraction=True)
    warnings = list(spec.notes) + ([acc.warning] if acc.warning else []) + engine_warnings \
        + framework_warnings(cost, frameworks, hw.key) \
        + odd_input_warnings(ctx, window, sink, tree_width)
    for method, e in (memory.engine or {}).items():
        if not e.fits:
            warnings.append(f"{method} does not fit on {hw.key} at ctx {ctx} and d {mem_depth[method]}"
                            f" in the engine's accounting: {e.why_not}")
    overflow = [m for m, ok in memory.weights_fit.items() if not ok]
    warnings += weights_overflow_warning(memory, hw.key, mem_fraction)
    for method, n in memory.max_batch.items():
        if n < batch and method not in overflow and (memory.engine is None or memory.engine[method].fits):
            warnings.append(
                f"{method}: only {n} request(s) of {ctx} tokens fit on {hw.key} "
                f"(asked for batch {batch}); its latency is shown as if memory allowed it")
    if split := quant_split_warning(spec, tp):
        warnings.append(split)
    if tp > 1:
        warnings.append(f"tp={tp}: per-GPU work from the single-GPU fits, collectives from "
                        + ("the measured all-reduce fit" if any(p.work.kind == "allreduce" and p.source.origin is not Origin.ANALYTICAL
                                                                 for p in methods["native"].cost.t_verify.items)
                           else "the analytical link model (no TP measurement for this GPU)")
                        + "; memory is per GPU")
    return Prediction(spec, hw, cost_label(cost, hw), ctx, "auto" if auto else depth, window, sink, batch,
                      methods, memory, best, tpot_by_depth, ratio, warnings, tp,
                      draft_prefill_saving(gpu_spec, hw, ctx, window, sink), tree_width, overheads,
                      {m: {d: r.cost.source for d, r in rs.items()} for m, rs in by_depth.items()})


def engine_memory_json(e) -> dict:
    """One method's engine memory accounting (wmtp.engine_memory.EngineMemory) as JSON."""
    return {"fits": e.fits, "why_not": e.why_not, "max_batch": e.max_batch, "mem_fraction_static": e.mem_fraction_static,
            "kv_pool_tokens": e.kv_pool_tokens, "weights_target_bytes": e.weights_target,
            "weights_draft_bytes": e.weights_draft, "spec_state_reserve_bytes": e.spec_state_reserve,
            "state_pool_bytes": e.state_pool, "max_running_requests": e.max_running_requests,
            "slack_bytes": e.slack, "slack_needed_bytes": e.slack_needed}


def depths_that_fit(gpu_spec: ModelSpec, hw: HardwareSpec, ctx: int, window: int, sink: int, engine_mem, tp: int) -> dict:
    """Per method, the depths of the search grid at which one request of `ctx` tokens fits in the engine's
    memory accounting (every depth without one)."""
    from wmtp.engine_memory import engine_memory
    from wmtp.memory import window_ring_slots

    out = {}
    for method in ("native", "window"):
        if engine_mem is None:
            out[method] = set(DEPTH_RANGE)
            continue
        out[method] = {d for d in DEPTH_RANGE if engine_memory(
            gpu_spec, hw, method, ctx, d, engine_mem, tp,
            window_ring_slots(window, sink, d, ctx)).fits}
    return out

