"""Paged attention kernels v1 (per-head-padded rows, `attention_plan`) against the packed-rows kernel
(`rows_plan`), in one run: GPU correctness against an fp64 torch reference, then timings of decode,
verify d = 1..17, KV split counts, slot locality, windowed decode, fp8 KV and torch SDPA.

Method: the harness's (`measure/timing.py`): each call planned once, captured in a CUDA graph,
replayed after warm-up with the L2 flushed (a 256 MiB read) before each replay, CUDA events around
each replay; every replay a row of OUT/paged_v2.csv (`wmtp.measure.harness.COLUMNS`). Pools: one bf16
KV pool per head shape of max(ctx) x max(B) tokens (page size 1), index sets from a random
permutation of its slots (as `wmtp measure kernels`); `bytes` = K and V rows read once. Steps run in
priority order and stop at `--deadline-s`; OUT/paged_v2.md is written from the CSV at the end.

    python3 measure/scripts/paged_v2_bench.py --out $OUT            # on the GPU
    TRITON_INTERPRET=1 python3 measure/scripts/paged_v2_bench.py --smoke --out /tmp/x   # CPU, tiny sizes
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from wmtp.kernel_plan import rows_tiling
from wmtp.measure.kernels.paged_attention import decode_attention, verify_attention

SHAPES = {"q35": (16, 2, 256), "q122": (32, 2, 256), "nem": (32, 2, 128)}  # q heads, KV heads, head dim
COLS = ["kernel", "impl", "model", "ctx", "batch", "d", "kv", "config", "rep", "time_ms", "bytes", "status"]


class Run:
    CSV = "paged_v2.csv"  # the rows' file under OUT (later rounds' runs name their own)

    def __init__(self, out: Path, deadline_s: float, smoke: bool):
        self.t0, self.deadline, self.smoke = time.monotonic(), deadline_s, smoke
        self.dev = "cuda" if torch.cuda.is_available() else "cpu"
        self.f = open(out / self.CSV, "w", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=COLS)
        self.w.writeheader()
        self.pools, self.sets, self.best = {}, {}, {}

    def late(self) -> bool:
        return time.monotonic() - self.t0 > self.deadline

    def row(self, base: dict, samples, status="ok"):
        for i, t in enumerate(samples or [float("nan")]):
            self.w.writerow({**base, "rep": i, "time_ms": t, "status": status})
        self.f.flush()

    def checked(self, base: dict, config: str, ref, launch, q) -> bool:
        """Three launches of `launch(out, **extra)` into NaN-poisoned outputs shaped as `q` (the plan's splits twice,
        64 forced splits once), each against `ref` (relative Frobenius error < 2e-2, a NaN anywhere fails); one
        `check` row (`base` + config + the worst error or the exception) in the CSV. Returns whether all passed."""
        errs = []
        try:
            for extra in ({}, {}, dict(num_splits=64)):
                out = torch.full_like(q, float("nan"))
                launch(out, **extra)
                torch.cuda.synchronize()
                errs.append(float((out.double() - ref).norm() / ref.norm()) if not torch.isnan(out).any()
                            else float("nan"))
            ok, note = all(e < 2e-2 for e in errs), f"rel_err={max(errs):.2e}"
        except Exception as e:  # a variant that cannot build or launch fails its check with its reason
            ok, note = False, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        self.w.writerow({**base, "kernel": "check", "config": ";".join(filter(None, (config, note))),
                         "status": "ok" if ok else "FAILED"})
        self.f.flush()
        print(f"check {base.get('impl')} {base.get('model')} d={base.get('d')}: {'ok' if ok else 'FAILED'} {note}",
              flush=True)
        return ok

    def time(self, base: dict, call, est_ms: float) -> float:
        """Median ms of `call` (harness method on a GPU; one eager call on the CPU smoke run)."""
        try:
            if self.dev == "cpu":
                t = time.perf_counter()
                call()
                samples = [(time.perf_counter() - t) * 1e3]
            else:
                from wmtp.measure import timing
                reps = int(max(8, min(40, 80.0 / max(est_ms, 1e-3))))
                samples = timing.time_calls([call], reps=reps).samples_ms
        except Exception as e:  # a failing variant is a row with its reason
            self.row(base, None, f"error: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}")
            if self.dev == "cuda":
                torch.cuda.empty_cache()
            return float("inf")
        self.row(base, samples)
        return statistics.median(samples)

    def pool(self, model: str, tokens: int, kv: str = "bf16"):
        hq, hkv, hd = SHAPES[model]
        key = (hkv, hd, kv)
        if key not in self.pools or self.pools[key][0].shape[0] < tokens:
            self.pools.pop(key, None)
            if self.dev == "cuda":
                torch.cuda.empty_cache()
            k = torch.randn(tokens, hkv, hd, device=self.dev, dtype=torch.bfloat16)
            v = torch.randn(tokens, hkv, hd, device=self.dev, dtype=torch.bfloat16)
            if kv == "fp8":
                k, v = k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
            self.pools[key] = (k, v)
        return self.pools[key]

    def index(self, slots: int, n: int, batch: int, layout: str = "random"):
        key = (slots, n, batch, layout)
        if key not in self.sets:
            if len(self.sets) > 6:
                self.sets.pop(next(iter(self.sets)))
            if layout == "random":
                ind = torch.randperm(slots, device=self.dev)[: n * batch].to(torch.int32)
            else:  # each request's keys in one contiguous run of slots
                ind = torch.arange(n * batch, device=self.dev, dtype=torch.int32)
            ptr = torch.arange(batch + 1, device=self.dev, dtype=torch.int32) * n
            self.sets[key] = (ptr, ind)
        return self.sets[key]


def attn_call(r: Run, model, slots, n, batch, d, kv="bf16", layout="random", **kw):
    hq, hkv, hd = SHAPES[model]
    k, v = r.pool(model, slots, kv)
    ptr, ind = r.index(k.shape[0], n, batch, layout)
    q = torch.randn(batch * d, hq, hd, device=r.dev, dtype=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    if d == 1:
        return lambda: decode_attention(q, k, v, ptr, ind, n, out=out, **kw)
    qo = torch.arange(batch + 1, device=r.dev, dtype=torch.int32) * d
    return lambda: verify_attention(q, k, v, ptr, ind, qo, d, n, out=out, **kw)


def bench(r: Run, name, model, slots, n, batch, d, kv="bf16", layout="random", **kw) -> float:
    hq, hkv, hd = SHAPES[model]
    nbytes = batch * n * hkv * hd * 2 * (1 if kv == "fp8" else 2)
    cfg = ";".join(f"{a}={b}" for a, b in sorted(kw.items()) if a != "kernel") or "default"
    base = dict(kernel="decode" if d == 1 else "verify", impl=name, model=model, ctx=n, batch=batch, d=d, kv=kv,
                config=cfg + ("" if layout == "random" else f";slots={layout}"), bytes=nbytes)
    try:
        call = attn_call(r, model, slots, n, batch, d, kv, layout, **kw)
    except Exception as e:
        r.row(base, None, f"error: {type(e).__name__}: {str(e)[:160]}")
        return float("inf")
    return r.time(base, call, nbytes / 3.5e9)


def check(r: Run, sizes):
    """GPU correctness: rows and v1 against fp64 torch (fresh random inputs, poisoned outputs)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from kernel_refs import ref_attention
    for model, (hq, hkv, hd) in SHAPES.items():
        for d, kernel, kv in [(1, "rows", "bf16"), (2, "rows", "bf16"), (5, "rows", "bf16"), (7, "rows", "bf16"),
                              (9, "rows", "bf16"), (17, "rows", "bf16"), (7, "v1", "bf16"), (7, "rows", "fp8"),
                              (1, "rows", "fp8")]:
            n_kv = [max(sizes[0], d), max(sizes[1], d), d + 2]
            g = torch.Generator(device="cpu").manual_seed(hash((model, d, kernel, kv)) % 2**31)
            slots = sum(n_kv) + 11
            k = torch.randn(slots, hkv, hd, generator=g).to(r.dev)
            v = torch.randn(slots, hkv, hd, generator=g).to(r.dev)
            k, v = (k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)) if kv == "fp8" else (k.bfloat16(), v.bfloat16())
            ks, vs = (0.7, 1.3) if kv == "fp8" else (1.0, 1.0)
            ind = torch.randperm(slots, generator=g)[: sum(n_kv)].to(torch.int32).to(r.dev)
            ptr = torch.tensor([0, n_kv[0], n_kv[0] + n_kv[1], sum(n_kv)], dtype=torch.int32, device=r.dev)
            qo = torch.arange(4, dtype=torch.int32, device=r.dev) * d
            q = torch.randn(3 * d, hq, hd, generator=g).bfloat16().to(r.dev)
            out = torch.full_like(q, float("nan"))
            extra = dict(k_scale=ks, v_scale=vs) if kv == "fp8" else {}
            if d == 1:
                decode_attention(q, k, v, ptr, ind, max(n_kv), out=out, kernel=kernel, **extra)
            else:
                verify_attention(q, k, v, ptr, ind, qo, d, max(n_kv), out=out, kernel=kernel, **extra)
            ref = ref_attention(q, k.float() * ks, v.float() * vs, ptr, ind, qo)
            err = float((out.double() - ref).norm() / ref.norm()) if not torch.isnan(out).any() else float("nan")
            ok = err < 2e-2
            r.w.writerow(dict(kernel="check", impl=kernel, model=model, ctx=max(n_kv), batch=3, d=d, kv=kv,
                              config=f"rel_err={err:.2e}", status="ok" if ok else "FAILED"))
            print(f"check {model} d={d} {kernel} {kv}: rel err {err:.2e} {'ok' if ok else 'FAILED'}", flush=True)
    r.f.flush()


def tune_rows(r: Run, model, slots, n, d, kv="bf16") -> dict:
    """Time the rows kernel's tile options at one shape; remember the fastest per tile height."""
    hq, hkv, hd = SHAPES[model]
    block_m = rows_tiling(hq // hkv, d, hd)[0]
    key = (model, block_m, kv)
    if key in r.best:
        return r.best[key]
    opts = [dict(block_n=bn, num_warps=w, num_stages=s) for bn in (32, 64)
            for w, s in ([(4, 2), (4, 3)] if block_m <= 32 else [(4, 3), (8, 2), (8, 3)])]
    times = [(bench(r, "rows-tune", model, slots, n, 1, d, kv, kernel="rows", **o), i) for i, o in enumerate(opts)]
    r.best[key] = opts[min(times)[1]]
    return r.best[key]


def rows(r, model, slots, n, b, d, kv="bf16", **kw):
    hq, hkv, hd = SHAPES[model]
    best = r.best.get((model, rows_tiling(hq // hkv, d, hd)[0], kv), {})
    return bench(r, "rows", model, slots, n, b, d, kv, kernel="rows", **{**best, **kw})


def sdpa(r: Run, model, n, batch, d):
    hq, hkv, hd = SHAPES[model]
    kc = torch.randn(batch, hkv, n, hd, device=r.dev, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    q = torch.randn(batch, hq, d, hd, device=r.dev, dtype=torch.bfloat16)
    f = torch.nn.functional.scaled_dot_product_attention
    base = dict(kernel="decode" if d == 1 else "verify", impl="torch_sdpa", model=model, ctx=n, batch=batch, d=d,
                kv="bf16", config="contiguous", bytes=batch * n * hkv * hd * 4)
    r.time(base, lambda: f(q, kc, vc, enable_gqa=True, is_causal=False), base["bytes"] / 3.5e9)


def steps(r: Run, ctxs, batches, models):
    big, slots = max(ctxs), max(ctxs) * max(batches)
    fp8_slots = big * 4
    for model in models:  # 1. tile options at the largest context, B = 1
        for d in (7, 1, 4, 9, 16):
            yield f"tune {model} d={d}", lambda m=model, d=d: tune_rows(r, m, slots, big, d)
    for model in models:  # 2. cost in d at the largest context, B = 1
        for d in range(1, 18):
            yield f"d-sweep {model} d={d}", lambda m=model, d=d: rows(r, m, slots, big, 1, d)
        for d in (1, 2, 4, 5, 7, 8, 9, 16, 17):
            yield f"v1 {model} d={d}", lambda m=model, d=d: bench(r, "v1", m, slots, big, 1, d, kernel="v1")
    for model in models:  # 3. KV splits and slot locality at every (ctx, B); SDPA beside them
        for ctx in ctxs:
            for b in batches:
                def split_step(m=model, c=ctx, b=b):
                    bench(r, "v1", m, slots, c, b, 1, kernel="v1")
                    for waves in (1, 2, 4, 8, 16, 32):
                        rows(r, m, slots, c, b, 1, waves=waves)
                    rows(r, m, slots, c, b, 1, waves=4, min_keys=1024)
                    if b == max(batches) or c == min(ctxs):
                        sdpa(r, m, c, b, 1)
                    if c == big and b in (1, max(batches)):
                        bench(r, "v1", m, slots, c, b, 1, layout="contiguous", kernel="v1")
                        rows(r, m, slots, c, b, 1, layout="contiguous")
                yield f"splits {model} ctx={ctx} B={b}", split_step
    for model in models:  # 4. fp8 KV (scaled e4m3) at the largest context, B = 1
        for d in (1, 7):
            yield f"fp8 tune {model} d={d}", lambda m=model, d=d: tune_rows(r, m, fp8_slots, big, d, "fp8")
        for d in range(1, 10):
            yield f"fp8 {model} d={d}", lambda m=model, d=d: rows(r, m, fp8_slots, big, 1, d, "fp8")
    for model in models:  # 5. verify d = 7 at every (ctx, B); d-sweep at the smaller contexts
        for ctx in ctxs:
            for b in batches:
                def verify_step(m=model, c=ctx, b=b):
                    bench(r, "v1", m, slots, c, b, 7, kernel="v1")
                    rows(r, m, slots, c, b, 7)
                    if b == 1 and c != big:
                        for d in (2, 3, 4, 5, 6, 8, 9, 12, 16, 17):
                            rows(r, m, slots, c, b, d)
                yield f"verify {model} ctx={ctx} B={b}", verify_step
    for model in models:  # 6. windowed decode (4032 + 64 keys)
        for b in batches:
            def window_step(m=model, b=b):
                bench(r, "v1", m, slots, min(4096, big), b, 1, kernel="v1")
                for waves in (1, 2, 4, 8):
                    rows(r, m, slots, min(4096, big), b, 1, waves=waves)
            yield f"window {model} B={b}", window_step


def run_steps(r, steps, only: str) -> None:
    """Run the plan's (label, step) pairs in order, those whose label starts with one of `only` (comma-separated;
    empty: all), until the run's deadline; then close the CSV."""
    for label, step in steps:
        if only and not any(label.startswith(x) for x in only.split(",")):
            continue
        if r.late():
            print(f"deadline: stopped before {label}", flush=True)
            break
        step()
        print(f"{time.monotonic() - r.t0:6.1f}s {label}", flush=True)
    r.f.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="q35,q122,nem")
    ap.add_argument("--deadline-s", type=float, default=330.0)
    ap.add_argument("--only", default="", help="comma-separated step-label prefixes to run (default: all)")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CPU, TRITON_INTERPRET=1): the script runs")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    r = Run(a.out, a.deadline_s, a.smoke)
    ctxs, batches = ([64, 256], [1, 2]) if a.smoke else ([65536, 262144, 1048576], [1, 4, 16])
    if a.smoke:  # small heads: the interpreter is slow
        SHAPES.update(q35=(4, 2, 16), q122=(8, 2, 16), nem=(8, 2, 32))
    from wmtp.measure.provenance import collect
    meta = collect("cuda-graph-replay+l2flush(read)" if r.dev == "cuda" else "cpu-smoke",
                   dict(command="python3 " + " ".join(sys.argv), ctxs=ctxs, batches=batches))
    (a.out / "paged_v2.meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    if r.dev == "cuda":
        from wmtp.measure.harness import RowWriter, ceiling_rows
        cw = RowWriter(a.out / "ceilings.csv")
        ceiling_rows(cw)
        cw.close()
    if not a.no_check:
        check(r, (40, 9) if a.smoke else (20000, 3000))
    models = a.models.split(",")
    run_steps(r, steps(r, ctxs, batches, models), a.only)
    from wmtp.measure.scripts.paged_v2_report import report
    (a.out / "paged_v2.md").write_text(report(a.out / "paged_v2.csv", a.out / "ceilings.csv"))
    print((a.out / "paged_v2.md").read_text())


if __name__ == "__main__":
    main()
