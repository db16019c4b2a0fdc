"""A/B of the dense fp8 / int4 GEMV at M = 1 across code versions (one process per version, PYTHONPATH picks it)."""
import json, math, statistics, sys
import torch
import wmtp.measure.kernels.quant_gemm as qg
from wmtp.measure.timing import time_calls
SHAPES = {"q35 lin_in": (12288, 2048), "q35 attn_qkv": (9216, 2048), "q122 lin_in": (20480, 3072),
          "q122 attn_qkv": (17408, 3072), "nem lin_in": (18560, 4096), "nem attn_qkv": (4608, 4096),
          "nem lin_out": (4096, 8192), "q122 lm_head": (248320, 3072)}
tag = sys.argv[1]
l2 = torch.cuda.get_device_properties(0).L2_cache_size
g = torch.Generator(device="cuda").manual_seed(3)
for name, (n, k) in SHAPES.items():
    c = max(1, min(64, math.ceil(3 * l2 / (n * k // 2)), (8 << 30) // (6 * n * k)))
    w = [torch.randn(n, k, device="cuda", generator=g, dtype=torch.bfloat16) / k ** 0.5 for _ in range(c)]
    f8 = [qg.quantize_fp8_block(t) for t in w]
    i4 = [qg.quantize_int4_group(t) for t in w]
    del w
    x = torch.randn(1, k, device="cuda", generator=g).to(torch.bfloat16)
    for fmt, ops, fn in (("fp8", f8, qg.fp8_gemm), ("int4", i4, qg.int4_gemm)):
        t = time_calls([lambda o=o, fn=fn: fn(x, *o, path="gemv") for o in ops], reps=30, warmup=5, flush=True)
        nb = n * k if fmt == "fp8" else n * k // 2
        print(json.dumps({"version": tag, "shape": name, "fmt": fmt, "copies": c, "MB": round(nb / 1e6, 1),
                          "median_us": round(statistics.median(t.samples_ms) * 1e3, 2)}), flush=True)
    del f8, i4
    torch.cuda.empty_cache()
