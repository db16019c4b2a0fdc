"""Compile the ws kernel for sm_90 with the installed Triton (no GPU needed) and print what the PTX holds as JSON:
`python tests/ws_compile_probe.py ROWS HEAD_DIM DECODE CONSUMERS [MAX_ROWS [TRIGGER [KV8 [LOOP [OPTS]]]]]`
(OPTS: `paged_ws_loop.ws_loop`'s option bits) (run by
tests/test_kernels_ws.py in a process without Triton's interpreter, which cannot compile Gluon)."""

import re
import json
import sys

from triton.experimental.gluon._runtime import GluonASTSource

from sm90_build import build, ptxas_usage

from wmtp.kernel_plan import ws_tiling
from wmtp.measure.kernels.paged_ws import REGS, REGS8, _ws_split_kernel


def main(rows: int, head_dim: int, decode: bool, consumers: int, max_rows: int = 128, trigger: int = 0,
         kv8: int = 0, loop: int = 0, opts: int = 0) -> dict:
    bm, mb, bn, ns, nw = ws_tiling(rows, head_dim, max_rows=max_rows, kv_fp8=bool(kv8))
    p_regs, c_regs, x_regs = REGS8[consumers] if kv8 else (*REGS[consumers], 80)
    const = dict(M_BLOCKS=mb, BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=head_dim, STAGES=ns, P_WARPS=4, P_REGS=p_regs,
                 DECODE=decode, CONSUMERS=consumers, C_REGS=c_regs, TRIGGER=trigger, KV8=kv8, X_REGS=x_regs,
                 LOOP=loop, OPTS=opts)
    kv = "*fp8e4nv" if kv8 else "*bf16"
    ptrs = {"Q": "*bf16", "K": kv, "V": kv, "qo_indptr": "*i32", "kv_indptr": "*i32", "kv_indices": "*i32",
            "MidO": "*fp32", "MidL": "*fp32", "qk_scale": "fp32", "v_scale": "fp32"}
    kernel = build(_ws_split_kernel, const, ptrs, nw // consumers, source=GluonASTSource)
    ptx = kernel.asm["ptx"]
    return {"shared": kernel.metadata.shared, "setmaxnreg": "setmaxnreg" in ptx, "cp_async": "cp.async.cg" in ptx
            or "cp.async.ca" in ptx, "wgmma": "wgmma.mma_async" in ptx,
            "arrive_noinc": "cp.async.mbarrier.arrive.noinc" in ptx,
            "launch_dependents": ptx.count("griddepcontrol.launch_dependents"),
            "cvt_fp8": "cvt.rn.f16x2.e4m3x2" in ptx,
            "named_barriers": sorted(set(re.findall(r"bar.sync \t?(\d+, \d+)", ptx))),
            "wgmma_forms": _wgmma_forms(ptx), "ex2": ptx.count("ex2.approx"),
            "wait_groups": sorted(set(int(n) for n in re.findall(r"wgmma.wait_group.sync.aligned (\d+)", ptx))),
            **ptxas_usage(ptx)}


def _wgmma_forms(ptx: str) -> dict:
    """'mNnNkN SS|RS' -> count of warpgroup MMAs in the PTX: RS takes its A operand from registers (a brace group
    after the accumulator's), SS from shared memory (a descriptor)."""
    forms: dict = {}
    for line in ptx.splitlines():
        if "wgmma.mma_async" not in line:
            continue
        shape = re.search(r"m\d+n\d+k\d+", line).group(0)
        a_operand = line.split("}", 1)[1].strip().lstrip(",").strip()
        key = f"{shape} {'RS' if a_operand.startswith('{') else 'SS'}"
        forms[key] = forms.get(key, 0) + 1
    return forms


if __name__ == "__main__":
    r, h, d, c, *mr = (int(x) for x in sys.argv[1:])
    print(json.dumps(main(r, h, bool(d), c, *mr)))
