"""The README's tables from this folder's CSVs (median of each case's replays).

    python3 measure/results/h200-ws4/tables.py
"""

from __future__ import annotations

import csv
import gzip
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMPLS = ("ws", "ws-paired", "ws-pp", "default", "rows")


def medians() -> dict:
    """(model, batch, d, impl) -> median ms over the replays of run 2."""
    t = defaultdict(list)
    for f in sorted(HERE.glob("run2/time/*.csv.gz")):
        with gzip.open(f, "rt") as fh:
            for r in csv.DictReader(fh):
                if r["status"] == "ok":
                    t[(r["model"], int(r["batch"]), int(r["d"]), r["impl"])].append(float(r["time_ms"]))
    return {k: statistics.median(v) for k, v in t.items()}


def table(t: dict, model: str, batch: int) -> list[str]:
    """ms per d and order; at B = 1 each cell also x the serial decode (ws at d = 1) of the same run."""
    dec = t.get((model, batch, 1, "ws"))
    ds = sorted({k[2] for k in t if k[0] == model and k[1] == batch})
    out = [f"| {model}, B = {batch}: d | {' | '.join(IMPLS)} | paired / serial | ping-pong / serial |",
           "|---" * (len(IMPLS) + 3) + "|"]
    for d in ds:
        cells = []
        for i in IMPLS:
            v = t.get((model, batch, d, i))
            cells.append("-" if v is None else f"{v:.3f}" + (f" ({v / dec:.2f})" if dec else ""))
        ws = t[(model, batch, d, "ws")]
        out.append(f"| {d} | {' | '.join(cells)} | {t[(model, batch, d, 'ws-paired')] / ws:.2f} | "
                   f"{t[(model, batch, d, 'ws-pp')] / ws:.2f} |")
    return out


def main() -> None:
    t = medians()
    for model, batch in (("nem", 1), ("q122", 1), ("q35", 1), ("nem", 4)):
        print("\n".join(table(t, model, batch)) + "\n")


if __name__ == "__main__":
    main()
