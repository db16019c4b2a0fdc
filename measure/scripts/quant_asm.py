"""Instruction counts of the innermost loop of compiled Triton kernels found in the on-disk cache (issue 17: do the
int4 GEMV's weight loads compile to 16-byte loads?).

    python3 -m wmtp.measure.scripts.quant_asm KERNEL_NAME [--cache DIR]
For every cached compile of KERNEL_NAME: its warps and the tile shapes of its loads (from the cache's json and TTGIR,
which identify the specialization), and in the SASS of its
largest backward-branch loop (cuobjdump, shipped with Triton) the count of all instructions, global loads (LDG),
16-byte global loads (LDG.E.128), shared loads (LDS), barriers (BAR), packed bf16 FMAs (HFMA2) and wgmma (HGMMA);
one line each.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
from pathlib import Path

import triton

_PATTERNS = {"LDG": r"\bLDG", "LDG128": r"LDG\.E\.128", "LDS": r"\bLDS", "BAR": r"\bBAR", "HFMA2": r"HFMA2",
             "HGMMA": r"HGMMA"}


def loop_counts(sass: str) -> dict:
    """Counts of `_PATTERNS` (and 'instrs') in the largest loop closed by a backward branch."""
    rows = [(int(m.group(1), 16), line) for line in sass.splitlines()
            if (m := re.match(r"\s*/\*([0-9a-f]{4,})\*/", line))]
    best = (0, 0, -1)
    for addr, line in rows:
        b = re.search(r"BRA (?:`\(\.L_x_\d+\) )?(0x[0-9a-f]+)", line)
        if b and int(b.group(1), 16) < addr:
            lo = int(b.group(1), 16)
            n = sum(1 for a, _ in rows if lo <= a <= addr)
            best = max(best, (n, lo, addr))
    body = [line for a, line in rows if best[1] <= a <= best[2]]
    return {"instrs": best[0], **{k: sum(1 for line in body if re.search(p, line)) for k, p in _PATTERNS.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernel")
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("TRITON_CACHE_DIR",
                                                                       Path.home() / ".triton" / "cache")))
    args = ap.parse_args(argv)
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    found = sorted(args.cache.glob(f"*/{args.kernel}.cubin"))
    if not found:
        print(f"error: no cached {args.kernel}.cubin under {args.cache}")
        return 1
    for cubin in found:
        meta = json.loads(cubin.with_suffix(".json").read_text())
        ttgir = cubin.with_suffix(".ttgir").read_text() if cubin.with_suffix(".ttgir").exists() else ""
        shapes = re.findall(r"tt\.load [^\n]*?: tensor<([0-9x]+)x!tt\.ptr<(\w+)>", ttgir)
        loads = ",".join(f"{a}x{b}" for a, b in shapes)
        sass = subprocess.run([str(tool), "-sass", str(cubin)], capture_output=True, text=True).stdout
        print(args.kernel, f"warps={meta.get('num_warps')}", f"loads={loads}", loop_counts(sass))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
