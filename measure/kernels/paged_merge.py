"""Stage 2 of the split-KV paged-attention kernels (`paged_attention`, `paged_ws`): merge the splits' partial
outputs by their base-2 log-sum-exps. Grid (total_q, q_heads, head_dim / BLOCK_D); each program loads every split's
log-sum-exp at once and the partial outputs in chunks of SPLIT_BLOCK splits (by default one chunk up to 128 splits:
`wmtp.kernel_plan.merge_split_block`). `FP8`: the K/V dtypes every launcher reads as fp8 (with k / v scales)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from wmtp.kernel_plan import MERGE_BLOCK_D, merge_split_block

FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


@triton.jit
def _merge_kernel(
    MidO, MidL, Out, num_splits,
    stride_ot, stride_oh, stride_os, stride_lt, stride_lh, stride_outt, stride_outh,
    BLOCK_D: tl.constexpr, SPLIT_BLOCK: tl.constexpr, PDL: tl.constexpr = False,
):
    if PDL:  # a programmatic dependent launch: wait until the split kernel's partials are written and visible
        tl.extra.cuda.gdc_wait()
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    dims = tl.program_id(2) * BLOCK_D + tl.arange(0, BLOCK_D)
    m = tl.full([1], float("-inf"), tl.float32)
    den = tl.zeros([1], tl.float32)
    acc = tl.zeros([BLOCK_D], tl.float32)
    for s0 in range(0, num_splits, SPLIT_BLOCK):
        sp = s0 + tl.arange(0, SPLIT_BLOCK)
        ok = sp < num_splits
        lse = tl.load(MidL + t * stride_lt + h * stride_lh + sp, mask=ok, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(lse, 0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        w = tl.math.exp2(lse - m_safe)
        scale = tl.math.exp2(m - m_safe)
        # loaded beside the log-sum-exps, not masked by their weights (one round trip to memory, not two); a split
        # of weight 0 (empty) contributes 0 whatever its partial holds
        o = tl.load(MidO + t * stride_ot + h * stride_oh + sp[:, None] * stride_os + dims[None, :],
                    mask=ok[:, None], other=0.0)
        o = tl.where(w[:, None] > 0, o, 0.0)
        acc = acc * scale + tl.sum(w[:, None] * o, 0)
        den = den * scale + tl.sum(w, 0)
        m = m_new
    tl.store(Out + t * stride_outt + h * stride_outh + dims, (acc / den).to(Out.dtype.element_ty))


def merge_splits(mid_o: torch.Tensor, mid_l: torch.Tensor, out: torch.Tensor, pdl: bool = False,
                 split_block: int | None = None, block_d: int | None = None, num_warps: int = 4) -> torch.Tensor:
    """Stage 2: merge the splits' partial outputs `mid_o` [total_q, Hq, splits, D] (each normalized by its own
    sum) by their base-2 log-sum-exps `mid_l` [total_q, Hq, splits] into `out` [total_q, Hq, D]. `pdl`: launch as a
    programmatic dependent launch (Hopper and newer, the GPU only) of a split kernel that triggers its dependents.
    `split_block` (a power of two; default `merge_split_block`: one round up to 128 splits) splits folded per
    iteration, `block_d` (a power of two dividing D; `MERGE_BLOCK_D`) the head-dim slice of one program."""
    total_q, hq, splits, hd = mid_o.shape
    split_block = merge_split_block(splits) if split_block is None else split_block
    block_d = min(hd, MERGE_BLOCK_D if block_d is None else block_d)
    for name, val in (("split_block", split_block), ("block_d", block_d)):
        if val < 1 or val & (val - 1):
            raise ValueError(f"{name} must be a power of two, got {val}")
    if hd % block_d:
        raise ValueError(f"block_d {block_d} does not divide head dim {hd}")
    _merge_kernel[(total_q, hq, hd // block_d)](
        mid_o, mid_l, out, splits,
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2), mid_l.stride(0), mid_l.stride(1),
        out.stride(0), out.stride(1), BLOCK_D=block_d, SPLIT_BLOCK=split_block, num_warps=num_warps,
        **({"PDL": True, "launch_pdl": True} if pdl else {}),
    )
    return out
