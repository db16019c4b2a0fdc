"""SGLang's fused MoE kernel against wmtp's, at the calibration sweep's `moe` shapes (q35, q122, nem), on a GPU.

    python3 -m wmtp.measure.scripts.sglang_moe_bench --check --out DIR    # correctness + a quick timing
    python3 -m wmtp.measure.scripts.sglang_moe_bench --sweep --out DIR    # the sweep's moe rows, impl 'sglang'

Needs a copy of SGLang's Triton MoE files (`measure/backends/sglang_moe.py` says which and where).
`--check`: SGLang's sequence (`sglang_moe.fused_experts`) and wmtp's `moe_experts` against a float64 reference
on random bf16 inputs for each model's expert shapes; the alignment stand-in against a torch reference; then the
whole `moe` component (router, top-k, experts, shared expert, latent projections) of both implementations,
the experts alone and the alignment alone, at 1 and 8 tokens, timed like the sweep (`timing.time_calls`:
CUDA-graph replay, L2 flushed by a read before each replay, median of 50). Writes check.md.
`--sweep`: `wmtp.measure.sweep.component_steps` with `moe_impl='sglang'`, the `moe` steps only, over the quick
grid `wmtp calibrate --quick` sweeps (the shipped h200-flashinfer profile's), plus 7 and 16 tokens for both
implementations; rows in DIR/raw.csv (the sweep's columns), provenance in DIR/raw.meta.json.
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

import torch

from wmtp.measure import components as comp
from wmtp.measure.backends import sglang_moe
from wmtp.measure.harness import RowWriter, ceiling_rows, l2_bytes
from wmtp.measure.kernels.moe import moe_experts
from wmtp.measure.provenance import collect, write_meta
from wmtp.measure.sweep import SweepConfig, component_steps
from wmtp.measure.timing import time_calls
from wmtp.models import get_model

MODELS = ("q35", "q122", "nem")
DEV = "cuda" if torch.cuda.is_available() else "cpu"
TIMER = "cuda-graph replay, CUDA events, L2 flushed (256 MiB read) before each replay"


def expert_shapes(key: str) -> tuple[int, int, int, int, str]:
    s = get_model(key)
    return s.n_experts, s.moe_latent or s.hidden, s.expert_ffn, s.top_k, s.ffn_act


def random_case(key: str, tokens: int, copies: int = 1):
    e, k_in, ffn, top_k, act = expert_shapes(key)
    n_up = 2 * ffn if act == "swiglu" else ffn
    x = torch.randn(tokens, k_in, device=DEV, dtype=torch.bfloat16)
    ws = [(torch.randn(e, n_up, k_in, device=DEV, dtype=torch.bfloat16) / math.sqrt(k_in),
           torch.randn(e, k_in, ffn, device=DEV, dtype=torch.bfloat16) / math.sqrt(ffn)) for _ in range(copies)]
    wts, ids = torch.topk(torch.randn(tokens, e, device=DEV), top_k, dim=-1)
    return x, ws, torch.softmax(wts, -1), ids, act


def reference(x, w13, w2, wts, ids, act):
    """float64: sum_j w_j * down_e(act(up_e(x))) over each token's experts."""
    h = torch.einsum("tk,tjnk->tjn", x.double(), w13[ids].double())
    if act == "swiglu":
        f = h.shape[-1] // 2
        h = torch.nn.functional.silu(h[..., :f]) * h[..., f:]
    else:
        h = torch.relu(h) ** 2
    return torch.einsum("tjn,tjkn,tj->tk", h, w2[ids].double(), wts.double())


def rel(a, b) -> float:
    return float((a.double() - b).norm() / b.norm())


def align_ok(tokens: int, key: str, block: int) -> bool:
    """The stand-in's alignment against a torch reading of its contract (every pair once, in its expert's rows)."""
    e = get_model(key).n_experts
    ids = torch.topk(torch.randn(tokens, e, device=DEV), get_model(key).top_k, dim=-1)[1]
    s, blk, total = (t.cpu() for t in sglang_moe.align_block_size(ids, block, e))
    flat = ids.reshape(-1).cpu()
    counts = torch.bincount(flat, minlength=e)
    padded = (counts + block - 1) // block * block
    ok = int(total) == int(padded.sum())
    starts = torch.cumsum(padded, 0) - padded
    for ex in torch.nonzero(counts).flatten().tolist():
        lo, hi = int(starts[ex]), int(starts[ex] + padded[ex])
        rows = s[lo:hi]
        mine = torch.nonzero(flat == ex).flatten().tolist()
        ok &= sorted(rows[rows < flat.numel()].tolist()) == mine and bool((blk[lo // block:hi // block] == ex).all())
    return ok and int((s < flat.numel()).sum()) == flat.numel()


def component_error(key: str, tokens: int, impl: str) -> float:
    """The whole moe component (as the sweep builds it) against float64 from its own weights."""
    spec = get_model(key)
    call = comp.moe_component(spec, tokens, l2_bytes(), "verify", copies=1, impl=impl).calls[0]
    router, w_up, w_down, sh_up, sh_down, lat = call.__defaults__
    x = next(c.cell_contents for c in call.__closure__ if isinstance(c.cell_contents, torch.Tensor))
    y = call()
    f = torch.nn.functional
    wts, ids = torch.topk(f.linear(x, router), spec.top_k, dim=-1)
    wts = torch.softmax(wts.float(), dim=-1)
    w13, w2 = (w_up, w_down) if impl == "sglang" else (w_up.transpose(1, 2), w_down.transpose(1, 2))
    h = x.double() @ lat[0].double().T if lat else x
    ref = reference(h, w13, w2, wts, ids, spec.ffn_act)
    if lat:
        ref = ref @ lat[1].double().T
    g = x.double() @ sh_up.double().T
    n = g.shape[1] // 2
    g = f.silu(g[:, :n]) * g[:, n:] if spec.ffn_act == "swiglu" else torch.relu(g) ** 2
    return rel(y, ref + g @ sh_down.double().T)


def med(calls) -> float:
    return statistics.median(time_calls(calls, reps=50).samples_ms)


def check(out: Path) -> None:
    lines = ["# SGLang fused MoE vs wmtp moe_experts: correctness and a quick timing", "",
             "| model | T | sglang config (gate/up; down) | rel err sglang | rel err wmtp | align ok |", "|---|---|---|---|---|---|"]
    for key in MODELS:
        for tokens in (1, 3, 36):
            x, ((w13, w2),), wts, ids, act = random_case(key, tokens)
            ref = reference(x, w13, w2, wts, ids, act)
            y_s = sglang_moe.fused_experts(x, w13, w2, ids, wts, act)
            y_w = moe_experts(x, w13.transpose(1, 2).contiguous(), w2.transpose(1, 2).contiguous(), ids, wts, act)
            cfg = sglang_moe.moe_config(w13.shape, w2.shape, ids.shape[1], tokens)
            lines.append(f"| {key} | {tokens} | {cfg[0]}; {cfg[1]} | {rel(y_s, ref):.2e} | {rel(y_w, ref):.2e} | "
                         f"{align_ok(tokens, key, cfg[0]['BLOCK_SIZE_M'])} |")
            del w13, w2
    lines += ["", "Whole moe component against float64 from its own weights (T = 8): "
              + ", ".join(f"{k} {i} {component_error(k, 8, i):.2e}" for k in MODELS for i in ("sglang", "wmtp"))]
    torch.cuda.empty_cache()
    lines += ["", "Median ms (50 replays, L2 flushed): the whole moe component (router, top-k, experts, shared "
              "expert, latent projections), the routed experts alone, the alignment stand-in alone.", "",
              "| model | T | component sglang | component wmtp | experts sglang | experts wmtp | align |",
              "|---|---|---|---|---|---|---|"]
    l2 = l2_bytes()
    for key in MODELS:
        for tokens in (1, 8):
            spec = get_model(key)
            cs = [comp.moe_component(spec, tokens, l2, "verify", impl=i) for i in ("sglang", "wmtp")]
            t_comp = [med(c.calls) for c in cs]
            del cs
            x, ws, wts, ids, act = random_case(key, tokens, copies=2)
            t_s = med([lambda w=w: sglang_moe.fused_experts(x, w[0], w[1], ids, wts, act) for w in ws])
            block = sglang_moe.moe_config(ws[0][0].shape, ws[0][1].shape, ids.shape[1], tokens)[0]["BLOCK_SIZE_M"]
            t_a = med([lambda: sglang_moe.align_block_size(ids, block, spec.n_experts)])
            ws = [(a.transpose(1, 2).contiguous(), b.transpose(1, 2).contiguous()) for a, b in ws]
            t_w = med([lambda w=w: moe_experts(x, w[0], w[1], ids, wts, act) for w in ws])
            del ws
            lines.append(f"| {key} | {tokens} | {t_comp[0]:.4f} | {t_comp[1]:.4f} | {t_s:.4f} | {t_w:.4f} | {t_a:.4f} |")
            torch.cuda.empty_cache()
    text = "\n".join(lines) + "\n"
    (out / "check.md").write_text(text)
    print(text)


def sweep(out: Path, commit: str) -> None:
    meta = collect(TIMER, {"command": "python3 -m wmtp.measure.scripts.sglang_moe_bench --sweep", "git_sha": commit,
                           "models": list(MODELS), "moe_impl": "sglang", "status": "running",
                           "sweep": {"quick": True, "extra_verify_tokens": [7, 16]}})
    writer = RowWriter(out / "raw.csv")
    ceiling_rows(writer)
    extra = SweepConfig(batches=(1,), depths=(7, 16))
    for key in MODELS:
        spec = get_model(key)
        steps = [(lbl, st) for lbl, st in component_steps(spec, SweepConfig.quick(), "sglang") if " moe T=" in lbl]
        for impl in ("sglang", "wmtp"):
            steps += [(lbl, st) for lbl, st in component_steps(spec, extra, impl)
                      if lbl.startswith(f"{key} moe T=") and lbl.split("=")[-1] in ("7", "16")]
        for label, step in steps:
            print(label, flush=True)
            step(writer)
    writer.close()
    write_meta(out / "raw.meta.json", {**meta, "status": "complete", "rows_this_run": writer.rows})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--commit", default="", help="The commit that runs (the device's .git may be stale).")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    sglang_moe.load()
    if a.check:
        check(a.out)
    if a.sweep:
        sweep(a.out, a.commit)


if __name__ == "__main__":
    main()
