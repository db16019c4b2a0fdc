"""Issue 17, round 10: the 4-bit tensor-core GEMM for decode rows (`quant_mma_i4`: weights repacked into MMA fragments,
one `mma.sync` per 32 words) against path='auto' and the torch peers, on every dense shape of q35 / q122 / nem at
M = 1, 2, 4, 8, 16.

Run on a GPU (with wmtp installed):
    python3 -m wmtp.measure.scripts.quant_i4mma --out DIR [--procs 14] [--budget-s 300]
Same method and outputs as `quant_i4` (compile workers first; every variant of ours checked against fp32 torch on
each model's first dense shape at every M; CUDA-graph replay over weight copies exceeding 3x the L2, the L2 flushed
before each replay, the 2 GiB copy ceiling of the same run). The repacking (`pack_int4_mma`) is done once per weight
copy before timing, as an engine repacks a checkpoint at load. `wmtp_int4_group`: path='auto' without the
repacked weights (the earlier kernels); `wmtp_int4_group_auto`: path='auto' with them (`_auto16`: with the kernel
taken up to 16 rows). `wmtp_int4_mma[...]`: `fma` code - 8 by a packed FMA per pair, `sub` 128 + code and a second
MMA with A = -136; `wW` W warps (row tiles of 16 per program); `cC` split-K planned for C programs per SM.
"""

from __future__ import annotations

import torch

from wmtp.measure.kernels import quant_gemm as qg
from wmtp.measure.kernels import quant_mma_i4 as qm
from wmtp.measure.kernels.quant_mma_i4 import MAX_ROWS, int4_mma_gemm, int4_mma_moe, pack_int4_mma
from wmtp.measure.scripts import quant_bench as qb
from wmtp.measure.scripts.quant_bk import call_peer, items, moe_weights, peer_ops, script_main
from wmtp.measure.scripts.quant_peers import dense_fns, dense_format, dense_ref, moe_ref, weight_set

MS = (1, 2, 4, 8, 16)
# run2 of h200-quant-v11 timed also [fma-w4], [fma-w8], [sub-w8], [sub-w4-c2] (commit 36ea377), run3 [sub-w4] (c72b5b3)
OURS = {"[sub-w4-c8]": dict(sub_mma=True, ctas=8), "[fma-w4-c8]": dict(sub_mma=False, ctas=8),
        "[fma-w2-c8]": dict(sub_mma=False, ctas=8, num_warps=2), "[fma-w1-c8]": dict(sub_mma=False, ctas=8, num_warps=1),
        "[fma-w2-c4]": dict(sub_mma=False, ctas=4, num_warps=2), "[sub-w2-c8]": dict(sub_mma=True, ctas=8, num_warps=2)}
# session 23: fewer warps per program with split-K planned for more programs per SM (one warp per program streamed the
# lm_heads at 80-92 % of copy in run6 of h200-quant-v11, but planned for 8 programs per SM it keeps 8 warps an SM on
# the 10-40 MB projections, where split-K sets the program count)
OURS.update({f"[{dq}-w{w}-c{c}]": dict(sub_mma=dq == "sub", ctas=c, num_warps=w)
             for dq, w, c in (("fma", 1, 16), ("fma", 1, 32), ("sub", 1, 16), ("sub", 1, 32), ("fma", 2, 16),
                              ("sub", 2, 16), ("sub", 4, 16))})
# session 25: `-pf` each warp's next group's words and scales loaded before this group's MMAs (two groups in flight a
# warp, `int4_mma_gemm(prefetch=True)`); `cCf` split-K planned for at most C programs per SM (`fit`: one wave where C
# are resident; 4 warps of <= 48 registers: 10 an SM)
OURS.update({f"[{dq}-w{w}-c{c}{'f' if fit else ''}{'-pf' if pf else ''}]":
             dict(sub_mma=dq == "sub", ctas=c, num_warps=w, prefetch=pf, fit=fit)
             for dq, w, c, fit, pf in (("fma", 1, 16, False, True), ("sub", 4, 8, False, True),
                                       ("fma", 4, 8, False, True), ("fma", 4, 10, True, True),
                                       ("sub", 4, 9, True, False), ("sub", 4, 9, True, True),
                                       ("fma", 2, 16, False, True), ("fma", 1, 16, True, True),
                                       ("fma", 1, 24, True, True))})
PEERS = ("torch_bf16", "torch_int4pack_mm")


def auto16(x, w):
    """path='auto' with repacked weights as it would run with `quant_mma_i4.AUTO_MAX_ROWS` = 16."""
    saved, qm.AUTO_MAX_ROWS = qm.AUTO_MAX_ROWS, 16
    try:
        return qg.int4_gemm(x, *w["int4"], w_mma=w["mma"])
    finally:
        qm.AUTO_MAX_ROWS = saved


def moe_auto_w1_all(*a, **kw):
    """path='auto' with repacked experts as it would run with `quant_mma_i4.MOE_W1_MIN_TOKENS` = 1."""
    saved, qm.MOE_W1_MIN_TOKENS = qm.MOE_W1_MIN_TOKENS, 1
    try:
        return qg.int4_moe_gemm(*a, **kw)
    finally:
        qm.MOE_W1_MIN_TOKENS = saved


def run_dense(b, model, comp, n, k, check, keep):
    names = ["wmtp_int4_group", "wmtp_int4_group_auto", "wmtp_int4_group_auto16"] + [f"wmtp_int4_mma{t}" for t in OURS]
    names += list(PEERS)
    if not any(keep(name, model, comp) for name in names):
        return
    gen = torch.Generator(device=b.dev).manual_seed(17)
    wsets = []
    for _ in range(b.dense_copies(n, k)):
        w = peer_ops(weight_set(n, k, b.dev, gen))
        w["mma"] = pack_int4_mma(w["int4"][0])
        wsets.append(w)
    counters = torch.zeros(1 << 16, dtype=torch.int32, device=b.dev)
    for m in MS:
        x = torch.randn(m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        peers = dense_fns(x)
        calls = {"wmtp_int4_group": lambda w: qg.int4_gemm(x, *w["int4"]),
                 "wmtp_int4_group_auto": lambda w: qg.int4_gemm(x, *w["int4"], w_mma=w["mma"]),
                 "wmtp_int4_group_auto16": lambda w: auto16(x, w)}
        if m <= MAX_ROWS:
            calls.update({f"wmtp_int4_mma{t}": (lambda w, c=c: int4_mma_gemm(x, w["mma"], w["int4"][1], n,
                                                                              counters=lambda p: counters[:p], **c))
                          for t, c in OURS.items()})
        calls.update({name: (lambda w, name=name: call_peer(peers[name], w[name])) for name in PEERS})
        for kernel, fn in calls.items():
            if not keep(kernel, model, comp):
                continue
            dtype, nbytes = dense_format(kernel, n, k)
            if check and kernel.startswith("wmtp"):
                b.check(kernel, model, comp, m, n, k, 1, 1, lambda fn=fn: fn(wsets[0]),
                        dense_ref(x, wsets[0], "wmtp_int4"))
            b.measure(kernel, model, comp, m, n, k, 1, 1, dtype, nbytes, [lambda fn=fn, w=w: fn(w) for w in wsets])


# run4 of h200-quant-v11 timed also `wmtp_int4_moe_mma[fma-c8]` (commit 812c210; its auto then took the -136 MMA)
MOE = ("wmtp_int4_moe", "wmtp_int4_moe_auto", "wmtp_int4_moe_mma[sub-c8]")
# session 23: the pair kernel with fewer warps per program / more programs per SM (as OURS for the dense kernel); their
# split-K counters were allocated in each call until h200-quant-v12 run2 (a zero-fill each replay), cached since
MOE_OURS = {f"[fma-w{w}-c{c}]": dict(sub_mma=False, num_warps=w, ctas=c) for w, c in ((1, 8), (1, 16), (1, 32), (2, 16),
                                                                                    (4, 16), (4, 8))}
# session 25: the prefetch and one-wave plan (as OURS)
MOE_OURS.update({f"[fma-w{w}-c{c}{'f' if fit else ''}-pf]": dict(sub_mma=False, num_warps=w, ctas=c, prefetch=True,
                                                                 fit=fit)
                 for w, c, fit in ((1, 16, False), (1, 16, True), (4, 8, False))})


def run_moe(b, model, comp, n, k, n_exp, top_k, keep):
    """The grouped experts (as `quant_moe_bench`: random top-k routing, one call per replay, the routed experts'
    bytes): path='auto' without / with the repacked experts (`wmtp_int4_moe` / `_auto`), and the kernel's other
    dequantization (the -136 MMA)."""
    names = list(MOE) + [f"wmtp_int4_moe_mma{t}" for t in MOE_OURS] + ["wmtp_int4_moe_auto[w1-all]"]
    if not any(keep(name, model, comp) for name in names):
        return
    gen = torch.Generator(device=b.dev).manual_seed(29)
    down = comp.endswith("down")
    _, (wq, ws) = moe_weights(b, n, k, n_exp)
    wm = pack_int4_mma(wq)
    counters = torch.zeros(1 << 16, dtype=torch.int32, device=b.dev)  # as path='auto': cached, re-armed by the kernel
    cnt = dict(counters=lambda p: counters[:p])
    for m in MS:
        ids = torch.rand(m, n_exp, device=b.dev, generator=gen).topk(top_k, dim=1).indices.to(torch.int32)
        wts = torch.softmax(torch.randn(m, top_k, device=b.dev, generator=gen), -1) if down else None
        x = torch.randn(m * top_k if down else m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        used = ids.unique()
        calls = {"wmtp_int4_moe": lambda: qg.int4_moe_gemm(x, wq, ws, ids, wts, a_is_pairs=down),
                 "wmtp_int4_moe_auto": lambda: qg.int4_moe_gemm(x, wq, ws, ids, wts, a_is_pairs=down, w_mma=wm),
                 "wmtp_int4_moe_mma[sub-c8]": lambda: int4_mma_moe(x, wm, ws, ids, wts, down, n, sub_mma=True, **cnt)}
        calls["wmtp_int4_moe_auto[w1-all]"] = lambda: moe_auto_w1_all(x, wq, ws, ids, wts, a_is_pairs=down, w_mma=wm)
        calls.update({f"wmtp_int4_moe_mma{t}": (lambda c=c: int4_mma_moe(x, wm, ws, ids, wts, down, n, **c, **cnt))
                      for t, c in MOE_OURS.items()})
        w_deq, pos = qg.dequantize_int4_group(wq[used.long()], ws[used.long()]), torch.searchsorted(used, ids)
        ref = moe_ref(x, w_deq, pos, wts, down)
        for kernel, fn in calls.items():
            if not keep(kernel, model, comp) or (kernel.startswith("wmtp_int4_moe_mma") and m > 16):
                continue
            b.check(kernel, model, comp, m, n, k, n_exp, top_k, fn, ref)
            b.measure(kernel, model, comp, m, n, k, n_exp, top_k, "int4",
                      used.numel() * qg.weight_bytes("int4_group", n, k), [fn], routed=used.numel())


def sweep(b, models, keep, out_dir=None):
    seen = set()
    for model, kind, comp, shape in items(models):
        if kind == "moe":
            run_moe(b, model, comp, *shape, keep=keep)
        else:
            run_dense(b, model, comp, *shape, check=model not in seen, keep=keep)
            seen.add(model)
        torch.cuda.empty_cache()
        if out_dir is not None:
            qb.write_outputs(b, out_dir, final=False)


def main(argv=None) -> int:
    return script_main(argv, __doc__, "quant_i4mma", sweep, "tests/test_kernels_quant_mma_i4.py", procs=14)


if __name__ == "__main__":
    raise SystemExit(main())
