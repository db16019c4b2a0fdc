"""Side-by-side attention backends on one GPU, in one run: wmtp's Triton kernels, FlashInfer as SGLang
plans it (`measure/backends/flashinfer.py`) and torch SDPA on contiguous K/V, for decode, verify
d = 2..9 and the KV-index builds (wmtp's parallel build against the engines' per-request build),
over ctx x B x head shapes, with the copy bandwidth of the same run.

Method: the harness's (`measure/harness.py`, `timing.py`): each call planned once, captured in a
CUDA graph, replayed after warm-up with the L2 flushed (a 256 MiB read) before each replay, CUDA
events around each replay; repetitions sized to about `--budget-ms` of device time per shape (5 to
30); every replay a row. Paged inputs: one bf16 KV pool per head shape (page size 1, slots a random
permutation), index sets built once per (ctx, B). `bytes` = K and V rows read once
(B * ctx * kv_bytes_per_token; fp8 KV: half), `flops` = 4 * q_heads * head_dim per (query row, key).
FlashInfer's fp8 decode reads an fp8 copy of the same pool (no scales: a bandwidth measurement).

    pip install --no-deps --no-index .whl/*.whl          # flashinfer-python 0.6.0 and its two wheels
    python3 measure/scripts/backends_bench.py --stage compile --jit-cache .venv-fi   # JIT, first time only
    python3 measure/scripts/backends_bench.py --out $OUT --jit-cache .venv-fi

`--jit-cache DIR` sets FLASHINFER_WORKSPACE_BASE (flashinfer/jit/env.py): compiled kernels are kept in
DIR/.cache/flashinfer and reused by later runs. Writes OUT/backends.csv, backends.meta.json and
backends.md (side-by-side medians, achieved bandwidth, and each backend's cliffs in d).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

CLIFF = 1.25  # a step in d that costs this much more than the one before is a cliff


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("out/backends"))
    ap.add_argument("--stage", choices=("compile", "bench"), default="bench")
    ap.add_argument("--models", default="q35,q122,nem")
    ap.add_argument("--ctx", default="64K,256K,1M")
    ap.add_argument("--batch", default="1,4,16")
    ap.add_argument("--depths", default="2,3,4,5,6,7,8,9")
    ap.add_argument("--sdpa-depths", default="1,7", help="SDPA verify depths at B > 1 (B = 1: all)")
    ap.add_argument("--fp8", action=argparse.BooleanOptionalAction, default=True, help="FlashInfer fp8-KV decode")
    ap.add_argument("--fp8-verify", action="store_true",
                    help="also FlashInfer's verify (masked) and draft extend (causal) over fp8 KV")
    ap.add_argument("--budget-ms", type=float, default=60.0)
    ap.add_argument("--deadline-s", type=float, default=320.0, help="stop measuring after this long; write the table")
    ap.add_argument("--jit-cache", type=Path, default=None, help="FlashInfer JIT cache folder (FLASHINFER_WORKSPACE_BASE)")
    return ap.parse_args(argv)


class Bench:
    """One run's writer, backends, deadline and timer."""

    def __init__(self, writer, deadline_s: float, budget_ms: float):
        from wmtp.measure.backends import get_backend

        self.w, self.t0, self.deadline_s, self.budget_ms = writer, time.monotonic(), deadline_s, budget_ms
        self.wmtp, self.engine = get_backend("wmtp"), get_backend("engine-index")
        try:
            self.fi = get_backend("flashinfer")
            self.fi_error = ""
        except Exception as e:  # FlashInfer missing: its rows say why
            self.fi, self.fi_error = None, f"error: {type(e).__name__}: {e}"

    def late(self) -> bool:
        return time.monotonic() - self.t0 > self.deadline_s

    def time(self, row: dict, plan) -> None:
        """Plan (a zero-argument function returning the call), then time the call into rows."""
        from wmtp.defaults import guess_ms
        from wmtp.measure import timing
        from wmtp.measure.harness import error_status

        if self.late():
            self.w.write(row, None, "", status="skipped: run deadline")
            return
        try:
            call = plan()
            est = guess_ms(float(row.get("bytes") or 0.0))
            reps = int(max(5, min(30, self.budget_ms / max(est, 1e-3))))
            t = timing.time_calls([call], reps=reps, warmup=3, flush=True, graph=True)
            self.w.write(row, t.samples_ms, t.timer)
        except Exception as e:  # a failing shape is a row with its reason
            self.w.write(row, None, "", status=error_status(e))


def shape_rows(b: Bench, spec, pool, fp8_pool, ctx: int, batch: int, depths, sdpa_depths) -> None:
    """Every kernel of one (model, ctx, B)."""
    import torch

    from wmtp.latency import attention_flops
    from wmtp.measure.attention import model_fields

    paged = pool.index_set(ctx, batch)
    kv = spec.kv_bytes_per_token_layer
    base = {**model_fields(spec), "ctx": ctx, "batch": batch, "bytes": batch * ctx * kv}
    for be in (b.wmtp, b.engine):
        b.time({**base, "kernel": "index_build", "impl": be.name, "d": 1, "config": "native", "bytes": 8 * batch * ctx,
                "flops": 0}, lambda be=be: be.index_build(paged))

    def q(d):
        return torch.randn(batch * d, spec.q_heads, spec.head_dim, device="cuda", dtype=torch.bfloat16)

    for d in (1,) + tuple(depths):
        row = {**base, "kernel": "decode_attn" if d == 1 else "verify_attn", "d": d,
               "flops": batch * attention_flops(spec, d, ctx)}
        qd = q(d)
        o = torch.empty_like(qd)
        b.time({**row, "impl": "wmtp", "config": "bf16"},
               lambda: b.wmtp.decode(pool.k, pool.v, paged, qd, o) if d == 1 else b.wmtp.verify(pool.k, pool.v, paged, qd, o, d))
        if b.fi is None:
            b.w.write({**row, "impl": "flashinfer", "config": "bf16"}, None, "", status=b.fi_error)
        else:
            b.time({**row, "impl": "flashinfer", "config": "bf16" if d == 1 else "bf16 custom-mask"},
                   lambda: b.fi.decode(pool.k, pool.v, paged, qd, o) if d == 1 else b.fi.verify(pool.k, pool.v, paged, qd, o, d))
            if d > 1:
                b.time({**row, "impl": "flashinfer", "config": "bf16 causal"},
                       lambda: b.fi.extend(pool.k, pool.v, paged, qd, o, d))
            if d == 1 and fp8_pool is not None:
                b.time({**row, "impl": "flashinfer", "config": "fp8-kv", "bytes": base["bytes"] // 2},
                       lambda: b.fi.decode(fp8_pool[0], fp8_pool[1], paged, qd, o))
            if d > 1 and fp8_pool is not None and b.fp8_verify:
                k8, v8 = fp8_pool
                b.time({**row, "impl": "flashinfer", "config": "fp8-kv custom-mask", "bytes": base["bytes"] // 2},
                       lambda: b.fi.verify(k8, v8, paged, qd, o, d))
                b.time({**row, "impl": "flashinfer", "config": "fp8-kv causal", "bytes": base["bytes"] // 2},
                       lambda: b.fi.extend(k8, v8, paged, qd, o, d))
    sdpa_rows(b, spec, base, depths if batch == 1 else sdpa_depths, ctx, batch)


def sdpa_rows(b: Bench, spec, base: dict, depths, ctx: int, batch: int) -> None:
    import torch
    import torch.nn.functional as F

    from wmtp.latency import attention_flops
    from wmtp.measure.harness import free_bytes

    if base["bytes"] + 2**30 > 0.9 * free_bytes():
        b.w.write({**base, "kernel": "decode_attn", "impl": "torch_sdpa", "d": 1}, None, "",
                  status="skipped: no memory for contiguous K/V")
        return
    kc = torch.randn(batch, spec.kv_heads, ctx, spec.head_dim, device="cuda", dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    for d in sorted({1, *depths}):
        q = torch.randn(batch, spec.q_heads, d, spec.head_dim, device="cuda", dtype=torch.bfloat16)
        b.time({**base, "kernel": "decode_attn" if d == 1 else "verify_attn", "impl": "torch_sdpa", "d": d,
                "config": "contiguous", "flops": batch * attention_flops(spec, d, ctx)},
               lambda q=q: (lambda: F.scaled_dot_product_attention(q, kc, vc, is_causal=False, enable_gqa=True)))
    kc = vc = None  # freed before the next shape (rebound, not deleted: the lambdas above close over them)
    torch.cuda.empty_cache()


def run(args) -> Path:
    import torch

    from wmtp.measure.harness import COLUMNS, KVPool, RowWriter, ceiling_rows
    from wmtp.measure.provenance import collect, write_meta
    from wmtp.measure.run import backend_provenance
    from wmtp.models import get_model
    from wmtp.units import parse_int_list

    ctxs, batches = parse_int_list(args.ctx, what="--ctx"), parse_int_list(args.batch, what="--batch")
    depths, sdpa_depths = parse_int_list(args.depths, what="--depths"), parse_int_list(args.sdpa_depths, what="--sdpa-depths")
    args.out.mkdir(parents=True, exist_ok=True)
    writer = RowWriter(args.out / "backends.csv", columns=COLUMNS)
    b = Bench(writer, args.deadline_s, args.budget_ms)
    b.fp8_verify = args.fp8_verify
    meta = collect("cuda-graph replay, CUDA events, L2 flushed (256 MiB read) before each replay", {
        "command": "python3 measure/scripts/backends_bench.py " + " ".join(sys.argv[1:]), "status": "running",
        "backends": {be.name: backend_provenance(be) for be in (b.wmtp, b.engine, b.fi) if be is not None},
        "flashinfer_error": b.fi_error, "jit_cache": os.environ.get("FLASHINFER_WORKSPACE_BASE", "")})
    write_meta(args.out / "backends.meta.json", meta)
    ceiling_rows(writer)
    for key in args.models.split(","):
        spec = get_model(key)
        pool = KVPool(spec, max(ctxs) * max(batches))
        fp8 = (pool.k.to(torch.float8_e4m3fn), pool.v.to(torch.float8_e4m3fn)) if args.fp8 and b.fi else None
        for ctx in ctxs:
            for batch in batches:
                print(f"{key} ctx={ctx} B={batch} t={time.monotonic() - b.t0:.0f}s", flush=True)
                shape_rows(b, spec, pool, fp8, ctx, batch, depths, sdpa_depths)
        del pool, fp8
        torch.cuda.empty_cache()
    writer.close()
    meta.update(status="complete" if not b.late() else "deadline reached: later shapes are 'skipped' rows",
                rows=writer.rows, seconds=round(time.monotonic() - b.t0, 1))
    write_meta(args.out / "backends.meta.json", meta)
    md = args.out / "backends.md"
    md.write_text(summarize(args.out / "backends.csv"))
    return md


def compile_variants(args) -> None:
    """Plan and run every FlashInfer variant the bench uses once, at a small size (JIT-compiles them
    into the cache), timing each compile."""
    import torch

    from wmtp.measure.backends import get_backend
    from wmtp.measure.harness import KVPool
    from wmtp.models import get_model

    fi = get_backend("flashinfer")
    done = set()
    for key in args.models.split(","):
        spec = get_model(key)
        if spec.head_dim in done:
            continue
        done.add(spec.head_dim)
        pool = KVPool(spec, 4096)
        paged = pool.index_set(2048, 1)
        for name, kv in (("bf16", (pool.k, pool.v)),
                         ("fp8", (pool.k.to(torch.float8_e4m3fn), pool.v.to(torch.float8_e4m3fn)))):
            if name == "fp8" and not args.fp8:
                continue
            for d, how in ((1, "decode"), (3, "verify"), (3, "extend")):
                if name == "fp8" and d > 1:
                    continue
                q = torch.randn(d, spec.q_heads, spec.head_dim, device="cuda", dtype=torch.bfloat16)
                o = torch.empty_like(q)
                t0 = time.monotonic()
                call = getattr(fi, how)(*kv, paged, q, o, *(() if d == 1 else (d,)))
                call()
                torch.cuda.synchronize()
                print(f"head_dim {spec.head_dim} {name} {how}: {time.monotonic() - t0:.1f} s", flush=True)


def _cliffs(g) -> str:
    """d values where the median jumps by more than CLIFF over the previous d."""
    s = g.sort_values("d")
    out = [f"{int(d)} (x{r:.2f})" for d, r in zip(s.d.iloc[1:], s.median_ms.to_numpy()[1:] / s.median_ms.to_numpy()[:-1])
           if r > CLIFF]
    return ", ".join(out) or "none"


def verify_table(g) -> list[str]:
    """Per model, ctx, B and backend variant: median ms by d (d = 1: the backend's decode) and its cliffs."""
    dec = g[(g.kernel == "decode_attn") & g.config.isin(["bf16", "contiguous"])]
    ver = g[g.kernel == "verify_attn"]
    ds = sorted({1, *(int(d) for d in ver.d.unique())})
    lines = ["## Verify by d (d = 1 is the backend's decode)", "",
             "| model | ctx | B | backend | " + " | ".join(f"d={d}" for d in ds) + " | cliffs (x over d-1) |",
             "|---|---|---|---|" + "---|" * (len(ds) + 1)]
    for (m, c, bt, impl, cfg), h in ver.groupby(["model", "ctx", "batch", "impl", "config"]):
        one = dec[(dec.model == m) & (dec.ctx == c) & (dec.batch == bt) & (dec.impl == impl)]
        by_d = {int(d): t for d, t in zip(h.d, h.median_ms)} | ({1: float(one.median_ms.iloc[0])} if len(one) else {})
        cells = [f"{by_d[d]:.3f}" if d in by_d else "-" for d in ds]
        lines.append(f"| {m} | {int(c)} | {int(bt)} | {impl} {cfg} | " + " | ".join(cells) + f" | {_cliffs(h)} |")
    return lines


def summarize(csv_path: Path) -> str:
    import pandas as pd

    df = pd.read_csv(csv_path)
    ok = df[df.status == "ok"]
    copy = ok[ok.kernel == "copy"]
    copy_tbps = float((copy.bytes / copy.time_ms / 1e9).groupby(copy.config).median().max()) if len(copy) else math.nan
    att = ok[ok.kernel.isin(["decode_attn", "verify_attn", "index_build"])]
    g = att.groupby(["model", "ctx", "batch", "kernel", "impl", "config", "d"], dropna=False).agg(
        median_ms=("time_ms", "median"), bytes=("bytes", "first")).reset_index()
    g["col"] = g.impl + " " + g.config.astype(str)
    lines = ["# Attention backends side by side", "", f"Copy bandwidth in the same run: {copy_tbps:.2f} TB/s "
             "(read + write). Medians in ms; `% copy` = bytes / time over the copy bandwidth.", ""]
    for (kernel, title) in (("index_build", "KV-index build (native)"), ("decode_attn", "Decode (1 query row)")):
        sub = g[g.kernel == kernel]
        if sub.empty:
            continue
        t = sub.pivot_table(index=["model", "ctx", "batch"], columns="col", values="median_ms")
        frac = (sub.assign(f=sub.bytes / sub.median_ms / 1e9 / copy_tbps)
                .pivot_table(index=["model", "ctx", "batch"], columns="col", values="f"))
        lines += [f"## {title}", "", "| model | ctx | B | " + " | ".join(f"{c} ms (% copy)" for c in t.columns) + " |",
                  "|---|---|---|" + "---|" * len(t.columns)]
        for idx, r in t.iterrows():
            cells = [f"{r[c]:.4f} ({frac.loc[idx, c]:.0%})" if r[c] == r[c] else "-" for c in t.columns]
            lines.append(f"| {idx[0]} | {int(idx[1])} | {int(idx[2])} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += verify_table(g)
    bad = df[df.status != "ok"].drop_duplicates(["kernel", "impl", "model", "status"])
    if len(bad):
        lines += ["", "Rows that did not run (first of each kind):", ""]
        lines += [f"- {r.kernel} {r.impl} {r.model} ctx={r.ctx} B={r.batch} d={r.d}: {r.status}" for r in bad.itertuples()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():  # both stages run CUDA kernels (was torch's AssertionError traceback)
        print("error: no CUDA GPU is visible: backends_bench times attention kernels on a GPU machine", file=sys.stderr)
        raise SystemExit(1)
    if args.jit_cache is not None:  # must be set before flashinfer is imported
        args.jit_cache.mkdir(parents=True, exist_ok=True)
        os.environ["FLASHINFER_WORKSPACE_BASE"] = str(args.jit_cache.resolve())
    if args.stage == "compile":
        compile_variants(args)
    else:
        print(f"wrote {run(args)}")


if __name__ == "__main__":
    main()
