"""How fast can any one kernel move the native index build's bytes (S = 1M, B = 1: 4 MiB read +
4 MiB written) under the benchmark's method (CUDA-graph replay, CUDA events, L2 flushed by a read)?
Times the index build beside an elementwise copy and cudaMemcpy of the same bytes. Run on a GPU:
    python measure/scripts/index_floor.py
"""

import statistics

import torch

from wmtp.measure.kernels.index_build import build_kv_indices
from wmtp.measure.timing import time_calls

S = 1 << 20
r2t = torch.randperm(S, device="cuda").to(torch.int32).view(1, S)
seq = torch.tensor([S], device="cuda", dtype=torch.int32)
ptr = torch.tensor([0, S], device="cuda", dtype=torch.int32)
out = torch.empty(S, device="cuda", dtype=torch.int32)
src = torch.randint(0, S, (S,), device="cuda", dtype=torch.int32)
dst = torch.empty_like(src)
cases = {
    "index build (wmtp, native)": lambda: build_kv_indices(r2t, seq, "native", max_len=S, kv_indptr=ptr, out=out),
    "elementwise copy (torch.mul by 1)": lambda: torch.mul(src, 1, out=dst),
    "copy_ (cudaMemcpy node)": lambda: dst.copy_(src),
    "empty graph (one tiny kernel)": lambda: dst[:1].zero_(),
}
nbytes = 8 * S
print(f"bytes moved: {nbytes / 2**20:.1f} MiB")
for name, fn in cases.items():
    t = time_calls([fn], reps=200, warmup=20, flush=True)
    med = statistics.median(t.samples_ms)
    print(f"{name:36s} median {med * 1e3:7.2f} us  {nbytes / med / 1e9:6.2f} TB/s  ({t.timer})")
