"""What a user decides with wmtp (DESIGN.md section 5), on top of `step_cost` and acceptance.

- `depth_curve`: TPOT against d per method, and each method's best depth.
- `break_even_context`: the smallest ctx from which windowing is at least x % faster (TPOT).
- `window_curve` / `break_even_window`: TPOT against W; with an AL(W) model the TPOT-optimal W and
  the range of W that beats native, without one the cost-only curve (acceptance held fixed).
- `batch_frontier`: B = 1 .. the memory limit, per-user against per-GPU tokens/s, Pareto points.
- `draft_prefill_saving`: time-to-first-token the window saves when the draft's prefill is pruned
  to the last W + n_sink tokens (speed-of-light estimate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from wmtp.acceptance import (AcceptanceChoice, AcceptanceProfile, window_covers_context,
                             window_profile)
from wmtp.engine import EngineOverhead
from wmtp.engine_memory import EngineMemoryConfig
from wmtp.errors import WmtpError
from wmtp.hardware import HardwareSpec
from wmtp.latency import CostModel, StepCost, step_cost
from wmtp.memory import memory_report
from wmtp.specs import ModelSpec
from wmtp.tp import per_gpu_spec
from wmtp import defaults


@dataclass(frozen=True)
class Scenario:
    spec: ModelSpec
    hw: HardwareSpec
    cost: CostModel
    ctx: int
    depth: int = 7
    window: int = defaults.WINDOW
    sink: int = defaults.SINK
    batch: int = 1
    tp: int = 1
    overheads: Mapping[str, EngineOverhead] | None = None  # per method: serving-engine overhead (wmtp.engine)
    engine_memory: EngineMemoryConfig | None = None  # the engine's memory accounting (wmtp.engine_memory)

    def overhead(self, method: str) -> EngineOverhead | None:
        return (self.overheads or {}).get(method)

    def step(self, method: str, profile: AcceptanceProfile | None, *, ctx=None, depth=None, window=None, batch=None,
             accept_length: float | None = None) -> tuple[StepCost, float]:
        """(step cost, AL) of one method at this scenario with overrides; dense: d = 1, AL = 1."""
        ctx, depth = ctx or self.ctx, depth or self.depth
        window = self.window if window is None else window
        batch = batch or self.batch
        if method == "dense":
            return step_cost(self.spec, self.hw, self.cost, "dense", ctx, 1, batch, tp=self.tp,
                             overhead=self.overhead("dense")), 1.0
        al = accept_length if accept_length is not None else profile.accept_length(depth)
        return step_cost(self.spec, self.hw, self.cost, method, ctx, depth, batch, window, self.sink,
                         accept_length=al, tp=self.tp, overhead=self.overhead(method)), al

    def tpot(self, method: str, profile: AcceptanceProfile | None, **overrides) -> tuple[float, float, float]:
        """(TPOT ms, step ms, AL) of one method at this scenario with overrides (see `step`)."""
        return self.priced(method, profile, **overrides)[:3]

    def priced(self, method: str, profile: AcceptanceProfile | None, **overrides) -> tuple[float, float, float, str]:
        """`tpot` and the step cost's source (`wmtp.provenance.Source`: measured, interpolated, ...), which a
        sweep row carries beside its numbers."""
        c, al = self.step(method, profile, **overrides)
        return c.step_ms / al, c.step_ms, al, c.source


def scenario_window_profile(sc: Scenario, acc: AcceptanceChoice, ctx: int | None = None) -> AcceptanceProfile:
    """The windowed draft's acceptance in `sc` (at `ctx` when given), as `wmtp predict` takes it
    (`wmtp.acceptance.window_profile`): the native draft's where the window covers the context, else `acc`'s AL(W)
    model's at the scenario's W, else the chosen window acceptance."""
    return window_profile(acc, sc.window, sc.sink, ctx or sc.ctx)


def depth_curve(sc: Scenario, acc: AcceptanceChoice, depths=defaults.DEPTH_GRID) -> list[dict]:
    rows = []
    win = scenario_window_profile(sc, acc)
    for d in depths:
        row = {"depth": d}
        for method, prof in (("native", acc.native), ("window", win)):
            tpot, step, al, src = sc.priced(method, prof, depth=d)
            row.update({f"{method}_tpot_ms": tpot, f"{method}_step_ms": step, f"{method}_accept_length": al,
                        f"{method}_accept_source": prof.tag(d), f"{method}_step_source": src})
        rows.append(row)
    return rows


def best_depths(rows: list[dict]) -> dict:
    return {m: min(rows, key=lambda r: r[f"{m}_tpot_ms"])["depth"] for m in ("native", "window")}


def context_curve(sc: Scenario, acc: AcceptanceChoice, ctxs) -> list[dict]:
    dense_rows = []
    for ctx in ctxs:
        d_tpot, _, _, d_src = sc.priced("dense", None, ctx=ctx)
        n_tpot, n_step, n_al, n_src = sc.priced("native", acc.native, ctx=ctx)
        w_tpot, w_step, w_al, w_src = sc.priced("window", scenario_window_profile(sc, acc, ctx), ctx=ctx)
        dense_rows.append({"ctx": ctx, "dense_tpot_ms": d_tpot, "native_tpot_ms": n_tpot, "window_tpot_ms": w_tpot,
                           "native_step_ms": n_step, "window_step_ms": w_step,
                           "step_saving_ms": n_step - w_step, "cost_ratio": n_step / w_step - 1,
                           "window_speedup": n_tpot / w_tpot, "dense_step_source": d_src,
                           "native_step_source": n_src, "window_step_source": w_src})
    return dense_rows


def break_even_context(sc: Scenario, acc: AcceptanceChoice, threshold: float = 0.05, lo: int = 1024,
                       hi: int = 16 * 1024 * 1024) -> int | None:
    """Smallest ctx (to 1 %) from which the window's step is at least `threshold` cheaper than the
    native one at matched acceptance (step_native / step_window >= 1 + threshold: the input-invariant,
    cost-side advantage, which grows with ctx because only the native draft's reads do). None if not
    reached by `hi`. Multiply by AL_window / AL_native for a given workload's end-to-end gain."""
    def gain(ctx: int) -> float:
        al = acc.native.accept_length(sc.depth)
        return (sc.tpot("native", None, ctx=ctx, accept_length=al)[1]
                / sc.tpot("window", None, ctx=ctx, accept_length=al)[1] - 1)

    if gain(hi) < threshold:
        return None
    if gain(lo) >= threshold:
        return lo
    while hi / lo > 1.01:
        mid = int(math.sqrt(lo * hi))
        lo, hi = (mid, hi) if gain(mid) < threshold else (lo, mid)
    return hi


def window_curve(sc: Scenario, acc: AcceptanceChoice, windows) -> list[dict]:
    """TPOT against W, the window's acceptance at each W from `acc`'s AL(W) model (held fixed without one).
    `accept_kind` says which: 'native' (the window covers the context), 'al_model' or 'held_fixed'."""
    n_tpot, _, n_al, n_src = sc.priced("native", acc.native)
    rows, al_model = [], acc.window_al
    for w in windows:
        prof = window_profile(acc, w, sc.sink, sc.ctx)
        al_w = prof.accept_length(sc.depth)
        if window_covers_context(w, sc.sink, sc.ctx):
            kind, src = "native", "the native draft's (the window covers the context)"
        elif al_model is not None:
            kind, src = "al_model", al_model.tag(w, sc.ctx)
        else:
            kind, src = "held_fixed", "held fixed (no AL(W) model): " + acc.window.tag(sc.depth)
        tpot, step, _, w_src = sc.priced("window", None, window=w, accept_length=al_w)
        rows.append({"window": w, "window_step_ms": step, "accept_length": al_w, "accept_source": src,
                     "accept_kind": kind,
                     "window_tpot_ms": tpot, "native_tpot_ms": n_tpot, "beats_native": tpot < n_tpot,
                     "window_step_source": w_src, "native_step_source": n_src})
    return rows


def break_even_window(rows: list[dict]) -> dict:
    best = min(rows, key=lambda r: r["window_tpot_ms"])
    winners = [r["window"] for r in rows if r["beats_native"]]
    return {"optimal_window": best["window"], "optimal_tpot_ms": best["window_tpot_ms"],
            "beats_native_range": [min(winners), max(winners)] if winners else None,
            "acceptance": "held fixed: cost-only curve" if any(r["accept_kind"] == "held_fixed" for r in rows)
            else "AL(W) model"}


def batch_frontier(sc: Scenario, acc: AcceptanceChoice, max_batch: int | None = None) -> list[dict]:
    """Per method, B = 1 .. the memory limit: per-user and per-GPU tokens/s, Pareto flags."""
    mem = memory_report(per_gpu_spec(sc.spec, sc.tp), sc.hw, sc.ctx, sc.window, sc.sink, sc.depth,
                        engine=sc.engine_memory, engine_tp=sc.tp)
    rows = []
    profiles = (("dense", None), ("native", acc.native), ("window", scenario_window_profile(sc, acc)))
    for method, prof in profiles:
        limit = mem.max_batch[method] if max_batch is None else min(max_batch, mem.max_batch[method])
        for b in range(1, limit + 1):
            tpot, step, al, src = sc.priced(method, prof, batch=b)
            rows.append({"method": method, "batch": b, "tpot_ms": tpot, "per_user_tok_s": 1e3 / tpot,
                         "per_gpu_tok_s": b * 1e3 / tpot / sc.tp, "step_ms": step, "accept_length": al,
                         "accept_source": prof.tag(sc.depth) if prof else "no speculation", "step_source": src})
    for r in rows:  # Pareto-optimal over all methods: no point is better on both axes
        r["pareto"] = not any(o["per_user_tok_s"] >= r["per_user_tok_s"] and o["per_gpu_tok_s"] >= r["per_gpu_tok_s"]
                              and (o["per_user_tok_s"] > r["per_user_tok_s"] or o["per_gpu_tok_s"] > r["per_gpu_tok_s"])
                              for o in rows)
    return rows


def draft_prefill_saving(spec: ModelSpec, hw: HardwareSpec, ctx: int, window: int, sink: int) -> dict:
    """Speed-of-light time of the draft layer's prefill over ctx tokens against over the last
    W + n_sink (causal attention flops 2 * q_heads * head_dim * S^2, projections and FFN 2 * params
    per token, at the bf16 rate x flop_eff). An estimate: engines overlap some of it with the target."""
    def prefill_ms(n: int) -> float:
        attn = 2.0 * spec.q_heads * spec.head_dim * n * n
        params = 2 * spec.hidden * spec.hidden + spec.attn_params + (
            spec.moe_dense_params + spec.top_k * spec.expert_params if spec.mtp_moe else spec.dense_ffn_params)
        return (attn + 2.0 * params * n) / (hw.bf16_tflops * 1e12 * hw.flop_eff) * 1e3

    native, pruned = prefill_ms(ctx), prefill_ms(min(ctx, window + sink))
    return {"native_ms": native, "window_ms": pruned, "saving_ms": native - pruned,
            "source": "estimate (speed-of-light flops)"}


ODD_TREE_WIDTH = 64  # wider speculation trees than any engine runs


def sink_warning(ctx: int, sink: int) -> list[str]:
    """A sink longer than the context: legal, and the window then reads the whole context."""
    if sink > ctx:
        return [f"--sink {sink} is larger than the context ({ctx} tokens): the window reads the whole context, "
                "like the native draft"]
    return []


def odd_input_warnings(ctx: int, window: int, sink: int, tree_width: int = 1) -> list[str]:
    """Legal but odd inputs, said out loud (exit 0)."""
    out = sink_warning(ctx, sink)
    if not out and window + sink >= ctx:
        out.append(f"the window ({window} + sink {sink}) covers the whole context ({ctx} tokens): windowing reads "
                   "the same keys as the native draft")
    if tree_width > 1:  # DESIGN 3: k sizes the ring; the step costs are a chain's (they were shown without a word)
        wide = (f"; {tree_width} is also far wider than any serving engine's speculation tree (<= {ODD_TREE_WIDTH})"
                if tree_width > ODD_TREE_WIDTH else "")
        out.append(f"--tree-width {tree_width} sizes the draft ring only (n_sink + W + d*k slots): the step costs and "
                   f"TPOT are a chain's (k = 1), since wmtp does not price a tree's wider verify{wide}")
    return out


SWEEPS = ("ctx", "depth", "window", "batch")
MAX_SWEEP_BATCH = 512  # a frontier past this many concurrent requests is cut (and says so)


def sweep(what: str, sc: Scenario, acc: AcceptanceChoice, *, threshold: float = 0.05) -> tuple[list[dict], dict]:
    """(rows, extra) of one decision curve: TPOT against context, depth, window or batch, with its
    break-even point (`extra`)."""
    extra: dict = {}
    if what == "depth":  # the grid, and the scenario's own depth when it lies outside it
        rows = depth_curve(sc, acc, sorted(set(defaults.DEPTH_GRID) | {sc.depth}))
        extra["best_depth"] = best_depths(rows)
    elif what == "ctx":
        rows = context_curve(sc, acc, defaults.CTX_GRID)
        extra["break_even_ctx"] = break_even_context(sc, acc, threshold)
        extra["break_even_threshold"] = threshold
    elif what == "window":
        if acc.window_al is not None and acc.window_al.depth != sc.depth:
            extra["note"] = f"AL(W) measured at d={acc.window_al.depth}; other depths via a geometric profile"
        rows = window_curve(sc, acc, defaults.WINDOW_GRID)
        extra["break_even_window"] = break_even_window(rows)
    elif what == "batch":
        mem = memory_report(per_gpu_spec(sc.spec, sc.tp), sc.hw, sc.ctx, sc.window, sc.sink, sc.depth,
                            engine=sc.engine_memory, engine_tp=sc.tp)
        rows = batch_frontier(sc, acc, max_batch=MAX_SWEEP_BATCH)
        if not rows:
            raise WmtpError(f"no request of {sc.ctx} tokens fits on {sc.hw.key}")
        extra["pareto"] = [f"{r['method']} B={r['batch']}" for r in rows if r["pareto"]]
        cut = [m for m, b in mem.max_batch.items() if b > MAX_SWEEP_BATCH]
        if cut:
            extra["note"] = (f"memory seats more than {MAX_SWEEP_BATCH} requests for {', '.join(cut)} "
                             f"(up to {max(mem.max_batch.values()):,}); the frontier stops at B={MAX_SWEEP_BATCH}")
    else:
        raise WmtpError(f"sweep takes {', '.join(SWEEPS)}, not {what!r}")
    return rows, extra
