"""MoE grouped GEMM and linear-attention state update against fp64 references."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernel_refs import ref_linear_state, ref_moe  # noqa: E402
from wmtp.measure.kernels.linear_state import linear_state_update  # noqa: E402
from wmtp.measure.kernels.moe import moe_experts, route_pairs  # noqa: E402

pytestmark = pytest.mark.kernels
DEV = "cuda" if torch.cuda.is_available() else "cpu"
TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-5}


def rel(out, ref):
    return float((out.double().cpu() - ref).norm() / ref.norm())


def test_reference_moe_known_answer():
    # One expert whose up/gate are identity-like and down is identity: relu^2 of x, scaled by weight.
    x = torch.tensor([[1.0, -2.0]])
    w_up = torch.eye(2).reshape(1, 2, 2)
    w_down = torch.eye(2).reshape(1, 2, 2)
    out = ref_moe(x, w_up, w_down, torch.tensor([[0]]), torch.tensor([[0.5]]), act="relu2")
    assert out.tolist() == [[0.5, 0.0]]


def test_route_pairs_groups_by_expert():
    ids = torch.tensor([[3, 1], [1, 0], [3, 3]])
    order, counts, starts, cum = route_pairs(ids, 5, block_m=2)
    assert counts.tolist() == [1, 2, 0, 3, 0]
    assert starts.tolist() == [0, 1, 3, 3, 6]
    assert cum.tolist() == [0, 1, 2, 2, 4, 4]
    flat = ids.reshape(-1)
    assert flat[order.long()].tolist() == sorted(flat.tolist())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("tokens, experts, top_k, act", [(1, 8, 2, "swiglu"), (7, 16, 4, "swiglu"),
                                                          (20, 6, 3, "relu2"), (33, 64, 8, "swiglu")])
def test_moe_matches_reference(dtype, tokens, experts, top_k, act):
    gen = torch.Generator().manual_seed(tokens * 100 + experts)
    k_in, ffn, k_out = 64, 48, 80  # awkward N (48, 80) exercise column masks
    x = torch.randn(tokens, k_in, generator=gen).to(dtype)
    n_up = 2 * ffn if act == "swiglu" else ffn
    w_up = (torch.randn(experts, k_in, n_up, generator=gen) / 8).to(dtype)
    w_down = (torch.randn(experts, ffn, k_out, generator=gen) / 8).to(dtype)
    ids = torch.stack([torch.randperm(experts, generator=gen)[:top_k] for _ in range(tokens)])
    wts = torch.softmax(torch.randn(tokens, top_k, generator=gen), -1)
    ref = ref_moe(x, w_up, w_down, ids, wts, act)
    assert ref.abs().max() > 1e-3
    out = moe_experts(x.to(DEV), w_up.to(DEV), w_down.to(DEV), ids.to(DEV), wts.to(DEV), act,
                      block_m=16, block_n=32, block_k=32)
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL[dtype]


def test_moe_errors():
    x = torch.zeros(2, 8, device=DEV)
    with pytest.raises(ValueError, match="activation"):
        moe_experts(x, torch.zeros(2, 8, 8, device=DEV), torch.zeros(2, 4, 8, device=DEV),
                    torch.zeros(2, 1, dtype=torch.long, device=DEV), torch.ones(2, 1, device=DEV), act="gelu")
    with pytest.raises(ValueError, match="shapes"):
        moe_experts(x, torch.zeros(2, 8, 8, device=DEV), torch.zeros(2, 5, 8, device=DEV),
                    torch.zeros(2, 1, dtype=torch.long, device=DEV), torch.ones(2, 1, device=DEV))


@pytest.mark.parametrize("delta_rule", [True, False])
@pytest.mark.parametrize("bsz, t_len, h, hk, dk, dv", [(1, 1, 2, 2, 16, 32), (2, 7, 4, 2, 32, 64), (1, 3, 8, 1, 64, 32)])
def test_linear_state_matches_recurrence(delta_rule, bsz, t_len, h, hk, dk, dv):
    gen = torch.Generator().manual_seed(t_len * 10 + h)
    state = torch.randn(bsz, h, dk, dv, generator=gen)
    q = torch.randn(bsz, t_len, hk, dk, generator=gen).to(torch.bfloat16)
    k = torch.nn.functional.normalize(torch.randn(bsz, t_len, hk, dk, generator=gen), dim=-1).to(torch.bfloat16)
    v = torch.randn(bsz, t_len, h, dv, generator=gen).to(torch.bfloat16)
    g = torch.rand(bsz, t_len, h, generator=gen) * 0.5 + 0.5
    beta = torch.rand(bsz, t_len, h, generator=gen)
    out_ref, s_ref, all_ref = ref_linear_state(state, q, k, v, g, beta, delta_rule)
    st = state.clone().to(DEV)
    inter = torch.full((bsz, t_len, h, dk, dv), float("nan"), device=DEV)
    out = linear_state_update(st, q.to(DEV), k.to(DEV), v.to(DEV), g.to(DEV), beta.to(DEV), delta_rule,
                              save_intermediate=inter, block_v=min(32, dv))
    assert rel(st, s_ref) < 1e-5
    assert rel(inter, all_ref) < 1e-5
    assert rel(out.float(), out_ref) < 1e-2  # output stored in bf16


def test_linear_state_known_answer_decay_only():
    # beta = 0: the state only decays by g each token; output is S^T q.
    st = torch.ones(1, 1, 16, 32, device=DEV)
    z = torch.zeros(1, 2, 1, 16, dtype=torch.bfloat16, device=DEV)
    v = torch.zeros(1, 2, 1, 32, dtype=torch.bfloat16, device=DEV)
    g = torch.full((1, 2, 1), 0.5, device=DEV)
    linear_state_update(st, z, z, v, g, torch.zeros_like(g))
    assert torch.allclose(st.cpu(), torch.full((1, 1, 16, 32), 0.25))


def test_linear_state_errors():
    st = torch.zeros(1, 2, 16, 32, device=DEV)
    q = torch.zeros(1, 1, 2, 16, dtype=torch.bfloat16, device=DEV)
    v = torch.zeros(1, 1, 2, 32, dtype=torch.bfloat16, device=DEV)
    g = torch.ones(1, 1, 2, device=DEV)
    with pytest.raises(ValueError, match="fp32"):
        linear_state_update(st.half(), q, q, v, g, g)
    with pytest.raises(ValueError, match="v must be"):
        linear_state_update(st, q, q, v[:, :, :1], g, g)
