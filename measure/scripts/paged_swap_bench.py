"""Swap-AB verify kernel (`measure/kernels/paged_swap.py`) against the default and packed-rows verify at 1M, B = 1,
d = 1..10, for the q35 / q122 / nem attention shapes (issue 18's verify cost in d), with a GPU correctness check
of every timed swap configuration against an fp64 torch reference first.

Method as `paged_v2_bench.py`: `wmtp.measure.timing.time_calls` (CUDA-graph replay, the L2 flushed by a 256 MiB read
before each replay, CUDA events), random permuted page-size-1 slots. Writes OUT/paged_swap.csv (one row per replay)
and prints a table of medians and ratios to the decode of the same run.

    python3 measure/scripts/paged_swap_bench.py --out $OUT/swap         # on the GPU
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import torch

from wmtp.measure import timing
from wmtp.measure.kernels import paged_attention as pa
from wmtp.measure.kernels.paged_attention import LOG2E, decode_attention, verify_attention
from wmtp.measure.kernels.paged_swap import swap_pieces, swap_split

SHAPES = {"q35": (16, 2, 256), "q122": (32, 2, 256), "nem": (32, 2, 128)}  # q heads, KV heads, head dim
VARIANTS = {  # name -> launch options; "one": the rows in one power-of-two piece (the rows kernel's padding)
    "a": dict(block_n=64, num_warps=4, num_stages=3, vt=False), "b": dict(block_n=64, num_warps=4, num_stages=3, vt=True),
    "c": dict(block_n=64, num_warps=8, num_stages=3, vt=True), "d": dict(block_n=32, num_warps=4, num_stages=3, vt=True),
    "e": dict(block_n=64, num_warps=4, num_stages=3, vt=True, one=True)}
COLS = ["impl", "model", "ctx", "d", "config", "pieces", "splits", "rep", "time_ms", "status"]


def splits_for(hkv: int, ctx: int, sm: int, waves: int = 4, block_n: int = 64) -> int:
    return max(1, min(waves * sm // hkv, ctx // (4 * block_n)))


def pieces_for(rows: int, cfg: dict) -> tuple[int, ...]:
    return (max(16, 1 << (rows - 1).bit_length()),) if cfg.get("one") else swap_pieces(rows)


def swap_call(q, k, v, qo, ptr, ind, out, pieces, splits, cfg):
    total_q, hq, hd = q.shape
    cfg = {a: b for a, b in cfg.items() if a != "one"}
    mid_o = torch.empty((total_q, hq, splits, hd), dtype=torch.float32, device=q.device)
    mid_l = torch.empty((total_q, hq, splits), dtype=torch.float32, device=q.device)
    bd = min(hd, 64)

    def fn():
        swap_split(q, k, v, qo, ptr, ind, mid_o, mid_l, pieces=pieces, splits=splits, qk_scale=hd ** -0.5 * LOG2E,
                   v_scale=1.0, upcast=False, **cfg)
        pa._merge_kernel[(total_q, hq, hd // bd)](
            mid_o, mid_l, out, splits, mid_o.stride(0), mid_o.stride(1), mid_o.stride(2), mid_l.stride(0),
            mid_l.stride(1), out.stride(0), out.stride(1), BLOCK_D=bd, SPLIT_BLOCK=32, num_warps=4)
        return out
    return fn


def reference(q, k, v, ind, d):
    """fp64 attention of d causal query rows over the gathered keys (one request)."""
    hq, hkv, hd = q.shape[1], k.shape[1], q.shape[2]
    kk, vv = k[ind.long()].double(), v[ind.long()].double()
    n = kk.shape[0]
    qq = q.double().view(d, hkv, hq // hkv, hd)
    s = torch.einsum("qhgd,nhd->qhgn", qq, kk) / math.sqrt(hd)
    lim = n - d + torch.arange(d, device=q.device)
    s = s.masked_fill(torch.arange(n, device=q.device)[None, None, None, :] > lim[:, None, None, None], float("-inf"))
    return torch.einsum("qhgn,nhd->qhgd", torch.softmax(s, -1), vv).reshape(d, hq, hd)


def check(sm: int, rows: list, variants) -> int:
    bad = 0
    for model, (hq, hkv, hd) in SHAPES.items():
        for d in (2, 5, 7, 9, 10):
            n = 20000
            k = torch.randn(n + 77, hkv, hd, device="cuda", dtype=torch.bfloat16)
            v = torch.randn_like(k)
            ind = torch.randperm(n + 77, device="cuda")[:n].to(torch.int32)
            ptr = torch.tensor([0, n], device="cuda", dtype=torch.int32)
            qo = torch.tensor([0, d], device="cuda", dtype=torch.int32)
            q = torch.randn(d, hq, hd, device="cuda", dtype=torch.bfloat16)
            ref = reference(q, k, v, ind, d)
            for cfg in (VARIANTS[x] for x in variants):
                out = torch.full_like(q, float("nan"))
                try:
                    swap_call(q, k, v, qo, ptr, ind, out, pieces_for(hq // hkv * d, cfg), splits_for(hkv, n, sm), cfg)()
                    torch.cuda.synchronize()
                    err = float((out.double() - ref).norm() / ref.norm())
                    ok = err < 2e-2 and not torch.isnan(out).any()
                except Exception as e:  # a config that does not compile or run is reported, not fatal
                    err, ok = float("nan"), False
                    print(f"check {model} d={d} {cfg}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
                bad += not ok
                rows.append(dict(impl="check-swap", model=model, ctx=n, d=d, config=str(cfg), status=f"err={err:.2e}"
                                 + ("" if ok else " FAIL")))
    return bad


def bench(out_dir: Path, ctx: int, deadline: float, variants, check_only: bool) -> None:
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    rows: list = []
    bad = check(sm, rows, variants)
    print(f"checks {','.join(variants)}: {len(rows)} run, {bad} failed", flush=True)
    if check_only:
        for r in rows:
            print(r["model"], r["d"], r["config"], r["status"])
        return
    t0 = time.monotonic()
    f = open(out_dir / f"paged_swap_{'_'.join(variants)}.csv", "w", newline="")
    w = csv.DictWriter(f, fieldnames=COLS)
    w.writeheader()
    for r in rows:
        w.writerow(r)
    table = []
    for model, (hq, hkv, hd) in SHAPES.items():
        k = torch.randn(ctx + 1024, hkv, hd, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        ind = torch.randperm(ctx + 1024, device="cuda")[:ctx].to(torch.int32)
        ptr = torch.tensor([0, ctx], device="cuda", dtype=torch.int32)
        for d in range(1, 11):
            if time.monotonic() - t0 > deadline:
                print("deadline reached", flush=True)
                break
            q = torch.randn(d, hq, hd, device="cuda", dtype=torch.bfloat16)
            out = torch.empty_like(q)
            qo = torch.tensor([0, d], device="cuda", dtype=torch.int32)
            calls = {}
            if d == 1:
                calls["default"] = lambda: decode_attention(q, k, v, ptr, ind, ctx, out=out)
                calls["rows"] = lambda: decode_attention(q, k, v, ptr, ind, ctx, out=out, kernel="rows")
            else:
                calls["default"] = lambda: verify_attention(q, k, v, ptr, ind, qo, d, ctx, out=out)
                calls["rows"] = lambda: verify_attention(q, k, v, ptr, ind, qo, d, ctx, out=out, kernel="rows")
            splits = splits_for(hkv, ctx, sm)
            for name in variants:
                calls["swap-" + name] = swap_call(q, k, v, qo, ptr, ind, out, pieces_for(hq // hkv * d, VARIANTS[name]),
                                                  splits, VARIANTS[name])
            res = {}
            for name, fn in calls.items():
                cfg = str(VARIANTS[name[5:]]) if name.startswith("swap") else ""
                pieces = pieces_for(hq // hkv * d, VARIANTS[name[5:]]) if name.startswith("swap") else ""
                try:
                    t = timing.time_calls([fn], reps=20)
                    for j, s in enumerate(t.samples_ms):
                        w.writerow(dict(impl=name, model=model, ctx=ctx, d=d, config=cfg, pieces=str(pieces),
                                        splits=splits, rep=j, time_ms=s, status=t.timer))
                    res[name] = sorted(t.samples_ms)[len(t.samples_ms) // 2]
                except Exception as e:
                    w.writerow(dict(impl=name, model=model, ctx=ctx, d=d, config=cfg, status=f"error: {e}"[:200]))
                    res[name] = float("nan")
            f.flush()
            table.append((model, d, res))
            print(model, d, " ".join(f"{a}={b:.4f}" for a, b in res.items()), flush=True)
        k = v = None  # free the pools before the next shape
        torch.cuda.empty_cache()
    f.close()
    dec = {m: res["default"] for m, d, res in table if d == 1}
    print("\nratio to the default decode of the same run (median ms / decode ms)")
    for m, d, res in table:
        print(m, d, " ".join(f"{a}={b / dec[m]:.2f}" for a, b in res.items()))


def warm(part: str, variants) -> None:
    """Compile this worker's share of the timed kernels on small inputs (same constants and int specializations:
    splits neither 1 nor a multiple of 16), so the timed run finds them in Triton's cache."""
    i, n_workers = map(int, part.split("/"))
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    jobs = [(m, d, c) for m in SHAPES for d in range(1, 11) for c in ["default", "rows"] + list(variants)]
    n = 5000
    for j, (model, d, c) in enumerate(jobs):
        if j % n_workers != i:
            continue
        hq, hkv, hd = SHAPES[model]
        k = torch.randn(n + 7, hkv, hd, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        ind = torch.randperm(n + 7, device="cuda")[:n].to(torch.int32)
        ptr = torch.tensor([0, n], device="cuda", dtype=torch.int32)
        qo = torch.tensor([0, d], device="cuda", dtype=torch.int32)
        q = torch.randn(d, hq, hd, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(q)
        kern = {"default": None, "rows": "rows"}.get(c)
        try:
            if c in VARIANTS:
                cfg = VARIANTS[c]
                swap_call(q, k, v, qo, ptr, ind, out, pieces_for(hq // hkv * d, cfg), splits_for(hkv, 1 << 20, sm), cfg)()
            elif d == 1:
                decode_attention(q, k, v, ptr, ind, 1 << 20, out=out, kernel=kern)
            else:
                verify_attention(q, k, v, ptr, ind, qo, d, 1 << 20, out=out, kernel=kern)
            torch.cuda.synchronize()
        except Exception as e:
            print(f"warm {model} d={d} c={c}: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm", help="I/N: compile worker I of N, then exit")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--ctx", type=int, default=1 << 20)
    ap.add_argument("--deadline-s", type=float, default=150)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names of VARIANTS")
    ap.add_argument("--check-only", action="store_true")
    a = ap.parse_args(argv)
    variants = [v for v in a.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    if a.warm:
        warm(a.warm, variants)
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    bench(a.out, a.ctx, a.deadline_s, variants, a.check_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
