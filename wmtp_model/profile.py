"""Reading measured profiles (building and fitting them is `wmtp.calibrate`): the fitted latency components of one GPU, as schema-versioned JSON.

A profile holds provenance, the ceilings measured in the same run, one fit per work kind
(coefficients, held-out error, the shapes measured), and the sha256 of the raw data it was
fitted on. `ProfileCostModel` prices `wmtp.latency` work items from it and tags every number:
`measured` (a shape of this model that was timed), `interpolated` (inside the measured range of
bytes and flops), `extrapolated` (outside it, holding the fitted bandwidth and flop rate), or, on
another GPU, `scaled from <gpu>` (byte and flop terms scaled by the bandwidth and flop ratios).
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path

from wmtp.errors import ProfileError, WmtpError
from wmtp.fileio import read_versioned_json
from wmtp.features import call_rows, fit_kind, group_name, work_features
from wmtp.hardware import HardwareSpec
from wmtp.kernel_plan import feature_backend
from wmtp.profile_check import check_profile
from wmtp.provenance import Origin, Source
from wmtp.work import Priced, Work
from wmtp.specs import ModelSpec

SCHEMA_VERSION = 1
PROFILE_KIND = "wmtp-latency-profile"
PROFILES_DIR = Path(__file__).resolve().parent / "data" / "profiles"




def load_profile(path: str | Path) -> dict:
    """A measured profile, validated: every component's fit numeric, finite and non-negative (the fits
    are non-negative least squares), its ranges and points numeric; else `ProfileError`."""
    p = Path(path)
    return check_profile(read_versioned_json(p, "latency profile", PROFILE_KIND, SCHEMA_VERSION, ProfileError), p)


WEIGHT_KINDS = ("gemm", "moe", "lm_head")


def launches(work: Work, comp: dict) -> float:
    """Calls of a per-call fit one work item makes (a quantized-GEMM fit's constant and ranges are one GEMM
    call's, `wmtp.calibrate.quant_fit`: the item's launches, a MoE layer's two grouped calls); 1 for the sweep's
    fits, which timed whole work items."""
    if not comp.get("const_per_kernel"):
        return 1.0
    return float(comp.get("const_launches") or max(work.kernels, 1))


def regime_index(comp: dict, rows: float) -> tuple[int | None, bool]:
    """Which M regime of a quantized fit prices calls of `rows` rows (M), and whether `rows` lies outside the M the
    regimes measured: the regime whose `m_range` holds it, else the nearest one in log M (the lower on a tie). None
    for a fit without regimes (one implementation at every M)."""
    regs = comp.get("regimes")
    if not regs:
        return None, False

    def gap(m_range) -> float:
        lo, hi = m_range
        return math.log(lo / rows) if rows < lo else (math.log(rows / hi) if rows > hi else 0.0)

    i = min(range(len(regs)), key=lambda j: (gap(regs[j]["m_range"]), j))
    return i, not regs[0]["m_range"][0] <= rows <= regs[-1]["m_range"][1]


def weight_path(weight_dtype: str, hw: HardwareSpec) -> tuple[str | None, str]:
    """Which measured kernel family prices weights of `weight_dtype` on `hw`: `fp8` (W8A8), `int4` (4-bit
    weight-only) or None (the bf16 fit), and a note saying so where it is not the dtype's own. NVFP4 runs as a
    4-bit weight-only GEMM on a GPU without FP4 tensor cores (Hopper: the 4-bit values are expanded to bf16 in the
    kernel, e.g. vLLM's Marlin NVFP4 path), at NVFP4's bytes; on a GPU with them (Blackwell) it is an FP4
    tensor-core GEMM, which no profile measured: the bf16 fit with bytes and flops at the FP4 rate."""
    if weight_dtype in ("fp8", "int4"):
        return weight_dtype, ""
    if weight_dtype == "nvfp4":
        if hw.fp4_tflops > 0:
            return None, (f"nvfp4 on {hw.key}'s FP4 tensor cores: bf16 fit at FP4 bytes and flop rate, "
                          "no FP4 kernel measured")
        return "int4", f"nvfp4 as 4-bit weight-only: {hw.key} has no FP4 tensor cores"
    return None, ""


@lru_cache(maxsize=8)
def _load_cached(path: str) -> dict:
    return load_profile(path)


def _real(path: str | Path) -> str:
    """os.path.realpath, or the path as given where the working directory was deleted (realpath's getcwd raised
    FileNotFoundError, a traceback): the reader then says the file is missing."""
    try:
        return os.path.realpath(path)
    except OSError:
        return str(path)


def shipped_profile_path(hardware: str) -> Path | None:
    p = PROFILES_DIR / f"{hardware}.json"
    return p if p.exists() else None


class ProfileCostModel:
    """Prices work items from a measured profile (see module docstring for the tags)."""

    def __init__(self, profile: dict, source_path: str = ""):
        self.profile = profile
        self.hw_key = profile["hardware"]
        backend = profile.get("backend") or profile.get("provenance", {}).get("backend")
        self.name = (f"measured profile {self.hw_key}" + (f" [{backend} kernels]" if backend and backend != "wmtp" else "")
                     + (f" ({source_path})" if source_path else ""))
        self._hw_ref = None
        # The attention kernels the profile measured (features follow their tiling); older profiles: wmtp's own.
        self.backend = str(profile.get("backend") or profile.get("provenance", {}).get("backend") or "wmtp")
        self.feature_backend = feature_backend(self.backend, profile.get("attention_kernels"))
        self._cache: dict = {}

    @classmethod
    def from_path(cls, path: str | Path, label: str | None = None) -> "ProfileCostModel":
        return cls(_load_cached(_real(path)), label if label is not None else str(path))

    def _component(self, kind: str, kv_dtype: str = "bf16") -> dict:
        """The fit for `kind`; attention over a KV cache of another dtype takes its own fit where the profile
        measured one (`verify_attn@fp8`: FlashInfer's fp8-KV kernels are other kernels, not bf16 at half
        the bytes)."""
        comps = self.profile["components"]
        if kv_dtype != "bf16" and kind.endswith("_attn"):
            own = comps.get(f"{kind}@{kv_dtype}") or comps.get(f"{fit_kind(kind)}@{kv_dtype}")
            if own is not None:
                return own
        comp = comps.get(kind) or comps.get(fit_kind(kind))
        if comp is None:
            raise ProfileError(f"profile for {self.hw_key} has no fit for {kind!r} components; recalibrate")
        return comp

    def _weight_component(self, kind: str, wdtype: str, hw: HardwareSpec) -> tuple[dict, str, str, str]:
        """A weight-bound item's fit (`gemm`, `moe`, `lm_head`): the profile's fit of the item's weight path (its
        storage format `wdtype`) where it measured one (`gemm@fp8`, `moe@int4`; `wmtp.calibrate.quant_fit`), else the
        bf16 fit. Returns (fit, compute dtype it was measured at, compute dtype on `hw`, note for the source tag)."""
        path, note = weight_path(wdtype, hw)
        comps = self.profile["components"]
        # One quantized dense-GEMM fit prices the lm_head too (`wmtp.calibrate.quant_fit`), unless it has its own.
        own = None
        if path:
            own = comps.get(f"{kind}@{path}") or (comps.get(f"gemm@{path}") if kind == "lm_head" else None)
        if own is not None:
            dtype = "fp8" if path == "fp8" else "bf16"  # int4 is weight-only: bf16 tensor-core math
            return own, dtype, dtype, note
        if path:  # no fit of this format's kernel: the bf16 kernel's fit at these bytes, across dtypes
            return self._component(kind), "bf16", wdtype, f"the bf16 fit at {wdtype} weight bytes: no {kind}@{path} fit"
        return self._component(kind), "bf16", wdtype, note

    def _regime(self, comp: dict, work: Work) -> tuple[dict, str, bool]:
        """The fit of `comp`'s M regime for `work`'s calls (`regime_index`; `call_rows`), merged with the per-call
        fields of `comp` (one dict per regime, cached: the range cache keys on it), a note naming its
        implementation, and whether the call's M lies outside the measured M; `comp` itself where it has no
        regimes."""
        rows = call_rows(work)
        i, outside = regime_index(comp, rows)
        if i is None:
            return comp, "", False
        key = ("regime", id(comp), i)
        if key not in self._cache:
            base = {k: v for k, v in comp.items() if k != "regimes"}
            self._cache[key] = {**base, **comp["regimes"][i]}
        fit = self._cache[key]
        lo, hi = fit["m_range"]
        m = f"M {lo:g}" if lo == hi else f"M {lo:g}-{hi:g}"
        return fit, f"{fit['impl']} ({m} regime{f'; call M {rows:g} outside the measured M' if outside else ''})", \
            outside

    def _ranges(self, kind: str, comp: dict) -> tuple:
        """Measured ranges of bytes, flops and bytes per request (cached per fit)."""
        key = ("ranges", kind, id(comp))
        if key not in self._cache:
            pts = comp["points"]
            per_req = [p["bytes"] / max(p.get("batch", 1.0), 1.0) for p in pts] or [0.0]
            flops = comp.get("flops_range", [0.0, 0.0])  # optional, as `load_profile` reads it
            self._cache[key] = (comp["bytes_range"], flops, (min(per_req), max(per_req)))
        return self._cache[key]

    def tag(self, work: Work, spec: ModelSpec, comp: dict) -> Source:
        batch = float(work.shape.get("batch", 1) or 1)
        for pt in comp["points"]:
            if (pt["model"] == spec.key and abs(pt["bytes"] - work.bytes) <= 0.01 * max(work.bytes, 1)
                    and abs(pt["flops"] - work.flops) <= 0.01 * max(work.flops, 1)
                    and abs(pt.get("batch", 1.0) - batch) < 0.5):
                return Source("measured", Origin.MEASURED)
        (lo, hi), (flo, fhi), (rlo, rhi) = self._ranges(work.kind, comp)
        calls = launches(work, comp)  # a per-call fit's ranges are one call's: compare one call of the item
        per_req = work.bytes / batch / calls

        def inside(x, a, b):
            return a * 0.999 <= x <= b * 1.001

        if inside(work.bytes / calls, lo, hi) and inside(work.flops / calls, flo, fhi) and inside(per_req, rlo, rhi):
            return Source("interpolated", Origin.INTERPOLATED)
        return Source("extrapolated", Origin.EXTRAPOLATED)

    def price(self, work: Work, hw: HardwareSpec, spec: ModelSpec) -> Priced:
        from wmtp.latency import price_allreduce

        if work.kind == "allreduce":
            comp = self.profile["components"].get(f"allreduce_tp{int(work.shape.get('tp', 1))}")
            if comp is None or hw.key != self.hw_key:
                return price_allreduce(work, hw)
            coef = dict(zip(comp["features"], comp["coef_ms"]))
            t = coef.get("const", 0.0) + coef.get("bytes", 0.0) * work.bytes
            return Priced(work, t * work.count, self.tag(work, spec, comp))
        if work.kind in WEIGHT_KINDS:
            wdtype = work.shape.get("wdtype") or spec.weight_dtype
            comp, ref_dtype, dtype, note = self._weight_component(work.kind, wdtype, hw)
            bf16 = self._component(work.kind)
            if comp is bf16:  # a quantized format without its own fit is priced across dtypes: extrapolated
                return self._priced(work, hw, spec, comp, ref_dtype, dtype, note,
                                    extrapolated=weight_path(wdtype, hw)[0] is not None)
            comp, impl, outside = self._regime(comp, work)
            quant = self._priced(work, hw, spec, comp, ref_dtype, dtype, "; ".join(filter(None, (note, impl))),
                                 outside)
            # The measured quantized kernel stands in for the engine's. Where the bf16 kernel reads the same bytes
            # faster, the measured quantized kernel is the slower implementation, not the format's cost: price
            # the bytes at the bf16 kernel's rate and say so.
            # The bf16 reference: the quant benchmark's own bf16 GEMM (`gemm@bf16`: torch's on the same matrices, down
            # to a few MB) where the profile has it, without the factor of the bf16 shape the bytes came from.
            ref = self.profile["components"].get("gemm@bf16") if work.kind != "moe" else None
            kernel = f"the measured {wdtype} kernel is slower{f': {impl}' if impl else ''}"
            alt = self._priced(work, hw, spec, self._regime(ref, work)[0] if ref else bf16, "bf16", dtype,
                               f"bf16 kernel's rate at {wdtype} bytes: {kernel}", shape_factor=ref is None)
            return alt if alt.time_ms < quant.time_ms else quant
        comp = self._component(work.kind, spec.kv_dtype)
        if spec.kv_dtype != "bf16" and work.kind.endswith("_attn") and comp is self._component(work.kind):
            # no fit of this KV dtype's kernel: the bf16 kernel's fit at these bytes is an extrapolation across
            # dtypes (wmtp's fp8 decode measured 67-90 % of copy at B = 16 where bf16 reaches 100 %:
            # measure/results/h200-fp8-ablation), whatever the bytes' range says
            return self._priced(work, hw, spec, comp, "bf16", "bf16", f"the bf16-KV fit at {spec.kv_dtype} KV bytes; "
                                f"`wmtp calibrate --parts kv-{spec.kv_dtype}` measures it", extrapolated=True)
        return self._priced(work, hw, spec, comp, "bf16", "bf16", "")

    def _priced(self, work: Work, hw: HardwareSpec, spec: ModelSpec, comp: dict, ref_dtype: str, dtype: str,
                note: str, extrapolated: bool = False, shape_factor: bool = True) -> Priced:
        from wmtp.hardware import get_hardware

        same_gpu = hw.key == self.hw_key
        sm = int(self.profile.get("provenance", {}).get("gpu_sm_count") or hw.sm_count) if same_gpu else hw.sm_count
        feats = work_features(work, spec, sm, self.feature_backend)
        feats["const"] = launches(work, comp)
        coef = dict(zip(comp["features"], comp["coef_ms"]))
        # A call's M outside every measured M regime (or a fit of another dtype) is extrapolated, whatever its bytes.
        tag = Source("extrapolated", Origin.EXTRAPOLATED) if extrapolated else self.tag(work, spec, comp)
        if not same_gpu:
            try:
                ref = self._hw_ref or get_hardware(self.hw_key)
            except WmtpError as e:  # the profile's own GPU: "unknown hardware 'a100'" named no file and no option
                raise WmtpError(f"{self.name} was measured on {self.hw_key!r}, which cannot be scaled to "
                                f"{hw.key}: {e}") from None
            self._hw_ref = ref
            bw = ref.hbm_bw_tbps / hw.hbm_bw_tbps
            fl = ref.tflops_for(ref_dtype) / hw.tflops_for(dtype)
            for f in coef:
                if f.endswith("bytes"):
                    coef[f] *= bw
                elif f.endswith("flops"):
                    coef[f] *= fl
            tag = Source(f"scaled from {self.hw_key} ({tag} there{'; ' + note if note else ''})", Origin.SCALED)
        elif note:
            tag = Source(f"{tag} ({note})", tag.origin)
        factor = comp.get("groups", {}).get(f"{spec.key}|{group_name(work.name, feats)}", 1.0) if shape_factor else 1.0
        t = factor * sum(c * feats.get(f, 0.0) for f, c in coef.items())
        floor = self._flops_floor_ms(work, hw, dtype)
        if t < floor:  # a fit of bandwidth-bound shapes under-prices a compute-bound one: no kernel beats the
            # measured GEMM peak, so the item takes its flops at that rate, and says so (an extrapolation of the fit)
            tag = Source(f"extrapolated (raised to its flops at the measured GEMM peak: the fit gave {t / floor:.0%} "
                         f"of that; {tag})", Origin.EXTRAPOLATED)
            t = floor
        return Priced(work, t * work.count, tag)

    def gemm_flops_per_s(self, hw: HardwareSpec, dtype: str = "bf16") -> float:
        """The profile's measured bf16 GEMM peak (`ceilings`) in flop/s, scaled to `hw` by the datasheets' bf16
        ratio where it was measured on another GPU, at `dtype`'s datasheet ratio to bf16 on `hw`; 0 without one."""
        from wmtp.hardware import get_hardware

        peak = float(self.profile.get("ceilings", {}).get("gemm_bf16_tflops") or 0.0) * 1e12
        if hw.key != self.hw_key:
            peak *= hw.bf16_tflops / (self._hw_ref or get_hardware(self.hw_key)).bf16_tflops
        return peak * hw.tflops_for(dtype) / hw.bf16_tflops

    def _flops_floor_ms(self, work: Work, hw: HardwareSpec, dtype: str) -> float:
        """One instance's flops at `gemm_flops_per_s` (0 where the profile has no measured peak)."""
        rate = self.gemm_flops_per_s(hw, dtype)
        return work.flops / rate * 1e3 if rate > 0 and work.flops > 0 else 0.0

def cost_model_for(hw: HardwareSpec, profile_path: str | Path | None, speed_of_light: bool = False,
                   frameworks=None):
    """The cost model `predict` uses: --speed-of-light, else --profile, else the measured kernels an engine
    preset in `frameworks` names (its `kernel_profile`, e.g. h200-flashinfer), else the shipped profile of this
    GPU, else the shipped H200 profile scaled to this GPU, else speed-of-light."""
    from wmtp.engine import kernel_profile
    from wmtp.latency import SpeedOfLight

    if speed_of_light and profile_path is not None:  # one would be silently ignored (the profile not even read)
        raise ProfileError("give one of --speed-of-light (datasheet rates) or --profile (measured), not both")
    if speed_of_light:
        return SpeedOfLight()
    if profile_path is not None:
        return ProfileCostModel.from_path(profile_path)
    kernels = kernel_profile(frameworks)
    if kernels is not None:
        p = PROFILES_DIR / f"{kernels}.json"
        if not p.is_file():
            raise ProfileError(f"the engine preset's kernel profile {kernels!r} is not shipped "
                               f"(looked for {p})")
        return ProfileCostModel.from_path(p, "shipped, the engine's kernels")
    own = shipped_profile_path(hw.key)
    if own is not None:
        return ProfileCostModel.from_path(own, "shipped")
    ref = shipped_profile_path("h200")
    if ref is not None:
        return ProfileCostModel.from_path(ref, "shipped")
    return SpeedOfLight()


def framework_warnings(cost, frameworks, hw_key: str) -> list[str]:
    """What `--framework` items say about the GPU and kernels they are applied to: a framework profile fitted from
    another GPU's logs (its constants do not scale with the GPU, as an engine preset's do not), and an engine preset
    over other kernels (`preset_kernels_warning`)."""
    from wmtp.engine import read_items

    out = [f"framework profile {p.name} was fitted from {doc['hardware']}'s logs, applied to {hw_key}: its constants "
           "do not scale with the GPU" for p, doc, is_preset in read_items(frameworks)
           if not is_preset and doc.get("hardware") != hw_key]
    return out + preset_kernels_warning(cost, frameworks)


def preset_kernels_warning(cost, frameworks) -> list[str]:
    """An engine preset's terms were fitted over one measured kernel profile (its `kernel_profile`, e.g.
    h200-flashinfer); priced over kernels of another backend (a --profile of wmtp's own kernels) or over
    --speed-of-light, they sit on kernels they were not fitted with: said out loud. A --profile of the same backend
    (the engine's kernels measured on the user's GPU) is what the preset expects."""
    from wmtp.engine import kernel_profile

    kernels = kernel_profile(frameworks)
    if kernels is None:
        return []
    path = PROFILES_DIR / f"{kernels}.json"
    want = str(_load_cached(_real(path)).get("backend") or "wmtp") if path.is_file() else None
    if isinstance(cost, ProfileCostModel):
        if want is None or cost.backend == want:
            return []
        have = f"--profile measured {cost.backend} kernels"
    else:
        have = "--speed-of-light prices datasheet rates"
    return [f"the engine preset's terms were fitted over the measured {want or kernels} kernels ({kernels}); {have}: "
            "the preset's terms sit on other kernels than they were fitted with"]

