"""The size-matched floor of the quantized-GEMM targets (issue 17): how fast can anything stream a weight of B bytes
under the benchmark's own method, and where our kernels stand against it.

Run on a GPU (with wmtp installed):
    python3 -m wmtp.measure.scripts.quant_floor --out DIR [--procs 4] [--budget-s 150]
Same method and outputs as `quant_bk` (CUDA-graph replay over copies exceeding 3x the L2, the L2 flushed by a read
before each replay, the 2 GiB copy ceiling of the same run). For every dense shape (`quant_bk.items`) of q35 / q122 /
nem and each weight format, at exactly that format's bytes (codes + scales, `weight_bytes`): `read_floor[...]`, a
read-only Triton streaming kernel (`quant_kernels.read_`; `[one]` one 8 KiB block per program, 8 warps; `[one4]`
4 KiB blocks, 4 warps; `[sm4]` / `[sm8]` 4 / 8 programs per SM walking equal shares) whose best variant is the
floor of any kernel that reads those bytes once; `empty` (`quant_kernels.noop_`), one program that stores its id:
the launch-and-timer floor. Beside them our dense kernels as path='auto' dispatches them (`wmtp_fp8_block`,
`wmtp_int4_group`) and torch_bf16 (cuBLAS on the bf16 weights), at M = 1, 2, 4, 8, 16.
"""

from __future__ import annotations

import torch

from wmtp.measure.kernels import quant_gemm as qg
from wmtp.measure.kernels.quant_kernels import noop_, read_
from wmtp.measure.scripts import quant_bench as qb
from wmtp.measure.scripts.quant_bk import call_peer, items, peer_ops, script_main
from wmtp.measure.scripts.quant_peers import dense_fns, dense_format, dense_ref, weight_set

MS = (1, 2, 4, 8, 16)
FORMATS = ("int4_group", "fp8_block")
READS = {"[one]": dict(block=2048, num_warps=8), "[one4]": dict(block=1024, num_warps=4),
         "[sm4]": dict(block=2048, programs=4), "[sm8]": dict(block=2048, programs=8)}


def run_floor(b, model, comp, n, k, keep):
    """The read floor at each format's bytes of an [N, K] weight, over rotating buffers."""
    for fmt in FORMATS:
        nbytes = qg.weight_bytes(fmt, n, k)
        bufs = [torch.empty((nbytes + 3) // 4, dtype=torch.int32, device=b.dev).random_(0, 1 << 30)
                for _ in range(b.dense_copies(n, k))]
        out = torch.empty(max(8 * b.sm, bufs[0].numel() // 1024 + 1), dtype=torch.int32, device=b.dev)
        for tag, cfg in READS.items():
            name = f"read_floor{tag}"
            if not keep(name, model, comp):
                continue
            cfg = {**cfg, "programs": cfg["programs"] * b.sm} if "programs" in cfg else cfg
            b.measure(name, model, comp, 1, n, k, 1, 1, fmt, nbytes,
                      [lambda s=s, cfg=cfg: read_(s, out, **cfg) for s in bufs])
        del bufs


def run_ours(b, model, comp, n, k, check, keep):
    """Our dense kernels (path='auto') and cuBLAS bf16 at every M."""
    gen = torch.Generator(device=b.dev).manual_seed(23)
    wsets = [peer_ops(weight_set(n, k, b.dev, gen)) for _ in range(b.dense_copies(n, k))]
    for m in MS:
        x = torch.randn(m, k, device=b.dev, generator=gen).to(torch.bfloat16)
        calls = {"wmtp_fp8_block": lambda w: qg.fp8_gemm(x, *w["fp8"]),
                 "wmtp_int4_group": lambda w: qg.int4_gemm(x, *w["int4"]),
                 "torch_bf16": lambda w, f=dense_fns(x)["torch_bf16"]: call_peer(f, w["torch_bf16"])}
        for kernel, fn in calls.items():
            if not keep(kernel, model, comp):
                continue
            dtype, nbytes = dense_format(kernel, n, k)
            if check and kernel.startswith("wmtp"):
                b.check(kernel, model, comp, m, n, k, 1, 1, lambda fn=fn: fn(wsets[0]), dense_ref(x, wsets[0], kernel))
            b.measure(kernel, model, comp, m, n, k, 1, 1, dtype, nbytes, [lambda fn=fn, w=w: fn(w) for w in wsets])


def sweep(b, models, keep, out_dir=None):
    b.sm = torch.cuda.get_device_properties(b.dev).multi_processor_count if torch.cuda.is_available() else 4
    if keep("empty", "-", "launch"):
        flag = torch.zeros(1, dtype=torch.int32, device=b.dev)
        b.measure("empty", "-", "launch", 1, 1, 1, 1, 1, "uint8", 4, [lambda: noop_(flag)])
    seen = set()
    for model, kind, comp, shape in items(models):
        if kind != "dense":
            continue
        run_floor(b, model, comp, *shape, keep)
        run_ours(b, model, comp, *shape, check=model not in seen, keep=keep)
        seen.add(model)
        torch.cuda.empty_cache()
        if out_dir is not None:
            qb.write_outputs(b, out_dir, final=False)


def main(argv=None) -> int:
    return script_main(argv, __doc__, "quant_floor", sweep, "tests/test_kernels_quant_floor.py", procs=4)


if __name__ == "__main__":
    raise SystemExit(main())
