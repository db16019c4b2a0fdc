"""`wmtp measure kernels`: time the project's kernels and components on this GPU.

Method (see `timing.py`): each row is one CUDA-graph replay timed with CUDA events, L2 flushed
before each replay; every replay is stored as its own row (`rep`), medians are taken at analysis
time. Inputs are fresh random bf16 (never zeros); KV slots are a random permutation of the pool
(page size 1), as a serving engine's pool looks after churn. `bytes` counts the HBM traffic the
latency model assigns to the same shape (`wmtp.latency`): attention reads each K and V row once
(B * S_eff * kv_bytes_per_token), the index build reads and writes one int32 per entry (ring: writes
only), components their weight bytes. Ceiling rows in the same run: `copy` (device-to-device copy of
2 GiB, bytes read + written) and `gemm_peak` (bf16 8192^3, `flops`). A shape that fails or does
not fit is a row whose `status` holds the reason.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import torch
import torch.nn.functional as F

from wmtp.latency import _attention_flops
from wmtp.measure import components as comp
from wmtp.measure.kernels.index_build import build_kv_indices
from wmtp.measure.kernels.paged_attention import decode_attention, verify_attention
from wmtp.measure import timing
from wmtp.measure.timing import reps_for
from wmtp.specs import ModelSpec

COLUMNS = ["kernel", "impl", "model", "ctx", "batch", "d", "window", "sink", "q_heads", "kv_heads", "head_dim",
           "dtype", "rep", "time_ms", "bytes", "flops", "status", "config", "timer"]
DECODE_VARIANTS = ([dict(block_n=bn, num_warps=w, num_stages=st) for bn in (32, 64) for w in (4, 8) for st in (3, 4)]
                   + [dict(num_splits=ns) for ns in (132, 528, 1056)])
DEVICE = "cuda"  # tests point this (and components.DEVICE) at "cpu" with a stand-in timer
VERIFY_VARIANTS = ([dict(block_n=bn, num_warps=w, max_rows=mr) for bn in (32, 64) for w in (4, 8) for mr in (64, 128)]
                   + [dict(num_stages=4)])
WINDOW_VARIANTS = [dict(num_splits=ns) for ns in (16, 32, 128)] + [dict(block_n=64), dict(block_n=64, num_splits=32),
                                                                   dict(num_warps=8)]
INDEX_VARIANTS = [dict(block=bl, num_warps=w) for bl in (256, 4096, 8192) for w in (4, 8)]


@dataclass
class BenchConfig:
    ctxs: list[int]
    batches: list[int]
    depth: int = 7
    window: int = 4032
    sink: int = 64
    extend_queries: int = 5
    variants: bool = True
    components: bool = True
    sdpa: bool = True
    decode_kw: dict = field(default_factory=dict)
    verify_kw: dict = field(default_factory=dict)


class RowWriter:
    """Appends rows to a CSV as they are measured, so an interrupted run keeps its samples."""

    def __init__(self, path: Path, resume: bool = False):
        self.path = path
        new = not (resume and path.exists())
        self.f = open(path, "w" if new else "a", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=COLUMNS)
        if new:
            self.w.writeheader()
        self.rows = 0

    def write(self, base: dict, samples: list[float] | None, timer: str, status: str = "ok") -> None:
        for rep, t in enumerate(samples or [float("nan")]):
            self.w.writerow({**base, "rep": rep, "time_ms": t, "status": status, "timer": timer})
            self.rows += 1
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def _free_bytes() -> int:
    return torch.cuda.mem_get_info()[0]


def _l2_bytes() -> int:
    return getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 60 * 2**20)


def _timed(writer: RowWriter, base: dict, work: list[Callable], est_ms: float, flush: bool = True,
           graph: bool = True) -> list[float] | None:
    try:
        t = timing.time_calls(work, reps=reps_for(est_ms * len(work)), flush=flush, graph=graph)
        writer.write(base, t.samples_ms, t.timer)
        return t.samples_ms
    except Exception as e:  # a failing shape is a row, not a missing row
        writer.write(base, None, "", status=f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        torch.cuda.empty_cache()
        return None


def _impl(i: int, kw: dict) -> str:
    """The shipped defaults are impl 'wmtp'; tuning variants name their settings."""
    return "wmtp" if i == 0 else "wmtp[" + ",".join(f"{k}={v}" for k, v in kw.items()) + "]"


def ceiling_rows(writer: RowWriter) -> None:
    n = 2 * 1024**3 // 2
    src = torch.randn(n, device=DEVICE, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    _timed(writer, dict(kernel="copy", impl="torch", dtype="bf16", bytes=4 * n, flops=0, config="2GiB copy_ eager"),
           [lambda: dst.copy_(src)], 1.0, flush=False, graph=False)
    _timed(writer, dict(kernel="copy", impl="torch", dtype="bf16", bytes=4 * n, flops=0, config="2GiB mul(1) graph"),
           [lambda: torch.mul(src, 1, out=dst)], 1.0, flush=False)
    del src, dst
    a = torch.randn(8192, 8192, device=DEVICE, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=DEVICE, dtype=torch.bfloat16)
    _timed(writer, dict(kernel="gemm_peak", impl="torch", dtype="bf16", bytes=3 * 8192 * 8192 * 2,
                        flops=2 * 8192**3, config="8192^3 random"), [lambda: a @ b], 1.5, flush=False)
    del a, b
    torch.cuda.empty_cache()


def attention_rows(writer: RowWriter, spec: ModelSpec, ctx: int, batch: int, cfg: BenchConfig,
                   tune: bool) -> None:
    hq, hkv, hd = spec.q_heads, spec.kv_heads, spec.head_dim
    kv_tok = spec.kv_bytes_per_token_layer
    base = dict(model=spec.key, ctx=ctx, batch=batch, window=cfg.window, sink=cfg.sink, q_heads=hq, kv_heads=hkv,
                head_dim=hd, dtype="bf16", d=1)
    slots = batch * ctx
    need = slots * kv_tok * (2 if cfg.sdpa else 1) + slots * 8 + 2**30
    if need > 0.92 * _free_bytes():
        msg = f"skipped: needs {need / 2**30:.1f} GiB, {_free_bytes() / 2**30:.1f} GiB free"
        writer.write({**base, "kernel": "decode_attn", "impl": "wmtp"}, None, "", status=msg)
        return
    k_pool = torch.randn(slots, hkv, hd, device=DEVICE, dtype=torch.bfloat16)
    v_pool = torch.randn(slots, hkv, hd, device=DEVICE, dtype=torch.bfloat16)
    r2t = torch.randperm(slots, device=DEVICE).to(torch.int32).view(batch, ctx)
    seq = torch.full((batch,), ctx, device=DEVICE, dtype=torch.int32)
    s_win = min(ctx, cfg.window + cfg.sink)
    idx = {}
    for mode, n in (("native", ctx), ("window", s_win), ("ring", s_win)):
        ptr = torch.arange(batch + 1, device=DEVICE, dtype=torch.int32) * n
        out = torch.empty(batch * n, device=DEVICE, dtype=torch.int32)
        build_kv_indices(r2t, seq, mode, cfg.sink, cfg.window, cfg.depth, max_len=ctx, kv_indptr=ptr, out=out)
        idx[mode] = (ptr, out)
        nbytes = (4 if mode == "ring" else 8) * batch * n
        for i, kw in enumerate([{}] + (INDEX_VARIANTS if tune and mode == "native" else [])):
            _timed(writer, {**base, "kernel": "index_build", "impl": _impl(i, kw), "config": mode, "bytes": nbytes,
                            "flops": 0},
                   [lambda mode=mode, ptr=ptr, out=out, kw=kw: build_kv_indices(
                       r2t, seq, mode, cfg.sink, cfg.window, cfg.depth, max_len=ctx, kv_indptr=ptr, out=out, **kw)],
                   nbytes / 3e9)
    q1 = torch.randn(batch, hq, hd, device=DEVICE, dtype=torch.bfloat16)
    o1 = torch.empty_like(q1)
    for mode, n in (("native", ctx), ("window", s_win)):
        ptr, ind = idx[mode]
        nbytes = batch * n * kv_tok
        row = {**base, "kernel": "decode_attn", "impl": "wmtp", "config": mode, "bytes": nbytes,
               "flops": batch * _attention_flops(spec, 1, n)}
        variants = [cfg.decode_kw] + ((DECODE_VARIANTS if mode == "native" else WINDOW_VARIANTS) if tune else [])
        for i, kw in enumerate(variants):
            _timed(writer, {**row, "impl": _impl(i, kw)},
                   [lambda ptr=ptr, ind=ind, n=n, kw=kw: decode_attention(q1, k_pool, v_pool, ptr, ind, n, out=o1, **kw)],
                   nbytes / 3e9)
    for d, mode, kernel in ((cfg.depth, "native", "verify_attn"), (cfg.extend_queries, "window", "extend_attn"),
                            (cfg.extend_queries, "native", "extend_attn")):
        ptr, ind = idx[mode]
        n = ctx if mode == "native" else s_win
        qd = torch.randn(batch * d, hq, hd, device=DEVICE, dtype=torch.bfloat16)
        od = torch.empty_like(qd)
        qo = torch.arange(batch + 1, device=DEVICE, dtype=torch.int32) * d
        nbytes = batch * n * kv_tok
        row = {**base, "kernel": kernel, "impl": "wmtp", "config": mode, "d": d, "bytes": nbytes,
               "flops": batch * _attention_flops(spec, d, n)}
        variants = [cfg.verify_kw] + (VERIFY_VARIANTS if tune and kernel == "verify_attn" else [])
        for i, kw in enumerate(variants):
            _timed(writer, {**row, "impl": _impl(i, kw)},
                   [lambda ptr=ptr, ind=ind, n=n, kw=kw, qd=qd, od=od, qo=qo, d=d:
                    verify_attention(qd, k_pool, v_pool, ptr, ind, qo, d, n, out=od, **kw)], nbytes / 3e9)
    if cfg.sdpa:  # torch's own SDPA on contiguous K/V, the reference point
        kc = k_pool.view(batch, ctx, hkv, hd).transpose(1, 2).contiguous()
        del k_pool
        vc = v_pool.view(batch, ctx, hkv, hd).transpose(1, 2).contiguous()
        del v_pool
        for d in (1, cfg.depth):
            q = torch.randn(batch, hq, d, hd, device=DEVICE, dtype=torch.bfloat16)
            nbytes = batch * ctx * kv_tok
            _timed(writer, {**base, "kernel": "decode_attn" if d == 1 else "verify_attn", "impl": "torch_sdpa",
                            "config": "contiguous", "d": d, "bytes": nbytes,
                            "flops": batch * _attention_flops(spec, d, ctx)},
                   [lambda q=q: F.scaled_dot_product_attention(q, kc, vc, enable_gqa=True)], nbytes / 2e9)
        del kc, vc
    torch.cuda.empty_cache()


def component_rows(writer: RowWriter, spec: ModelSpec, batch: int, cfg: BenchConfig) -> None:
    l2 = _l2_bytes()
    d = cfg.depth
    builders: list[tuple[str, Callable[[], comp.Component]]] = [
        ("lm_head", lambda: comp.lm_head_component(spec, batch * d, l2)),
        ("lm_head", lambda: comp.lm_head_component(spec, batch, l2)),
        ("gemm", lambda: comp.gemm_component(spec, batch, l2, "mtp")),
        ("gemm", lambda: comp.gemm_component(spec, batch * d, l2, "attn")),
    ]
    if spec.n_linear:
        builders += [("gemm", lambda: comp.gemm_component(spec, batch * d, l2, "linear")),
                     ("linear_state", lambda: comp.linear_state_component(spec, batch, d, l2))]
    if spec.n_moe:
        builders += [("moe", lambda: comp.moe_component(spec, batch * d, l2, "verify")),
                     ("moe", lambda: comp.moe_component(spec, batch, l2, "fwd"))]
    if spec.n_dense_ffn:
        builders.append(("gemm", lambda: comp.dense_ffn_component(spec, batch * d, l2)))
    for kind, build in builders:
        tokens = None
        try:
            c = build()
        except Exception as e:
            writer.write(dict(kernel=kind, impl="torch+wmtp", model=spec.key, batch=batch, dtype="bf16"), None, "",
                         status=f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            continue
        tokens = c.work.shape.get("tokens", batch)
        row = dict(kernel=c.kind, impl="torch+wmtp", model=spec.key, batch=batch, d=c.work.shape.get("d", ""),
                   dtype="bf16", config=f"{c.name};tokens={tokens}", bytes=c.work.bytes, flops=c.work.flops,
                   q_heads=spec.q_heads, kv_heads=spec.kv_heads, head_dim=spec.head_dim)
        _timed(writer, row, c.calls, c.work.bytes / 3e9)
        del c
        torch.cuda.empty_cache()


def plan(specs: Iterable[ModelSpec], cfg: BenchConfig) -> Iterator[tuple[str, Callable[[RowWriter], None]]]:
    """The run as labelled steps (for the progress bar)."""
    yield "ceilings", ceiling_rows
    for spec in specs:
        for ctx in cfg.ctxs:
            for b in cfg.batches:
                tune = cfg.variants and ctx == max(cfg.ctxs) and b == 1
                yield (f"{spec.key} ctx={ctx} B={b}",
                       lambda w, spec=spec, ctx=ctx, b=b, tune=tune: attention_rows(w, spec, ctx, b, cfg, tune))
        if cfg.components:
            for b in cfg.batches:
                yield f"{spec.key} components B={b}", lambda w, spec=spec, b=b: component_rows(w, spec, b, cfg)


def targets(g, copy_tbps: float) -> list[str]:
    """The speed targets of the kernels issue, per model, ctx and batch (shipped defaults only)."""
    import pandas as pd

    w = g[g.impl == "wmtp"]

    def med(kernel, config, model, ctx, b, d=None):
        r = w[(w.kernel == kernel) & (w.config == config) & (w.model == model) & (w.ctx.astype(float) == ctx)
              & (w.batch.astype(float) == b)]
        if d is not None:
            r = r[r.d.astype(float) == d]
        return float(r.median_ms.iloc[0]) if len(r) else math.nan

    sd = g[(g.impl == "torch_sdpa") & (g.kernel == "decode_attn")]
    out = ["## Targets (shipped kernel defaults)", "",
           "| model | ctx | B | decode ms | decode / copy BW (>= 90 %) | torch SDPA ms | verify d=7 ms | verify / decode "
           "(<= 1.25) | window decode us (<= 20) | native index build / copy BW (>= 50 %) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for model in sorted(set(w.model)):
        for ctx in sorted({float(c) for c in w[w.model == model].ctx if str(c) not in ("", "nan")}):
            for b in sorted({float(x) for x in w[(w.model == model)].batch if str(x) not in ("", "nan")}):
                dec = med("decode_attn", "native", model, ctx, b)
                if math.isnan(dec):
                    continue
                row = w[(w.kernel == "decode_attn") & (w.config == "native") & (w.model == model)
                        & (w.ctx.astype(float) == ctx) & (w.batch.astype(float) == b)]
                frac = float(row.tbps.iloc[0]) / copy_tbps
                ver = med("verify_attn", "native", model, ctx, b, 7)
                win = med("decode_attn", "window", model, ctx, b) * 1e3
                ib = w[(w.kernel == "index_build") & (w.config == "native") & (w.model == model)
                       & (w.ctx.astype(float) == ctx) & (w.batch.astype(float) == b)]
                ibf = float(ib.tbps.iloc[0]) / copy_tbps if len(ib) else math.nan
                s = sd[(sd.model == model) & (sd.ctx.astype(float) == ctx) & (sd.batch.astype(float) == b)]
                sdpa = float(s.median_ms.iloc[0]) if len(s) else math.nan
                out.append(f"| {model} | {int(ctx)} | {int(b)} | {dec:.4f} | {frac:.0%} | {sdpa:.4f} | {ver:.4f} | "
                           f"{ver / dec:.2f} | {win:.1f} | {ibf:.0%} |")
    return out + [""]


def summarize(csv_path: Path) -> str:
    """Markdown: per kernel and shape, median ms, achieved TB/s and fraction of copy bandwidth."""
    import pandas as pd

    df = pd.read_csv(csv_path)
    ok = df[df.status == "ok"]
    copy = ok[ok.kernel == "copy"]
    copy_tbps = float((copy.bytes / copy.time_ms / 1e9).groupby(copy.config).median().max()) if len(copy) else math.nan
    gemm = ok[ok.kernel == "gemm_peak"]
    gemm_tflops = float((gemm.flops / gemm.time_ms / 1e9).median()) if len(gemm) else math.nan
    keys = ["kernel", "impl", "model", "config", "ctx", "batch", "d"]
    g = ok[~ok.kernel.isin(["copy", "gemm_peak"])].groupby(keys, dropna=False).agg(
        median_ms=("time_ms", "median"), p10_ms=("time_ms", lambda s: s.quantile(0.1)),
        p90_ms=("time_ms", lambda s: s.quantile(0.9)), bytes=("bytes", "first"), reps=("rep", "count")).reset_index()
    g["tbps"] = g.bytes / g.median_ms / 1e9
    g["frac_copy_bw"] = g.tbps / copy_tbps
    lines = [f"Ceilings: copy {copy_tbps:.2f} TB/s (read + write; the faster of the copy rows), "
             f"bf16 GEMM {gemm_tflops:.0f} TFLOP/s.", ""]
    lines += targets(g, copy_tbps)
    lines.append("| " + " | ".join(keys + ["median ms", "p10-p90 ms", "TB/s", "of copy BW", "reps"]) + " |")
    lines.append("|" + "---|" * (len(keys) + 5))
    for r in g.itertuples():
        lines.append("| " + " | ".join(str(getattr(r, k)) for k in keys)
                     + f" | {r.median_ms:.4f} | {r.p10_ms:.4f}-{r.p90_ms:.4f} | {r.tbps:.2f} | {r.frac_copy_bw:.0%} | {r.reps} |")
    failed = df[df.status != "ok"].drop_duplicates(["kernel", "model", "ctx", "batch", "status"])
    if len(failed):
        lines += ["", "Rows that did not run:", ""]
        lines += [f"- {r.kernel} {r.model} ctx={r.ctx} B={r.batch}: {r.status}" for r in failed.itertuples()]
    return "\n".join(lines) + "\n"
