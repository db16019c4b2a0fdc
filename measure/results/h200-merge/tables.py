"""The README's tables from this folder's CSVs (us; each cell the median of every replay of that case, both rounds).

    python3 measure/results/h200-merge/tables.py
"""

from __future__ import annotations

import csv
import gzip
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = ("nem", "q35", "q122")


def rows(run: str) -> list[dict]:
    with gzip.open(HERE / run / "merge" / "paged_ws_merge.csv.gz", "rt") as fh:
        return list(csv.DictReader(fh))


def medians(run: str) -> dict:
    """(model, ctx, batch, d, impl) -> median us over the replays."""
    t = defaultdict(list)
    for r in rows(run):
        if r["kernel"] != "check" and r["status"] == "ok":
            t[(r["model"], int(r["ctx"]), int(r["batch"]), int(r["d"]), r["impl"])].append(float(r["time_ms"]) * 1e3)
    return {k: statistics.median(v) for k, v in t.items()}


def checks(run: str) -> str:
    got = [r for r in rows(run) if r["kernel"] == "check"]
    errs = [float(r["config"].split("rel_err=")[1]) for r in got if "rel_err=" in r["config"]]
    bad = sum(r["status"] != "ok" for r in got)
    return f"{len(got)} checks against fp64 torch, {bad} failed, rel. err. max {max(errs):.1e}"


def table(run: str, impls: list[str], cases: list[tuple[int, int, int]]) -> None:
    t = medians(run)
    print(f"\n{run}: {checks(run)}; the timing floor (a graph of one one-element fill): "
          f"{t[('-', 0, 1, 0, 'fill1')]:.1f} us\n")
    print("| model | keys | B | d | " + " | ".join(impls) + " |")
    print("|---" * (4 + len(impls)) + "|")
    for m in MODELS:
        for n, b, d in cases:
            cells = [f"{t[(m, n, b, d, i)]:.1f}" if (m, n, b, d, i) in t else "-" for i in impls]
            if any(c != "-" for c in cells):
                print(f"| {m} | {n} | {b} | {d} | " + " | ".join(cells) + " |")


def main() -> None:
    b1 = [(n, 1, 1) for n in (4096, 16384, 65536, 262144, 1 << 20)] + [(65536, 1, 7), (1 << 20, 1, 7)]
    table("run1", ["ws", "m128", "m128-d32", "m128-d16-w1", "m128-d128", "late", "late-m128", "late-m128-d32",
                   "start", "split-only", "torch_sdpa"], b1)
    table("run2", ["v0", "default", "nopdl", "pf1", "pf2", "split-only", "default-path", "torch_sdpa"],
          b1 + [(1 << 20, 4, 1), (1 << 20, 16, 1)])


if __name__ == "__main__":
    main()
