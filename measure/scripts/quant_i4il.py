"""Round 7's int4 GEMV (issue 17): interleaved weight words read with the activations as bf16 pairs
(`quant_gemv_int4.interleave_int4`, MODE_IL of the quad kernel, clamped reads where K is whole groups) against the
kernels path='auto' takes today and the torch peers, on every dense shape (`quant_bench.DENSE_DEFAULT`) of q35 /
q122 / nem at M = 1, 2, 4, 8, 16 (the round-7 variants up to M = 4, `_il` up to 8).

Run on a GPU (with wmtp installed):
    python3 -m wmtp.measure.scripts.quant_i4il --out DIR [--procs 14] [--budget-s 150]
Same method and outputs as `quant_i4` (compile workers first; our kernels checked against fp32 torch on each model's
first dense shape at every M; CUDA-graph replay over weight copies exceeding 3x the L2, L2 flushed before each
replay, the 2 GiB copy ceiling of the same run). The interleaved copies are made before timing (an offline repack,
as engines repack checkpoints for their kernels). Kernel names (`wmtp_int4_group` + suffix): `_auto` path='auto'
(today: the quad kernel with 4-wide tiles at M = 1 up to 16 MiB of codes, else round 4's step; swap-AB at 2..16);
`_gemv[pk]` round 4's packed step; `_gemv[q-bn4]` the quad kernel, 4-wide tiles; `_swap[bytes]` the swap-AB kernel;
`_il` interleaved with the launcher's plan (4-wide tiles at M = 1 up to 16 MiB of codes, else 32 / 16);
`_il[bnB]` B-wide tiles; `_il[xs]` activations through shared memory; `_il[c4]` split-K for 4 programs per SM;
`_il[w8]` 8 warps. Peers: torch_bf16 (bf16 weights, 4x the bytes), torch_int4pack_mm (tinygemm).
"""

from __future__ import annotations

import torch

from wmtp.measure.scripts import quant_bench as qb
from wmtp.measure.scripts.quant_bk import items, script_main
from wmtp.measure.scripts.quant_i4 import run_dense

_IL = {"": {}, "[bn4]": dict(block_n=4), "[bn8]": dict(block_n=8), "[bn16]": dict(block_n=16),
       "[bn32]": dict(block_n=32), "[xs]": dict(step="quad_xs"), "[c4]": dict(ctas=4), "[w8]": dict(num_warps=8)}
VARIANTS = {"_auto": dict(path="auto"), "_gemv[pk]": dict(path="gemv", step="packed"),
            "_gemv[q-bn4]": dict(path="gemv", step="quad", block_n=4),
            "_swap[bytes]": dict(path="swap", swap_words=False),
            **{f"_il{t}": {"layout": "interleaved", "max_m": 8 if not t else 4, **c} for t, c in _IL.items()}}


def sweep(b, models, keep, out_dir=None):
    """Every dense shape of `quant_bk.items`; our kernels checked at every M on each model's first shape."""
    seen = set()
    for model, kind, comp, shape in items(models):
        if kind != "dense":
            continue
        run_dense(b, model, comp, *shape, check=model not in seen, keep=keep, variants=VARIANTS)
        seen.add(model)
        torch.cuda.empty_cache()
        if out_dir is not None:
            qb.write_outputs(b, out_dir, final=False)


def main(argv=None) -> int:
    return script_main(argv, __doc__, "quant_i4il", sweep, "tests/test_kernels_quant_i4il.py", procs=14)


if __name__ == "__main__":
    raise SystemExit(main())
