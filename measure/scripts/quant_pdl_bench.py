"""PDL on / off for the dense decode GEMMs (issue 17, round 8): does launching the weight-bound GEMM as a programmatic
dependent launch (`wmtp.measure.kernels.quant_pdl`) cut its fixed cost per call inside a chain of kernels?

Run on a GPU (about 3-4 minutes):
    python3 -m wmtp.measure.scripts.quant_pdl_bench --out DIR
On a CPU, `TRITON_INTERPRET=1 ... --quick` runs the checks' code path on tiny shapes and times nothing.

Method: quant_bench's (`quant_bench.Bench`, timer `wmtp.measure.timing.time_calls`: one CUDA graph per measurement
holding the call on C copies of the weights back to back, C the smallest count whose weights exceed 3x the L2, the
L2 flushed by a read before every replay, time per call = replay / C; the copy ceiling timed the same way). Every
(model, dense projection, M, format) is timed with path='auto' twice, `quant_pdl.ENABLED` False (kernel name
`wmtp_<fmt>_auto`: the shipped defaults) and True (`..[pdl]`), so both lie in one run; fp8 also with the IEEE-division
GEMV at M = 1 (`[rn]`) and swap-AB quantizing in its K loop at M = 2..16 (`[loop]`). Within a replay each GEMM follows the previous
GEMM (the first follows the L2 flush, a torch reduction). `--after-mul` also times each GEMM behind an elementwise
torch kernel that writes its activations (`[mul]` / `[mul,pdl]`: per call = mul + GEMM; `torch_mul` alone in the
same chain is its own row), the case of a GEMM behind a kernel that does not trigger its dependents early.
Checks: every variant's output must equal the base output bit for bit (the same arithmetic), and match fp32 torch
on the dequantized operands (quant_check.csv, quant_bench's tolerance).
Outputs in DIR: quant.csv / quant_summary.csv / quant_check.csv / quant.md / quant.meta.json (quant_bench's),
pdl.md (the variants side by side, % of copy).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from wmtp.measure.kernels import quant_gemm as qg
from wmtp.measure.kernels import quant_pdl
from wmtp.measure.provenance import atomic_write_text
from wmtp.measure.scripts.quant_bench import Bench, run_copy, write_outputs
from wmtp.measure.scripts.quant_peers import dense_format, dense_ref, weight_set
from wmtp.measure.scripts.quant_report import copy_ceiling, summary_rows
from wmtp.measure.scripts.quant_shapes import dense_shapes
from wmtp.models import MODELS

MS = (1, 2, 4, 8, 16)
FORMATS = {"fp8": ("wmtp_fp8_block_auto", qg.fp8_gemm), "int4": ("wmtp_int4_group_auto", qg.int4_gemm)}


# (name suffix, PDL, fp8 GEMV division `quant_gemm.GEMV_ACT_DIV`, fp8 swap-AB activations `quant_gemm.SWAP_ACT`); the
# base row is the shipped default; '[rn]' (IEEE divisions) applies to the fp8 GEMV (M = 1), '[loop]' to fp8 swap-AB
# (2..16). Every variant computes the same numbers: its output must equal the base output bit for bit.
BASE = (("", False, "nodiv", "pre"), ("[pdl]", True, "nodiv", "pre"))
FP8_GEMV = BASE + (("[rn]", False, "rn", "pre"),)
FP8_SWAP = BASE + (("[loop]", False, "nodiv", "loop"),)


def _set(pdl: bool, div: str, act: str = "pre") -> None:
    quant_pdl.ENABLED = pdl
    qg.GEMV_ACT_DIV = div
    qg.SWAP_ACT = act


def _variants(fmt: str, m: int):
    if fmt != "fp8":
        return BASE
    return FP8_GEMV if m == 1 else FP8_SWAP if m <= qg.SWAP_AUTO_M[1] else BASE


def run_shape(b: Bench, model: str, comp: str, n: int, k: int, ms, after_mul: bool) -> None:
    gen = torch.Generator(device=b.dev).manual_seed(31)
    wsets = [weight_set(n, k, b.dev, gen) for _ in range(b.dense_copies(n, k))]
    for m in ms:
        x = torch.randn(m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        h, g = x.clone(), torch.ones_like(x)
        for fmt, (name, fn) in FORMATS.items():
            dtype, nbytes = dense_format(name, n, k)
            base = None
            for tag, pdl, div, act in _variants(fmt, m):
                _set(pdl, div, act)
                out = fn(x, *wsets[0][fmt])
                base = out if base is None else base
                b.measure(name + tag, model, comp, m, n, k, 1, 1, dtype, nbytes,
                          [lambda w=w, fmt=fmt, fn=fn: fn(x, *w[fmt]) for w in wsets])
                if after_mul and tag in ("", "[pdl]"):
                    b.measure(name + ("[mul,pdl]" if pdl else "[mul]"), model, comp, m, n, k, 1, 1, dtype, nbytes,
                              [lambda w=w, fmt=fmt, fn=fn: (torch.mul(h, g, out=x), fn(x, *w[fmt])) for w in wsets])
                if tag:
                    b.check(name + tag, model, comp, m, n, k, 1, 1,
                            lambda o=out, same=bool(torch.equal(base, out)): o if same else _mismatch(),
                            dense_ref(x, wsets[0], name))
            _set(False, "nodiv")
        if after_mul:
            b.measure("torch_mul", model, comp, m, n, k, 1, 1, "bf16", 0,
                      [lambda: torch.mul(h, g, out=x) for _ in wsets])
    del wsets


def _mismatch():
    raise RuntimeError("the variant's output differs from the base output")


def pdl_table(rows: list[dict]) -> str:
    """Every variant side by side (`quant_report.summary_rows`: median, % of the run's copy ceiling) with the base's
    time over the variant's; one line per (model, component, M, format); the mul columns: GEMM behind an elementwise
    kernel, off / PDL, and that kernel alone."""
    summ = {(r["kernel"], r["model"], r["component"], int(r["M"])): r for r in summary_rows(rows) if r["median_us"]}
    tags = list(dict.fromkeys(t for t, *_ in FP8_GEMV + FP8_SWAP))
    head = ["model", "component", "MB", "M", "format"] + [f"{t or 'base'} us (% copy, base / it)" for t in tags]
    head += ["mul+GEMM us, off / PDL", "mul us"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    us = lambda kern, key: float(summ[(kern, *key)]["median_us"]) if (kern, *key) in summ else None  # noqa: E731
    for (kern, model, comp, m), base in sorted(summ.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][3], kv[0][0])):
        if not kern.endswith("_auto"):
            continue
        key, t0 = (model, comp, m), float(base["median_us"])
        cells = [model, comp, f"{int(base['bytes_read']) / 1e6:.1f}", str(m), "fp8" if "fp8" in kern else "int4"]
        for t in tags:
            r = summ.get((kern + t, *key))
            cells.append("-" if r is None else f"{float(r['median_us']):.2f} ({r['pct_of_copy'] or '-'}, "
                                               f"{t0 / float(r['median_us']):.3f})")
        mul = [us(kern + t, key) for t in ("[mul]", "[mul,pdl]")]
        alone = us("torch_mul", key)
        cells.append("-" if None in mul else f"{mul[0]:.2f} / {mul[1]:.2f}")
        cells.append("-" if alone is None else f"{alone:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--quick", action="store_true", help="CPU interpreter: tiny shapes, checks only")
    ap.add_argument("--models", default="q35,q122,nem")
    ap.add_argument("--ms", default=",".join(map(str, MS)))
    ap.add_argument("--after-mul", default="lin_in,attn_qkv,lin_out",
                    help="components also timed behind an elementwise kernel ('' for none)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=300.0)
    args = ap.parse_args(argv)
    args.timer = "graph"
    b = Bench(args)
    try:
        ms = tuple(int(v) for v in args.ms.split(",") if v.strip())
    except ValueError:
        ms = ()
    if not ms or min(ms) < 1:
        print(f"error: --ms: expected a comma-separated list of positive row counts, got {args.ms!r}", file=sys.stderr)
        return 2
    unknown = [m.strip() for m in args.models.split(",") if m.strip() and m.strip() not in MODELS]
    if unknown:
        print(f"error: --models: unknown model {unknown[0]!r}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    after = {c.strip() for c in args.after_mul.split(",") if c.strip()}
    if b.dev == "cpu" and not args.quick:
        print("error: on a CPU only --quick runs (TRITON_INTERPRET=1, tiny shapes, checks only)", file=sys.stderr)
        return 2
    if b.dev == "cpu":
        run_shape(b, "tiny", "proj", 200, 384, (1, 3), after_mul=False)
    else:
        run_copy(b)
        for model in [m.strip() for m in args.models.split(",") if m.strip()]:
            for comp, (n, k) in dense_shapes(model).items():
                run_shape(b, model, comp, n, k, ms, comp in after)
                write_outputs(b, args.out, final=False)
    write_outputs(b, args.out, final=True)
    gbps, _ = copy_ceiling(b.rows)
    if gbps:
        atomic_write_text(args.out / "pdl.md", f"Copy ceiling {gbps:.0f} GB/s (this run).\n\n" + pdl_table(b.rows))
    bad = [c for c in b.checks if not c["ok"]]
    print(f"{len(b.rows)} timing rows, {len(b.checks)} checks, {len(bad)} failed -> {args.out}")
    for c in bad:
        print(f"  FAILED {c['kernel']} {c['model']} {c['component']} M={c['M']} {c['error']}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
