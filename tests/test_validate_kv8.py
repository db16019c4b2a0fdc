"""`wmtp validate --kv-dtype fp8` (CPU, no GPU): the composed steps' pools (target and draft) in e4m3, the KV dtype
threaded from the CLI through run_validate to the row that is built and priced, written in each validation row, read
back by the summary and by `repredict` (files from before the column read as bf16), and bad values refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from wmtp.calibrate import validate
from wmtp.cli.main import app
from wmtp.errors import WmtpError
from wmtp.hardware import get_hardware
from wmtp.latency import step_cost
from wmtp.models import get_model
from wmtp.profile import PROFILES_DIR, ProfileCostModel

SHIPPED = PROFILES_DIR / "h200.json"


class _Stop(Exception):
    pass


def _tiny(kv_dtype="bf16"):
    from wmtp.specs import ModelSpec

    return ModelSpec(
        key="tiny", name="tiny", family="qwen3_next", hidden=64, vocab=128, n_layers=4, n_full_attn=2, n_linear=2,
        n_moe=4, n_dense_ffn=0, q_heads=4, kv_heads=2, head_dim=32, attn_out_gate=True, linear_kind="gdn",
        lin_k_heads=2, lin_v_heads=4, lin_head_dim=16, n_experts=8, top_k=2, expert_ffn=32, n_shared=1,
        shared_ffn=32, kv_dtype=kv_dtype)


@pytest.mark.parametrize("kv,dtype", [("bf16", "bfloat16"), ("fp8", "float8_e4m3fn")])
def test_composed_pools_follow_the_rows_kv_dtype(monkeypatch, kv, dtype):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from wmtp.measure import components as comp
    from wmtp.measure import composed

    monkeypatch.setattr(comp, "DEVICE", "cpu")
    model = composed.ComposedModel(_tiny(kv), 64, 1 << 16)
    pools = [t for kv_pair in model.kv for t in kv_pair] + list(model.draft_kv)
    assert len(pools) == 2 * 2 + 2  # K and V of both full-attention layers, and the draft's
    for t in pools:
        assert t.dtype == getattr(torch, dtype) and tuple(t.shape) == (64, 2, 32)
        x = t.float()
        # N(0, 1) draws (e4m3 keeps them to 3 mantissa bits): mean near 0, spread near 1, no NaN / inf
        assert torch.isfinite(x).all() and abs(x.mean().item()) < 0.25 and 0.8 < x.std().item() < 1.2


def test_kv_tensor_refuses_other_dtypes():
    pytest.importorskip("torch")
    from wmtp.measure.harness import kv_tensor

    with pytest.raises(ValueError, match="bf16 or fp8"):
        kv_tensor((4, 1, 8), "int8")


def test_run_validate_builds_and_writes_the_asked_kv_dtype(tmp_path, monkeypatch):
    from wmtp import measure
    from wmtp.measure import backends, composed, harness

    built = []

    class Recorder:
        def __init__(self, spec, max_ctx, l2, backend=None, moe_impl="wmtp"):
            built.append(spec)
            raise _Stop

    monkeypatch.setattr(measure, "require_gpu", lambda: None)
    monkeypatch.setattr(backends, "get_backend", lambda name: name)
    monkeypatch.setattr(harness, "free_bytes", lambda: 1 << 40)
    monkeypatch.setattr(harness, "l2_bytes", lambda: 1 << 20)
    monkeypatch.setattr(composed, "ComposedModel", Recorder)
    for kv in ("bf16", "fp8"):
        with pytest.raises(_Stop):
            validate.run_validate(SHIPPED, [get_model("q35")], tmp_path / kv, (65536,), (3,), kv_dtype=kv)
        assert built[-1].kv_dtype == kv
        # the row built is the one priced: at 64K its KV bytes are half in fp8 (1 byte vs 2 per element)
    assert built[0].kv_bytes_per_token_layer == 2 * built[1].kv_bytes_per_token_layer
    with pytest.raises(WmtpError, match="KV dtype 'fp16'"):
        validate.run_validate(SHIPPED, [get_model("q35")], tmp_path / "x", (65536,), (3,), kv_dtype="fp16")


def _rows(tmp_path, kv_column):
    """Two measured native steps of q35 at 1M, d = 7, one per KV dtype (or, without the column, a file of the
    format before it)."""
    head = ("model,layers,backend,moe_backend,method,ctx,d,window,sink,extend_queries,predicted_ms,measured_ms,"
            "measured_p10_ms,measured_p90_ms,rel_err,reps,predicted_source,status")
    row = "q35,F=10 linear=30 moe=40 dense=0,wmtp,wmtp,native,1048576,7,4032,64,5,0,20.0,19.9,20.1,0,20,x,ok"
    if kv_column:
        text = head + ",kv_dtype\n" + row + ",bf16\n" + row + ",fp8\n"
    else:
        text = head + "\n" + row + "\n"
    path = tmp_path / "validation.csv"
    path.write_text(text)
    return path


def test_repredict_prices_each_row_with_its_kv_dtype(tmp_path):
    import pandas as pd

    out = validate.repredict(_rows(tmp_path, True), SHIPPED, tmp_path / "re.csv")
    df = pd.read_csv(out)
    bf16, fp8 = df.predicted_ms
    # at 1M the KV read dominates a q35 native step (10 full-attention layers x 1M keys, the draft's too): the fp8
    # cache reads half the bytes, and wmtp's fp8 decode runs at 0.58-0.74x the bf16 time (h200-kv-fp8 run 3)
    assert fp8 < 0.95 * bf16
    for r in df.itertuples():
        assert r.rel_err == pytest.approx(r.predicted_ms / r.measured_ms - 1)
    cost = ProfileCostModel.from_path(SHIPPED)
    trunc = validate.layers_from_label(get_model("q35"), "F=10 linear=30 moe=40 dense=0", "fp8")
    assert trunc.kv_dtype == "fp8" and trunc.weight_dtype == "bf16"
    want = step_cost(trunc, get_hardware(cost.hw_key), cost, "native", 1048576, 7, 1, 4032, 64, accept_length=5.0)
    assert fp8 == pytest.approx(want.step_ms)


def test_files_before_the_column_read_as_bf16(tmp_path):
    import pandas as pd

    old = validate.repredict(_rows(tmp_path, False), SHIPPED, tmp_path / "old.csv")
    new = validate.repredict(_rows(tmp_path, True), SHIPPED, tmp_path / "new.csv")
    assert pd.read_csv(old).predicted_ms[0] == pytest.approx(pd.read_csv(new).predicted_ms[0])
    assert "KV: bf16)" in validate.validation_summary(_rows(tmp_path, False))
    assert "KV: bf16, fp8)" in validate.validation_summary(_rows(tmp_path, True))


def test_unknown_kv_dtype_in_a_validation_file_is_refused(tmp_path):
    path = _rows(tmp_path, True)
    path.write_text(path.read_text().replace(",fp8\n", ",int4\n"))
    with pytest.raises(WmtpError, match="KV dtype 'int4'"):
        validate.repredict(path, SHIPPED, tmp_path / "re.csv")


@pytest.mark.parametrize("value", ["int8", "FP8 ", ""])
def test_cli_refuses_a_bad_kv_dtype_before_the_gpu(tmp_path, value):
    res = CliRunner().invoke(app, ["validate", "--profile", str(SHIPPED), "--kv-dtype", value, "--out",
                                   str(tmp_path / "o")])
    assert res.exit_code == 1
    assert "--kv-dtype must be one of bf16, fp8" in res.output and "Traceback" not in res.output


def test_shipped_fp8_table_is_priced_as_fp8(tmp_path):
    """calibrate/validation/h200-fp8.csv: every row ran fp8 pools, and its predictions are the fp8 prices (re-priced
    as bf16 the 1M native steps of q35, whose 40 layers all ran, come out dearer)."""
    import pandas as pd

    from wmtp.calibrate.validate import COLUMNS

    src = Path(validate.__file__).resolve().parent / "validation" / "h200-fp8.csv"
    df = pd.read_csv(src)
    assert list(df.columns) == COLUMNS and set(df.kv_dtype) == {"fp8"} and (df.status == "ok").all()
    as_bf16 = tmp_path / "bf16.csv"
    df.assign(kv_dtype="bf16").to_csv(as_bf16, index=False)
    re = pd.read_csv(validate.repredict(as_bf16, SHIPPED, tmp_path / "re.csv"))
    sel = (df.model == "q35") & (df.ctx == 1048576) & (df.method == "native") & (df.d <= 7)
    assert sel.sum() == 3 and (re.predicted_ms[sel] > 1.05 * df.predicted_ms[sel]).all()
