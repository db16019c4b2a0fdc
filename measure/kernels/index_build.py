"""Draft KV-index build: req_to_token rows -> (kv_indptr, kv_indices) for paged attention.

Three modes, batched over requests of different lengths (page size 1):
  native  all S positions;                                   reads S int32, writes S int32
  window  the first n_sink and the last W positions (all S when S <= n_sink + W)
  ring    the window's positions mapped to the draft's compact ring pool:
          slot = r*(n_sink+W+d) + (p < n_sink ? p : n_sink + (p - n_sink) mod (W+d))
          (computed, so req_to_token is not read)
`kv_indptr[b]` = first entry of request b; computed on the device by a cumulative sum unless the
caller passes it (as a serving engine does once per batch).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MODES = {"native": 0, "window": 1, "ring": 2}


@triton.jit
def request_bounds(b, req_pool_indices, seq_lens, kv_indptr, POOL_ROWS: tl.constexpr):
    """Request b's req_to_token row, sequence length, and its output range in kv_indices (start, count)."""
    if POOL_ROWS:
        row = tl.load(req_pool_indices + b).to(tl.int64)
    else:  # request b owns row b of req_to_token
        row = b.to(tl.int64)
    out_start = tl.load(kv_indptr + b)
    return row, tl.load(seq_lens + b), out_start, tl.load(kv_indptr + b + 1) - out_start


@triton.jit
def _index_build_kernel(
    req_to_token, stride_r2t, req_pool_indices, seq_lens, kv_indptr, kv_indices,
    n_sink, window, ring_period, ring_stride,
    MODE: tl.constexpr, BLOCK: tl.constexpr, POOL_ROWS: tl.constexpr,
):
    b = tl.program_id(0)
    blk = tl.program_id(1)
    row, seq, out_start, n_out = request_bounds(b, req_pool_indices, seq_lens, kv_indptr, POOL_ROWS)
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    if MODE == 0:
        pos = offs
    else:
        windowed = seq > n_sink + window
        pos = tl.where(windowed & (offs >= n_sink), seq - window + (offs - n_sink), offs)
    if MODE == 2:
        ring = tl.where(pos < n_sink, pos, n_sink + (pos - n_sink) % ring_period)
        slot = row * ring_stride + ring
    else:
        slot = tl.load(req_to_token + row * stride_r2t + pos, mask=mask, other=0)
    tl.store(kv_indices + out_start + offs, slot.to(tl.int32), mask=mask)


def index_lengths(seq_lens: torch.Tensor, mode: str, n_sink: int, window: int) -> torch.Tensor:
    """Entries each request gets: S natively, min(S, n_sink + W) windowed / ring."""
    if mode == "native":
        return seq_lens
    return torch.clamp(seq_lens, max=n_sink + window)


def build_kv_indices(
    req_to_token: torch.Tensor,  # [max_reqs, max_ctx] int32
    seq_lens: torch.Tensor,  # [B] int32
    mode: str = "native",
    n_sink: int = 64,
    window: int = 4032,
    depth: int = 1,
    req_pool_indices: torch.Tensor | None = None,  # [B] rows of req_to_token (default arange)
    max_len: int | None = None,  # longest seq_len (host int: sizes the grid without a device sync)
    kv_indptr: torch.Tensor | None = None,  # [B+1] precomputed
    out: torch.Tensor | None = None,
    block: int = 1024,
    num_warps: int = 4,
) -> tuple[torch.Tensor, torch.Tensor]:
    if mode not in MODES:
        raise ValueError(f"unknown index mode {mode!r}; known: {', '.join(MODES)}")
    if req_to_token.dtype != torch.int32 or seq_lens.dtype != torch.int32:
        raise ValueError("req_to_token and seq_lens must be int32")
    if req_to_token.dim() != 2 or req_to_token.stride(1) != 1:
        raise ValueError("req_to_token must be a row-major [max_reqs, max_ctx] tensor")
    if n_sink < 0 or window < 0 or depth < 1:
        raise ValueError("n_sink and window must be >= 0 and depth >= 1")
    if mode == "ring" and window + depth <= 0:
        raise ValueError("ring mode needs W + d > 0")
    bsz = seq_lens.numel()
    dev = seq_lens.device
    if max_len is None:
        max_len = int(seq_lens.max().item()) if bsz else 0
    if max_len > req_to_token.shape[1] and mode != "ring":
        raise ValueError(f"seq_len {max_len} exceeds req_to_token width {req_to_token.shape[1]}")
    if kv_indptr is None:
        kv_indptr = torch.zeros(bsz + 1, dtype=torch.int32, device=dev)
        torch.cumsum(index_lengths(seq_lens, mode, n_sink, window), 0, out=kv_indptr[1:])
    max_out = max_len if mode == "native" else min(max_len, n_sink + window)
    if out is None:
        total = int(kv_indptr[-1].item())
        out = torch.empty(total, dtype=torch.int32, device=dev)
    if bsz and max_out:
        grid = (bsz, triton.cdiv(max_out, block))
        _index_build_kernel[grid](
            req_to_token, req_to_token.stride(0), req_pool_indices if req_pool_indices is not None else seq_lens,
            seq_lens, kv_indptr, out,
            n_sink, window, window + depth, n_sink + window + depth,
            MODE=MODES[mode], BLOCK=block, POOL_ROWS=req_pool_indices is not None, num_warps=num_warps,
        )
    return kv_indptr, out
