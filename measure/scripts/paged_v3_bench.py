"""Sub-block paged-attention kernel (`paged_rows`, kernel "sub") against the packed-rows kernel ("rows") in
one run: GPU correctness against an fp64 torch reference, then timings of short-context decode (merge
kernel, PDL merge, fused merge; split counts; split kernel and merge kernel timed apart), the cost in
d = 1..17 at 1M, decode over (ctx, B), windowed decode, fp8 KV and torch SDPA.

Method and tables as `paged_v2_bench.py` (the harness's CUDA-graph replay with the L2 flushed before each
replay, CUDA events; random permuted page-size-1 slots; every replay one row of OUT/paged_v3.csv). Kernels
are compiled first by worker processes in parallel (same constants, tiny inputs), so the timed steps find
them in Triton's cache.

    python3 measure/scripts/paged_v3_bench.py --out $OUT            # on the GPU
    TRITON_INTERPRET=1 python3 measure/scripts/paged_v3_bench.py --smoke --out /tmp/x   # CPU, tiny sizes
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

import torch

from wmtp.kernel_plan import sub_plan
from wmtp.measure.kernels.paged_attention import LOG2E, decode_attention, verify_attention
from wmtp.measure.kernels.paged_rows import sub_attention
from wmtp.measure.scripts import paged_v2_bench as v2

SHORT = [dict(merge=m, waves=w, num_stages=s) for m in ("kernel", "pdl", "fused") for w in (1, 2, 3, 4)
         for s in (2, 3)]
TUNE = [dict(block_n=bn, num_warps=w, num_stages=s) for bn, w, s in
        ((64, 4, 3), (64, 8, 3), (32, 4, 3), (32, 8, 3), (64, 8, 2), (32, 4, 2))]


def call(r: v2.Run, impl, model, slots, n, batch, d, kv="bf16", plan_kv=None, only=None, **kw):
    """A timed call; `plan_kv` (default n) is the context the plan is made for (the pre-compile workers run
    tiny inputs under the timed calls' plans, so that the same kernels compile)."""
    hq, hkv, hd = v2.SHAPES[model]
    k, v = r.pool(model, slots, kv)
    ptr, ind = r.index(k.shape[0], n, batch)
    q = torch.randn(batch * d, hq, hd, device=r.dev, dtype=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    mk = plan_kv or n
    if only:
        tune = {a: b for a, b in kw.items() if a != "merge"}
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 4
        plan = sub_plan(batch, hkv, hq // hkv, d, hd, mk, sms, **tune)
        scale = hd ** -0.5 * LOG2E
        return lambda: sub_attention(q, k, v, ptr, ptr, ind, out, plan, scale, 1.0, True, False,
                                     kw.get("merge", "kernel"), only)
    if d == 1:
        return lambda: decode_attention(q, k, v, ptr, ind, mk, out=out, kernel=impl, **kw)
    qo = torch.arange(batch + 1, device=r.dev, dtype=torch.int32) * d
    return lambda: verify_attention(q, k, v, ptr, ind, qo, d, mk, out=out, kernel=impl, **kw)


class Run(v2.Run):
    """v2's run, writing OUT/paged_v3.csv, and marking a call that could not be captured in a CUDA graph
    (the harness then times it eagerly) with `timer=eager` in its config."""

    CSV = "paged_v3.csv"
    reps_cap, reps_ms = 40, 80.0  # replays of one timing: reps_ms / its estimate, within [8, reps_cap]

    def time(self, base: dict, fn, est_ms: float) -> float:
        if self.dev == "cpu":
            return super().time(base, fn, est_ms)
        from wmtp.measure import timing
        try:
            t = timing.time_calls([fn], reps=int(max(8, min(self.reps_cap, self.reps_ms / max(est_ms, 1e-3)))))
        except Exception as e:  # a failing variant is a row with its reason
            self.row(base, None, f"error: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}")
            torch.cuda.empty_cache()
            return float("inf")
        if "graph" not in t.timer:
            base = {**base, "config": base["config"] + ";timer=eager"}
        self.row(base, t.samples_ms)
        return sorted(t.samples_ms)[len(t.samples_ms) // 2]


class Plan:
    """The timed calls in priority order; `compile_only` runs each once at a tiny size instead."""

    def __init__(self, r: v2.Run, ctxs, batches, models, followup: bool = False):
        self.r, self.ctxs, self.batches, self.models, self.followup = r, ctxs, batches, models, followup
        self.big, self.small = max(ctxs), min(ctxs)
        self.slots = self.big * max(batches)

    def bench(self, impl, model, n, b, d, kv="bf16", only=None, **kw):
        hq, hkv, hd = v2.SHAPES[model]
        nbytes = b * n * hkv * hd * 2 * (1 if kv == "fp8" else 2)
        cfg = ";".join(f"{a}={c}" for a, c in sorted(kw.items())) or "default"
        name = impl + (f"-{only}" if only else "")
        base = dict(kernel="decode" if d == 1 else "verify", impl=name, model=model, ctx=n, batch=b, d=d, kv=kv,
                    config=cfg, bytes=nbytes)
        slots = self.slots if kv == "bf16" else self.big * 4
        try:
            fn = call(self.r, impl, model, slots, n, b, d, kv, only=only, **kw)
        except Exception as e:
            self.r.row(base, None, f"error: {type(e).__name__}: {str(e)[:160]}")
            return float("inf")
        return self.r.time(base, fn, nbytes / 3.5e9)

    def steps(self):
        return self.followup_steps() if self.followup else self.main_steps()

    def followup_steps(self):
        """After the first run: L2 prefetch of the next K/V tile, on the rows kernel's own tiles (pow2), for
        verify d = 1..17 and decode; v1 (the B < 16 default) beside them."""
        big, small = self.big, self.small
        for m in self.models:
            def pf_d(m=m):
                for d in (7, 9):
                    for bn, w in ((32, 4), (32, 8), (64, 4), (64, 8)):
                        self.bench("sub", m, big, 1, d, pow2=True, prefetch=True, block_n=bn, num_warps=w)
                for d in range(1, 18):
                    self.bench("rows", m, big, 1, d)
                    self.bench("sub", m, big, 1, d, pow2=True)
                    self.bench("sub", m, big, 1, d, pow2=True, prefetch=True)
            yield f"pf-d {m}", pf_d
        for m in self.models:
            def pf_decode(m=m):
                for c, b in ((small, 1), (big, 1), (big, 16), (min(4096, big), 1), (min(4096, big), 16)):
                    self.bench("v1", m, c, b, 1)
                    self.bench("rows", m, c, b, 1)
                    for kw in ({}, dict(prefetch=True), dict(waves=2), dict(waves=2, prefetch=True)):
                        self.bench("sub", m, c, b, 1, **kw)
                self.bench("sub", m, small, 1, 1, waves=2, block_n=128, prefetch=True)
            yield f"pf-decode {m}", pf_decode

    def main_steps(self):
        big, small, r = self.big, self.small, self.r
        for m in self.models:  # 1. short-context decode, B = 1: merge variants x split counts x stages
            def short(m=m):
                self.bench("rows", m, small, 1, 1, waves=2)
                self.bench("rows", m, small, 1, 1)
                v2.sdpa(r, m, small, 1, 1)
                for kw in SHORT:
                    self.bench("sub", m, small, 1, 1, **kw)
                for w in (1, 2, 4):
                    for only in ("split", "merge"):
                        self.bench("sub", m, small, 1, 1, only=only, waves=w)
                for bn in (32, 128):
                    self.bench("sub", m, small, 1, 1, waves=2, block_n=bn)
            yield f"short {m}", short
        for m in self.models:  # 2. cost in d at the largest context, B = 1 (tile options at d = 7, 12)
            def dsweep(m=m):
                for d in (7, 12):
                    for kw in TUNE:
                        self.bench("sub", m, big, 1, d, **kw)
                for d in range(1, 18):
                    self.bench("sub", m, big, 1, d)
                for d in (1, 2, 4, 5, 8, 9, 16):
                    self.bench("rows", m, big, 1, d)
            yield f"d-sweep {m}", dsweep
        for m in self.models:  # 3. decode at every (ctx, B); windowed decode
            def grid(m=m):
                for c in self.ctxs:
                    for b in self.batches:
                        self.bench("rows", m, c, b, 1)
                        self.bench("sub", m, c, b, 1)
                        for w in (2, 8):
                            self.bench("sub", m, c, b, 1, waves=w)
                        self.bench("sub", m, c, b, 1, merge="pdl")
                for b in self.batches:
                    self.bench("rows", m, min(4096, big), b, 1)
                    for kw in ({}, dict(merge="pdl"), dict(waves=2), dict(merge="fused", waves=1)):
                        self.bench("sub", m, min(4096, big), b, 1, **kw)
            yield f"grid {m}", grid
        for m in self.models:  # 4. fp8 KV; verify d = 7 over (ctx, B)
            def rest(m=m):
                for d in (1, 2, 7):
                    self.bench("rows", m, big, 1, d, "fp8")
                    self.bench("sub", m, big, 1, d, "fp8")
                for c in self.ctxs:
                    for b in self.batches:
                        self.bench("rows", m, c, b, 7)
                        self.bench("sub", m, c, b, 7)
            yield f"rest {m}", rest


class CompileRun(v2.Run):
    """Runs every `worker`-th call of the plan once at a tiny size under the timed call's plan (no rows)."""

    def __init__(self, worker: int, workers: int):
        self.dev, self.pools, self.sets, self.best, self.smoke = "cuda", {}, {}, {}, False
        self.worker, self.workers, self.count = worker, workers, 0

    def row(self, base, samples, status="ok"):
        pass

    def time(self, base, fn, est_ms):
        fn()
        torch.cuda.synchronize()
        return 0.0


class CompilePlan(Plan):
    TINY = 192

    def bench(self, impl, model, n, b, d, kv="bf16", only=None, **kw):
        self.r.count += 1
        if self.r.count % self.r.workers != self.r.worker:
            return 0.0
        try:
            fn = call(self.r, impl, model, self.TINY * b * 2, min(n, self.TINY), b, d, kv, plan_kv=n, only=only, **kw)
            fn()
            torch.cuda.synchronize()
        except Exception as e:  # the timed step records the error
            print(f"compile {impl} {model} {n} {b} {d} {kw}: {type(e).__name__}", flush=True)
        return 0.0


def run_compile_plan(plan: Plan) -> None:
    """Every step of a compile plan (SDPA has nothing to compile)."""
    v2.sdpa = lambda *a, **k: None
    for _, step in plan.steps():
        step()


def _compile_worker(args):
    worker, workers, ctxs, batches, models, followup = args
    run_compile_plan(CompilePlan(CompileRun(worker, workers), ctxs, batches, models, followup))
    return worker


def precompile(ctxs, batches, models, workers: int, followup=False, worker_fn=_compile_worker) -> float:
    """`workers` spawned processes each compile their share of the plan (`worker_fn`: a module-level function of
    (worker, workers, ctxs, batches, models, followup)); seconds taken."""
    t = time.monotonic()
    args = [(w, workers, ctxs, batches, models, followup) for w in range(workers)]
    with mp.get_context("spawn").Pool(workers) as pool:
        list(pool.imap_unordered(worker_fn, args))
    return time.monotonic() - t


def check(r: Run, models, followup: bool = False):
    """GPU correctness of the sub kernel against fp64 torch: fresh random inputs, poisoned outputs, three
    requests (20000, 3000 and d + 2 keys), the merge variants, fp8 KV with scales (follow-up: L2 prefetch on
    power-of-two tiles)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from kernel_refs import ref_attention
    cases = [(d, "bf16", "kernel") for d in (1, 2, 5, 7, 9, 12, 13, 17)] + [(1, "bf16", "pdl"), (1, "bf16", "fused"),
             (7, "bf16", "fused"), (9, "bf16", "pdl"), (1, "fp8", "kernel"), (7, "fp8", "kernel")]
    extra = {}
    if followup:
        cases = [(d, kv, "kernel") for d in (1, 2, 5, 7, 9, 17) for kv in ("bf16", "fp8")]
        extra = dict(prefetch=True, pow2=True)
    if r.dev == "cpu":  # the interpreter: small sizes, no PDL, no prefetch
        cases = [c for c in cases if c[2] != "pdl" and c[0] in (1, 5, 9, 17)]
        extra = dict(pow2=True) if followup else {}
    for model in models:
        hq, hkv, hd = v2.SHAPES[model]
        for d, kv, merge in cases:
            n_kv = [20000, 3000, d + 2] if r.dev == "cuda" else [300, 40, d + 2]
            g = torch.Generator(device="cpu").manual_seed(abs(hash((model, d, kv, merge))) % 2**31)
            slots = sum(n_kv) + 11
            k = torch.randn(slots, hkv, hd, generator=g).to(r.dev)
            v = torch.randn(slots, hkv, hd, generator=g).to(r.dev)
            dt = torch.float8_e4m3fn if kv == "fp8" else torch.bfloat16
            k, v = k.to(dt), v.to(dt)
            scales = dict(k_scale=0.7, v_scale=1.3) if kv == "fp8" else {}
            ind = torch.randperm(slots, generator=g)[: sum(n_kv)].to(torch.int32).to(r.dev)
            ptr = torch.tensor([0, n_kv[0], n_kv[0] + n_kv[1], sum(n_kv)], dtype=torch.int32, device=r.dev)
            qo = torch.arange(4, dtype=torch.int32, device=r.dev) * d
            q = torch.randn(3 * d, hq, hd, generator=g).bfloat16().to(r.dev)
            ref = ref_attention(q, k.float() * scales.get("k_scale", 1.0), v.float() * scales.get("v_scale", 1.0),
                                ptr, ind, qo)
            errs = []
            for rep in range(2):  # twice: the fused merge's semaphores must re-arm
                out = torch.full_like(q, float("nan"))
                if d == 1:
                    decode_attention(q, k, v, ptr, ind, max(n_kv), out=out, kernel="sub", merge=merge, **scales,
                                     **extra)
                else:
                    verify_attention(q, k, v, ptr, ind, qo, d, max(n_kv), out=out, kernel="sub", merge=merge,
                                     **scales, **extra)
                errs.append(float((out.double() - ref).norm() / ref.norm()) if not torch.isnan(out).any()
                            else float("nan"))
            ok = all(e < 2e-2 for e in errs)
            cfg = ";".join([f"merge={merge}"] + [f"{a}={b}" for a, b in sorted(extra.items())])
            r.w.writerow(dict(kernel="check", impl="sub", model=model, ctx=max(n_kv), batch=3, d=d, kv=kv,
                              config=f"{cfg};rel_err={max(errs):.2e}", status="ok" if ok else "FAILED"))
            print(f"check {model} d={d} {kv} merge={merge}: rel err {errs} {'ok' if ok else 'FAILED'}", flush=True)
    r.f.flush()


def write_meta(path: Path, r, ctxs, batches) -> None:
    """The run's provenance sidecar (device, versions, command, grid)."""
    from wmtp.measure.provenance import collect
    meta = collect("cuda-graph-replay+l2flush(read)" if r.dev == "cuda" else "cpu-smoke",
                   dict(command="python3 " + " ".join(sys.argv), ctxs=ctxs, batches=batches))
    path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def write_ceilings(path: Path) -> None:
    """The harness's ceilings (copy, GEMM) of this run."""
    from wmtp.measure.harness import RowWriter, ceiling_rows
    cw = RowWriter(path)
    ceiling_rows(cw)
    cw.close()


def bench_parser(doc: str, deadline_s: float, workers: int) -> argparse.ArgumentParser:
    """The options every paged-attention bench takes (v3, v4)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="q35,q122,nem")
    ap.add_argument("--deadline-s", type=float, default=deadline_s)
    ap.add_argument("--workers", type=int, default=workers, help="pre-compile processes (0: none)")
    ap.add_argument("--compile-only", action="store_true", help="pre-compile, then exit")
    ap.add_argument("--only", default="", help="comma-separated step-label prefixes to run (default: all)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CPU, TRITON_INTERPRET=1): the script runs")
    return ap


def main(argv=None):
    ap = bench_parser(__doc__, 200.0, 12)
    ap.add_argument("--followup", action="store_true", help="the follow-up steps (L2 prefetch, v1 beside)")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    ctxs, batches = ([64, 256], [1, 2]) if a.smoke else ([65536, 262144, 1048576], [1, 4, 16])
    if a.smoke:
        v2.SHAPES.update(q35=(4, 2, 16), q122=(8, 2, 16), nem=(8, 2, 32))
    models = a.models.split(",")
    r = Run(a.out, a.deadline_s, a.smoke)
    write_meta(a.out / "paged_v3.meta.json", r, ctxs, batches)
    if r.dev == "cuda" and a.workers:
        print(f"pre-compile: {precompile(ctxs, batches, models, a.workers, a.followup):.1f}s", flush=True)
    if a.compile_only:
        return
    if r.dev == "cuda":
        write_ceilings(a.out / "ceilings.csv")
    check(r, models, a.followup)
    v2.run_steps(r, Plan(r, ctxs, batches, models, a.followup).steps(), a.only)


if __name__ == "__main__":
    main()
