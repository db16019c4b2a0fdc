"""Property sweep, predict level (`wmtp.reports.property_sweep` runs it): one `wmtp.predict` call per case."""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import product

from wmtp.acceptance import choose_acceptance
from wmtp.decisions import Scenario, sweep
from wmtp.engine import memory_config
from wmtp.errors import WmtpError
from wmtp.hardware import get_hardware
from wmtp.models import get_model
from wmtp.predict import predict
from wmtp.profile import cost_model_for
from wmtp.tp import per_gpu_spec

K, M = 1024, 1024 * 1024
CTXS = (1, 100, 4095, 4096, 4097, 4160, 64 * K, M, 4 * M, 64 * M)
FW = ["sglang-b200-paper"]


def _fin(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x >= 0


def check_prediction(p, bad, where: str) -> None:
    j = p.to_json()
    for name, r in p.methods.items():
        if not (1 <= r.accept_length <= r.cost.depth * (1 + 1e-12)):
            bad("AL-range", f"{where} {name} AL {r.accept_length} outside [1, {r.cost.depth}]")
        for k, v in j["methods"][name].items():
            if isinstance(v, float) and not _fin(v):
                bad("finite", f"{where} {name} {k}={v}")
        if not r.cost.source or not r.accept_source:
            bad("source", f"{where} {name} has no source")
        for c in j["methods"][name]["components"]:
            if not c["source"] or not _fin(c["ms"]) or not _fin(c["bytes"]):
                bad("component", f"{where} {name} {c}")
        if not math.isclose(j["methods"][name]["tpot_ms"], r.cost.step_ms / r.accept_length, rel_tol=1e-12):
            bad("tpot=step/AL", f"{where} {name}")
    n, w = p.methods["native"], p.methods["window"]
    if not math.isclose(p.break_even_accept_ratio, w.cost.step_ms / n.cost.step_ms, rel_tol=1e-12):
        bad("rho*", f"{where} rho* {p.break_even_accept_ratio} != {w.cost.step_ms / n.cost.step_ms}")
    covered = p.window + p.sink >= p.ctx
    if covered and n.cost.depth == w.cost.depth:
        if (not math.isclose(n.accept_length, w.accept_length, rel_tol=1e-12)
                or not math.isclose(n.cost.step_ms, w.cost.step_ms, rel_tol=1e-12)):
            bad("covered", f"{where} native AL {n.accept_length} step {n.cost.step_ms} != window AL "
                           f"{w.accept_length} step {w.cost.step_ms}")
    m = p.memory
    if covered and (m.ring_slots or m.reclaimable_bytes or m.max_batch["window"] != m.max_batch["native"]):
        bad("covered-mem", f"{where} ring {m.ring_slots} reclaim {m.reclaimable_bytes} seats {m.max_batch}")
    for meth, row in j["memory"]["per_request"].items():
        if not all(_fin(v) for v in row.values()):
            bad("mem-finite", f"{where} {meth} {row}")
    for meth, v in p.tpot_by_depth.items():
        best = p.best_depth[meth]
        if any(t < v[best] * (1 - 1e-12) for d, t in v.items()) and not m.engine:
            bad("best-depth", f"{where} {meth} best d={best} {v[best]:.4g} but min {min(v.values()):.4g} at "
                              f"{min(v, key=v.get)}")
        if p.depth != "auto" and p.depth in v and not math.isclose(v[p.depth], p.methods[meth].tpot_ms,
                                                                    rel_tol=1e-12):
            bad("by-depth", f"{where} {meth} tpot_by_depth[{p.depth}] {v[p.depth]} != {p.methods[meth].tpot_ms}")
    if n.cost.depth == w.cost.depth and w.cost.step_ms > n.cost.step_ms * (1 + 1e-9):
        bad("window<=native", f"{where} window step {w.cost.step_ms} > native {n.cost.step_ms}")


def predict_props(models, hws, bad) -> None:
    for key, hk in product(models, hws):
        hw = get_hardware(hk)
        for kv, fw in product(("bf16", "fp8"), (None, FW)):
            spec = get_model(key).with_dtypes(kv_dtype=kv)
            cost = cost_model_for(hw, None, False, fw)
            for ctx, d, b, tp in product(CTXS, (2, 7, 16, "auto"), (1, 7), (1, 2)):
                for w, s in ((4032, 64), (max(ctx - 64, 0), 64), (ctx, 0), (ctx + 1, 5)):
                    where = f"{key} {hk} kv={kv} fw={bool(fw)} ctx={ctx} d={d} B={b} tp={tp} W={w} sink={s}"
                    try:
                        p = predict(spec, hw, ctx, d, w, s, b, cost=cost, tp=tp, frameworks=fw)
                    except WmtpError as e:
                        if "cannot be split" not in str(e) and "GQA attention only" not in str(e):
                            bad("error", f"{where}: {e}")
                        continue
                    check_prediction(p, bad, where)
            tp_props(spec, hw, cost, fw, bad)
            kv_props(key, hw, bad)
            hbm_props(spec, hw, fw, bad)


def tp_props(spec, hw, cost, fw, bad) -> None:
    try:
        per_gpu_spec(spec, 2)
    except WmtpError:
        return
    for ctx, d, b in product((4096, 64 * K, M), (2, 7), (1, 7)):
        p1 = predict(spec, hw, ctx, d, batch=b, cost=cost, tp=1, frameworks=fw)
        p2 = predict(spec, hw, ctx, d, batch=b, cost=cost, tp=2, frameworks=fw)
        where = f"{spec.key} {hw.key} fw={bool(fw)} kv={spec.kv_dtype} ctx={ctx} d={d} B={b}"
        for m in ("dense", "native", "window"):
            r1, r2 = p1.memory.per_request[m], p2.memory.per_request[m]
            if r2.total_bytes > r1.total_bytes * (1 + 1e-12):
                bad("tp-mem", f"{where} {m} per-GPU request bytes tp2 {r2.total_bytes} > tp1 {r1.total_bytes}")
            if p2.memory.weights_bytes[m] > p1.memory.weights_bytes[m] * (1 + 1e-12):
                bad("tp-mem", f"{where} {m} per-GPU weights tp2 > tp1")
            c1, c2 = p1.methods[m].cost, p2.methods[m].cost
            comm = sum(x.time_ms for ph in (c2.t_verify, c2.t_ctx) for x in ph.items if x.work.kind == "allreduce") \
                + c2.gamma * sum(x.time_ms for x in c2.t_fwd.items if x.work.kind == "allreduce")
            if c2.step_ms > c1.step_ms + comm + 1e-9:
                bad("tp-step", f"{where} {m} tp2 step {c2.step_ms:.4g} > tp1 {c1.step_ms:.4g} + all-reduce "
                               f"{comm:.4g}")
            if p2.memory.max_batch[m] < p1.memory.max_batch[m]:
                bad("tp-seats", f"{where} {m} tp2 seats {p2.memory.max_batch[m]} < tp1 {p1.memory.max_batch[m]}")


def kv_props(key, hw, bad) -> None:
    bf, f8 = get_model(key).with_dtypes(kv_dtype="bf16"), get_model(key).with_dtypes(kv_dtype="fp8")
    from wmtp.memory import memory_report

    for ctx, d in product((4096, 64 * K, M), (2, 7)):
        a, b = memory_report(bf, hw, ctx, depth=d), memory_report(f8, hw, ctx, depth=d)
        for m in ("dense", "native", "window"):
            ra, rb = a.per_request[m], b.per_request[m]
            if rb.target_kv_bytes > ra.target_kv_bytes or rb.draft_kv_bytes > ra.draft_kv_bytes:
                bad("fp8-kv", f"{key} {hw.key} ctx={ctx} d={d} {m}: fp8 KV bytes > bf16")
            if b.max_batch[m] < a.max_batch[m]:
                bad("fp8-seats", f"{key} {hw.key} ctx={ctx} d={d} {m}: fp8 seats {b.max_batch[m]} < bf16 "
                                 f"{a.max_batch[m]}")


def hbm_props(spec, hw, fw, bad) -> None:
    from wmtp.memory import memory_report

    eng = memory_config(spec.key, fw)
    for ctx in (4096, 64 * K, M):
        last = None
        for gib in range(40, 300, 8):
            h = replace(hw, hbm_bytes=gib * 1024**3)
            r = memory_report(spec, h, ctx, depth=7, engine=eng)
            if last is not None:
                for m in r.max_batch:
                    if r.max_batch[m] < last[1][m]:
                        bad("hbm-seats", f"{spec.key} kv={spec.kv_dtype} {hw.key} fw={bool(fw)} ctx={ctx} {m}: "
                                         f"{gib} GiB seats {r.max_batch[m]} < {last[0]} GiB {last[1][m]}")
            last = (gib, r.max_batch)


def al_props(models, hws, bad) -> None:
    """AL(d) non-decreasing; sweep window agrees with predict --window; simulate converges to predict."""
    seed = [0]
    for key in models:
        for task_al in (None, (3.0, 2.5), (6.9, 1.0)):
            acc = choose_acceptance(key, 7, task_al)
            for prof in (acc.native, acc.window):
                als = [prof.accept_length(d) for d in range(1, 65)]
                if any(b < a - 1e-12 for a, b in zip(als, als[1:])) or any(not 1 <= a <= d for d, a in
                                                                           enumerate(als, 1)):
                    bad("AL(d)", f"{key} {task_al} {prof.source}: {als[:10]}")
        hw = get_hardware(hws[0])
        spec = get_model(key)
        cost = cost_model_for(hw, None)
        for ctx in (8 * K, M):
            sc = Scenario(spec, hw, cost, ctx, 7)
            acc = choose_acceptance(key, 7, None)
            rows, _ = sweep("window", sc, acc)
            for r in rows:
                p = predict(spec, hw, ctx, 7, r["window"], 64, cost=cost)
                pw = p.methods["window"]
                if not (math.isclose(pw.accept_length, r["accept_length"], rel_tol=1e-12)
                        and math.isclose(pw.tpot_ms, r["window_tpot_ms"], rel_tol=1e-12)):
                    bad("sweep-window", f"{key} ctx={ctx} W={r['window']}: predict AL {pw.accept_length:.4f} TPOT "
                                        f"{pw.tpot_ms:.4f}, sweep AL {r['accept_length']:.4f} TPOT "
                                        f"{r['window_tpot_ms']:.4f}")
            for method, w in (("native", 4032), ("window", 4032), ("window", 1024), ("window", 2 * M)):
                p = predict(spec, hw, ctx, 7, w, 64, cost=cost)
                seed[0] += 1  # a fresh stream per case: one seed would move every case's estimate together
                res = simulate_cli(key, hw.key, ctx, method, w, seed[0])
                lo, hi = res["tpot_ci95"]
                want = p.methods[method].tpot_ms
                if abs(res["tpot_ms"] - want) >= 4 * (hi - lo) / 2 / 1.96:  # 4 standard errors: ~1 in 16,000
                    bad("simulate", f"{key} ctx={ctx} {method} W={w}: simulate TPOT {res['tpot_ms']:.4f} "
                                    f"[{lo:.4f}, {hi:.4f}] vs predict {want:.4f}")


def simulate_cli(key, hw, ctx, method, window, seed=1, tokens=200_000):
    """What `wmtp simulate --json` computes (cli/analysis.py; reports may not import the CLI): the preset
    acceptance, the window's at this W, the decode's extend pricing."""
    from wmtp.acceptance import window_profile
    from wmtp.simulate import decode_profile, simulate, step_time_fn

    spec, gpu = get_model(key), get_hardware(hw)
    sc = Scenario(spec, gpu, cost_model_for(gpu, None), ctx, 7, window, 64)
    acc = choose_acceptance(key, 7, None)
    prof = acc.native if method == "native" else window_profile(acc, window, 64, ctx)
    ph = [(tokens, list(prof.alphas_at(16)))]
    res = simulate(step_time_fn(sc, method, decode_profile(ph, None)), ph, tokens, 7, seed)
    return {"tpot_ms": res.tpot_ms, "tpot_ci95": res.tpot_ci95, "mean_accept_length": res.mean_accept_length}
