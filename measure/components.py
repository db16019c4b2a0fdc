"""Non-attention components at a model row's real shapes, with random weights (bf16).

Each builder returns a `Component`: a list of callables, one per private copy of the weights, so a
timed sequence walks different buffers and L2 does not flatter repeated layers. Bytes and flops
are the analytical work item from `wmtp.latency` for the same shape, so measurements and the
latency model speak of the same quantity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from wmtp.latency import Work, draft_fwd_work, verify_work
from wmtp.measure import MOE_IMPLS
from wmtp.measure.kernels.linear_state import linear_state_update
from wmtp.measure.kernels.moe import moe_experts
from wmtp.specs import ModelSpec

DT = torch.bfloat16
DEVICE = "cuda"  # tests point this at "cpu" to exercise the harness under the Triton interpreter


@dataclass
class Component:
    kind: str
    name: str
    work: Work
    calls: list[Callable[[], object]]
    impl: str = "wmtp"  # the kernels' implementation, the row's `impl`


def _copies(bytes_per_copy: float, l2_bytes: float, cap: int = 64) -> int:
    """Enough copies that one pass over them is at least 3x the L2."""
    return int(max(2, min(cap, math.ceil(3 * l2_bytes / max(bytes_per_copy, 1)))))


def rand_weight(*shape, scale=None):
    """Random bf16 on the device, scaled by 1/sqrt(fan-in) unless `scale` is given (never zeros)."""
    t = torch.randn(*shape, device=DEVICE, dtype=DT)
    return t * (scale if scale is not None else 1.0 / math.sqrt(shape[-1] if len(shape) > 1 else 1))


def _act(h: torch.Tensor, act: str, ffn: int) -> torch.Tensor:
    if act == "swiglu":
        return F.silu(h[:, :ffn]) * h[:, ffn:]
    return torch.relu(h).square()


def _pick(items: list[Work], kind: str, name_part: str = "") -> Work:
    for w in items:
        if w.kind == kind and name_part in w.name:
            return w
    raise KeyError(f"no {kind} work item {name_part!r}")


def moe_component(spec: ModelSpec, tokens: int, l2: float, prefix: str, copies: int | None = None,
                  impl: str = "wmtp") -> Component:
    """Router, top-k, routed experts (wmtp's grouped kernel, or SGLang's fused MoE with `impl="sglang"`), shared
    expert and latent projections: the same calls and work item for both, only the routed experts differ."""
    if impl not in MOE_IMPLS:
        raise ValueError(f"unknown MoE implementation {impl!r}; known: {', '.join(MOE_IMPLS)}")
    experts = _sglang_experts() if impl == "sglang" else moe_experts
    s = spec.with_dtypes(weight_dtype="bf16")
    width = s.moe_latent or s.hidden
    n_up = (2 if s.ffn_act == "swiglu" else 1) * s.expert_ffn
    per_copy = s.expert_params * s.n_experts * 2
    copies = copies or _copies(per_copy, l2, cap=2)
    x = rand_weight(tokens, s.hidden, scale=1.0)
    calls = []
    for _ in range(copies):
        router = rand_weight(s.n_experts, s.hidden)
        if impl == "sglang":  # SGLang's layout: w13 [E, 2F or F, K], w2 [E, K_out, F]
            w_up, w_down = rand_weight(s.n_experts, n_up, width), rand_weight(s.n_experts, width, s.expert_ffn)
        else:
            w_up, w_down = rand_weight(s.n_experts, width, n_up), rand_weight(s.n_experts, s.expert_ffn, width)
        sh_up = rand_weight((2 if s.ffn_act == "swiglu" else 1) * s.shared_ffn * s.n_shared, s.hidden) if s.n_shared else None
        sh_down = rand_weight(s.hidden, s.shared_ffn * s.n_shared) if s.n_shared else None
        lat = (rand_weight(s.moe_latent, s.hidden), rand_weight(s.hidden, s.moe_latent)) if s.moe_latent else None

        def call(router=router, w_up=w_up, w_down=w_down, sh_up=sh_up, sh_down=sh_down, lat=lat):
            logits = F.linear(x, router)
            wts, ids = torch.topk(logits, s.top_k, dim=-1)
            wts = torch.softmax(wts.float(), dim=-1)
            h = F.linear(x, lat[0]) if lat else x
            y = experts(h, w_up, w_down, ids, wts, s.ffn_act)
            if lat:
                y = F.linear(y, lat[1])
            if sh_up is not None:
                y = y + F.linear(_act(F.linear(x, sh_up), s.ffn_act, s.shared_ffn * s.n_shared), sh_down)
            return y

        calls.append(call)
    items = verify_work(s, 1, 1, tokens) if prefix == "verify" else draft_fwd_work(s, 1, tokens)
    work = _pick(items, "moe")
    return Component("moe", f"{prefix}.moe", work, calls, impl)


def _sglang_experts():
    """SGLang's fused experts (`measure/backends/sglang_moe`), loaded now so a missing copy fails before weights."""
    from wmtp.measure.backends import sglang_moe

    sglang_moe.load()
    return sglang_moe.fused_experts


def dense_ffn_component(spec: ModelSpec, tokens: int, l2: float, copies: int | None = None) -> Component:
    s = spec.with_dtypes(weight_dtype="bf16")
    n_up = (2 if s.ffn_act == "swiglu" else 1) * s.dense_ffn
    copies = copies or _copies(s.dense_ffn_params * 2, l2)
    x = rand_weight(tokens, s.hidden, scale=1.0)
    calls = []
    for _ in range(copies):
        up, down = rand_weight(n_up, s.hidden), rand_weight(s.hidden, s.dense_ffn)
        calls.append(lambda up=up, down=down: F.linear(_act(F.linear(x, up), s.ffn_act, s.dense_ffn), down))
    work = _pick(verify_work(s, 1, 1, tokens), "gemm", "ffn")
    return Component("gemm", "verify.ffn", work, calls)


def gemm_component(spec: ModelSpec, tokens: int, l2: float, which: str, copies: int | None = None) -> Component:
    """Projections: 'attn' (fused qkv + o), 'linear' (in + out projections), 'mtp' (eh + attention)."""
    s = spec.with_dtypes(weight_dtype="bf16")
    hd = s.head_dim
    q_out = s.q_heads * hd * (2 if s.attn_out_gate else 1)
    attn_shapes = [(q_out + 2 * s.kv_heads * hd, s.hidden), (s.hidden, s.q_heads * hd)]
    if which == "attn":
        shapes, work = attn_shapes, _pick(verify_work(s, 1, 1, tokens), "gemm", "attn_proj")
    elif which == "linear":
        inner = s.lin_v_heads * s.lin_head_dim
        total_in = s.linear_params // s.hidden - inner  # in-projection width
        shapes, work = [(total_in, s.hidden), (s.hidden, inner)], _pick(verify_work(s, 1, 1, tokens), "gemm", "_proj")
    elif which == "mtp":
        shapes = [(s.hidden, 2 * s.hidden)] + attn_shapes
        work = _pick(draft_fwd_work(s, 1, tokens), "gemm", "mtp_proj")
    else:
        raise ValueError(f"unknown projection set {which!r}")
    if s.attn_kind == "mla" and which != "linear":
        raise ValueError("MLA projections are not measured (no registry model in the sweep uses them)")
    per_copy = sum(o * i for o, i in shapes) * 2
    copies = copies or _copies(per_copy, l2)
    xs = {i: rand_weight(tokens, i, scale=1.0) for _, i in shapes}
    calls = []
    for _ in range(copies):
        ws = [rand_weight(o, i) for o, i in shapes]
        calls.append(lambda ws=ws: [F.linear(xs[w.shape[1]], w) for w in ws])
    return Component("gemm", work.name, work, calls)


def lm_head_component(spec: ModelSpec, tokens: int, l2: float, copies: int | None = None,
                      weight: torch.Tensor | None = None) -> Component:
    """`weight` shares one lm_head between callers (the MTP head reuses the target's)."""
    s = spec.with_dtypes(weight_dtype="bf16")
    copies = copies or 2
    x = rand_weight(tokens, s.hidden, scale=1.0)
    calls = [lambda w=(weight if weight is not None else rand_weight(s.vocab, s.hidden)): F.linear(x, w) for _ in range(copies)]
    work = _pick(verify_work(s, 1, 1, tokens), "lm_head")
    return Component("lm_head", "lm_head", work, calls)


def linear_state_component(spec: ModelSpec, batch: int, d: int, l2: float, copies: int | None = None) -> Component:
    s = spec
    if s.linear_kind == "gdn":
        h, hk, dk, dv, delta = s.lin_v_heads, s.lin_k_heads, s.lin_head_dim, s.lin_head_dim, True
    elif s.linear_kind == "mamba2":
        h, hk, dk, dv, delta = s.lin_v_heads, s.ssm_groups, s.ssm_state, s.lin_head_dim, False
    else:
        raise ValueError(f"{s.key} has no linear-attention layers")
    copies = copies or _copies(batch * h * dk * dv * 4, l2, cap=256)
    q = rand_weight(batch, d, hk, dk, scale=1.0)
    k = F.normalize(rand_weight(batch, d, hk, dk, scale=1.0).float(), dim=-1).to(DT)
    v = rand_weight(batch, d, h, dv, scale=1.0)
    g = torch.rand(batch, d, h, device=DEVICE) * 0.5 + 0.5
    beta = torch.rand(batch, d, h, device=DEVICE)
    calls = []
    for _ in range(copies):  # a speculative verify (d >= 2) keeps every token's state (`latency.state_traffic_states`)
        st = torch.randn(batch, h, dk, dv, device=DEVICE) * 0.01
        inter = torch.empty(batch, d, h, dk, dv, device=DEVICE) if d >= 2 else None
        calls.append(lambda st=st, inter=inter: linear_state_update(st, q, k, v, g, beta, delta,
                                                                    save_intermediate=inter))
    work = _pick(verify_work(s, 1, d, batch), "linear_state")
    return Component("linear_state", work.name, work, calls)
