"""Physical properties of the analytical core, on a reduced grid (`reports/property_sweep.py` runs the full one).

Each test states a physical fact; expected values come from the fact or from the model row by hand, never from the
code's output. Allowed exceptions are named where they are tested, with their reason.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from itertools import product

import pytest
from typer.testing import CliRunner

from wmtp.acceptance import choose_acceptance
from wmtp.cli.main import app
from wmtp.decisions import Scenario, batch_frontier, sweep
from wmtp.engine import memory_config, resolve
from wmtp.errors import WmtpError
from wmtp.features import work_features
from wmtp.hardware import get_hardware
from wmtp.kernel_plan import feature_backend
from wmtp.latency import step_cost
from wmtp.memory import memory_report
from wmtp.models import MODELS, get_model
from wmtp.predict import depths_that_fit, predict
from wmtp.profile import cost_model_for
from wmtp.tp import per_gpu_spec

K, M = 1024, 1024 * 1024
W, SINK = 4032, 64
FW = ["sglang-b200-paper"]
CTXS = (1, 100, 4095, 4096, 4097, 4160, 64 * K, M, 4 * M)
METHODS = ("dense", "native", "window")


def _tps(spec):
    out = [1]
    try:
        per_gpu_spec(spec, 2)
        out.append(2)
    except WmtpError:  # MLA, or heads that do not split over 2 GPUs
        pass
    return out


def _steps(spec, hw, cost, ovs, ctx, d, b, tp=1, window=W, sink=SINK):
    return {m: step_cost(spec, hw, cost, m, ctx, d, b, window, sink, accept_length=min(d, 4.5), tp=tp,
                         overhead=ovs.get(m)) for m in METHODS}


@pytest.fixture(scope="module")
def setups():
    """(spec, hw, cost model, engine overheads, framework) for every model on three GPUs (a measured profile, one
    scaled from it, one speed-of-light-less far GPU), with and without the SGLang B200 preset."""
    out = []
    for key, hk, fw in product(MODELS, ("h200", "b200", "mi300x"), (None, FW)):
        hw = get_hardware(hk)
        out.append((get_model(key), hw, cost_model_for(hw, None, False, fw), resolve(key, hk, fw)[0], fw))
    return out


# ------------------------------------------------------------------------------------------- per-step cost
def test_every_time_is_finite_non_negative_and_tagged(setups):
    for spec, hw, cost, ovs, fw in setups:
        for tp, ctx, d, b in product(_tps(spec), (1, 4097, M, 4 * M), (2, 16), (1, 64)):
            for m, c in _steps(spec, hw, cost, ovs, ctx, d, b, tp).items():
                assert 0 < c.step_ms < math.inf, (spec.key, hw.key, m, ctx, d, b)
                for p in (*c.t_verify.items, *c.t_ctx.items, *c.t_fwd.items):
                    assert 0 <= p.time_ms < math.inf and str(p.source), (spec.key, hw.key, m, p.work.name)


def test_covered_window_costs_what_native_costs(setups):
    """W + n_sink >= S: the windowed draft reads every key through the native draft's cache (no ring), so it is
    the native draft, engine path included (a preset's eager draft extend and planned forwards were dropped)."""
    for spec, hw, cost, ovs, fw in setups:
        for ctx, d, b, (w, s) in product((1, 4095, 4096), (2, 7), (1, 7), ((W, SINK), (4096, 0), (10, 5000))):
            if w + s < ctx:
                continue
            st = _steps(spec, hw, cost, ovs, ctx, d, b, window=w, sink=s)
            assert st["window"].step_ms == pytest.approx(st["native"].step_ms, rel=1e-12), (spec.key, hw.key, fw, ctx)


def test_native_step_grows_with_context_and_window_draft_is_flat_past_w_plus_sink(setups):
    """More keys never cost less: dense and native phases are non-decreasing in S; the window's draft phases stop
    growing once S > W + n_sink (it reads W + n_sink keys), and its verify grows like native's.

    Allowed exception: under an engine preset the windowed step drops once as S crosses W + n_sink: at or below it the
    window is the native draft (its eager extend, planned forwards), above it the engine's ring path, which does
    without them. The drop is exactly those two host terms."""
    for spec, hw, cost, ovs, fw in setups[::2] + setups[1::6]:
        for d, b in product((2, 7, 16), (1, 7)):
            prev = None
            for ctx in CTXS:
                st = _steps(spec, hw, cost, ovs, ctx, d, b)
                if prev is not None:
                    for m in ("dense", "native"):
                        for ph in ("t_verify", "t_ctx", "t_fwd"):
                            assert getattr(st[m], ph).time_ms >= getattr(prev[m], ph).time_ms * (1 - 1e-9), \
                                (spec.key, hw.key, fw, m, ph, ctx, d, b)
                    wa, wz = prev["window"], st["window"]
                    assert wz.t_verify.time_ms >= wa.t_verify.time_ms * (1 - 1e-9)
                    if wa.ctx > W + SINK:
                        assert wz.t_ctx.time_ms == pytest.approx(wa.t_ctx.time_ms, rel=1e-9)
                        assert wz.t_fwd.time_ms == pytest.approx(wa.t_fwd.time_ms, rel=1e-9)
                    if wz.step_ms < wa.step_ms * (1 - 1e-9):
                        ov = ovs.get("window")
                        assert ov is not None and wa.ctx <= W + SINK < wz.ctx, (spec.key, hw.key, ctx, d, b)
                        switch = ov.eager_extend_ms + (d - 1) * ov.plan_fwd_ms
                        assert wz.step_ms >= wa.step_ms - switch - 1e-9
                prev = st


def _attention_plan(spec, hw, cost, c, tp):
    """The verify attention's tiling and split count as the measured backend plans them."""
    p = next(p for p in c.t_verify.items if p.work.name == "verify.attention")
    f = work_features(p.work, per_gpu_spec(spec, tp), hw.sm_count, getattr(cost, "feature_backend", "wmtp"))
    return f["tiling"], f["splits"]


def test_more_requests_never_take_less_time_per_step(setups):
    """A batch of B + k requests moves at least B's bytes: the step never shortens with batch.

    Allowed exception: the engine's FlashInfer (FA2) verify plans its query tiles and KV splits from the batch
    (`kernel_plan.flashinfer_attention_features`); where B=1 and B=2 get different plans (B=1: more splits, a longer
    merge) the measured kernel is faster at B=2. Only where the two plans differ, and by under 5 % of the step."""
    for spec, hw, cost, ovs, fw in setups:
        for tp, ctx, d in product(_tps(spec), (100, 64 * K, M), (2, 7, 16)):
            for m in METHODS:
                last = None
                for b in (1, 2, 7, 64):
                    c = step_cost(spec, hw, cost, m, ctx, d, b, accept_length=min(d, 4.5), tp=tp,
                                  overhead=ovs.get(m))
                    if last is not None and c.step_ms < last.step_ms * (1 - 1e-9):
                        where = (spec.key, hw.key, fw, tp, m, ctx, d, b)
                        assert fw and feature_backend(cost.backend, None) == "flashinfer", where
                        assert _attention_plan(spec, hw, cost, c, tp) != _attention_plan(spec, hw, cost, last, tp)
                        assert c.step_ms > 0.95 * last.step_ms, where
                    last = c


def test_tp2_step_is_not_slower_than_tp1_beyond_its_all_reduces(setups):
    """Two GPUs each do at most one GPU's work; only the collectives are new.

    Allowed exception: the engine's FlashInfer (FA2) verify splits the keys of each (request, KV head) into more
    chunks when there are fewer KV heads per GPU to fill the SMs (q35 at TP2: 1 KV head, 256 splits against 148),
    and the measured merge of the extra partials costs more than the halved bytes save (the same effect as B=1
    against B=2). Only with that backend, where the plans differ, and by under 5 % of the step."""
    for spec, hw, cost, ovs, fw in setups:
        if 2 not in _tps(spec):
            continue
        for ctx, d, b in product((4096, 64 * K, M), (2, 7), (1, 7)):
            one, two = (_steps(spec, hw, cost, ovs, ctx, d, b, tp) for tp in (1, 2))
            for m in METHODS:
                c = two[m]
                comm = sum(p.time_ms for ph in (c.t_verify, c.t_ctx) for p in ph.items if p.work.kind == "allreduce") \
                    + c.gamma * sum(p.time_ms for p in c.t_fwd.items if p.work.kind == "allreduce")
                if c.step_ms > one[m].step_ms + comm + 1e-9:
                    where = (spec.key, hw.key, fw, m, ctx, d, b)
                    assert fw and feature_backend(cost.backend, None) == "flashinfer", where
                    assert _attention_plan(spec, hw, cost, c, 2) != _attention_plan(spec, hw, cost, one[m], 1), where
                    assert c.step_ms < 1.05 * (one[m].step_ms + comm), where


# ------------------------------------------------------------------------------------------------- memory
def test_target_kv_is_linear_in_context_and_fp8_halves_it():
    """q122: F = 12 full-attention layers, 2 KV heads x 256 dims, K and V: 2048 bytes per token and layer in bf16,
    1024 in fp8 (hand-computed from the model card)."""
    for kv, per_tok in (("bf16", 12 * 2048), ("fp8", 12 * 1024)):
        spec = get_model("q122").with_dtypes(kv_dtype=kv)
        for ctx in (1, 4097, M, 4 * M):
            r = memory_report(spec, get_hardware("h200"), ctx)
            for m in METHODS:
                assert r.per_request[m].target_kv_bytes == per_tok * ctx
            assert r.per_request["native"].draft_kv_bytes == per_tok / 12 * ctx


def _reports(spec, hw, ctxs, depths, engine):
    return {(c, d): memory_report(spec, hw, c, W, SINK, d, engine=engine) for c, d in product(ctxs, depths)}


@pytest.mark.parametrize("engine", [None, "sglang"])
def test_seats_fall_with_context_and_depth_and_rise_with_fp8_and_hbm(engine):
    """Longer requests or deeper drafts never seat more; fp8 KV (half the bytes per token) never seats fewer; nor
    does a GPU with more memory."""
    ctxs, depths = (4096, 64 * K, M), (2, 7, 16)
    for key in ("q35", "q122", "nem", "glm45", "mimo7b"):
        cfg = memory_config(key, FW) if engine else None
        for hk in ("h200", "b200"):
            hw = get_hardware(hk)
            bf = _reports(get_model(key).with_dtypes(kv_dtype="bf16"), hw, ctxs, depths, cfg)
            f8 = _reports(get_model(key).with_dtypes(kv_dtype="fp8"), hw, ctxs, depths, cfg)
            for (c, d), r in bf.items():
                for m in METHODS:
                    assert f8[(c, d)].max_batch[m] >= r.max_batch[m], (key, hk, c, d, m)
                    assert f8[(c, d)].per_request[m].total_bytes <= r.per_request[m].total_bytes
                    for (c2, d2), r2 in bf.items():
                        if c2 >= c and d2 >= d:
                            assert r2.max_batch[m] <= r.max_batch[m], (key, hk, m, (c, d), (c2, d2))
        hw = get_hardware("h200")
        for ctx in (64 * K, M):
            seats = [memory_report(get_model(key), replace(hw, hbm_bytes=g * 1024**3), ctx, engine=cfg).max_batch
                     for g in range(64, 300, 12)]
            for a, b in zip(seats, seats[1:]):
                assert all(b[m] >= a[m] for m in METHODS), (key, ctx, a, b)


def test_tp2_holds_less_per_gpu_than_tp1():
    for key, hk in product(("q35", "q122", "nem", "glm45"), ("h200", "b200")):
        spec, hw = get_model(key), get_hardware(hk)
        for ctx in (4096, M):
            one = memory_report(spec, hw, ctx)
            two = memory_report(per_gpu_spec(spec, 2), hw, ctx)
            for m in METHODS:
                assert two.per_request[m].total_bytes <= one.per_request[m].total_bytes
                assert two.weights_bytes[m] <= one.weights_bytes[m]
                assert two.max_batch[m] >= one.max_batch[m]


# ------------------------------------------------------------------------------------------- predictions
def _check_prediction(p, fitting):
    n, w = p.methods["native"], p.methods["window"]
    for r in p.methods.values():
        assert 1 <= r.accept_length <= r.cost.depth
        assert r.tpot_ms == pytest.approx(r.cost.step_ms / r.accept_length, rel=1e-12)
    assert p.break_even_accept_ratio == pytest.approx(w.cost.step_ms / n.cost.step_ms, rel=1e-12)
    if p.window + p.sink >= p.ctx:
        assert w.accept_length == n.accept_length and w.cost.step_ms == pytest.approx(n.cost.step_ms, rel=1e-12)
        m = p.memory
        assert m.ring_slots == 0 and m.reclaimable_bytes == 0 and m.max_batch["window"] == m.max_batch["native"]
    for meth, curve in p.tpot_by_depth.items():  # best depth: the smallest TPOT of the grid it states (d = 2..10)
        assert sorted(curve) == list(range(2, 11))
        fits = fitting[meth] or set(curve)  # under an engine's accounting: among the depths that fit
        assert p.best_depth[meth] in fits and curve[p.best_depth[meth]] == min(curve[d] for d in fits)


@pytest.mark.parametrize("key,hk,fw", [("q35", "h200", None), ("q122", "b200", FW), ("nem", "b200", FW),
                                       ("glm45", "h200", None), ("dsv3", "b300", None)])
def test_predictions_are_consistent(key, hk, fw):
    hw = get_hardware(hk)
    cost = cost_model_for(hw, None, False, fw)
    for ctx, d, (w, s) in product((100, 4096, 4097, M), (2, 7, "auto"), ((W, SINK), (4096, 0), (1024, 64))):
        for kv in ("bf16", "fp8"):
            spec = get_model(key).with_dtypes(kv_dtype=kv)
            p = predict(spec, hw, ctx, d, w, s, cost=cost, frameworks=fw)
            _check_prediction(p, depths_that_fit(spec, hw, ctx, w, s, memory_config(key, fw), 1))


def test_acceptance_length_lies_in_1_d_and_grows_with_depth():
    for key, al in product(MODELS, (None, (3.0, 2.5), (6.99, 1.0))):
        acc = choose_acceptance(key, 7, al)
        for prof in (acc.native, acc.window):
            als = [prof.accept_length(d) for d in range(1, 65)]
            assert all(1 <= a <= d for d, a in enumerate(als, 1))
            assert all(b >= a for a, b in zip(als, als[1:]))


@pytest.mark.parametrize("key,ctx", [("q35", M), ("q35", 8 * K), ("q122", M)])
def test_sweeps_agree_with_predict(key, ctx):
    """One scenario, one answer: `sweep window` at W, `sweep depth` at d and `sweep ctx` at S give predict's AL and
    TPOT (q35 has an AL(W) dose-response preset; at 8K several windows cover the context)."""
    hw = get_hardware("h200")
    spec, cost = get_model(key), cost_model_for(hw, None)
    acc = choose_acceptance(key, 7, None)  # with the task's AL(W) preset, as predict takes it
    rows, _ = sweep("window", Scenario(spec, hw, cost, ctx, 7), acc)
    for r in rows:
        pw = predict(spec, hw, ctx, 7, r["window"], SINK, cost=cost).methods["window"]
        assert (pw.accept_length, pw.tpot_ms) == pytest.approx((r["accept_length"], r["window_tpot_ms"]), rel=1e-12)
    for w in (1024, W):
        sc = Scenario(spec, hw, cost, ctx, 7, w, SINK)
        p = predict(spec, hw, ctx, 7, w, SINK, cost=cost)
        for r in sweep("depth", sc, acc)[0]:
            for m in ("native", "window"):
                assert r[f"{m}_tpot_ms"] == pytest.approx(p.tpot_by_depth[m][r["depth"]], rel=1e-12)
        for r in batch_frontier(sc, acc, max_batch=3):  # `sweep batch`'s rows, B = 1..3
            if r["batch"] in (1, 3):
                q = predict(spec, hw, ctx, 7, w, SINK, r["batch"], cost=cost)
                assert r["tpot_ms"] == pytest.approx(q.methods[r["method"]].tpot_ms, rel=1e-12), (w, r["batch"])
        for r in sweep("ctx", sc, acc)[0][:3]:  # 4K (covered), 8K, 16K
            q = predict(spec, hw, r["ctx"], 7, w, SINK, cost=cost)
            for m in METHODS:
                assert r[f"{m}_tpot_ms"] == pytest.approx(q.methods[m].tpot_ms, rel=1e-12), (w, r["ctx"], m)


def test_simulated_step_is_predicts_step():
    """The simulation's step at d prices the draft extend over the decode's AL(d) accepted tokens, as predict does
    (it priced d: 0.7 % dearer on q35 at 8K, a bias no run length removes)."""
    from wmtp.simulate import decode_profile, step_time_fn

    hw = get_hardware("h200")
    spec, cost = get_model("q35"), cost_model_for(hw, None)
    acc = choose_acceptance("q35", 7, None)
    for ctx, d in product((8 * K, M), (3, 7, 10)):
        p = predict(spec, hw, ctx, d, cost=cost)
        steps = step_time_fn(Scenario(spec, hw, cost, ctx, 7), "native", decode_profile([(1000, acc.native.alphas)],
                                                                                         None))
        assert steps(d) == pytest.approx(p.methods["native"].cost.step_ms, rel=1e-12)


def _cli_json(*args):
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("method,window,seed", [("native", W, 11), ("window", W, 12), ("window", 1024, 13),
                                                ("window", 2 * M, 14)])
def test_long_simulation_converges_to_predict(method, window, seed):
    """A 100K-token Monte Carlo decode's TPOT is predict's within its noise: |sim - predict| below 4 standard errors
    (its 95 % half-width / 1.96), a false alarm about once in 16,000 runs per case (normal tails)."""
    opts = ["--model", "q35", "--ctx", "1M"] + (["--window", str(window)] if method == "window" else [])
    sim = _cli_json("simulate", *opts, "--method", method, "--tokens", "100000", "--seed", str(seed))
    want = _cli_json("predict", *opts)["methods"][method]["tpot_ms"]
    lo, hi = sim["tpot_ci95"]
    assert abs(sim["tpot_ms"] - want) < 4 * (hi - lo) / 2 / 1.96


# -------------------------------------------------------------------------------------- JSON against table
def _table_cells(text: str, label: str) -> list[str]:
    row = next(line for line in text.splitlines() if line.startswith(f"│ {label} "))
    return [c.strip() for c in row.split("│")[2:-1]]


@pytest.mark.parametrize("args", [("--model", "q122", "--ctx", "1M"), ("--model", "q35", "--ctx", "4K", "--tp", "2"),
                                  ("--model", "nem", "--hw", "b200", "--framework", FW[0], "--batch", "3")])
def test_json_and_table_print_the_same_numbers(args):
    from wmtp.units import format_bytes

    j = _cli_json("predict", *args)
    r = CliRunner(env={"COLUMNS": "250"}).invoke(app, ["predict", *args])
    assert r.exit_code == 0, r.output
    text, ms = r.output, j["methods"]
    for label, key, fmt in (("t_verify", "t_verify_ms", "{:.3f}"), ("step", "step_ms", "{:.3f}"),
                            ("acceptance length AL", "accept_length", "{:.2f}"), ("TPOT", "tpot_ms", "{:.3f}")):
        cells = _table_cells(text, label)
        assert [c.split()[0] for c in cells] == [fmt.format(ms[m][key]) for m in METHODS], label
    for label, key in (("t_ctx", "t_ctx_ms"), ("t_fwd (x gamma)", "t_fwd_ms")):
        assert [c.split()[0] for c in _table_cells(text, label)[1:]] == [f"{ms[m][key]:.3f}" for m in METHODS[1:]]
    seats = _table_cells(text, "max concurrent requests")
    assert seats == [str(j["memory"]["max_batch"][m]) for m in METHODS]
    target = _table_cells(text, "target KV / request")
    assert target == [format_bytes(j["memory"]["per_request"][m]["target_kv_bytes"]) for m in METHODS]
    rho = re.search(r"rho\* = step_window / step_native = ([0-9.]+)", text).group(1)
    assert rho == f"{j['decisions']['break_even_accept_ratio']:.3f}"
    best = re.search(r"native d=(\d+) .*window d=(\d+)", text).groups()
    assert best == (str(j["decisions"]["best_depth"]["native"]), str(j["decisions"]["best_depth"]["window"]))


@pytest.mark.parametrize("key,ctx", [("q122", 64 * K), ("nem", M)])
def test_auto_depth_memory_is_each_methods_own(key, ctx):
    """--depth auto runs each method at its own best depth; its seats and ring are those of that depth (they were
    the deeper method's for both: q122 on b200 at 64K showed the window seating 5 at native's d 10, where it seats
    18 at its own d 7). Under SGLang's accounting the recurrent-state reserve (state x requests x d) makes seats
    fall with d, so the depth matters."""
    hw = get_hardware("b200")
    cost = cost_model_for(hw, None, False, FW)
    auto = predict(get_model(key), hw, ctx, "auto", cost=cost, frameworks=FW)
    assert auto.best_depth["native"] != auto.best_depth["window"]  # the case the test is about
    for m in ("native", "window"):
        own = predict(get_model(key), hw, ctx, auto.best_depth[m], cost=cost, frameworks=FW)
        assert auto.memory.max_batch[m] == own.memory.max_batch[m]
        assert auto.memory.per_request[m] == own.memory.per_request[m]
    own_window = predict(get_model(key), hw, ctx, auto.best_depth["window"], cost=cost, frameworks=FW)
    assert auto.memory.ring_slots == own_window.memory.ring_slots == 4032 + 64 + auto.best_depth["window"]
