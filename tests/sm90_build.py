"""What the compile probes of this folder share (`ws_compile_probe.py`, `i4_compile_probe.py`,
`swap_compile_probe.py`): a kernel built for sm_90 with the installed Triton, no GPU needed (as a launch would
specialize it: constexprs given, every other argument a pointer or an i32, pointers and strides 16-divisible), its
registers and spills by ptxas, and how many of its programs fit on one H100 / H200 SM."""

import inspect
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


def build(kernel, const: dict, ptrs: dict, num_warps: int, source=ASTSource, **options):
    """`kernel` (a @triton.jit or Gluon function; `source` its AST source class) compiled for sm_90: constexprs
    `const`, argument types `ptrs` (name -> '*bf16', 'fp32', ...; the rest i32)."""
    params = list(inspect.signature(kernel.fn).parameters)
    sig = {p: "constexpr" if p in const else ptrs.get(p, "i32") for p in params}
    div = [p for p in params if p.startswith("stride") or sig[p].startswith("*")]
    src = source(kernel, sig, constexprs={(params.index(k),): v for k, v in const.items()},
                 attrs={(params.index(p),): [["tt.divisibility", 16]] for p in div})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps, **options})


def ptxas_usage(ptx: str) -> dict:
    """Registers and spill bytes a thread uses, from Triton's own ptxas run again with -v on the PTX."""
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


def resident(registers: int, warps: int, shared: int) -> int:
    """Programs of `warps` warps that fit on one sm_90 SM: registers allocated per warp in units of 256 (8 a
    thread), at most 64 warps and 32 programs, 227 KiB of shared memory."""
    per_warp = -(-registers // 8) * 8 * 32
    fit = min(32, 64 // warps, 65536 // (per_warp * warps))
    return min(fit, 232448 // shared) if shared else fit


def occupancy(compiled, warps: int) -> dict:
    """A build's shared memory, ptxas registers and spills, and its resident programs an SM."""
    usage = ptxas_usage(compiled.asm["ptx"])
    shared = compiled.metadata.shared
    return {"shared": shared, **usage, "resident": resident(usage["registers"], warps, shared),
            "triton": triton.__version__}
