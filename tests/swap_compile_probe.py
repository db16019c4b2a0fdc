"""Compile `quant_swap`'s fp8 swap-AB kernel for sm_90 with the installed Triton (no GPU needed) and print as JSON its
registers, spills and shared memory and how many of its programs fit on one SM (`i4_compile_probe.resident`):
`python tests/swap_compile_probe.py BLOCK_N BLOCK_M NUM_STAGES` (activations pre-quantized, split-K, 4 warps)."""

import inspect
import json
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from i4_compile_probe import resident
from ws_compile_probe import _ptxas_usage
from wmtp.measure.kernels.quant_swap import fp8_swap_kernel

PTRS = {"A": "*fp8e4nv", "A_s": "*fp32", "Aq": "*fp8e4nv", "Aq_s": "*fp32", "W": "*fp8e4nv", "W_s": "*fp32",
        "Out": "*bf16", "Part": "*fp32", "Count": "*i32"}


def main(block_n: int, block_m: int, stages: int) -> dict:
    params = list(inspect.signature(fp8_swap_kernel.fn).parameters)
    const = dict(ACT=0, SPLIT=True, BLOCK_N=block_n, BLOCK_M=block_m, UPCAST=False, ROUND_FP32=False,
                 FP8_MAX_C=448.0, EPS=1e-12, PDL=False, PF_LINES=4)
    sig = {p: "constexpr" if p in const else PTRS.get(p, "i32") for p in params}
    div = [p for p in params if p.startswith("stride") or sig[p].startswith("*")]
    src = ASTSource(fp8_swap_kernel, sig, constexprs={(params.index(k),): v for k, v in const.items()},
                    attrs={(params.index(p),): [["tt.divisibility", 16]] for p in div})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": stages})
    usage = _ptxas_usage(compiled.asm["ptx"])
    shared = compiled.metadata.shared
    return {"kind": "fp8_swap", "block_n": block_n, "block_m": block_m, "stages": stages, "shared": shared, **usage,
            "resident": resident(usage["registers"], 4, shared), "triton": triton.__version__}


if __name__ == "__main__":
    print(json.dumps(main(*map(int, sys.argv[1:4]))))
