"""The split merge's share of a short decode (issue 18: nem at 64K, B = 1 takes 28.4 us against contiguous SDPA's
26.6; the ws split kernel alone 24.1, the merge adds 4.3: measure/results/h200-ws3). Does a merge that folds every
split in one round (one trip to memory, not three of 32 splits), more or fewer programs, or a programmatic dependent
launch scheduled from the end of the split kernel's loop (not from its start, which was slower) take less of it?
Run 2 (the merge adopted) timed it against the ws decode before, without PDL, and with a deeper page-table lookahead
in the producer (variants `pf1` / `pf2`: not adopted and removed from the kernel since; they run at commit 31b2cbc),
at B = 1 and at B = 4 / 16 (`--batch-cases`, beside the shipped default path: the rows kernel decodes there).

For the three head shapes at 4K-1M keys (B = 1 decode, and a d = 7 verify at 64K and 1M) it times, in rounds of
alternating order: the ws decode with each merge variant, the split kernel alone (merge skipped), a graph of one
one-element fill (what the timing method itself costs), and torch SDPA on contiguous K/V. Every variant is first
checked against fp64 torch (`paged_ws_bench.check`: three requests, NaN-poisoned output, the plan's and 64 forced
splits); a failing variant is not timed.

Method: `paged_v2_bench.Run` (CUDA-graph replay, L2 flushed before each replay, CUDA events, median); random permuted
page-size-1 slots; rows in OUT/paged_ws_merge.csv, the copy ceiling of the same run in OUT/ceilings.csv.

    python3 measure/scripts/merge_bench.py --out $OUT/merge        # on a Hopper GPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from wmtp.measure.scripts import paged_v2_bench as v2
from wmtp.measure.scripts import paged_ws_bench as wsb

OLD = dict(split_block=32, block_d=64)  # the merge before this bench: 32 splits a round, 64 dims a program
VARIANTS = {  # every option spelled out, so a name means the same whatever ws_attention's defaults
    # run 1 (commit 51a8454, whose defaults were pdl=False and the OLD merge: its `ws` is `v0` here)
    "ws": dict(pdl=False, merge=OLD),
    "m128": dict(pdl=False, merge=dict(split_block=128, block_d=64)),
    "m128-d32": dict(pdl=False, merge=dict(split_block=128, block_d=32)),
    "m128-d32-w2": dict(pdl=False, merge=dict(split_block=128, block_d=32, num_warps=2)),
    "m128-d16-w1": dict(pdl=False, merge=dict(split_block=128, block_d=16, num_warps=1)),
    "m128-d128": dict(pdl=False, merge=dict(split_block=128, block_d=128)),
    "late": dict(pdl="late", merge=OLD),
    "late-m128": dict(pdl="late", merge=dict(split_block=128, block_d=64)),
    "late-m128-d32": dict(pdl="late", merge=dict(split_block=128, block_d=32)),
    "start": dict(pdl="start", merge=OLD),
    "start-m128": dict(pdl="start", merge=dict(split_block=128, block_d=64)),
    # run 2: the adopted merge (splits a round: the next power of two up to 128; 32 dims a program; late trigger)
    "v0": dict(pdl=False, merge=OLD),
    "default": dict(pdl="late", merge=dict(block_d=32)),
    "nopdl": dict(pdl=False, merge=dict(block_d=32)),
}
RUN1 = "ws,m128,m128-d32,m128-d32-w2,m128-d16-w1,m128-d128,late,late-m128,late-m128-d32,start,start-m128"


def split_only(r, model, n, d):
    from wmtp.measure.kernels import paged_ws
    keep = paged_ws.merge_splits
    paged_ws.merge_splits = lambda mid_o, mid_l, out, pdl=False, **kw: out
    try:
        return wsb.timed(r, "split-only", model, n, 1, d, dict(pdl=False), True)
    finally:
        paged_ws.merge_splits = keep


def floor(r):
    x = torch.zeros(1, device=r.dev)
    base = dict(kernel="floor", impl="fill1", model="-", ctx=0, batch=1, d=0, kv="-", config="one-element fill",
                bytes=4)
    ms = r.time(base, lambda: x.fill_(1.0), 1e-3)
    print(f"floor (one-element fill) {ms * 1e3:.1f} us", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="nem,q35,q122")
    ap.add_argument("--ctxs", default="4096,16384,65536,262144,1048576")
    ap.add_argument("--verify-ctxs", default="65536,1048576")
    ap.add_argument("--variants", default=RUN1)
    ap.add_argument("--batch-cases", default="",
                    help="decodes at B > 1 as B:KEYS,... (e.g. 4:1048576,16:1048576), beside the shipped default path")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--deadline-s", type=float, default=420.0)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    r = wsb.Run(a.out, a.deadline_s, "merge")
    meta = dict(started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), torch=torch.__version__,
                device=torch.cuda.get_device_name(), argv=sys.argv[1:])
    (a.out / "paged_ws_merge.meta.json").write_text(json.dumps(meta, indent=1))
    from wmtp.measure.scripts.paged_v3_bench import write_ceilings
    write_ceilings(a.out / "ceilings.csv")
    models, names = a.models.split(","), a.variants.split(",")
    good = {(m, d, nm) for m in models for d in (1, 7) for nm in names if wsb.check(r, m, d, nm, VARIANTS[nm])}
    cases = ([(n, 1, 1) for n in map(int, a.ctxs.split(","))] + [(n, 1, 7) for n in map(int, a.verify_ctxs.split(","))]
             + [(int(c.split(":")[1]), int(c.split(":")[0]), 1) for c in a.batch_cases.split(",") if c])
    for i in range(a.rounds):
        floor(r)
        for m in models:
            for n, batch, d in cases:
                order = names if i % 2 == 0 else names[::-1]
                for nm in order:
                    if r.late():
                        print("deadline reached", flush=True)
                        return 0
                    if (m, d, nm) in good:
                        wsb.timed(r, nm, m, n, batch, d, VARIANTS[nm], True)
                if batch > 1:  # the shipped default path (the rows kernel at B >= 4 decode)
                    wsb.timed(r, "default-path", m, n, batch, d, {}, False)
                    continue
                split_only(r, m, n, d)
                if d == 1:  # (SDPA's verify of 7 queries takes a slow path: 21.8 ms at 1M, h200-anchors)
                    v2.sdpa(r, m, n, 1, d)
    r.f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
