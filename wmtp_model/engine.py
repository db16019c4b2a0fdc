"""Serving-engine overhead on top of the kernel-level latency model.

The kernel-level model (DESIGN 2) prices the work our own kernels do. A serving engine does more:
Python-side scheduling and speculative bookkeeping every step, launch gaps in the draft loop, an
index builder far from the copy floor, attention kernels slower than ours on the same bytes (the
paper's native draft t_ctx is about 3.5 ms at 1M on SGLang, where our index build takes microseconds).
`EngineOverhead` adds those as physically named terms, each with its own scaling:

    t_verify += host_step_ms + step_ms + request_ms * B
              + (verify_attn_factor - 1) * the measured verify attention    (speculative steps; the factor is 1
                                                                              on the measured engine kernel's GPU
                                                                              architecture: verify_factor_applies)
              + verify_index_walks engine index builds over S + d           (v2: priced by the cost model)
    t_verify += host_step_ms + dense_step_ms                                 (dense steps)
    t_ctx    += eager_extend_ms (native) + draft_index_walks index builds over S_eff
              + index_ns_per_token * B * S_eff + (draft_attn_factor - 1) * draft-extend attention   (v1)
    t_fwd    += fwd_ms + plan_fwd_ms (native) + (draft_attn_factor - 1) * draft decode attention  (v1 factor)

and, where a preset names the engine's own MoE kernel on its GPU (one no profile measured), each MoE layer costs
    moe_call_ms + routed expert bytes / moe_tbps + flops / peak        (instead of the cost model's MoE kernel)

so windowing removes the engine's O(S) index and draft-attention overhead, but not its constants or
its verify overhead, exactly as in the paper's phase decomposition (Appendix B).

Two sources: a *framework profile* fitted from the user's own logs (`wmtp calibrate --from-logs`;
one method, constants only), and *engine presets* (`wmtp_model/data/engines/NAME.json`, fitted by
`python -m wmtp.calibrate.engine_fit` to published step times). `--framework` takes either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from wmtp.engine_memory import EngineMemoryConfig, config_from_preset
from wmtp.errors import WmtpError
from wmtp.fileio import check_lookup, check_versioned, read_json
from wmtp.units import printable
from wmtp.framework import load as load_framework

SCHEMA_VERSION = 1
KIND = "wmtp-engine-preset"


def engines_dir() -> Path:
    """The shipped engine presets: data/engines inside the core package, editable or not."""
    return Path(__file__).resolve().parent / "data" / "engines"


# Host terms (fitted where nothing measures them; unit in the name):
#   host_step_ms   per step of every method: scheduling, sampling, the model's own host work (ms)
#   step_ms        per speculative step on top: verify bookkeeping, draft tree (ms)
#   dense_step_ms  per dense step on top (ms)
#   fwd_ms         per draft forward: its host work and launch gaps (ms)
#   eager_extend_ms per native step: the draft extend run eagerly (host launches and FlashInfer's prefill plan), as
#                  SGLang's spec v2 runs it with the FlashInfer draft backend; it captures the Triton backend's
#                  draft extend (the windowed ring's) in a CUDA graph (ms)
#   plan_fwd_ms    per natively planned draft forward: FlashInfer's decode plan on the host, which the windowed
#                  ring's Triton kernel does not need (ms)
#   request_ms     per request per speculative step (ms x B)
# Structural counts (the engine's code, not fitted; wmtp.calibrate's engines/sglang-facts.md, A4):
#   verify_index_walks  per-request index walks over the target's S + d keys per step (512-key blocks)
#   draft_index_walks   extra walks over the draft's S_eff keys per step (SGLang's draft-decode index generation
#                       copies each request's prefix in 128-key blocks: 4 walks of 512-key blocks)
# v1 factors (presets fitted before the engine's kernels were measured):
#   index_ns_per_token, verify_attn_factor, draft_attn_factor
TERMS = ("host_step_ms", "step_ms", "dense_step_ms", "fwd_ms", "plan_fwd_ms", "eager_extend_ms", "request_ms",
         "index_ns_per_token",
         "verify_attn_factor", "draft_attn_factor")
COUNTS = ("verify_index_walks", "draft_index_walks")
# The engine's own kernel where it runs one no profile measured (named from a public source, not fitted; 0: the cost
# model's kernel). A serving engine on the preset's GPU may run another MoE kernel than the one the kernel profile
# timed (SGLang on Blackwell: FlashInfer's fused TRT-LLM NVFP4 MoE or a CUTLASS FP4 MoE, on Hopper its Triton MoE):
#   moe_call_ms   per MoE layer call: routing, activation quantization, both grouped GEMMs and the finalize (ms)
#   moe_tbps      rate at which it reads the routed experts' bytes (TB/s)
NAMED = ("moe_call_ms", "moe_tbps")
# The terms every preset names (in `terms` or in every `per_model` row): what the engine adds to each speculative step,
# to each draft forward and to the verify attention. Every engine_fit generation fits them (v1 per model, v2
# engine-wide); a term left out of a preset is zero (a factor: one), which for these would silently price the engine's
# speculative step as the bare kernels'.
REQUIRED = ("step_ms", "fwd_ms", "verify_attn_factor")


class NegativeTime(WmtpError):
    """A host time or per-call constant below zero: it would take time off a step (a well-formed but impossible term)."""


@dataclass(frozen=True)
class EngineOverhead:
    source: str
    host_step_ms: float = 0.0
    step_ms: float = 0.0
    dense_step_ms: float = 0.0
    fwd_ms: float = 0.0
    plan_fwd_ms: float = 0.0
    eager_extend_ms: float = 0.0
    request_ms: float = 0.0
    index_ns_per_token: float = 0.0
    verify_attn_factor: float = 1.0
    draft_attn_factor: float = 1.0
    verify_index_walks: int = 0
    draft_index_walks: int = 0
    moe_call_ms: float = 0.0
    moe_tbps: float = 0.0

    def __post_init__(self) -> None:
        for f in TERMS + NAMED:
            v = getattr(self, f)
            # abs() first: an integer too large for a float (10**400) fails there instead of raising in isfinite
            if isinstance(v, bool) or not isinstance(v, (int, float)) or abs(v) > 1e6 or not math.isfinite(v):
                raise WmtpError(f"engine overhead ({self.source}): {f} must be a finite number, got {repr(v)[:40]}")
        for f in TERMS + NAMED:  # a host time or a per-call constant below zero would take time off a step
            if f.endswith("_ms") and getattr(self, f) < 0:
                raise NegativeTime(f"engine overhead ({self.source}): {f} is a time and must be >= 0 ms, "
                                f"got {getattr(self, f)!r}")
        if self.moe_tbps < 0:
            raise WmtpError(f"engine overhead ({self.source}): moe_call_ms and moe_tbps must be >= 0, got moe_tbps "
                            f"{self.moe_tbps!r}")
        for f in ("verify_attn_factor", "draft_attn_factor"):  # the fit's factor - 1 >= 0 (nnls): below 1 it priced
            if getattr(self, f) < 1:  # a negative engine time, the engine's attention faster than the kernels' own
                raise WmtpError(f"engine overhead ({self.source}): attention factors must be >= 1 (the engine's "
                                f"attention over the measured kernel's), got {f} {getattr(self, f)!r}")
        if self.index_ns_per_token < 0:
            raise WmtpError(f"engine overhead ({self.source}): index_ns_per_token must be >= 0, got "
                            f"{self.index_ns_per_token!r}")
        for f in COUNTS:
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 64:
                raise WmtpError(f"engine overhead ({self.source}): {f} must be an integer in 0..64, got {v!r}")


def extra_ms(ov: EngineOverhead, phase: str, method: str, attn_ms: float, batch: int, s_eff: int,
             verify_factor: bool = True) -> float:
    """The engine's host time (and v1 factors) in one phase, given the kernels' attention time in that phase.
    `verify_factor` False: the cost model measured the engine's own verify kernel on this GPU's architecture, so
    the factor (the engine's verify on the target GPU over that measurement scaled by bandwidth) is 1 there."""
    if phase == "verify":
        if method == "dense":
            return ov.host_step_ms + ov.dense_step_ms
        factor = ov.verify_attn_factor if verify_factor else 1.0
        return ov.host_step_ms + ov.step_ms + ov.request_ms * batch + (factor - 1.0) * attn_ms
    if phase == "ctx":
        eager = ov.eager_extend_ms if method == "native" else 0.0
        return eager + ov.index_ns_per_token * batch * s_eff * 1e-6 + (ov.draft_attn_factor - 1.0) * attn_ms
    if phase == "fwd":
        plan = ov.plan_fwd_ms if method == "native" else 0.0
        return ov.fwd_ms + plan + (ov.draft_attn_factor - 1.0) * attn_ms
    raise WmtpError(f"unknown phase {phase!r}")


def engine_moe_ms(ov: EngineOverhead, work, hw, wdtype: str) -> float | None:
    """One MoE work item's time on the engine's own MoE kernel (`count` layers of one call each: routing,
    quantization, the grouped GEMMs and the finalize), where the preset names one: its per-call constant, the routed
    experts' bytes at its rate and the flops at `hw`'s peak for `wdtype`. None: the cost model prices it."""
    if ov.moe_tbps <= 0 or work.kind != "moe":
        return None
    peak = hw.tflops_for(wdtype) * 1e9  # flops per ms
    flops_ms = work.flops / peak if peak > 0 else 0.0
    return work.count * (ov.moe_call_ms + work.bytes / (ov.moe_tbps * 1e9) + flops_ms)


def verify_factor_applies(cost, hw) -> bool:
    """Whether an engine's verify_attn_factor applies on `hw` with `cost`: not when `cost` measured an engine's
    kernels (a FlashInfer profile) on a GPU of `hw`'s architecture: there the measurement is the engine's kernel.
    Over wmtp's own kernels the factor also says how far the engine's kernel is from ours, so it always applies."""
    from wmtp.hardware import HARDWARE

    if getattr(cost, "backend", "wmtp") == "wmtp":
        return True
    measured_on = HARDWARE.get(getattr(cost, "hw_key", ""))
    return not (measured_on is not None and measured_on.arch and measured_on.arch == hw.arch)


def index_walks(ov: EngineOverhead, phase: str, method: str) -> int:
    """The engine's extra per-request index walks in one phase (priced as index builds by the cost model)."""
    if method == "dense":
        return 0
    return {"verify": ov.verify_index_walks, "ctx": ov.draft_index_walks}.get(phase, 0)


# ------------------------------------------------------------------------------- sources
def from_framework_profile(fw: dict) -> dict[str, EngineOverhead]:
    """A log-fitted framework profile (one method): its constant and per-forward overhead."""
    src = f"framework profile ({fw['method']}, {fw['hardware']}, ctx {fw['ctx']}, logs)"
    const, per_fwd = float(fw["overhead"]["const_ms"]), float(fw["overhead"]["per_forward_ms"])
    if fw["method"] == "dense":
        return {"dense": EngineOverhead(src, dense_step_ms=const)}
    return {fw["method"]: EngineOverhead(src, step_ms=const, fwd_ms=per_fwd)}


def preset_names() -> list[str]:
    d = engines_dir()
    # NAME.json are presets; NAME.structure.json and the like are their inputs
    return sorted(p.stem for p in d.glob("*.json") if "." not in p.stem) if d.is_dir() else []


def _preset_path(name_or_path: str | Path) -> Path:
    check_lookup(name_or_path, "framework/engine profile")  # Python 3.11's exists() raises on a name too long
    p = Path(name_or_path)
    if p.suffix or p.exists():
        return p
    p = engines_dir() / f"{name_or_path}.json"
    if not p.is_file():
        raise WmtpError(f"unknown engine preset {str(name_or_path)!r}; known: {', '.join(preset_names()) or 'none'}"
                        " (or give a framework/engine profile JSON path)")
    return p


def load_preset(name_or_path: str | Path, doc: dict | None = None) -> dict:
    """An engine preset by name (data/engines/NAME.json) or path (or `doc`, already parsed from
    that path), validated: every term known and numeric."""
    p = _preset_path(name_or_path)
    return check_preset(read_json(p, "engine preset", WmtpError) if doc is None else doc, p)


def check_memory(mem, where: str):
    """An engine preset's `memory` section (`wmtp.engine_memory.config_from_preset`), validated; `where` leads the
    error."""
    if not isinstance(mem, dict):
        raise WmtpError(f"{where}: memory must be an object of engine settings")
    try:
        return config_from_preset(mem)
    except WmtpError as e:
        detail = str(e).removeprefix("engine preset memory section: ").removeprefix("engine memory: ")
        raise WmtpError(f"{where}: memory section: {detail}") from None


def check_preset(doc, p: Path) -> dict:
    """`doc`, read from (or to be written to) `p`, if it is an engine preset `--framework` can price with: every
    term known and numeric, the required ones named, its memory section sound; else `WmtpError`."""
    p = Path(p)
    prof = check_versioned(doc, p, "engine preset", KIND, SCHEMA_VERSION, WmtpError)
    try:
        for terms in [prof["terms"], *prof["per_model"].values()]:
            if any(k not in TERMS + COUNTS + NAMED for k in terms):
                raise ValueError
        if not all(isinstance(prof[k], str) and prof[k] and printable(prof[k]) == prof[k] for k in ("name", "hardware")) \
                or not prof["per_model"]:  # a name is printed: no control characters (an ESC sequence)
            raise ValueError
        for key, per in prof["per_model"].items():
            EngineOverhead(f"terms + per_model.{key}", **prof["terms"], **per)  # numeric, finite, in range
    except NegativeTime as e:  # a term of the right type below zero: the error names it and the preset
        raise NegativeTime(f"engine preset {p}: {e}") from None
    except WmtpError as e:  # a term of the wrong type or range: named (it was 'missing, unknown or non-numeric terms')
        raise WmtpError(f"engine preset {p} is corrupt: {e}") from None
    except (KeyError, TypeError, ValueError, AttributeError):
        raise WmtpError(f"engine preset {p} is corrupt: missing, unknown or non-numeric terms (or no name, hardware or "
                        "per-model terms)") from None
    _check_complete(prof, p)
    kp = prof.get("kernel_profile")
    if kp is not None and (not isinstance(kp, str) or not kp.replace("-", "").replace("_", "").isalnum()):
        raise WmtpError(f"engine preset {p}: kernel_profile must name a shipped profile, got {kp!r}")
    if prof.get("memory") is not None:
        check_memory(prof["memory"], f"engine preset {p}")
    return prof


def _check_complete(prof: dict, p: Path) -> None:
    """Every per-model row names the same terms (a model without a row gets their mean), and the required terms are
    named engine-wide or per model."""
    rows = prof["per_model"]
    names = set().union(*(set(per) for per in rows.values()))
    for key, per in rows.items():
        if names - set(per):
            raise WmtpError(f"engine preset {p}: per_model.{key} lacks {', '.join(sorted(names - set(per)))}, which "
                            "another model's row names (every per_model row names the same terms)")
    missing = [t for t in REQUIRED if t not in prof["terms"] and t not in names]
    if missing:
        raise WmtpError(f"engine preset {p} is incomplete: no {', '.join(missing)} in terms or per_model (required: "
                        f"{', '.join(REQUIRED)}; other terms left out are zero)")


def overheads_from_preset(prof: dict, model_key: str, hw_key: str) -> tuple[dict[str, EngineOverhead], list[str]]:
    """The preset's terms for one model: every method gets them (dense only its dense terms)."""
    warnings = []
    fitted = prof["per_model"]
    per = fitted.get(model_key)
    name = prof["name"]
    if per is None:
        per = {k: sum(v[k] for v in fitted.values()) / len(fitted) for k in next(iter(fitted.values()), {})}
        warnings.append(f"engine preset {name} has no constants for {model_key!r} (fitted: "
                        f"{', '.join(sorted(fitted))}): using their mean")
    if hw_key != prof["hardware"]:
        warnings.append(f"engine preset {name} was fitted on {prof['hardware']}, applied to {hw_key}: its constants "
                        "do not scale with the GPU")
        if any(per.get(k) for k in NAMED):  # the engine's kernel on the preset's GPU, not on this one
            per = {k: v for k, v in per.items() if k not in NAMED}
            warnings.append(f"engine preset {name}'s MoE kernel is {prof['hardware']}'s: {hw_key} is priced with the "
                            "cost model's MoE kernel")
    ov = EngineOverhead(f"engine preset {name}", **prof["terms"], **per)
    return {"dense": ov, "native": ov, "window": ov}, warnings


def read_items(items) -> list[tuple[Path, dict, bool]]:
    """`--framework` items as (path, document, is an engine preset), each file read and validated once per
    process however many of resolve / memory_config / kernel_profile ask for it."""
    out = []
    for item in items or []:
        p = _preset_path(item)
        try:
            st = p.stat()
            key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
        except OSError:  # let the reader say what is wrong with it
            key = (str(p), 0, 0)
        out.append(_read_item(*key))
    return out


@lru_cache(maxsize=16)
def _read_item(path: str, mtime_ns: int, size: int) -> tuple[Path, dict, bool]:
    p = Path(path)
    doc = read_json(p, "framework/engine profile", WmtpError)
    if isinstance(doc, dict) and doc.get("kind") == KIND:
        return p, load_preset(p, doc), True
    return p, load_framework(p, doc), False


def resolve(spec_key: str, hw_key: str, items) -> tuple[dict[str, EngineOverhead], list[str]]:
    """`--framework` values: framework-profile paths (one method each) and/or one engine preset
    (name or path). Later items override earlier ones per method."""
    out: dict[str, EngineOverhead] = {}
    warnings: list[str] = []
    for _, doc, is_preset in read_items(items):
        if is_preset:
            ovs, w = overheads_from_preset(doc, spec_key, hw_key)
        else:
            if doc["model"] != spec_key:
                raise WmtpError(f"framework profile is for {doc['model']}, not {spec_key}")
            ovs, w = from_framework_profile(doc), []
        out.update(ovs)
        warnings += w
    return out, warnings


def label(overheads: dict[str, EngineOverhead] | None) -> str:
    """Which engine overhead a result includes: one source, or one per method when they differ."""
    ovs = overheads or {}
    if not ovs:
        return "none (kernels only)"
    if len({o.source for o in ovs.values()}) == 1:
        return next(iter(ovs.values())).source
    return "; ".join(f"{m}: {o.source}" for m, o in sorted(ovs.items()))


def memory_config(spec_key: str, items) -> EngineMemoryConfig | None:
    """The memory accounting of the engine preset among `--framework` items (None: no preset names one)."""
    out = None
    for p, doc, is_preset in read_items(items):
        if is_preset:
            mem = doc.get("memory")
            out = (check_memory(mem, f"engine preset {p}") if mem is not None else None) or out
    return out


def kernel_profile(items) -> str | None:
    """The measured kernel profile (a shipped profile's name, e.g. h200-flashinfer) of the engine preset among
    `--framework` items: the engine's own kernels, priced instead of wmtp's (None: no preset names one)."""
    out = None
    for _, doc, is_preset in read_items(items):
        if is_preset:
            out = doc.get("kernel_profile") or out
    return out
