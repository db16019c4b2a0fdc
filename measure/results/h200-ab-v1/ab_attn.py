"""A/B of the v1 paged-attention kernel (decode and verify at 1M, B = 1, bf16 KV, random page-size-1 slots) across
code versions: one process per version, PYTHONPATH picks it; kernel='v1' where the version has a choice."""
import inspect, json, statistics, sys
import torch
import wmtp.measure.kernels.paged_attention as pa
from wmtp.measure.timing import time_calls
tag = sys.argv[1]
S = 1 << 20
V1 = {"kernel": "v1"} if "kernel" in inspect.signature(pa.paged_attention).parameters else {}
g = torch.Generator(device="cuda").manual_seed(7)
for model, hq, hkv, hd in (("q35", 16, 2, 256), ("q122", 32, 2, 256), ("nem", 32, 2, 128)):
    k = torch.randn(S, hkv, hd, device="cuda", generator=g, dtype=torch.bfloat16)
    v = torch.randn(S, hkv, hd, device="cuda", generator=g, dtype=torch.bfloat16)
    idx = torch.randperm(S, device="cuda", generator=g).to(torch.int32)
    kv_indptr = torch.tensor([0, S], device="cuda", dtype=torch.int32)
    for d in (1, 4, 7):
        q = torch.randn(d, hq, hd, device="cuda", generator=g, dtype=torch.bfloat16)
        if d == 1:
            fn = lambda: pa.decode_attention(q, k, v, kv_indptr, idx, S, **V1)  # noqa: E731
        else:
            qo = torch.tensor([0, d], device="cuda", dtype=torch.int32)
            fn = lambda q=q, qo=qo, d=d: pa.verify_attention(q, k, v, kv_indptr, idx, qo, d, S, **V1)  # noqa: E731
        t = time_calls([fn], reps=30, warmup=5, flush=True)
        print(json.dumps({"version": tag, "model": model, "d": d, "v1_forced": bool(V1),
                          "median_ms": round(statistics.median(t.samples_ms), 4)}), flush=True)
    del k, v, idx
    torch.cuda.empty_cache()
