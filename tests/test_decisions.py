"""Decisions and simulation: break-even points, frontier, Monte Carlo against closed forms, the
adaptive-depth policy, and the paper's qualitative findings on the model."""

from __future__ import annotations

from dataclasses import replace

import json
import math

import pytest
from typer.testing import CliRunner

from wmtp import decisions as dec
from wmtp.acceptance import WINDOW_PRESETS, choose_acceptance
from wmtp.profile import cost_model_for
from wmtp.cli.main import app
from wmtp.errors import WmtpError
from wmtp.hardware import get_hardware
from wmtp.latency import SpeedOfLight
from wmtp.models import get_model
from wmtp.simulate import simulate

B200 = get_hardware("b200")
SCALED = cost_model_for(B200, None)  # the shipped H200 profile scaled to the B200, as the paper ran


def scenario(key="q35", ctx=2**20, depth=7, hw=B200, cost=SCALED, **kw):
    return dec.Scenario(get_model(key), hw, cost, ctx, depth, **kw)


def test_break_even_context_is_where_the_cost_gain_crosses():
    sc = scenario(hw=get_hardware("h200"), cost=SpeedOfLight())
    acc = choose_acceptance("q35", 7, None)
    s = dec.break_even_context(sc, acc, 0.05)
    assert s is not None and 4096 < s < 2**20

    def gain(ctx):
        al = acc.native.accept_length(7)
        return sc.tpot("native", None, ctx=ctx, accept_length=al)[1] / sc.tpot("window", None, ctx=ctx,
                                                                                accept_length=al)[1] - 1
    assert gain(s) >= 0.05 > gain(int(s / 1.02))
    assert dec.break_even_context(sc, acc, 10.0) is None  # never 11x faster


def test_window_curve_with_and_without_al_model():
    sc = scenario("q35", ctx=2**20)
    acc = choose_acceptance("q35", 7, None)
    model = WINDOW_PRESETS[("q35", "niah_multiquery_enum")]
    assert acc.window_al is model  # the task's AL(W) preset, chosen with the acceptance
    assert choose_acceptance("q35", 7, (4.2, 4.4)).window_al is None  # explicit acceptance replaces it
    rows = dec.window_curve(sc, replace(acc, window_al=model), [1024, 2048, 4032, 8192, 65536])
    best = dec.break_even_window(rows)
    assert best["optimal_window"] == 4032 and best["acceptance"] == "AL(W) model"
    assert rows[0]["accept_length"] == pytest.approx(3.79)
    fixed = dec.window_curve(sc, replace(acc, window_al=None), [1024, 4032, 65536])
    assert dec.break_even_window(fixed)["acceptance"].startswith("held fixed")
    assert fixed[0]["window_tpot_ms"] < fixed[-1]["window_tpot_ms"]  # cost only: a smaller window is cheaper
    # each row says which acceptance it took, for the report's hover text (not read back from its wording)
    assert {r["accept_kind"] for r in rows} == {"al_model"} and {r["accept_kind"] for r in fixed} == {"held_fixed"}
    short = dec.window_curve(scenario("q35", ctx=8192), replace(acc, window_al=model), [1024, 16384])
    assert [r["accept_kind"] for r in short] == ["al_model", "native"]  # 16384 + sink covers 8K keys


def test_al_of_w_model_hits_its_points_and_the_native_value():
    m = WINDOW_PRESETS[("q35", "niah_multiquery_enum")]
    assert m.accept_length(1024, 7, 2**20) == pytest.approx(3.79)
    assert m.accept_length(4032, 7, 2**20) == pytest.approx(4.74)
    assert m.accept_length(2**20, 7, 2**20) == pytest.approx(4.49)
    assert "extrapolated" in m.tag(256, 2**20)
    assert m.accept_length(4032, 3, 2**20) < m.accept_length(4032, 7, 2**20)


def test_batch_frontier_pareto_and_memory_limit():
    sc = scenario("q35", ctx=2**20)
    rows = dec.batch_frontier(sc, choose_acceptance("q35", 7, None))
    assert {r["method"] for r in rows} == {"dense", "native", "window"}
    pareto = [r for r in rows if r["pareto"]]
    assert pareto
    for p in pareto:  # nothing dominates a Pareto point
        assert not any(o["per_user_tok_s"] > p["per_user_tok_s"] and o["per_gpu_tok_s"] > p["per_gpu_tok_s"]
                       for o in rows)
    for r in rows:
        assert r["per_gpu_tok_s"] == pytest.approx(r["batch"] * r["per_user_tok_s"])


def test_draft_prefill_saving():
    est = dec.draft_prefill_saving(get_model("q35"), B200, 2**20, 4032, 64)
    assert est["saving_ms"] > 0 and est["window_ms"] < est["native_ms"] and "estimate" in est["source"]
    short = dec.draft_prefill_saving(get_model("q35"), B200, 1000, 4032, 64)
    assert short["saving_ms"] == 0


# ------------------------------------------------------------------ simulation
def test_simulation_reproduces_closed_form_al_and_tpot():
    # Stationary profile, fixed d: AL = 1 + sum prod alpha; TPOT = step / AL. With 200k tokens the
    # standard error of the mean emitted per step is ~0.3 %; allow 5 sigma (false alarm < 1e-6).
    alphas = [0.9, 0.8, 0.75, 0.7, 0.6, 0.5]
    al = 1.0
    run = 1.0
    for a in alphas:
        run *= a
        al += run
    res = simulate(lambda d: 10.0, [(10**9, alphas)], 200_000, 7, seed=1)
    assert res.mean_accept_length == pytest.approx(al, rel=0.015)
    assert res.tpot_ms == pytest.approx(10.0 / al, rel=0.015)
    lo, hi = res.tpot_ci95
    assert lo < res.tpot_ms < hi and (hi - lo) / res.tpot_ms < 0.02  # a sane interval around the estimate


def test_simulation_trace_replay_is_exact():
    # The trace emits 1, 5, 3 tokens per step: 11 cycles give 99 tokens, one more step reaches 100.
    res = simulate(lambda d: 4.0, [], 100, 5, trace=[0, 4, 2])
    assert (res.steps, res.tokens) == (34, 100)
    assert res.total_ms == pytest.approx(4.0 * 34)


def test_adaptive_depth_beats_every_fixed_depth_when_acceptance_changes():
    # Easy phase (alpha 0.95) then hard phase (alpha 0.3): deep drafts pay first, shallow later.
    phases = [(20_000, [0.95] * 16), (20_000, [0.3] * 16)]

    def step(d):
        return 10.0 + 1.5 * (d - 1)

    fixed = {d: simulate(step, phases, 40_000, d, seed=3).tpot_ms for d in range(2, 11)}
    adaptive = simulate(step, phases, 40_000, "adaptive", seed=3)
    assert adaptive.tpot_ms < min(fixed.values())
    assert len(adaptive.depth_histogram) > 1


def test_simulation_errors():
    with pytest.raises(WmtpError, match="output token"):
        simulate(lambda d: 1.0, [(10, [0.5])], 0)
    with pytest.raises(WmtpError, match="policy"):
        simulate(lambda d: 1.0, [(10, [0.5])], 10, "sometimes")


def test_sweep_cli():
    r = CliRunner().invoke(app, ["sweep", "depth", "--model", "q35", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert len(out["rows"]) == 9 and set(out["best_depth"]) == {"native", "window"}
    r = CliRunner().invoke(app, ["sweep", "ctx", "--model", "q122", "--json", "--hw", "b200"])
    assert r.exit_code == 0 and json.loads(r.output)["break_even_ctx"] > 0
    r = CliRunner().invoke(app, ["sweep", "batch", "--model", "nem", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["pareto"]
    r = CliRunner().invoke(app, ["sweep", "bogus", "--model", "q35"])
    assert r.exit_code == 1 and r.output.startswith("error: ")


def test_sweep_csv_and_simulate_cli(tmp_path):
    r = CliRunner().invoke(app, ["sweep", "window", "--model", "q35", "--csv", str(tmp_path / "w.csv")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "w.csv").read_text().startswith("window,")
    r = CliRunner().invoke(app, ["simulate", "--model", "q35", "--tokens", "2000", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["tokens"] >= 2000 and out["tpot_ms"] > 0 and not math.isnan(out["tpot_ci95"][0])
    r = CliRunner().invoke(app, ["simulate", "--model", "q35", "--depth", "adaptive", "--phases", "0.9:1000,0.3:1000",
                                 "--tokens", "2000", "--json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["simulate", "--model", "q35", "--phases", "2:10"])
    assert r.exit_code == 1 and "alpha in [0, 1]" in r.output
