"""Compile `quant_mma_i4`'s dense or grouped kernel for sm_90 with the installed Triton (no GPU needed) and print as
JSON its registers and spills a thread (ptxas -v), its shared memory, and how many of its programs fit on one H100 /
H200 SM by those (65536 registers, 64 warps, 32 programs, 227 KiB of shared memory):
`python tests/i4_compile_probe.py dense|moe NUM_WARPS SUB_MMA PF [TOK2]`. Run by tests/test_kernels_quant_mma_i4.py
in a process without Triton's interpreter, and on the lent GPU's Triton by the device runs."""

import inspect
import json
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from ws_compile_probe import _ptxas_usage
from wmtp.measure.kernels.quant_mma_i4 import int4_mma_kernel, int4_mma_moe_kernel

PTRS = {"A32": "*i32", "W": "*i32", "W_s": "*bf16", "Out": "*bf16", "Part": "*fp32", "Count": "*i32",
        "route_w": "*fp32", "ids": "*i32"}


def resident(registers: int, warps: int, shared: int) -> int:
    """Programs of `warps` warps that fit on one sm_90 SM: registers allocated per warp in units of 256 (8 a
    thread), at most 64 warps and 32 programs, 227 KiB of shared memory."""
    per_warp = -(-registers // 8) * 8 * 32
    fit = min(32, 64 // warps, 65536 // (per_warp * warps))
    return min(fit, 232448 // shared) if shared else fit


def main(kind: str, warps: int, sub: bool, pf: bool, tok2: bool = False) -> dict:
    kernel = int4_mma_kernel if kind == "dense" else int4_mma_moe_kernel
    params = list(inspect.signature(kernel.fn).parameters)
    const = dict(NW=warps, SPLIT=True, EMU=False, SUB_MMA=sub, EVEN_K=True, PF=pf)
    const.update(dict(TOK2=tok2) if kind == "dense" else dict(A_IS_PAIRS=False, SCALE=True))
    sig = {p: "constexpr" if p in const else PTRS.get(p, "i32") for p in params}
    div = [p for p in params if p.startswith("stride") or sig[p].startswith("*")]  # as a launch specializes them
    src = ASTSource(kernel, sig, constexprs={(params.index(k),): v for k, v in const.items()},
                    attrs={(params.index(p),): [["tt.divisibility", 16]] for p in div})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    usage = _ptxas_usage(compiled.asm["ptx"])
    shared = compiled.metadata.shared
    return {"kind": kind, "warps": warps, "sub_mma": sub, "prefetch": pf, "tok2": tok2, "shared": shared, **usage,
            "resident": resident(usage["registers"], warps, shared), "triton": triton.__version__}


if __name__ == "__main__":
    a = sys.argv[1:]
    print(json.dumps(main(a[0], int(a[1]), a[2] in ("1", "True"), a[3] in ("1", "True"),
                          len(a) > 4 and a[4] in ("1", "True"))))
