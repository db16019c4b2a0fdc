"""Quantized-weight GEMMs at the decode shapes of q35 / q122 / nem on one GPU (issue 17).

Run on a GPU (about 2-3 minutes; `--quick` for a smoke run of a few seconds):
    python3 -m wmtp.measure.scripts.quant_bench --out DIR
    python3 measure/scripts/quant_bench.py --out DIR          (with wmtp installed, e.g. pip install -e .)
On a CPU, `TRITON_INTERPRET=1 ... --quick` checks every kernel against torch at tiny shapes and times nothing.

Method
- Timer (default `--timer graph`): `wmtp.measure.timing.time_calls` — the work is captured in a CUDA
  graph, `--warmup` replays, then `--reps` replays each bracketed by CUDA events. A replay runs
  the kernel on C copies of the weights back to back, C the smallest count whose weights exceed 3x
  the L2 (cap 64); before every replay, outside the timed region, the L2 is flushed by *reading* a
  256 MiB buffer. One CSV row per replay with time_ms = replay time / C; medians are taken at
  analysis time (quant.md). `--timer do_bench`: `triton.testing.do_bench(return_mode="all")`
  (its L2 flush *writes* 256 MB: dirty lines are written back inside the timed kernel) over a
  closure that rotates through the C copies; one row per sample.
- Bytes (`weight_bytes`): weights + scales the call must read, in the kernel's format — dense: the
  [N, K] matrix; MoE: per-expert bytes x the experts the random top-k routing actually picked
  (distinct ids in topk_ids, <= min(E, M*k)). Activations, outputs, routing and split-K partials are
  not counted. gbps = weight_bytes / time_ms / 1e6 (GB/s, 1e9 bytes).
- Copy ceiling: a 2 GiB device copy in the same run, timed exactly like the kernels (`time_work`: same
  timer, same L2 flush), by a Triton streaming kernel (copy_triton) and by torch `copy_` (copy_torch; in a
  graph a memcpy node), bytes = 2 x 2 GiB (read + write); every % is against the faster median of the two.
  (The first H200 run timed only copy_torch in a graph, got 2.7 TB/s, and so overstated every %.)
- Kernels: wmtp_fp8_block (W8A8, 128x128 weight blocks, activations quantized per 1x128 group
  inside the call), wmtp_fp8_block_gemm (the same GEMM on pre-quantized activations),
  wmtp_int4_group (W4A16, group 128, bf16 scales), torch_bf16 (F.linear), torch_scaled_mm_tensor /
  _rowwise (torch._scaled_mm, activations pre-quantized per tensor / per row, not timed),
  torch_int4pack_mm (torch._weight_int4pack_mm, tinygemm layout, group 128). Ours are timed per path:
  wmtp_* forced to the tensor-core kernel (path='dot', round 1), wmtp_*_gemv forced to the GEMV kernel
  (path='gemv', M <= 16 only; fp8 activations quantized inside that one launch), wmtp_int4_group_auto path='auto'
  given the weights repacked for `quant_mma_i4` (what the shipped profiles price; the repacking is not timed);
  MoE: wmtp_fp8_moe / wmtp_int4_moe (and _gemv, and _auto: path='auto', int4 with repacked experts), up (x [M, K] -> [M*k, N_up]) and down ([M*k, F] -> [M*k, K_out],
  routing weights applied) projections, each call one launch including routing and, for fp8,
  activation quantization. A shape a kernel cannot run is a row with its error.
- Before timing, every kernel is checked at one real shape per model against fp32 torch on the
  dequantized operands (quant_check.csv: max |out - ref| / max |ref| and the Frobenius ratio).
- `--tune` adds our dense kernels over launch configurations (kernel name `wmtp_fp8_block[bn64-st3]`:
  bn block_n, st num_stages, w num_warps, sk split_k; the rest default).
- `--budget-s` (default 200) bounds the device time: measurements left when it runs out are rows
  with error "skipped: time budget".
Outputs in DIR: quant.csv (every sample), quant_summary.csv (one row per measurement: median us, bytes read,
GB/s, % of the copy ceiling), quant_check.csv, quant.md, quant.meta.json (provenance).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import torch

from wmtp.measure.kernels import quant_gemm as qg
from wmtp.measure.kernels.quant_mma_i4 import pack_int4_mma
from wmtp.measure.provenance import atomic_write_text, collect, write_meta
from wmtp.measure.scripts.quant_report import SUMMARY_COLUMNS, csv_text, error_text, summary_md, summary_rows
from wmtp.measure.kernels.quant_kernels import copy_ as triton_copy
from wmtp.measure.scripts.quant_peers import (DENSE_KERNELS, GEMV_MAX_ROWS, dense_format, dense_fns, dense_prepare,
                                              dense_ref, moe_ref, weight_set)
from wmtp.measure.scripts.quant_shapes import dense_shapes, moe_shapes
from wmtp.models import get_model

COLUMNS = ["kernel", "model", "component", "M", "N", "K", "E", "top_k", "routed", "dtype", "weight_bytes", "time_ms", "gbps",
           "error", "timer"]
CHECK_COLUMNS = ["kernel", "model", "component", "M", "N", "K", "E", "top_k", "max_rel_err", "fro_rel_err", "tol",
                 "ok", "error"]
M_ALL = (1, 2, 4, 8, 16, 32, 64, 128, 256)
M_MOE = (1, 4, 16, 64, 256)
MODELS = ("q35", "q122", "nem")
DENSE_DEFAULT = ("lin_in", "attn_qkv", "lin_out", "shared_up", "lm_head")
TOL = {"wmtp": 1e-2, "torch": 5e-2}
COPY_BYTES = 2 << 30
INTERP = os.environ.get("TRITON_INTERPRET") == "1"


# ---------------------------------------------------------------------------------------------
# timing


def _copies(bytes_per_copy, l2_bytes):
    return max(1, min(64, math.ceil(3 * l2_bytes / max(bytes_per_copy, 1))))


def time_work(calls, args):
    """Samples (ms per call) and the timer label for a list of zero-argument calls."""
    if args.timer == "do_bench":
        import triton.testing

        state = {"i": 0}

        def rotate():
            calls[state["i"] % len(calls)]()
            state["i"] += 1

        return list(triton.testing.do_bench(rotate, warmup=25, rep=100, return_mode="all")), "triton-do_bench+l2flush(write)"
    from wmtp.measure.timing import time_calls

    t = time_calls(calls, reps=args.reps, warmup=args.warmup, flush=True)
    return t.samples_ms, t.timer


class Bench:
    def __init__(self, args):
        self.args, self.rows, self.checks = args, [], []
        self.t0 = time.monotonic()
        self.dev = "cuda" if torch.cuda.is_available() else "cpu"
        self.l2 = torch.cuda.get_device_properties(0).L2_cache_size if self.dev == "cuda" else 60 << 20
        self.timing = self.dev == "cuda" and not INTERP

    def dense_copies(self, n, k):
        """Weight copies a dense [N, K] measurement rotates through (`_copies`; 1 when not timing), at most 8 GiB."""
        return 1 if not self.timing else max(1, min(_copies(n * k // 2, self.l2), (8 << 30) // (6 * n * k)))

    def over_budget(self):
        return time.monotonic() - self.t0 > self.args.budget_s

    def record(self, kernel, model, comp, m, n, k, e, top_k, dtype, nbytes, samples=(), error="", timer="",
               routed=1):
        base = dict(kernel=kernel, model=model, component=comp, M=m, N=n, K=k, E=e, top_k=top_k, routed=routed,
                    dtype=dtype, weight_bytes=nbytes, timer=timer)
        if error or not samples:
            self.rows.append({**base, "time_ms": "", "gbps": "", "error": error or "no samples"})
        for t in samples:
            self.rows.append({**base, "time_ms": f"{t:.6f}", "gbps": f"{nbytes / t / 1e6:.2f}", "error": ""})

    def check(self, kernel, model, comp, m, n, k, e, top_k, out_fn, ref):
        tol = TOL["torch" if kernel.startswith("torch") else "wmtp"]
        row = dict(kernel=kernel, model=model, component=comp, M=m, N=n, K=k, E=e, top_k=top_k, tol=tol)
        try:
            out = out_fn().float()
            diff = (out - ref).abs()
            mx, fro = float(diff.max() / ref.abs().max()), float((out - ref).norm() / ref.norm())
            finite = bool(torch.isfinite(out).all())
            row.update(max_rel_err=f"{mx:.3e}", fro_rel_err=f"{fro:.3e}", ok=finite and fro < tol, error="")
        except Exception as exc:  # a kernel that cannot run this shape: recorded, not fatal
            row.update(max_rel_err="", fro_rel_err="", ok=False, error=error_text(exc))
        self.checks.append(row)

    def measure(self, kernel, model, comp, m, n, k, e, top_k, dtype, nbytes, calls, routed=1):
        if not self.timing:
            return
        if self.over_budget():
            self.record(kernel, model, comp, m, n, k, e, top_k, dtype, nbytes, error="skipped: time budget",
                        routed=routed)
            return
        try:
            samples, timer = time_work(calls, self.args)
            self.record(kernel, model, comp, m, n, k, e, top_k, dtype, nbytes, samples, timer=timer, routed=routed)
        except Exception as exc:
            self.record(kernel, model, comp, m, n, k, e, top_k, dtype, nbytes, error=error_text(exc), routed=routed)


def _raise(exc: Exception):
    raise exc


# ---------------------------------------------------------------------------------------------
# the sweep


def run_copy(b: Bench):
    """The ceiling, timed like the kernels (same timer, same L2 flush): a 2 GiB device copy by a Triton streaming
    kernel (`copy_triton`) and by torch `copy_` (`copy_torch`: in a CUDA graph a memcpy node, which can take
    the copy engines and run slower). bytes = 2 x 2 GiB (read + write)."""
    if not b.timing:
        return
    src = torch.empty(COPY_BYTES // 4, dtype=torch.int32, device=b.dev).random_(0, 1 << 30)
    dst = torch.empty_like(src)
    for name, fn in (("copy_triton", lambda: triton_copy(dst, src)), ("copy_torch", lambda: dst.copy_(src))):
        b.measure(name, "-", "copy", 1, COPY_BYTES, 1, 1, 1, "uint8", 2 * COPY_BYTES, [fn])


def run_dense(b: Bench, model, comp, n, k, ms, check_m):
    gen = torch.Generator(device=b.dev).manual_seed(17)
    copies = b.dense_copies(n, k)
    wsets = [weight_set(n, k, b.dev, gen) for _ in range(copies)]
    for kernel in DENSE_KERNELS:
        dtype, nbytes = dense_format(kernel, n, k)
        try:
            ops = [dense_prepare(kernel, w) for w in wsets]
        except Exception as exc:  # e.g. a layout this torch build does not pack: rows with the error
            for m in ms:
                b.record(kernel, model, comp, m, n, k, 1, 1, dtype, nbytes, error=error_text(exc))
            if check_m:
                b.check(kernel, model, comp, check_m, n, k, 1, 1, lambda exc=exc: _raise(exc), None)
            continue
        for m in sorted(set(ms) | ({check_m} if check_m else set())):
            if kernel.endswith("_gemv") and m > GEMV_MAX_ROWS:
                continue
            x = torch.randn(m, k, device=b.dev, generator=gen).to(torch.bfloat16)
            try:
                fn = dense_fns(x)[kernel]
            except Exception as exc:
                b.record(kernel, model, comp, m, n, k, 1, 1, dtype, nbytes, error=error_text(exc))
                continue
            if m == check_m:
                b.check(kernel, model, comp, m, n, k, 1, 1, lambda: fn(*ops[0]), dense_ref(x, wsets[0], kernel))
            if m in ms:
                b.measure(kernel, model, comp, m, n, k, 1, 1, dtype, nbytes,
                          [lambda fn=fn, o=o: fn(*o) for o in ops])
        ops = None  # freed before the next kernel (rebound, not deleted: the lambdas above close over it)
    del wsets


TUNE_M = (1, 16, 64)
TUNE_CONFIGS = [dict(block_n=32), dict(block_n=64), dict(block_n=128), dict(block_n=64, num_stages=3),
                dict(block_n=64, num_stages=6), dict(block_n=64, num_warps=8), dict(block_n=128, num_warps=8),
                dict(block_n=64, split_k=1), dict(block_n=32, split_k=1), dict(block_n=32, num_stages=6)]


_SHORT = {"block_n": "bn", "num_stages": "st", "num_warps": "w", "split_k": "sk"}


def run_tune(b: Bench, model, comp, n, k):
    """Our dense kernels over launch configurations (kernel name carries the config)."""
    gen = torch.Generator(device=b.dev).manual_seed(29)
    wsets = [weight_set(n, k, b.dev, gen) for _ in range(b.dense_copies(n, k))]
    for m in TUNE_M:
        x = torch.randn(m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        for cfg in TUNE_CONFIGS:
            tag = "[" + "-".join(f"{_SHORT[key]}{val}" for key, val in cfg.items()) + "]"
            for name, fmt, launch in (("wmtp_fp8_block", "fp8", qg.fp8_gemm), ("wmtp_int4_group", "int4", qg.int4_gemm)):
                dtype, nbytes = dense_format(name, n, k)
                calls = [lambda w=w, launch=launch, fmt=fmt, cfg=cfg: launch(x, *w[fmt], **cfg) for w in wsets]
                b.measure(name + tag, model, comp, m, n, k, 1, 1, dtype, nbytes, calls)


def run_moe(b: Bench, model, comp, n, k, n_exp, top_k, ms, check_m):
    gen = torch.Generator(device=b.dev).manual_seed(23)
    down = comp.endswith("down")
    fp8_q, fp8_s, i4_p, i4_s = [], [], [], []
    for e0 in range(0, n_exp, 32):  # quantize in chunks: fp32 temporaries of all experts would be large
        w = torch.randn(min(32, n_exp - e0), n, k, device=b.dev, generator=gen, dtype=torch.bfloat16) / math.sqrt(k)
        for dst, t in zip((fp8_q, fp8_s, i4_p, i4_s), qg.quantize_fp8_block(w) + qg.quantize_int4_group(w)):
            dst.append(t)
        del w
    fp8_w, i4_w = (torch.cat(fp8_q), torch.cat(fp8_s)), (torch.cat(i4_p), torch.cat(i4_s))
    fmts = {name: (dtype, fmt, *ws, launch, deq, path)
            for path, tail in (("dot", ""), ("gemv", "_gemv"), ("auto", "_auto"))
            for name, dtype, fmt, ws, launch, deq in (
                ("wmtp_fp8_moe" + tail, "fp8_e4m3", "fp8_block", fp8_w, qg.fp8_moe_gemm, qg.dequantize_fp8_block),
                ("wmtp_int4_moe" + tail, "int4", "int4_group", i4_w, qg.int4_moe_gemm, qg.dequantize_int4_group))}
    i4_mma = pack_int4_mma(i4_w[0])  # int4 path='auto' with the experts repacked for the tensor-core kernel
    del fp8_q, fp8_s, i4_p, i4_s
    for m in sorted(set(ms) | ({check_m} if check_m else set())):
        ids = torch.rand(m, n_exp, device=b.dev, generator=gen).topk(top_k, dim=1).indices.to(torch.int32)
        wts = torch.softmax(torch.randn(m, top_k, device=b.dev, generator=gen), -1)
        x = torch.randn(m * top_k if down else m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        used = ids.unique()
        for kernel, (dtype, fmt, w, ws, launch, deq, path) in fmts.items():
            nbytes = used.numel() * qg.weight_bytes(fmt, n, k)
            if path == "gemv" and m > GEMV_MAX_ROWS:
                continue

            def fn(launch=launch, w=w, ws=ws, x=x, ids=ids, wts=wts, path=path, kernel=kernel):
                kw = {"w_mma": i4_mma} if kernel == "wmtp_int4_moe_auto" else {}
                return launch(x, w, ws, ids, wts if down else None, a_is_pairs=down, path=path, **kw)

            if m == check_m:
                w_deq = deq(w[used.long()], ws[used.long()])
                pos = torch.searchsorted(used, ids)
                ref = moe_ref(x, w_deq, pos, wts, down)
                if kernel.startswith("wmtp_fp8_moe"):
                    ref = moe_ref(qg.dequantize_fp8_block(*qg.quantize_act_fp8(x), (1, 128)), w_deq, pos, wts, down)
                b.check(kernel, model, comp, m, n, k, n_exp, top_k, fn, ref)
            if m in ms:
                b.measure(kernel, model, comp, m, n, k, n_exp, top_k, dtype, nbytes, [fn], routed=used.numel())
    del fmts


# ---------------------------------------------------------------------------------------------
# outputs


def write_outputs(b: Bench, out_dir: Path, final: bool):
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "quant.csv", csv_text(b.rows, COLUMNS))
    atomic_write_text(out_dir / "quant_check.csv", csv_text(b.checks, CHECK_COLUMNS))
    atomic_write_text(out_dir / "quant_summary.csv", csv_text(summary_rows(b.rows), SUMMARY_COLUMNS))
    if final:
        timers = sorted({r["timer"] for r in b.rows if r["timer"]}) or ["none (no timing)"]
        extra = {"script": "measure/scripts/quant_bench.py", "wall_s": round(time.monotonic() - b.t0, 1),
                 "args": {k: str(v) for k, v in vars(b.args).items()}}
        meta = collect(", ".join(timers), extra=extra)
        write_meta(out_dir / "quant.meta.json", meta)
        atomic_write_text(out_dir / "quant.md", summary_md(b.rows, b.checks, meta))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="output folder")
    ap.add_argument("--quick", action="store_true", help="smoke run: one model, one projection, M in {1, 16}")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--components", default=",".join(DENSE_DEFAULT),
                    help="dense components, or 'all' (attn_qkv, attn_o, lin_in, lin_ba, lin_out, shared_up, "
                         "shared_down, latent_in, latent_out, lm_head)")
    ap.add_argument("--ms", default=",".join(map(str, M_ALL)), help="rows M of the dense GEMMs")
    ap.add_argument("--ms-moe", default=",".join(map(str, M_MOE)), help="tokens M of the MoE GEMMs")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timer", choices=("graph", "do_bench"), default="graph")
    ap.add_argument("--budget-s", type=float, default=200.0, help="stop timing after this many seconds")
    ap.add_argument("--tune", action="store_true",
                    help="also time our dense kernels over block_n / num_stages / num_warps (first component per "
                         "model, M in 1, 16, 64; about a minute more, raise --budget-s)")
    args = ap.parse_args(argv)
    b = Bench(args)
    if b.dev == "cpu" and not INTERP:
        raise SystemExit("error: no CUDA GPU is visible: quant_bench times GPU kernels (TRITON_INTERPRET=1 with "
                         "--quick runs a CPU correctness smoke test)")
    if b.dev == "cpu" and not args.quick:
        raise SystemExit("error: on a CPU only --quick runs (tiny shapes, correctness only)")
    torch.manual_seed(0)
    if b.dev == "cpu":  # interpreter: tiny shapes, correctness only
        run_dense(b, "tiny", "proj", 200, 384, (), check_m=3)
        run_moe(b, "tiny", "experts_up", 96, 256, 8, 2, (), check_m=3)
        run_moe(b, "tiny", "experts_down", 256, 96, 8, 2, (), check_m=3)
        write_outputs(b, args.out, final=True)
        return _report(b, args.out)
    run_copy(b)
    models = ["q35"] if args.quick else [m.strip() for m in args.models.split(",") if m.strip()]
    ms, ms_moe = ((1, 16), (1, 16)) if args.quick else (_ints(args.ms), _ints(args.ms_moe))
    comps = ["lin_in"] if args.quick else [c.strip() for c in args.components.split(",") if c.strip()]
    if args.quick:
        args.reps = min(args.reps, 5)
    for model in models:  # MoE first: the budget guard cuts the tail of the dense list, not the experts
        s = get_model(model)
        for comp, (n, k) in moe_shapes(model).items():
            run_moe(b, model, comp, n, k, s.n_experts, s.top_k, ms_moe, check_m=16)
            write_outputs(b, args.out, final=False)
    for model in models:
        shapes = dense_shapes(model)
        chosen = list(shapes) if comps == ["all"] else [c for c in comps if c in shapes]
        for i, comp in enumerate(chosen):
            run_dense(b, model, comp, *shapes[comp], ms, check_m=16 if i == 0 else 0)
            write_outputs(b, args.out, final=False)
    for model in models if args.tune else ():  # last: the budget guard cuts the tuning, not the defaults
        shapes = dense_shapes(model)
        comp = next(c for c in comps + list(shapes) if c in shapes)
        run_tune(b, model, comp, *shapes[comp])
        write_outputs(b, args.out, final=False)
    write_outputs(b, args.out, final=True)
    return _report(b, args.out)


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SystemExit(f"error: expected a comma-separated list of integers, got {text!r}") from None


def _report(b: Bench, out_dir: Path) -> int:
    bad = [c for c in b.checks if not c["ok"] and c["kernel"].startswith("wmtp")]
    print(f"{len(b.rows)} timing rows, {len(b.checks)} checks ({len(bad)} of our kernels failed) -> {out_dir} "
          f"in {time.monotonic() - b.t0:.0f} s")
    for c in b.checks:
        print(f"  check {c['kernel']:26s} {c['model']:5s} {c['component']:12s} M={c['M']:<4} max_rel={c['max_rel_err']:>10s} "
              f"fro={c['fro_rel_err']:>10s} ok={c['ok']} {c['error']}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
