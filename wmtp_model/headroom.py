"""Headroom: per component of a step, what the engine's kernels cost, what wmtp's own (roofline-class)
kernels cost, and the physical floor, on the same GPU — so a user sees how much of a step is the method
(windowing) and how much is kernel quality.

    engine   the step priced by a profile measured with an engine backend (e.g. h200-flashinfer)
    own      the same step priced by the own-kernel profile (h200: wmtp's Triton kernels)
    floor    bytes / copy bandwidth and flops / GEMM rate, both measured in the own profile's run (the
             larger of the two per component); a pure read can stream a few percent above a copy's rate
             (measured up to 105 % for decode at 1M, measure/results/h200-backends/backends.md)
Engine host terms are not kernels: they are not part of this view (see `predict --framework`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from wmtp.errors import WmtpError
from wmtp.hardware import HardwareSpec
from wmtp.latency import step_cost
from wmtp.specs import ModelSpec


@dataclass(frozen=True)
class HeadroomRow:
    method: str
    phase: str  # verify | ctx | fwd (fwd rows are per draft forward; `times` says how often per step)
    component: str
    kind: str
    times: int
    engine_ms: float
    own_ms: float
    floor_ms: float


def floor_ms(kind: str, nbytes: float, flops: float, ceilings: dict) -> float:
    """The measured-ceiling floor of one priced item (all its instances)."""
    bw = float(ceilings.get("copy_tbps") or 0) * 1e12
    rate = float(ceilings.get("gemm_bf16_tflops") or 0) * 1e12
    if bw <= 0 or rate <= 0:
        raise WmtpError("the own-kernel profile has no measured ceilings (copy_tbps, gemm_bf16_tflops)")
    return max(nbytes / bw, flops / rate) * 1e3


def method_depths(depth: int | Mapping[str, int]) -> dict[str, int]:
    """The depth each speculative method is priced at: one d for both, or a mapping method -> d (`predict --depth
    auto` runs native and window each at its own best depth: the window rows were priced at native's)."""
    if isinstance(depth, Mapping):
        return {m: int(depth[m]) for m in ("native", "window")}
    return {"native": depth, "window": depth}


def headroom(spec: ModelSpec, hw: HardwareSpec, engine_cost, own_cost, ctx: int, depth: int | Mapping[str, int],
             window: int, sink: int, batch: int = 1) -> list[HeadroomRow]:
    """Rows for dense, native and window (one per priced component), engine vs own vs floor; `depth` as
    `method_depths` reads it."""
    depths = method_depths(depth)
    if getattr(engine_cost, "hw_key", None) != getattr(own_cost, "hw_key", None):
        raise WmtpError("--headroom compares two profiles of the same GPU: "
                        f"{getattr(engine_cost, 'hw_key', '?')} vs {getattr(own_cost, 'hw_key', '?')}")
    ceilings = own_cost.profile.get("ceilings", {})
    rows = []
    for method in ("dense", "native", "window"):
        d = 1 if method == "dense" else depths[method]
        eng = step_cost(spec, hw, engine_cost, method, ctx, d, batch, window, sink)
        own = step_cost(spec, hw, own_cost, method, ctx, d, batch, window, sink)
        gamma = eng.gamma
        for phase, times in (("verify", 1), ("ctx", 1), ("fwd", gamma)):
            ep, op = getattr(eng, f"t_{phase}").items, getattr(own, f"t_{phase}").items
            for e, o in zip(ep, op):
                w = e.work
                rows.append(HeadroomRow(method, phase, w.name, w.kind, times, e.time_ms, o.time_ms,
                                        floor_ms(w.kind, w.bytes * w.count, w.flops * w.count, ceilings)))
    return rows


def step_totals(rows: list[HeadroomRow]) -> dict:
    """Per method: the step's engine, own and floor ms (fwd rows counted gamma times)."""
    out: dict = {}
    for r in rows:
        t = out.setdefault(r.method, {"engine_ms": 0.0, "own_ms": 0.0, "floor_ms": 0.0})
        t["engine_ms"] += r.engine_ms * r.times
        t["own_ms"] += r.own_ms * r.times
        t["floor_ms"] += r.floor_ms * r.times
    return out


def headroom_report(spec: ModelSpec, hw: HardwareSpec, profile_path, ctx: int, depth: int | Mapping[str, int],
                    window: int, sink: int, batch: int = 1, tp: int = 1) -> dict:
    """The headroom view as JSON: the engine-backend profile (`profile_path` when it was measured with an engine
    backend, else the shipped `<gpu>-flashinfer` one) against the own-kernel profile of the same GPU. Its `depth` is
    the one d both methods run at, or where they run at two (`method_depths`) a mapping native / window -> d."""
    from dataclasses import asdict

    from wmtp.profile import PROFILES_DIR, ProfileCostModel, shipped_profile_path
    from wmtp.tp import per_gpu_spec

    own_path = shipped_profile_path(hw.key) or shipped_profile_path("h200")
    if own_path is None:
        raise WmtpError("--headroom needs the shipped own-kernel profile")
    if profile_path is not None:
        engine = ProfileCostModel.from_path(profile_path)
        if engine.backend == "wmtp":
            raise WmtpError(f"--headroom needs an engine-backend profile; {profile_path} was measured with wmtp's own "
                            "kernels (wmtp calibrate --backend flashinfer makes one)")
    else:
        path = PROFILES_DIR / f"{own_path.stem}-flashinfer.json"
        if not path.is_file():
            raise WmtpError(f"no engine-backend profile ships for {own_path.stem}: give --profile PATH from "
                            "`wmtp calibrate --backend flashinfer`")
        engine = ProfileCostModel.from_path(path, "shipped")
    own = ProfileCostModel.from_path(own_path, "shipped")
    rows = headroom(per_gpu_spec(spec, tp), hw, engine, own, ctx, depth, window, sink, batch)
    out = {"engine_kernels": engine.name, "own_kernels": own.name,
           "floor": "bytes / copy bandwidth, flops / GEMM rate (measured in the own profile's run)",
           "depth": _depth_json(method_depths(depth)), "steps": step_totals(rows), "components": [asdict(r) for r in rows]}
    measured_on = {engine.hw_key, own.hw_key} - {hw.key}
    if measured_on:  # no profile of this GPU ships: both sides are another GPU's, scaled
        out["note"] = (f"no profiles of {hw.key}: both sides measured on {', '.join(sorted(measured_on))} and scaled "
                       f"to {hw.key} by bandwidth and flop ratios (the engine/own ratio is the measured GPU's)")
    return out


def _depth_json(depths: dict[str, int]):
    """One d where both methods run at it, else the mapping."""
    return depths["native"] if depths["native"] == depths["window"] else depths
