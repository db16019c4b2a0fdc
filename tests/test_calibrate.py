"""Fitting, profiles and profile-priced prediction, on synthetic sweep data with known coefficients."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from wmtp.calibrate.fit import fit_all, shape_medians
from wmtp.calibrate.fitting import fit_raw_to_profile
from wmtp.profile import ProfileCostModel, cost_model_for, load_profile
from wmtp.cli.main import app
from wmtp.errors import ProfileError, WmtpError
from wmtp.hardware import get_hardware
from wmtp.latency import SpeedOfLight, step_cost
from wmtp.models import get_model

# Known truth: t = 0.004 ms + bytes / 3.9 TB/s + flops / 600 TFLOP/s (+ 0.001 ms per request).
C0, BW, FL, PB = 0.004, 3.9e12, 600e12, 0.001


def truth(f: dict, attention: bool) -> float:
    """The synthetic GPU: affine in the same physical features the fit uses."""
    if attention:
        return C0 + (f["bytes"] + f["mid_bytes"]) / BW * 1e3 + f["padded_flops"] / FL * 1e3 + PB * f["batch"]
    return C0 + f["bytes"] / BW * 1e3 + f["flops"] / FL * 1e3


def synthetic_raw(rng, noise=0.01, reps=5) -> pd.DataFrame:
    from wmtp.features import work_features
    from wmtp.latency import draft_ctx_work, draft_fwd_work, verify_work

    rows = []
    for key in ("q35", "q122", "nem"):
        spec = get_model(key).with_dtypes(weight_dtype="bf16")
        for ctx in (4096, 16384, 65536, 262144, 1048576):
            for b in (1, 2, 4, 8):
                items = verify_work(spec, ctx, 7, b) + draft_fwd_work(spec, ctx, b) + draft_ctx_work(spec, ctx, b, 4)
                for w in items:
                    kind = "verify_attn" if w.kind == "extend_attn" else w.kind
                    base = truth(work_features(w, spec, 132), "attn" in kind)
                    for r in range(reps):
                        rows.append(dict(kernel=kind, impl="wmtp", model=key, config=f"{w.name};tokens={w.shape.get('tokens', '')}", ctx=w.shape.get("ctx", ""),
                                         batch=w.shape.get("batch", ""), d=w.shape.get("d", ""), window="", sink=64,
                                         q_heads=spec.q_heads, kv_heads=spec.kv_heads, head_dim=spec.head_dim, rep=r,
                                         time_ms=base * (1 + noise * rng.standard_normal()),
                                         bytes=w.bytes, flops=w.flops, status="ok"))
    rows.append(dict(kernel="decode_attn", impl="wmtp", model="q35", config="broken", ctx=1, batch=1, d=1, window="",
                     rep=0, time_ms=np.nan, bytes=1, flops=1, status="error: RuntimeError: boom"))
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def raw_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("cal") / "raw.csv"
    synthetic_raw(np.random.default_rng(0)).to_csv(p, index=False)
    return p


def test_fit_recovers_known_bandwidth(raw_path):
    fits = fit_all(pd.read_csv(raw_path), 132)
    dec = fits["decode_attn"]
    coef = dict(zip(dec.features, dec.coef))
    # One-token tiles are 16 rows: padded flops = 16 x bytes, so the byte term carries both.
    effective = 1e3 / BW + 16 * 1e3 / FL  # ms per byte
    assert coef["bytes"] == pytest.approx(effective, rel=0.03)
    assert coef["batch"] == pytest.approx(PB, rel=0.3)
    for f in fits.values():
        assert f.heldout_median < 0.02 and f.heldout_p90 < 0.04  # 1 % noise: held-out error stays small


def test_heldout_error_is_out_of_sample():
    # Two clusters with different slopes: a global affine fit cannot match both, and the
    # leave-one-out error must say so (an in-sample error could hide it).
    rows = []
    for i, b in enumerate([1e6, 2e6, 3e6, 4e6, 1e9, 2e9, 3e9, 4e9]):
        t = b / 1e12 * 1e3 * (1 if b < 1e8 else 3)
        rows.append(dict(kernel="index_build", model="m", config="c", ctx=i, batch=1, d=1, window="", time_ms=t,
                         bytes=b, flops=0, status="ok"))
    fit = fit_all(pd.DataFrame(rows), 132)["index_build"]
    assert fit.heldout_p90 > 0.2


def test_shape_medians_drop_failures_and_take_medians():
    df = pd.DataFrame([dict(kernel="k", model="m", config="c", ctx=1, batch=1, d=1, window="", time_ms=t, bytes=1,
                            flops=0, status="ok") for t in (1.0, 2.0, 9.0)]
                      + [dict(kernel="k", model="m", config="c", ctx=2, batch=1, d=1, window="", time_ms=np.nan,
                              bytes=1, flops=0, status="error: x")])
    s = shape_medians(df, 132)
    assert len(s) == 1 and s.median_ms[0] == 2.0
    with pytest.raises(WmtpError, match="no successful"):
        shape_medians(df[df.status != "ok"], 132)


@pytest.fixture(scope="module")
def profile_path(raw_path):
    out = raw_path.parent / "profile.json"
    fit_raw_to_profile(raw_path, out, {"gpu_name": "NVIDIA H200", "driver": "x"}, ["q35", "q122", "nem"])
    return out


def test_profile_round_trip_and_summary(profile_path):
    prof = load_profile(profile_path)
    assert prof["hardware"] == "h200" and prof["schema_version"] == 1
    assert len(prof["raw_data"]["sha256"]) == 64
    md = profile_path.with_suffix(".md").read_text()
    assert "leave-one-shape-out" in md and "decode_attn" in md


def test_profile_prices_like_the_truth_and_tags(profile_path):
    cost = ProfileCostModel.from_path(profile_path)
    spec = get_model("q35").with_dtypes(weight_dtype="bf16")
    h200 = get_hardware("h200")
    c = step_cost(spec, h200, cost, "native", 1048576, 7, 1, accept_length=4)
    attn = [p for p in c.t_fwd.items if p.work.kind == "decode_attn"][0]
    from wmtp.features import work_features

    assert attn.time_ms == pytest.approx(truth(work_features(attn.work, spec, 132), True), rel=0.03)
    assert attn.source == "measured"
    far = step_cost(spec, h200, cost, "native", 8 * 1048576, 7, 1)
    assert [p for p in far.t_fwd.items if p.work.kind == "decode_attn"][0].source == "extrapolated"
    mid = step_cost(spec, h200, cost, "native", 100000, 7, 1)
    assert [p for p in mid.t_fwd.items if p.work.kind == "decode_attn"][0].source == "interpolated"
    b200 = step_cost(spec, get_hardware("b200"), cost, "native", 1048576, 7, 1)
    attn_b = [p for p in b200.t_fwd.items if p.work.kind == "decode_attn"][0]
    assert attn_b.source.startswith("scaled from h200")
    assert attn_b.time_ms < attn.time_ms  # 8 TB/s against 4.8


def test_corrupt_and_unknown_profiles(tmp_path, profile_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ProfileError, match="corrupt"):
        load_profile(bad)
    prof = json.loads(profile_path.read_text())
    prof["schema_version"] = 99
    bad.write_text(json.dumps(prof))
    with pytest.raises(ProfileError, match="schema version 99"):
        load_profile(bad)
    prof["schema_version"] = 1
    prof["components"]["gemm"]["coef_ms"] = ["x"]
    bad.write_text(json.dumps(prof))
    with pytest.raises(ProfileError, match="malformed"):
        load_profile(bad)
    with pytest.raises(ProfileError, match="cannot read"):
        load_profile(tmp_path / "missing.json")


def test_cost_model_choice(profile_path):
    h200 = get_hardware("h200")
    assert isinstance(cost_model_for(h200, None, speed_of_light=True), SpeedOfLight)
    assert isinstance(cost_model_for(h200, profile_path), ProfileCostModel)


def test_cli_predict_with_profile_and_errors(profile_path, tmp_path):
    r = CliRunner().invoke(app, ["predict", "--model", "q35", "--profile", str(profile_path), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["cost_model"].startswith("measured profile h200")
    # the origin word, then an optional note (nvfp4 weights on this bf16-only profile: "extrapolated (the bf16 fit ...)")
    origins = {c["source"].split(" (", 1)[0] for c in out["methods"]["native"]["components"]}
    assert origins <= {"measured", "interpolated", "extrapolated"}
    bad = tmp_path / "p.json"
    bad.write_text("[]")
    r = CliRunner().invoke(app, ["predict", "--model", "q35", "--profile", str(bad)])
    assert r.exit_code == 1 and r.output.startswith("error: ") and "not a wmtp latency profile" in r.output


def test_cli_calibrate_from_raw(raw_path, tmp_path):
    r = CliRunner().invoke(app, ["calibrate", "--from-raw", str(raw_path), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert load_profile(tmp_path / "o" / "profile.json")["components"]
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    r = CliRunner().invoke(app, ["calibrate", "--from-raw", str(bad), "--out", str(tmp_path / "o2")])
    assert r.exit_code == 1 and "lacks columns" in r.output
    # a corrupt metadata sidecar next to the raw data: one error line, no traceback
    import shutil

    raw2 = tmp_path / "raw.csv"
    shutil.copy(raw_path, raw2)
    raw2.with_name(raw2.stem + ".meta.json").write_text("{not json")
    r = CliRunner().invoke(app, ["calibrate", "--from-raw", str(raw2), "--out", str(tmp_path / "o3")])
    assert r.exit_code == 1 and r.output.startswith("error: ") and "raw-data metadata" in r.output


def test_gpu_commands_fail_cleanly_without_gpu(tmp_path, profile_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = CliRunner().invoke(app, ["calibrate", "--out", str(tmp_path)])
    assert r.exit_code == 1 and r.output.strip().startswith("error: no CUDA GPU")
    r = CliRunner().invoke(app, ["validate", "--profile", str(profile_path), "--out", str(tmp_path)])
    assert r.exit_code == 1 and "no CUDA GPU" in r.output


def test_hardware_key_from_the_provenance_gpu_name():
    from wmtp.calibrate.fitting import hardware_key

    assert hardware_key({"gpu_name": "NVIDIA H200"}) == "h200"
    assert hardware_key({"gpu_name": "NVIDIA GB200"}) == "gb200"  # not b200, whose name it contains
    assert hardware_key({"gpu_name": "NVIDIA B200"}) == "b200"
    assert hardware_key({"gpu_name": "NVIDIA H100 80GB HBM3"}) == "h100-sxm"
    assert hardware_key({"gpu_name": "Some GPU"}) == "some-gpu"


VALIDATION_DIR = Path(__file__).resolve().parents[1] / "calibrate" / "validation"


# rows: the validation grid, every point ok: 3 models x contexts x (dense at d = 1 + native and window at 4 depths
# each = 9); own kernels 3 contexts (64K, 256K, 1M) x 3 x 9 = 81 (bf16 KV, and fp8 KV: h200-fp8), FlashInfer 4 (96K,
# 256K, 700K, 1M) x 3 x 9 = 108
@pytest.mark.parametrize("table,profile,rows", [("h200", "h200", 81), ("h200-fp8", "h200", 81),
                                                ("h200-flashinfer", "h200-flashinfer", 108)])
def test_shipped_validation_is_reproduced_from_the_shipped_profile(tmp_path, table, profile, rows):
    """The committed validation's predictions come from the committed profile (no hand edits, no drift in the
    pricing code): re-priced on the CPU by calibrate.validate.repredict, every row matches."""
    import pandas as pd

    from wmtp.calibrate.validate import repredict
    from wmtp.profile import PROFILES_DIR

    src = VALIDATION_DIR / f"{table}.csv"
    out = repredict(src, PROFILES_DIR / f"{profile}.json", tmp_path / "v.csv")
    a, b = pd.read_csv(src), pd.read_csv(out)
    ok = a.status == "ok"
    assert ok.sum() == rows
    assert (b.predicted_ms[ok] / a.predicted_ms[ok] - 1).abs().max() < 1e-9


def _validation_errors(table: str, method: str):
    import pandas as pd

    a = pd.read_csv(VALIDATION_DIR / f"{table}.csv")
    ok = (a.status == "ok") & (a.method == method)
    # the error is recomputed from the two measured columns, not read from the table's own rel_err
    return (a.predicted_ms[ok] / a.measured_ms[ok] - 1).abs()


@pytest.mark.parametrize("table,method", [
    ("h200", "dense"), ("h200", "native"), ("h200", "window"),
    ("h200-fp8", "dense"), ("h200-fp8", "native"), ("h200-fp8", "window"),
    ("h200-flashinfer", "native"), ("h200-flashinfer", "window"), ("h200-flashinfer", "dense"),
])
def test_shipped_validation_gate(table, method):
    """The composed-step gate per method (median <= 5 %, worst <= 10 %) on the committed tables."""
    err = _validation_errors(table, method)
    assert len(err) > 0 and (err <= 0.10).all() and err.median() <= 0.05


def test_refit_records_only_models_the_raw_sweep_measured(tmp_path):
    """`--from-raw` writes a profile that says which models it was fitted for: an explicit --models naming one the
    sweep has no rows for is refused (the profile claimed a fit for dsv3 from q35 / q122 / nem rows); the default list
    is cut to the sweep's models (here a sweep of q35 alone, built from the shipped raw data)."""
    from wmtp.profile import PROFILES_DIR

    shipped = PROFILES_DIR / "h200.raw.csv.gz"
    r = CliRunner().invoke(app, ["calibrate", "--from-raw", str(shipped), "--models", "q35,dsv3",
                                 "--out", str(tmp_path / "a")])
    assert r.exit_code == 1 and "no rows for dsv3" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "a" / "profile.json").exists()
    df = pd.read_csv(shipped)
    one = tmp_path / "q35.raw.csv"
    df[df["model"].isna() | (df["model"] == "q35")].to_csv(one, index=False)
    r = CliRunner().invoke(app, ["calibrate", "--from-raw", str(one), "--hw", "h200", "--out", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "b" / "profile.json").read_text())["models"] == ["q35"]
