"""The memory model of DESIGN.md section 3.

Per request at context S: target KV F * kv_bytes_per_token_layer * S; draft KV
kv_bytes_per_token_layer * S natively, or a ring buffer of (n_sink + W + d * k) slots windowed
(chain k = 1, tree width k); recurrent state of the linear-attention layers (independent of S).
KV budget = mem_fraction * HBM - weights - workspace. Dense decoding loads no MTP weights and keeps
no draft KV.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wmtp.engine_memory import EngineMemoryConfig, engine_memory, largest_mem_fraction
from wmtp.errors import WmtpError
from wmtp.hardware import HardwareSpec
from wmtp.specs import ModelSpec
from wmtp.weights import model_weight_bytes
from wmtp import defaults

DEFAULT_MEM_FRACTION = 0.85
DEFAULT_WORKSPACE_BYTES = 4 * 1024**3  # activations, CUDA graphs, sampling buffers (preset)


@dataclass(frozen=True)
class RequestMemory:
    target_kv_bytes: float
    draft_kv_bytes: float
    state_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.target_kv_bytes + self.draft_kv_bytes + self.state_bytes


@dataclass(frozen=True)
class MemoryReport:
    ctx: int
    weights_bytes: dict  # per method
    budget_bytes: dict  # KV budget per method, >= 0 (0 where the weights do not fit: `weights_fit`)
    per_request: dict  # method -> RequestMemory
    max_batch: dict  # method -> int
    draft_pool_share: float  # draft KV / all KV, native, at ctx
    reclaimable_bytes: float  # per request: native draft KV - ring buffer
    ring_slots: int
    engine: dict | None = None  # method -> wmtp.engine_memory.EngineMemory, when an engine's accounting is used
    engine_source: str = ""
    engine_max: dict | None = None  # method -> EngineMemory at its largest mem_fraction_static (None: fits at none)
    weights_fit: dict | None = None  # method -> whether its weights fit where the memory model puts them

    @property
    def extra_requests_window(self) -> int:
        return self.max_batch["window"] - self.max_batch["native"]

    @property
    def extra_requests_window_max(self) -> int | None:
        """Requests the window seats beyond native when each runs at its own largest mem_fraction_static."""
        if not self.engine_max:
            return None
        seats = {m: (e.max_batch if e is not None else 0) for m, e in self.engine_max.items()}
        return seats["window"] - seats["native"]


def ring_slots(window: int, sink: int, depth: int, tree_width: int = 1) -> int:
    return sink + window + depth * tree_width


def window_ring_slots(window: int, sink: int, depth: int, ctx: int, tree_width: int = 1) -> int:
    """The windowed draft's ring, or 0 (no ring: the native draft's cache) where the ring would hold the whole
    context: the window covers it (W + n_sink >= S), or a deep or wide tree's d * k slots take it past S. A ring
    never holds more than the context, so the window never keeps more draft KV than native."""
    slots = ring_slots(window, sink, depth, tree_width)
    return 0 if window + sink >= ctx or slots >= ctx else slots


def request_memory(spec: ModelSpec, method: str, ctx: int, window: int, sink: int, depth: int,
                   tree_width: int = 1) -> RequestMemory:
    kv = spec.kv_bytes_per_token_layer
    target = spec.n_full_attn * kv * ctx
    state = spec.n_linear * spec.state_bytes_per_layer
    if method == "dense":
        draft = 0.0
    elif method == "native":
        draft = spec.n_mtp * kv * ctx
    elif method == "window":  # no ring where it would hold the whole context: the native draft
        draft = spec.n_mtp * kv * (window_ring_slots(window, sink, depth, ctx, tree_width) or ctx)
    else:
        raise WmtpError(f"unknown method {method!r}")
    return RequestMemory(target, draft, state)


def weights_bytes(spec: ModelSpec, with_mtp: bool) -> float:
    """The checkpoint's weights at their real sizes: quantized layers with their scales, and the layers it keeps in
    bf16 (embeddings, lm_head, norms, routers, conv1d; `wmtp.weights`)."""
    return model_weight_bytes(spec, with_mtp)


def weights_fit_warning(gpu_spec: ModelSpec, hw: HardwareSpec, mem_fraction: float = DEFAULT_MEM_FRACTION) -> list[str]:
    """A warning when one GPU cannot hold its share of the weights (`gpu_spec`: the per-GPU slice at tp > 1) within
    `mem_fraction` of its memory: no request fits at any context, and every time shown is as if memory allowed it."""
    w = weights_bytes(gpu_spec, with_mtp=True)
    if w < mem_fraction * hw.hbm_bytes:
        return []
    return [f"the weights of {gpu_spec.key} ({w / 2**30:.1f} GiB per GPU with the draft head) do not fit in "
            f"{mem_fraction:g} x {hw.hbm_bytes / 2**30:.0f} GiB of {hw.key}: no request fits at any context, and its "
            "times are shown as if memory allowed them (try more --tp or a smaller --weight-dtype)"]


def weights_overflow_warning(mem: MemoryReport, hw_key: str, mem_fraction: float = DEFAULT_MEM_FRACTION,
                             workspace_bytes: float = DEFAULT_WORKSPACE_BYTES) -> list[str]:
    """One warning naming the methods whose weights do not fit (`mem.weights_fit`): their KV budget is 0. An
    engine's accounting says why a method does not fit in its own warning (`EngineMemory.why_not`)."""
    over = [m for m, ok in (mem.weights_fit or {}).items() if not ok]
    if not over or mem.engine:
        return []
    sizes = ", ".join(f"{m} {mem.weights_bytes[m] / 2**30:.1f} GiB" for m in over)
    return [f"the weights do not fit on {hw_key} ({sizes} per GPU) within {mem_fraction:g} x HBM less a "
            f"{workspace_bytes / 2**30:g} GiB workspace: no KV budget is left (kv_budget_bytes 0, "
            "weights_fit false), no request fits, and the times are shown as if memory allowed them (try more --tp or "
            "a smaller --weight-dtype)"]


def memory_report(
    spec: ModelSpec,
    hw: HardwareSpec,
    ctx: int,
    window: int = defaults.WINDOW,
    sink: int = defaults.SINK,
    depth: int | dict = 7,
    tree_width: int = 1,
    mem_fraction: float = DEFAULT_MEM_FRACTION,
    workspace_bytes: float = DEFAULT_WORKSPACE_BYTES,
    tp: int = 1,
    engine: EngineMemoryConfig | None = None,
    engine_tp: int = 1,
    at_largest_mem_fraction: bool = False,
) -> MemoryReport:
    """`spec` is what one GPU holds (the per-GPU slice at tp > 1). With `engine`, the largest batch and whether
    the method fits come from that engine's accounting (`wmtp.engine_memory`), not from a flat workspace; with
    `at_largest_mem_fraction` too, each method's accounting at the largest mem_fraction_static it fits at
    (`engine_max`: a scan of settings, so only where it is shown). `depth`: one d for every method, or one per
    method ({"native": 8, "window": 10}: each method's memory at the depth it runs, e.g. its own best depth)."""
    if not 0 < mem_fraction <= 1:
        raise WmtpError(f"mem_fraction must be in (0, 1], got {mem_fraction}")
    if tree_width < 1:
        raise WmtpError("tree width k must be >= 1")
    depths = {m: (depth.get(m, 1) if isinstance(depth, dict) else depth) for m in ("dense", "native", "window")}
    weights, budget, per_req, max_b, fit = {}, {}, {}, {}, {}
    for method in ("dense", "native", "window"):
        w = weights_bytes(spec, with_mtp=method != "dense") / tp
        weights[method] = w
        left = mem_fraction * hw.hbm_bytes - w - workspace_bytes  # below zero: the weights (and workspace) overflow
        fit[method] = left > 0
        budget[method] = max(0.0, left)
        req = request_memory(spec, method, ctx, window, sink, depths[method], tree_width)
        per_req[method] = req
        per_gpu = req.total_bytes / tp
        max_b[method] = max(0, math.floor(budget[method] / per_gpu)) if budget[method] > 0 else 0
    slots = window_ring_slots(window, sink, depths["window"], ctx, tree_width)  # 0: the native draft, nothing reclaimed
    detail = at_max = None
    if engine is not None:
        detail = {m: engine_memory(spec, hw, m, ctx, depths[m], engine, engine_tp, slots) for m in depths}
        if at_largest_mem_fraction:
            at_max = {m: largest_mem_fraction(spec, hw, m, ctx, depths[m], engine, engine_tp, slots) for m in depths}
        max_b = {m: e.max_batch for m, e in detail.items()}
        budget = {m: e.kv_pool_tokens * e.kv_cell_bytes for m, e in detail.items()}
        weights = {m: e.weights_target + e.weights_draft for m, e in detail.items()}
        # the engine keeps the target's weights inside mem_fraction_static and the draft's in the rest
        fit = {m: e.weights_target < e.mem_fraction_static * e.m0 and e.weights_draft <= e.slack
               for m, e in detail.items()}
    native = per_req["native"]
    share = native.draft_kv_bytes / (native.draft_kv_bytes + native.target_kv_bytes)
    return MemoryReport(
        ctx=ctx,
        weights_bytes=weights,
        budget_bytes=budget,
        per_request=per_req,
        max_batch=max_b,
        draft_pool_share=share,
        reclaimable_bytes=native.draft_kv_bytes - per_req["window"].draft_kv_bytes,
        ring_slots=slots,
        engine=detail,
        engine_source=engine.engine if engine is not None else "",
        engine_max=at_max,
        weights_fit=fit,
    )
