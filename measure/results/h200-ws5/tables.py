"""The README's tables from this folder's CSVs (median of each case's replays; x = the same run's ws decode, d = 1,
at B = 1).

    python3 measure/results/h200-ws5/tables.py
"""

from __future__ import annotations

import csv
import gzip
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
# run -> the variant columns of its tables (those it timed), and the ratio column's (numerator, denominator). `ws`
# is the default call: the serial order in runs 1-3, the overlapped one (two or three consumers) in runs 5 and 6.
RUNS = {"run1": (("default", "rows", "ws", "ws-qreg"), ("ws-qreg", "ws")),
        "run2": (("ws", "ws-fma", "ws-abl-sm", "ws-abl-pv"), ("ws-abl-pv", "ws")),
        "run3": (("ws", "ws-ov"), ("ws-ov", "ws")), "run5": (("ws-serial", "ws-ovpp", "ws"), ("ws", "ws-serial")),
        "run6": (("ws-serial", "ws-lazy", "ws"), ("ws-lazy", "ws"))}


def medians(run: str, phase: str = "time") -> dict:
    """(model, ctx, batch, d, impl) -> median ms over the replays of `run`'s `phase` CSVs."""
    t = defaultdict(list)
    for f in sorted(HERE.glob(f"{run}/time/paged_ws_{phase}_*.csv.gz")):
        with gzip.open(f, "rt") as fh:
            for r in csv.DictReader(fh):
                if r["status"] == "ok":
                    key = (r["model"], int(r["ctx"]), int(r["batch"]), int(r["d"]), r["impl"])
                    t[key].append(float(r["time_ms"]))
    return {k: statistics.median(v) for k, v in t.items()}


def table(t: dict, impls: tuple, ratio: tuple, model: str, batch: int, ctx: int = 1 << 20) -> list[str]:
    ds = sorted({k[3] for k in t if k[0] == model and k[2] == batch and k[1] == ctx})
    if not ds:
        return []
    dec = t.get((model, ctx, batch, 1, "ws")) if batch == 1 else None
    num, den = ratio
    out = [f"| {model}, B = {batch}: d | {' | '.join(impls)} | {num} / {den} |", "|---" * (len(impls) + 2) + "|"]
    for d in ds:
        cells = []
        for i in impls:
            v = t.get((model, ctx, batch, d, i))
            cells.append("-" if v is None else f"{v:.4f}" + (f" ({v / dec:.2f})" if dec else ""))
        ws, x = t.get((model, ctx, batch, d, den)), t.get((model, ctx, batch, d, num))
        out.append(f"| {d} | {' | '.join(cells)} | " + (f"{x / ws:.3f} |" if ws and x else "- |"))
    return out


def decode_table(t: dict) -> list[str]:
    out = ["| model | keys | B | default | ws | ws-qreg | SDPA |", "|---|---|---|---|---|---|---|"]
    for (model, ctx, batch) in sorted({k[:3] for k in t}):
        cells = [t.get((model, ctx, batch, 1, i)) for i in ("default", "ws", "ws-qreg", "torch_sdpa")]
        shown = ["-" if v is None else f"{v * 1e3:.1f} us" if v < 0.1 else f"{v:.3f} ms" for v in cells]
        out.append(f"| {model} | {ctx} | {batch} | " + " | ".join(shown) + " |")
    return out


def main() -> None:
    for run, (impls, ratio) in RUNS.items():
        t = medians(run)
        print(f"## {run}\n")
        for model in ("nem", "q122", "q35"):
            for batch in (1, 4):
                rows = table(t, impls, ratio, model, batch)
                if rows:
                    print("\n".join(rows) + "\n")
    print("## run1, decode\n")
    print("\n".join(decode_table(medians("run1", "decode"))))


if __name__ == "__main__":
    main()
