"""Markdown from `paged_v2_bench.py`'s CSV: ceilings, GPU checks, cost in d (v1, rows, fp8), decode over
split counts against torch SDPA and the copy ceiling, slot locality, verify d = 7, windowed decode."""

from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path

KEY = ("impl", "model", "ctx", "batch", "d", "kv", "config")


def medians(path: Path) -> tuple[dict, list[dict]]:
    samples, checks = defaultdict(list), []
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["kernel"] == "check":
                checks.append(r)
            elif r["status"] == "ok":
                samples[tuple(r[k] for k in KEY)].append(float(r["time_ms"]))
    return {k: statistics.median(v) for k, v in samples.items()}, checks


def copy_tbps(path: Path) -> float:
    if not path.exists():
        return math.nan
    by = defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["kernel"] == "copy" and r["status"] == "ok":
                by[r["config"]].append(float(r["bytes"]) / float(r["time_ms"]) / 1e9)
    return max((statistics.median(v) for v in by.values()), default=math.nan)


def best(med: dict, impl: str, model: str, ctx, b, d, kv="bf16", layout="") -> tuple[float, str]:
    """Fastest timed variant of `impl` at a shape (random slots unless `layout`)."""
    got = [(t, k[6]) for k, t in med.items() if k[0] == impl and k[1:6] == (model, str(ctx), str(b), str(d), kv)
           and (layout in k[6] if layout else "slots=" not in k[6])]
    return min(got) if got else (math.nan, "")


def fmt(x: float, nd=4) -> str:
    return "-" if x != x or x == math.inf else f"{x:.{nd}f}"


def d_table(med, models, big, kv) -> list[str]:
    out = [f"## Cost in d at ctx {big}, B = 1, {kv} KV (ms; ratio to the same kernel's decode; step = d over d-1)", "",
           "| model | d | v1 | rows | rows / decode | step |", "|---|---|---|---|---|---|"]
    for m in models:
        dec, prev = best(med, "rows", m, big, 1, 1, kv)[0], math.nan
        for d in range(1, 18):
            v1 = best(med, "v1", m, big, 1, d, kv)[0]
            t = best(med, "rows", m, big, 1, d, kv)[0]
            out.append(f"| {m} | {d} | {fmt(v1)} | {fmt(t)} | {fmt(t / dec, 2)} | {fmt(t / prev, 2)} |")
            prev = t
    return out + [""]


def decode_table(med, models, ctxs, batches, copy, nbytes) -> list[str]:
    out = ["## Decode (B requests of ctx keys, random slots): v1 default, fastest rows split setting, torch SDPA", "",
           "| model | ctx | B | v1 ms | rows ms | rows setting | rows / copy BW | SDPA ms | contiguous slots: v1, rows ms |",
           "|---|---|---|---|---|---|---|---|---|"]
    for m in models:
        for c in ctxs:
            for b in batches:
                v1 = best(med, "v1", m, c, b, 1)[0]
                t, cfg = best(med, "rows", m, c, b, 1)
                sd = best(med, "torch_sdpa", m, c, b, 1)[0]
                cv, cr = best(med, "v1", m, c, b, 1, layout="contiguous")[0], best(med, "rows", m, c, b, 1, layout="contiguous")[0]
                frac = nbytes(m, c, b) / t / 1e9 / copy if t == t else math.nan
                out.append(f"| {m} | {c} | {b} | {fmt(v1)} | {fmt(t)} | {cfg} | {fmt(100 * frac, 0)} % | {fmt(sd)} | "
                           f"{fmt(cv)}, {fmt(cr)} |")
    return out + [""]


def report(csv_path: Path, ceilings: Path) -> str:
    med, checks = medians(csv_path)
    copy = copy_tbps(ceilings)
    models = sorted({k[1] for k in med})
    ctxs = sorted({int(k[2]) for k in med if k[0] in ("v1", "rows") and k[4] == "1" and int(k[2]) > 4096})
    batches = sorted({int(k[3]) for k in med})
    big = max(ctxs) if ctxs else 0
    nb = {(k[1], k[2], k[3]): None for k in med}
    head = {"q35": (2, 256), "q122": (2, 256), "nem": (2, 128)}

    def nbytes(m, c, b):
        hkv, hd = head.get(m, (2, 128))
        return b * c * hkv * hd * 4
    del nb
    out = [f"Copy ceiling of the run: {fmt(copy, 2)} TB/s (read + write).", "", "## GPU checks against fp64 torch", ""]
    out += [f"- {c['model']} d={c['d']} {c['impl']} {c['kv']}: {c['config']} {c['status']}" for c in checks] + [""]
    if big:
        out += d_table(med, models, big, "bf16") + d_table(med, models, big, "fp8")
        out += decode_table(med, models, ctxs, batches, copy, nbytes)
    out += ["## Verify d = 7 and windowed decode (4096 keys) per (ctx, B)", "",
            "| model | ctx | B | verify v1 ms | verify rows ms | window v1 us | window rows us (fastest) |",
            "|---|---|---|---|---|---|---|"]
    for m in models:
        for c in ctxs:
            for b in batches:
                wv = best(med, "v1", m, 4096, b, 1)[0] * 1e3 if c == big else math.nan
                wr = best(med, "rows", m, 4096, b, 1)[0] * 1e3 if c == big else math.nan
                out.append(f"| {m} | {c} | {b} | {fmt(best(med, 'v1', m, c, b, 7)[0])} | "
                           f"{fmt(best(med, 'rows', m, c, b, 7)[0])} | {fmt(wv, 1)} | {fmt(wr, 1)} |")
    out += ["", "## Every timed variant (median ms)", "", "| " + " | ".join(KEY) + " | median ms |",
            "|" + "---|" * (len(KEY) + 1)]
    out += ["| " + " | ".join(k) + f" | {t:.4f} |" for k, t in sorted(med.items())]
    return "\n".join(out) + "\n"
