"""The swap-AB FP8 kernel (issue 17, round 5; `quant_swap`) against the tensor-core kernel and the GEMV kernel on
the dense shapes (`quant_bench.DENSE_DEFAULT`) of q35 / q122 / nem at M = 1, 2, 4, 8, 16, 64, plus the fixed cost
per call of every path on tiny weights.

Run on a GPU (with wmtp installed):
    python3 -m wmtp.measure.scripts.quant_sw --out DIR [--procs 14] [--budget-s 150]
As `quant_i4`: `--procs` worker processes first compile every call into Triton's cache, then one process checks our
kernels against fp32 torch on the first dense shape of each model at every M and times everything with
`quant_bench`'s method (CUDA-graph replay over copies of the weights exceeding 3x the L2, L2 flushed by a read
before each replay, the 2 GiB copy ceiling of the same run), writing quant_bench's outputs.
Kernel names: `wmtp_fp8_block` the tensor-core kernel (path 'dot', activations quantized by a separate launch);
`_auto` path='auto' (the GEMV at one row, swap-AB at `quant_gemm.SWAP_AUTO_M`, else 'dot': what an engine calling
`fp8_gemm` runs);
`_gemv` the GEMV kernel (M <= 16, one launch; `[bnB]` B-wide tiles, `[w32]` the 32 / 16-wide plan before
h200-quant-v10, `[w8]` 8 warps; `[g8]` / `[g2]`, 8 / 2 groups per step, were timed at d69f66a); `_swap[...]` the
swap-AB kernel with the launcher's plan and:
`pre` activations quantized by `quantize_act_fp8` first (two launches), `pro` in a prologue of the kernel, `loop`
in its K loop (one launch each); `st2/3/4` pipeline stages (default 4); `w8` 8 warps (default 4); `bn64` 64-wide
tiles; `cC` split-K for about C programs per SM, rounded up (the default until h200-quant-v13: 4), `cCf` for at
most C (one wave where C reside; the default since: 2, `quant_gemm.SWAP_CTAS`); `[sk1]` no split-K. int4:
`wmtp_int4_group_gemv[pk]` round 4's packed GEMV step with the launcher's plan (measure/results/h200-quant-v6 timed it
with 4 programs per SM; since then 2 up to 2 rows, `quant_gemm.INT4_GEMV_CTAS`), with the same `[c2]` / `[sk1]`.
Fixed cost: model `tiny`, components `n128k128` / `n1024k1024` (M = 1; bytes too few to matter), and `launch`: a
Triton copy of 512 bytes (one program), the floor of any kernel in a replayed graph.
"""

from __future__ import annotations


import torch

from wmtp.measure.kernels import quant_gemm as qg
from wmtp.measure.kernels.quant_kernels import copy_ as triton_copy
from wmtp.measure.scripts import quant_bench as qb
from wmtp.measure.scripts.quant_bk import script_main, call_peer, peer_ops
from wmtp.measure.scripts.quant_peers import dense_format, dense_fns, dense_ref, weight_set
from wmtp.measure.scripts.quant_shapes import dense_shapes

MS = (1, 2, 4, 8, 16, 64)
PEERS = ("torch_bf16", "torch_scaled_mm_rowwise", "torch_scaled_mm_tensor", "torch_scaled_mm_block")
_SW = dict(path="swap")
FP8 = {"": dict(path="dot"), "_auto": dict(path="auto"), "_gemv": dict(path="gemv"),
       "_gemv[sk1]": dict(path="gemv", split_k=1),
       "_gemv[w32]": dict(path="gemv", fp8_wide=False), "_gemv[w8]": dict(path="gemv", num_warps=8),
       "_gemv[bn64]": dict(path="gemv", block_n=64),
       "_gemv[bn64-w8]": dict(path="gemv", block_n=64, num_warps=8), "_gemv[bn128]": dict(path="gemv", block_n=128),
       "_gemv[bn128-w8]": dict(path="gemv", block_n=128, num_warps=8),
       "_swap[pre]": dict(_SW, act="pre", num_stages=4), "_swap[pre-st3]": dict(_SW, act="pre", num_stages=3),
       "_swap[pre-st2]": dict(_SW, act="pre", num_stages=2),
       "_swap[pre-st3-w8]": dict(_SW, act="pre", num_stages=3, num_warps=8),
       "_swap[pre-st3-c8]": dict(_SW, act="pre", num_stages=3, ctas=8),
       "_swap[pro]": dict(_SW, act="prologue", num_stages=4), "_swap[pro-st3]": dict(_SW, act="prologue", num_stages=3),
       "_swap[pro-st3-w8]": dict(_SW, act="prologue", num_stages=3, num_warps=8),
       "_swap[pro-st3-bn64]": dict(_SW, act="prologue", num_stages=3, block_n=64),
       "_swap[pro-st3-c2]": dict(_SW, act="prologue", num_stages=3, ctas=2),
       "_swap[loop-st3]": dict(_SW, act="loop", num_stages=3)}
# session 25: split-K planned for at most C programs an SM (`swap_plan(fit=True)`); the 128-wide build uses 223
# registers a thread under the H200's Triton 3.6 (243 under 3.9): 2 reside on an SM, where the plan before asked for
# about 4 (2+ waves); the 64-wide build (126 registers) lets 4 reside. Adopted from h200-quant-v13 run3 (fastest in
# geomean on both widths; 3-4 an SM were 2-5 % faster on some 64-wide shapes): `[pre-c2f]` is `[pre]` (path 'swap',
# and 'auto' at 2-16 rows) since; `[pre-c4]` the plan before
FP8.update({f"_swap[pre-c{c}{'f' if fit else ''}]": dict(_SW, act="pre", num_stages=4, ctas=c, fit=fit)
            for c, fit in ((2, True), (2, False), (3, True), (4, True), (6, True), (1, False), (4, False))})
INT4 = {"_gemv[pk]": dict(path="gemv"), "_gemv[pk-c2]": dict(path="gemv", ctas=2),
        "_gemv[pk-sk1]": dict(path="gemv", split_k=1)}
TINY = {"n128k128": (128, 128), "n1024k1024": (1024, 1024)}


def call(launch, args, cfg):
    """launch(*args, **cfg) with the swap kernel's activation quantization and the programs per SM set for the call."""
    cfg = dict(cfg)
    saved = (qg.SWAP_ACT, qg._CTAS_PER_SM, qg.INT4_GEMV_CTAS, qg.GEMV_FP8_WIDE, qg.SWAP_FIT,  # a named ctas: every M
             qg.SWAP_CTAS)
    named = "ctas" in cfg  # the plans named by a program count were timed rounding up (fit only where named)
    qg.INT4_GEMV_CTAS = None if named else saved[2]
    qg.SWAP_ACT, qg._CTAS_PER_SM = cfg.pop("act", saved[0]), cfg.get("ctas", saved[1])
    qg.SWAP_CTAS = cfg.pop("ctas", saved[5])
    qg.GEMV_FP8_WIDE, qg.SWAP_FIT = cfg.pop("fp8_wide", saved[3]), cfg.pop("fit", False if named else saved[4])
    try:
        return launch(*args, **cfg)
    finally:
        (qg.SWAP_ACT, qg._CTAS_PER_SM, qg.INT4_GEMV_CTAS, qg.GEMV_FP8_WIDE, qg.SWAP_FIT, qg.SWAP_CTAS) = saved


def dense_calls(x, m):
    """kernel -> fn(weight set) at rows x [M, K]: ours (every variant that takes M rows) and the peers."""
    out = {}
    for tag, cfg in FP8.items():
        if not (cfg["path"] == "gemv" and m > 16):
            out["wmtp_fp8_block" + tag] = lambda w, c=cfg: call(qg.fp8_gemm, (x, *w["fp8"]), c)
    for tag, cfg in INT4.items():
        if m <= 16:
            out["wmtp_int4_group" + tag] = lambda w, c=cfg: call(qg.int4_gemm, (x, *w["int4"]), c)
    peers = dense_fns(x)
    out.update({name: (lambda w, name=name: call_peer(peers[name], w[name])) for name in PEERS})
    return out


def run_dense(b, model, comp, n, k, check, keep, ms=MS):
    gen = torch.Generator(device=b.dev).manual_seed(17)
    copies = b.dense_copies(n, k)
    wsets = [peer_ops(weight_set(n, k, b.dev, gen)) for _ in range(copies)]
    for m in ms:
        x = torch.randn(m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        for kernel, fn in dense_calls(x, m).items():
            if not keep(kernel, model, comp):
                continue
            dtype, nbytes = dense_format(kernel, n, k)
            if check and (kernel.startswith("wmtp") or kernel == "torch_scaled_mm_block"):
                ref = dense_ref(x, wsets[0], "wmtp_int4" if "int4" in kernel else "wmtp_fp8")
                b.check(kernel, model, comp, m, n, k, 1, 1, lambda fn=fn: fn(wsets[0]), ref)
            b.measure(kernel, model, comp, m, n, k, 1, 1, dtype, nbytes, [lambda fn=fn, w=w: fn(w) for w in wsets])
    del wsets


def sweep(b, models, keep, out_dir=None):
    """Fixed cost first (tiny weights, M = 1), then every dense shape; checks on each model's first shape."""
    if b.timing and keep("launch", "tiny", "launch"):
        src = torch.zeros(128, dtype=torch.int32, device=b.dev)
        dst = torch.empty_like(src)
        b.measure("launch", "tiny", "launch", 1, 128, 1, 1, 1, "int32", 512, [lambda: triton_copy(dst, src, 128)])
    for comp, (n, k) in TINY.items():
        run_dense(b, "tiny", comp, n, k, False, keep, ms=(1,))
    for model in models:
        shapes = dense_shapes(model)
        for i, comp in enumerate(c for c in qb.DENSE_DEFAULT if c in shapes):
            run_dense(b, model, comp, *shapes[comp], check=i == 0, keep=keep)
            torch.cuda.empty_cache()
            if out_dir is not None:
                qb.write_outputs(b, out_dir, final=False)


def main(argv=None) -> int:
    return script_main(argv, __doc__, "quant_sw", sweep, "tests/test_kernels_quant_swap.py", procs=14)


if __name__ == "__main__":
    raise SystemExit(main())
