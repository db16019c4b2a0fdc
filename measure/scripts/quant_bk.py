"""Wide K steps in the quantized tensor-core GEMMs (issue 17, round 3): the round-2 configuration (BLOCK_K = 128,
one scale group per step; the GEMV kernel at the rows where path='auto' takes it) against BLOCK_K = 256 / 512
(2 / 4 groups per step), fp8 with num_stages 3 / 4, int4 with and without a one-step register prefetch, and the
torch peers, on every dense (`quant_bench.DENSE_DEFAULT`) and MoE shape of q35 / q122 / nem.

Run on a GPU (with wmtp installed):
    python3 -m wmtp.measure.scripts.quant_bk --out DIR [--procs 12]
First `--procs` worker processes (`--warm I/P`) make every call once so Triton compiles all specializations in
parallel into its cache; then one process times everything with `quant_bench`'s method (CUDA-graph replay over
copies of the weights exceeding 3x the L2, L2 flushed by a read before each replay, the 2 GiB copy ceiling of the
same run) and writes quant_bench's outputs (quant.csv, quant_summary.csv, quant_check.csv, quant.md,
quant.meta.json). Kernel names: `wmtp_fp8_block[bk512-st3]` etc. (bk block_k, st num_stages, pf prefetch,
w num_warps); the unbracketed wmtp_* names are BLOCK_K = 128 with the round-2 defaults.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import torch

from wmtp.measure.kernels import quant_gemm as qg
from wmtp.measure.scripts import quant_bench as qb
from wmtp.measure.scripts.quant_peers import dense_format, dense_fns, dense_prepare, dense_ref, moe_ref, weight_set
from wmtp.measure.scripts.quant_shapes import dense_shapes, moe_shapes
from wmtp.models import get_model

MS = (1, 2, 4, 8, 16, 64)
FP8_WIDE = {"[bk256-st4]": dict(block_k=256, num_stages=4), "[bk512-st3]": dict(block_k=512, num_stages=3),
            "[bk512-st4]": dict(block_k=512, num_stages=4)}
INT4_WIDE = {"[bk256]": dict(block_k=256, prefetch=False), "[bk512]": dict(block_k=512, prefetch=False),
             "[bk256-pf]": dict(block_k=256, prefetch=True), "[bk512-pf-w8]": dict(block_k=512, prefetch=True,
                                                                                    num_warps=8)}
PEERS = ("torch_bf16", "torch_scaled_mm_rowwise", "torch_scaled_mm_tensor", "torch_scaled_mm_block",
         "torch_int4pack_mm")
GEMV_M = {"fp8": 1, "int4": 2}  # rows up to which round 2's path='auto' takes the GEMV kernel (dense)
BASE = dict(block_k=128, prefetch=False)


def dense_calls(x, m):
    """kernel -> fn(weight set) for rows x [M, K]: ours (round 2 and wide variants) and the peers."""
    peers = dense_fns(x)
    out = {"wmtp_fp8_block": lambda w: qg.fp8_gemm(x, *w["fp8"], path="dot", block_k=128),
           "wmtp_int4_group": lambda w: qg.int4_gemm(x, *w["int4"], path="dot", **BASE)}
    out.update({"wmtp_fp8_block" + tag: (lambda w, c=c: qg.fp8_gemm(x, *w["fp8"], path="dot", **c))
                for tag, c in FP8_WIDE.items()})
    out.update({"wmtp_int4_group" + tag: (lambda w, c=c: qg.int4_gemm(x, *w["int4"], path="dot", **c))
                for tag, c in INT4_WIDE.items()})
    if m <= GEMV_M["fp8"]:
        out["wmtp_fp8_block_gemv"] = lambda w: qg.fp8_gemm(x, *w["fp8"], path="gemv")
    if m <= GEMV_M["int4"]:
        out["wmtp_int4_group_gemv"] = lambda w: qg.int4_gemm(x, *w["int4"], path="gemv")
    for name in PEERS:
        out[name] = lambda w, name=name, fn=peers[name]: call_peer(fn, w[name])
    return out


def peer_ops(w):
    """The weight set plus each peer's prepared operands (or the error that preparing raised, raised again by the
    call, so the row records it)."""
    out = dict(w)
    for name in PEERS:
        try:
            out[name] = dense_prepare(name, w)
        except Exception as exc:  # e.g. a layout this torch build does not pack
            out[name] = exc
    return out


def call_peer(fn, ops):
    if isinstance(ops, Exception):
        raise ops
    return fn(*ops)


def run_dense(b, model, comp, n, k, check, keep):
    ours = [f"wmtp_{f}{t}" for f in ("fp8_block", "int4_group") for t in ("", "_gemv", *FP8_WIDE, *INT4_WIDE)]
    if not any(keep(name, model, comp) for name in ours):
        return
    gen = torch.Generator(device=b.dev).manual_seed(17)
    copies = b.dense_copies(n, k)
    wsets = [peer_ops(weight_set(n, k, b.dev, gen)) for _ in range(copies)]
    for m in MS:
        x = torch.randn(m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        for kernel, fn in dense_calls(x, m).items():
            if not keep(kernel, model, comp):
                continue
            dtype, nbytes = dense_format(kernel, n, k)
            if check and m == 16:
                ref = dense_ref(x, wsets[0], "wmtp_int4" if "int4" in kernel else kernel)
                b.check(kernel, model, comp, m, n, k, 1, 1, lambda fn=fn: fn(wsets[0]), ref)
            b.measure(kernel, model, comp, m, n, k, 1, 1, dtype, nbytes, [lambda fn=fn, w=w: fn(w) for w in wsets])
    del wsets


def moe_weights(b, n, k, n_exp):
    gen = torch.Generator(device=b.dev).manual_seed(23)
    parts = [[], [], [], []]
    for e0 in range(0, n_exp, 32):
        w = torch.randn(min(32, n_exp - e0), n, k, device=b.dev, generator=gen, dtype=torch.bfloat16) / math.sqrt(k)
        for dst, t in zip(parts, qg.quantize_fp8_block(w) + qg.quantize_int4_group(w)):
            dst.append(t)
    return (torch.cat(parts[0]), torch.cat(parts[1])), (torch.cat(parts[2]), torch.cat(parts[3]))


def run_moe(b, model, comp, n, k, n_exp, top_k, check, keep):
    variants = {"wmtp_fp8_moe": ("fp8", dict(block_k=128)), "wmtp_int4_moe": ("int4", BASE),
                **{"wmtp_fp8_moe" + t: ("fp8", c) for t, c in FP8_WIDE.items()},
                **{"wmtp_int4_moe" + t: ("int4", c) for t, c in INT4_WIDE.items()},
                "wmtp_int4_moe_gemv": ("int4", dict(path="gemv"))}
    if not any(keep(name, model, comp) for name in variants):
        return
    gen = torch.Generator(device=b.dev).manual_seed(29)
    down = comp.endswith("down")
    fp8_w, i4_w = moe_weights(b, n, k, n_exp)
    for m in MS:
        ids = torch.rand(m, n_exp, device=b.dev, generator=gen).topk(top_k, dim=1).indices.to(torch.int32)
        wts = torch.softmax(torch.randn(m, top_k, device=b.dev, generator=gen), -1)
        x = torch.randn(m * top_k if down else m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        used = ids.unique()
        for kernel, (fmt, cfg) in variants.items():
            if not keep(kernel, model, comp) or (kernel.endswith("_gemv") and m > 1):
                continue
            w, launch = (fp8_w, qg.fp8_moe_gemm) if fmt == "fp8" else (i4_w, qg.int4_moe_gemm)
            cfg = {"path": "dot", **cfg}

            def fn(launch=launch, w=w, cfg=cfg):
                return launch(x, *w, ids, wts if down else None, a_is_pairs=down, **cfg)

            if check and m == 16:
                deq = qg.dequantize_fp8_block if fmt == "fp8" else qg.dequantize_int4_group
                w_deq, pos = deq(w[0][used.long()], w[1][used.long()]), torch.searchsorted(used, ids)
                xr = qg.dequantize_fp8_block(*qg.quantize_act_fp8(x), (1, 128)) if fmt == "fp8" else x
                b.check(kernel, model, comp, m, n, k, n_exp, top_k, fn, moe_ref(xr, w_deq, pos, wts, down))
            nbytes = used.numel() * qg.weight_bytes("fp8_block" if fmt == "fp8" else "int4_group", n, k)
            b.measure(kernel, model, comp, m, n, k, n_exp, top_k, "fp8_e4m3" if fmt == "fp8" else "int4", nbytes,
                      [fn], routed=used.numel())
    del fp8_w, i4_w


def items(models):
    """(model, 'moe' | 'dense', component, shape) in timing order."""
    out = []
    for model in models:
        s = get_model(model)
        out += [(model, "moe", c, (n, k, s.n_experts, s.top_k)) for c, (n, k) in moe_shapes(model).items()]
        shapes = dense_shapes(model)
        out += [(model, "dense", c, shapes[c]) for c in qb.DENSE_DEFAULT if c in shapes]
    return out


def sweep(b, models, keep, out_dir=None):
    """Every shape of `items`; with out_dir, the outputs so far are written after each shape."""
    seen = set()
    for model, kind, comp, shape in items(models):
        check = (model, kind) not in seen  # our kernels checked at M = 16 on the first shape of each kind and model
        seen.add((model, kind))
        if kind == "moe":
            run_moe(b, model, comp, *shape, check=check, keep=keep)
        else:
            run_dense(b, model, comp, *shape, check=check, keep=keep)
        torch.cuda.empty_cache()
        if out_dir is not None:
            qb.write_outputs(b, out_dir, final=False)


class Warm(qb.Bench):
    """Makes every call once (Triton compiles into its on-disk cache); records nothing."""

    def check(self, *a, **kw):
        pass

    def measure(self, kernel, model, comp, m, n, k, e, top_k, dtype, nbytes, calls, routed=1):
        try:
            calls[0]()
        except Exception as exc:  # the timing process records it
            print(f"warm: {kernel} {model} {comp} M={m}: {qb.error_text(exc)}", file=sys.stderr)


def warm(args, shard, procs, sweep):
    """A compile worker: `sweep` with timing off over our kernels of shard `shard` of `procs`."""
    b = Warm(args)
    b.timing = False

    def keep(kernel, model, comp):  # ours only (the peers compile nothing), spread over the workers
        return kernel.startswith("wmtp") and zlib.crc32(f"{kernel} {model} {comp}".encode()) % procs == shard

    sweep(b, models_arg(args), keep)
    torch.cuda.synchronize()


def models_arg(args):
    return [m.strip() for m in args.models.split(",") if m.strip()]


def script_main(argv, doc: str, module: str, sweep, tests: str, procs: int = 12) -> int:
    """The command line the side-by-side quantized benchmarks share (quant_bk, quant_i4, quant_sw): compile workers
    first (`python -m wmtp.measure.scripts.<module> --warm I/P` runs `warm(args, I, P, sweep)`), then the copy ceiling and
    `sweep(bench, models, keep, out)` timed, the outputs and the report; `tests` names the CPU checks."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", type=Path, help="output folder")
    ap.add_argument("--models", default=",".join(qb.MODELS))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--timer", choices=("graph", "do_bench"), default="graph")
    ap.add_argument("--budget-s", type=float, default=600.0, help="stop timing after this many seconds")
    ap.add_argument("--procs", type=int, default=procs, help="parallel compile workers before timing (0: none)")
    ap.add_argument("--kernels", default="", help="only these kernel names (comma-separated; default: all)")
    ap.add_argument("--warm", default="", help=argparse.SUPPRESS)  # I/P: worker I of P
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        print(f"error: {module} times kernels on a CUDA GPU (CPU checks: {tests})")
        return 2
    if args.warm:
        shard, n = (int(v) for v in args.warm.split("/"))
        warm(args, shard, n, sweep)
        return 0
    if args.out is None:
        print("error: --out is required")
        return 2
    t0 = time.monotonic()
    base = [sys.executable, "-m", f"wmtp.measure.scripts.{module}", "--models", args.models]
    workers = [subprocess.Popen(base + ["--warm", f"{i}/{args.procs}"]) for i in range(args.procs)]
    for p in workers:
        p.wait()
    print(f"compile workers done in {time.monotonic() - t0:.0f} s", flush=True)
    b = qb.Bench(args)
    qb.run_copy(b)
    only = {v.strip() for v in args.kernels.split(",") if v.strip()}
    sweep(b, models_arg(args), lambda kernel, *_: not only or kernel in only, args.out)
    qb.write_outputs(b, args.out, final=True)
    return qb._report(b, args.out)


def main(argv=None) -> int:
    return script_main(argv, __doc__, "quant_bk", sweep, "tests/test_kernels_quant.py")


if __name__ == "__main__":
    raise SystemExit(main())
