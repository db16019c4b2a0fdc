"""Fit the latency model's components to sweep data.

Each work kind gets a physically shaped model, affine in what it moves and computes
(`wmtp.features.FEATURES`): e.g. for the draft's decode attention
    t_ms = c0 + c1 * kv_bytes + c2 * padded_flops + c3 * split_partial_bytes + c4 * batch
with non-negative coefficients (1 / c1 is an effective bandwidth), fitted by least squares on
relative error over the per-shape medians. On top of the shared fit, each component of each model
(`model|name`, e.g. `nem|attn_proj`) gets a multiplicative factor, the median of measured over
fitted for its own shapes: it carries what bytes and flops do not (a GEMM shape cuBLAS runs less
efficiently), while the byte and flop rates still carry dtype and size changes.
Accuracy is reported out of sample: every shape is predicted by a fit, and a factor, that did not
see it (leave-one-shape-out), median and p90 of |predicted / measured - 1|.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from wmtp.errors import WmtpError
from wmtp.features import FEATURES, features, group_name

SHAPE_KEYS = ["kernel", "model", "config", "ctx", "batch", "d", "window", "q_heads", "kv_heads", "head_dim", "sink"]
SCALE = {"bytes": 1e-9, "bytes_per_request": 1e-9, "flops": 1e-12, "padded_flops": 1e-12, "extra_pass_bytes": 1e-9, "mid_bytes": 1e-9}


@dataclass
class KindFit:
    kind: str
    features: tuple[str, ...]
    coef: list[float]  # ms per unit of each (unscaled) feature
    groups: dict  # "model|name" -> factor
    n_shapes: int
    heldout_median: float | None  # None: too few shapes to hold one out
    heldout_p90: float | None
    heldout_max: float | None
    bytes_range: tuple[float, float]
    flops_range: tuple[float, float]
    points: list[dict] = field(default_factory=list)

    def predict(self, feats: dict, group: str | None = None) -> float:
        base = float(sum(c * feats.get(f, 0.0) for c, f in zip(self.coef, self.features)))
        return base * self.groups.get(group, 1.0) if group else base


def _num(x, default=0.0) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(v) else v


def shape_medians(raw: pd.DataFrame, sm_count: int, backend: str = "wmtp") -> pd.DataFrame:
    """One row per measured shape: the median time over repetitions, with its features."""
    ok = raw[(raw["status"] == "ok") & raw["time_ms"].notna()].copy()
    if ok.empty:
        raise WmtpError("the sweep data holds no successful measurement")
    for k in SHAPE_KEYS:
        if k not in ok.columns:
            ok[k] = ""
        ok[k] = ok[k].astype(object).where(ok[k].notna(), "").astype(str)
    g = ok.groupby(SHAPE_KEYS, sort=False).agg(
        median_ms=("time_ms", "median"), bytes=("bytes", "first"), flops=("flops", "first"),
        reps=("time_ms", "size")).reset_index()
    feats = []
    for r in g.itertuples():
        batch = _num(r.batch, 1.0) or 1.0
        ctx, window, sink = _num(r.ctx), _num(r.window), _num(r.sink, 64.0)
        keys = min(ctx, window + sink) if (window and r.kernel == "decode_attn") else ctx
        kvh = int(_num(r.kv_heads, 1) or 1)
        qh = int(_num(r.q_heads, kvh) or kvh)
        feats.append(features(r.kernel, float(r.bytes), float(r.flops), batch, keys, _num(r.d, 1.0) or 1.0,
                              kvh, max(1, qh // kvh), int(_num(r.head_dim, 128) or 128), sm_count, backend))
    g["group"] = [f"{m}|{group_name(c, ft)}" for m, c, ft in zip(g["model"], g["config"], feats)]
    f = pd.DataFrame([{k: v for k, v in ft.items() if k != "tiling"} for ft in feats]).add_prefix("f_")
    g = pd.concat([g.reset_index(drop=True), f], axis=1)
    return g


def _design(df: pd.DataFrame, feats: tuple[str, ...]) -> np.ndarray:
    return np.column_stack([df["f_" + f].to_numpy(float) * SCALE.get(f, 1.0) for f in feats])


def _solve(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    w = 1.0 / y  # relative error
    coef, _ = nnls(x * w[:, None], np.ones_like(y))
    return coef


def _group_factors(pred: np.ndarray, y: np.ndarray, groups: np.ndarray, skip: int | None = None) -> dict:
    out = {}
    for g in np.unique(groups):
        idx = [i for i in np.flatnonzero(groups == g) if i != skip and pred[i] > 0]
        if idx:
            out[str(g)] = float(np.median(y[idx] / pred[idx]))
    return out


def fit_kind(df: pd.DataFrame, kind: str) -> KindFit:
    feats = FEATURES[kind]
    x, y = _design(df, feats), df["median_ms"].to_numpy(float)
    groups = df["group"].to_numpy(str)
    coef = _solve(x, y)
    factors = _group_factors(x @ coef, y, groups)
    errs = []
    if len(df) >= len(feats) + 2:
        for i in range(len(df)):
            keep = np.arange(len(df)) != i
            c = _solve(x[keep], y[keep])
            pred = x @ c
            fac = _group_factors(pred, y, groups, skip=i).get(groups[i], 1.0)
            errs.append(abs(pred[i] * fac / y[i] - 1.0))
    e = np.array(errs) if errs else None  # too few shapes for a held-out estimate: reported as unknown
    unscaled = [float(c * SCALE.get(f, 1.0)) for c, f in zip(coef, feats)]
    points = [dict(model=r.model, group=r.group, bytes=float(r.bytes), flops=float(r.flops), batch=float(r.f_batch),
                   median_ms=float(r.median_ms), config=r.config) for r in df.itertuples()]
    med, p90, mx = (float(np.median(e)), float(np.quantile(e, 0.9)), float(np.max(e))) if e is not None else (None,) * 3
    return KindFit(kind, feats, unscaled, factors, len(df), med, p90, mx, (float(df["bytes"].min()), float(df["bytes"].max())),
                   (float(df["flops"].min()), float(df["flops"].max())), points)


def fit_all(raw: pd.DataFrame, sm_count: int, backend: str = "wmtp") -> dict[str, KindFit]:
    shapes = shape_medians(raw, sm_count, backend)
    fits = {}
    for kind in FEATURES:
        df = shapes[shapes["kernel"] == kind].reset_index(drop=True)
        if len(df):
            fits[kind] = fit_kind(df, kind)
    if not fits:
        raise WmtpError("the sweep data holds no component the latency model uses")
    return fits


def fit_kv_dtypes(by_dtype: dict[str, pd.DataFrame], sm_count: int, backend: str = "wmtp") -> dict[str, KindFit]:
    """Attention over another KV dtype (`raw_rows.split_kv_dtypes`), fitted per dtype as KIND@DTYPE: fp8 K/V run
    other kernels, not bf16 at half the bytes. A dtype none of whose rows ran (a GPU or kernel without fp8) adds
    nothing: it stays priced from the bf16 fit, tagged extrapolated."""
    fits = {}
    for dtype, rows in by_dtype.items():
        if (rows["status"] == "ok").any():
            fits |= {f"{kind}@{dtype}": f for kind, f in fit_all(rows, sm_count, backend).items()}
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


def draft_loop_check(raw: pd.DataFrame, fits: dict[str, KindFit], specs: dict, sm_count: int,
                     backend: str = "wmtp") -> list[dict]:
    """Measured per-forward time of gamma back-to-back draft forwards against the component sum
    (each component timed cold, L2 flushed): where they part is where L2 reuse shows."""
    from wmtp.features import fit_kind as alias, work_features
    from wmtp.latency import draft_fwd_work

    shapes = shape_medians(raw, sm_count, backend)
    loops = shapes[shapes["kernel"] == "draft_loop"]
    out = []
    for r in loops.itertuples():
        spec = specs.get(r.model)
        if spec is None:
            continue
        window = int(_num(r.window))
        ctx, batch = int(_num(r.ctx)), int(_num(r.batch, 1))
        s_eff = min(ctx, window + int(_num(r.sink, 64))) if window else ctx
        pred = 0.0
        for w in draft_fwd_work(spec.with_dtypes(weight_dtype="bf16"), s_eff, batch):
            fit = fits.get(alias(w.kind))
            if fit is None:  # was a NaN prediction: 'not writing a profile ... NaN at draft_loop_check.0.predicted_ms'
                raise WmtpError(f"not writing a profile: the sweep data holds no successful {alias(w.kind)} "
                                f"measurement, which {r.model}'s draft forward needs (a profile without that fit "
                                "cannot price it); re-measure it")
            ft = work_features(w, spec, sm_count, backend)
            pred += fit.predict(ft, f"{spec.key}|{group_name(w.name, ft)}") * w.count
        meas = float(r.median_ms)
        out.append(dict(model=r.model, ctx=ctx, batch=batch, gamma=int(_num(r.d)) - 1, window=window,
                        measured_ms=meas, predicted_ms=pred, rel_err=pred / meas - 1 if pred == pred else math.nan))
    return out
