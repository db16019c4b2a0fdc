"""Routed-expert FFN (MoE) for decode-sized batches: two grouped GEMMs over the experts the tokens chose.

Token-expert pairs are sorted by expert (torch.argsort + index_add, no host sync); each expert's pairs are cut into
blocks of BLOCK_M rows. Grid (blocks, N / BLOCK_N): a program finds its expert by binary search
over the cumulative block counts, gathers its rows and multiplies by that expert's weight tile, so
an expert's weights are read once per call however many of the batch's tokens chose it
(min(E, T*k) experts in all). The up kernel fuses gate and up projections with the activation
(SwiGLU, or squared ReLU without a gate); the down kernel scales by the routing weight.
Weights: w_up [E, K, N_up] (N_up = 2F for SwiGLU, F for relu^2), w_down [E, F, K_out].
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


# The expert that owns row block `blk`: binary search over cumulative block counts (shared with quant_gemm).
@triton.jit
def find_expert(cum_blocks, E, blk, LOG_E: tl.constexpr):
    lo = tl.full([], 0, tl.int32)
    hi = tl.full([], 0, tl.int32) + E
    for _ in range(LOG_E):  # largest e with cum_blocks[e] <= blk
        mid = (lo + hi) // 2
        go_right = tl.load(cum_blocks + mid) <= blk
        lo = tl.where(go_right, mid, lo)
        hi = tl.where(go_right, hi, mid)
    return lo


@triton.jit
def _moe_gemm_kernel(
    A, W, Out, sorted_pairs, counts, starts, cum_blocks, weights,
    E, K, N, top_k, stride_am, stride_we, stride_wk, stride_om,
    A_IS_PAIRS: tl.constexpr, GATED: tl.constexpr, RELU2: tl.constexpr, SCALE: tl.constexpr,
    LOG_E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
):
    blk = tl.program_id(0)
    nb = tl.program_id(1)
    total_blocks = tl.load(cum_blocks + E)
    if blk >= total_blocks:
        return
    e = find_expert(cum_blocks, E, blk, LOG_E)
    row0 = (blk - tl.load(cum_blocks + e)) * BLOCK_M
    rows = row0 + tl.arange(0, BLOCK_M)
    r_ok = rows < tl.load(counts + e)
    pair = tl.load(sorted_pairs + tl.load(starts + e) + rows, mask=r_ok, other=0)
    a_row = pair if A_IS_PAIRS else pair // top_k
    cols = nb * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ok = cols < N
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    w_base = W + e.to(tl.int64) * stride_we
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = tl.load(A + a_row[:, None].to(tl.int64) * stride_am + ks[None, :], mask=r_ok[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w_base + ks[:, None] * stride_wk + cols[None, :], mask=k_ok[:, None] & c_ok[None, :], other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc += tl.dot(a, w)
        if GATED:  # up half of [gate | up] sits N columns to the right
            wu = tl.load(w_base + ks[:, None] * stride_wk + (cols + N)[None, :], mask=k_ok[:, None] & c_ok[None, :], other=0.0)
            if UPCAST:
                wu = wu.to(tl.float32)
            acc_g += tl.dot(a, wu)
    if GATED:
        acc = acc / (1.0 + tl.exp(-acc)) * acc_g  # silu(gate) * up
    elif RELU2:
        acc = tl.maximum(acc, 0.0)
        acc = acc * acc
    if SCALE:
        acc = acc * tl.load(weights + pair, mask=r_ok, other=0.0)[:, None]
    tl.store(Out + pair[:, None].to(tl.int64) * stride_om + cols[None, :], acc.to(Out.dtype.element_ty),
             mask=r_ok[:, None] & c_ok[None, :])


def route_pairs(topk_ids: torch.Tensor, n_experts: int, block_m: int):
    """Sort token-expert pairs by expert; per-expert counts, starts and cumulative block counts."""
    flat = topk_ids.reshape(-1)
    order = torch.argsort(flat, stable=True).to(torch.int32)
    counts = torch.zeros(n_experts, dtype=torch.int32, device=flat.device)
    counts.index_add_(0, flat.long(), torch.ones_like(flat, dtype=torch.int32))  # no host sync: graph-safe
    starts = torch.cumsum(counts, 0, dtype=torch.int32) - counts
    blocks = (counts + block_m - 1) // block_m
    cum_blocks = torch.zeros(n_experts + 1, dtype=torch.int32, device=flat.device)
    torch.cumsum(blocks, 0, out=cum_blocks[1:])
    return order, counts, starts, cum_blocks


def moe_experts(
    x: torch.Tensor,  # [T, K] activations
    w_up: torch.Tensor,  # [E, K, 2F] (gated) or [E, K, F]
    w_down: torch.Tensor,  # [E, F, K_out]
    topk_ids: torch.Tensor,  # [T, k] int
    topk_weights: torch.Tensor,  # [T, k] fp32
    act: str = "swiglu",
    block_m: int = 16,
    block_n: int = 64,
    block_k: int = 64,
    num_warps: int = 4,
) -> torch.Tensor:
    """sum_j w_j * FFN_{e_j}(x) over each token's top-k experts -> [T, K_out]."""
    if act not in ("swiglu", "relu2"):
        raise ValueError(f"unknown activation {act!r}")
    t_len, k_in = x.shape
    n_exp, k_w, n_up = w_up.shape
    gated = act == "swiglu"
    ffn = n_up // 2 if gated else n_up
    if k_w != k_in or w_down.shape[0] != n_exp or w_down.shape[1] != ffn:
        raise ValueError("weight shapes do not match: w_up [E, K, 2F or F], w_down [E, F, K_out]")
    if topk_ids.shape != topk_weights.shape or topk_ids.shape[0] != t_len:
        raise ValueError("topk_ids and topk_weights must both be [T, k]")
    if x.stride(1) != 1 or w_up.stride(2) != 1 or w_down.stride(2) != 1:
        raise ValueError("inner dimensions must be contiguous")
    top_k = topk_ids.shape[1]
    pairs = t_len * top_k
    order, counts, starts, cum_blocks = route_pairs(topk_ids, n_exp, block_m)
    max_blocks = triton.cdiv(pairs, block_m) + min(n_exp, pairs)
    log_e = max(1, int(n_exp).bit_length())
    upcast = x.dtype == torch.bfloat16 and _interpreting()
    inter = torch.empty((pairs, ffn), dtype=x.dtype, device=x.device)
    _moe_gemm_kernel[(max_blocks, triton.cdiv(ffn, block_n))](
        x, w_up, inter, order, counts, starts, cum_blocks, topk_weights,
        n_exp, k_in, ffn, top_k, x.stride(0), w_up.stride(0), w_up.stride(1), inter.stride(0),
        A_IS_PAIRS=False, GATED=gated, RELU2=not gated, SCALE=False, LOG_E=log_e,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, UPCAST=upcast, num_warps=num_warps,
    )
    k_out = w_down.shape[2]
    pair_out = torch.empty((pairs, k_out), dtype=x.dtype, device=x.device)
    _moe_gemm_kernel[(max_blocks, triton.cdiv(k_out, block_n))](
        inter, w_down, pair_out, order, counts, starts, cum_blocks, topk_weights.reshape(-1).contiguous(),
        n_exp, ffn, k_out, top_k, inter.stride(0), w_down.stride(0), w_down.stride(1), pair_out.stride(0),
        A_IS_PAIRS=True, GATED=False, RELU2=False, SCALE=True, LOG_E=log_e,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, UPCAST=upcast, num_warps=num_warps,
    )
    return pair_out.view(t_len, top_k, k_out).sum(1)


def _interpreting() -> bool:
    import os

    return os.environ.get("TRITON_INTERPRET") == "1"
