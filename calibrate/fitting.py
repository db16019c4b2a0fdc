"""From a raw sweep CSV to a profile JSON and its markdown summary (CPU only): the refit (`refit_raw`,
`fit_raw_to_profile`; the CSV and its sidecar read by `raw_csv`), the GPU the provenance names (`hardware_key`), the
summary (`profile_summary`), and fits merged into a profile afterwards (`merge_tp`: a tp_bench run's all-reduces;
`merge_kv_dtype`: a side-by-side benchmark's attention over another KV dtype)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

from wmtp.calibrate.fit import ceilings, draft_loop_check, fit_all, fit_kv_dtypes
from wmtp.calibrate.profile import build_profile, save_profile
from wmtp.calibrate.raw_csv import raw_sidecar, read_raw, read_sidecar
from wmtp.calibrate.raw_rows import check_fitted_rows, skipped_note, split_kv_dtypes
from wmtp.kernel_plan import feature_backend
from wmtp.fileio import atomic_write_text, check_lookup, check_output_path, read_json
from wmtp.errors import WmtpError
from wmtp.models import MODELS
from wmtp.profile import load_profile


def refit_raw(raw: Path, profile_path: Path, models: list[str], hw_key: str | None = None,
              explicit_models: bool = True) -> Path:
    """`wmtp calibrate --from-raw`: refit a raw sweep CSV (its .meta.json sidecar, if any, is the provenance, and
    a `hw_key` given must agree with it; without one, the data is taken to come from GPU `hw_key`, else h200)."""
    from wmtp.hardware import get_hardware

    meta_path = raw_sidecar(raw)
    meta = read_sidecar(raw)
    sm = meta.get("gpu_sm_count")
    if sm is not None and (isinstance(sm, bool) or not isinstance(sm, int) or not 1 <= sm <= 100_000):
        raise WmtpError(f"{meta_path}: gpu_sm_count must be a count in 1..100000, got {repr(sm)[:40]}")
    if meta.get("gpu_name") and hw_key is not None and hardware_key(meta) != hw_key:
        raise WmtpError(f"{meta_path} says the sweep ran on {str(meta['gpu_name'])[:60]} ({hardware_key(meta)}); "
                        f"--hw {hw_key} contradicts it (--hw names the GPU of a raw sweep without a sidecar)")
    if not meta.get("gpu_name"):
        gpu = get_hardware(hw_key or "h200")
        meta = {**meta, "gpu_name": gpu.name, "gpu_sm_count": meta.get("gpu_sm_count") or gpu.sm_count,
                "note": f"no provenance sidecar: taken to be measured on {gpu.key} (--hw)"}
    return fit_raw_to_profile(raw, profile_path, meta, models, explicit_models)


def sm_count_of(meta: dict) -> int:
    """The SM count the raw data was measured with (its provenance), else the hardware row's."""
    from wmtp.hardware import HARDWARE

    if meta.get("gpu_sm_count"):
        return int(meta["gpu_sm_count"])
    row = HARDWARE.get(hardware_key(meta))
    if row is None:
        raise WmtpError(f"the raw data's provenance names GPU {meta.get('gpu_name')!r}, which has no SM count "
                        "(gpu_sm_count) and no hardware row: add gpu_sm_count to its .meta.json")
    return row.sm_count


# form factors of a GPU the registry's rows (SXM / HGX datasheets) are not: their bandwidth, clocks or memory differ
_OTHER_FORM_FACTORS = {"pcie", "nvl"}


def hardware_key(meta: dict) -> str:
    """The registry key of the GPU named in the provenance ("NVIDIA H200" -> h200, "NVIDIA H100 80GB HBM3" ->
    h100-sxm), matched by whole words: "NVIDIA GH200 480GB" (4.0 TB/s) was h200 (4.8) by a substring, and "NVIDIA H100
    PCIe" (2.0 TB/s) h100-sxm (3.35), so a profile measured on one was scaled to other GPUs with the wrong ratios. A
    GPU with no row keeps its own name as key (a profile of it is refused where it would be scaled)."""
    from wmtp.hardware import HARDWARE

    name = str(meta.get("gpu_name", "unknown"))
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    if not words & _OTHER_FORM_FACTORS:
        for key in HARDWARE:
            if key.split("-")[0] in words:
                return key
    return name.lower().replace(" ", "-")


def measured_models(df, raw: Path, models: list[str], explicit: bool) -> list[str]:
    """The models a refit profile says it was fitted for: those of `models` the raw sweep measured. A model
    `--models` names explicitly that the sweep has no rows for is refused (the profile would claim a fit for it);
    the default list is cut to the sweep's models (a `--quick` or one-model sweep)."""
    have = {str(m) for m in df["model"].dropna()} if "model" in df.columns else set()  # ceiling rows have none
    missing = [m for m in models if m not in have]
    kept = [m for m in models if m in have]
    if (missing and explicit) or not kept:
        found = ", ".join(sorted(have)[:8]) or "none"
        raise WmtpError(f"{raw}: the raw sweep has no rows for {', '.join(missing)} (it measured {found}); "
                        "give --models from those")
    return kept


def fit_raw_to_profile(raw: Path, profile_path: Path, meta: dict, models: list[str], explicit: bool = True) -> Path:
    df = read_raw(raw)
    models = measured_models(df, raw, models, explicit)
    sm = sm_count_of(meta)
    backend = str(meta.get("backend") or "wmtp")
    skipped = check_fitted_rows(df, raw, meta.get("backend"))  # the rows the fit leaves, counted: said, never silent
    meta = {k: v for k, v in meta.items() if k != "skipped_rows"} | ({"skipped_rows": skipped} if skipped else {})
    kernels = meta.get("attention_kernels")
    df, other_kv = split_kv_dtypes(df)
    fits = fit_all(df, sm, feature_backend(backend, kernels))
    loop = draft_loop_check(df, fits, dict(MODELS), sm, feature_backend(backend, kernels))
    fits |= fit_kv_dtypes(other_kv, sm, feature_backend(backend, kernels))
    hw = hardware_key(meta)
    prof = build_profile(fits, hw, meta, ceilings(df), raw, models,
                         extra={"draft_loop_check": loop, "backend": backend, "moe_backend": moe_backend_of(meta),
                                **({"attention_kernels": kernels} if kernels else {}),
                                "backend_versions": meta.get("backend_versions", {})})
    check_output_path(profile_path.with_suffix(".md"), "profile summary")  # both writable, or neither is written
    save_profile(prof, profile_path)
    atomic_write_text(profile_path.with_suffix(".md"), profile_summary(prof))
    return profile_path


def moe_backend_of(meta: dict) -> str:
    """The routed-expert kernel of a sweep's `moe` rows: its `moe_impl`, or the `impl` of `moe_rows` replaced from
    another run (both in the raw meta), else wmtp's own."""
    rows = meta.get("moe_rows") if isinstance(meta.get("moe_rows"), dict) else {}
    return str(meta.get("moe_impl") or rows.get("impl") or "wmtp")


def profile_summary(prof: dict) -> str:
    p = prof["provenance"]
    kernels = prof.get("attention_kernels")
    lines = [f"# Latency profile: {prof['hardware']} (attention backend: {prof.get('backend', 'wmtp')}"
             f"{f', kernel set {kernels}' if kernels else ''})", "",
             f"GPU {p.get('gpu_name')} (driver {p.get('driver')}), torch {p.get('torch')}, triton {p.get('triton')}, "
             f"wmtp {p.get('wmtp_version')} at {p.get('git_sha')}, {p.get('utc_time')}; timer: {p.get('timer')}.",
             f"Ceilings in the same run: {json.dumps(prof.get('ceilings', {}))}. "
             f"Raw data: {prof['raw_data']['file']} (sha256 {prof['raw_data']['sha256'][:16]}...)."
             + (f" {note}." if (note := skipped_note(p.get("skipped_rows"))) else ""), "",
             "Held-out error per component (leave-one-shape-out: each shape predicted by a fit that did not see it):", "",
             "| component | shapes | median abs err | p90 abs err | max | fit (ms) |", "|---|---|---|---|---|---|"]
    for kind, c in sorted(prof["components"].items()):
        h = c["heldout"]
        fit = " + ".join(f"{v:.3g}*{f}" for f, v in zip(c["features"], c["coef_ms"]) if v)
        pct = [f"{h[k]:.1%}" if h[k] is not None else "n/a (too few shapes)" for k in ("median_rel", "p90_rel", "max_rel")]
        lines.append(f"| {kind} | {c['n_shapes']} | {' | '.join(pct)} | {fit} |")
    loop = prof.get("draft_loop_check") or []
    if loop:
        lines += ["", "Draft loop (gamma back-to-back draft forwards, per forward) against the sum of the cold "
                  "component fits:", "", "| model | ctx | B | gamma | window | measured ms | component sum ms | diff |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in loop:
            diff = f"{r['rel_err']:+.1%}" if not math.isnan(r["rel_err"]) else "n/a"
            lines.append(f"| {r['model']} | {r['ctx']} | {r['batch']} | {r['gamma']} | {r['window'] or '-'} | "
                         f"{r['measured_ms']:.4f} | {r['predicted_ms']:.4f} | {diff} |")
    return "\n".join(lines) + "\n"


TP_FIT_NAME = re.compile(r"allreduce_tp([2-9]|[1-9][0-9]{1,3})\.json")  # N GPUs, 2..9999, plain digits


def _tp_raw_sha256(raw: Path) -> str:
    """The sha256 of a tp_bench run's raw rows, a regular file (a folder was an IsADirectoryError traceback, a FIFO
    a read that waited for a writer forever)."""
    import hashlib

    if not raw.is_file():
        raise WmtpError(f"{raw} is not a file (a folder, a FIFO or a device): tp_bench writes its raw rows there")
    try:
        return hashlib.sha256(raw.read_bytes()).hexdigest()
    except OSError as e:
        raise WmtpError(f"cannot read {raw}: {e.strerror or e}") from None


def merge_tp(profile_path: Path, tp_dir: Path) -> list[str]:
    """Add the all-reduce fits of a `torchrun -m wmtp.measure.tp_bench` run (its --out folder) to a
    profile, with the sha256 of their raw data. Returns the components added."""
    prof = load_profile(profile_path)
    raw = tp_dir / "tp_raw.csv"
    check_lookup(raw, "tp_bench output")
    if not raw.exists():
        raise WmtpError(f"no tp_raw.csv in {tp_dir}")
    digest = _tp_raw_sha256(raw)
    meta_path = tp_dir / "tp.meta.json"
    meta = read_json(meta_path, "TP metadata", WmtpError) if meta_path.exists() else {}
    if not isinstance(meta, dict):  # the GPU check below was skipped, and the document recorded as the run's metadata
        raise WmtpError(f"{meta_path} is corrupt: tp_bench writes an object of the run's facts (gpu_name, ...), got "
                        f"{type(meta).__name__}")
    if meta.get("gpu_name") and hardware_key(meta) != prof["hardware"]:
        # the profile prices its own GPU's all-reduces with the fit: a B200 run's NVLink 5 priced the H200's
        raise WmtpError(f"{meta_path} says the TP run was on {str(meta['gpu_name'])[:60]} ({hardware_key(meta)}), "
                        f"the profile {profile_path} measures {prof['hardware']}: its all-reduce fit would price "
                        f"{prof['hardware']}'s links; merge it into a profile of {hardware_key(meta)}")
    added = []
    for fit_path in sorted(tp_dir.glob("allreduce_tp*.json")):
        if not TP_FIT_NAME.fullmatch(fit_path.name):  # the pricing reads allreduce_tp<N> only: merged, never read
            raise WmtpError(f"{fit_path}: an all-reduce fit is named allreduce_tp<N>.json for N >= 2 GPUs (as tp_bench "
                            "writes it); no TP size reads this name: rename it or move it out of the folder")
        prof["components"][fit_path.stem] = read_json(fit_path, "all-reduce fit", WmtpError)
        added.append(fit_path.stem)
    if not added:
        raise WmtpError(f"no allreduce_tp*.json fit in {tp_dir}")
    prof.setdefault("tp_raw_data", {})[",".join(added)] = {"file": raw.name, "sha256": digest, "meta": meta}
    save_profile(prof, profile_path)
    return added


KV_DTYPE_KERNELS = {"": "decode_attn", "custom-mask": "verify_attn", "causal": "extend_attn"}
KV_DTYPE_WORK = {"decode_attn": "fwd.attention", "verify_attn": "verify.attention", "extend_attn": "ctx.extend_attention"}


def kv_dtype_rows(raw: pd.DataFrame, backend: str, kv_dtype: str) -> pd.DataFrame:
    """A side-by-side benchmark's rows of one backend over another KV dtype (config `fp8-kv`, `fp8-kv custom-mask`,
    `fp8-kv causal`), as sweep rows of the attention kinds they time (named as the latency model's work items)."""
    cfg = raw["config"].astype(str)
    sel = raw[(raw["impl"] == backend) & cfg.str.startswith(f"{kv_dtype}-kv")].copy()
    rest = sel["config"].astype(str).str.slice(len(kv_dtype) + 4).str.strip()
    sel["kernel"] = rest.map(KV_DTYPE_KERNELS)
    sel = sel[sel["kernel"].notna()]
    sel["config"] = sel["kernel"].map(KV_DTYPE_WORK)
    sel["window"] = ""
    if sel.empty:
        raise WmtpError(f"no {backend} rows over {kv_dtype} KV (configs '{kv_dtype}-kv ...') in the benchmark data")
    return sel


def merge_kv_dtype(profile_path: Path, bench_csv: Path, kv_dtype: str = "fp8") -> list[str]:
    """Fit the attention kinds a backends benchmark timed over `kv_dtype` KV (same GPU, same backend as the
    profile) and add them to the profile as `KIND@kv_dtype`, with the benchmark's sha256. Returns them."""
    import hashlib

    prof = load_profile(profile_path)
    backend = str(prof.get("backend") or prof.get("provenance", {}).get("backend") or "wmtp")
    sm = int(prof.get("provenance", {}).get("gpu_sm_count") or sm_count_of(prof.get("provenance", {})))
    rows = kv_dtype_rows(read_raw(bench_csv), backend, kv_dtype)
    fits = fit_all(rows, sm, feature_backend(backend, prof.get("attention_kernels")))
    added = []
    for kind, f in fits.items():
        comp = build_profile({kind: f}, prof["hardware"], {}, {}, bench_csv, [])["components"][kind]
        prof["components"][f"{kind}@{kv_dtype}"] = comp
        added.append(f"{kind}@{kv_dtype}")
    prof.setdefault("kv_dtype_raw_data", {})[kv_dtype] = {
        "file": bench_csv.name, "sha256": hashlib.sha256(bench_csv.read_bytes()).hexdigest(),
        "components": added}
    check_output_path(profile_path.with_suffix(".md"), "profile summary")  # both writable, or neither is written
    save_profile(prof, profile_path)
    atomic_write_text(profile_path.with_suffix(".md"), profile_summary(prof))
    return added
