"""Fit the quantized-weight GEMM and MoE kernels of a quant benchmark into a profile, per weight dtype (issue 17).

Input: a `measure/scripts/quant_bench.py` run (a folder holding quant.csv[.gz], quant.md, optional quant.meta.json,
or the CSV itself): one row per timed call (or per shape, with a median) of one implementation on one weight
matrix [N, K] of a model (`component`: attn_qkv, lin_in, lin_out, shared_up, lm_head; experts_up / experts_down
for the grouped MoE), M tokens, the bytes of weights + scales it read.

Per weight dtype (`fp8`: W8A8 with 128 x 128 weight blocks, ours or torch's block-scaled scaled_mm; `int4`: 4-bit
weight-only, group 128) and per work kind (`gemm`: every dense GEMM, projections and lm_head, which `lm_head` items are
priced with too; `moe`: the grouped experts), the implementation an engine could run on that GPU with the lowest
geometric-mean time over the shapes every candidate ran (`CANDIDATES`) is fitted like the sweep's kinds
(`wmtp.calibrate.fit.fit_kind`: t = c0 + c1 bytes + c2 flops, non-negative, with a factor per model and work component,
leave-one-shape-out error) and stored as `KIND@DTYPE` (`gemm@fp8`, `moe@int4`, ...), recording the implementation chosen
and every candidate's geometric mean. Bytes are counted as the latency model counts a work item's (`wmtp.latency`): the
weights + scales the call read, plus the bf16 activations in and out (fp32 logits for the lm_head). The constant is one
call's here (one row is one GEMM), so pricing multiplies it by the work item's launches (`const_per_kernel`; a MoE
layer: its two grouped calls, `const_launches`), and a work item is interpolated when one of its calls, its bytes and
flops divided by its launches, lies inside the measured range. Flops are 2 M N K (x top_k for the experts).

Per M regime (as an engine picks a kernel by the rows of a call): where another candidate is fastest at some M
(`split_m`: per measured M, geometric mean over the shapes every candidate ran at that M; a lead of at most
`TIE_REL` is a tie), the M values are cut into regimes of one winner each (adjacent M with the same winner merged)
and each regime is fitted on its own (`fit_kind` over its implementation's rows at its M, same held-out error),
stored under the component's `regimes` with its `m_range`, implementation and candidates' geometric means; pricing
(`wmtp.profile.regime_index`) takes the regime of the call's M. Where one implementation wins at every M the
component is written as before regimes existed (no `regimes` key).

Run: python -m wmtp.calibrate.quant_fit PROFILE.json QUANT_DIR [QUANT_DIR ...]
(the shipped H200 profiles: wmtp_model/data/profiles/h200.json and h200-flashinfer.json).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from wmtp.calibrate.fit import fit_kind
from wmtp.calibrate.fitting import hardware_key, profile_summary
from wmtp.calibrate.profile import build_profile, save_profile
from wmtp.errors import WmtpError
from wmtp.fileio import atomic_write_text, read_json
from wmtp.models import MODELS
from wmtp.profile import load_profile

# (weight dtype, kind) -> implementations an engine could run for that checkpoint format on a Hopper GPU. FP8: the
# checkpoints' 128 x 128 weight blocks; torch's per-tensor and row-wise scaled_mm are peers in the tables, not
# candidates: they multiply weights quantized with one scale per tensor / per output row, which a block-scaled
# checkpoint does not hold (running it through them means requantizing it), while cuBLASLt's block-scaled GEMM
# (`torch_scaled_mm_block`, 1 x 128 activation groups; it refuses 1-2 rows on the H200: h200-quant-v14) computes
# the checkpoint's product.
CANDIDATES = {
    ("fp8", "gemm"): ("wmtp_fp8_block", "wmtp_fp8_block_gemm", "torch_scaled_mm_block"),
    ("fp8", "moe"): ("wmtp_fp8_moe",),
    ("int4", "gemm"): ("wmtp_int4_group", "torch_int4pack_mm"),
    ("int4", "moe"): ("wmtp_int4_moe",),
    # the run's bf16 reference on the same matrices: the rate a quantized item's bytes are priced at where the
    # measured quantized kernel is slower (`wmtp.profile.ProfileCostModel.price`); bf16 checkpoints keep the sweep's fit
    ("bf16", "gemm"): ("torch_bf16",),
}
KERNEL_NOTES = {
    "wmtp_fp8_block": "wmtp Triton W8A8, 128x128 fp32 weight-block scales, activations quantized per 1x128 in the call",
    "wmtp_fp8_block_gemm": "wmtp Triton W8A8, 128x128 weight blocks, activations pre-quantized (not timed)",
    "wmtp_fp8_block_auto": "wmtp Triton W8A8, 128x128 weight blocks, path=auto: GEMV at 1 row, swap-AB at 2..16, "
                           "tensor-core tiles above (activations quantized in the call)",
    "torch_scaled_mm_tensor": "torch._scaled_mm, per-tensor scales (activations pre-quantized, not timed)",
    "torch_scaled_mm_rowwise": "torch._scaled_mm, row-wise scales (activations pre-quantized, not timed)",
    "torch_scaled_mm_block": "torch._scaled_mm (cuBLASLt), 1x128 activation groups and 128x128 weight blocks "
                             "(activations pre-quantized, not timed)",
    "wmtp_fp8_moe": "wmtp Triton grouped W8A8 MoE (routing sort and activation quantization in the call)",
    "wmtp_int4_group": "wmtp Triton W4A16, group 128, bf16 scales",
    "torch_int4pack_mm": "torch._weight_int4pack_mm (tinygemm), group 128, bf16 scale + zero",
    "wmtp_int4_moe": "wmtp Triton grouped W4A16 MoE, group 128",
    "torch_bf16": "torch bf16 matmul (cuBLAS)",
}
# A candidate takes an M from the all-M choice (or from the previous M's winner) only when its geometric mean there is
# faster by more than this: a 0.1 % difference is a tie, not a regime of its own.
TIE_REL = 0.01
# An implementation that runs different kernels by M (a dispatcher): the largest M of each kernel's range but the
# last. `split_m` never merges a regime across them, so each kernel's rows get a fit of their own. path='auto' of
# int4 (`quant_gemm.int4_gemm`): one row takes a GEMV kernel, 2..8 rows the tensor-core kernel (`quant_mma_i4.AUTO_MAX_ROWS`,
# given repacked weights) or swap-AB, more rows swap-AB (`INT4_SWAP_AUTO_M`) (tests/test_quant_fit_regimes.py checks
# these against the constants). fp8 path='auto' (`quant_gemm.fp8_gemm`): the GEMV for `GEMV_MAX_M` rows, swap-AB over
# `SWAP_AUTO_M`, the tensor-core tiles above.
KERNEL_SWITCH_M = {"wmtp_int4_group_auto": (1, 8), "wmtp_fp8_block_auto": (1, 16)}
FORMAT_NOTES = {"fp8": "fp8 e4m3 weights (W8A8)", "int4": "4-bit weight-only (W4A16, group 128)",
                "bf16": "bf16 weights: the reference a quantized item's bytes are priced at where its kernel is slower"}
# Column names of the benchmark CSV (v1) and of later runs: the first one present is used.
ALIASES = {"kernel": ("kernel", "impl"), "model": ("model",), "component": ("component",), "M": ("M", "m"),
           "N": ("N", "n"), "K": ("K", "k"), "E": ("E", "experts", "n_experts"), "top_k": ("top_k", "topk"),
           "bytes": ("weight_bytes", "bytes")}
TIME_COLUMNS = (("time_ms", 1.0), ("median_ms", 1.0), ("median_us", 1e-3), ("time_us", 1e-3))


def _read_table(path: Path) -> pd.DataFrame:
    try:
        raw = path.read_bytes()
        text = gzip.decompress(raw) if path.suffix == ".gz" else raw
        return pd.read_csv(io.BytesIO(text))
    except FileNotFoundError:
        raise WmtpError(f"no quant benchmark data at {path}") from None
    except (OSError, EOFError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise WmtpError(f"{path} is not a readable quant benchmark CSV ({type(e).__name__})") from None


def quant_csv(source: Path) -> Path:
    """The benchmark CSV of a results folder (quant.csv, else quant.csv.gz), or `source` itself."""
    if source.is_dir():
        for name in ("quant.csv", "quant.csv.gz"):
            if (source / name).is_file():
                return source / name
        raise WmtpError(f"{source} holds no quant.csv or quant.csv.gz")
    return source


def read_quant(source: Path) -> pd.DataFrame:
    """The successful timed rows, in canonical columns (kernel, model, component, M, N, K, E, top_k, bytes,
    time_ms), copy-bandwidth rows dropped."""
    path = quant_csv(source)
    df = _read_table(path)
    out = pd.DataFrame()
    for col, names in ALIASES.items():
        name = next((n for n in names if n in df.columns), None)
        if name is None and col not in ("E", "top_k"):
            raise WmtpError(f"{path} lacks a {' / '.join(names)} column")
        out[col] = df[name] if name is not None else np.nan
    unit = next(((n, f) for n, f in TIME_COLUMNS if n in df.columns), None)
    if unit is None:
        raise WmtpError(f"{path} lacks a time column ({', '.join(n for n, _ in TIME_COLUMNS)})")
    out["time_ms"] = pd.to_numeric(df[unit[0]], errors="coerce") * unit[1]
    err = ""
    if "error" in df.columns:
        err = df["error"].astype(object).where(df["error"].notna(), "").astype(str).str.strip()
    for c in ("M", "N", "K", "bytes"):
        out[c] = pd.to_numeric(out[c], errors="coerce")
    ok = (err == "") & out["time_ms"].gt(0) & out[["M", "N", "K", "bytes"]].gt(0).all(axis=1)
    ok &= ~out["kernel"].astype(str).str.startswith("copy") & out["model"].astype(str).isin(MODELS)
    out = out[ok].reset_index(drop=True)
    if out.empty:
        raise WmtpError(f"{path} holds no successful quantized-GEMM measurement of a registry model")
    return out


def work_kind(component: str) -> str:
    """The fit a benchmark matrix belongs to: `moe` (grouped experts) or `gemm` (every dense GEMM, the lm_head
    included: one kernel prices them all, a factor per model and component carries the rest)."""
    return "moe" if component.startswith("experts") else "gemm"


def work_group(model: str, component: str) -> str:
    """The latency model's work component a benchmark matrix belongs to (`wmtp.features.group_name`)."""
    if work_kind(component) == "moe" or component == "lm_head":
        return "moe" if component.startswith("experts") else "lm_head"
    if component.startswith("attn"):
        return "attn_proj"
    if component.startswith("lin_"):
        return f"{MODELS[model].linear_kind}_proj"
    return component  # shared expert and latent projections: priced inside the MoE item, no gemm item of their own


def shapes(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (kernel, model, component, M): median time, bytes, flops, and the fit's feature columns."""
    g = rows.groupby(["kernel", "model", "component", "M", "N", "K"], sort=True).agg(
        median_ms=("time_ms", "median"), bytes=("bytes", "median"), top_k=("top_k", "first")).reset_index()
    kinds = g["component"].map(work_kind)
    top_k = [float(t) if kd == "moe" and t == t else (float(MODELS[m].top_k) if kd == "moe" else 1.0)
             for kd, t, m in zip(kinds, g["top_k"], g["model"])]
    g["kind"] = kinds
    g["weight_bytes"] = g["bytes"]
    # Bytes as the latency model counts a work item's: weights + scales, bf16 activations in and out (fp32 logits).
    out_bytes = np.where(g["component"] == "lm_head", 4.0, 2.0) * np.array(top_k)
    g["bytes"] = g["weight_bytes"] + g["M"] * (2.0 * g["K"] + out_bytes * g["N"])
    g["flops"] = 2.0 * g["M"] * g["N"] * g["K"] * np.array(top_k)
    g["group"] = [f"{m}|{work_group(m, c)}" for m, c in zip(g["model"], g["component"])]
    g["config"] = g["component"] + " M=" + g["M"].astype(int).astype(str)
    g["f_const"], g["f_bytes"], g["f_flops"], g["f_batch"] = 1.0, g["bytes"], g["flops"], 1.0
    return g


def is_candidate(kernel: str, dtype: str, kind: str) -> bool:
    """A kernel of `CANDIDATES[(dtype, kind)]` or a variant of one (a later run's `wmtp_int4_moe_v2`, a tuned
    launch configuration `wmtp_fp8_block[bn64-st4-w4]`)."""
    return any(str(kernel).startswith(c) for c in CANDIDATES[(dtype, kind)])


def _candidates(g: pd.DataFrame, dtype: str, kind: str) -> pd.DataFrame:
    return g[(g["kind"] == kind) & g["kernel"].map(lambda k: is_candidate(k, dtype, kind))]


def geomeans(sel: pd.DataFrame) -> dict:
    """Each kernel of `sel`: its geometric-mean time (ms) over the (model, component, M) every kernel of `sel` ran,
    its shape count, and that common count."""
    key = ["model", "component", "M"]
    have = sel.groupby("kernel")
    common = set.intersection(*(set(map(tuple, d[key].to_numpy().tolist())) for _, d in have))
    stats = {}
    for kernel, d in have:
        on = d[[tuple(r) in common for r in d[key].to_numpy().tolist()]]
        stats[kernel] = {"geomean_ms": float(np.exp(np.log(on["median_ms"]).mean())) if len(on) else None,
                         "shapes": int(len(d)), "common_shapes": int(len(on)), "note": KERNEL_NOTES.get(kernel, "")}
    return stats


def _fastest(stats: dict) -> str:
    return min(stats, key=lambda k: math.inf if stats[k]["geomean_ms"] is None else stats[k]["geomean_ms"])


def choose(g: pd.DataFrame, dtype: str, kind: str) -> tuple[str | None, dict]:
    """The fastest candidate by geometric-mean time over the shapes every measured candidate ran, and each
    candidate's geometric mean (ms) and shape count."""
    sel = _candidates(g, dtype, kind)
    if sel.empty:
        return None, {}
    stats = geomeans(sel)
    return _fastest(stats), stats


def split_m(g: pd.DataFrame, dtype: str, kind: str, best: str) -> list[dict]:
    """M regimes of (dtype, kind), as an engine picks a kernel by the rows of a call: per measured M the fastest
    candidate by geometric mean over the shapes every candidate ran at that M (`geomeans`), where `best` (the
    all-M choice), else the previous M's winner, stays unless another is faster by more than `TIE_REL`; adjacent
    M with the same winner merged unless the winner changes kernels between them (`KERNEL_SWITCH_M`). Returns [{m_range: [lo, hi], impl, candidates (geomeans over the regime's M)}],
    ascending in M."""
    sel = _candidates(g, dtype, kind)
    winners: list[tuple[int, str]] = []
    for m, at in sel.groupby("M", sort=True):
        stats = geomeans(at)
        fastest = _fastest(stats)
        win = fastest
        for keep in (best, winners[-1][1] if winners else None):
            t = stats.get(keep, {}).get("geomean_ms")
            if t is not None and t <= (1.0 + TIE_REL) * stats[fastest]["geomean_ms"]:
                win = keep
                break
        winners.append((int(m), win))
    runs: list[list] = []
    for m, win in winners:
        switch = any(runs[-1][0][-1] <= b < m for b in KERNEL_SWITCH_M.get(win, ())) if runs else False
        if runs and runs[-1][1] == win and not switch:
            runs[-1][0].append(m)
        else:
            runs.append([[m], win])
    return [{"m_range": [ms[0], ms[-1]], "impl": win, "candidates": geomeans(sel[sel["M"].isin(ms)])}
            for ms, win in runs]


def fit_quant(rows: pd.DataFrame) -> dict[str, dict]:
    """`KIND@DTYPE` -> {fit, impl, candidates, weight_format, regimes} for every (dtype, kind) the rows cover.
    `regimes` is None where one implementation is fastest at every M (`split_m`): then `fit` is its fit, as before
    regimes existed. Else each regime holds its own fit over its implementation's rows at the regime's M, and
    `fit` / `impl` / `candidates` are the all-M choice's (what a reader that does not know regimes sees)."""
    g = shapes(rows)
    out = {}
    for (dtype, kind) in CANDIDATES:
        best, stats = choose(g, dtype, kind)
        if best is None:
            continue
        regs = split_m(g, dtype, kind, best)
        if len(regs) == 1:
            best, regs = regs[0]["impl"], None
        else:
            for r in regs:
                lo, hi = r["m_range"]
                df = g[(g["kind"] == kind) & (g["kernel"] == r["impl"]) & g["M"].between(lo, hi)]
                r["fit"] = fit_kind(df.reset_index(drop=True), kind)
        df = g[(g["kind"] == kind) & (g["kernel"] == best)].reset_index(drop=True)
        out[f"{kind}@{dtype}"] = {"fit": fit_kind(df, kind), "impl": best, "candidates": stats,
                                  "weight_format": FORMAT_NOTES[dtype], "regimes": regs}
    if not any(not key.endswith("@bf16") for key in out):
        raise WmtpError("the quant benchmark holds no implementation of a known weight dtype (fp8, int4)")
    return out


def not_candidates(rows: pd.DataFrame, fits: dict) -> list[str]:
    """Kernels the run timed that price no weight dtype: listed, not dropped silently."""
    used = {k for f in fits.values() for k in f["candidates"]}
    used |= {k for f in fits.values() for r in f.get("regimes") or [] for k in r["candidates"]}
    return sorted(set(rows["kernel"].astype(str)) - used)


def provenance(source: Path) -> dict:
    """The run's provenance: quant.meta.json when the run wrote one, else quant.md's header lines (GPU, versions,
    timer, date), verbatim, and the GPU's registry key."""
    folder = source if source.is_dir() else source.parent
    meta_path = folder / "quant.meta.json"
    if meta_path.is_file():
        meta = read_json(meta_path, "quant benchmark metadata", WmtpError)
        if not isinstance(meta, dict):
            raise WmtpError(f"{meta_path} is not a JSON object")
        utc = str(meta.get("utc_time") or "")
        summary = (f"{meta.get('gpu_name')}; torch {meta.get('torch')}, triton {meta.get('triton')}; timer "
                   f"{meta.get('timer')}; {utc}; git {str(meta.get('git_sha') or '')[:10]}")
        return {**meta, "date": utc[:10] or None, "summary": summary, "hardware": hardware_key(meta)}
    md = folder / "quant.md"
    if not md.is_file():
        raise WmtpError(f"{folder} has neither quant.meta.json nor quant.md: no provenance for its data")
    text = md.read_text(errors="replace")
    line = next((ln for ln in text.splitlines() if ln.startswith("GPU:")), "")
    m = re.match(r"GPU:\s*([^(;,]+)", line)
    if not m:
        raise WmtpError(f"{md} names no GPU (a line 'GPU: ...'): no provenance for its data")
    date = re.search(r"\d{4}-\d{2}-\d{2}", line)
    return {"gpu_name": m.group(1).strip(), "date": date.group(0) if date else None, "summary": line.strip(),
            "hardware": hardware_key({"gpu_name": m.group(1).strip()})}


def merge_quant(profile_path: Path, source: Path) -> list[str]:
    """Fit a quant benchmark (same GPU as the profile) and add its `KIND@DTYPE` components to the profile, with
    the data's path, sha256 and provenance under `weight_dtype_raw_data`. Returns the components added."""
    prof = load_profile(profile_path)
    csv = quant_csv(source)
    prov = provenance(source)
    if prov["hardware"] != prof["hardware"]:
        raise WmtpError(f"the quant benchmark ran on {prov.get('gpu_name')} ({prov['hardware']}), "
                        f"the profile is for {prof['hardware']}: fit it into a profile of the same GPU")
    rows = read_quant(source)
    fits = fit_quant(rows)
    for earlier in prof.pop("weight_dtype_raw_data", {}).values():  # a new run replaces the one merged before
        for key in earlier.get("components", []):
            prof["components"].pop(key, None)
    added = []
    for key, f in fits.items():
        comp = _component(key, f["fit"], prof["hardware"], csv)
        # The constant is one GEMM call's: a work item pays it per launch, a MoE layer per grouped call (up, down).
        comp.update(impl=f["impl"], candidates=f["candidates"], weight_format=f["weight_format"], const_per_kernel=True,
                    const_launches=2 if key.startswith("moe@") else None)
        if f.get("regimes"):
            comp["regimes"] = [{**_component(key, r["fit"], prof["hardware"], csv), "m_range": r["m_range"],
                                "impl": r["impl"], "candidates": r["candidates"]} for r in f["regimes"]]
        prof["components"][key] = comp
        added.append(key)
    raw = csv.read_bytes()
    text = gzip.decompress(raw) if csv.suffix == ".gz" else raw
    prof["weight_dtype_raw_data"] = {",".join(added): {
        "components": added, "file": _display_path(csv), "sha256_uncompressed": hashlib.sha256(text).hexdigest(),
        "provenance": prov, "impl": {k: f["impl"] for k, f in fits.items()},
        "regimes": {k: [[*r["m_range"], r["impl"]] for r in f["regimes"]] for k, f in fits.items() if f.get("regimes")},
        "not_candidates": not_candidates(rows, fits),
        "command": "python -m wmtp.calibrate.quant_fit PROFILE " + _display_path(source)}}
    save_profile(prof, profile_path)
    _write_summary(profile_path, prof, fits)
    return added


def _component(key: str, fit, hardware: str, csv: Path) -> dict:
    """One fit as a profile component (`wmtp.calibrate.profile.build_profile`'s fields)."""
    return build_profile({key: fit}, hardware, {}, {}, csv, [])["components"][key]


def _display_path(p: Path) -> str:
    """The path relative to the repository when it lies inside it (provenance that reads the same on every machine)."""
    root = Path(__file__).resolve().parents[1]
    try:
        return str(p.resolve().relative_to(root))
    except ValueError:
        return str(p)


def _write_summary(profile_path: Path, prof: dict, fits: dict) -> None:
    """Regenerate the profile's summary table, keep the hand-written sections that followed it, and (re)write the
    quantized-weights section."""
    md = profile_path.with_suffix(".md")
    old = md.read_text() if md.is_file() else ""
    kept = [s.rstrip("\n") + "\n\n" for s in re.split(r"(?m)^(?=## )", old)[1:]
            if not s.startswith("## Quantized weights")]
    lines = ["## Quantized weights (merged by wmtp.calibrate.quant_fit)", ""]
    for src in prof["weight_dtype_raw_data"].values():
        where = (src["provenance"].get("summary") or src["provenance"].get("gpu_name") or "").rstrip(".")
        lines.append(f"Data: `{src['file']}` (sha256 of the CSV {src['sha256_uncompressed'][:16]}...), {where}. "
                     "The run's copy-bandwidth row is not used by these fits. Kernels timed but not a candidate: "
                     f"{', '.join(src.get('not_candidates') or []) or 'none'}.")
    lines += ["", "| component | implementation priced | weight format | candidates (geometric-mean ms over common "
              "shapes) |", "|---|---|---|---|"]
    for key, f in fits.items():
        impl = f["impl"] if not f.get("regimes") else f"per M (below); all M: {f['impl']}"
        lines.append(f"| {key} | {impl} | {f['weight_format']} | {_ranked(f['candidates'])} |")
    split = {k: f for k, f in fits.items() if f.get("regimes")}
    if split:
        lines += ["", "Per M regime (the rows of one call: B x d in verify, B in a draft forward; pricing takes the "
                  "regime of the call's M, the nearest one outside the measured M, tagged extrapolated). Each regime "
                  "is fitted on its implementation's rows at its M; held-out error leave-one-shape-out:", "",
                  "| component | M | implementation priced | shapes | held-out median / p90 / max | candidates "
                  "(geometric-mean ms over common shapes) |", "|---|---|---|---|---|---|"]
        for key, f in split.items():
            for r in f["regimes"]:
                h = r["fit"]
                err = " / ".join(f"{x:.1%}" if x is not None else "n/a" for x in
                                 (h.heldout_median, h.heldout_p90, h.heldout_max))
                lo, hi = r["m_range"]
                lines.append(f"| {key} | {lo if lo == hi else f'{lo}-{hi}'} | {r['impl']} | {h.n_shapes} | {err} | "
                             f"{_ranked(r['candidates'])} |")
    lines += ["", "The constant of these fits is one GEMM call's (one benchmark row is one call); pricing "
              "multiplies it by the work item's launches (a MoE layer: its two grouped calls, up and down). "
              "NVFP4 weights on a GPU without FP4 tensor cores are priced with the `@int4` fits "
              "(4-bit weight-only path) at NVFP4's bytes."]
    atomic_write_text(md, profile_summary(prof) + "\n" + "".join(kept) + "\n".join(lines) + "\n")


def _ranked(candidates: dict) -> str:
    ranked = sorted(candidates.items(), key=lambda kv: kv[1]["geomean_ms"] or math.inf)
    return ", ".join(f"{k} {v['geomean_ms']:.4f}" if v["geomean_ms"] else f"{k} (no common shape)" for k, v in ranked)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m wmtp.calibrate.quant_fit", description=__doc__.split("\n")[0])
    ap.add_argument("profile", type=Path)
    ap.add_argument("quant", type=Path, help="a quant benchmark results folder (quant.csv[.gz] + quant.md) or CSV")
    args = ap.parse_args(argv)
    try:
        added = merge_quant(args.profile, args.quant)
    except WmtpError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{args.profile}: added {', '.join(added)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
