"""Property sweep of the analytical core (exploration; `tests/test_properties.py` pins a reduced grid).

    python -m wmtp.reports.property_sweep [--quick] [--only NAME,...]

Prints every violation of a physical property it finds, one line each, and a count per property.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from itertools import product

from wmtp.errors import WmtpError
from wmtp.hardware import HARDWARE, get_hardware
from wmtp.latency import step_cost
from wmtp.memory import memory_report
from wmtp.models import MODELS, get_model
from wmtp.profile import cost_model_for
from wmtp.tp import per_gpu_spec

K, M = 1024, 1024 * 1024
CTXS = (1, 2, 100, 4095, 4096, 4097, 4160, 8 * K, 64 * K, 256 * K, M, 4 * M, 64 * M)
DEPTHS = tuple(range(2, 17))
BATCHES = (1, 2, 7, 64)
FOUND: Counter = Counter()
SHOWN: Counter = Counter()


ALL: list = []


def bad(prop: str, msg: str) -> None:
    FOUND[prop] += 1
    ALL.append(f"[{prop}] {msg}")
    if SHOWN[prop] < 6:
        SHOWN[prop] += 1
        print(f"[{prop}] {msg}")


def finite_nonneg(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x >= 0


def specs(models, kvs=("bf16", "fp8"), wds=(None,)):
    for key, kv, wd in product(models, kvs, wds):
        yield key, kv, wd, get_model(key).with_dtypes(weight_dtype=wd, kv_dtype=kv)


def tps_for(spec):
    out = [1]
    try:
        per_gpu_spec(spec, 2)
        out.append(2)
    except WmtpError:
        pass
    return out


def cost_props(models, hws, ctxs, depths, batches, wds, fw):
    """Per-step cost: finite, monotone in ctx / batch, windowed == native when covered, flat past W + sink."""
    from wmtp.engine import resolve

    for (key, kv, wd, spec), hk in product(specs(models, wds=wds), hws):
        hw = get_hardware(hk)
        fws = [None, ["sglang-b200-paper"]] if fw else [None]
        for frameworks in fws:
            cost = cost_model_for(hw, None, False, frameworks)
            ovs, _ = resolve(key, hk, frameworks)
            for tp in tps_for(spec):
                tag = f"{key} kv={kv} wd={wd or spec.weight_dtype} {hk} tp={tp} fw={bool(frameworks)}"
                for d, b in product(depths, batches):
                    prev = {}
                    for ctx in ctxs:
                        st = {}
                        for m in ("dense", "native", "window"):
                            try:
                                st[m] = step_cost(spec, hw, cost, m, ctx, d, b, 4032, 64, accept_length=min(d, 4.5),
                                                  tp=tp, overhead=ovs.get(m))
                            except WmtpError as e:
                                bad("error", f"{tag} {m} ctx={ctx} d={d} B={b}: {e}")
                        if len(st) < 3:
                            continue
                        check_step(st, prev, tag, ctx, d, b)
                        prev = st
                for ctx, d in product(ctxs, depths):
                    check_batch(spec, hw, cost, ovs, tp, ctx, d, batches, tag)


def check_step(st, prev, tag, ctx, d, b):
    where = f"{tag} ctx={ctx} d={d} B={b}"
    for m, c in st.items():
        for name, v in (("step", c.step_ms), ("t_verify", c.t_verify.time_ms), ("t_ctx", c.t_ctx.time_ms),
                        ("t_fwd", c.t_fwd.time_ms)):
            if not finite_nonneg(v):
                bad("finite", f"{where} {m} {name}={v}")
        for ph in (c.t_verify, c.t_ctx, c.t_fwd):
            for p in ph.items:
                if not finite_nonneg(p.time_ms):
                    bad("finite", f"{where} {m} {p.work.name}={p.time_ms}")
                if not str(p.source):
                    bad("source", f"{where} {m} {p.work.name} has no source")
    n, w = st["native"], st["window"]
    if ctx <= 4032 + 64:
        if not math.isclose(n.step_ms, w.step_ms, rel_tol=1e-12):
            bad("covered", f"{where} native {n.step_ms:.6g} != window {w.step_ms:.6g} though W+sink >= ctx")
    elif w.step_ms > n.step_ms * (1 + 1e-9):
        bad("window<=native", f"{where} window {w.step_ms:.6g} > native {n.step_ms:.6g}")
    if not math.isclose(n.t_verify.time_ms, w.t_verify.time_ms, rel_tol=1e-12):
        bad("verify-same", f"{where} native verify {n.t_verify.time_ms} != window {w.t_verify.time_ms}")
    if prev:
        for m in ("dense", "native", "window"):
            if st[m].step_ms < prev[m].step_ms * (1 - 1e-9):
                bad("ctx-monotone", f"{where} {m} step {st[m].step_ms:.6g} < at ctx={prev[m].ctx}: "
                                    f"{prev[m].step_ms:.6g}")
            for ph in ("t_verify", "t_ctx", "t_fwd"):
                a, z = getattr(prev[m], ph).time_ms, getattr(st[m], ph).time_ms
                if z < a * (1 - 1e-9) and (m != "window" or ph == "t_verify"):
                    bad("ctx-monotone-phase", f"{where} {m} {ph} {z:.6g} < at ctx={prev[m].ctx}: {a:.6g}")
        if prev["window"].ctx > 4096:
            for ph in ("t_ctx", "t_fwd"):
                a, z = getattr(prev["window"], ph).time_ms, getattr(st["window"], ph).time_ms
                if not math.isclose(a, z, rel_tol=1e-9):
                    bad("window-flat", f"{where} window {ph} {z:.6g} != at ctx={prev['window'].ctx}: {a:.6g}")


def check_batch(spec, hw, cost, ovs, tp, ctx, d, batches, tag):
    for m in ("dense", "native", "window"):
        last = None
        for b in batches:
            try:
                c = step_cost(spec, hw, cost, m, ctx, d, b, 4032, 64, accept_length=min(d, 4.5), tp=tp,
                              overhead=ovs.get(m))
            except WmtpError:
                continue
            if last is not None and c.step_ms < last[1] * (1 - 1e-9):
                bad("batch-monotone", f"{tag} {m} ctx={ctx} d={d}: step at B={b} {c.step_ms:.6g} < at B={last[0]} "
                                      f"{last[1]:.6g}")
            if last is not None and c.step_ms / b > last[1] / last[0] * (1 + 1e-9):
                bad("batch-amortize", f"{tag} {m} ctx={ctx} d={d}: per-request step at B={b} {c.step_ms / b:.6g} > "
                                      f"at B={last[0]} {last[1] / last[0]:.6g}")
            last = (b, c.step_ms)


def memory_props(models, hws, ctxs, depths):
    from wmtp.engine import memory_config

    for (key, kv, wd, spec), hk in product(specs(models), hws):
        hw = get_hardware(hk)
        for tp, eng in product(tps_for(spec), (None, memory_config(key, ["sglang-b200-paper"]))):
            g = per_gpu_spec(spec, tp)
            tag = f"{key} kv={kv} {hk} tp={tp} engine={eng is not None}"
            grid = {}
            for ctx, d in product(ctxs, depths[::3] if eng else depths):
                for (w, s) in ((4032, 64), (ctx, 0), (max(0, ctx - 64), 64), (ctx + 10, 64)):
                    try:
                        r = memory_report(g, hw, ctx, w, s, d, engine=eng, engine_tp=tp)
                    except WmtpError as e:
                        bad("error", f"{tag} memory ctx={ctx} d={d} W={w}: {e}")
                        continue
                    where = f"{tag} ctx={ctx} d={d} W={w} sink={s}"
                    check_mem(r, spec, where, w, s, ctx, tp)
                    if (w, s) == (4032, 64):
                        grid[(ctx, d)] = r
            for (ctx, d), r in grid.items():
                for (c2, d2), r2 in grid.items():
                    if (c2 >= ctx and d2 >= d) and (c2, d2) != (ctx, d):
                        for m in r.max_batch:
                            if r2.max_batch[m] > r.max_batch[m]:
                                bad("maxbatch-monotone", f"{tag} {m}: max batch {r2.max_batch[m]} at ctx={c2} d={d2} "
                                                         f"> {r.max_batch[m]} at ctx={ctx} d={d}")


def check_mem(r, spec, where, w, s, ctx, tp):
    for m, q in r.per_request.items():
        for name in ("target_kv_bytes", "draft_kv_bytes", "state_bytes"):
            if not finite_nonneg(getattr(q, name)):
                bad("mem-finite", f"{where} {m} {name}={getattr(q, name)}")
        if not isinstance(r.max_batch[m], int) or r.max_batch[m] < 0:
            bad("mem-finite", f"{where} {m} max_batch={r.max_batch[m]}")
    kv = spec.kv_bytes_per_token_layer
    if r.per_request["native"].target_kv_bytes != spec.n_full_attn * kv * ctx * (1 if tp == 1 else
                                                                                r.per_request["native"].target_kv_bytes
                                                                                / (spec.n_full_attn * kv * ctx)):
        pass
    if w + s >= ctx:
        if r.reclaimable_bytes != 0 or r.ring_slots != 0:
            bad("covered-mem", f"{where} reclaimable {r.reclaimable_bytes} ring {r.ring_slots} though W+sink >= ctx")
        if r.max_batch["window"] != r.max_batch["native"]:
            bad("covered-mem", f"{where} max batch window {r.max_batch['window']} != native {r.max_batch['native']}")
    if r.reclaimable_bytes < 0:
        bad("reclaim>=0", f"{where} reclaimable {r.reclaimable_bytes}")
    if r.max_batch["window"] < r.max_batch["native"]:
        bad("window-seats", f"{where} window seats {r.max_batch['window']} < native {r.max_batch['native']}")
    if r.max_batch["dense"] < r.max_batch["native"]:
        bad("dense-seats", f"{where} dense seats {r.max_batch['dense']} < native {r.max_batch['native']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--hws", default=",".join(HARDWARE))
    ap.add_argument("--log", default="", help="write every violation here, one a line")
    a = ap.parse_args(argv)
    only = set(filter(None, a.only.split(",")))
    models, hws = a.models.split(","), a.hws.split(",")
    depths = (2, 3, 7, 10, 16) if a.quick else DEPTHS
    if not only or "cost" in only:
        cost_props(models, hws, CTXS, depths, BATCHES, (None,), fw=True)
    if not only or "wdtype" in only:
        cost_props(models, hws, CTXS[::3], (2, 7), (1, 64), ("bf16", "fp8", "int4", "nvfp4"), fw=False)
    if not only or "memory" in only:
        memory_props(models, hws, CTXS, depths)
    for extra in ("predict", "al"):
        if not only or extra in only:
            from wmtp.reports import property_sweep_predict as more

            getattr(more, f"{extra}_props")(models, hws, bad)
    # Found and judged legitimate (tests/test_properties.py names each exception and its reason): the windowed step
    # drops once at S = W + n_sink + 1 under an engine preset (the engine's ring path starts there); the FlashInfer
    # verify at TP2 is faster at B=2 than B=1 (FA2 plans more splits for one request); per-request step at B=7 above
    # B=2 (batch-amortize: per-request attention follows the kernel's split plan, not a physical bound); SGLang seats
    # fewer dense requests than native at some contexts (dense-seats: without speculation it sizes the
    # recurrent-state pool from memory, with it at 48 slots).
    print("violations:", dict(FOUND) or "none")
    if a.log:
        with open(a.log, "w") as f:
            f.write("\n".join(ALL) + "\n")
    return 1 if FOUND else 0


if __name__ == "__main__":
    sys.exit(main())
