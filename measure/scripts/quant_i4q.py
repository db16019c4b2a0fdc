"""Round 6's int4 kernels (issue 17) against round 4's packed GEMV step, the tensor-core kernel and the torch peers,
on every dense shape (`quant_bench.DENSE_DEFAULT`) of q35 / q122 / nem at M = 1, 2, 4, 8, 16.

Run on a GPU (with wmtp installed):
    python3 -m wmtp.measure.scripts.quant_i4q --out DIR [--procs 14] [--budget-s 150]
Same method and outputs as `quant_i4` (compile workers first; our kernels checked against fp32 torch on each model's
first dense shape at every M; CUDA-graph replay over weight copies exceeding 3x the L2, L2 flushed before each
replay, the 2 GiB copy ceiling of the same run). Kernel names (`wmtp_int4_group` + suffix): unbracketed, the
tensor-core kernel (path 'dot', BLOCK_K 128); `_gemv[pk]` round 4's packed step with the launcher's plan (the
default up to 8 rows before this round); `_gemv[q-bn4]` the quad-word kernel (`quant_gemv_int4.int4_quad_kernel`:
16-byte weight loads, each thread loading the activations of its own words) with 4-wide tiles; `_swap` the swap-AB
tensor-core kernel (`quant_swap_i4`: weights dequantized once per weight for all rows; int32 word reads, 64-wide
tiles, split-K for 4 programs per SM, 4 stages, 4 warps), `[bytes]` uint8 reads (the launcher's default since),
`[bn128]` 128-wide tiles, `[c8]` / `[c2]` split-K for 8 / 2 programs per SM, `[st3]` 3 stages, `[w8]` 8 warps; `[lop3]` byte reads
dequantized by packed bf16 `lop3` (`quant_swap_i4._NIB_ASM`), `[lop3-st3]` with 3 stages.
Call 1 of h200-quant-v7 timed more quad variants (`[q]`, `[q-xs]`, `[q-bn16]`, `[q-bn8]`, `[q-c1]`, `[q-c4]`,
`[q-sk1]`, `[q-w8]`: its README) with this script at commit 72598cf. Peers: torch_bf16, torch_int4pack_mm.
"""

from __future__ import annotations

import torch

from wmtp.measure.scripts import quant_bench as qb
from wmtp.measure.scripts.quant_bk import items, script_main
from wmtp.measure.scripts.quant_i4 import run_dense

_Q = {"-bn4": dict(block_n=4)}
_SWAP = {"": {}, "[bytes]": dict(swap_words=False), "[bn128]": dict(block_n=128), "[c8]": dict(ctas=8),
         "[c2]": dict(ctas=2), "[st3]": dict(num_stages=3), "[w8]": dict(num_warps=8)}
_SWAP = {t: {"swap_words": True, **c} for t, c in _SWAP.items()}  # word reads unless named, as timed in call 2
_SWAP.update({"[lop3]": dict(swap_words=False, swap_lop3=True), "[lop3-st3]": dict(swap_words=False, swap_lop3=True,
                                                                                      num_stages=3)})
VARIANTS = {"": dict(path="dot", block_k=128, prefetch=False), "_gemv[pk]": dict(path="gemv", step="packed"),
            **{f"_gemv[q{t}]": {"path": "gemv", "step": "quad", **c} for t, c in _Q.items()},
            **{f"_swap{t}": {"path": "swap", **c} for t, c in _SWAP.items()}}


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
    return script_main(argv, __doc__, "quant_i4q", sweep, "tests/test_kernels_quant_i4q.py", procs=14)


if __name__ == "__main__":
    raise SystemExit(main())
