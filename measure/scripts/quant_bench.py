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
- Copy bandwidth: `dst.copy_(src)` of a 2 GiB buffer in the same run and timer (no flush), bytes
  = 2 x 2 GiB (read + write); quant.md gives each kernel's median gbps as % of the median copy gbps.
- Kernels: wmtp_fp8_block (W8A8, 128x128 weight blocks, activations quantized per 1x128 group
  inside the call), wmtp_fp8_block_gemm (the same GEMM on pre-quantized activations),
  wmtp_int4_group (W4A16, group 128, bf16 scales), torch_bf16 (F.linear), torch_scaled_mm_tensor /
  _rowwise (torch._scaled_mm, activations pre-quantized per tensor / per row, not timed),
  torch_int4pack_mm (torch._weight_int4pack_mm, tinygemm layout, group 128);
  MoE: wmtp_fp8_moe / wmtp_int4_moe, up (x [M, K] -> [M*k, N_up]) and down ([M*k, F] -> [M*k, K_out],
  routing weights applied) projections, each call including routing (sort by expert) and, for fp8,
  activation quantization. A shape a kernel cannot run is a row with its error.
- Before timing, every kernel is checked at one real shape per model against fp32 torch on the
  dequantized operands (quant_check.csv: max |out - ref| / max |ref| and the Frobenius ratio).
- `--tune` adds our dense kernels over launch configurations (kernel name `wmtp_fp8_block[bn64-st4-w4]`).
- `--budget-s` (default 200) bounds the device time: measurements left when it runs out are rows
  with error "skipped: time budget".
Outputs in DIR: quant.csv, quant_check.csv, quant.md, quant.meta.json (provenance).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from wmtp.measure.kernels import quant_gemm as qg
from wmtp.measure.provenance import atomic_write_text, collect, write_meta
from wmtp.measure.scripts.quant_report import csv_text, error_text, summary_md
from wmtp.models import get_model
from wmtp.measure.scripts.quant_shapes import dense_shapes, moe_shapes

COLUMNS = ["kernel", "model", "component", "M", "N", "K", "E", "top_k", "dtype", "weight_bytes", "time_ms", "gbps",
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
# operands and calls


def _weights(n, k, dev, gen):
    w = torch.randn(n, k, device=dev, generator=gen, dtype=torch.bfloat16) / math.sqrt(k)
    fq, fs = qg.quantize_fp8_block(w)
    ip, is_ = qg.quantize_int4_group(w)
    return {"bf16": w, "fp8": (fq, fs), "int4": (ip, is_)}


DENSE_KERNELS = ("wmtp_fp8_block", "wmtp_fp8_block_gemm", "wmtp_int4_group", "torch_bf16", "torch_scaled_mm_tensor",
                 "torch_scaled_mm_rowwise", "torch_int4pack_mm")


def dense_format(kernel, n, k):
    """(dtype label, bytes of weights + scales read) of one [N, K] projection."""
    if "fp8_block" in kernel:
        return "fp8_e4m3", qg.weight_bytes("fp8_block", n, k)
    if "int4" in kernel:  # tinygemm also reads a zero per scale
        extra = 2 * n * math.ceil(k / 128) if kernel == "torch_int4pack_mm" else 0
        return "int4", qg.weight_bytes("int4_group", n, k) + extra
    if kernel == "torch_scaled_mm_tensor":
        return "fp8_e4m3", n * k + 4
    if kernel == "torch_scaled_mm_rowwise":
        return "fp8_e4m3", n * k + 4 * n
    return "bf16", 2 * n * k


def dense_prepare(kernel, w):
    """Weight operands of `kernel` from one weight set."""
    if "fp8_block" in kernel:
        return w["fp8"]
    if kernel == "wmtp_int4_group":
        return w["int4"]
    if kernel == "torch_scaled_mm_tensor":
        return _tensor_scaled(w)
    if kernel == "torch_scaled_mm_rowwise":
        return _row_scaled(w)
    if kernel == "torch_int4pack_mm":
        return _tinygemm(w)
    return (w["bf16"],)


def dense_fns(x):
    """kernel -> fn(*weight operands) for activations x [M, K] bf16 (fp8 baselines get x pre-quantized here)."""
    xq, xs = qg.quantize_act_fp8(x)
    amax = x.float().abs().amax().clamp_min(1e-6)
    x_t, sa_t = (x.float() * (448.0 / amax)).to(torch.float8_e4m3fn), (amax / 448.0).reshape(())
    row_amax = x.float().abs().amax(1, keepdim=True).clamp_min(1e-6)
    x_r, sa_r = (x.float() * (448.0 / row_amax)).to(torch.float8_e4m3fn), row_amax / 448.0
    return {
        "wmtp_fp8_block": lambda q, s: qg.fp8_gemm(x, q, s),
        "wmtp_fp8_block_gemm": lambda q, s: qg.fp8_gemm(xq, q, s, x_scale=xs),
        "wmtp_int4_group": lambda p, s: qg.int4_gemm(x, p, s),
        "torch_bf16": lambda w: F.linear(x, w),
        "torch_scaled_mm_tensor": lambda q, s: torch._scaled_mm(x_t, q.t(), scale_a=sa_t, scale_b=s,
                                                                out_dtype=torch.bfloat16),
        "torch_scaled_mm_rowwise": lambda q, s: torch._scaled_mm(x_r, q.t(), scale_a=sa_r, scale_b=s,
                                                                 out_dtype=torch.bfloat16),
        "torch_int4pack_mm": lambda p, sz: torch._weight_int4pack_mm(x, p, 128, sz),
    }


def _tensor_scaled(w):
    amax = w["bf16"].float().abs().amax().clamp_min(1e-6)
    return (w["bf16"].float() * (448.0 / amax)).to(torch.float8_e4m3fn), (amax / 448.0).reshape(())


def _row_scaled(w):
    amax = w["bf16"].float().abs().amax(1, keepdim=True).clamp_min(1e-6)
    return (w["bf16"].float() * (448.0 / amax)).to(torch.float8_e4m3fn), (amax / 448.0).reshape(1, -1)


def _tinygemm(w):
    """Our packing (element 2j low nibble) -> tinygemm's (2j high nibble), scales+zeros [K/128, N, 2] with zero 0."""
    p, s = w["int4"]
    swapped = ((p & 0xF) << 4) | (p >> 4)
    packed = torch._convert_weight_to_int4pack(swapped.contiguous(), 8)
    sz = torch.stack([s.t(), torch.zeros_like(s.t())], -1).to(torch.bfloat16).contiguous()
    return packed, sz


def dense_ref(x, w, kernel):
    """fp32 torch on the operands the kernel sees (dequantized)."""
    if kernel.startswith("wmtp_fp8"):
        xq, xs = qg.quantize_act_fp8(x)
        return qg.dequantize_fp8_block(xq, xs, (1, 128)) @ qg.dequantize_fp8_block(*w["fp8"]).T
    if "int4" in kernel:
        return x.float() @ qg.dequantize_int4_group(*w["int4"]).T
    if kernel == "torch_scaled_mm_tensor":
        q, s = _tensor_scaled(w)
        amax = x.float().abs().amax().clamp_min(1e-6)
        return ((x.float() * (448.0 / amax)).to(torch.float8_e4m3fn).float() * amax / 448.0) @ (q.float() * s).T
    if kernel == "torch_scaled_mm_rowwise":
        q, s = _row_scaled(w)
        amax = x.float().abs().amax(1, keepdim=True).clamp_min(1e-6)
        return ((x.float() * (448.0 / amax)).to(torch.float8_e4m3fn).float() * amax / 448.0) @ (q.float() * s.t()).T
    return x.float() @ w["bf16"].float().T


def moe_operands(m, n, k, n_exp, top_k, dev, gen, down):
    w = torch.randn(n_exp, n, k, device=dev, generator=gen, dtype=torch.bfloat16) / math.sqrt(k)
    ids = torch.rand(m, n_exp, device=dev, generator=gen).topk(top_k, dim=1).indices.to(torch.int32)
    wts = torch.softmax(torch.randn(m, top_k, device=dev, generator=gen), -1)
    x = torch.randn(m * top_k if down else m, k, device=dev, generator=gen).to(torch.bfloat16)
    return w, ids, wts, x


def moe_ref(x, w_deq, ids, wts, down):
    t_len, top_k = ids.shape
    pair_tok = torch.arange(t_len * top_k, device=x.device) // top_k
    xa = x.float() if down else x.float()[pair_tok]
    y = torch.einsum("pk,pnk->pn", xa, w_deq[ids.reshape(-1).long()])
    return y * wts.reshape(-1, 1) if down else y


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

    def over_budget(self):
        return time.monotonic() - self.t0 > self.args.budget_s

    def record(self, kernel, model, comp, m, n, k, e, top_k, dtype, nbytes, samples=(), error="", timer=""):
        base = dict(kernel=kernel, model=model, component=comp, M=m, N=n, K=k, E=e, top_k=top_k, dtype=dtype,
                    weight_bytes=nbytes, timer=timer)
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

    def measure(self, kernel, model, comp, m, n, k, e, top_k, dtype, nbytes, calls):
        if not self.timing:
            return
        if self.over_budget():
            self.record(kernel, model, comp, m, n, k, e, top_k, dtype, nbytes, error="skipped: time budget")
            return
        try:
            samples, timer = time_work(calls, self.args)
            self.record(kernel, model, comp, m, n, k, e, top_k, dtype, nbytes, samples, timer=timer)
        except Exception as exc:
            self.record(kernel, model, comp, m, n, k, e, top_k, dtype, nbytes, error=error_text(exc))


def _raise(exc: Exception):
    raise exc


# ---------------------------------------------------------------------------------------------
# the sweep


def run_copy(b: Bench):
    if not b.timing:
        return
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=b.dev).random_(0, 255)
    dst = torch.empty_like(src)
    try:
        if b.args.timer == "do_bench":
            import triton.testing

            samples, timer = list(triton.testing.do_bench(lambda: dst.copy_(src), return_mode="all")), "triton-do_bench"
        else:
            from wmtp.measure.timing import time_calls

            t = time_calls([lambda: dst.copy_(src)], reps=b.args.reps, warmup=b.args.warmup, flush=False)
            samples, timer = t.samples_ms, t.timer
        b.record("copy_d2d", "-", "copy", 1, COPY_BYTES, 1, 1, 1, "uint8", 2 * COPY_BYTES, samples, timer=timer)
    except Exception as exc:
        b.record("copy_d2d", "-", "copy", 1, COPY_BYTES, 1, 1, 1, "uint8", 2 * COPY_BYTES, error=error_text(exc))
    del src, dst


def run_dense(b: Bench, model, comp, n, k, ms, check_m):
    gen = torch.Generator(device=b.dev).manual_seed(17)
    copies = 1 if not b.timing else max(1, min(_copies(n * k // 2, b.l2), (8 << 30) // (6 * n * k)))
    wsets = [_weights(n, k, b.dev, gen) for _ in range(copies)]
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
        del ops
    if b.args.tune and check_m:
        run_tune(b, model, comp, n, k, wsets, gen)
    del wsets


TUNE_M = (1, 16, 128)
TUNE_CONFIGS = [dict(block_n=bn, num_stages=st, num_warps=nw) for bn in (32, 64, 128) for st in (3, 4) for nw in (4, 8)
                if not (bn == 32 and nw == 8)]


def run_tune(b: Bench, model, comp, n, k, wsets, gen):
    """Our dense kernels over launch configurations (kernel name carries the config)."""
    for m in TUNE_M:
        x = torch.randn(m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        for cfg in TUNE_CONFIGS:
            tag = f"[bn{cfg['block_n']}-st{cfg['num_stages']}-w{cfg['num_warps']}]"
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
    fmts = {"wmtp_fp8_moe": ("fp8_e4m3", "fp8_block", torch.cat(fp8_q), torch.cat(fp8_s), qg.fp8_moe_gemm,
                             qg.dequantize_fp8_block),
            "wmtp_int4_moe": ("int4", "int4_group", torch.cat(i4_p), torch.cat(i4_s), qg.int4_moe_gemm,
                              qg.dequantize_int4_group)}
    del fp8_q, fp8_s, i4_p, i4_s
    for m in sorted(set(ms) | ({check_m} if check_m else set())):
        ids = torch.rand(m, n_exp, device=b.dev, generator=gen).topk(top_k, dim=1).indices.to(torch.int32)
        wts = torch.softmax(torch.randn(m, top_k, device=b.dev, generator=gen), -1)
        x = torch.randn(m * top_k if down else m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        used = ids.unique()
        for kernel, (dtype, fmt, w, ws, launch, deq) in fmts.items():
            nbytes = used.numel() * qg.weight_bytes(fmt, n, k)

            def fn(launch=launch, w=w, ws=ws, x=x, ids=ids, wts=wts):
                return launch(x, w, ws, ids, wts if down else None, a_is_pairs=down)

            if m == check_m:
                w_deq = deq(w[used.long()], ws[used.long()])
                pos = torch.searchsorted(used, ids)
                ref = moe_ref(x, w_deq, pos, wts, down)
                if kernel == "wmtp_fp8_moe":
                    ref = moe_ref(qg.dequantize_fp8_block(*qg.quantize_act_fp8(x), (1, 128)), w_deq, pos, wts, down)
                b.check(kernel, model, comp, m, n, k, n_exp, top_k, fn, ref)
            if m in ms:
                b.measure(kernel, model, comp, m, n, k, n_exp, top_k, dtype, nbytes, [fn])
    del fmts


# ---------------------------------------------------------------------------------------------
# outputs


def write_outputs(b: Bench, out_dir: Path, final: bool):
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "quant.csv", csv_text(b.rows, COLUMNS))
    atomic_write_text(out_dir / "quant_check.csv", csv_text(b.checks, CHECK_COLUMNS))
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
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timer", choices=("graph", "do_bench"), default="graph")
    ap.add_argument("--budget-s", type=float, default=200.0, help="stop timing after this many seconds")
    ap.add_argument("--tune", action="store_true",
                    help="also time our dense kernels over block_n / num_stages / num_warps (first component per "
                         "model, M in 1, 16, 128; about a minute more, raise --budget-s)")
    args = ap.parse_args(argv)
    b = Bench(args)
    if b.dev == "cpu" and not INTERP:
        raise SystemExit("no CUDA GPU: run with TRITON_INTERPRET=1 and --quick for a CPU correctness smoke test")
    if b.dev == "cpu" and not args.quick:
        raise SystemExit("on a CPU only --quick runs (tiny shapes, correctness only)")
    torch.manual_seed(0)
    if b.dev == "cpu":  # interpreter: tiny shapes, correctness only
        run_dense(b, "tiny", "proj", 200, 384, (), check_m=3)
        run_moe(b, "tiny", "experts_up", 96, 256, 8, 2, (), check_m=3)
        run_moe(b, "tiny", "experts_down", 256, 96, 8, 2, (), check_m=3)
        write_outputs(b, args.out, final=True)
        return _report(b, args.out)
    run_copy(b)
    models = ["q35"] if args.quick else [m.strip() for m in args.models.split(",") if m.strip()]
    ms, ms_moe = ((1, 16), (1, 16)) if args.quick else (M_ALL, M_MOE)
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
    write_outputs(b, args.out, final=True)
    return _report(b, args.out)


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
