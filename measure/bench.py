"""`wmtp measure kernels`: time one attention backend's kernels and the torch-timed components on
this GPU, with the run's ceilings and torch SDPA as reference points.

Method (see `timing.py`, `harness.py`): each row is one CUDA-graph replay timed with CUDA events,
L2 flushed before each replay; every replay is stored as its own row (`rep`), medians are taken at
analysis time. Inputs are fresh random bf16 (never zeros); KV slots are a random permutation of the
pool (page size 1), as a serving engine's pool looks after churn. `bytes` counts the HBM traffic
the latency model assigns to the same shape (`wmtp.latency`): attention reads each K and V row once
(B * S_eff * kv_bytes_per_token), the index build reads and writes one int32 per entry (ring: writes
only), components their weight bytes. Ceiling rows in the same run: `copy` (device-to-device copy
of 2 GiB, bytes read + written) and `gemm_peak` (bf16 8192^3, `flops`). A shape that fails or does
not fit is a row whose `status` holds the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import torch
import torch.nn.functional as F

from wmtp import defaults
from wmtp.defaults import guess_ms
from wmtp.latency import attention_flops
from wmtp.measure import components as comp
from wmtp.measure.attention import bench_cases, model_fields, run_case
from wmtp.measure.backends import AttentionBackend, get_backend
from wmtp.measure.harness import COLUMNS, Pools, RowWriter, ceiling_rows, error_status, free_bytes, l2_bytes, timed
from wmtp.specs import ModelSpec

__all__ = ["COLUMNS", "BenchConfig", "ceiling_rows", "component_rows", "plan", "sdpa_rows", "summarize"]

DECODE_VARIANTS = ([dict(block_n=bn, num_warps=w, num_stages=st) for bn in (32, 64) for w in (4, 8) for st in (3, 4)]
                   + [dict(num_splits=ns) for ns in (132, 528, 1056)])
VERIFY_VARIANTS = ([dict(block_n=bn, num_warps=w, max_rows=mr) for bn in (32, 64) for w in (4, 8) for mr in (64, 128)]
                   + [dict(num_stages=4)])
WINDOW_VARIANTS = [dict(num_splits=ns) for ns in (16, 32, 128)] + [dict(block_n=64), dict(block_n=64, num_splits=32),
                                                                   dict(num_warps=8)]
INDEX_VARIANTS = [dict(block=bl, num_warps=w) for bl in (256, 4096, 8192) for w in (4, 8)]
TUNING = {("decode_attn", "native"): DECODE_VARIANTS, ("decode_attn", "window"): WINDOW_VARIANTS,
          ("verify_attn", "native"): VERIFY_VARIANTS, ("index_build", "native"): INDEX_VARIANTS}


@dataclass
class BenchConfig:
    ctxs: list[int]
    batches: list[int]
    depth: int = defaults.DEPTH
    window: int = defaults.WINDOW
    sink: int = defaults.SINK
    extend_queries: int = 5
    variants: bool = True  # tuning variants of the wmtp kernels at the largest ctx, B = 1
    components: bool = True
    sdpa: bool = True
    backend: str = "wmtp"


def attention_rows(writer: RowWriter, pools: Pools, backend: AttentionBackend, ctx: int, batch: int,
                   cfg: BenchConfig, tune: bool) -> None:
    """Every attention and index-build case of the benchmark at one (ctx, B), then torch SDPA."""
    spec = pools.spec
    for case in bench_cases(spec, backend.name, ctx, batch, depth=cfg.depth, extend_queries=cfg.extend_queries,
                            window=cfg.window, sink=cfg.sink, tune=TUNING if tune and backend.name == "wmtp" else None):
        run_case(writer, pools, backend, case)
    if cfg.sdpa:
        sdpa_rows(writer, spec, ctx, batch, (1, cfg.depth), dict(window=cfg.window, sink=cfg.sink))


def sdpa_rows(writer: RowWriter, spec: ModelSpec, ctx: int, batch: int, depths, extra: dict | None = None) -> None:
    """torch's own SDPA on contiguous K/V (the reference point): d query rows over all ctx keys."""
    hq, hkv, hd = spec.q_heads, spec.kv_heads, spec.head_dim
    kv_tok = spec.kv_bytes_per_token_layer
    base = {**model_fields(spec), "impl": "torch_sdpa", "config": "contiguous", "ctx": ctx, "batch": batch,
            "bytes": batch * ctx * kv_tok, **(extra or {})}
    need = batch * ctx * kv_tok + 2**30
    if need > 0.92 * free_bytes():
        for d in depths:
            writer.write({**base, "kernel": "decode_attn" if d == 1 else "verify_attn", "d": d}, None, "",
                         status=f"skipped: contiguous K/V needs {need / 2**30:.1f} GiB, "
                                f"{free_bytes() / 2**30:.1f} GiB free")
        return
    kc = torch.randn(batch, hkv, ctx, hd, device=comp.DEVICE, dtype=torch.bfloat16)
    vc = torch.randn(batch, hkv, ctx, hd, device=comp.DEVICE, dtype=torch.bfloat16)
    for d in depths:
        q = torch.randn(batch, hq, d, hd, device=comp.DEVICE, dtype=torch.bfloat16)
        timed(writer, {**base, "kernel": "decode_attn" if d == 1 else "verify_attn", "d": d,
                       "flops": batch * attention_flops(spec, d, ctx)},
              [lambda q=q: F.scaled_dot_product_attention(q, kc, vc, enable_gqa=True)], guess_ms(base["bytes"]))
    del kc, vc
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def component_rows(writer: RowWriter, spec: ModelSpec, batch: int, cfg: BenchConfig) -> None:
    l2 = l2_bytes()
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
        try:
            c = build()
        except Exception as e:
            writer.write(dict(kernel=kind, impl="torch+wmtp", model=spec.key, batch=batch, dtype="bf16"), None, "",
                         status=error_status(e))
            continue
        tokens = c.work.shape.get("tokens", batch)
        row = dict(kernel=c.kind, impl="torch+wmtp", model=spec.key, batch=batch, d=c.work.shape.get("d", ""),
                   dtype="bf16", config=f"{c.name};tokens={tokens}", bytes=c.work.bytes, flops=c.work.flops,
                   q_heads=spec.q_heads, kv_heads=spec.kv_heads, head_dim=spec.head_dim)
        timed(writer, row, c.calls, guess_ms(c.work.bytes))
        del c
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def plan(specs: Iterable[ModelSpec], cfg: BenchConfig,
         backend: AttentionBackend | None = None) -> Iterator[tuple[str, Callable[[RowWriter], None]]]:
    """The run as labelled steps (for the progress bar and `--resume`). One KV pool per model,
    sized for its largest B * S, serves every shape of that model."""
    backend = backend or get_backend(cfg.backend)
    yield "ceilings", ceiling_rows
    for spec in specs:
        pools = Pools(spec, max(cfg.ctxs) * max(cfg.batches))
        for ctx in cfg.ctxs:
            for b in cfg.batches:
                tune = cfg.variants and ctx == max(cfg.ctxs) and b == 1
                yield (f"{spec.key} ctx={ctx} B={b}",
                       lambda w, pools=pools, ctx=ctx, b=b, tune=tune: attention_rows(w, pools, backend, ctx, b, cfg, tune))
        yield f"{spec.key} free pool", lambda w, pools=pools: pools.release()
        if cfg.components:
            for b in cfg.batches:
                yield f"{spec.key} components B={b}", lambda w, spec=spec, b=b: component_rows(w, spec, b, cfg)


def targets(g, copy_tbps: float, impl: str = "wmtp") -> list[str]:
    """The speed targets of the kernels issue, per model, ctx and batch (the backend's shipped defaults only)."""
    w = g[g.impl == impl]

    def med(kernel, config, model, ctx, b, d=None):
        r = w[(w.kernel == kernel) & (w.config == config) & (w.model == model) & (w.ctx.astype(float) == ctx)
              & (w.batch.astype(float) == b)]
        if d is not None:
            r = r[r.d.astype(float) == d]
        return float(r.median_ms.iloc[0]) if len(r) else math.nan

    sd = g[(g.impl == "torch_sdpa") & (g.kernel == "decode_attn")]
    out = [f"## Targets ({impl}, shipped defaults)", "",
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
    impl = next((i for i in ("wmtp", "flashinfer") if i in set(g.impl)), "wmtp")
    lines += targets(g, copy_tbps, impl)
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
