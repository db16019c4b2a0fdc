"""Headroom: per component of a step, what the engine's kernels cost, what wmtp's own (roofline-class)
kernels cost, and the physical floor, on the same GPU — so a user sees how much of a step is the method
(windowing) and how much is kernel quality.

    engine   the step priced by a profile measured with an engine backend (e.g. h200-flashinfer)
    own      the same step priced by the own-kernel profile (h200: wmtp's Triton kernels)
    floor    the larger of bytes / the fastest HBM stream and flops / the GEMM rate at the item's compute dtype,
             from the two profiles' runs (`Ceilings`); draft attention that stays in L2 across the draft loop reads
             at the hardware row's L2 bandwidth instead
Engine host terms are not kernels: they are not part of this view (see `predict --framework`).

The byte rate is not the copy's alone: a copy (read + write, `copy_tbps`) runs slower than a pure read, and
the runs' own lm_head and decode attention read up to 1-5 % faster than it (q122's lm_head at 1 token: 0.354 ms
measured, 0.356 ms at the copy rate). A floor at the copy rate put measured kernels below it.
A priced item below its floor all the same (a fit extrapolated past its measured range, whose flop term was
fitted where flops cost nothing) is not clamped: its row says so (`below_floor`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from wmtp.errors import WmtpError
from wmtp.hardware import HardwareSpec, get_hardware
from wmtp.latency import step_cost
from wmtp.provenance import Origin, source
from wmtp.specs import ModelSpec

FLOOR_SOURCE = "speed-of-light at the measured ceilings"
STREAM_MIN_L2 = 4  # a point counts as an HBM stream when it moves at least this many L2s of bytes
WEIGHT_KINDS = ("gemm", "moe", "lm_head")


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
    engine_source: str = ""
    own_source: str = ""
    floor_source: str = FLOOR_SOURCE
    below_floor: dict = field(default_factory=dict)  # side (own / engine) -> why it is priced below the floor


@dataclass(frozen=True)
class Ceilings:
    """The rates a floor divides by, per second: HBM bytes, L2 bytes (the hardware row's estimate), bf16 flops (other
    compute dtypes by `hw`'s datasheet ratio); `text` says where each comes from."""

    bytes_per_s: float
    l2_bytes_per_s: float
    flops_per_s: float
    hw: HardwareSpec
    text: str

    def flops_for(self, dtype: str) -> float:
        """The measured bf16 GEMM rate at another compute dtype, by the datasheet ratio (fp8: x2 on Hopper)."""
        return self.flops_per_s * self.hw.tflops_for(dtype) / self.hw.bf16_tflops


def fastest_stream(profile: dict, l2_bytes: float) -> tuple[float, str]:
    """(bytes / s, what) of the fastest measured shape in `profile` that moves at least `STREAM_MIN_L2` L2s of
    bytes (an HBM stream, not an L2 hit): medians of the shapes the fits read; all-reduce rows (links) left out."""
    best, what = 0.0, ""
    for kind, comp in profile.get("components", {}).items():
        if kind.startswith("allreduce"):
            continue
        for p in comp.get("points", []):
            if p["bytes"] >= STREAM_MIN_L2 * l2_bytes and p["median_ms"] > 0 and p["bytes"] / p["median_ms"] > best:
                best, what = p["bytes"] / p["median_ms"], (f"{kind} {p['model']} {p['config']} "
                                                            f"B={p.get('batch', 1):g}, {p['bytes'] / 2**30:.1f} GiB")
    return best * 1e3, what


def ceilings(own_cost, engine_cost, hw: HardwareSpec) -> Ceilings:
    """The measured ceilings of both profiles' runs (the own profile's copy and GEMM rows, the fastest HBM stream
    of either run), scaled to `hw` by the bandwidth and flop ratios where they were measured on another GPU."""
    ref = get_hardware(own_cost.hw_key)
    copy = float(own_cost.profile.get("ceilings", {}).get("copy_tbps") or 0) * 1e12
    gemm = own_cost.gemm_flops_per_s(ref)
    if copy <= 0 or gemm <= 0:
        raise WmtpError("the own-kernel profile has no measured ceilings (copy_tbps, gemm_bf16_tflops)")
    streams = [fastest_stream(cm.profile, ref.l2_bytes) for cm in (own_cost, engine_cost)]
    stream, what = max(streams)
    rate = max(copy, stream)
    fastest = f"{what}, above the copy's {copy / 1e12:.2f} TB/s" if stream > copy else "the copy's"
    text = (f"bytes / {rate / 1e12:.2f} TB/s (the fastest HBM stream measured: {fastest}), flops / {gemm / 1e12:.0f} "
            "TFLOP/s (the bf16 GEMM, other compute dtypes by the datasheet ratio), L2-resident draft reads at "
            f"{hw.l2_bw_tbps:g} TB/s (the hardware row's L2 estimate)")
    if ref.key != hw.key:
        rate, gemm = rate * hw.hbm_bw_tbps / ref.hbm_bw_tbps, own_cost.gemm_flops_per_s(hw)
        text = f"scaled from {ref.key} by bandwidth and flop ratios: " + text
    return Ceilings(rate, hw.l2_bw_tbps * 1e12, gemm, hw, text)


def floor_parts(work, spec: ModelSpec, ceil: Ceilings) -> tuple[float, float]:
    """(bytes ms, flops ms) of one priced item (all its instances): bytes over the HBM (or L2) rate, flops over the
    GEMM rate of the item's compute dtype (weights in fp8 compute at the fp8 rate, as `SpeedOfLight` prices)."""
    bw = ceil.l2_bytes_per_s if work.shape.get("l2_resident") else ceil.bytes_per_s
    dtype = (work.shape.get("wdtype") or spec.weight_dtype) if work.kind in WEIGHT_KINDS else "bf16"
    return work.bytes * work.count / bw * 1e3, work.flops * work.count / ceil.flops_for(dtype) * 1e3


def floor_ms(work, spec: ModelSpec, ceil: Ceilings) -> float:
    """The floor of one priced item: the larger of its `floor_parts`."""
    return max(floor_parts(work, spec, ceil))


def below_floor_note(priced, parts: tuple[float, float]) -> str:
    """Why a priced item sits below its floor, in words ("" when it does not)."""
    floor = max(parts)
    if priced.time_ms >= floor * (1 - 1e-9):
        return ""
    origin = source(priced.source).weakest()
    why = {Origin.EXTRAPOLATED: "its fit is extrapolated here", Origin.SCALED: "its fit is another GPU's, scaled"
           }.get(origin, f"its {origin.value} fit undershoots it")
    l2 = bool(priced.work.shape.get("l2_resident"))
    bound = ("flops at the GEMM rate" if parts[1] > parts[0] else
             "bytes at the L2 estimate" if l2 else "bytes at the fastest measured stream")
    rate = "flop" if parts[1] > parts[0] else "byte"
    return (f"{100 * (1 - priced.time_ms / floor):.1f} % below the floor ({bound}): {why}, at a {rate} rate "
            f"above the {'estimated' if l2 and rate == 'byte' else 'measured'} ceiling")


def method_depths(depth: int | Mapping[str, int]) -> dict[str, int]:
    """The depth each speculative method is priced at: one d for both, or a mapping method -> d (`predict --depth
    auto` runs native and window each at its own best depth: the window rows were priced at native's)."""
    if isinstance(depth, Mapping):
        return {m: int(depth[m]) for m in ("native", "window")}
    return {"native": depth, "window": depth}


def headroom(spec: ModelSpec, hw: HardwareSpec, engine_cost, own_cost, ctx: int, depth: int | Mapping[str, int],
             window: int, sink: int, batch: int = 1, accept_lengths: Mapping[str, float] | None = None
             ) -> list[HeadroomRow]:
    """Rows for dense, native and window (one per priced component), engine vs own vs floor; `depth` as
    `method_depths` reads it; `accept_lengths` (method -> AL) size the draft-extend pass as `predict` does."""
    depths = method_depths(depth)
    if getattr(engine_cost, "hw_key", None) != getattr(own_cost, "hw_key", None):
        raise WmtpError("--headroom compares two profiles of the same GPU: "
                        f"{getattr(engine_cost, 'hw_key', '?')} vs {getattr(own_cost, 'hw_key', '?')}")
    ceil = ceilings(own_cost, engine_cost, hw)
    rows = []
    for method in ("dense", "native", "window"):
        d = 1 if method == "dense" else depths[method]
        al = (accept_lengths or {}).get(method)
        eng = step_cost(spec, hw, engine_cost, method, ctx, d, batch, window, sink, accept_length=al)
        own = step_cost(spec, hw, own_cost, method, ctx, d, batch, window, sink, accept_length=al)
        for phase, times in (("verify", 1), ("ctx", 1), ("fwd", eng.gamma)):
            for e, o in zip(getattr(eng, f"t_{phase}").items, getattr(own, f"t_{phase}").items):
                parts = floor_parts(o.work, spec, ceil)
                notes = {side: n for side, n in (("own", below_floor_note(o, parts)),
                                                 ("engine", below_floor_note(e, parts))) if n}
                rows.append(HeadroomRow(method, phase, o.work.name, o.work.kind, times, e.time_ms, o.time_ms,
                                        max(parts), str(e.source), str(o.source), below_floor=notes))
    return rows


def step_totals(rows: list[HeadroomRow]) -> dict:
    """Per method: the step's engine, own and floor ms (fwd rows counted gamma times), each with its source (the
    components' sources combined, as a step's are)."""
    from wmtp.provenance import combine

    out: dict = {}
    for m in dict.fromkeys(r.method for r in rows):
        mine = [r for r in rows if r.method == m]
        out[m] = {f"{side}_ms": sum(getattr(r, f"{side}_ms") * r.times for r in mine) for side in ("engine", "own",
                                                                                                   "floor")}
        out[m].update({f"{side}_source": combine(getattr(r, f"{side}_source") for r in mine)
                       for side in ("engine", "own")}, floor_source=FLOOR_SOURCE)
        low = [side for side in ("own", "engine") if out[m][f"{side}_ms"] < out[m]["floor_ms"] * (1 - 1e-9)]
        out[m]["below_floor"] = {side: "its components sum below their floors' sum (see the components')"
                                 for side in low}
    return out


def headroom_report(spec: ModelSpec, hw: HardwareSpec, profile_path, ctx: int, depth: int | Mapping[str, int],
                    window: int, sink: int, batch: int = 1, tp: int = 1,
                    accept_lengths: Mapping[str, float] | None = None) -> dict:
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
    rows = headroom(per_gpu_spec(spec, tp), hw, engine, own, ctx, depth, window, sink, batch, accept_lengths)
    out = {"engine_kernels": engine.name, "own_kernels": own.name, "floor": ceilings(own, engine, hw).text,
           "depth": _depth_json(method_depths(depth)), "steps": step_totals(rows), "components": [asdict(r) for r in rows]}
    measured_on = {engine.hw_key, own.hw_key} - {hw.key}
    if measured_on:  # no profile of this GPU ships: both sides are another GPU's, scaled
        out["note"] = (f"no profiles of {hw.key}: both sides measured on {', '.join(sorted(measured_on))} and scaled "
                       f"to {hw.key} by bandwidth and flop ratios (the engine/own ratio is the measured GPU's)")
    return out


def _depth_json(depths: dict[str, int]):
    """One d where both methods run at it, else the mapping."""
    return depths["native"] if depths["native"] == depths["window"] else depths
