"""Tables of measure/results/h200-kv-fp8: the kv-fp8 sweep part's medians beside the shipped bf16 attention rows of
the same shapes (wmtp_model/data/profiles/h200.raw.csv.gz), as % of the copy ceiling of each run.

    python3 measure/results/h200-kv-fp8/tables.py [run1]
"""
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
run = HERE / (sys.argv[1] if len(sys.argv) > 1 else "run1")
new = pd.read_csv(run / "cal" / "raw.csv.gz", low_memory=False)
base = pd.read_csv(HERE.parents[2] / "wmtp_model" / "data" / "profiles" / "h200.raw.csv.gz", low_memory=False)


def copy_tbps(df):
    c = df[(df.kernel == "copy") & (df.status == "ok")]
    return float((c.bytes / c.time_ms / 1e9).groupby(c.config).median().max())


def medians(df, kv):
    ok = df[(df.status == "ok") & df.kernel.isin(["decode_attn", "verify_attn"]) & (df.impl == "wmtp")
            & (df.dtype.fillna("bf16") == kv)]
    ok = ok[ok.window.isna() | (ok.window.astype(str) == "")]
    return ok.groupby(["kernel", "model", "ctx", "batch", "d"]).agg(ms=("time_ms", "median"), bytes=("bytes", "first"))


c8, c16 = copy_tbps(new), copy_tbps(base)
m8, m16 = medians(new, "fp8"), medians(base, "bf16")
print(f"copy ceiling: this run {c8:.3f} TB/s, the shipped raw's (since run3: run3's) {c16:.3f} TB/s\n")
print("| kernel | model | ctx | B | d | fp8 ms (% of copy) | bf16 ms (% of copy) | fp8 / bf16 |")
print("|---|---|---|---|---|---|---|---|")
for key, r in m8.iterrows():
    kernel, model, ctx, b, d = key
    if ctx not in (65536, 1048576) or (kernel == "verify_attn" and b == 1 and d not in (2, 5, 7, 9)):
        continue
    if key not in m16.index:
        continue
    s = m16.loc[key]
    p8 = r.bytes / r.ms / 1e9 / c8 * 100
    p16 = s.bytes / s.ms / 1e9 / c16 * 100
    print(f"| {kernel} | {model} | {ctx // 1024}K | {b} | {d} | {r.ms:.4f} ({p8:.0f} %) | {s.ms:.4f} ({p16:.0f} %) "
          f"| {r.ms / s.ms:.2f} |")
