"""Warp-specialized paged attention (`measure/kernels/paged_ws.py`, issue 18): is the verify at 16 x d rows still
decode + MMA once loads and MMAs run in different warps? Times the ws kernel's variants beside the shipped default
(`kernel=None`) and the rows kernel at one context and batch, d = 1..N, for the q35 / q122 / nem attention shapes.

Every variant is first checked against fp64 torch (three requests of 5000 / 700 / d + 2 keys, NaN-poisoned output,
twice; and once more with 64 forced splits, so that most splits are empty); a failing variant is not timed. Method
as the v2-v4 benches: the harness's CUDA-graph replay with the L2 flushed before each replay, random permuted
page-size-1 slots; every replay one row of OUT/paged_ws.csv.

    python3 measure/scripts/paged_ws_bench.py --out $OUT/r        # on a Hopper GPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from wmtp.measure.kernels.paged_attention import decode_attention, verify_attention
from wmtp.measure.kernels.paged_ws import ws_attention
from wmtp.measure.scripts import paged_v2_bench as v2

VARIANTS = {
    "ws": {},
    "ws2": dict(consumers=2),
    "ws2-bn32": dict(consumers=2, block_n=32),
    "ws-m64": dict(max_rows=64),
    "ws-w2": dict(waves=2),
    "ws-bn64": dict(block_n=64),
    "ws2-bn128": dict(consumers=2, block_n=128, c_regs=232, p_regs=56),
    "ws-bn128": dict(block_n=128),
    "ws2-p56": dict(consumers=2, c_regs=232, p_regs=56),
    "ws3": dict(max_rows=192),  # three consumer warpgroups for 129..192 rows below head dim 256 (else as ws)
    "ws-m128": dict(max_rows=128),  # row blocks of at most 128 rows (the kernel set v1+rows+ws)
    "ws-pdl": dict(pdl=True),  # the merge a programmatic dependent launch
    "ws-paired": dict(loop="paired"),  # a tile's S = Q K^T issued with the previous tile's P V (`paged_ws_loop`)
    "ws-pp": dict(loop="pingpong"),  # as paired, the consumer partitions taking turns to issue their MMAs
    "ws-qreg": dict(q_regs=True),  # Q in registers: S = Q K^T reads only K from shared memory (head dim <= 128)
    "ws-serial": dict(loop="serial"),  # the default order before h200-ws5 (two or three consumers)
    "ws-ov": dict(loop="overlap"),  # S, then the previous P V; the softmax runs while P V is in flight
    "ws-ovpp": dict(loop="overlap-pp"),  # as ws-ov, the consumer partitions issuing their MMA pairs in turn
    "ws-lazy": dict(loop="overlap", lazy=True),  # as ws-ov, rescaling only where a row's maximum moved (by > 2^8)
    "ws-fma": dict(exp2="fma"),  # the softmax's exponentials as a cubic on the FMA pipes, not the MUFU
    "ws-abl-sm": dict(ablate="softmax"),  # timing only (wrong output): no softmax, P = S
    "ws-abl-pv": dict(ablate="pv"),  # timing only (wrong output): no P V MMA
}
DECODE = {"ws": {}, "ws-w2": dict(waves=2), "ws-w4": dict(waves=4), "ws-bn64": dict(block_n=64),
          "ws-pdl": dict(pdl=True), "ws-bn32": dict(block_n=32), "ws-bn128": dict(block_n=128),
          "ws-qreg": dict(q_regs=True)}


class Run(v2.Run):
    def __init__(self, out: Path, deadline_s: float, tag: str):
        self.CSV = f"paged_ws_{tag}.csv"
        super().__init__(out, deadline_s, False)


def _inputs(dev, model, d, seed):
    hq, hkv, hd = v2.SHAPES[model]
    n_kv = [5000, 700, d + 2]
    g = torch.Generator(device="cpu").manual_seed(seed)
    slots = sum(n_kv) + 11
    k = torch.randn(slots, hkv, hd, generator=g).bfloat16().to(dev)
    v = torch.randn(slots, hkv, hd, generator=g).bfloat16().to(dev)
    ind = torch.randperm(slots, generator=g)[: sum(n_kv)].to(torch.int32).to(dev)
    ptr = torch.tensor([0, n_kv[0], n_kv[0] + n_kv[1], sum(n_kv)], dtype=torch.int32, device=dev)
    qo = torch.arange(4, dtype=torch.int32, device=dev) * d
    q = torch.randn(3 * d, hq, hd, generator=g).bfloat16().to(dev)
    return q, k, v, ptr, ind, qo


def check(r: Run, model: str, d: int, name: str, kw: dict) -> bool:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    from kernel_refs import ref_attention
    q, k, v, ptr, ind, qo = _inputs(r.dev, model, d, 1000 * d + len(model))
    ref = ref_attention(q, k.float(), v.float(), ptr, ind, qo)
    base = dict(impl=name, model=model, ctx=5000, batch=3, d=d, kv="bf16")
    return r.checked(base, ";".join(f"{a}={c}" for a, c in sorted(kw.items())), ref,
                     lambda out, **extra: ws_attention(q, k, v, ptr, ind, None if d == 1 else qo, d, 5000, out=out,
                                                       **kw, **extra), q)


def timed(r: Run, name: str, model: str, n: int, batch: int, d: int, kw: dict, ws: bool) -> float:
    hq, hkv, hd = v2.SHAPES[model]
    k, v = r.pool(model, n * batch + 16)
    ptr, ind = r.index(k.shape[0], n, batch)
    q = torch.randn(batch * d, hq, hd, device=r.dev, dtype=torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    qo = None if d == 1 else torch.arange(batch + 1, device=r.dev, dtype=torch.int32) * d
    if ws:
        call = lambda: ws_attention(q, k, v, ptr, ind, qo, d, n, out=out, **kw)  # noqa: E731
    elif d == 1:
        call = lambda: decode_attention(q, k, v, ptr, ind, n, out=out, **kw)  # noqa: E731
    else:
        call = lambda: verify_attention(q, k, v, ptr, ind, qo, d, n, out=out, **kw)  # noqa: E731
    nbytes = batch * n * hkv * hd * 2 * 2
    base = dict(kernel="decode" if d == 1 else "verify", impl=name, model=model, ctx=n, batch=batch, d=d, kv="bf16",
                config=";".join(f"{a}={b}" for a, b in sorted(kw.items())) or "default", bytes=nbytes)
    ms = r.time(base, call, nbytes / 3.5e9)
    print(f"{name:10s} {model:5s} n={n} B={batch} d={d:2d} {ms:.4f} ms", flush=True)
    return ms


def decode_phase(r: Run, models, names=None) -> int:
    """Decode (d = 1) where the rows kernel was short of its targets or nearly so: 64K and a 4096-key window at
    B = 1 beside contiguous torch SDPA, and 1M at B = 16; the `DECODE` variants among `names` (None: all)."""
    for n, batch in ((65536, 1), (4096, 1), (1 << 20, 16)):
        for m in models:
            if r.late():
                print("deadline reached", flush=True)
                return 0
            timed(r, "default", m, n, batch, 1, {}, False)
            for nm, kw in DECODE.items():
                if names is None or nm in names:
                    timed(r, nm, m, n, batch, 1, kw, True)
            if batch == 1:
                v2.sdpa(r, m, n, batch, 1)
    return 0


def parts_phase(r: Run, models, ctxs) -> int:
    """Where a short decode's time goes (B = 1): the ws decode whole, its split kernel alone (the merge skipped),
    the merge alone (on the plan's partials), beside SDPA."""
    from wmtp.kernel_plan import ws_plan
    from wmtp.measure.kernels import paged_ws
    from wmtp.measure.kernels.paged_merge import merge_splits
    for n in ctxs:
        for m in models:
            if r.late():
                print("deadline reached", flush=True)
                return 0
            hq, hkv, hd = v2.SHAPES[m]
            timed(r, "ws", m, n, 1, 1, {}, True)
            timed(r, "ws-pdl", m, n, 1, 1, dict(pdl=True), True)
            keep = paged_ws.merge_splits
            paged_ws.merge_splits = lambda mid_o, mid_l, out, pdl=False: out
            try:
                timed(r, "ws-split-only", m, n, 1, 1, {}, True)
            finally:
                paged_ws.merge_splits = keep
            plan = ws_plan(1, hkv, hq // hkv, 1, hd, n, torch.cuda.get_device_properties(r.dev).multi_processor_count)
            mid_o = torch.randn(1, hq, plan.splits, hd, device=r.dev)
            mid_l = torch.randn(1, hq, plan.splits, device=r.dev)
            out = torch.empty(1, hq, hd, device=r.dev, dtype=torch.bfloat16)
            base = dict(kernel="decode", impl="merge-only", model=m, ctx=n, batch=1, d=1, kv="bf16",
                        config=f"splits={plan.splits}", bytes=mid_o.numel() * 4)
            ms = r.time(base, lambda: merge_splits(mid_o, mid_l, out), 1e-3)
            print(f"merge-only {m} n={n} splits={plan.splits} {ms:.4f} ms", flush=True)
            v2.sdpa(r, m, n, 1, 1)
    return 0


def order_phase(r: Run, cases) -> int:
    """The same ws launch through `verify_attention` (the default path) and called directly, timed alternately
    (direct, default, default, direct, each a graph of its own), to tell a path's cost from a position's."""
    for m, d in cases:
        for name, ws in (("ws", True), ("default", False), ("default", False), ("ws", True)):
            if r.late():
                print("deadline reached", flush=True)
                return 0
            timed(r, name, m, 1 << 20, 1, d, {}, ws)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--models", default="q122,nem,q35")
    p.add_argument("--ds", default=",".join(str(d) for d in range(1, 17)))
    p.add_argument("--ctxs", default=str(1 << 20))
    p.add_argument("--batches", default="1")
    p.add_argument("--variants", default=None, help="variants by name (default: every one of the phase)")
    p.add_argument("--deadline-s", type=float, default=300.0)
    p.add_argument("--phase", choices=("check", "time", "both", "decode", "parts", "order"), default="both",
                   help="check: correctness only (run one per model in parallel to compile); time: time every variant "
                        "(the check rows of the same OUT say which are valid); both: time the variants that pass; "
                        "decode: short decodes beside SDPA; parts: a short decode split into its split kernel and merge; "
                        "order: the default path and the direct call alternately at 1M, B = 1 (--models x --ds)")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    # the d values and variants are in the name: two calls into one OUT that differed only in them wrote one file,
    # the second replacing the first (measure/results/h200-ws5 run 6 lost its decode rows so)
    tag = (f"{a.phase}_{a.models.replace(',', '-')}_{a.ctxs.replace(',', '-')}_{a.batches.replace(',', '-')}"
           f"_d{a.ds.replace(',', '-')}" + (f"_{a.variants.replace(',', '+')}" if a.variants else ""))
    r = Run(a.out, a.deadline_s, tag)
    models, ds = a.models.split(","), [int(x) for x in a.ds.split(",")]
    names = a.variants.split(",") if a.variants else list(VARIANTS)
    meta = dict(started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), torch=torch.__version__,
                device=torch.cuda.get_device_name(), argv=sys.argv[1:])
    (a.out / f"paged_ws_{tag}.meta.json").write_text(json.dumps(meta, indent=1))
    if a.phase == "decode":
        return decode_phase(r, models, a.variants.split(",") if a.variants else None)
    if a.phase == "order":
        return order_phase(r, [(m, d) for m in models for d in ds])
    if a.phase == "parts":
        return parts_phase(r, models, [int(x) for x in a.ctxs.split(",")])
    if a.phase == "time":
        good = {(m, d, nm) for m in models for d in ds for nm in names}
    else:
        good = {(m, d, nm) for m in models for d in ds for nm in names if check(r, m, d, nm, VARIANTS[nm])}
    if a.phase == "check":
        return 0
    for n in [int(x) for x in a.ctxs.split(",")]:
        for batch in [int(x) for x in a.batches.split(",")]:
            for m in models:
                for d in ds:
                    if r.late():
                        print("deadline reached", flush=True)
                        return 0
                    timed(r, "default", m, n, batch, d, {}, False)
                    timed(r, "rows", m, n, batch, d, dict(kernel="rows"), False)
                    for nm in names:
                        if (m, d, nm) in good:
                            timed(r, nm, m, n, batch, d, VARIANTS[nm], True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
