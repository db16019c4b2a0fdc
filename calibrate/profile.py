"""Building and saving measured profiles (reading and pricing with them is `wmtp.profile`)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict
from pathlib import Path

from wmtp.errors import ProfileError
from wmtp.fileio import atomic_write_text
from wmtp.profile import PROFILE_KIND, SCHEMA_VERSION, check_profile


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_profile(fits: dict, hardware: str, provenance: dict, ceilings: dict, raw_path: str | Path,
                  models: list[str], extra: dict | None = None) -> dict:
    comps = {}
    for kind, f in fits.items():
        d = asdict(f)
        comps[kind] = {
            "features": list(d["features"]), "coef_ms": d["coef"], "groups": d["groups"], "n_shapes": d["n_shapes"],
            "heldout": {"median_rel": d["heldout_median"], "p90_rel": d["heldout_p90"], "max_rel": d["heldout_max"],
                        "method": "leave-one-shape-out"},
            "bytes_range": list(d["bytes_range"]), "flops_range": list(d["flops_range"]), "points": d["points"],
        }
    return {
        "schema_version": SCHEMA_VERSION, "kind": PROFILE_KIND, "hardware": hardware, "models": models,
        "provenance": provenance, "ceilings": ceilings, "components": comps,
        "raw_data": {"file": Path(raw_path).name, "sha256": sha256_file(raw_path)},
        **(extra or {}),
    }


def _non_finite_at(obj, where: str = "") -> str | None:
    """The key path of the first NaN or infinity in a JSON-like document (None: there is none)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return where or "the top level"
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple)) else ()
    for k, v in items:
        found = _non_finite_at(v, f"{where}.{k}" if where else str(k))
        if found:
            return found
    return None


def _check_prices(profile: dict) -> None:
    """The profile prices a step of every model it was fitted for (a fit missing, e.g. no usable verify_attn rows,
    is a profile `wmtp predict` refuses: 'no fit for ...; recalibrate')."""
    from wmtp.hardware import HARDWARE
    from wmtp.latency import step_cost
    from wmtp.models import MODELS
    from wmtp.profile import ProfileCostModel

    hw = HARDWARE.get(profile.get("hardware"))
    if hw is None:  # an unregistered GPU: no datasheet to price with here
        return
    cost = ProfileCostModel(profile)
    for key in profile.get("models") or []:
        if key in MODELS:
            try:
                step_cost(MODELS[key], hw, cost, "native", 1 << 20, 7, accept_length=3.0)
            except ProfileError as e:
                raise ProfileError(f"it cannot price {key}, a model it was fitted for: {e}") from None


def save_profile(profile: dict, path: str | Path) -> None:
    """Write `profile` to `path`, checked first as `wmtp.profile.load_profile` will read it and as `wmtp predict`
    prices with it: the fit never writes a profile the tool then refuses (a NaN, a provenance field of the wrong type
    from a hand-edited sidecar, a component without a fit)."""
    try:
        check_profile(profile, Path(path))
        text = json.dumps(profile, indent=1, sort_keys=True, allow_nan=False)
        _check_prices(profile)
    except (ProfileError, ValueError) as e:
        why = str(e) if isinstance(e, ProfileError) else \
            f"it holds a non-finite number (NaN or infinity) at {_non_finite_at(profile)}"
        raise ProfileError(f"not writing a profile wmtp could not read back: {why}") from None
    atomic_write_text(Path(path), text + "\n")


