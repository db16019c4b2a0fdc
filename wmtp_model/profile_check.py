"""Checking a measured profile's fields before the cost model prices with them (`wmtp.profile.load_profile` reads
through `check_profile`): every component's fit numeric, finite and non-negative, its ranges, points, group factors and
M regimes sound, the kernel names well formed; else one `ProfileError` naming the field."""

from __future__ import annotations

import math
import re
from pathlib import Path

from wmtp.errors import ProfileError
from wmtp.features import FEATURES, fit_kind
from wmtp.kernel_plan import kernels_problem

MAX_COEF_MS = 1e3  # no fitted term is worth more than a second per unit (const: per kernel)


def check_profile(prof: dict, p: Path) -> dict:
    """`prof` (read from, or to be written to, `p`) if every field the cost model reads is sound; else
    `ProfileError` naming the field."""
    comps = prof.get("components")
    if not isinstance(comps, dict) or not comps:
        raise ProfileError(f"profile {p} is corrupt: no components")
    for kind, c in comps.items():
        why = _component_problem(c, kind)
        if why:
            raise ProfileError(f"profile {p} is corrupt: component {kind!r} {why}")
    hw = prof.get("hardware")
    if not isinstance(hw, str):
        raise ProfileError(f"profile {p} is corrupt: no hardware key")
    if not re.fullmatch(r"[A-Za-z0-9_.+-]{1,40}", hw):  # a name every header prints: 5000 characters made one line
        raise ProfileError(f"profile {p} is corrupt: hardware must be a hardware key (see `wmtp hardware`), got "
                           f"{repr(hw)[:40]}")
    ceilings = prof.get("ceilings", {})  # measured copy bandwidth and GEMM rate: the floors of --headroom
    if not isinstance(ceilings, dict) or not all(_is_num(v, 0.0) for v in ceilings.values()):
        raise ProfileError(f"profile {p} is corrupt: ceilings must map names to finite non-negative numbers")
    prov = prof.get("provenance", {})
    if not isinstance(prov, dict) or not _is_num(prov.get("gpu_sm_count", 1), 1, 1e5):
        raise ProfileError(f"profile {p} is corrupt: provenance gpu_sm_count must be a positive count")
    for key, value in (("backend", prof.get("backend")), ("moe_backend", prof.get("moe_backend")),
                       ("provenance backend", prov.get("backend")), ("provenance moe_impl", prov.get("moe_impl"))):
        if value is not None and not (isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", value)):
            raise ProfileError(f"profile {p} is corrupt: {key} must name a kernel backend, got {repr(value)[:40]}")
    for key in ("raw_data", "tp_raw_data", "kv_dtype_raw_data", "weight_dtype_raw_data"):  # report, merges read them
        rec = prof.get(key, {})
        recs = [rec] if key == "raw_data" else list(rec.values()) if isinstance(rec, dict) else [None]
        if not all(isinstance(r, dict) and isinstance(c := r.get("components", []), list)
                   and all(isinstance(x, str) for x in c) for r in recs):
            raise ProfileError(f"profile {p} is corrupt: {key} must be an object"
                               + ("" if key == "raw_data" else " of records (objects; components: a list of names)"))
    kernels = prof.get("attention_kernels")
    if kernels is not None and not (isinstance(kernels, str) and re.fullmatch(r"[A-Za-z0-9_.+-]{1,40}", kernels)):
        raise ProfileError(f"profile {p} is corrupt: attention_kernels must name a kernel set, got {repr(kernels)[:40]}")
    why = kernels_problem(prof.get("backend"), prov.get("backend"), kernels)
    if why:
        raise ProfileError(f"profile {p} {why}")
    return prof


def _is_num(x, lo: float = -math.inf, hi: float = math.inf) -> bool:
    if x is None:
        return True
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        f = float(x)
    except OverflowError:  # an integer no float holds (10**400): not a number this tool can price with
        return False
    return math.isfinite(f) and lo <= f <= hi


def _known_features(kind: str) -> tuple[str, ...]:
    """The features a component of `kind` ('gemm@int4', 'allreduce_tp2', ...) can be priced with: a name the
    pricing does not compute would price its term as zero, silently."""
    base = fit_kind(str(kind).split("@")[0])
    if base.startswith("allreduce_tp"):
        return ("const", "bytes")
    return FEATURES.get(base) or tuple(sorted({f for names in FEATURES.values() for f in names}))


def _component_problem(c, kind: str) -> str | None:
    """Why a profile component cannot be priced from, or None."""
    if not isinstance(c, dict):
        return "is not an object"
    feats, coefs = c.get("features"), c.get("coef_ms")
    if not (isinstance(feats, list) and isinstance(coefs, list) and len(feats) == len(coefs) and feats
            and all(isinstance(f, str) for f in feats)):
        return "is malformed: features and coef_ms must be lists of equal length"
    known = _known_features(kind)
    unknown = [f for f in feats if f not in known]
    if unknown or len(set(feats)) != len(feats):
        what = f"unknown feature {unknown[0][:40]!r}" if unknown else "a feature listed twice"
        return f"is malformed: {what} (its features are among {', '.join(known)}, each once)"
    if not all(x is not None and _is_num(x, 0.0, MAX_COEF_MS) for x in coefs):
        return f"has a coefficient that is not a finite number in [0, {MAX_COEF_MS:g}] ms per unit"
    for key in ("bytes_range", "flops_range"):
        r = c.get(key, [0.0, 0.0] if key == "flops_range" else None)
        if not (isinstance(r, list) and len(r) == 2 and all(x is not None and _is_num(x, 0.0) for x in r)
                and r[0] <= r[1]):
            return f"is malformed: {key} must be [low, high] finite numbers"
    pts = c.get("points")
    if not isinstance(pts, list) or not all(
            isinstance(pt, dict) and all(pt.get(k) is not None and _is_num(pt.get(k), 0.0) for k in ("bytes", "flops"))
            and ("batch" not in pt or pt["batch"] is not None and _is_num(pt["batch"], 0.0))  # null: a TypeError
            and isinstance(pt.get("model"), str) for pt in pts):
        return "is malformed: points need model, bytes and flops (and a batch, where given, a number >= 0)"
    groups = c.get("groups", {})
    if not isinstance(groups, dict) or not all(v is not None and _is_num(v, 1e-3, 1e3) for v in groups.values()):
        return "is malformed: group factors must be finite numbers in [0.001, 1000]"
    if not _is_num(c.get("const_launches"), 0.0, 1e4):  # calls per work item of a per-call fit (`launches`)
        return "is malformed: const_launches must be a count in [0, 10000]"
    return _regimes_problem(c["regimes"], kind) if "regimes" in c else None


def _regimes_problem(regs, kind: str) -> str | None:
    """Why a quantized component's M regimes (`wmtp.calibrate.quant_fit.split_m`) cannot be priced from, or None:
    a non-empty list, ascending and disjoint `m_range` [lo, hi] of rows per call (>= 1), each a fit of its own
    naming its implementation."""
    if not isinstance(regs, list) or not regs:
        return "is malformed: regimes must be a non-empty list"
    prev = 0.0
    for i, r in enumerate(regs):
        m = r.get("m_range") if isinstance(r, dict) else None
        if not (isinstance(m, list) and len(m) == 2 and all(x is not None and _is_num(x, 1.0, 1e9) for x in m)
                and prev < m[0] <= m[1]):
            return f"has a malformed regime {i}: m_range must be [low, high] rows per call, >= 1, ascending, disjoint"
        if not isinstance(r.get("impl"), str) or "regimes" in r:
            return f"has a malformed regime {i}: it must name its implementation (impl) and hold no regimes"
        why = _component_problem(r, kind)
        if why:
            return f"has a malformed regime {i}: it {why}"
        prev = m[1]
    return None
