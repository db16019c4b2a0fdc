"""Compile `quant_swap`'s fp8 swap-AB kernel for sm_90 with the installed Triton (no GPU needed) and print as JSON its
registers, spills and shared memory and how many of its programs fit on one SM (`sm90_build.resident`):
`python tests/swap_compile_probe.py BLOCK_N BLOCK_M NUM_STAGES` (activations pre-quantized, split-K, 4 warps)."""

import json
import sys

from sm90_build import build, occupancy
from wmtp.measure.kernels.quant_swap import fp8_swap_kernel

PTRS = {"A": "*fp8e4nv", "A_s": "*fp32", "Aq": "*fp8e4nv", "Aq_s": "*fp32", "W": "*fp8e4nv", "W_s": "*fp32",
        "Out": "*bf16", "Part": "*fp32", "Count": "*i32"}


def main(block_n: int, block_m: int, stages: int) -> dict:
    const = dict(ACT=0, SPLIT=True, BLOCK_N=block_n, BLOCK_M=block_m, UPCAST=False, ROUND_FP32=False,
                 FP8_MAX_C=448.0, EPS=1e-12, PDL=False, PF_LINES=4)
    compiled = build(fp8_swap_kernel, const, PTRS, 4, num_stages=stages)
    return {"kind": "fp8_swap", "block_n": block_n, "block_m": block_m, "stages": stages, **occupancy(compiled, 4)}


if __name__ == "__main__":
    print(json.dumps(main(*map(int, sys.argv[1:4]))))
