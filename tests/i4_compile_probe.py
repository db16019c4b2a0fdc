"""Compile `quant_mma_i4`'s dense or grouped kernel for sm_90 with the installed Triton (no GPU needed) and print as
JSON its registers and spills a thread (ptxas -v), its shared memory, and how many of its programs fit on one H100 /
H200 SM by those (`sm90_build.resident`): `python tests/i4_compile_probe.py dense|moe NUM_WARPS SUB_MMA PF [TOK2]`.
Run by tests/test_kernels_quant_mma_i4.py in a process without Triton's interpreter, and on the lent GPU's Triton by
the device runs."""

import json
import sys

from sm90_build import build, occupancy
from wmtp.measure.kernels.quant_mma_i4 import int4_mma_kernel, int4_mma_moe_kernel

PTRS = {"A32": "*i32", "W": "*i32", "W_s": "*bf16", "Out": "*bf16", "Part": "*fp32", "Count": "*i32",
        "route_w": "*fp32", "ids": "*i32"}


def main(kind: str, warps: int, sub: bool, pf: bool, tok2: bool = False) -> dict:
    const = dict(NW=warps, SPLIT=True, EMU=False, SUB_MMA=sub, EVEN_K=True, PF=pf)
    const.update(dict(TOK2=tok2) if kind == "dense" else dict(A_IS_PAIRS=False, SCALE=True))
    compiled = build(int4_mma_kernel if kind == "dense" else int4_mma_moe_kernel, const, PTRS, warps)
    return {"kind": kind, "warps": warps, "sub_mma": sub, "prefetch": pf, "tok2": tok2, **occupancy(compiled, warps)}


if __name__ == "__main__":
    a = sys.argv[1:]
    print(json.dumps(main(a[0], int(a[1]), a[2] in ("1", "True"), a[3] in ("1", "True"),
                          len(a) > 4 and a[4] in ("1", "True"))))
