"""A/B of the decode MoE GEMMs (path='auto', fp8 W8A8 and int4 W4A16) across code versions: one process per version,
PYTHONPATH picks it. Weights are random bytes in each format (values do not change the work), all experts resident."""
import json, statistics, sys
import torch
import wmtp.measure.kernels.quant_gemm as qg
from wmtp.measure.timing import time_calls
tag = sys.argv[1]
SHAPES = {"q35": (256, 8, {"experts_up": (1024, 2048), "experts_down": (2048, 512)}),
          "q122": (256, 8, {"experts_up": (2048, 3072), "experts_down": (3072, 1024)}),
          "nem": (512, 22, {"experts_up": (2688, 1024), "experts_down": (1024, 2688)})}
g = torch.Generator(device="cuda").manual_seed(11)
for model, (e, top_k, comps) in SHAPES.items():
    for comp, (n, k) in comps.items():
        w8 = torch.randint(0, 120, (e, n, k), device="cuda", generator=g, dtype=torch.uint8).view(torch.float8_e4m3fn)
        s8 = torch.rand(e, -(-n // 128), -(-k // 128), device="cuda", generator=g) * 1e-2 + 1e-3
        w4 = torch.randint(0, 256, (e, n, k // 2), device="cuda", generator=g, dtype=torch.uint8)
        s4 = (torch.rand(e, n, -(-k // 128), device="cuda", generator=g) * 1e-2 + 1e-3).to(torch.bfloat16)
        for m in (1, 4, 16):
            ids = torch.stack([torch.randperm(e, device="cuda", generator=g)[:top_k] for _ in range(m)]).to(torch.int32)
            wts = torch.rand(m, top_k, device="cuda", generator=g)
            down = comp == "experts_down"
            x = torch.randn(m * top_k if down else m, k, device="cuda", generator=g).to(torch.bfloat16)
            for fmt, fn, w, s in (("fp8", qg.fp8_moe_gemm, w8, s8), ("int4", qg.int4_moe_gemm, w4, s4)):
                call = lambda fn=fn, w=w, s=s: fn(x, w, s, ids, wts if down else None, a_is_pairs=down)  # noqa: E731
                t = time_calls([call], reps=30, warmup=5, flush=True)
                print(json.dumps({"version": tag, "model": model, "comp": comp, "M": m, "fmt": fmt,
                                  "median_us": round(statistics.median(t.samples_ms) * 1e3, 2)}), flush=True)
        del w8, s8, w4, s4
        torch.cuda.empty_cache()
