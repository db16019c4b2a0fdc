"""Tables of a `paged_v4_bench.py` run (medians of the replays; ratios to the rows kernel's default decode of the same
run at the same context).

    python3 measure/scripts/paged_v4_report.py paged_v4.csv[.gz] ceilings.csv > paged_v4.md
    python3 measure/scripts/paged_v4_report.py --all paged_v4.csv[.gz] ceilings.csv   # every case, one table
"""

from __future__ import annotations

import csv
import gzip
import statistics
import sys
from collections import defaultdict


def _open(path: str):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def load(path: str) -> tuple[dict, list]:
    """Medians keyed by (kernel, impl, model, ctx, batch, d, kv, config), and the check rows."""
    samples, checks = defaultdict(list), []
    with _open(path) as f:
        for r in csv.DictReader(f):
            if r["kernel"] == "check":
                checks.append(r)
            elif r["status"] == "ok" and r["time_ms"] not in ("", "nan"):
                key = (r["kernel"], r["impl"], r["model"], int(r["ctx"]), int(r["batch"]), int(r["d"]), r["kv"],
                       r["config"].replace(";timer=eager", ""))
                samples[key].append((float(r["time_ms"]), float(r["bytes"] or 0)))
    return {k: (statistics.median(t for t, _ in v), v[0][1]) for k, v in samples.items()}, checks


def ceiling(path: str) -> float:
    """The copy ceiling in bytes/ms (read + written; the best of the run's copy rows)."""
    best = 0.0
    with _open(path) as f:
        for r in csv.DictReader(f):
            if r.get("kernel") == "copy" and r.get("time_ms") not in (None, "", "nan"):
                best = max(best, float(r["bytes"]) / float(r["time_ms"]))
    return best


def get(med, kernel, impl, model, ctx, b, d, kv="bf16", config="default"):
    v = med.get((kernel, impl, model, ctx, b, d, kv, config))
    return v[0] if v else float("nan")


def batch_table(med, copy, read, big):
    out = ["| model | KV | B | ms | GB read | TB/s | % of copy | % of read (sum) |",
           "|---|---|---|---|---|---|---|---|"]
    for (k, impl, m, c, b, d, kv, cfg), (t, nb) in sorted(med.items()):
        if k == "decode" and impl == "rows" and c == big and b > 1 and cfg == "default":
            out.append(f"| {m} | {kv} | {b} | {t:.3f} | {nb / 1e9:.2f} | {nb / t / 1e9:.2f} | "
                       f"{100 * nb / t / copy:.0f} % | {100 * nb / t / read:.0f} % |")
    return out


def defaults_table(med, models, big, win, small):
    out = ["| model | decode 1M v1 / rows / sub (ms) | window 4096 v1 / rows / sub (us) |", "|---|---|---|"]
    for m in models:
        a = " / ".join(f"{get(med, 'decode', i, m, big, 1, 1):.4f}" for i in ("v1", "rows", "sub"))
        w = " / ".join(f"{1e3 * get(med, 'decode', i, m, win, 1, 1):.1f}" for i in ("v1", "rows", "sub"))
        out.append(f"| {m} | {a} | {w} |")
    return out


def verify_table(med, models, big):
    out = ["| model | d | v1 default ms | rows default ms (ratio) | best rows, max_rows=128 (ratio) | best rows, "
           "max_rows=64 (ratio) | best config |", "|---|---|---|---|---|---|---|"]
    for m in models:
        dec = get(med, "decode", "rows", m, big, 1, 1)
        for d in range(1, 11):
            k = "decode" if d == 1 else "verify"
            cands = {cfg: t for (kk, impl, mm, c, b, dd, kv, cfg), (t, _) in med.items()
                     if kk == k and impl == "rows" and mm == m and c == big and b == 1 and dd == d and kv == "bf16"}
            if not cands:
                continue
            best = {mr: min(((t, cfg) for cfg, t in cands.items() if f"max_rows={mr}" in cfg), default=None)
                    for mr in (128, 64)}
            top = min((t, cfg) for cfg, t in cands.items())
            cells = [f"{b[0]:.4f} ({b[0] / dec:.2f})" if b else "same tile" for b in best.values()]
            dflt = cands.get("default", float("nan"))
            out.append(f"| {m} | {d} | {get(med, k, 'v1', m, big, 1, d):.4f} | {dflt:.4f} ({dflt / dec:.2f}) | "
                       f"{cells[0]} | {cells[1]} | {top[1]} |")
    return out


def short_table(med, models, small):
    out = ["| model | SDPA us | rows default | sub default | best sub, merge=kernel (setting) | best sub, merge=pdl "
           "(setting) |", "|---|---|---|---|---|---|"]
    for m in models:
        sdpa = get(med, "decode", "torch_sdpa", m, small, 1, 1, config="contiguous")
        cells = []
        for merge in ("kernel", "pdl"):
            c = [(t, cfg) for (k, impl, mm, cc, b, d, kv, cfg), (t, _) in med.items()
                 if k == "decode" and impl == "sub" and mm == m and cc == small and b == 1 and f"merge={merge}" in cfg]
            cells.append(f"{1e3 * min(c)[0]:.1f} ({min(c)[1]})" if c else "-")
        out.append(f"| {m} | {1e3 * sdpa:.1f} | {1e3 * get(med, 'decode', 'rows', m, small, 1, 1):.1f} | "
                   f"{1e3 * get(med, 'decode', 'sub', m, small, 1, 1):.1f} | {cells[0]} | {cells[1]} |")
    return out


def all_table(med, copy):
    """Every timed case: median, KV bytes per ms, share of the copy ceiling."""
    out = ["| kernel | impl | model | ctx | B | d | KV | config | ms | TB/s | % of copy |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (k, impl, m, c, b, d, kv, cfg), (t, nb) in sorted(med.items()):
        if k in ("decode", "verify"):
            out.append(f"| {k} | {impl} | {m} | {c} | {b} | {d} | {kv} | {cfg} | {t:.4f} | {nb / t / 1e9:.2f} | "
                       f"{100 * nb / t / copy:.0f} % |")
    return out


def main(argv=None):
    argv = argv if argv is not None else sys.argv[1:]
    if argv and argv[0] == "--all":
        med, checks = load(argv[1])
        failed = sum(c["status"] != "ok" for c in checks)
        print(f"GPU checks: {len(checks) - failed} of {len(checks)} pass.\n")
        print("\n".join(all_table(med, ceiling(argv[2]))))
        return
    med, checks = load(argv[0])
    copy = ceiling(argv[1])
    read = max((nb / t for (k, *_), (t, nb) in med.items() if k == "read"), default=float("nan"))
    models = [m for m in ("q35", "q122", "nem") if any(k[2] == m for k in med)]
    ctxs = sorted({k[3] for k in med if k[3] > 0})
    big = max(ctxs)
    win = 4096 if 4096 in ctxs else min(ctxs)
    small = min((c for c in ctxs if c not in (win, big)), default=min(ctxs))
    failed = [c for c in checks if c["status"] != "ok"]
    lines = [f"Copy ceiling {copy / 1e9:.2f} TB/s (read + written), read ceiling (2 GiB sum) {read / 1e9:.2f} TB/s. "
             f"GPU checks: {len(checks) - len(failed)} of {len(checks)} pass.", ""]
    for title, rows in (("B > 1 decode at the largest context (rows default)", batch_table(med, copy, read, big)),
                        ("Decode defaults, B = 1", defaults_table(med, models, big, win, small)),
                        (f"Verify at {big} keys, B = 1 (ratio: to the rows default decode)",
                         verify_table(med, models, big)),
                        (f"Decode at {small} keys, B = 1 (us)", short_table(med, models, small))):
        lines += [f"## {title}", ""] + rows + [""]
    if failed:
        lines += ["## Failed checks", ""] + [f"- {c['impl']} {c['model']} d={c['d']} {c['kv']} {c['config']}"
                                             for c in failed]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
