"""Why does fp8-KV decode at B = 16 and 1M not reach the copy ceiling when bf16 does (issue 18)? An ablation.

The rows kernel's decode (`decode_attention(kernel="rows")`, fp8 KV: fp16 dots) is timed beside stripped copies of
its loop that keep the same grid, splits, tiles, pipeline stages and gathered K/V loads (`paged_rows.kv_tile`) and
drop work from the back:

    load       the K/V tiles only (an integer xor keeps the loads alive)
    cvt        + the conversion of both tiles to the dot type (fp8 -> fp16; bf16 stays), xor of the bits
    dots       + q K^T and P V (scores cast to the dot type, no online softmax)
    full       the production kernel (+ online softmax, split partials and the merge kernel)

each with the request's keys on randomly permuted slots (page size 1, as the sweep) and on contiguous slots (page
locality), for the three head shapes, bf16 and fp8 KV. If `load` already falls short of the copy ceiling, the
gathered rows are the limit; if `load` reaches it and `cvt` / `dots` do not, the instructions per byte are.

Method: `paged_v2_bench.Run` (CUDA-graph replay, L2 flushed before each replay, CUDA events); rows in
OUT/fp8_ablation.csv with the copy ceiling of the same run (`wmtp.measure.harness.ceiling_rows`, kernel `copy`).

    python3 measure/scripts/fp8_decode_ablation.py --out $OUT              # on the GPU
    TRITON_INTERPRET=1 python3 measure/scripts/fp8_decode_ablation.py --smoke --out /tmp/x   # CPU, tiny sizes
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

from wmtp.kernel_plan import rows_plan
from wmtp.measure.kernels.paged_rows import kv_tile
from wmtp.measure.scripts import paged_v2_bench as v2

MODES = {"load": 0, "cvt": 1, "dots": 2}


@triton.jit
def _ablate_kernel(Q, K, V, kv_indptr, kv_indices, Out, num_splits, group,
                   stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MODE: tl.constexpr,
                   FP8: tl.constexpr):
    """One program per (KV head, split, request), as the rows kernel's decode; full tiles only."""
    kvh, split, b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    kv_start = tl.load(kv_indptr + b)
    n_kv = tl.load(kv_indptr + b + 1) - kv_start
    per = tl.cdiv(tl.cdiv(n_kv, num_splits), BLOCK_N) * BLOCK_N
    lo = split * per
    hi = tl.minimum(lo + per, n_kv)
    end = lo + tl.maximum(hi - lo, 0) // BLOCK_N * BLOCK_N
    dims = tl.arange(0, HEAD_DIM)
    rows = tl.arange(0, BLOCK_M)
    q = tl.load(Q + b * stride_qt + (kvh * group + rows)[:, None] * stride_qh + dims[None, :],
                mask=(rows < group)[:, None], other=0.0)
    if FP8:
        q = q.to(tl.float16)
    bits = tl.zeros([HEAD_DIM], tl.int32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(lo, end, BLOCK_N):
        offs_n, n_ok, k, v = kv_tile(K, V, kv_indices, kv_start, start_n, hi, kvh, dims, stride_kt, stride_kh,
                                     stride_vt, stride_vh, BLOCK_N, False)
        if MODE == 0:
            if FP8:
                x = k.to(tl.int8, bitcast=True) ^ v.to(tl.int8, bitcast=True)
            else:
                x = k.to(tl.int16, bitcast=True) ^ v.to(tl.int16, bitcast=True)
            bits ^= tl.xor_sum(x.to(tl.int32), 0)
        else:
            kc = k.to(q.dtype)
            vc = v.to(q.dtype)
            if MODE == 1:
                x = kc.to(tl.int16, bitcast=True) ^ vc.to(tl.int16, bitcast=True)
                bits ^= tl.xor_sum(x.to(tl.int32), 0)
            else:
                s = tl.dot(q, tl.trans(kc))
                acc += tl.dot(s.to(q.dtype), vc)
    pid = (b * num_splits + split) * tl.num_programs(0) + kvh
    tl.store(Out + pid * HEAD_DIM + dims, tl.sum(acc, 0) + bits.to(tl.float32))


def ablate_call(r: v2.Run, model: str, n: int, batch: int, kv: str, layout: str, mode: str):
    hq, hkv, hd = v2.SHAPES[model]
    group = hq // hkv
    k, v = r.pool(model, n * batch, kv)
    ptr, ind = r.index(k.shape[0], n, batch, layout)
    q = torch.randn(batch, hq, hd, device=r.dev, dtype=torch.bfloat16)
    sm = torch.cuda.get_device_properties(0).multi_processor_count if r.dev == "cuda" else 4
    plan = rows_plan(batch, hkv, group, 1, hd, n, sm, kv_fp8=kv == "fp8")
    out = torch.empty(batch * plan.splits * hkv * hd, device=r.dev, dtype=torch.float32)
    grid = (hkv, plan.splits, batch)

    def call():
        _ablate_kernel[grid](q, k, v, ptr, ind, out, plan.splits, group, q.stride(0), q.stride(1), k.stride(0),
                             k.stride(1), v.stride(0), v.stride(1), BLOCK_M=max(16, plan.block_m),
                             BLOCK_N=plan.block_n, HEAD_DIM=hd, MODE=MODES[mode], FP8=kv == "fp8",
                             num_warps=plan.num_warps, num_stages=plan.num_stages)
    return call


def release(r: v2.Run) -> None:
    """Drop the run's KV pools and index sets (one model's pools at a time fit the GPU)."""
    r.pools.clear()
    r.sets.clear()
    if r.dev == "cuda":
        torch.cuda.empty_cache()


def run(r: v2.Run, models, n: int, batch: int):
    for model in models:
        hq, hkv, hd = v2.SHAPES[model]
        for kv in ("fp8", "bf16"):
            nbytes = batch * n * hkv * hd * 2 * (1 if kv == "fp8" else 2)
            for layout in ("random", "contiguous"):
                for mode in ("load", "cvt", "dots", "full"):
                    if r.late():
                        return
                    base = dict(kernel="decode", impl=f"ablate_{mode}", model=model, ctx=n, batch=batch, d=1, kv=kv,
                                config=f"slots={layout}", bytes=nbytes)
                    try:
                        call = (v2.attn_call(r, model, n * batch, n, batch, 1, kv, layout, kernel="rows")
                                if mode == "full" else ablate_call(r, model, n, batch, kv, layout, mode))
                    except Exception as e:  # noqa: BLE001 - a failing variant is a row with its reason
                        r.row(base, None, f"error: {type(e).__name__}: {str(e)[:160]}")
                        continue
                    ms = r.time(base, call, nbytes / 3.5e9)
                    print(f"{model} {kv} {layout} {mode}: {ms:.3f} ms", flush=True)
            release(r)


def tune(r: v2.Run, models, n: int, batch: int, confirm: bool = False):
    """The production decode at options round 3 of h200-kernels-v4 did not try (1 and 2 warps, 4 stages, 8 waves),
    beside its default, fp8 KV."""
    from wmtp.measure.scripts.paged_v4_bench import fits

    for model in models:
        hd = v2.SHAPES[model][2]
        grid = [dict()] + [dict(block_n=bn, num_warps=nw, num_stages=ns, waves=w)
                           for bn in (64, 128) for nw in (1, 2, 4) for ns in (2, 3, 4) for w in (4, 8)
                           if fits(bn, hd, ns, 1)]
        if confirm:  # the default of this commit beside the previous default (and its tile at the old waves)
            old = [dict(block_n=128, num_warps=4, num_stages=3, waves=4)] if hd < 256 else []
            grid = [dict(), dict(waves=4)] + old
        for kw in grid:
            if r.late():
                return
            ms = v2.bench(r, "rows_tune", model, n * batch, n, batch, 1, "fp8", kernel="rows", **kw)
            print(f"{model} fp8 {kw or 'default'}: {ms:.3f} ms", flush=True)
        release(r)


def bf16_decode(r: v2.Run, models, ctxs=(65536, 1 << 20), batches=(1, 16)):
    """bf16 decode below head dim 256 with the options that made the fp8 decode fast there (one or two warps, 4
    stages, 8 waves), beside v1 (the default below B = 16), the rows default and contiguous torch SDPA (B = 1)."""
    grid = [dict(block_n=bn, num_warps=nw, num_stages=ns, waves=w)
            for bn in (64, 128) for nw in (1, 2) for ns in (3, 4) for w in (2, 4, 8)]
    for model in models:
        for n in ctxs:
            for b in batches:
                if r.late():
                    return
                v2.bench(r, "v1", model, n * b, n, b, 1, kernel="v1")
                v2.bench(r, "rows", model, n * b, n, b, 1, kernel="rows")
                for kw in grid:
                    v2.bench(r, "rows", model, n * b, n, b, 1, kernel="rows", **kw)
                if b == 1 and n <= 65536:
                    v2.sdpa(r, model, n, b, 1)
                r.f.flush()
            release(r)


class AblationRun(v2.Run):
    CSV = "fp8_ablation.csv"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="q35,q122,nem")
    ap.add_argument("--ctx", type=int, default=1 << 20)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--deadline-s", type=float, default=400.0)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (CPU interpreter)")
    ap.add_argument("--tune", action="store_true", help="time the fp8 decode's untried options instead")
    ap.add_argument("--confirm", action="store_true", help="with --tune: the default beside the previous one only")
    ap.add_argument("--bf16-decode", action="store_true", help="bf16 decode options below head dim 256 instead")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if a.smoke:
        v2.SHAPES.update(q35=(4, 2, 16), q122=(8, 2, 16), nem=(8, 2, 32))
        a.ctx, a.batch = 256, 2
    r = AblationRun(a.out, a.deadline_s, a.smoke)
    if r.dev == "cuda":
        from wmtp.measure.scripts.paged_v3_bench import write_ceilings

        write_ceilings(a.out / "ceilings.csv")
    if a.bf16_decode:
        bf16_decode(r, a.models.split(","), (64, 256) if a.smoke else (65536, 1 << 20), (1, 2) if a.smoke else (1, 16))
    elif a.tune:
        for b in (a.batch, 1) if a.confirm else (a.batch,):
            tune(r, a.models.split(","), a.ctx, b, a.confirm)
    else:
        run(r, a.models.split(","), a.ctx, a.batch)
    r.f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
