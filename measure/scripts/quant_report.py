"""The quantized-GEMM benchmark's outputs: CSV text and the markdown summary (medians against the copy ceiling)."""

from __future__ import annotations

import csv
import io
import statistics


def csv_text(rows, columns) -> str:
    buf = io.StringIO()
    wr = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    wr.writeheader()
    wr.writerows(rows)
    return buf.getvalue()


def summary_md(rows, checks, meta) -> str:
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["model"], r["component"], r["M"], r["kernel"]), []).append(r)
    copy = [float(r["gbps"]) for r in rows if r["kernel"] == "copy_d2d" and r["gbps"]]
    copy_gbps = statistics.median(copy) if copy else None
    lines = ["# Quantized-weight GEMMs at decode shapes", "",
             f"GPU: {meta.get('gpu_name', 'none')}; torch {meta['torch']}, triton {meta['triton']}; "
             f"timer {meta['timer']}; {meta['utc_time']}.", ""]
    lines.append(f"Copy bandwidth (2 GiB d2d copy_, read + write): "
                 f"{f'{copy_gbps:.0f} GB/s' if copy_gbps else 'not measured'}. Cells: median GB/s of weight + "
                 "scale bytes (% of copy bandwidth); `err` = failed (see quant.csv).")
    kernels = [k for k in dict.fromkeys(r["kernel"] for r in rows) if k != "copy_d2d"]
    for model in dict.fromkeys(r["model"] for r in rows if r["model"] != "-"):
        keys = list(dict.fromkeys((c, m) for (mo, c, m, _k) in groups if mo == model))
        present = [k for k in kernels if any((model, c, m, k) in groups for c, m in keys)]
        lines += ["", f"## {model}", "", "| component | M | N | K | " + " | ".join(present) + " |",
                  "|---|---|---|---|" + "---|" * len(present)]
        for comp, m in keys:
            first = next(g for (mo, c, mm, _k), g in groups.items() if (mo, c, mm) == (model, comp, m))[0]
            cells = []
            for k in present:
                g = groups.get((model, comp, m, k))
                vals = [float(r["gbps"]) for r in g or [] if r["gbps"]]
                if not g:
                    cells.append("")
                elif not vals:
                    cells.append("err")
                else:
                    med = statistics.median(vals)
                    cells.append(f"{med:.0f} ({100 * med / copy_gbps:.0f}%)" if copy_gbps else f"{med:.0f}")
            lines.append(f"| {comp} | {m} | {first['N']} | {first['K']} | " + " | ".join(cells) + " |")
    lines += ["", "## Correctness (before timing)", "", "| kernel | model | component | M | max rel err | fro rel err | ok | error |",
              "|---|---|---|---|---|---|---|---|"]
    for c in checks:
        lines.append(f"| {c['kernel']} | {c['model']} | {c['component']} | {c['M']} | {c['max_rel_err']} | "
                     f"{c['fro_rel_err']} | {c['ok']} | {c['error']} |")
    return "\n".join(lines) + "\n"


def error_text(exc: Exception) -> str:
    """A failed measurement's row text: the exception's type and first line."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
