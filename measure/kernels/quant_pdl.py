"""Programmatic dependent launch (PDL) for the decode GEMMs of `quant_gemm` (issue 17, round 8).

Why: at decode a weight-bound GEMM of 8-76 MB streams for 2-19 us, and each call carries a fixed cost of 4-9 us
(measure/results/h200-quant-v6): the launch, the ramp-up of a few hundred programs and the tail of the grid. In a
decode step the GEMM runs right after another kernel of the same CUDA graph. With PDL (Hopper and newer) the GPU may
schedule the GEMM's programs while that kernel still runs; each program then
1. lets the next kernel be scheduled as well (`gdc_launch_dependents`),
2. asks L2 for the first lines of its own weight rows (`prefetch.global.L2`): weights are constants, so reading them
   before the previous kernel has finished is safe, and the DRAM pipe fills during the previous kernel's tail,
3. waits for the previous grid to complete and its writes to be visible (`gdc_wait`) before it reads anything that
   kernel may have written (activations, scales, split-K partials and semaphores).
Everything after the wait is the unchanged kernel, so the outputs are bit-identical with and without PDL.

`ENABLED` (off, see below) is read at each call: the benchmark (`measure/scripts/quant_pdl_bench.py`) times both. PDL needs a
CUDA GPU of compute capability >= 9 and is never used under TRITON_INTERPRET=1 (the interpreter has no PTX).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wmtp.measure.kernels.quant_formats import interpreting

# Off: measured in measure/results/h200-quant-v9. PDL helps only GEMM after GEMM with our own early trigger (M = 1
# fp8, IEEE-division code: 1.15x geomean), is mixed with the division-free GEMV, slows the fp8 swap-AB path (0.92x)
# and is slower on 105 of 108 cells behind a kernel that does not trigger its dependents (an engine step's case).
ENABLED = False
LINE_BYTES = tl.constexpr(128)  # a constexpr: read inside the kernels


def use_pdl(device: torch.device) -> bool:
    """Whether a launch on `device` runs with PDL now."""
    return (ENABLED and device.type == "cuda" and not interpreting()
            and torch.cuda.get_device_capability(device)[0] >= 9)


def pdl_launch(device: torch.device, allowed: bool = True) -> dict:
    """Keyword arguments for a launch of a kernel with a `PDL` constexpr: the constexpr, and with PDL the launch option
    that makes it a programmatic dependent launch (`allowed`: the call may use it, e.g. dense calls only)."""
    return {"PDL": True, "launch_pdl": True} if allowed and use_pdl(device) else {"PDL": False}


@triton.jit
def pdl_enter(row_ptrs, start, last, LINES: tl.constexpr, LINE: tl.constexpr):
    """Steps 1-3 of the module docstring for one program: row_ptrs [R] the first element of each of its weight rows
    (rows past the matrix clamped to its last row by the caller), elements [start, start + LINES * LINE) of each row
    asked for, one request per LINE elements (128 bytes), offsets clamped to `last`."""
    tl.extra.cuda.gdc_launch_dependents()
    offs = tl.minimum(start + tl.arange(0, LINES) * LINE, last)
    tl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l",
                              [row_ptrs[:, None] + offs[None, :]], dtype=tl.int32, is_pure=False, pack=1)
    tl.extra.cuda.gdc_wait()
