"""Reading measured profiles (building and fitting them is `wmtp.calibrate`): the fitted latency components of one GPU, as schema-versioned JSON.

A profile holds provenance, the ceilings measured in the same run, one fit per work kind
(coefficients, held-out error, the shapes measured), and the sha256 of the raw data it was
fitted on. `ProfileCostModel` prices `wmtp.latency` work items from it and tags every number:
`measured` (a shape of this model that was timed), `interpolated` (inside the measured range of
bytes and flops), `extrapolated` (outside it, holding the fitted bandwidth and flop rate), or, on
another GPU, `scaled from <gpu>` (byte and flop terms scaled by the bandwidth and flop ratios).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from wmtp.errors import ProfileError
from wmtp.fileio import read_versioned_json
from wmtp.features import fit_kind, group_name, work_features
from wmtp.hardware import HardwareSpec
from wmtp.work import Priced, Work
from wmtp.specs import ModelSpec

SCHEMA_VERSION = 1
PROFILE_KIND = "wmtp-latency-profile"
PROFILES_DIR = Path(__file__).resolve().parent / "data" / "profiles"


def load_profile(path: str | Path) -> dict:
    p = Path(path)
    prof = read_versioned_json(p, "latency profile", PROFILE_KIND, SCHEMA_VERSION, ProfileError)
    comps = prof.get("components")
    if not isinstance(comps, dict) or not comps:
        raise ProfileError(f"profile {p} is corrupt: no components")
    for kind, c in comps.items():
        try:
            ok = len(c["features"]) == len(c["coef_ms"]) and all(isinstance(x, (int, float)) for x in c["coef_ms"])
            ok = ok and len(c["bytes_range"]) == 2 and isinstance(c["points"], list)
        except (KeyError, TypeError):
            ok = False
        if not ok:
            raise ProfileError(f"profile {p} is corrupt: component {kind!r} is malformed")
    if not isinstance(prof.get("hardware"), str):
        raise ProfileError(f"profile {p} is corrupt: no hardware key")
    return prof


@lru_cache(maxsize=8)
def _load_cached(path: str) -> dict:
    return load_profile(path)


def shipped_profile_path(hardware: str) -> Path | None:
    p = PROFILES_DIR / f"{hardware}.json"
    return p if p.exists() else None


class ProfileCostModel:
    """Prices work items from a measured profile (see module docstring for the tags)."""

    def __init__(self, profile: dict, source_path: str = ""):
        self.profile = profile
        self.hw_key = profile["hardware"]
        self.name = f"measured profile {self.hw_key}" + (f" ({source_path})" if source_path else "")
        self._hw_ref = None
        self._cache: dict = {}

    @classmethod
    def from_path(cls, path: str | Path, label: str | None = None) -> "ProfileCostModel":
        return cls(_load_cached(str(Path(path).resolve())), label if label is not None else str(path))

    def _component(self, kind: str) -> dict:
        comp = self.profile["components"].get(fit_kind(kind))
        if comp is None:
            raise ProfileError(f"profile for {self.hw_key} has no fit for {kind!r} components; recalibrate")
        return comp

    def _ranges(self, kind: str, comp: dict) -> tuple:
        """Measured ranges of bytes, flops and bytes per request (cached per kind)."""
        key = ("ranges", kind)
        if key not in self._cache:
            pts = comp["points"]
            per_req = [p["bytes"] / max(p.get("batch", 1.0), 1.0) for p in pts] or [0.0]
            self._cache[key] = (comp["bytes_range"], comp["flops_range"], (min(per_req), max(per_req)))
        return self._cache[key]

    def tag(self, work: Work, spec: ModelSpec, comp: dict) -> str:
        batch = float(work.shape.get("batch", 1) or 1)
        for pt in comp["points"]:
            if (pt["model"] == spec.key and abs(pt["bytes"] - work.bytes) <= 0.01 * max(work.bytes, 1)
                    and abs(pt["flops"] - work.flops) <= 0.01 * max(work.flops, 1)
                    and abs(pt.get("batch", 1.0) - batch) < 0.5):
                return "measured"
        (lo, hi), (flo, fhi), (rlo, rhi) = self._ranges(work.kind, comp)
        per_req = work.bytes / batch

        def inside(x, a, b):
            return a * 0.999 <= x <= b * 1.001

        if inside(work.bytes, lo, hi) and inside(work.flops, flo, fhi) and inside(per_req, rlo, rhi):
            return "interpolated"
        return "extrapolated"

    def price(self, work: Work, hw: HardwareSpec, spec: ModelSpec) -> Priced:
        from wmtp.hardware import get_hardware
        from wmtp.latency import price_allreduce

        if work.kind == "allreduce":
            comp = self.profile["components"].get(f"allreduce_tp{int(work.shape.get('tp', 1))}")
            if comp is None or hw.key != self.hw_key:
                return price_allreduce(work, hw)
            coef = dict(zip(comp["features"], comp["coef_ms"]))
            t = coef.get("const", 0.0) + coef.get("bytes", 0.0) * work.bytes
            return Priced(work, t * work.count, self.tag(work, spec, comp))
        comp = self._component(work.kind)
        same_gpu = hw.key == self.hw_key
        sm = int(self.profile.get("provenance", {}).get("gpu_sm_count") or hw.sm_count) if same_gpu else hw.sm_count
        feats = work_features(work, spec, sm)
        coef = dict(zip(comp["features"], comp["coef_ms"]))
        tag = self.tag(work, spec, comp)
        if not same_gpu:
            ref = self._hw_ref or get_hardware(self.hw_key)
            self._hw_ref = ref
            bw = ref.hbm_bw_tbps / hw.hbm_bw_tbps
            dtype = spec.weight_dtype if work.kind in ("gemm", "moe", "lm_head") else "bf16"
            fl = ref.tflops_for("bf16") / hw.tflops_for(dtype)
            for f in coef:
                if f.endswith("bytes"):
                    coef[f] *= bw
                elif f.endswith("flops"):
                    coef[f] *= fl
            tag = f"scaled from {self.hw_key} ({tag} there)"
        factor = comp.get("groups", {}).get(f"{spec.key}|{group_name(work.name, feats)}", 1.0)
        t = factor * sum(c * feats.get(f, 0.0) for f, c in coef.items())
        return Priced(work, t * work.count, tag)


def cost_model_for(hw: HardwareSpec, profile_path: str | Path | None, speed_of_light: bool = False):
    """The cost model `predict` uses: --speed-of-light, else --profile, else the shipped profile
    of this GPU, else the shipped H200 profile scaled to this GPU, else speed-of-light."""
    from wmtp.latency import SpeedOfLight

    if speed_of_light:
        return SpeedOfLight()
    if profile_path is not None:
        return ProfileCostModel.from_path(profile_path)
    own = shipped_profile_path(hw.key)
    if own is not None:
        return ProfileCostModel.from_path(own, "shipped")
    ref = shipped_profile_path("h200")
    if ref is not None:
        return ProfileCostModel.from_path(ref, "shipped")
    return SpeedOfLight()
