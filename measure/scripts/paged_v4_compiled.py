"""What Triton compiled for the paged-attention kernels that ran in this process (`paged_v4_bench.py`): per
compiled kernel its constants, which int arguments were specialized as divisible by 16, warps, stages, shared
memory, registers, spills, the PTX's cp.async / wgmma / mma.sync counts, the SASS's LDGSTS / LDG / HGMMA counts
(default tiles only: the disassembler is slow), and the blocks per SM that registers, shared memory and threads
allow on an H200 (sm_90: 64K registers, 228 KiB shared memory, 2048 threads, 32 blocks per SM).
"""

from __future__ import annotations

import csv
from pathlib import Path

COLS = ["kernel", "constants", "div16_args", "num_warps", "num_stages", "shared", "n_regs", "n_spills",
        "ptx_cp_async", "ptx_cp_async_wait", "ptx_wgmma", "ptx_mma_sync", "ptx_ld_global", "sass_LDGSTS",
        "sass_LDG", "sass_HGMMA", "sass_HMMA", "blocks_per_sm"]
SASS_FOR = ({"BLOCK_M": 128, "BLOCK_N": 64}, {"BLOCK_M": 16, "DECODE": True}, {"BLOCK_M": 64, "BLOCK_N": 32},
            {"ROWS": 16})


def blocks_per_sm(n_regs: int, warps: int, shared: int) -> int:
    """Resident blocks per SM on sm_90 from registers (allocated per warp in units of 256), shared memory (1 KiB
    reserved per block) and threads."""
    regs_warp = -(-max(n_regs, 1) * 32 // 256) * 256
    by_regs = 65536 // (regs_warp * warps)
    by_smem = 233472 // (shared + 1024)
    return int(min(32, 2048 // (32 * warps), by_regs, by_smem))


def _constants(k) -> tuple[dict, list]:
    src = getattr(k, "src", None)
    names = src.fn.arg_names
    consts = {names[key[0]]: v for key, v in getattr(src, "constants", {}).items()}
    consts["K"] = src.signature.get("K", "?")  # the KV pool's element type
    div = sorted(names[key[0]] for key, a in getattr(src, "attrs", {}).items()
                 if any(x[0] == "tt.divisibility" for x in a))
    return consts, div


def _row(name: str, k, sass: bool) -> dict:
    try:
        consts, div = _constants(k)
    except Exception:
        consts, div = {}, []
    md = k.metadata
    ptx = k.asm.get("ptx", "")
    row = dict(kernel=name, constants=";".join(f"{a}={b}" for a, b in sorted(consts.items())),
               div16_args=";".join(div), num_warps=md.num_warps, num_stages=md.num_stages, shared=md.shared,
               n_regs=k.n_regs, n_spills=k.n_spills, ptx_cp_async=ptx.count("cp.async.c"),
               ptx_cp_async_wait=ptx.count("cp.async.wait_group"), ptx_wgmma=ptx.count("wgmma.mma_async"),
               ptx_mma_sync=ptx.count("mma.sync"), ptx_ld_global=ptx.count("ld.global"),
               blocks_per_sm=blocks_per_sm(k.n_regs, md.num_warps, md.shared))
    if sass and any(all(consts.get(a) == b for a, b in sel.items()) for sel in SASS_FOR):
        try:
            text = k.asm["sass"]
            row.update(sass_LDGSTS=text.count("LDGSTS"), sass_LDG=text.count("LDG."),
                       sass_HGMMA=text.count("HGMMA"), sass_HMMA=text.count("HMMA"))
        except Exception as e:
            row.update(sass_LDGSTS=f"error: {type(e).__name__}")
    return row


def kernel_rows(path: Path, sass_limit: int = 16) -> int:
    """Write one row per compiled rows / sub split kernel of this process to `path`; returns the row count."""
    from wmtp.measure.kernels import paged_attention as pa
    from wmtp.measure.kernels import paged_rows as pr
    rows = []
    for name, fn in (("rows", pa._rows_split_kernel), ("sub", pr._sub_split_kernel), ("v1", pa._attn_split_kernel)):
        for cache in getattr(fn, "device_caches", {}).values():
            for k in list(cache[0].values()):
                if not hasattr(k, "metadata"):
                    continue
                rows.append(_row(name, k, sum(1 for r in rows if r.get("sass_LDGSTS") not in (None, "")) < sass_limit))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLS)
        w.writeheader()
        w.writerows(rows)
    return len(rows)
