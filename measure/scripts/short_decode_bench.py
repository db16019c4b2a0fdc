"""Short decodes at B = 1 (issue 18: nem at 64K takes 28.4 us against contiguous SDPA's 26.6; its split kernel
alone 24.1, the merge adds 4.3, measure/results/h200-ws3): does a smaller split count, whose merge reads fewer
partials, make the decode (split kernel + merge) faster? The ws decode at split counts from the plan's (one program
per SM) down to a quarter of it, beside the rows and sub kernels' defaults (sub with its fused merge: no second
launch) and torch SDPA on contiguous K/V, at 64K and 256K keys for the three head shapes.

Method: `paged_v2_bench.Run` (CUDA-graph replay, L2 flushed before each replay, CUDA events); rows in
OUT/short_decode.csv (`config` names the split count), the copy ceiling of the same run in OUT/ceilings.csv.

    python3 measure/scripts/short_decode_bench.py --out $OUT                  # on the GPU
    TRITON_INTERPRET=1 python3 measure/scripts/short_decode_bench.py --smoke --out /tmp/x   # CPU, tiny sizes
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wmtp.measure.scripts import paged_v2_bench as v2
from wmtp.measure.scripts.fp8_decode_ablation import release


class ShortRun(v2.Run):
    CSV = "short_decode.csv"


def split_counts(plan_splits: int) -> list[int]:
    """The plan's split count and smaller ones down to a quarter of it (distinct, descending)."""
    return sorted({max(1, round(plan_splits * f)) for f in (1, 0.75, 0.5, 0.375, 0.25)}, reverse=True)


def run(r: v2.Run, models, ctxs, rounds: int, sm_count: int) -> None:
    from wmtp.kernel_plan import ws_plan

    for model in models:
        hq, hkv, hd = v2.SHAPES[model]
        for n in ctxs:
            # (smoke shapes have head dims the ws kernel does not take: their rows fail as rows of the CSV)
            splits = ws_plan(1, hkv, hq // hkv, 1, hd, n, sm_count).splits if hd in (64, 128, 256) else 4
            for i in range(rounds):
                for s in split_counts(splits):
                    if r.late():
                        return
                    ms = v2.bench(r, "ws", model, n, n, 1, 1, kernel="ws", num_splits=s)
                    print(f"{model} {n} ws splits={s} round {i}: {ms * 1e3:.1f} us", flush=True)
                for kernel, kw in (("rows", {}), ("sub", {"merge": "fused"}), ("sub", {})):
                    ms = v2.bench(r, f"{kernel}{'_fused' if kw else ''}", model, n, n, 1, 1, kernel=kernel, **kw)
                    print(f"{model} {n} {kernel} {kw} round {i}: {ms * 1e3:.1f} us", flush=True)
                if r.dev == "cuda":
                    v2.sdpa(r, model, n, 1, 1)
            release(r)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="nem,q35,q122")
    ap.add_argument("--ctx", default="65536,262144")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--deadline-s", type=float, default=150.0)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (CPU interpreter)")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    ctxs = [int(x) for x in a.ctx.split(",")]
    if a.smoke:
        v2.SHAPES.update(q35=(4, 2, 64), q122=(8, 2, 64), nem=(8, 2, 64))
        ctxs = [256]
    r = ShortRun(a.out, a.deadline_s, a.smoke)
    sm = 132
    if r.dev == "cuda":
        import torch

        from wmtp.measure.scripts.paged_v3_bench import write_ceilings

        sm = torch.cuda.get_device_properties(0).multi_processor_count
        write_ceilings(a.out / "ceilings.csv")
    run(r, a.models.split(","), ctxs, a.rounds, sm)
    r.f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
