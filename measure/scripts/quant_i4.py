"""Round 4's int4 GEMV step (issue 17; `quant_gemv_int4`) against round 2's GEMV step and the tensor-core kernel, on
every dense (`quant_bench.DENSE_DEFAULT`) and MoE shape of q35 / q122 / nem at M = 1, 2, 4, 8, 16.

Run on a GPU (with wmtp installed):
    python3 -m wmtp.measure.scripts.quant_i4 --out DIR [--procs 14] [--budget-s 150]
First `--procs` worker processes (`--warm I/P`) make every call once so Triton compiles all specializations in
parallel into its cache; then one process checks our kernels against fp32 torch on the first dense and MoE shape of
each model at every M, and times everything with `quant_bench`'s method (CUDA-graph replay over copies of the
weights exceeding 3x the L2, L2 flushed by a read before each replay, the 2 GiB copy ceiling of the same run) and
writes quant_bench's outputs (quant.csv, quant_summary.csv, quant_check.csv, quant.md, quant.meta.json).
Kernel names (`wmtp_int4_group` dense, `wmtp_int4_moe` grouped): unbracketed, the tensor-core kernel (path 'dot',
BLOCK_K 128); `_gemv`, round 2's GEMV step ('words'); `_gemv[f32]`, round 4's step with exact fp32 arithmetic;
`_gemv[pk]`, round 4's packed bf16x2 step with the launcher's plan; `[pk-pf]` loading the next step's words first;
`[pk-w8]` 8 warps; `[pk-bn64-w8]` 64-wide tiles, 8 warps; `[pk-bn16]` 16-wide tiles; `[pk-c8]` split-K planned for
8 programs per SM instead of 4. Peers (dense): torch_bf16 (F.linear on the bf16 weights), torch_int4pack_mm.
"""

from __future__ import annotations


import torch

from wmtp.measure.kernels import quant_gemm as qg
from wmtp.measure.kernels import quant_swap_i4 as qs4
from wmtp.measure.scripts import quant_bench as qb
from wmtp.measure.scripts.quant_bk import script_main, peer_ops, call_peer, items, moe_weights
from wmtp.measure.scripts.quant_peers import dense_format, dense_fns, dense_ref, moe_ref, weight_set

MS = (1, 2, 4, 8, 16)
PEERS = ("torch_bf16", "torch_int4pack_mm")
_GEMV = {"_gemv": dict(step="words"), "_gemv[f32]": dict(step="f32"), "_gemv[pk]": dict(step="packed"),
         "_gemv[pk-pf]": dict(step="packed_pf"), "_gemv[pk-w8]": dict(step="packed", num_warps=8),
         "_gemv[pk-bn64-w8]": dict(step="packed", block_n=64, num_warps=8),
         "_gemv[pk-bn16]": dict(step="packed", block_n=16), "_gemv[pk-c8]": dict(step="packed", ctas=8)}
VARIANTS = {"": dict(path="dot", block_k=128, prefetch=False), **{t: {"path": "gemv", **c} for t, c in _GEMV.items()}}


def call(launch, args, cfg, **kw):
    """launch(*args, **kw) under a variant: the module's GEMV step, programs per SM and int4 swap-AB weight reads
    (swap_words) and dequantization (swap_lop3) set for the call only."""
    cfg = dict(cfg)
    saved = (qg.INT4_GEMV_STEP, qg._CTAS_PER_SM, qg.INT4_GEMV_CTAS, qs4.SWAP_I4_WORDS,  # a named ctas: every M
             qs4.SWAP_I4_LOP3)
    qg.INT4_GEMV_CTAS = None if "ctas" in cfg else saved[2]
    qg.INT4_GEMV_STEP, qg._CTAS_PER_SM = cfg.pop("step", saved[0]), cfg.pop("ctas", saved[1])
    qs4.SWAP_I4_WORDS, qs4.SWAP_I4_LOP3 = cfg.pop("swap_words", saved[3]), cfg.pop("swap_lop3", saved[4])
    try:
        return launch(*args, **cfg, **kw)
    finally:
        qg.INT4_GEMV_STEP, qg._CTAS_PER_SM, qg.INT4_GEMV_CTAS, qs4.SWAP_I4_WORDS, qs4.SWAP_I4_LOP3 = saved


def run_dense(b, model, comp, n, k, check, keep, variants=None):
    """Time our kernels under `variants` (default VARIANTS: name suffix -> `call` config) and the peers at every M."""
    variants = VARIANTS if variants is None else variants
    ours = ["wmtp_int4_group" + t for t in variants]
    if not any(keep(name, model, comp) for name in ours + list(PEERS)):
        return
    gen = torch.Generator(device=b.dev).manual_seed(17)
    copies = b.dense_copies(n, k)
    wsets = [peer_ops(weight_set(n, k, b.dev, gen)) for _ in range(copies)]
    for m in MS:
        x = torch.randn(m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        peers = dense_fns(x)
        calls = {name: (lambda w, c=c: call(qg.int4_gemm, (x, *w["int4"]), c))
                 for name, c in zip(ours, variants.values())}
        calls.update({name: (lambda w, name=name: call_peer(peers[name], w[name])) for name in PEERS})
        for kernel, fn in calls.items():
            if not keep(kernel, model, comp):
                continue
            dtype, nbytes = dense_format(kernel, n, k)
            if check and kernel.startswith("wmtp"):
                b.check(kernel, model, comp, m, n, k, 1, 1, lambda fn=fn: fn(wsets[0]),
                        dense_ref(x, wsets[0], "wmtp_int4"))
            b.measure(kernel, model, comp, m, n, k, 1, 1, dtype, nbytes, [lambda fn=fn, w=w: fn(w) for w in wsets])
    del wsets


def run_moe(b, model, comp, n, k, n_exp, top_k, check, keep):
    ours = {"wmtp_int4_moe" + t: c for t, c in VARIANTS.items()}
    if not any(keep(name, model, comp) for name in ours):
        return
    gen = torch.Generator(device=b.dev).manual_seed(29)
    down = comp.endswith("down")
    _, (wq, ws) = moe_weights(b, n, k, n_exp)
    for m in MS:
        ids = torch.rand(m, n_exp, device=b.dev, generator=gen).topk(top_k, dim=1).indices.to(torch.int32)
        wts = torch.softmax(torch.randn(m, top_k, device=b.dev, generator=gen), -1)
        x = torch.randn(m * top_k if down else m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        used = ids.unique()
        for kernel, cfg in ours.items():
            if not keep(kernel, model, comp):
                continue

            def fn(cfg=cfg, x=x, ids=ids, wts=wts):
                return call(qg.int4_moe_gemm, (x, wq, ws, ids, wts if down else None), cfg, a_is_pairs=down)

            if check:
                w_deq, pos = qg.dequantize_int4_group(wq[used.long()], ws[used.long()]), torch.searchsorted(used, ids)
                b.check(kernel, model, comp, m, n, k, n_exp, top_k, fn, moe_ref(x, w_deq, pos, wts, down))
            nbytes = used.numel() * qg.weight_bytes("int4_group", n, k)
            b.measure(kernel, model, comp, m, n, k, n_exp, top_k, "int4", nbytes, [fn], routed=used.numel())
    del wq, ws


def sweep(b, models, keep, out_dir=None):
    """Every shape of `quant_bk.items`; our kernels checked at every M on the first shape of each kind and model."""
    seen = set()
    for model, kind, comp, shape in items(models):
        check = (model, kind) not in seen
        seen.add((model, kind))
        (run_moe if kind == "moe" else run_dense)(b, model, comp, *shape, check=check, keep=keep)
        torch.cuda.empty_cache()
        if out_dir is not None:
            qb.write_outputs(b, out_dir, final=False)


def main(argv=None) -> int:
    return script_main(argv, __doc__, "quant_i4", sweep, "tests/test_kernels_quant_gemv4.py", procs=14)


if __name__ == "__main__":
    raise SystemExit(main())
