"""The README's tables from this folder's CSVs (median of each case's replays; % of the copy ceiling of the same run).

    python3 measure/results/h200-s15/tables.py
"""

from __future__ import annotations

import csv
import gzip
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent


def rows(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return list(csv.DictReader(fh))


def copy_tbps(path: Path) -> float:
    t = [float(r["time_ms"]) for r in rows(path) if r["kernel"] == "copy" and r["status"] == "ok"]
    b = next(float(r["bytes"]) for r in rows(path) if r["kernel"] == "copy")
    return b / statistics.median(t) / 1e9


def medians(path: Path, key) -> dict:
    t = defaultdict(list)
    for r in rows(path):
        if r["status"] == "ok":
            t[key(r)].append(float(r["time_ms"]))
    return {k: statistics.median(v) for k, v in t.items()}


def bits_table() -> list[str]:
    ceil = copy_tbps(HERE / "run1" / "ceilings_bits.csv")
    raw = rows(HERE / "run1" / "fp8_bits.csv.gz")
    nbytes = {(r["model"], r["batch"]): float(r["bytes"]) for r in raw}
    t = medians(HERE / "run1" / "fp8_bits.csv.gz", lambda r: (r["model"], r["batch"], r["impl"]))
    out = [f"copy ceiling {ceil:.3f} TB/s", "", "| model | B | cvt ms (% copy) | bits ms (% copy) | bits / cvt |",
           "|---|---|---|---|---|"]
    for m in ("q35", "q122", "nem"):
        for b in ("16", "1"):
            c, x = t[(m, b, "rows_cvt")], t[(m, b, "rows_bits")]
            pc = lambda ms: f"{ms:.3f} ({nbytes[(m, b)] / ms / 1e9 / ceil:.0%})"
            out.append(f"| {m} | {b} | {pc(c)} | {pc(x)} | {x / c:.2f} |")
    return out


def short_table() -> list[str]:
    t = medians(HERE / "run1" / "short_decode.csv.gz", lambda r: (r["model"], int(r["ctx"]), r["impl"], r["config"]))
    out = ["| model | keys | ws by split count (us) | rows | sub | sub, fused merge | torch SDPA (contiguous) |",
           "|---|---|---|---|---|---|---|"]
    for m in ("nem", "q35", "q122"):
        for n in (65536, 262144):
            ws = sorted(((int(c.split("=")[1]), v) for (mm, nn, i, c), v in t.items()
                         if (mm, nn, i) == (m, n, "ws")), reverse=True)
            if not ws:
                continue
            cell = ", ".join(f"{s}: {v * 1e3:.1f}" for s, v in ws)
            get = lambda impl, cfg="default": f"{t[(m, n, impl, cfg)] * 1e3:.1f}" if (m, n, impl, cfg) in t else "-"
            out.append(f"| {m} | {n} | {cell} | {get('rows')} | {get('sub')} | {get('sub_fused', 'merge=fused')} | "
                       f"{get('torch_sdpa', 'contiguous')} |")
    return out


def state_table() -> list[str]:
    new = medians(HERE / "run1" / "state_raw.csv.gz", lambda r: (r["model"], int(float(r["batch"])), int(float(r["d"]))))
    nb = {(r["model"], int(float(r["batch"])), int(float(r["d"]))): float(r["bytes"])
          for r in rows(HERE / "run1" / "state_raw.csv.gz")}
    out = ["| model | B | d = 1 | d = 3 | d = 5 | d = 7 | d = 9 |", "|---|---|---|---|---|---|---|"]
    for m in ("q35", "q122", "nem"):
        for b in (1, 8):
            out.append(f"| {m} | {b} | " + " | ".join(
                f"{new[(m, b, d)] * 1e3:.1f} ({nb[(m, b, d)] / new[(m, b, d)] / 1e9:.2f})" for d in (1, 3, 5, 7, 9))
                + " |")
    return out


if __name__ == "__main__":
    for title, table in (("fp8 decode, conversion instructions vs bit move", bits_table),
                         ("short decodes, B = 1", short_table),
                         ("linear_state per layer, us (TB/s on the bytes moved)", state_table)):
        print(f"## {title}\n")
        print("\n".join(table()) + "\n")
