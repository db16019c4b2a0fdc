"""Print the tables of README.md from run1/ and run2/ (run from this folder: python3 tables.py)."""
from pathlib import Path

import numpy as np
import pandas as pd

BIG = [("nem", "lin_in"), ("q122", "lin_in"), ("q122", "attn_qkv"), ("nem", "lin_out")]


def medians(path):
    d = pd.read_csv(path)
    copy = d[d.kernel == "copy_triton"].gbps.median()
    x = d[(d.component != "copy") & d.model.isin(["q35", "q122", "nem"])]
    med = x.groupby(["kernel", "model", "component", "M"]).agg(ms=("time_ms", "median"), wb=("weight_bytes", "first"))
    med = med.reset_index()
    med["pct"] = med.wb / (med.ms * 1e-3) / 1e9 / copy * 100
    return med, copy


def geomean_ratio(med, ref, moe):
    g = med[med.component.str.startswith("experts") == moe]
    piv = g.pivot_table(index=["model", "component", "M"], columns="kernel", values="ms")
    return np.exp(np.log(piv.div(piv[ref], axis=0)).groupby(level="M").mean()).T


def ratio(med, a, b):
    med = med[~med.component.str.startswith("experts")]
    piv = med.pivot_table(index=["model", "component", "M"], columns="kernel", values="ms")
    return (piv[a] / piv[b]).unstack("M")


pd.set_option("display.width", 250)
pd.set_option("display.max_columns", 30)
r1, c1 = medians("run1/mma/quant.csv.gz")
f1, cf = medians("run1/fp8/quant.csv.gz")
print(f"copy ceiling run1 {c1:.0f} GB/s (int4 script), {cf:.0f} GB/s (fp8 script)")
print("run1 dense, time / path='auto', geomean over the 15 shapes\n",
      geomean_ratio(r1, "wmtp_int4_group_auto", False).round(3))
print("run1 grouped, time / path='auto', geomean over the 6 shapes\n",
      geomean_ratio(r1, "wmtp_int4_moe_auto", True).round(3))
print("run1 one-wave plan: [sub-w4-c9f] / [sub-w4-c8] (path='auto''s plan then)\n",
      ratio(r1, "wmtp_int4_mma[sub-w4-c9f]", "wmtp_int4_mma[sub-w4-c8]").round(3))
print("run1 prefetch: [fma-w1-c16-pf] / [fma-w1-c16]\n",
      ratio(r1, "wmtp_int4_mma[fma-w1-c16-pf]", "wmtp_int4_mma[fma-w1-c16]").round(3))
big = r1.set_index(["model", "component"]).loc[BIG].reset_index()
print("run1 large projections, % of copy\n",
      big[big.M.isin([1, 2, 8])].pivot_table(index=["model", "component", "M"], columns="kernel", values="pct").round(0)
      .drop(columns=["torch_bf16"]).T)
fp8 = f1[f1.kernel.str.startswith(("wmtp_fp8", "torch_scaled"))]
print("run1 fp8 dense, % of copy\n", fp8.pivot_table(index=["model", "component"], columns=["kernel", "M"],
                                                      values="pct").round(0).T.to_string())
if Path("run2/mma/quant.csv.gz").exists():
    r2, c2 = medians("run2/mma/quant.csv.gz")
    print(f"copy ceiling run2 {c2:.0f} GB/s")
    print("run2 path='auto' (one-wave plan) / [sub-w4-c8] (the plan before)\n",
          ratio(r2, "wmtp_int4_group_auto", "wmtp_int4_mma[sub-w4-c8]").round(3))
    a2 = r2[r2.kernel == "wmtp_int4_group_auto"]
    print("run2 path='auto' % of copy\n",
          a2.pivot_table(index=["model", "component"], columns="M", values="pct").round(0))
    a1 = r1[r1.kernel == "wmtp_int4_group_auto"].set_index(["model", "component", "M"]).ms
    print("path='auto': run2 / run1\n", (a2.set_index(["model", "component", "M"]).ms / a1).round(3).unstack("M"))
r3, c3 = medians("run3/fp8/quant.csv.gz")
r4, c4 = medians("run4/fp8/quant.csv.gz")
print(f"copy ceiling run3 {c3:.0f} GB/s, run4 {c4:.0f} GB/s")
print("run3 fp8 swap-AB plans, time / `[pre]` (the plan then), geomean over the 15 shapes\n",
      geomean_ratio(r3[r3.M >= 2], "wmtp_fp8_block_swap[pre]", False).round(3))
print("run3 `[pre-c2f]` / `[pre]` per shape\n", ratio(r3[r3.M >= 2], "wmtp_fp8_block_swap[pre-c2f]",
                                                       "wmtp_fp8_block_swap[pre]").round(3))
print("run4 path='auto' / `[pre-c4]` (the plan before)\n",
      ratio(r4, "wmtp_fp8_block_auto", "wmtp_fp8_block_swap[pre-c4]").round(3))
print("run4 % of copy\n", r4.pivot_table(index=["model", "component"], columns=["kernel", "M"], values="pct").round(0)
      .T.to_string())
a4 = r4[r4.kernel == "wmtp_fp8_block_auto"].set_index(["model", "component", "M"]).ms
c2f = r3[r3.kernel == "wmtp_fp8_block_swap[pre-c2f]"].set_index(["model", "component", "M"]).ms
print("run4 path='auto' / run3 `[pre-c2f]`\n", (a4 / c2f).round(3).unstack("M"))
