"""The README's tables from run1's CSV: % of the same run's copy bandwidth (weight + scale bytes), and our fp8
path='auto' time over each torch peer's, per dense shape and M.

    python3 measure/results/h200-quant-v14/tables.py
"""

from __future__ import annotations

import csv
import gzip
import math
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS = ("wmtp_fp8_block_auto", "torch_scaled_mm_block", "torch_scaled_mm_tensor", "torch_scaled_mm_rowwise")
SHORT = {"wmtp_fp8_block_auto": "ours (auto)", "torch_scaled_mm_block": "torch block", "torch_scaled_mm_tensor":
         "torch tensor", "torch_scaled_mm_rowwise": "torch row"}


def read() -> tuple[dict, dict, float]:
    """(kernel, model, component, M) -> median ms / median GB/s, and the run's Triton copy GB/s."""
    ms, gbps = defaultdict(list), defaultdict(list)
    with gzip.open(HERE / "run1/fp8/quant.csv.gz", "rt") as fh:
        for r in csv.DictReader(fh):
            if r["error"]:
                continue
            key = (r["kernel"], r["model"], r["component"], int(r["M"]))
            ms[key].append(float(r["time_ms"]))
            gbps[key].append(float(r["gbps"]))
    med = {k: statistics.median(v) for k, v in ms.items()}
    rate = {k: statistics.median(v) for k, v in gbps.items()}
    copy = statistics.median(v for k, v in rate.items() if k[0] == "copy_triton")
    return med, rate, copy


def main() -> None:
    med, rate, copy = read()
    shapes = sorted({k[1:3] for k in med if k[1] in ("q35", "q122", "nem")})
    ms_ = sorted({k[3] for k in med if k[1] != "-"})
    print(f"copy ceiling {copy:.0f} GB/s\n")
    print("| shape | M | " + " | ".join(SHORT[k] for k in KERNELS) + " | ours / torch block |")
    print("|---" * (len(KERNELS) + 3) + "|")
    for model, comp in shapes:
        for m in ms_:
            cells = ["err" if c is None else f"{100 * c / copy:.0f} %" for c in
                     (rate.get((k, model, comp, m)) for k in KERNELS)]
            a, b = med.get((KERNELS[0], model, comp, m)), med.get((KERNELS[1], model, comp, m))
            print(f"| {model} {comp} | {m} | " + " | ".join(cells) + (f" | {a / b:.2f} |" if a and b else " | - |"))
    print("\n| M | " + " | ".join(f"ours / {SHORT[k]}" for k in KERNELS[1:]) + " |")
    print("|---" * len(KERNELS) + "|")
    for m in ms_:
        cells = []
        for k in KERNELS[1:]:
            r = [math.log(med[(KERNELS[0], s[0], s[1], m)] / med[(k, s[0], s[1], m)]) for s in shapes
                 if (KERNELS[0], s[0], s[1], m) in med and (k, s[0], s[1], m) in med]
            cells.append(f"{math.exp(sum(r) / len(r)):.3f} ({len(r)})" if r else "-")
        print(f"| {m} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
