"""The tables of README.md from the runs' quant_summary.csv: `python3 tables.py` in this folder."""

import csv
import math
from pathlib import Path

HERE = Path(__file__).parent


def load(run):
    t = {}
    for r in csv.DictReader(open(HERE / run / "quant_summary.csv")):
        if r["kernel"].startswith(("wmtp", "torch")) and not r["error"]:
            t[(r["kernel"], r["model"], r["component"], int(r["M"]))] = (float(r["median_us"]), float(r["pct_of_copy"]))
    return t


def ratios(t, base, kernels, ms):
    """time(base) / time(kernel): geomean over the shapes both ran (range), shapes > 1 % faster, best % of copy."""
    shapes = sorted({(k[1], k[2]) for k in t})
    print("| kernel | " + " | ".join(f"M = {m}" for m in ms) + " |\n|---|" + "---|" * len(ms))
    for kern in kernels:
        cells = []
        for m in ms:
            sh = [s for s in shapes if (kern, *s, m) in t and (base, *s, m) in t]
            if not sh:
                cells.append("-")
                continue
            rs = [t[(base, *s, m)][0] / t[(kern, *s, m)][0] for s in sh]
            g = math.exp(sum(map(math.log, rs)) / len(rs))
            best = max(t[(kern, *s, m)][1] for s in sh)
            cells.append(f"{g:.2f} ({min(rs):.2f}-{max(rs):.2f}), {sum(r > 1.01 for r in rs)} / {len(rs)}; {best:.0f} %")
        print(f"| `{kern}` | " + " | ".join(cells) + " |")


def per_shape(t, kernels, m):
    shapes = sorted({(k[1], k[2]) for k in t})
    print(f"\n| shape (M = {m}) | " + " | ".join(f"`{k}`" for k in kernels) + " |")
    print("|---|" + "---|" * len(kernels))
    for s in shapes:
        cells = [f"{t[(k, *s, m)][0]:.2f}: {t[(k, *s, m)][1]:.0f} %" if (k, *s, m) in t else "-" for k in kernels]
        print(f"| {s[0]} {s[1]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    A, Q = "wmtp_int4_group", "wmtp_int4_group_gemv"
    t1 = load("run1")
    print("### run1 (occupancy / activation sharing), time(path='auto') / time\n")
    ratios(t1, A, [A + "_gemv[pk]"] + sorted(k for k in {k[0] for k in t1} if k.startswith(Q + "[q")) +
           ["torch_int4pack_mm"], (1, 2))
    t2 = load("run2")
    print("\n### run2 (tensor-core kernel variants), time(path='auto') / time\n")
    ratios(t2, A, sorted(k for k in {k[0] for k in t2} if "mma" in k) + ["torch_int4pack_mm", "torch_bf16"],
           (1, 2, 4, 8))
    t3 = load("run3")
    print("\n### run3 (the fit input: path='auto' given repacked weights), time(earlier path='auto') / time\n")
    ratios(t3, A, [A + "_auto", "wmtp_int4_mma[sub-w4-c8]", "wmtp_int4_mma[fma-w4-c8]", "torch_int4pack_mm",
                   "torch_bf16"], (1, 2, 4, 8, 16))
    for m in (1, 8):
        per_shape(t3, [A, A + "_auto", "wmtp_int4_mma[fma-w4-c8]", "torch_int4pack_mm", "torch_bf16"], m)
    for run, other in (("run4", "wmtp_int4_moe_mma[fma-c8]"), ("run5", "wmtp_int4_moe_mma[sub-c8]")):
        t = load(run)
        print(f"\n### {run} (grouped experts), time(earlier path='auto') / time\n")
        ratios(t, "wmtp_int4_moe", ["wmtp_int4_moe_auto", other], (1, 2, 4, 8, 16))
    per_shape(load("run5"), ["wmtp_int4_moe", "wmtp_int4_moe_auto"], 8)
    t6 = load("run6")
    print("\n### run6 (up to 16 rows; 1-2 warps per program), time(earlier path='auto') / time\n")
    ratios(t6, A, [A + "_auto", A + "_auto16"] + sorted(k for k in {k[0] for k in t6} if "mma" in k) +
           ["torch_int4pack_mm"], (1, 2, 4, 8, 16))
