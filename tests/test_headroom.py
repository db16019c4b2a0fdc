"""`predict --headroom`: engine kernels vs wmtp's own vs the measured floor, on the same GPU."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from wmtp.cli.main import app
from wmtp.errors import WmtpError
from wmtp.hardware import get_hardware
from wmtp.headroom import floor_ms, headroom, step_totals
from wmtp.models import get_model
from wmtp.profile import PROFILES_DIR, ProfileCostModel

H200 = get_hardware("h200")
OWN = ProfileCostModel.from_path(PROFILES_DIR / "h200.json", "shipped")
FI = ProfileCostModel.from_path(PROFILES_DIR / "h200-flashinfer.json", "shipped")


def test_floor_is_the_larger_of_bytes_and_flops_over_the_measured_ceilings():
    from wmtp.headroom import Ceilings
    from wmtp.work import Work

    c = Ceilings(4e12, 8e12, 500e12, H200, "test")
    q35 = get_model("q35")
    # 4 GB / 4 TB/s = 1 ms; 1 TFLOP / 500 TFLOP/s = 2 ms
    assert floor_ms(Work("gemm", "g", 4e9, 1e12, 1, 1, {"wdtype": "bf16"}), q35, c) == pytest.approx(2.0)
    assert floor_ms(Work("decode_attn", "a", 8e9, 0.0, 1, 1, {}), q35, c) == pytest.approx(2.0)
    # L2-resident draft reads at the L2 rate: 8 GB / 8 TB/s
    assert floor_ms(Work("decode_attn", "a", 8e9, 0.0, 1, 1, {"l2_resident": True}), q35, c) == pytest.approx(1.0)
    # fp8 weights compute at the datasheet fp8 / bf16 ratio of the measured bf16 rate (H200: 1979 / 989)
    fp8 = 2.0 * H200.bf16_tflops / H200.fp8_tflops
    assert floor_ms(Work("gemm", "g", 0.0, 1e12, 1, 1, {"wdtype": "fp8"}), q35, c) == pytest.approx(fp8)
    with pytest.raises(WmtpError, match="ceilings"):
        from wmtp.headroom import ceilings

        ceilings(ProfileCostModel({**OWN.profile, "ceilings": {}}), FI, H200)


def test_rows_cover_every_component_and_no_kernel_beats_the_floor():
    rows = headroom(get_model("q35"), H200, FI, OWN, 2**20, 7, 4032, 64)
    assert {r.method for r in rows} == {"dense", "native", "window"}
    for r in rows:  # a pure read streams up to ~5 % above a copy's rate (measure/results/h200-backends: <= 105 %)
        assert r.floor_ms <= r.own_ms * 1.06 and r.floor_ms <= r.engine_ms * 1.06, r
    totals = step_totals(rows)
    for m in ("native", "window"):
        fwd = [r for r in rows if r.method == m and r.phase == "fwd"]
        assert all(r.times == 6 for r in fwd)
        assert totals[m]["own_ms"] == pytest.approx(sum(r.own_ms * r.times for r in rows if r.method == m))
    # FlashInfer's masked verify is slower than wmtp's own verify at 1M (measured: 0.86 vs 0.56 ms per layer)
    verify = {r.method: r for r in rows if r.component == "verify.attention"}
    assert verify["native"].engine_ms > verify["native"].own_ms


def test_cli_headroom_json_and_errors(tmp_path):
    r = CliRunner().invoke(app, ["predict", "--model", "q35", "--headroom", "--json"])
    assert r.exit_code == 0, r.output
    room = json.loads(r.output)["headroom"]
    assert set(room["steps"]) == {"dense", "native", "window"} and room["components"]
    r = CliRunner().invoke(app, ["predict", "--model", "q35", "--headroom", "--profile", str(PROFILES_DIR / "h200.json")])
    assert r.exit_code == 1 and r.output.startswith("error: --headroom needs an engine-backend profile")
    r = CliRunner().invoke(app, ["predict", "--model", "q35", "--headroom"], env={"COLUMNS": "80"})
    assert r.exit_code == 0 and "Headroom at d 7" in r.output and "Traceback" not in r.output


def test_report_has_a_headroom_section_on_the_h200(tmp_path):
    pytest.importorskip("plotly")
    out = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["report", "--model", "q35", "--out", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "Headroom: the engine's kernels, wmtp's own, the floor" in text and "verify.attention" in text


def test_headroom_on_a_gpu_with_no_profiles_says_both_sides_are_scaled():
    runner = CliRunner()
    on_h200 = json.loads(runner.invoke(app, ["predict", "--model", "q35", "--headroom", "--json"]).output)["headroom"]
    assert "note" not in on_h200  # control: the H200's own profiles
    r = runner.invoke(app, ["predict", "--model", "q35", "--hw", "h100-sxm", "--headroom", "--json"])
    room = json.loads(r.output)["headroom"]
    assert r.exit_code == 0 and "measured on h200" in room["note"] and "h100-sxm" in room["note"]
