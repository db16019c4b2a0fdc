"""The Windowed-MTP paper's qualitative findings (reference/paper-results.md), checked on the model:
the shipped H200 profile scaled to the B200 (the paper's GPU), the paper's acceptance presets and,
where the finding is about SGLang's costs, the `sglang-b200-paper` engine preset. Each test also
says what the kernel-level model alone does, so the tests show which findings are engine effects.
The quantitative gaps are in reports/paper_check.md (`python -m wmtp.reports.paper_check`)."""

from __future__ import annotations

import pytest

from wmtp import decisions as dec
from wmtp.acceptance import choose_acceptance
from wmtp.profile import cost_model_for
from wmtp.engine import resolve
from wmtp.hardware import get_hardware
from wmtp.memory import memory_report
from wmtp.models import get_model

B200 = get_hardware("b200")
SCALED = cost_model_for(B200, None)
ONE_M = 1_040_000  # the paper's "1M" prompt
PAPER_MODELS = ["q35", "q122", "nem"]
GRID = (3, 5, 7, 9)  # the paper's best-depth grid


def scenario(key: str, engine: bool = True, ctx: int = ONE_M) -> dec.Scenario:
    ovs, _ = resolve(key, "b200", ["sglang-b200-paper"] if engine else None)
    return dec.Scenario(get_model(key), B200, SCALED, ctx, 7, overheads=ovs or None)


@pytest.mark.parametrize("key", PAPER_MODELS)
def test_window_wins_at_every_depth(key):
    acc = choose_acceptance(key, 7, None)
    rows = dec.depth_curve(scenario(key), acc, GRID)
    assert all(r["window_tpot_ms"] < r["native_tpot_ms"] for r in rows), rows
    # Kernels alone: q122's AL drop (5.57 -> 4.74) outweighs our kernels' +15 % cost gap at d >= 6.
    kernel = dec.depth_curve(scenario(key, engine=False), acc, GRID)
    if key == "q122":
        assert any(r["window_tpot_ms"] > r["native_tpot_ms"] for r in kernel)


@pytest.mark.parametrize("key", PAPER_MODELS)
@pytest.mark.parametrize("engine", [True, False])
def test_per_step_saving_grows_with_context(key, engine):
    acc = choose_acceptance(key, 7, None)
    rows = dec.context_curve(scenario(key, engine), acc, [65536, 131072, 261000, 524288, ONE_M])
    savings = [r["step_saving_ms"] for r in rows]
    ratios = [r["cost_ratio"] for r in rows]
    assert all(a < b for a, b in zip(savings, savings[1:]))
    assert all(a < b for a, b in zip(ratios, ratios[1:])) and ratios[0] > 0
    # "Delta roughly doubles from 261K to 1M" (the paper: x2.2-2.3); the model's grows at least that much.
    assert savings[-1] / savings[2] > 2.0


@pytest.mark.parametrize("key", PAPER_MODELS)
def test_native_falls_to_dense_when_acceptance_is_about_2_8(key):
    sc = scenario(key)
    dense = sc.tpot("dense", None)[0]
    native_step = sc.tpot("native", None, accept_length=1.0)[1]
    # The AL at which native d = 7 only matches dense: about 2.8 or above (SGLang's draft tax).
    assert native_step / dense > 2.6
    native, window = (sc.tpot(m, None, accept_length=2.8)[0] for m in ("native", "window"))
    assert dense / native < 1.05  # no real speedup left at AL 2.8 ...
    assert native / window > 1.25  # ... while the window keeps one (paper: +38 % on cwe)
    if key in ("q122", "nem"):
        assert native > dense  # below dense (paper: q122 cwe 0.88x, nem fwe 0.97x)
    # Kernel costs alone leave native far above dense at AL 2.8: the finding is an engine effect.
    k = scenario(key, engine=False)
    assert k.tpot("dense", None)[0] / k.tpot("native", None, accept_length=2.8)[0] > 1.4


def test_window_optimum_moves_shallow_on_hard_inputs():
    # Paper Table 3: the window's optimum is d = 5 on q35 cwe and d = 3 on q122 cwe; our q35 cwe preset
    # is AL 2.8 at d = 7 (window matched), q122 on a hard input is taken at the same AL.
    expect = {"q35": 5, "q122": 3}
    for key, depth in expect.items():
        acc = choose_acceptance("q35", 7, None, "cwe")
        rows = dec.depth_curve(scenario(key), acc, GRID)
        best = dec.best_depths(rows)
        assert best["window"] == depth
        by_d = {r["depth"]: r for r in rows}
        # at each method's own best depth the window beats native by the paper's margin (1.22-1.58x)
        gain = by_d[best["native"]]["native_tpot_ms"] / by_d[best["window"]]["window_tpot_ms"]
        assert gain > 1.22


@pytest.mark.parametrize("key", PAPER_MODELS)
def test_window_beats_native_at_each_own_best_depth(key):
    rows = dec.depth_curve(scenario(key), choose_acceptance(key, 7, None), GRID)
    best = dec.best_depths(rows)
    by_d = {r["depth"]: r for r in rows}
    assert by_d[best["native"]]["native_tpot_ms"] / by_d[best["window"]]["window_tpot_ms"] > 1.1


@pytest.mark.parametrize("key", ["q35", "nem"])
def test_window_seats_one_more_1m_request_on_b200(key):
    # mem-fraction-static 0.85 as in the paper's headline runs; the B200's HBM as nvidia-smi reports it.
    m = memory_report(get_model(key), B200, ONE_M, mem_fraction=0.85)
    assert m.max_batch["window"] >= m.max_batch["native"] + 1
    assert m.max_batch["native"] >= 1


def test_paper_check_report_covers_every_section():
    from wmtp.reports.paper_check import markdown

    text = markdown()
    for section in ("headline", "context sweep", "latency fit", "phase decomposition", "best depth",
                    "native vs dense", "difficulty", "memory", "batch sweep", "fp8 KV", "H100"):
        assert f"| {section}" in text
    assert "nan" not in text
