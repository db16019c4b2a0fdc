"""Compile the ws kernel for sm_90 with the installed Triton (no GPU needed) and print what the PTX holds as JSON:
`python tests/ws_compile_probe.py ROWS HEAD_DIM DECODE CONSUMERS [MAX_ROWS [TRIGGER [KV8 [LOOP]]]]` (run by
tests/test_kernels_ws.py in a process without Triton's interpreter, which cannot compile Gluon)."""

import inspect
import re
import json
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource

from wmtp.kernel_plan import ws_tiling
from wmtp.measure.kernels.paged_ws import REGS, REGS8, _ws_split_kernel


def main(rows: int, head_dim: int, decode: bool, consumers: int, max_rows: int = 128, trigger: int = 0,
         kv8: int = 0, loop: int = 0) -> dict:
    params = list(inspect.signature(_ws_split_kernel.fn).parameters)
    bm, mb, bn, ns, nw = ws_tiling(rows, head_dim, max_rows=max_rows, kv_fp8=bool(kv8))
    p_regs, c_regs, x_regs = REGS8[consumers] if kv8 else (*REGS[consumers], 80)
    const = dict(M_BLOCKS=mb, BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=head_dim, STAGES=ns, P_WARPS=4, P_REGS=p_regs,
                 DECODE=decode, CONSUMERS=consumers, C_REGS=c_regs, TRIGGER=trigger, KV8=kv8, X_REGS=x_regs,
                 LOOP=loop)
    kv = "*fp8e4nv" if kv8 else "*bf16"
    ptrs = {"Q": "*bf16", "K": kv, "V": kv, "qo_indptr": "*i32", "kv_indptr": "*i32", "kv_indices": "*i32",
            "MidO": "*fp32", "MidL": "*fp32", "qk_scale": "fp32", "v_scale": "fp32"}
    sig = {p: "constexpr" if p in const else ptrs.get(p, "i32") for p in params}
    div = [p for p in params if p.startswith("stride") or sig[p].startswith("*")]  # as a launch specializes them
    src = GluonASTSource(_ws_split_kernel, sig, constexprs={(params.index(k),): v for k, v in const.items()},
                         attrs={(params.index(p),): [["tt.divisibility", 16]] for p in div})
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": nw // consumers})
    ptx = kernel.asm["ptx"]
    return {"shared": kernel.metadata.shared, "setmaxnreg": "setmaxnreg" in ptx, "cp_async": "cp.async.cg" in ptx
            or "cp.async.ca" in ptx, "wgmma": "wgmma.mma_async" in ptx,
            "arrive_noinc": "cp.async.mbarrier.arrive.noinc" in ptx,
            "launch_dependents": ptx.count("griddepcontrol.launch_dependents"),
            "cvt_fp8": "cvt.rn.f16x2.e4m3x2" in ptx,
            "named_barriers": sorted(set(re.findall(r"bar.sync \t?(\d+, \d+)", ptx))),
            **_ptxas_usage(ptx)}


def _ptxas_usage(ptx: str) -> dict:
    """Registers and spill bytes a thread uses, from Triton's own ptxas run again with -v on the PTX."""
    import os
    import subprocess
    import tempfile
    bindir = os.path.dirname(triton.knobs.nvidia.ptxas.path)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        for name in ("ptxas", "ptxas-blackwell"):  # the first whose PTX version is new enough (Triton's choice too)
            res = subprocess.run([os.path.join(bindir, name), "-arch=sm_90a", "-v", src, "-o",
                                  os.path.join(tmp, "k.cubin")], capture_output=True, text=True)
            if res.returncode == 0:
                break
    log = res.stdout + res.stderr
    spill = re.search(r"(\d+) bytes spill stores", log)
    regs = re.search(r"Used (\d+) registers", log)
    return {"spill_stores": int(spill.group(1)) if spill else None, "registers": int(regs.group(1)) if regs else None}


if __name__ == "__main__":
    r, h, d, c, *mr = (int(x) for x in sys.argv[1:])
    print(json.dumps(main(r, h, bool(d), c, *mr)))
