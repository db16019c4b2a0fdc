"""The KV-index build as serving engines write it: one program per request walking its
`req_to_token` row in blocks (SGLang's `create_flashinfer_kv_indices_triton`, which builds the
FlashInfer indices for the draft decode, the verify and the draft extend). Written here from that
algorithm, for timing beside the project's own parallel build (`index_build.py`, a 2-D grid of
requests x blocks).

Program b copies the row's positions into kv_indices[kv_indptr[b] : kv_indptr[b + 1]]:
  native  positions 0 .. S-1
  window  the first n_sink and the last W positions (all S when S <= n_sink + W)
(SGLang's kernel copies one contiguous range per request; sink + window is this module's extension
of the same walk, for timing a windowed draft built the engines' way.)
Grid (B,): at 1M keys and B = 1 a single program walks 2,048 blocks of 512 in sequence, which is
why the engines' build costs milliseconds where the parallel build costs microseconds.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wmtp.measure.kernels.index_build import request_bounds

MODES = {"native": 0, "window": 1}
ENGINE_BLOCK = 512  # SGLang's BLOCK_SIZE


@triton.jit
def _per_request_index_kernel(
    req_to_token, stride_r2t, req_pool_indices, seq_lens, kv_indptr, kv_indices, n_sink, window,
    MODE: tl.constexpr, BLOCK: tl.constexpr, POOL_ROWS: tl.constexpr,
):
    b = tl.program_id(0)
    row, seq, out_start, n_out = request_bounds(b, req_pool_indices, seq_lens, kv_indptr, POOL_ROWS)
    for blk in range(0, tl.cdiv(n_out, BLOCK)):
        offs = blk * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_out
        if MODE == 0:
            pos = offs
        else:
            windowed = seq > n_sink + window
            pos = tl.where(windowed & (offs >= n_sink), seq - window + (offs - n_sink), offs)
        slot = tl.load(req_to_token + row * stride_r2t + pos, mask=mask, other=0)
        tl.store(kv_indices + out_start + offs, slot, mask=mask)


def build_kv_indices_per_request(
    req_to_token: torch.Tensor,  # [max_reqs, max_ctx] int32
    seq_lens: torch.Tensor,  # [B] int32
    kv_indptr: torch.Tensor,  # [B+1] int32: entries of request b start at kv_indptr[b]
    out: torch.Tensor,  # [kv_indptr[-1]] int32
    mode: str = "native",
    n_sink: int = 0,
    window: int = 0,
    req_pool_indices: torch.Tensor | None = None,  # [B] rows of req_to_token (default arange)
    block: int = ENGINE_BLOCK,
    num_warps: int = 4,
) -> torch.Tensor:
    """Fill `out` with each request's slots, one program per request (see module docstring)."""
    if mode not in MODES:
        raise ValueError(f"the per-request build has no mode {mode!r}; known: {', '.join(MODES)}")
    for name, t in (("req_to_token", req_to_token), ("seq_lens", seq_lens), ("kv_indptr", kv_indptr), ("out", out)):
        if t.dtype != torch.int32:
            raise ValueError(f"{name} must be int32")
    if req_to_token.dim() != 2 or req_to_token.stride(1) != 1:
        raise ValueError("req_to_token must be a row-major [max_reqs, max_ctx] tensor")
    if kv_indptr.numel() != seq_lens.numel() + 1:
        raise ValueError("kv_indptr must have one entry more than seq_lens")
    if n_sink < 0 or window < 0:
        raise ValueError("n_sink and window must be >= 0")
    if block < 16 or block & (block - 1):
        raise ValueError(f"block must be a power of two >= 16, got {block}")
    bsz = seq_lens.numel()
    if bsz:
        _per_request_index_kernel[(bsz,)](
            req_to_token, req_to_token.stride(0), req_pool_indices if req_pool_indices is not None else seq_lens,
            seq_lens, kv_indptr, out, n_sink, window,
            MODE=MODES[mode], BLOCK=block, POOL_ROWS=req_pool_indices is not None, num_warps=num_warps,
        )
    return out
