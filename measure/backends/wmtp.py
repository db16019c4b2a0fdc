"""Backend `wmtp` (the default): the project's own Triton kernels (`measure/kernels/`): split-KV
paged attention for decode / verify / extend (one K/V tile load serves a KV group's query heads
times the request's rows) and the 2-D parallel KV-index build. Tuning options are passed to the
launchers (`block_n`, `num_warps`, `num_splits`, ...; `block`, `num_warps` for the index build)."""

from __future__ import annotations

import torch
import triton

from wmtp.kernel_plan import BASE_SET, MERGE2, WS3_SET
from wmtp.measure.backends.base import AttentionBackend, Paged
from wmtp.measure.kernels.gluon_support import build_failure
from wmtp.measure.kernels.index_build import build_kv_indices
from wmtp.measure.kernels.paged_attention import decode_attention, verify_attention


class WmtpBackend(AttentionBackend):
    name = "wmtp"

    def versions(self) -> dict[str, str]:
        return {"torch": torch.__version__, "triton": triton.__version__}

    def kernel_set(self) -> str:
        """`v1+rows+ws3+m2` where the warp-specialized kernel runs (Hopper, Gluon; 192-row blocks), else
        `v1+rows+m2` (`wmtp.kernel_plan.default_kernel`); `+m2`: the one-round split merge."""
        return (WS3_SET if torch.cuda.is_available() and ws_probe("cuda") else BASE_SET) + MERGE2

    def describe(self) -> str:
        return "wmtp Triton kernels: split-KV paged attention (tiling from wmtp.kernel_plan), parallel index build"

    def decode(self, k, v, paged: Paged, q, out, **tuning):
        ptr, ind, n = paged.kv_indptr, paged.kv_indices, paged.n
        return lambda: decode_attention(q, k, v, ptr, ind, n, out=out, **tuning)

    def verify(self, k, v, paged: Paged, q, out, d: int, **tuning):
        ptr, ind, n = paged.kv_indptr, paged.kv_indices, paged.n
        qo = torch.arange(paged.batch + 1, device=q.device, dtype=torch.int32) * d
        return lambda: verify_attention(q, k, v, ptr, ind, qo, d, n, out=out, **tuning)

    def index_build(self, paged: Paged, depth: int = 1, **tuning):
        p = paged
        return lambda: build_kv_indices(p.req_to_token, p.seq_lens, p.mode, p.sink, p.window, depth, max_len=p.ctx,
                                        kv_indptr=p.kv_indptr, out=p.kv_indices, **tuning)


def ws_probe(device) -> bool:
    """Whether the ws kernel compiles and runs on `device` with this Triton: two tiny launches, a decode of one
    64-row block and a verify of one 192-row block of three consumers (a sweep records the kernel set it measured,
    `v1+rows+ws3`, only after this). False too where this Triton has no Gluon Hopper language to import."""
    try:
        from wmtp.measure.kernels.paged_ws import ws_attention, ws_available, ws_broken
    except ImportError:
        return False
    q = torch.zeros(1, 8, 64, dtype=torch.bfloat16, device=device)
    q3 = torch.zeros(9, 16, 64, dtype=torch.bfloat16, device=device)  # 16 heads x d = 9: 144 rows, one 192-row block
    k = torch.zeros(64, 1, 64, dtype=torch.bfloat16, device=device)
    if not ws_available(q, k):
        return False
    ptr = torch.tensor([0, 64], dtype=torch.int32, device=device)
    ind = torch.arange(64, dtype=torch.int32, device=device)
    try:
        ws_attention(q, k, k, ptr, ind, None, 1, 64)
        ws_attention(q3, k, k, ptr, ind, torch.tensor([0, 9], dtype=torch.int32, device=device), 9, 64)
    except Exception as e:
        if not build_failure(e):
            raise
        ws_broken(e)
        return False
    return True
