"""fp8 K/V in the warp-specialized kernel (issue 18): `ws_attention` on e4m3 pools (a converter partition turns each
fp8 tile into fp16 for the MMAs) beside the rows kernel's fp8 path (`kernel="rows"`, the one fp8 K/V ran before) and
the bf16 ws kernel on the same shapes, at one context: decode at B = 1 and 16, verify d = 2..9 at B = 1.

Every variant is first checked against fp64 torch on the dequantized fp8 values (three requests of 5000 / 700 /
d + 2 keys, per-tensor K and V scales, NaN-poisoned output; twice with the plan's splits, once with 64 forced
splits); a failing variant is not timed. Method as the v2-v4 benches: CUDA-graph replay with the L2 flushed before
each replay, random permuted page-size-1 slots; every replay one row of OUT/ws_fp8.csv, the copy ceiling of the same
run in OUT/ceilings.csv.

    python3 measure/scripts/ws_fp8_bench.py --out $OUT/r        # on a Hopper GPU
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from wmtp.measure.kernels.paged_attention import decode_attention, verify_attention
from wmtp.measure.kernels.paged_ws import ws_attention
from wmtp.measure.scripts import paged_v2_bench as v2

E4M3 = torch.float8_e4m3fn
SCALES = (0.02, 0.03)  # K and V scales of the checks: values of about N(0, 1) / scale fill e4m3's range


class Run(v2.Run):
    CSV = "ws_fp8.csv"


def _call(impl: str, q, k, v, ptr, ind, qo, d: int, n: int, out, scales=(1.0, 1.0), **tune):
    """One launch of `impl`: ws8 (the ws kernel, fp8 K/V), rows8 (the rows kernel, fp8), ws16 (the ws kernel, bf16);
    `-bnN`: N-key tiles; qo None: a decode."""
    ks, vs = scales
    impl, *opts = impl.split("-")  # ws8-bn64: 64-key tiles (run 2's -lN, a page-table lookahead, was removed)
    for o in opts:
        tune = {**tune, "block_n": int(o.removeprefix("bn"))}
    if impl == "rows8":
        if qo is None:
            return decode_attention(q, k, v, ptr, ind, n, out=out, kernel="rows", k_scale=ks, v_scale=vs, **tune)
        return verify_attention(q, k, v, ptr, ind, qo, d, n, out=out, kernel="rows", k_scale=ks, v_scale=vs, **tune)
    return ws_attention(q, k, v, ptr, ind, qo, d, n, out=out, k_scale=ks, v_scale=vs, **tune)


def check(r: Run, model: str, d: int, impl: str) -> bool:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from kernel_refs import ref_attention
    hq, hkv, hd = v2.SHAPES[model]
    g = torch.Generator(device="cpu").manual_seed(97 * d + len(model))
    n_kv = [5000, 700, d + 2]
    slots = sum(n_kv) + 11
    k8 = (torch.randn(slots, hkv, hd, generator=g) / SCALES[0]).to(E4M3).to(r.dev)
    v8 = (torch.randn(slots, hkv, hd, generator=g) / SCALES[1]).to(E4M3).to(r.dev)
    ind = torch.randperm(slots, generator=g)[: sum(n_kv)].to(torch.int32).to(r.dev)
    ptr = torch.tensor([0, n_kv[0], n_kv[0] + n_kv[1], sum(n_kv)], dtype=torch.int32, device=r.dev)
    qo = torch.arange(4, dtype=torch.int32, device=r.dev) * d
    q = torch.randn(3 * d, hq, hd, generator=g).bfloat16().to(r.dev)
    ref = ref_attention(q, k8.double() * SCALES[0], v8.double() * SCALES[1], ptr, ind, qo)  # decode: qo = 0..3
    base = dict(impl=impl, model=model, ctx=5000, batch=3, d=d, kv="fp8")
    return r.checked(base, "", ref, lambda out, **extra: _call(impl, q, k8, v8, ptr, ind, None if d == 1 else qo, d,
                                                                 5000, out, SCALES, **extra), q)


def timed(r: Run, impl: str, model: str, n: int, batch: int, d: int) -> float:
    hq, hkv, hd = v2.SHAPES[model]
    kv = "bf16" if impl.startswith("ws16") else "fp8"
    k, v = r.pool(model, n * batch + 16, kv)
    ptr, ind = r.index(k.shape[0], n, batch)
    q = torch.randn(batch * d, hq, hd, device=r.dev, dtype=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    qo = None if d == 1 else torch.arange(batch + 1, device=r.dev, dtype=torch.int32) * d
    nbytes = batch * n * hkv * hd * 2 * k.element_size()
    base = dict(kernel="decode" if d == 1 else "verify", impl=impl, model=model, ctx=n, batch=batch, d=d, kv=kv,
                config=";".join(impl.split("-")[1:]) or "default", bytes=nbytes)
    ms = r.time(base, lambda: _call(impl, q, k, v, ptr, ind, qo, d, n, out), nbytes / 3.5e9)
    print(f"{impl:6s} {model:5s} n={n} B={batch} d={d:2d} {ms:.4f} ms", flush=True)
    return ms


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="q35,q122,nem")
    ap.add_argument("--ctx", type=int, default=1 << 20)
    ap.add_argument("--ds", default="1,2,3,4,5,6,7,8,9")
    ap.add_argument("--impls", default="ws8,ws8-bn32,rows8,ws16")
    ap.add_argument("--batches", default="1", help="batches of the verifies (d in --ds but 1)")
    ap.add_argument("--decode-batch", type=int, default=16, help="batch of the decodes timed first (0: none)")
    ap.add_argument("--deadline-s", type=float, default=400.0)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    r = Run(a.out, a.deadline_s, False)
    from wmtp.measure.scripts.paged_v3_bench import write_ceilings

    write_ceilings(a.out / "ceilings.csv")
    models, ds, impls = a.models.split(","), [int(x) for x in a.ds.split(",")], a.impls.split(",")
    good = {(m, d, i) for m in models for d in ds for i in impls if i.startswith("ws16") or check(r, m, d, i)}
    plan = ([(a.decode_batch, [1])] if a.decode_batch else []) + [(int(b), ds) for b in a.batches.split(",")]
    for batch, dd in plan:
        for d in dd:
            for m in models:
                for i in impls:
                    if r.late():
                        print("deadline reached", flush=True)
                        r.f.close()
                        return 0
                    if (m, d, i) in good:
                        timed(r, i, m, a.ctx, batch, d)
    r.f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
