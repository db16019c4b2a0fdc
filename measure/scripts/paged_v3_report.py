"""Markdown from `paged_v3_bench.py`'s CSV: GPU checks, short-context decode (merge variants, split counts, the
split and merge kernels timed apart, torch SDPA), decode over (ctx, B) and windowed, the cost in d at the
largest context, verify d = 7 over (ctx, B), fp8 KV, and every timed variant.

    python3 measure/scripts/paged_v3_report.py OUT/paged_v3.csv OUT/ceilings.csv > OUT/paged_v3.md
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from wmtp.measure.scripts.paged_v2_report import copy_tbps, fmt, medians

MODELS = ("q35", "q122", "nem")


def _get(med: dict, impl, model, ctx, b, d, cfg="default", kv="bf16") -> float:
    return med.get((impl, model, str(ctx), str(b), str(d), kv, cfg), math.nan)


def short_table(med, ctx) -> list[str]:
    out = [f"## Decode at {ctx} keys, B = 1 (us): rows, sub variants, torch SDPA (contiguous KV)", "",
           "Fastest first per model. `sub-split` / `sub-merge`: that launch alone (graph replay of one kernel).", ""]
    for m in MODELS:
        rows = sorted((t, k[0], k[6]) for k, t in med.items() if k[1:6] == (m, str(ctx), "1", "1", "bf16"))
        out += [f"**{m}**", "", "| us | impl | config |", "|---|---|---|"]
        out += [f"| {t * 1e3:.1f} | {impl} | {cfg} |" for t, impl, cfg in rows] + [""]
    return out


def decode_table(med, ctxs, batches, copy, kv_bytes) -> list[str]:
    out = ["## Decode over (ctx, B), random slots (us; BW = sub default's KV bytes / time over the copy ceiling)", "",
           "| model | ctx | B | rows | sub | sub BW | sub waves=2 | sub waves=8 | sub merge=pdl | SDPA |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for m in MODELS:
        for c in ctxs:
            for b in batches:
                t = [_get(med, impl, m, c, b, 1, cfg) for impl, cfg in
                     (("rows", "default"), ("sub", "default"), ("sub", "waves=2"), ("sub", "waves=8"),
                      ("sub", "merge=pdl"), ("torch_sdpa", "contiguous"))]
                bw = kv_bytes[m] * c * b / (t[1] * 1e-3) / 1e12 / copy if t[1] == t[1] else math.nan
                out.append(f"| {m} | {c} | {b} | " + " | ".join(fmt(x * 1e3, 1) for x in t[:2]) + f" | {bw:.0%} | "
                           + " | ".join(fmt(x * 1e3, 1) for x in t[2:]) + " |")
    return out + [""]


def d_table(med, big) -> list[str]:
    out = [f"## Cost in d at ctx {big}, B = 1, bf16 KV (ms; ratio to the same kernel's decode; step = d over d-1)", "",
           "| model | d | rows | rows / decode | sub | sub / decode | sub step | sub tiling |",
           "|---|---|---|---|---|---|---|---|"]
    from wmtp.kernel_plan import sub_tiling
    from wmtp.measure.scripts.paged_v2_bench import SHAPES
    for m in MODELS:
        hq, hkv, hd = SHAPES[m]
        r1, s1, prev = _get(med, "rows", m, big, 1, 1), _get(med, "sub", m, big, 1, 1), math.nan
        for d in range(1, 18):
            r, s = _get(med, "rows", m, big, 1, d), _get(med, "sub", m, big, 1, d)
            rows, blocks, subs = sub_tiling(hq // hkv, d, hd)[:3]
            out.append(f"| {m} | {d} | {fmt(r)} | {fmt(r / r1, 2)} | {fmt(s)} | {fmt(s / s1, 2)} | {fmt(s / prev, 2)} "
                       f"| {blocks} x {'+'.join(map(str, subs))} |")
            prev = s
    return out + [""]


def verify_table(med, ctxs, batches) -> list[str]:
    out = ["## Verify d = 7 over (ctx, B) (ms)", "", "| model | ctx | B | rows | sub |", "|---|---|---|---|---|"]
    for m in MODELS:
        for c in ctxs:
            for b in batches:
                r, t = _get(med, "rows", m, c, b, 7), _get(med, "sub", m, c, b, 7)
                out.append(f"| {m} | {c} | {b} | {fmt(r)} | {fmt(t)} |")
    return out + [""]


def fp8_table(med, big) -> list[str]:
    out = [f"## fp8 KV (e4m3) at ctx {big}, B = 1 (ms)", "", "| model | d | rows | sub |", "|---|---|---|---|"]
    for m in MODELS:
        for d in (1, 2, 7):
            out.append(f"| {m} | {d} | {fmt(_get(med, 'rows', m, big, 1, d, kv='fp8'))} "
                       f"| {fmt(_get(med, 'sub', m, big, 1, d, kv='fp8'))} |")
    return out + [""]


def report(csv_path: Path, ceilings: Path) -> str:
    med, checks = medians(csv_path)
    copy = copy_tbps(ceilings)
    from wmtp.measure.scripts.paged_v2_bench import SHAPES
    kv_bytes = {m: hkv * hd * 2 * 2 for m, (hq, hkv, hd) in SHAPES.items()}
    ctxs, batches = (65536, 262144, 1048576), (1, 4, 16)
    out = [f"Copy ceiling of the run: {copy:.2f} TB/s (read + write).", "", "## GPU checks against fp64 torch", ""]
    out += [f"- {c['model']} d={c['d']} {c['impl']} {c['kv']} {c['config']}: {c['status']}" for c in checks] + [""]
    out += short_table(med, 65536) + decode_table(med, (4096,) + ctxs, batches, copy, kv_bytes)
    out += d_table(med, max(ctxs)) + verify_table(med, ctxs, batches) + fp8_table(med, max(ctxs))
    out += ["## Every timed variant (median ms)", "", "| impl | model | ctx | batch | d | kv | config | median ms |",
            "|---|---|---|---|---|---|---|---|"]
    out += [f"| {' | '.join(k)} | {t:.4f} |" for k, t in sorted(med.items())]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(report(Path(sys.argv[1]), Path(sys.argv[2])), end="")
