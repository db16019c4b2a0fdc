"""The quantized-GEMM benchmark's outputs: CSV text, the per-measurement summary (medians against the copy
ceiling of the same run) and the markdown report."""

from __future__ import annotations

import csv
import io
import statistics

COPY_KERNELS = ("copy_triton", "copy_torch")
SUMMARY_COLUMNS = ["kernel", "format", "model", "component", "M", "N", "K", "E", "top_k", "experts_routed",
                   "bytes_read", "samples", "median_us", "gbps", "pct_of_copy", "copy_gbps", "error"]


def csv_text(rows, columns) -> str:
    buf = io.StringIO()
    wr = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    wr.writeheader()
    wr.writerows(rows)
    return buf.getvalue()


def copy_ceiling(rows) -> tuple[float | None, str]:
    """(GB/s, kernel) of the faster median of the run's copy rows: the ceiling every percentage is against."""
    best = (None, "")
    for name in COPY_KERNELS:
        g = [r for r in rows if r["kernel"] == name and r["time_ms"]]
        gbps = int(g[0]["weight_bytes"]) / statistics.median(float(r["time_ms"]) for r in g) / 1e6 if g else None
        if gbps and (best[0] is None or gbps > best[0]):
            best = (gbps, name)
    return best


def summary_rows(rows) -> list[dict]:
    """One row per (kernel, format, model, component, M, N, K, experts routed): median time, bytes read
    (weights + scales), GB/s and % of the copy ceiling; a measurement without samples keeps its error."""
    copy_gbps, _ = copy_ceiling(rows)
    groups: dict = {}
    for r in rows:
        key = (r["kernel"], r["dtype"], r["model"], r["component"], r["M"], r["N"], r["K"], r["E"], r["top_k"],
               r.get("routed", 1))
        groups.setdefault(key, []).append(r)
    out = []
    for (kernel, fmt, model, comp, m, n, k, e, top_k, routed), g in groups.items():
        times = [float(r["time_ms"]) for r in g if r["time_ms"]]
        nbytes = int(g[0]["weight_bytes"])
        row = dict(kernel=kernel, format=fmt, model=model, component=comp, M=m, N=n, K=k, E=e, top_k=top_k,
                   experts_routed=routed, bytes_read=nbytes, samples=len(times), median_us="", gbps="",
                   pct_of_copy="", copy_gbps=f"{copy_gbps:.1f}" if copy_gbps else "",
                   error="" if times else g[0]["error"])
        if times:
            med = statistics.median(times)
            gbps = nbytes / med / 1e6
            row.update(median_us=f"{1e3 * med:.3f}", gbps=f"{gbps:.1f}",
                       pct_of_copy=f"{100 * gbps / copy_gbps:.1f}" if copy_gbps else "")
        out.append(row)
    return out


def _cell(s) -> str:
    if not s["samples"]:
        return "err"
    return f"{float(s['gbps']):.0f} ({float(s['pct_of_copy']):.0f}%)" if s["pct_of_copy"] else f"{float(s['gbps']):.0f}"


def summary_md(rows, checks, meta) -> str:
    summ = [s for s in summary_rows(rows) if s["kernel"] not in COPY_KERNELS]
    copy_gbps, copy_name = copy_ceiling(rows)
    copies = {s["kernel"]: s for s in summary_rows(rows) if s["kernel"] in COPY_KERNELS}
    lines = ["# Quantized-weight GEMMs at decode shapes", "",
             f"GPU: {meta.get('gpu_name', 'none')}; torch {meta['torch']}, triton {meta['triton']}; "
             f"timer {meta['timer']}; {meta['utc_time']}.", ""]
    seen = ", ".join(f"{k} {float(v['gbps']):.0f} GB/s" for k, v in copies.items() if v["samples"]) or "not measured"
    lines.append(f"Copy ceiling (2 GiB device copy, read + write, same timer and L2 flush as the kernels): {seen}; "
                 f"percentages are against {copy_name or 'nothing'}. Cells: median GB/s of weight + scale bytes "
                 "(% of the copy ceiling); `err` = failed (see quant.csv). Per-cell numbers: quant_summary.csv.")
    kernels = list(dict.fromkeys(s["kernel"] for s in summ))
    for model in dict.fromkeys(s["model"] for s in summ):
        keys = list(dict.fromkeys((s["component"], s["M"]) for s in summ if s["model"] == model))
        present = [k for k in kernels if any(s["kernel"] == k and s["model"] == model for s in summ)]
        by = {(s["component"], s["M"], s["kernel"]): s for s in summ if s["model"] == model}
        lines += ["", f"## {model}", "", "| component | M | N | K | routed | " + " | ".join(present) + " |",
                  "|---|---|---|---|---|" + "---|" * len(present)]
        for comp, m in keys:
            first = next(s for (c, mm, _k), s in by.items() if (c, mm) == (comp, m))
            routed = max(int(s["experts_routed"]) for (c, mm, _k), s in by.items() if (c, mm) == (comp, m))
            cells = [_cell(by[(comp, m, k)]) if (comp, m, k) in by else "" for k in present]
            lines.append(f"| {comp} | {m} | {first['N']} | {first['K']} | {routed} | " + " | ".join(cells) + " |")
    lines += ["", "## Correctness (before timing)", "",
              "| kernel | model | component | M | max rel err | fro rel err | ok | error |", "|---|---|---|---|---|---|---|---|"]
    for c in checks:
        lines.append(f"| {c['kernel']} | {c['model']} | {c['component']} | {c['M']} | {c['max_rel_err']} | "
                     f"{c['fro_rel_err']} | {c['ok']} | {c['error']} |")
    return "\n".join(lines) + "\n"


def error_text(exc: Exception) -> str:
    """A failed measurement's row text: the exception's type and first line."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
