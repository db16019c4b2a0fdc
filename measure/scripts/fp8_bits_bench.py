"""Does converting fp8 (e4m3) K/V to fp16 by moving bits, instead of with conversion instructions, speed up the rows
kernel's fp8 decode (issue 18: B = 16 at 1M stops at 66-72 % of copy, bound by instructions, measure/results/
h200-fp8-ablation)? The production decode (`decode_attention(kernel="rows")`, fp8 KV, fp16 dots) with
`fp8_convert="cvt"` (Triton's conversion: one `F2FP` per two codes) and `"bits"` (`paged_rows.e4m3_bits_f16`: two
`prmt`, shifts and masks per four codes, in PTX), at B = 16 and 1 for the three head shapes; the default split plan.

Method: `paged_v2_bench.Run` (CUDA-graph replay, L2 flushed before each replay, CUDA events); rows in
OUT/fp8_bits.csv with the copy ceiling of the same run (OUT/ceilings.csv).

    python3 measure/scripts/fp8_bits_bench.py --out $OUT                  # on the GPU
    TRITON_INTERPRET=1 python3 measure/scripts/fp8_bits_bench.py --smoke --out /tmp/x   # CPU, tiny sizes
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wmtp.measure.scripts import paged_v2_bench as v2
from wmtp.measure.scripts.fp8_decode_ablation import release


class BitsRun(v2.Run):
    CSV = "fp8_bits.csv"


def run(r: v2.Run, models, n: int, batches, rounds: int) -> None:
    """Each (model, batch): cvt and bits alternately, `rounds` times (graph-to-graph spread shows in the pairs)."""
    for model in models:
        for b in batches:
            for i in range(rounds):
                for conv in ("cvt", "bits") if i % 2 == 0 else ("bits", "cvt"):
                    if r.late():
                        return
                    ms = v2.bench(r, f"rows_{conv}", model, n * b, n, b, 1, "fp8", kernel="rows", fp8_convert=conv)
                    print(f"{model} B={b} {conv} round {i}: {ms:.3f} ms", flush=True)
        release(r)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="q35,q122,nem")
    ap.add_argument("--ctx", type=int, default=1 << 20)
    ap.add_argument("--batches", default="16,1")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--deadline-s", type=float, default=300.0)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (CPU interpreter)")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    batches = [int(x) for x in a.batches.split(",")]
    if a.smoke:
        v2.SHAPES.update(q35=(4, 2, 16), q122=(8, 2, 16), nem=(8, 2, 32))
        a.ctx, batches = 256, [2]
    r = BitsRun(a.out, a.deadline_s, a.smoke)
    if r.dev == "cuda":
        from wmtp.measure.scripts.paged_v3_bench import write_ceilings

        write_ceilings(a.out / "ceilings.csv")
    run(r, a.models.split(","), a.ctx, batches, a.rounds)
    r.f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
