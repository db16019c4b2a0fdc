"""How many 512-key index walks one step of SGLang's draft-decode index build costs, measured.

SGLang builds two kinds of per-request KV-index lists every speculative step (calibrate/engines/sglang-facts.md A4):
`create_flashinfer_kv_indices_triton` (grid (B,), one program per request copying its S slots in blocks of 512) and
`generate_draft_decode_kv_indices` (grid (num_steps, B, topk), every program copying the same S-slot prefix in
blocks of 128, the draft steps in parallel). The engine model prices the second as `draft_index_walks` walks of the
first. This script times both shapes with the project's per-request kernel (`measure.kernels.engine_index`, the
same serial walk) on this GPU: the first as B = 1 program at block 512, the second as `num_steps` programs at
block 128 (one per draft step, each over the whole prefix), and writes their ratio per context.

    python -m wmtp.measure.scripts.draft_index_walks --out DIR [--ctx 65536,262144,1048576] [--steps 6]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from wmtp.measure.kernels.engine_index import build_kv_indices_per_request
from wmtp.measure.provenance import atomic_write_text, collect
from wmtp.measure.timing import time_calls

TIMER = "cuda-graph replay, CUDA events, L2 flushed (256 MiB read) before each replay"


def walk(ctx: int, programs: int, block: int):
    """`programs` per-request programs, each copying the same `ctx`-slot row in blocks of `block`."""
    dev = "cuda"
    req_to_token = torch.randperm(ctx, device=dev, dtype=torch.int64).to(torch.int32).view(1, ctx)
    seq = torch.full((programs,), ctx, device=dev, dtype=torch.int32)
    indptr = torch.arange(0, (programs + 1) * ctx, ctx, device=dev, dtype=torch.int32)
    rows = torch.zeros(programs, device=dev, dtype=torch.int64)  # every program walks row 0
    out = torch.empty(programs * ctx, device=dev, dtype=torch.int32)

    def run():
        build_kv_indices_per_request(req_to_token, seq, indptr, out, req_pool_indices=rows, block=block)

    run()
    assert torch.equal(out[:ctx], req_to_token[0]) and torch.equal(out[-ctx:], req_to_token[0])
    return run


def median_ms(run) -> float:
    return statistics.median(time_calls([run], reps=30).samples_ms)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--ctx", default="65536,262144,1048576")
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for ctx in [int(c) for c in args.ctx.split(",")]:
        verify = median_ms(walk(ctx, 1, 512))
        draft = median_ms(walk(ctx, args.steps, 128))
        one128 = median_ms(walk(ctx, 1, 128))
        rows.append({"ctx": ctx, "walk512_ms": verify, "draft_build_ms": draft, "walk128_ms": one128,
                     "steps": args.steps, "walks_per_draft_build": draft / verify})
        print(rows[-1], flush=True)
    args_text = " ".join(sys.argv[1:] if argv is None else argv)
    meta = collect(TIMER, {"command": "python -m wmtp.measure.scripts.draft_index_walks " + args_text})
    atomic_write_text(out / "draft_index_walks.json", json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    lines = ["| ctx | one 512-block walk ms | draft build (steps x 128-block walks in parallel) ms | one 128-block walk ms "
             "| draft build / 512 walk |", "|---|---|---|---|---|"]
    lines += [f"| {r['ctx']} | {r['walk512_ms']:.4f} | {r['draft_build_ms']:.4f} | {r['walk128_ms']:.4f} | "
              f"{r['walks_per_draft_build']:.2f} |" for r in rows]
    atomic_write_text(out / "draft_index_walks.md", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
