"""The README's tables from this folder's CSVs (median of each case's replays).

    python3 measure/results/h200-ws3/tables.py
"""

from __future__ import annotations

import csv
import gzip
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent


def rows(pattern: str) -> list[dict]:
    out = []
    for f in sorted(HERE.glob(pattern)):
        with gzip.open(f, "rt") as fh:
            out += list(csv.DictReader(fh))
    return out


def medians(pattern: str) -> dict:
    """(model, ctx, d, impl) -> median ms over the replays (B = 1 only)."""
    t = defaultdict(list)
    for r in rows(pattern):
        if r["kernel"] != "check" and r["status"] == "ok" and r["batch"] == "1":
            t[(r["model"], int(r["ctx"]), int(r["d"]), r["impl"])].append(float(r["time_ms"]))
    return {k: statistics.median(v) for k, v in t.items()}


def checks(pattern: str) -> str:
    got = [r for r in rows(pattern) if r["kernel"] == "check"]
    errs = [float(r["config"].split("rel_err=")[1]) for r in got if "rel_err=" in r["config"]]
    bad = sum(r["status"] != "ok" for r in got)
    return f"{len(got)} checks, {bad} failed, rel. err. max {max(errs):.1e}"


def d_table(t: dict, models, ds, impls, dec_impl: str) -> list[str]:
    """ms (x the decode: `dec_impl` at d = 1) per d, and the step of the first impl from the d before."""
    out = [f"| model | d | {' | '.join(impls)} | step ({impls[0]}) |", "|---" * (len(impls) + 3) + "|"]
    for m in models:
        dec, prev = t[(m, 1 << 20, 1, dec_impl)], None
        for d in ds:
            cells = [f"{t[(m, 1 << 20, d, i)]:.3f} ({t[(m, 1 << 20, d, i)] / dec:.2f})"
                     if (m, 1 << 20, d, i) in t else "-" for i in impls]
            v = t.get((m, 1 << 20, d, impls[0]))
            step = f"{v / prev - 1:+.0%}" if v and prev else ""
            out.append(f"| {m} | {d} | {' | '.join(cells)} | {step} |")
            prev = v
    return out


def parts_table(pattern: str) -> list[str]:
    t = medians(pattern)
    impls = ["ws", "ws-split-only", "merge-only", "ws-pdl", "torch_sdpa"]
    out = [f"| model | keys | {' | '.join(impls)} |", "|---" * (len(impls) + 2) + "|"]
    for n in (65536, 4096):
        for m in ("q35", "q122", "nem"):
            out.append(f"| {m} | {n} | " + " | ".join(f"{t[(m, n, 1, i)] * 1e3:.1f}" for i in impls) + " |")
    return out


def order_table() -> list[str]:
    """Each graph's median, in the order timed (direct ws call, default path, default path, direct ws call)."""
    out = ["| model | d | ws (1st) | default (2nd) | default (3rd) | ws (4th) | spread |", "|---" * 7 + "|"]
    seq = defaultdict(list)
    for r in rows("run3/paged_ws_order_*.csv.gz"):
        key = (r["model"], int(r["d"]))
        if not seq[key] or seq[key][-1][0] != r["impl"] or r["rep"] == "0":
            seq[key].append((r["impl"], []))
        seq[key][-1][1].append(float(r["time_ms"]))
    for (m, d), graphs in sorted(seq.items()):
        med = [statistics.median(v) for _, v in graphs]
        out.append(f"| {m} | {d} | " + " | ".join(f"{x:.3f}" for x in med) + f" | {max(med) / min(med) - 1:.0%} |")
    return out


def batch_table() -> list[str]:
    """Run 4: the default (192-row blocks) against row blocks of at most 128 rows, nem; ms."""
    t = defaultdict(list)
    for r in rows("run4/paged_ws_time_*.csv.gz"):
        if r["status"] == "ok":
            t[(int(r["ctx"]), int(r["batch"]), int(r["d"]), r["impl"])].append(float(r["time_ms"]))
    med = {k: statistics.median(v) for k, v in t.items()}
    out = ["| context | B | d | ws (default) | ws-m128 | rows | ws / ws-m128 |", "|---" * 7 + "|"]
    for (n, b, d, i) in sorted(k for k in med if k[3] == "ws"):
        out.append(f"| {n} | {b} | {d} | {med[(n, b, d, 'ws')]:.3f} | {med[(n, b, d, 'ws-m128')]:.3f} | "
                   f"{med[(n, b, d, 'rows')]:.3f} | {med[(n, b, d, 'ws')] / med[(n, b, d, 'ws-m128')]:.2f} |")
    return out


def main() -> None:
    print("run1 checks:", checks("run1/paged_ws_check_*.csv.gz"))
    print("\n## run 1: nem at 1M, B = 1 (ms, x the decode)\n")
    t1 = medians("run1/paged_ws_time_*.csv.gz")
    print("\n".join(d_table(t1, ["nem"], [1, 4, 5, 8, 9, 10, 11, 12, 13, 16], ["ws3", "ws2", "ws-pdl", "rows"],
                            "ws2")))
    print()
    print("\n".join(d_table(t1, ["q122"], [1, 8, 9], ["ws", "ws-pdl", "rows"], "ws")))
    print("\n## run 2: the final defaults at 1M, B = 1 (ms, x the decode)\n")
    t2 = medians("run2/paged_ws_time_*.csv.gz")
    print("\n".join(d_table(t2, ["q35", "q122", "nem"], range(1, 17), ["ws", "default", "rows"], "ws")))
    print("\n## short decodes, B = 1 (us): run 1, run 2\n")
    print("\n".join(parts_table("run1/paged_ws_parts_*.csv.gz")))
    print()
    print("\n".join(parts_table("run2/paged_ws_parts_*.csv.gz")))
    print("\n## run 3: one launch, four graphs (ms)\n")
    print("\n".join(order_table()))
    print("\n## run 4: nem, 192-row blocks against 128-row blocks (ms)\n")
    print("\n".join(batch_table()))


if __name__ == "__main__":
    main()
