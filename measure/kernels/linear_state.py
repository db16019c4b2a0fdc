"""Recurrent-state update of a linear-attention layer for T new tokens (Gated-DeltaNet or Mamba2).

State per request and head: S [DK, DV] fp32. Per token t (decay g_t, rate beta_t, key k_t [DK],
value v_t [DV], query q_t [DK]):
  Gated-DeltaNet (DELTA=1): S = g S;  S += k_t (beta_t (v_t - S^T k_t))^T;  o_t = S^T q_t
  Mamba2         (DELTA=0): S = g S + beta_t k_t v_t^T  (k = B_t, v = x_t, beta = dt, g = exp(dt A));
                            o_t = S^T q_t (q = C_t)
Grid (B, H, DV / BLOCK_V): each program keeps its [DK, BLOCK_V] slice of S in registers across the
T tokens, so the state is read once and written once per call (plus, with SAVE_ALL, once per token,
as an engine that keeps intermediate states for speculative rollback does).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _state_kernel(
    S, Qv, Kv, Vv, G, Beta, O, Inter,
    T, H, KEY_GROUP,
    stride_sb, stride_sh, stride_qb, stride_qt, stride_qh, stride_vb, stride_vt, stride_vh,
    stride_gb, stride_gt, stride_ob, stride_ot, stride_oh, stride_ib, stride_it,
    DK: tl.constexpr, DV: tl.constexpr, BLOCK_V: tl.constexpr, DELTA: tl.constexpr, SAVE_ALL: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    vb = tl.program_id(2)
    kh = h // KEY_GROUP
    rk = tl.arange(0, DK)
    rv = vb * BLOCK_V + tl.arange(0, BLOCK_V)
    s_ptrs = S + b * stride_sb + h * stride_sh + rk[:, None] * DV + rv[None, :]
    state = tl.load(s_ptrs)
    for t in range(T):
        k = tl.load(Kv + b * stride_qb + t * stride_qt + kh * stride_qh + rk).to(tl.float32)
        q = tl.load(Qv + b * stride_qb + t * stride_qt + kh * stride_qh + rk).to(tl.float32)
        v = tl.load(Vv + b * stride_vb + t * stride_vt + h * stride_vh + rv).to(tl.float32)
        g = tl.load(G + b * stride_gb + t * stride_gt + h)
        beta = tl.load(Beta + b * stride_gb + t * stride_gt + h)
        state = state * g
        if DELTA:
            pred = tl.sum(state * k[:, None], 0)  # S^T k : [BLOCK_V]
            state = state + k[:, None] * (beta * (v - pred))[None, :]
        else:
            state = state + (beta * k)[:, None] * v[None, :]
        o = tl.sum(state * q[:, None], 0)
        tl.store(O + b * stride_ob + t * stride_ot + h * stride_oh + rv, o.to(O.dtype.element_ty))
        if SAVE_ALL:
            tl.store(Inter + b * stride_ib + t * stride_it + h * stride_sh + rk[:, None] * DV + rv[None, :], state)
    tl.store(s_ptrs, state)


def linear_state_update(
    state: torch.Tensor,  # [B, H, DK, DV] fp32, updated in place
    q: torch.Tensor,  # [B, T, Hk, DK]
    k: torch.Tensor,  # [B, T, Hk, DK]
    v: torch.Tensor,  # [B, T, H, DV]
    g: torch.Tensor,  # [B, T, H] fp32 decay in (0, 1]
    beta: torch.Tensor,  # [B, T, H] fp32
    delta_rule: bool = True,
    save_intermediate: torch.Tensor | None = None,  # [B, T, H, DK, DV] fp32
    block_v: int = 32,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    if state.dtype != torch.float32 or not state.is_contiguous() or state.dim() != 4:
        raise ValueError("state must be a contiguous fp32 [B, H, DK, DV] tensor")
    bsz, h, dk, dv = state.shape
    if q.shape != k.shape or q.dim() != 4 or q.shape[0] != bsz or q.shape[3] != dk:
        raise ValueError("q and k must be [B, T, Hk, DK] matching the state")
    t_len, hk = q.shape[1], q.shape[2]
    if h % hk:
        raise ValueError("state heads must be a multiple of key heads")
    if v.shape != (bsz, t_len, h, dv) or g.shape != (bsz, t_len, h) or beta.shape != g.shape:
        raise ValueError("v must be [B, T, H, DV]; g and beta [B, T, H]")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension")
    if g.dtype != torch.float32 or beta.dtype != torch.float32 or not g.is_contiguous() or not beta.is_contiguous():
        raise ValueError("g and beta must be contiguous fp32")
    block_v = min(block_v, dv)
    if dk & (dk - 1) or dv % block_v or block_v & (block_v - 1):
        raise ValueError("DK must be a power of two and DV a multiple of the (power-of-two) block_v")
    if q.stride(0) != k.stride(0) or q.stride(1) != k.stride(1) or q.stride(2) != k.stride(2):
        raise ValueError("q and k must share strides")
    if out is None:
        out = torch.empty((bsz, t_len, h, dv), dtype=v.dtype, device=v.device)
    inter = save_intermediate if save_intermediate is not None else state
    if save_intermediate is not None and save_intermediate.shape != (bsz, t_len, h, dk, dv):
        raise ValueError("save_intermediate must be [B, T, H, DK, DV]")
    _state_kernel[(bsz, h, dv // block_v)](
        state, q, k, v, g, beta, out, inter,
        t_len, h, h // hk,
        state.stride(0), state.stride(1), q.stride(0), q.stride(1), q.stride(2), v.stride(0), v.stride(1), v.stride(2),
        g.stride(0), g.stride(1), out.stride(0), out.stride(1), out.stride(2),
        inter.stride(0), inter.stride(1) if save_intermediate is not None else 0,
        DK=dk, DV=dv, BLOCK_V=block_v, DELTA=delta_rule, SAVE_ALL=save_intermediate is not None,
    )
    return out
