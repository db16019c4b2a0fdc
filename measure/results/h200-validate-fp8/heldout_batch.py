"""Predicted vs measured fp8-KV verify attention at B = 9 / 16 (run1/ws8: batches the sweep never measures, so
held out of the @fp8 fit, which saw B = 1..8): the shipped profile's price of one layer's verify attention
(`wmtp predict --json`'s verify.attention component / its layer count) against the kernel the default runs (ws8)
and the one it ran before this run (rows8), per shape. `python3 heldout_batch.py` from this folder."""

import csv
import json
import statistics
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
rows: dict = {}
with open(HERE / "run1/ws8/ws_fp8.csv") as f:
    for r in csv.DictReader(f):
        if r["status"] == "ok" and r["kernel"] == "verify":
            rows.setdefault((r["impl"], r["model"], int(r["ctx"]), int(r["batch"]), int(r["d"])), []).append(
                float(r["time_ms"]))
print("| model | B | d | predicted ms / layer | ws8 measured (error) | rows8 measured |")
print("|---|---|---|---|---|---|")
errs = []
for (impl, model, ctx, batch, d), t in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][3], kv[0][4])):
    if impl != "ws8":
        continue
    out = subprocess.run(["wmtp", "predict", "--model", model, "--ctx", str(ctx), "--batch", str(batch), "--depth",
                          str(d), "--kv-dtype", "fp8", "--json"], capture_output=True, text=True, check=True).stdout
    comp = [c for c in json.loads(out)["methods"]["native"]["components"] if c["name"] == "verify.attention"][0]
    pred = comp["ms"] / comp["count"]
    ws8 = statistics.median(t)
    rows8 = statistics.median(rows[("rows8", model, ctx, batch, d)])
    errs.append(abs(pred / ws8 - 1))
    print(f"| {model} | {batch} | {d} | {pred:.3f} ({comp['source']}) | {ws8:.3f} ({pred / ws8 - 1:+.1%}) | "
          f"{rows8:.3f} |")
print(f"\n{len(errs)} shapes: median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%}")
