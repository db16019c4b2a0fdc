"""The README's tables from this folder's CSVs (median of each case's replays; checks counted per run).

    python3 measure/results/h200-ws/tables.py
"""

from __future__ import annotations

import csv
import gzip
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent


def medians(*files: str) -> dict:
    """(model, ctx, batch, d, impl) -> median ms over the replays of the named CSVs."""
    t = defaultdict(list)
    for f in files:
        with gzip.open(HERE / f, "rt") as fh:
            for r in csv.DictReader(fh):
                if r["kernel"] != "check" and r["status"] == "ok":
                    t[(r["model"], int(r["ctx"]), int(r["batch"]), int(r["d"]), r["impl"])].append(float(r["time_ms"]))
    return {k: statistics.median(v) for k, v in t.items()}


def checks(run: str) -> str:
    rows = []
    for f in sorted((HERE / run).glob("paged_ws_check_*.csv.gz")):
        with gzip.open(f, "rt") as fh:
            rows += [r for r in csv.DictReader(fh) if r["kernel"] == "check"]
    bad = sum(r["status"] != "ok" for r in rows)
    errs = [float(r["config"].split("rel_err=")[1]) for r in rows if "rel_err=" in r["config"]]
    return f"{run}: {len(rows)} checks, {bad} failed, rel. err. max {max(errs):.1e}" if errs else f"{run}: none"


def verify_table(t: dict, ctx: int, batch: int, impls: list[str], ds) -> list[str]:
    """ms (x the decode: the faster of the old default and rows at d = 1) per d; the step to the next d of the
    fastest ws variant."""
    out = [f"| model | d | {' | '.join(impls)} | best ws step |", "|---" * (len(impls) + 3) + "|"]
    for m in ("q35", "q122", "nem"):
        if (m, ctx, batch, 1, "rows") not in t:
            continue
        dec = min(t[(m, ctx, batch, 1, "default")], t[(m, ctx, batch, 1, "rows")])
        prev = None
        for d in ds:
            cells, best = [], None
            for i in impls:
                v = t.get((m, ctx, batch, d, i))
                cells.append(f"{v:.3f} ({v / dec:.2f})" if v else "-")
                if v and i.startswith("ws"):
                    best = v if best is None else min(best, v)
            step = f"{best / prev - 1:+.0%}" if best and prev else ""
            out.append(f"| {m} | {d} | {' | '.join(cells)} | {step} |")
            prev = best
    return out


def ratio_table(t: dict, cases) -> list[str]:
    out = ["| model | context | B | d | old default | rows | ws | ws / faster of the two |", "|---" * 8 + "|"]
    for m, ctx, b, d in cases:
        old, rows, ws = (t.get((m, ctx, b, d, i)) for i in ("default", "rows", "ws"))
        if old and rows and ws:
            out.append(f"| {m} | {ctx} | {b} | {d} | {old:.3f} | {rows:.3f} | {ws:.3f} | {ws / min(old, rows):.2f} |")
    return out


def main() -> None:
    for run in ("run1", "run2", "run3"):
        print(checks(run))
    r2 = medians("run2/paged_ws_time_q122-nem-q35.csv.gz")
    print("\n## run 2: 1M, B = 1 (ms, x decode)\n")
    print("\n".join(verify_table(r2, 1 << 20, 1, ["default", "rows", "ws", "ws2", "ws-m64"], range(1, 17))))
    r3 = medians("run3/paged_ws_time_q122-nem-q35_1048576_2-4-8.csv.gz",
                 "run3/paged_ws_time_q122-nem-q35_65536-262144_1.csv.gz", "run3/paged_ws_time_nem_1048576_1.csv.gz")
    print("\n## run 3: batches and contexts\n")
    cases = [(m, 1 << 20, b, d) for b in (2, 4, 8) for m in ("q35", "q122", "nem") for d in (1, 2, 3, 5, 7, 9)]
    cases += [(m, c, 1, d) for c in (65536, 262144) for m in ("q35", "q122", "nem") for d in (1, 2, 3, 5, 7, 9)]
    print("\n".join(ratio_table(r3, cases)))
    print("\n## run 3: nem 128-row blocks at 1M, B = 1 (ms)\n")
    print("| d | " + " | ".join(["ws", "ws2", "ws2-p56", "ws2-bn128", "ws-bn128"]) + " |\n" + "|---" * 6 + "|")
    for d in (5, 6, 7, 8):
        print(f"| {d} | " + " | ".join(f"{r3[('nem', 1 << 20, 1, d, i)]:.3f}"
                                       for i in ("ws", "ws2", "ws2-p56", "ws2-bn128", "ws-bn128")) + " |")
    dec = medians("run2/paged_ws_decode_q122-nem-q35.csv.gz")
    print("\n## run 2: decode (us at B = 1, ms at B = 16)\n")
    print("| model | keys | B | old default | ws | ws, 2 waves | torch SDPA (contiguous) |\n" + "|---" * 7 + "|")
    for ctx, b in ((65536, 1), (4096, 1), (1 << 20, 16)):
        for m in ("q35", "q122", "nem"):
            f = 1e3 if b == 1 else 1.0
            vals = [dec.get((m, ctx, b, 1, i)) for i in ("default", "ws", "ws-w2", "torch_sdpa")]
            print(f"| {m} | {ctx} | {b} | " + " | ".join(f"{v * f:.1f}" if v and b == 1 else f"{v:.3f}" if v else "-"
                                                        for v in vals) + " |")


if __name__ == "__main__":
    main()
