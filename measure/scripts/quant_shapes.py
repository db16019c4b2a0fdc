"""The real weight shapes the quantized-GEMM benchmark times, from the model registry (nn.Linear layout [N, K])."""

from __future__ import annotations

from wmtp.models import get_model


def dense_shapes(key: str) -> dict[str, tuple[int, int]]:
    """Component -> (N, K) of one projection of the model row (nn.Linear layout, weight [N, K])."""
    s = get_model(key)
    h, hd = s.hidden, s.head_dim
    q_out = s.q_heads * hd * (2 if s.attn_out_gate else 1)
    gated = s.ffn_act == "swiglu"
    out = {"attn_qkv": (q_out + 2 * s.kv_heads * hd, h), "attn_o": (h, s.q_heads * hd)}
    if s.linear_kind == "gdn":  # in_proj_qkvz, in_proj_ba, out_proj
        v = s.lin_v_heads * s.lin_head_dim
        out.update(lin_in=(2 * s.lin_k_heads * s.lin_head_dim + 2 * v, h), lin_ba=(2 * s.lin_v_heads, h), lin_out=(h, v))
    elif s.linear_kind == "mamba2":  # in_proj (z, x, B, C, dt), out_proj
        inner = s.lin_v_heads * s.lin_head_dim
        out.update(lin_in=(2 * inner + 2 * s.ssm_groups * s.ssm_state + s.lin_v_heads, h), lin_out=(h, inner))
    if s.n_shared:
        out.update(shared_up=((2 if gated else 1) * s.shared_ffn, h), shared_down=(h, s.shared_ffn))
    if s.moe_latent:
        out.update(latent_in=(s.moe_latent, h), latent_out=(h, s.moe_latent))
    out["lm_head"] = (s.vocab, h)
    return out


def moe_shapes(key: str) -> dict[str, tuple[int, int]]:
    s = get_model(key)
    width = s.moe_latent or s.hidden
    return {"experts_up": ((2 if s.ffn_act == "swiglu" else 1) * s.expert_ffn, width), "experts_down": (width, s.expert_ffn)}
