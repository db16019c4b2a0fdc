"""Paged attention round 4 (issue 18): the rows kernel's tile options for verify d = 1..10 at 1M, B = 1 (block_n,
warps, stages, 64- vs 128-row tiles), the sub kernel's short-context decode options against torch SDPA, B = 16
decode at 1M (bf16 and fp8 KV) against the run's copy and read ceilings, and what the compiler made of each
kernel that ran (cp.async / LDGSTS, shared memory, registers, blocks per SM: OUT/kernels.csv).

Every timed config is first checked against an fp64 torch reference (three requests of 5000 / 700 / d + 2 keys,
NaN-poisoned output, the timed call's plan and compiled kernel); a failing config is not timed. Method as
`paged_v3_bench.py`: kernels pre-compiled by worker processes, the harness's CUDA-graph replay with the L2
flushed before each replay, random permuted page-size-1 slots; every replay one row of OUT/paged_v4.csv.

    python3 measure/scripts/paged_v4_bench.py --out $OUT/r            # on the GPU
    TRITON_INTERPRET=1 python3 measure/scripts/paged_v4_bench.py --smoke --out /tmp/x   # CPU, tiny sizes
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from wmtp.measure.kernels.paged_attention import decode_attention, verify_attention
from wmtp.measure.scripts import paged_v2_bench as v2
from wmtp.measure.scripts import paged_v3_bench as v3
from wmtp.measure.scripts.paged_v4_compiled import kernel_rows

SMEM_MAX = 232448  # bytes of shared memory one block may use on sm_90 (227 KiB)


def _pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def fits(block_n: int, head_dim: int, stages: int, elem: int = 2) -> bool:
    """K and V tiles of every pipeline stage in shared memory (the 3-stage 128-row tile of head dim 256 compiled
    to 196,864 bytes = 3 x 64 x 256 x 2 x 2 + 256)."""
    return stages * block_n * head_dim * 2 * elem + 1024 <= SMEM_MAX


def verify_configs(model: str, d: int) -> list[dict]:
    """Rows-kernel options at (model, d): 64- and 128-row tiles (one set where the rows fit 64), block_n 32 /
    64 / 128, 4 / 8 warps, 2 / 3 / 4 stages; not those over shared memory, nor 4 warps on a 128-row tile of head
    dim 256 (its fp32 accumulator alone is 256 registers a thread)."""
    hq, hkv, hd = v2.SHAPES[model]
    rows = hq // hkv * d
    out = []
    for mr in (64, 128):
        if mr == 64 and rows <= 64:
            continue
        bm = max(16, _pow2(min(rows, mr)))
        for bn in (32, 64, 128):
            for nw in (4, 8):
                if bm >= 128 and hd >= 256 and nw == 4:
                    continue
                out += [dict(max_rows=mr, block_n=bn, num_warps=nw, num_stages=ns) for ns in (2, 3, 4)
                        if fits(bn, hd, ns)]
    return out


def short_configs(model: str) -> list[dict]:
    """Sub-kernel decode options at the short context: nem the full grid, q35 / q122 a smaller one."""
    hd = v2.SHAPES[model][2]
    if model == "nem":
        grid = [(bn, ns, nw, w) for bn in (64, 128, 256) for ns in (2, 3, 4, 5) for nw in (4, 8) for w in (1, 2, 3, 4)]
    else:
        grid = [(bn, ns, 4, w) for bn in (32, 64, 128) for ns in (2, 3, 4) for w in (2, 3, 4)]
    return [dict(block_n=bn, num_stages=ns, num_warps=nw, waves=w, merge=m) for bn, ns, nw, w in grid
            if fits(bn, hd, ns) for m in ("kernel", "pdl")]


def old_small_tile(model: str, d: int) -> dict:
    """The rows kernel's tile options for <= 32 rows before this round (decode's: h200-kernels-v2)."""
    hd = v2.SHAPES[model][2]
    rows = v2.SHAPES[model][0] // v2.SHAPES[model][1] * d
    return dict(block_n=64 if hd < 256 else 32, num_warps=4, num_stages=2 if rows <= 16 else 3)


class Run(v3.Run):
    """v3's run writing OUT/paged_v4.csv, with fewer replays per timing."""

    CSV = "paged_v4.csv"
    reps_cap, reps_ms = 20, 40.0

    def __init__(self, out: Path, deadline_s: float, smoke: bool):
        super().__init__(out, deadline_s, smoke)
        self.refs: dict = {}


def _check_inputs(r: Run, model: str, d: int, kv: str):
    """Fresh random inputs of three requests and their fp64 reference (cached per (model, d, kv))."""
    key = (model, d, kv)
    if key in r.refs:
        return r.refs[key]
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from kernel_refs import ref_attention
    hq, hkv, hd = v2.SHAPES[model]
    n_kv = [5000, 700, d + 2] if r.dev == "cuda" else [300, 40, d + 2]
    g = torch.Generator(device="cpu").manual_seed(1000 * d + len(model) + (7 if kv == "fp8" else 0))
    slots = sum(n_kv) + 11
    dt = torch.float8_e4m3fn if kv == "fp8" else torch.bfloat16
    k = torch.randn(slots, hkv, hd, generator=g).to(dt).to(r.dev)
    v = torch.randn(slots, hkv, hd, generator=g).to(dt).to(r.dev)
    scales = dict(k_scale=0.7, v_scale=1.3) if kv == "fp8" else {}
    ind = torch.randperm(slots, generator=g)[: sum(n_kv)].to(torch.int32).to(r.dev)
    ptr = torch.tensor([0, n_kv[0], n_kv[0] + n_kv[1], sum(n_kv)], dtype=torch.int32, device=r.dev)
    qo = torch.arange(4, dtype=torch.int32, device=r.dev) * d
    q = torch.randn(3 * d, hq, hd, generator=g).bfloat16().to(r.dev)
    ref = ref_attention(q, k.float() * scales.get("k_scale", 1.0), v.float() * scales.get("v_scale", 1.0), ptr, ind,
                        qo)
    if len(r.refs) > 8:
        r.refs.pop(next(iter(r.refs)))
    r.refs[key] = (q, k, v, ptr, ind, qo, scales, ref)
    return r.refs[key]


def check(r: Run, impl, model, d, kv, plan_kv, **kw) -> bool:
    """The call under the timed call's plan (`plan_kv` keys planned, fewer present: empty splits too) against
    fp64 torch, twice; one `check` row."""
    q, k, v, ptr, ind, qo, scales, ref = _check_inputs(r, model, d, kv)
    errs = []
    try:
        for _ in range(2):
            out = torch.full_like(q, float("nan"))
            if d == 1:
                decode_attention(q, k, v, ptr, ind, plan_kv, out=out, kernel=impl, **scales, **kw)
            else:
                verify_attention(q, k, v, ptr, ind, qo, d, plan_kv, out=out, kernel=impl, **scales, **kw)
            errs.append(float((out.double() - ref).norm() / ref.norm()) if not torch.isnan(out).any()
                        else float("nan"))
        ok, note = all(e < 2e-2 for e in errs), f"rel_err={max(errs):.2e}"
    except Exception as e:
        ok, note = False, f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    cfg = ";".join([f"{a}={c}" for a, c in sorted(kw.items())] + [note])
    r.w.writerow(dict(kernel="check", impl=impl, model=model, ctx=plan_kv, batch=3, d=d, kv=kv, config=cfg,
                      status="ok" if ok else "FAILED"))
    if not ok:
        print(f"check FAILED {impl} {model} d={d} {kv} {cfg}", flush=True)
    return ok


class Plan(v3.Plan):
    """The timed calls in priority order, each checked first."""

    def bench(self, impl, model, n, b, d, kv="bf16", only=None, **kw):
        if not check(self.r, impl, model, d, kv, n, **kw):
            return float("inf")
        hq, hkv, hd = v2.SHAPES[model]
        nbytes = b * n * hkv * hd * 2 * (1 if kv == "fp8" else 2)
        cfg = ";".join(f"{a}={c}" for a, c in sorted(kw.items())) or "default"
        base = dict(kernel="decode" if d == 1 else "verify", impl=impl, model=model, ctx=n, batch=b, d=d, kv=kv,
                    config=cfg, bytes=nbytes)
        try:  # one pool of max(ctx) x max(B) slots per head shape and KV dtype
            fn = v3.call(self.r, impl, model, self.slots, n, b, d, kv, **kw)
        except Exception as e:
            self.r.row(base, None, f"error: {type(e).__name__}: {str(e)[:160]}")
            return float("inf")
        return self.r.time(base, fn, nbytes / 3.5e9)

    def steps(self):
        if self.followup:
            yield from (self.round2_steps() if self.followup == 2 else self.round3_steps())
            return
        big, small, win = self.big, self.small, min(4096, self.big)
        for m in self.models:  # B = 16 at 1M (bf16, fp8), decode 1M and windowed decode at B = 1 (defaults)
            def batch16(m=m):
                for kv in ("bf16", "fp8"):
                    self.bench("rows", m, big, max(self.batches), 1, kv)
                for impl in ("v1", "rows", "sub"):
                    self.bench(impl, m, big, 1, 1)
                    self.bench(impl, m, win, 1, 1)
            yield f"b16 {m}", batch16
        for m in ("nem", "q35", "q122"):  # decode at the short context, B = 1: sub options and SDPA (nem first)
            if m not in self.models:
                continue

            def short(m=m):
                v2.sdpa(self.r, m, small, 1, 1)
                self.bench("rows", m, small, 1, 1)
                self.bench("sub", m, small, 1, 1)
                for kw in short_configs(m):
                    self.bench("sub", m, small, 1, 1, **kw)
                v2.sdpa(self.r, m, small, 1, 1)
            yield f"short {m}", short
            if m == "nem":
                yield from self.verify_steps()
        if "nem" not in self.models:
            yield from self.verify_steps()

    def round2_steps(self):
        """After the first run: fp8 KV with fp16 dots (`fp8_dot="f16"`) against bf16 dots; the new verify tiles of
        <= 32 rows (`rows_tiling`) against the old ones at B = 1 and 16; decode and windowed decode beside them."""
        big, win, bb = self.big, min(4096, self.big), max(self.batches)
        for m in self.models:
            def fp8(m=m):
                for b, d in ((bb, 1), (1, 1), (1, 2), (1, 7)):
                    self.bench("rows", m, big, b, d, "fp8")
                    self.bench("rows", m, big, b, d, "fp8", fp8_dot="f16")
            yield f"fp8 {m}", fp8
        for m in self.models:
            def small_tiles(m=m):
                hq, hkv, hd = v2.SHAPES[m]
                for d in [d for d in (2, 3, 4) if hq // hkv * d <= 32]:
                    for b in (bb, 1):
                        self.bench("rows", m, big, b, d)
                        self.bench("rows", m, big, b, d, **old_small_tile(m, d))
                for c, b in ((big, 1), (big, bb), (win, 1), (win, bb)):
                    self.bench("rows", m, c, b, 1)
                self.bench("v1", m, win, 1, 1)
                for w in (1, 2, 8):  # verify d = 7 (64- or 128-row tiles, one program per SM): split count
                    self.bench("rows", m, big, 1, 7, waves=w)
            yield f"tiles {m}", small_tiles

    def round3_steps(self):
        """After the second run: fp8 KV decode at 1M over tile options, split waves and dot types (B = 16 and 1);
        the split count of verify tiles of >= 64 rows at B = 1 and 16."""
        big, bb = self.big, max(self.batches)
        for m in self.models:
            def fp8(m=m):
                hd = v2.SHAPES[m][2]
                for b in (bb, 1):
                    self.bench("rows", m, big, b, 1, "fp8")
                    for bn, nw, ns, w, dot in [(bn, nw, ns, w, dot) for bn in (32, 64, 128) for nw in (4, 8)
                                               for ns in (2, 3) for w in (3, 4) for dot in ("bf16", "f16")
                                               if fits(bn, hd, ns, 1)]:
                        self.bench("rows", m, big, b, 1, "fp8", block_n=bn, num_warps=nw, num_stages=ns, waves=w,
                                   fp8_dot=dot)
            yield f"fp8 {m}", fp8
        for m in self.models:
            def waves(m=m):
                for b in (1, bb):
                    for d in (5, 7):
                        self.bench("rows", m, big, b, d)
                        for w in (1, 2):
                            self.bench("rows", m, big, b, d, waves=w)
            yield f"waves {m}", waves

    def verify_steps(self):
        for m in self.models:  # verify d = 1..10 at 1M, B = 1: v1 and rows defaults, then the rows options
            def dsweep(m=m):
                for d in range(1, 11):
                    self.bench("v1", m, self.big, 1, d)
                    for kw in [{}] + verify_configs(m, d):
                        self.bench("rows", m, self.big, 1, d, **kw)
            yield f"verify {m}", dsweep


class CompilePlan(Plan):
    """This round's plan, compiled at tiny sizes (v3's compile bench)."""
    TINY = v3.CompilePlan.TINY
    bench = v3.CompilePlan.bench


def _compile_worker(args):
    worker, workers, ctxs, batches, models, rnd = args
    v3.run_compile_plan(CompilePlan(v3.CompileRun(worker, workers), ctxs, batches, models, rnd))
    return worker


def precompile(ctxs, batches, models, workers: int, rnd: int = 0) -> float:
    return v3.precompile(ctxs, batches, models, workers, rnd, _compile_worker)


def read_ceiling(r: Run):
    """A read-only ceiling beside the harness's copy: sum of a 2 GiB bf16 tensor (bytes read), graph replay,
    L2 not flushed (2 GiB does not fit it)."""
    from wmtp.measure import timing
    x = [torch.randn(2 * 1024**3 // 2, device="cuda", dtype=torch.bfloat16)]
    base = dict(kernel="read", impl="torch_sum", model="", ctx=0, batch=0, d=0, kv="bf16", config="2GiB sum",
                bytes=2 * 1024**3)
    try:
        t = timing.time_calls([lambda: x[0].sum(dtype=torch.float32)], reps=20, flush=False)
        r.row(base, t.samples_ms)
    except Exception as e:
        r.row(base, None, f"error: {type(e).__name__}")
    x.clear()
    torch.cuda.empty_cache()


def main(argv=None):
    ap = v3.bench_parser(__doc__, 150.0, 14)
    ap.add_argument("--round", type=int, default=1, choices=(1, 2, 3),
                    help="2: fp8 dots, small verify tiles; 3: fp8 decode options, verify split counts")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    ctxs, batches = ([64, 256], [1, 2]) if a.smoke else ([65536, 1048576], [1, 16])
    if a.smoke:
        v2.SHAPES.update(q35=(4, 2, 16), q122=(8, 2, 16), nem=(8, 2, 32))
    models, rnd = a.models.split(","), 0 if a.round == 1 else a.round
    r = Run(a.out, a.deadline_s, a.smoke)
    v3.write_meta(a.out / "paged_v4.meta.json", r, ctxs, batches)
    if r.dev == "cuda" and a.workers:
        print(f"pre-compile: {precompile(ctxs, batches, models, a.workers, rnd):.1f}s", flush=True)
    if a.compile_only:
        return
    if r.dev == "cuda":
        v3.write_ceilings(a.out / "ceilings.csv")
        read_ceiling(r)
    v2.run_steps(r, Plan(r, ctxs, batches, models, rnd).steps(), a.only)
    if r.dev == "cuda":
        kernel_rows(a.out / "kernels.csv")


if __name__ == "__main__":
    main()
