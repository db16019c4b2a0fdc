"""`wmtp validate`: composed speculative iterations on the GPU against a profile's prediction.

For each model (layer counts scaled down where the bf16 weights do not fit, and predicted for the
same scaled row), method (dense, native, window), ctx and d: build the iteration of
`wmtp.measure.composed` from the attention backend's kernels (the profile's own backend unless
another is asked for) and the MoE kernel the profile's `moe` rows were measured with (`--moe-backend` to
override), over KV pools of the asked KV dtype (bf16, or fp8 e4m3 with `--kv-dtype fp8`), replay it as a CUDA
graph, and compare its median time with `wmtp.latency.step_cost` priced by the profile. Rows are written as
they are measured.
"""

from __future__ import annotations

import csv
from pathlib import Path

from wmtp import defaults
from wmtp.errors import WmtpError
from wmtp.hardware import get_hardware
from wmtp.latency import step_cost
from wmtp.profile import ProfileCostModel, load_profile
from wmtp.specs import KV_DTYPES, ModelSpec

COLUMNS = ["model", "layers", "backend", "moe_backend", "method", "ctx", "d", "window", "sink", "extend_queries",
           "predicted_ms", "measured_ms", "measured_p10_ms", "measured_p90_ms", "rel_err", "reps", "predicted_source",
           "status", "kv_dtype"]


def profile_backend(profile: dict) -> str:
    """The attention backend a profile was measured with (profiles before backends: wmtp)."""
    return str(profile.get("backend") or profile.get("provenance", {}).get("backend") or "wmtp")


def profile_moe_backend(profile: dict) -> str:
    """The routed-expert kernel a profile's `moe` rows were measured with: its `moe_backend`, else what its
    provenance records (a sweep's `moe_impl`, or the `impl` of `moe_rows` replaced from another run), else wmtp."""
    from wmtp.calibrate.fitting import moe_backend_of

    return str(profile.get("moe_backend") or moe_backend_of(profile.get("provenance", {})))


def moe_backend_for(profile: dict, override: str | None = None) -> str:
    """The MoE kernel to compose steps with (`override`, else the profile's own), its files checked now:
    a WmtpError when it is unknown or SGLang's files are absent, before any GPU work."""
    from wmtp.measure import MOE_IMPLS

    name = override or profile_moe_backend(profile)
    if name not in MOE_IMPLS:
        where = "" if override else " (the profile's moe_backend / provenance moe_impl)"
        raise WmtpError(f"unknown --moe-backend {name[:40]!r}{where}; known: {', '.join(MOE_IMPLS)}")
    if name == "sglang":
        from wmtp.measure.backends import sglang_moe

        sglang_moe.load()
    return name


def layers_label(trunc: ModelSpec, note: str) -> str:
    return (f"F={trunc.n_full_attn} linear={trunc.n_linear} moe={trunc.n_moe} dense={trunc.n_dense_ffn}"
            + ("" if note == "full model" else " (scaled: " + note + ")"))


def run_validate(profile_path: Path, specs: list[ModelSpec], out_dir: Path, ctxs=(65536, 262144, 1048576),
                 depths=(3, 5, 7), window: int = defaults.WINDOW, sink: int = defaults.SINK,
                 backend: str | None = None, console=None, moe_backend: str | None = None,
                 kv_dtype: str = "bf16") -> tuple[Path, Path]:
    """Time composed steps on this GPU against `profile_path`; writes validation.csv (rows as measured)
    and validation.md. Returns both paths. `moe_backend` overrides the profile's MoE kernel; `kv_dtype` (bf16 or
    fp8) is the KV cache of every step, target and draft, priced by the profile's fits for it."""
    from wmtp.measure import composed, require_gpu
    from wmtp.measure.backends import check_name, get_backend
    from wmtp.measure.harness import free_bytes, l2_bytes
    from wmtp.measure.provenance import atomic_write_text
    from wmtp.measure.steps import progress_bar

    if kv_dtype not in KV_DTYPES:
        raise WmtpError(f"KV dtype {kv_dtype!r}: validation runs {' or '.join(KV_DTYPES)} KV")
    prof = load_profile(profile_path)
    moe = moe_backend_for(prof, moe_backend)
    require_gpu()
    measured_with = profile_backend(prof)
    name = check_name(backend or measured_with, attention=True)
    if name != measured_with:
        raise WmtpError(f"profile {profile_path} was measured with backend {measured_with!r}, not {name!r}: "
                        f"validate it with --backend {measured_with}, or calibrate one with --backend {name}")
    attn = get_backend(name)
    cost = ProfileCostModel.from_path(profile_path)
    hw = get_hardware(cost.hw_key)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "validation.csv"
    plan = list(composed.step_plan(ctxs, depths))
    with open(path, "w", newline="") as f, progress_bar(console) as bar:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        task = bar.add_task("validating", total=len(plan) * len(specs))
        for spec in specs:
            trunc, note = composed.fit_layers(spec.with_dtypes(kv_dtype=kv_dtype), max(ctxs), 0.80 * free_bytes())
            model = composed.ComposedModel(trunc, max(ctxs), l2_bytes(), attn, moe_impl=moe)

            def predict(method, ctx, d, ext, trunc=trunc):
                return step_cost(trunc, hw, cost, method, ctx, d if method != "dense" else 1, 1, window, sink,
                                 accept_length=float(ext))

            for row in composed.composed_rows(model, spec.key, plan, predict, window=window, sink=sink,
                                              on_step=lambda label: bar.update(task, description=label)):
                w.writerow({**row, "layers": layers_label(trunc, note), "backend": name, "moe_backend": moe,
                            "kv_dtype": kv_dtype})
                f.flush()
                bar.advance(task)
            del model
    md = out_dir / "validation.md"
    atomic_write_text(md, validation_summary(path))
    return path, md


def validation_summary(csv_path: Path) -> str:
    import pandas as pd

    df = pd.read_csv(csv_path)
    ok = df[df.status == "ok"].copy()
    backend = ", ".join(sorted(set(df["backend"].astype(str)))) if "backend" in df.columns and len(df) else "wmtp"
    moe = ", ".join(sorted(set(df["moe_backend"].astype(str)))) if "moe_backend" in df.columns and len(df) else "wmtp"
    kv = ", ".join(sorted(set(row_kv_dtypes(df)))) if len(df) else "bf16"
    lines = [f"# Composed-step validation: predicted vs measured (attention backend: {backend}; MoE kernel: {moe}; "
             f"KV: {kv})", ""]
    if ok.empty:
        return "\n".join(lines + ["No step was measured."]) + "\n"
    ok["abs_err"] = ok.rel_err.abs()
    lines += ["| method | steps | median abs err | worst abs err | target (median <= 5 %, worst <= 10 %) |",
              "|---|---|---|---|---|"]
    for method, g in ok.groupby("method"):
        met = g.abs_err.median() <= 0.05 and g.abs_err.max() <= 0.10
        lines.append(f"| {method} | {len(g)} | {g.abs_err.median():.1%} | {g.abs_err.max():.1%} | "
                     f"{'met' if met else 'NOT met'} |")
    lines += ["", "| model | layers | method | ctx | d | predicted ms | measured ms (p10-p90) | error |",
              "|---|---|---|---|---|---|---|---|"]
    for r in ok.itertuples():
        lines.append(f"| {r.model} | {r.layers} | {r.method} | {r.ctx} | {r.d} | {r.predicted_ms:.3f} | "
                     f"{r.measured_ms:.3f} ({r.measured_p10_ms:.3f}-{r.measured_p90_ms:.3f}) | {r.rel_err:+.1%} |")
    bad = df[df.status != "ok"]
    if len(bad):
        lines += ["", "Steps that did not run:", ""] + [f"- {r.model} {r.method} S={r.ctx} d={r.d}: {r.status}"
                                                       for r in bad.itertuples()]
    return "\n".join(lines) + "\n"


def row_kv_dtypes(df) -> list[str]:
    """Each validation row's KV dtype: its `kv_dtype` column, bf16 for files written before the column (and for
    blank cells); another value is refused."""
    if "kv_dtype" not in df.columns:
        return ["bf16"] * len(df)
    out = ["bf16" if str(v) in ("", "nan") else str(v) for v in df["kv_dtype"]]
    bad = sorted(set(out) - set(KV_DTYPES))
    if bad:
        raise WmtpError(f"validation rows of KV dtype {bad[0]!r}: known {', '.join(KV_DTYPES)}")
    return out


def layers_from_label(spec: ModelSpec, label: str, kv_dtype: str = "bf16") -> ModelSpec:
    """The (possibly scaled) row a validation step ran: bf16 weights, its KV dtype, layer counts from its `layers`
    label."""
    import re
    from dataclasses import replace

    m = re.match(r"F=(\d+) linear=(\d+) moe=(\d+) dense=(\d+)", str(label))
    if m is None:
        raise WmtpError(f"validation row has no layer counts: {label!r}")
    f, lin, moe, dense = (int(x) for x in m.groups())
    t = replace(spec.with_dtypes(weight_dtype="bf16", kv_dtype=kv_dtype), n_full_attn=f, n_linear=lin, n_moe=moe,
                n_dense_ffn=dense)
    layers = f + lin + (moe if spec.family == "nemotron_h" else 0)
    return replace(t, n_layers=layers)


def repredict(csv_path: Path, profile_path: Path, out_csv: Path, window: int = defaults.WINDOW,
              sink: int = defaults.SINK) -> Path:
    """Re-price measured composed steps (a validation.csv) with another fit of the same GPU's profile, on the
    CPU: a refit (new features, same raw data) is validated against the same measurements."""
    import pandas as pd

    from wmtp.fileio import atomic_write_text
    from wmtp.models import get_model

    df = pd.read_csv(csv_path)
    cost = ProfileCostModel.from_path(profile_path)
    hw = get_hardware(cost.hw_key)
    for col in ("predicted_ms", "rel_err"):  # whole numbers in a column read as ints, which take no new price
        df[col] = df[col].astype(float)
    df["predicted_source"] = df["predicted_source"].astype(object)
    kv = dict(zip(df.index, row_kv_dtypes(df)))
    for i, r in df[df.status == "ok"].iterrows():
        trunc = layers_from_label(get_model(r.model), r.layers, kv[i])
        d = int(r.d) if r.method != "dense" else 1
        pred = step_cost(trunc, hw, cost, r.method, int(r.ctx), d, 1, window, sink,
                         accept_length=float(r.extend_queries))
        df.loc[i, ["predicted_ms", "rel_err", "predicted_source"]] = [pred.step_ms, pred.step_ms / r.measured_ms - 1,
                                                                      pred.source]
    atomic_write_text(out_csv, df.to_csv(index=False))
    return out_csv
