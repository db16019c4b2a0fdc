"""The tables of README.md from run1/quant_summary.csv: `python3 tables.py` in this folder."""

import csv
import math
from pathlib import Path

HERE = Path(__file__).parent
AUTO = "wmtp_int4_group"


def load():
    t = {}
    for r in csv.DictReader(open(HERE / "run1" / "quant_summary.csv")):
        if r["kernel"].startswith(("wmtp", "torch")) and not r["error"]:
            t[(r["kernel"], r["model"], r["component"], int(r["M"]))] = (float(r["median_us"]), float(r["pct_of_copy"]))
    return t


def ratios(t):
    kernels = sorted({k[0] for k in t}, key=lambda s: (len(s), s))
    shapes = sorted({(k[1], k[2]) for k in t})
    print("| kernel | M = 1 | M = 2 |\n|---|---|---|")
    for kern in kernels:
        cells = []
        for m in (1, 2):
            rs = [t[(AUTO, *s, m)][0] / t[(kern, *s, m)][0] for s in shapes if (kern, *s, m) in t and (AUTO, *s, m) in t]
            g = math.exp(sum(map(math.log, rs)) / len(rs))
            cells.append(f"{g:.2f} ({min(rs):.2f}-{max(rs):.2f}), {sum(r > 1.01 for r in rs)} faster")
        print(f"| `{kern}` | " + " | ".join(cells) + " |")
    return shapes


def per_shape(t, shapes, kernels):
    print("\n| shape | " + " | ".join(f"`{k.replace(AUTO, '') or 'auto'}`" for k in kernels) + " |")
    print("|---|" + "---|" * len(kernels))
    for s in shapes:
        cells = [f"{t[(k, *s, 1)][0]:.2f}: {t[(k, *s, 1)][1]:.0f} %" if (k, *s, 1) in t else "-" for k in kernels]
        print(f"| {s[0]} {s[1]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    t = load()
    shapes = ratios(t)
    per_shape(t, shapes, [AUTO, AUTO + "_gemv[pk]", AUTO + "_gemv[q-bn16-g2]", AUTO + "_gemv[q-bn32-g2-4s]",
                          AUTO + "_gemv[q-bn16-g8-1s-w8]", "torch_int4pack_mm"])
