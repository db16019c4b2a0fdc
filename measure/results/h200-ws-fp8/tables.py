"""The README's tables from this folder's CSVs (ms; each cell the median of every replay of that case; % of copy: the
K/V bytes read over the time, against the same run's copy ceiling, 2 GiB copy_, bytes read + written).

    python3 measure/results/h200-ws-fp8/tables.py
"""

from __future__ import annotations

import csv
import gzip
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = ("q35", "q122", "nem")


def _csv(run: str, name: str) -> list[dict]:
    with gzip.open(HERE / run / "bench" / name, "rt") as fh:
        return list(csv.DictReader(fh))


def medians(run: str) -> dict:
    """(model, batch, d, impl) -> (median ms, K/V bytes)."""
    t, nbytes = defaultdict(list), {}
    for r in _csv(run, "ws_fp8.csv.gz"):
        if r["kernel"] != "check" and r["status"] == "ok":
            key = (r["model"], int(r["batch"]), int(r["d"]), r["impl"])
            t[key].append(float(r["time_ms"]))
            nbytes[key] = float(r["bytes"])
    return {k: (statistics.median(v), nbytes[k]) for k, v in t.items()}


def copy_tbps(run: str) -> float:
    rows = [r for r in _csv(run, "ceilings.csv.gz") if r["kernel"] == "copy" and r["status"] == "ok"]
    return float(rows[0]["bytes"]) / statistics.median(float(r["time_ms"]) for r in rows) / 1e9


def checks(run: str) -> str:
    rows = [r for r in _csv(run, "ws_fp8.csv.gz") if r["kernel"] == "check"]
    ok = [r for r in rows if r["status"] == "ok"]
    worst = max(float(r["config"].split("=")[1]) for r in ok) if ok else float("nan")
    return f"{run}: {len(rows)} checks, {len(rows) - len(ok)} failed, rel. err. max {worst:.1e}"


def table(run: str, impls: list[str], batch: int, ds: list[int]) -> None:
    m, cp = medians(run), copy_tbps(run)
    print(f"\n{run}, B = {batch} (copy ceiling {cp:.3f} TB/s; cells: ms (% of copy))")
    print("| model | d | " + " | ".join(impls) + " |")
    print("|---|---|" + "---|" * len(impls))
    for model in MODELS:
        for d in ds:
            cells = []
            for i in impls:
                v = m.get((model, batch, d, i))
                cells.append("-" if v is None else f"{v[0]:.3f} ({v[1] / v[0] / 1e9 / cp:.0%})")
            print(f"| {model} | {d} | " + " | ".join(cells) + " |")


def ratios(run: str) -> None:
    """Verify (the ws kernel, fp8) over the fastest fp8 decode of the same run."""
    m = medians(run)
    print(f"\n{run}: fp8 verify (ws8) / fastest fp8 decode at B = 1")
    print("| model | decode (kernel) | d = 2 | d = 5 | d = 8 |")
    print("|---|---|---|---|---|")
    for model in MODELS:
        dec = min((m[k][0], k[3]) for k in m if k[0] == model and k[1] == 1 and k[2] == 1 and "8" in k[3])
        cells = [f"{m[(model, 1, d, 'ws8')][0] / dec[0]:.2f}x" for d in (2, 5, 8)]
        print(f"| {model} | {dec[0]:.3f} ({dec[1]}) | " + " | ".join(cells) + " |")


def main() -> None:
    for run in ("run1", "run2", "run3", "run4"):
        print(checks(run))
    table("run4", ["ws8", "ws8-bn32", "ws8-bn64", "rows8", "ws16"], 16, [1])
    table("run4", ["ws8", "ws8-bn32", "ws8-bn64", "rows8", "ws16"], 1, [1, 2, 5, 8])
    ratios("run4")
    table("run2", ["ws8", "ws8-l1", "ws8-l2", "ws16", "ws16-l2"], 1, [1, 5, 8, 9])
    table("run3", ["ws8", "ws8-bn64", "ws8-bn128", "rows8"], 1, [1, 2, 5, 8])
    table("run1", ["ws8", "rows8", "ws16"], 1, list(range(1, 10)))


if __name__ == "__main__":
    main()
