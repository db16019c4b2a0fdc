"""Round 7's decode MoE kernels (issue 17; `measure/kernels/quant_moe.py`) against the earlier grouped paths, on the
MoE shapes (experts_up, experts_down) of q35 / q122 / nem at M = 1, 2, 4, 8, 16 tokens, fp8 and int4, plus the fixed
cost of each path on tiny experts.

Run on a GPU (with wmtp installed):
    python3 -m wmtp.measure.scripts.quant_moe_bench --out DIR [--procs 14] [--budget-s 150]
As `quant_i4q`: `--procs` worker processes first compile every call into Triton's cache, then one process checks every
kernel at every shape and M against fp32 torch on the dequantized operands (quant_check.csv) and times everything
with `quant_bench`'s MoE method: one call per CUDA-graph replay, L2 flushed by a 256 MiB read before each replay,
5 timed replays after 2 warm-up, median at analysis time; the 2 GiB copy ceiling of the same run. Routing: M tokens,
random top-k (`torch.rand(..).topk`, seed 29, as `quant_bk`), weights of all E experts resident; bytes = the routed
experts' weights + scales (distinct ids x per-expert bytes; column `routed`), so pairs that repeat an expert
(M * top_k - routed) are not counted again.
Kernel names (`wmtp_fp8_moe` / `wmtp_int4_moe` + suffix). Earlier paths: fp8 unbracketed = path 'dot' (its
path='auto' at every M: activations quantized by a separate launch, then the tensor-core kernel routing in-kernel);
int4 `_gemv[pk]` = path 'gemv' (its path='auto' at M <= 16 here: round 4's packed step, in-kernel router), int4
unbracketed = path 'dot'. New (`quant_moe.launch_moe`): `_pair` GEMV per token-expert pair (one launch; fp8
activations quantized in the loop), `_pair-g2` GEMV per chunk of <= 2 pairs of one expert, `_swap` swap-AB tl.dot per
chunk of <= 16 pairs of one expert (fp8: `quantize_act_fp8` first, two launches), `_swap-p` swap-AB per pair;
`[c2]` / `[c8]` split-K planned for 2 / 8 programs per SM (default 4), `[bn16]` 16-wide GEMV tiles.
Fixed cost (model `tiny`, E = 256, top 8, N = K = 128, M = 1 / 16): every kernel above, plus `launch` (a Triton copy
of 512 bytes, one program: the floor of one kernel in a replayed graph) and `act_quant` (`quantize_act_fp8` of one
row, K = 2048).
"""

from __future__ import annotations

import torch

from wmtp.measure.kernels import quant_gemm as qg
from wmtp.measure.kernels.quant_kernels import copy_ as triton_copy
from wmtp.measure.kernels.quant_moe import launch_moe
from wmtp.measure.scripts import quant_bench as qb
from wmtp.measure.scripts.quant_bk import Warm, moe_weights, script_main
from wmtp.measure.scripts.quant_peers import moe_ref
from wmtp.measure.scripts.quant_shapes import moe_shapes
from wmtp.models import get_model

MS = (1, 2, 4, 8, 16)
OLD = {"fp8": {"": dict(path="dot")}, "int4": {"_gemv[pk]": dict(path="gemv"), "": dict(path="dot")}}
NEW = {"_pair": dict(mode="pair"), "_pair[c2]": dict(mode="pair", ctas=2), "_pair[c8]": dict(mode="pair", ctas=8),
       "_pair[bn16]": dict(mode="pair", block_n=16), "_pair-g2": dict(mode="pair-g", rows=2),
       "_swap": dict(mode="swap"), "_swap[c8]": dict(mode="swap", ctas=8), "_swap-p": dict(mode="swap-p")}
NAME = {"fp8": "wmtp_fp8_moe", "int4": "wmtp_int4_moe"}
TINY = (256, 8, 128, 128)  # E, top_k, N, K


def moe_calls(x, ids, wts, down, weights):
    """kernel -> zero-argument call, for both formats: the earlier paths and every `NEW` variant."""
    out = {}
    for fmt, (w, ws) in weights.items():
        launch = qg.fp8_moe_gemm if fmt == "fp8" else qg.int4_moe_gemm
        for tag, cfg in OLD[fmt].items():
            out[NAME[fmt] + tag] = (lambda w=w, ws=ws, launch=launch, cfg=cfg:
                                    launch(x, w, ws, ids, wts if down else None, a_is_pairs=down, **cfg))
        for tag, cfg in NEW.items():
            out[NAME[fmt] + tag] = lambda fmt=fmt, w=w, ws=ws, cfg=cfg: new_call(fmt, x, w, ws, ids, wts, down, cfg)
    return out


def new_call(fmt, x, w, ws, ids, wts, down, cfg):
    """One `launch_moe` call as a caller would make it (fp8 swap modes: `quantize_act_fp8` first, in the call)."""
    cfg = dict(cfg)
    mode = cfg.pop("mode")
    xs = None
    if fmt == "fp8" and mode.startswith("swap"):
        x, xs = qg.quantize_act_fp8(x)
    out = torch.empty((ids.numel(), w.shape[1]), dtype=torch.bfloat16, device=w.device)
    return launch_moe(x, xs, w, ws, ids, wts if down else None, out, down, mode, qg._sm_count(w.device),
                      lambda t: qg._counters(w.device, t), **cfg)


def run_moe(b, model, comp, n, k, n_exp, top_k, keep, ms=MS, check=True):
    names = [NAME[f] + t for f in NAME for t in (*OLD[f], *NEW)]
    if not any(keep(name, model, comp) for name in names):
        return
    gen = torch.Generator(device=b.dev).manual_seed(29)
    down = comp.endswith("down")
    fp8_w, i4_w = moe_weights(b, n, k, n_exp)
    weights = {"fp8": fp8_w, "int4": i4_w}
    for m in ms:
        ids = torch.rand(m, n_exp, device=b.dev, generator=gen).topk(top_k, dim=1).indices.to(torch.int32)
        wts = torch.softmax(torch.randn(m, top_k, device=b.dev, generator=gen), -1)
        x = torch.randn(m * top_k if down else m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        used = ids.unique()
        refs = {}
        for kernel, fn in moe_calls(x, ids, wts, down, weights).items():
            if not keep(kernel, model, comp):
                continue
            fmt = "fp8" if kernel.startswith("wmtp_fp8") else "int4"
            if check and not isinstance(b, Warm):  # the compile workers check nothing
                if fmt not in refs:
                    refs[fmt] = _ref(fmt, weights[fmt], x, ids, wts, used, down)
                b.check(kernel, model, comp, m, n, k, n_exp, top_k, fn, refs[fmt])
            nbytes = used.numel() * qg.weight_bytes("fp8_block" if fmt == "fp8" else "int4_group", n, k)
            b.measure(kernel, model, comp, m, n, k, n_exp, top_k, "fp8_e4m3" if fmt == "fp8" else "int4", nbytes,
                      [fn], routed=used.numel())
        del refs
    del fp8_w, i4_w, weights


def _ref(fmt, w, x, ids, wts, used, down):
    """fp32 torch on the dequantized operands (fp8: activations quantized per 1x128 group, then dequantized)."""
    deq = qg.dequantize_fp8_block if fmt == "fp8" else qg.dequantize_int4_group
    w_deq, pos = deq(w[0][used.long()], w[1][used.long()]), torch.searchsorted(used, ids)
    xr = qg.dequantize_fp8_block(*qg.quantize_act_fp8(x), (1, 128)) if fmt == "fp8" else x
    return moe_ref(xr, w_deq, pos, wts, down)


def sweep(b, models, keep, out_dir=None):
    """Fixed cost first (tiny experts, M = 1 / 16), then every MoE shape of `models`; outputs after each shape."""
    if b.timing and keep("launch", "tiny", "launch"):
        src = torch.zeros(128, dtype=torch.int32, device=b.dev)
        dst = torch.empty_like(src)
        b.measure("launch", "tiny", "launch", 1, 128, 1, 1, 1, "int32", 512, [lambda: triton_copy(dst, src, 128)])
        xa = torch.randn(1, 2048, device=b.dev).to(torch.bfloat16)
        b.measure("act_quant", "tiny", "act_quant", 1, 2048, 2048, 1, 1, "bf16", 4096,
                  [lambda: qg.quantize_act_fp8(xa)])
    n_exp, top_k, n, k = TINY
    run_moe(b, "tiny", "experts_up", n, k, n_exp, top_k, keep, ms=(1, 16), check=False)
    for model in models:
        s = get_model(model)
        for comp, (n, k) in moe_shapes(model).items():
            run_moe(b, model, comp, n, k, s.n_experts, s.top_k, keep)
            torch.cuda.empty_cache()
            if out_dir is not None:
                qb.write_outputs(b, out_dir, final=False)


def main(argv=None) -> int:
    return script_main(argv, __doc__, "quant_moe_bench", sweep, "tests/test_kernels_quant_moe.py", procs=14)


if __name__ == "__main__":
    raise SystemExit(main())
