"""Fit the latency model's components to sweep data.

Each work kind gets a physically shaped model, affine in what it moves and computes:
    t_ms = c0 + c_bytes * bytes + c_flops * flops (+ c_batch * batch for attention)
with non-negative coefficients (so 1 / c_bytes is an effective bandwidth and 1 / c_flops an
effective flop rate), fitted by least squares on relative error over the per-shape medians.
Accuracy is reported out of sample: every shape is predicted by a fit that did not see it
(leave-one-shape-out), median and p90 of |predicted / measured - 1|. Never the error on the points
fitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from wmtp.errors import WmtpError

FEATURES: dict[str, tuple[str, ...]] = {
    "decode_attn": ("const", "bytes", "flops", "batch"),
    "verify_attn": ("const", "bytes", "flops", "batch"),
    "index_build": ("const", "bytes"),
    "gemm": ("const", "bytes", "flops"),
    "moe": ("const", "bytes", "flops"),
    "lm_head": ("const", "bytes", "flops"),
    "linear_state": ("const", "bytes", "flops"),
}
# Work kinds priced with another kind's fit (same kernel).
ALIASES = {"extend_attn": "verify_attn"}
SHAPE_KEYS = ["kernel", "model", "config", "ctx", "batch", "d", "window"]
SCALE = {"const": 1.0, "bytes": 1e-9, "flops": 1e-12, "batch": 1.0}  # conditioning: GB, TFLOP


@dataclass
class KindFit:
    kind: str
    features: tuple[str, ...]
    coef: list[float]  # per unscaled feature unit, in ms
    n_shapes: int
    heldout_median: float
    heldout_p90: float
    heldout_max: float
    bytes_range: tuple[float, float]
    flops_range: tuple[float, float]
    points: list[dict]  # measured shapes: model, bytes, flops, batch, median_ms

    def predict(self, feats: dict) -> float:
        return float(sum(c * feats.get(f, 0.0) for c, f in zip(self.coef, self.features)))


def shape_medians(raw: pd.DataFrame) -> pd.DataFrame:
    """One row per measured shape: the median time over repetitions, with its features."""
    ok = raw[(raw["status"] == "ok") & raw["time_ms"].notna()].copy()
    if ok.empty:
        raise WmtpError("the sweep data holds no successful measurement")
    for k in SHAPE_KEYS:
        ok[k] = ok[k].astype(object).where(ok[k].notna(), "").astype(str)
    g = ok.groupby(SHAPE_KEYS, sort=False).agg(
        median_ms=("time_ms", "median"), bytes=("bytes", "first"), flops=("flops", "first"),
        reps=("time_ms", "size")).reset_index()
    g["batch_n"] = pd.to_numeric(g["batch"], errors="coerce").fillna(1.0)
    return g


def _design(df: pd.DataFrame, features: tuple[str, ...]) -> np.ndarray:
    cols = []
    for f in features:
        if f == "const":
            cols.append(np.ones(len(df)))
        elif f == "batch":
            cols.append(df["batch_n"].to_numpy(float))
        else:
            cols.append(df[f].to_numpy(float) * SCALE[f])
    return np.column_stack(cols)


def _solve(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    w = 1.0 / y  # relative error
    coef, _ = nnls(x * w[:, None], np.ones_like(y))
    return coef


def fit_kind(df: pd.DataFrame, kind: str) -> KindFit:
    features = FEATURES[kind]
    x, y = _design(df, features), df["median_ms"].to_numpy(float)
    coef = _solve(x, y)
    errs = []
    if len(df) >= len(features) + 2:
        for i in range(len(df)):
            keep = np.arange(len(df)) != i
            c = _solve(x[keep], y[keep])
            errs.append(abs(float(x[i] @ c) / y[i] - 1.0))
    errs_arr = np.array(errs) if errs else np.array([math.nan])
    unscaled = [float(c * SCALE[f]) for c, f in zip(coef, features)]
    points = [dict(model=r.model, bytes=float(r.bytes), flops=float(r.flops), batch=float(r.batch_n),
                   median_ms=float(r.median_ms), config=r.config) for r in df.itertuples()]
    return KindFit(kind, features, unscaled, len(df), float(np.median(errs_arr)), float(np.quantile(errs_arr, 0.9)),
                   float(np.max(errs_arr)), (float(df["bytes"].min()), float(df["bytes"].max())),
                   (float(df["flops"].min()), float(df["flops"].max())), points)


def fit_all(raw: pd.DataFrame) -> dict[str, KindFit]:
    shapes = shape_medians(raw)
    fits = {}
    for kind in FEATURES:
        df = shapes[shapes["kernel"] == kind].reset_index(drop=True)
        if len(df):
            fits[kind] = fit_kind(df, kind)
    if not fits:
        raise WmtpError("the sweep data holds no component the latency model uses")
    return fits


def ceilings(raw: pd.DataFrame) -> dict:
    ok = raw[raw["status"] == "ok"]
    out = {}
    copy = ok[ok["kernel"] == "copy"]
    if len(copy):
        out["copy_tbps"] = float((copy["bytes"] / copy["time_ms"] / 1e9).groupby(copy["config"]).median().max())
    gemm = ok[ok["kernel"] == "gemm_peak"]
    if len(gemm):
        out["gemm_bf16_tflops"] = float((gemm["flops"] / gemm["time_ms"] / 1e9).median())
    return out


def draft_loop_check(raw: pd.DataFrame, fits: dict[str, KindFit], specs: dict) -> list[dict]:
    """Measured per-forward time of gamma back-to-back draft forwards against the component sum
    (cold, L2 flushed per component): where they part is where L2 reuse (or its absence) shows."""
    from wmtp.latency import draft_fwd_work

    shapes = shape_medians(raw)
    loops = shapes[shapes["kernel"] == "draft_loop"]
    out = []
    for r in loops.itertuples():
        spec = specs.get(r.model)
        if spec is None:
            continue
        gamma = int(float(r.d)) - 1
        window = int(float(r.window)) if r.window not in ("", "nan") else 0
        ctx, batch = int(float(r.ctx)), int(float(r.batch))
        s_eff = min(ctx, window + 64) if window else ctx
        pred = 0.0
        for w in draft_fwd_work(spec.with_dtypes(weight_dtype="bf16"), s_eff, batch):
            fit = fits.get(ALIASES.get(w.kind, w.kind))
            if fit is None:
                pred = math.nan
                break
            pred += fit.predict(work_features(w)) * w.count
        out.append(dict(model=r.model, ctx=ctx, batch=batch, gamma=gamma, window=window,
                        measured_ms=float(r.median_ms), predicted_ms=pred,
                        rel_err=pred / float(r.median_ms) - 1 if pred == pred else math.nan))
    return out


def work_features(work) -> dict:
    return {"const": 1.0, "bytes": work.bytes, "flops": work.flops, "batch": float(work.shape.get("batch", 1) or 1)}
