"""Print the tables of README.md from run1/ and run2/ (run from this folder: python3 tables.py)."""
import numpy as np
import pandas as pd


def medians(path):
    d = pd.read_csv(path)
    copy = d[d.kernel == "copy_triton"].gbps.median()
    x = d[d.component != "copy"]
    med = x.groupby(["kernel", "model", "component", "M"]).agg(ms=("time_ms", "median"), wb=("weight_bytes", "first"))
    med = med.reset_index()
    med["pct"] = med.wb / (med.ms * 1e-3) / 1e9 / copy * 100
    return med, copy


def geomean_ratio(med, ref, moe):
    g = med[med.component.str.startswith("experts") == moe]
    piv = g.pivot_table(index=["model", "component", "M"], columns="kernel", values="ms")
    return np.exp(np.log(piv.div(piv[ref], axis=0)).groupby(level="M").mean()).T


pd.set_option("display.width", 250)
pd.set_option("display.max_columns", 30)
r1, c1 = medians("run1/mma/quant.csv.gz")
r2, c2 = medians("run2/mma/quant.csv.gz")
print(f"copy ceiling run1 {c1:.0f} GB/s, run2 {c2:.0f} GB/s")
print("run1 dense, time / path='auto', geomean\n", geomean_ratio(r1, "wmtp_int4_group_auto", False).round(3))
print("run1 grouped, time / path='auto', geomean\n", geomean_ratio(r1, "wmtp_int4_moe_auto", True).round(3))
lm = r1[r1.component == "lm_head"].pivot_table(index=["model", "M"], columns="kernel", values="ms")
print("run1 lm_heads, [fma-w1-c16] / path='auto'\n",
      (lm["wmtp_int4_mma[fma-w1-c16]"] / lm["wmtp_int4_group_auto"]).round(3).unstack("M"))
for comp in ("lm_head",):
    g = r2[r2.component == comp]
    print("run2 lm_heads, us\n", (g.pivot_table(index=["model", "M"], columns="kernel", values="ms") * 1e3).round(1))
    print("run2 lm_heads, path='auto' % of copy\n",
          g[g.kernel == "wmtp_int4_group_auto"].pivot_table(index="model", columns="M", values="pct").round(0))
auto = r2[r2.kernel.isin(["wmtp_int4_group_auto", "wmtp_int4_moe_auto"])]
print("run2 path='auto' % of copy\n", auto.pivot_table(index=["model", "component"], columns="M", values="pct").round(0))
for k in ("wmtp_int4_group_auto", "wmtp_int4_moe_auto"):
    a = r1[r1.kernel == k].set_index(["model", "component", "M"]).ms
    b = r2[r2.kernel == k].set_index(["model", "component", "M"]).ms
    print(f"{k}: run2 / run1\n", (b / a).round(3).unstack("M"))
