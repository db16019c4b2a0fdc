"""A fitted component never prices an item below its flops at the profile's measured GEMM peak (`profile.price`):
the fits come from bandwidth-bound decode shapes, and their flops terms imply rates far above any tensor core. The
expected times here are the flops divided by the peak the profile's JSON records, by hand."""

import json
from pathlib import Path

import pytest

from wmtp.hardware import get_hardware
from wmtp.models import get_model
from wmtp.profile import ProfileCostModel
from wmtp.work import Work

PROFILE = Path(__file__).resolve().parents[1] / "wmtp_model" / "data" / "profiles" / "h200.json"
PEAK = json.loads(PROFILE.read_text())["ceilings"]["gemm_bf16_tflops"] * 1e12  # flop/s


def _price(kind, flops, nbytes=1e6, wdtype="bf16", hw="h200", count=1):
    cm = ProfileCostModel.from_path(PROFILE, "shipped")
    work = Work(kind, f"verify.{kind}", nbytes, flops, 1, count, {"wdtype": wdtype, "tokens": 4096, "batch": 512})
    return cm.price(work, get_hardware(hw), get_model("q122"))


@pytest.mark.parametrize("kind", ["gemm", "lm_head"])
def test_a_compute_bound_gemm_costs_its_flops_at_the_measured_peak(kind):
    flops = 2 * 4096 * 4096 * 8192  # 275 GFLOP on 1 MB of "weights": a shape no decode fit has seen
    p = _price(kind, flops, count=3)
    assert p.time_ms == pytest.approx(3 * flops / PEAK * 1e3, rel=1e-12)  # 3 x 0.404 ms at 680.5 TFLOP/s
    assert p.source.startswith("extrapolated (raised to its flops at the measured GEMM peak")


def test_fp8_weights_take_the_fp8_rate():
    """W8A8 runs on the FP8 tensor cores: the H200 datasheet's fp8 rate is twice bf16's, so the floor halves."""
    h200 = get_hardware("h200")
    flops = 2 * 4096 * 4096 * 8192
    p = _price("gemm", flops, wdtype="fp8")
    assert p.time_ms == pytest.approx(flops / (PEAK * h200.fp8_tflops / h200.bf16_tflops) * 1e3, rel=1e-12)


def test_another_gpu_scales_the_peak_by_its_datasheet_rate():
    h200, b200 = get_hardware("h200"), get_hardware("b200")
    flops = 2 * 4096 * 4096 * 8192
    p = _price("gemm", flops, hw="b200")
    assert p.time_ms == pytest.approx(flops / (PEAK * b200.bf16_tflops / h200.bf16_tflops) * 1e3, rel=1e-12)
    assert "raised to its flops" in p.source


def test_a_bandwidth_bound_item_keeps_its_fit():
    """A decode-sized GEMM (a few tokens over 100 MB of weights) is nowhere near its flops floor: unchanged."""
    p = _price("gemm", 2 * 4 * 50e6, nbytes=100e6)
    assert "raised" not in p.source and p.time_ms > 2 * 4 * 50e6 / PEAK * 1e3

