"""Tables of README.md from the committed CSVs (python3 tables.py, from this folder)."""
import collections
import csv
import gzip
import math
import statistics as st


def medians(path):
    rows = list(csv.DictReader(gzip.open(path, "rt")))
    med, nbytes = collections.defaultdict(list), {}
    for r in rows:
        if r["error"]:
            continue
        key = (r["kernel"], r["model"], r["component"], int(r["M"]), r["dtype"])
        med[key].append(float(r["time_ms"]) * 1000)
        nbytes[key] = int(r["weight_bytes"])
    copy = st.median(float(r["gbps"]) for r in rows if r["kernel"] == "copy_triton")
    return {k: st.median(v) for k, v in med.items()}, nbytes, copy


def floor_table():
    med, nbytes, copy = medians("floor/quant.csv.gz")
    print(f"copy ceiling {copy:.0f} GB/s")
    shapes = sorted({(k[1], k[2]) for k in med if k[0].startswith("read")})
    for fmt, ours, dt in (("int4_group", "wmtp_int4_group", "int4"), ("fp8_block", "wmtp_fp8_block", "fp8_e4m3")):
        print(f"\n| {fmt} | MB | floor us (variant) | floor % of copy | ours M=1 us: % of copy / % of floor | M=2 | M=8 |")
        print("|---|---|---|---|---|---|---|")
        pts = []
        for m, c in shapes:
            fl = {k[0]: v for k, v in med.items() if k[1:3] == (m, c) and k[4] == fmt and k[0].startswith("read")}
            best = min(fl, key=fl.get)
            b = nbytes[(best, m, c, 1, fmt)]
            pts.append((b, fl[best]))
            cells = []
            for mm in (1, 2, 8):
                t = med[(ours, m, c, mm, dt)]
                cells.append(f"{t:.2f}: {b / 1e3 / t / copy * 100:.0f} / {fl[best] / t * 100:.0f}")
            print(f"| {m} {c} | {b / 1e6:.1f} | {fl[best]:.2f} ({best[10:]}) | {b / 1e3 / fl[best] / copy * 100:.1f} | "
                  + " | ".join(cells) + " |")
        n = len(pts)
        mx, my = sum(p[0] for p in pts) / n, sum(p[1] for p in pts) / n
        slope = sum((p[0] - mx) * (p[1] - my) for p in pts) / sum((p[0] - mx) ** 2 for p in pts)
        print(f"floor fit: a = {my - slope * mx:.2f} us + bytes at {1e-3 / slope:.0f} GB/s")


def variant_table(path, ref, names, ms):
    med, _, _ = medians(path)
    shapes = sorted({(k[1], k[2]) for k in med if k[1] not in ("-", "tiny")})
    print(f"\n| kernel (time of {ref} / time) | " + " | ".join(f"M = {m}" for m in ms) + " |")
    print("|---|" + "---|" * len(ms))
    for name in names:
        cells = []
        for m in ms:
            r = [med[(ref, a, c, m, d)] / med[(name, a, c, m, d)] for (a, c) in shapes for d in ("int4", "fp8_e4m3", "bf16")
                 if (name, a, c, m, d) in med and (ref, a, c, m, d) in med]
            cells.append(f"{math.exp(sum(map(math.log, r)) / len(r)):.2f} ({min(r):.2f}-{max(r):.2f}), "
                         f"{sum(x > 1.01 for x in r)} faster" if r else "-")
        print(f"| `{name}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    floor_table()
    il = ["wmtp_int4_group_il", "wmtp_int4_group_il[bn4]", "wmtp_int4_group_il[bn8]", "wmtp_int4_group_il[bn16]",
          "wmtp_int4_group_il[bn32]", "wmtp_int4_group_il[xs]", "wmtp_int4_group_il[c4]", "wmtp_int4_group_il[w8]",
          "wmtp_int4_group_gemv[pk]", "wmtp_int4_group_gemv[q-bn4]", "torch_int4pack_mm"]
    variant_table("il/quant.csv.gz", "wmtp_int4_group_auto", il, (1, 2, 4))
    variant_table("fp8m/quant.csv.gz", "wmtp_fp8_block_swap[pre]", ["wmtp_fp8_block_gemv", "wmtp_fp8_block_swap[loop-st3]"],
                  (1, 2, 4, 8, 16))
    variant_table("ew/quant.csv.gz", "wmtp_fp8_block_gemv", ["wmtp_fp8_block_gemv[ew]", "wmtp_fp8_block_swap[pre]"],
                  (1, 2, 4, 8))
