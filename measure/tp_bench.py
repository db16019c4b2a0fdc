"""Tensor-parallel measurement, one process per GPU (torch.distributed, NCCL), started by torchrun:

    torchrun --nproc-per-node 2 -m wmtp.measure.tp_bench --out DIR [--models q35] [--profile P]

1. All-reduce of [tokens, width] bf16 activations at the sizes a decode step sends (per-layer
   hidden states of the verify's B*d tokens and the draft's B tokens, and vocabulary-slice logits):
   `inner` back-to-back all-reduces captured in a CUDA graph, replayed after a barrier and timed
   with CUDA events, every repetition a row.
2. The composed speculative iteration of `composed.py` at each GPU's slice of the model
   (`wmtp.tp.per_gpu_spec`) with an all-reduce after every mixer and FFN, timed on every rank
   (the slowest rank's median counts), against `step_cost(..., tp=N)` priced by the single-GPU
   profile plus the all-reduce fit from step 1.
Rank 0 writes `tp_raw.csv` (rows as the kernel benchmark's, kernel = allreduce), `tp_validation.csv`
and `tp.meta.json`. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from wmtp import defaults  # noqa: E402

TOKENS = (1, 2, 4, 7, 8, 14, 16, 28, 32, 56, 64, 112, 128)
TP_TIMER = "cuda-graph replay (eager if capture failed), CUDA events, slowest rank's median"
COLUMNS = ["kernel", "impl", "model", "tp", "tokens", "width", "rep", "time_ms", "bytes", "flops", "status", "timer"]


def time_collective(fn, reps: int = 30, inner: int = 10, device: str = "cuda", graph: bool = True) -> list[float]:
    """Per-call ms of `inner` back-to-back calls (captured in one CUDA graph on GPUs, as a decode
    step runs them), after a barrier, `reps` times."""
    for _ in range(3):
        fn()
    run = None
    if device == "cuda" and graph:
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(inner):
                fn()
        torch.cuda.synchronize()
        run = g.replay
    out = []
    for _ in range(reps):
        dist.barrier()
        if device == "cuda":
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            if run is not None:
                run()
            else:
                for _ in range(inner):
                    fn()
            b.record()
            torch.cuda.synchronize()
            out.append(a.elapsed_time(b) / inner)
        else:  # gloo on CPU (tests): wall clock
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            out.append((time.perf_counter() - t0) * 1e3 / inner)
    return out


def allreduce_rows(widths, tokens=TOKENS, reps: int = 30, device: str = "cuda") -> list[dict]:
    world = dist.get_world_size()
    rows = []
    for width in widths:
        for t in tokens:
            x = torch.randn(t, width, dtype=torch.bfloat16 if device == "cuda" else torch.float32, device=device)
            samples = time_collective(lambda: dist.all_reduce(x), reps=reps, device=device)
            worst = torch.tensor(samples, device=device)
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)  # a collective is as slow as its slowest rank
            for rep, ms in enumerate(worst.tolist()):
                rows.append(dict(kernel="allreduce", impl="nccl" if device == "cuda" else "gloo", model="any",
                                 tp=world, tokens=t, width=width, rep=rep, time_ms=ms, bytes=2.0 * t * width,
                                 flops=0, status="ok",
                                 timer="cuda-graph replay of 10 calls, CUDA events, barrier before each repetition"))
    return rows


def fit_allreduce(rows: list[dict]) -> dict:
    """A profile component `allreduce_tp<N>`: t = c0 + c1 * bytes, least squares on relative error,
    with leave-one-size-out error."""
    import numpy as np
    import pandas as pd
    from scipy.optimize import nnls

    df = pd.DataFrame(rows)
    g = df.groupby(["tokens", "width"]).agg(ms=("time_ms", "median"), bytes=("bytes", "first")).reset_index()
    x = np.column_stack([np.ones(len(g)), g["bytes"].to_numpy() * 1e-9])
    y = g["ms"].to_numpy()

    def solve(xx, yy):
        return nnls(xx / yy[:, None], np.ones_like(yy))[0]

    coef = solve(x, y)
    errs = [abs(float(x[i] @ solve(np.delete(x, i, 0), np.delete(y, i))) / y[i] - 1) for i in range(len(g))]
    return {"features": ["const", "bytes"], "coef_ms": [float(coef[0]), float(coef[1]) * 1e-9], "groups": {},
            "n_shapes": int(len(g)),
            "heldout": {"median_rel": float(np.median(errs)), "p90_rel": float(np.quantile(errs, 0.9)),
                        "max_rel": float(np.max(errs)), "method": "leave-one-shape-out"},
            "bytes_range": [float(g["bytes"].min()), float(g["bytes"].max())], "flops_range": [0.0, 0.0],
            "points": [dict(model="any", group="allreduce", bytes=float(b), flops=0.0, batch=1.0, median_ms=float(m),
                            config=f"tokens={t};width={w}") for t, w, m, b in g[["tokens", "width", "ms", "bytes"]].itertuples(index=False)]}


def composed_rows(specs, profile: dict, ctxs, depths, world: int, rank: int, backend: str = "wmtp") -> list[dict]:
    """Composed TP steps (each GPU's slice of the model, an all-reduce after every mixer and FFN),
    priced by `profile` with `tp=world`; the slowest rank's median counts."""
    from wmtp.hardware import get_hardware
    from wmtp.latency import step_cost
    from wmtp.measure import composed
    from wmtp.measure.backends import get_backend
    from wmtp.measure.harness import free_bytes, l2_bytes
    from wmtp.profile import ProfileCostModel
    from wmtp.tp import per_gpu_spec

    cost = ProfileCostModel(profile, "tp")
    hw = get_hardware(profile["hardware"])
    attn = get_backend(backend)
    buffers: dict = {}

    def collective(tokens, width):
        key = (tokens, width)
        if key not in buffers:
            buffers[key] = torch.randn(tokens, width, dtype=torch.bfloat16, device="cuda")
        buf = buffers[key]
        return lambda: dist.all_reduce(buf)

    def slowest(ms: float) -> float:
        dist.barrier()
        med = torch.tensor([ms], device="cuda")
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        return float(med.item())

    out = []
    for spec in specs:
        full = spec.with_dtypes(weight_dtype="bf16")
        # Scale layers (if needed) so that each GPU's slice fits, then split across the ranks.
        trunc, note = composed.fit_layers(full, max(ctxs), 0.8 * free_bytes() * world)
        model = composed.ComposedModel(per_gpu_spec(trunc, world), max(ctxs), l2_bytes(), attn)

        def predict(method, ctx, d, ext, trunc=trunc):
            return step_cost(trunc, hw, cost, method, ctx, d if method != "dense" else 1, 1, defaults.WINDOW,
                             defaults.SINK, accept_length=float(ext), tp=world)

        layers = f"F={trunc.n_full_attn} linear={trunc.n_linear} moe={trunc.n_moe}" + (
            "" if note == "full model" else " (scaled)")
        for row in composed.composed_rows(model, spec.key, composed.step_plan(ctxs, depths), predict,
                                          window=defaults.WINDOW, sink=defaults.SINK, collective=collective,
                                          reduce_ms=slowest):
            out.append({**row, "tp": world, "layers": layers, "timer": TP_TIMER})
        del model
        torch.cuda.empty_cache()
    return out


def _write_csv(path: Path, rows: list[dict], columns=None) -> None:
    columns = columns or sorted({k for r in rows for k in r})
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="q35")
    ap.add_argument("--profile", type=Path, default=None, help="single-GPU profile (default: the shipped H200 one)")
    ap.add_argument("--ctx", default="256K,1M")
    ap.add_argument("--depths", default="3,7")
    args = ap.parse_args(argv)
    from wmtp.profile import load_profile, shipped_profile_path
    from wmtp.measure.provenance import collect, write_meta
    from wmtp.models import get_model
    from wmtp.units import parse_int_list

    cuda = torch.cuda.is_available()
    if not cuda:  # gloo on the CPU would time host copies and label them CUDA-graph replays
        print("error: tp_bench times NCCL collectives on GPUs: no CUDA GPU is visible here", file=sys.stderr)
        raise SystemExit(1)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    specs = [get_model(k) for k in args.models.split(",")]
    widths = sorted({s.hidden for s in specs} | {-(-s.vocab // world) for s in specs})
    rows = allreduce_rows(widths, device="cuda" if cuda else "cpu")
    comp_rows = []
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        _write_csv(args.out / "tp_raw.csv", rows, COLUMNS)
    if cuda:
        profile = load_profile(args.profile or shipped_profile_path("h200"))
        fit = fit_allreduce(rows)
        profile["components"][f"allreduce_tp{world}"] = fit
        comp_rows = composed_rows(specs, profile, parse_int_list(args.ctx, what="--ctx"),
                                  [int(x) for x in args.depths.split(",")], world, rank)
        if rank == 0:
            (args.out / f"allreduce_tp{world}.json").write_text(json.dumps(fit, indent=1) + "\n")
    if rank == 0:
        if comp_rows:
            _write_csv(args.out / "tp_validation.csv", comp_rows)
        meta = collect("allreduce: CUDA-graph replay, CUDA events after a barrier; composed: CUDA-graph replay, "
                       "CUDA events, slowest rank",
                       {"command": "torchrun -m wmtp.measure.tp_bench", "tp": world, "models": args.models,
                        "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE")}) if cuda else {"tp": world}
        write_meta(args.out / "tp.meta.json", meta)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
