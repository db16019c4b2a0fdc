"""Issue 17, round 9: is the 4-bit GEMV limited by how many weight bytes each SM keeps in flight, or by how many
activation bytes its threads pull through L1 per weight byte?

Run on a GPU (with wmtp installed):
    python3 -m wmtp.measure.scripts.quant_i4occ --out DIR [--procs 14] [--budget-s 300]
Same method and outputs as `quant_i4` (compile workers first; every variant checked against fp32 torch on each
model's first dense shape at every M; CUDA-graph replay over weight copies exceeding 3x the L2, the L2 flushed
before each replay, the 2 GiB copy ceiling of the same run), on every dense shape of q35 / q122 / nem at M = 1, 2.

Variants of the quad-word kernel (`quant_gemv_int4.int4_quad_kernel`, `wmtp_int4_group_gemv[q...]`):
- `bnB-gG`: B-wide tiles, G 128-groups a step (`quant_gemm.INT4_QUAD_G`), the launcher's split-K (about 2
  programs per SM, long K loops); with G <= 2 the 32 threads of a warp cover 8 / 4 quads of 4 / 8 rows at the same
  K, so one 16-byte activation load per word serves several rows (1-2 L1 wavefronts a warp instead of 4);
- `-1s`: split-K so that each program does exactly one step (no K loop): many small programs, few registers,
  every program's weight loads issued at once, the occupancy of a streaming read;
- `-wW`: W warps.
References in the same run: path='auto' (`wmtp_int4_group`: the quad kernel with 4-wide tiles at M = 1 up to 16 MB,
else round 4's packed GEMV step at M = 1 and the swap-AB kernel at M = 2), the packed step (`_gemv[pk]`), the peers
(torch_bf16, torch_int4pack_mm).
"""

from __future__ import annotations

import triton

from wmtp.measure.kernels import quant_gemm as qg
from wmtp.measure.scripts import quant_i4
from wmtp.measure.scripts.quant_bk import script_main
from wmtp.measure.scripts.quant_i4 import sweep as i4_sweep

_Q = {"bn32-g1": (32, 1, 0, 4), "bn32-g2": (32, 2, 0, 4), "bn16-g2": (16, 2, 0, 4), "bn32-g4": (32, 4, 0, 4),
      "bn32-g1-1s": (32, 1, 1, 4), "bn32-g2-1s": (32, 2, 1, 4), "bn16-g4-1s": (16, 4, 1, 4),
      "bn8-g4-1s": (8, 4, 1, 4), "bn8-g8-1s": (8, 8, 1, 4), "bn16-g8-1s-w8": (16, 8, 1, 8),
      "bn32-g2-4s": (32, 2, 4, 4)}  # tag -> (block_n, G, steps per program (0: the launcher's split), warps)
VARIANTS = {"": dict(path="auto"), "_gemv[pk]": dict(path="gemv", step="packed"),
            **{f"_gemv[q-{t}]": dict(path="gemv", step="quad", block_n=bn, g=g, steps=s, num_warps=w)
               for t, (bn, g, s, w) in _Q.items()}}
MS = (1, 2)


def call(launch, args, cfg, **kw):
    """`quant_i4.call` with the quad kernel's groups per step (`g`) and, with `steps`, the split-K that gives each
    program that many steps, set for the call only."""
    cfg = dict(cfg)
    g, steps = cfg.pop("g", None), cfg.pop("steps", 0)
    if steps:
        cfg["split_k"] = triton.cdiv(triton.cdiv(args[0].shape[1], qg.GROUP), g * steps)
    saved = qg.INT4_QUAD_G
    qg.INT4_QUAD_G = g
    try:
        return _i4_call(launch, args, cfg, **kw)
    finally:
        qg.INT4_QUAD_G = saved


_i4_call = quant_i4.call  # the original: `sweep` puts `call` in its place while it runs


def sweep(b, models, keep, out_dir=None):
    """Dense shapes only, at `MS`, through `quant_i4.sweep` with this round's variants and `call`."""
    saved = quant_i4.VARIANTS, quant_i4.MS, quant_i4.call
    quant_i4.VARIANTS, quant_i4.MS, quant_i4.call = VARIANTS, MS, call
    try:
        i4_sweep(b, models, lambda kernel, model, comp: "moe" not in kernel and keep(kernel, model, comp), out_dir)
    finally:
        quant_i4.VARIANTS, quant_i4.MS, quant_i4.call = saved


def main(argv=None) -> int:
    return script_main(argv, __doc__, "quant_i4occ", sweep, "tests/test_kernels_quant_i4q.py", procs=14)


if __name__ == "__main__":
    raise SystemExit(main())
