"""Round 4's int4 GEMV step (`quant_gemv_int4`: contiguous shared activations; packed bf16x2 dequant and FMAs,
emulated in fp32 under the interpreter) against the fp64 references of test_kernels_quant, for every step name:
awkward sizes, NaN-poisoned outputs, split-K, grouped MoE, one-hot known answers for the nibble order, the
documented error bound of the bf16 partial sums, and large activations (no overflow)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from test_kernels_quant import (DEV, TOL, _routing, check_int4_gemv, make_weight, moe_case, ref_int4_gemm,  # noqa: E402
                                ref_int4_weight, rel)
from wmtp.measure.kernels import quant_gemm as qg  # noqa: E402
from wmtp.measure.kernels.quant_gemm import int4_gemm, quantize_int4_group  # noqa: E402
from wmtp.measure.kernels.quant_gemv_int4 import (MODE_F32, MODE_PACKED, MODE_PACKED_EMU, MODE_PACKED_PF,  # noqa: E402
                                                  MODE_WORDS, int4_mode)

pytestmark = pytest.mark.kernels
STEPS = ("packed", "packed_pf", "f32", "words")
# M = 1, 2, 3, 5, 16 (G = 8 / 4 / 2 / 1 / 1 groups a step); N not a multiple of the 16 / 32 tiles; K = 9 groups + 8
# (past one 1024 step, a last group of one word), 2 groups + 8, 3 groups + 8, 2 groups
SHAPES = [(1, 200, 1160), (2, 70, 264), (3, 130, 392), (5, 33, 1160), (16, 40, 256)]


@pytest.fixture
def step(request, monkeypatch):
    monkeypatch.setattr(qg, "INT4_GEMV_STEP", request.param)
    return request.param


@pytest.mark.parametrize("step", STEPS, indirect=True)
@pytest.mark.parametrize("split_k", [None, 2])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_int4_gemv_steps_match_reference(step, m, n, k, split_k):
    check_int4_gemv(m, n, k, split_k, 7000 * m + n + k)


@pytest.mark.parametrize("step", ["packed", "f32"], indirect=True)
def test_int4_gemv_one_hot_picks_each_nibble(step):
    """x = unit row k: output n is exactly w[n, k] = (code - 8) * scale (bf16-exact here), for k across all 8
    nibble positions of two words and a second group: a swapped nibble or pair order gives another code."""
    gen = torch.Generator().manual_seed(11)
    n, k = 24, 256
    packed = torch.randint(0, 256, (n, k // 2), generator=gen, dtype=torch.uint8)
    s = torch.tensor([0.5, 2.0], dtype=torch.bfloat16).repeat(n, 1)
    w_ref = ref_int4_weight(packed, s)
    cols = list(range(16)) + [128 + 3, 128 + 12]
    x = torch.zeros(len(cols), k, dtype=torch.bfloat16)
    x[torch.arange(len(cols)), cols] = 1.0
    for i, col in enumerate(cols):  # one row at a time (M = 1) and all rows at once (M = 16)
        out = int4_gemm(x[i:i + 1].to(DEV), packed.to(DEV), s.to(DEV), path="gemv")
        assert torch.equal(out.double().cpu()[0], w_ref[:, col])
    out = int4_gemm(x[:16].to(DEV), packed.to(DEV), s.to(DEV), path="gemv")
    assert torch.equal(out.double().cpu(), w_ref[:, cols[:16]].T)


@pytest.mark.parametrize("step", ["packed", "quad"], indirect=True)
def test_packed_error_within_documented_bound(step):
    """|out - ref| <= 7 * 2^-9 * sum_k |w[n, k] x[k]| (at most 7 bf16 roundings per word partial, module docstring;
    7.01: the interpreter's fp32-then-bf16 double rounding) + 2^-8 |ref| (bf16 output rounding, 2^-9, with slack),
    elementwise. The quad kernel (round 6) does the same arithmetic per word."""
    gen = torch.Generator().manual_seed(12)
    m, n, k = 3, 64, 2048
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    packed, s = quantize_int4_group(make_weight(gen, n, k))
    w_ref = ref_int4_weight(packed, s)
    ref = x.double() @ w_ref.T
    out = int4_gemm(x.to(DEV), packed.to(DEV), s.to(DEV), path="gemv").double().cpu()
    bound = 7.01 * 2.0 ** -9 * (x.double().abs() @ w_ref.abs().T) + 2.0 ** -8 * ref.abs()
    assert ((out - ref).abs() <= bound).all()


@pytest.mark.parametrize("step", ["packed", "f32"], indirect=True)
def test_int4_gemv_large_activations_do_not_overflow(step):
    """|x| up to 3e4 (x * 8 past fp16's 65504): bf16 partials keep fp32's range; relative error as for unit x."""
    gen = torch.Generator().manual_seed(13)
    x = (torch.randn(2, 512, generator=gen) * 3e4).to(torch.bfloat16)
    x[:, 7] = 3e4
    packed, s = quantize_int4_group(make_weight(gen, 32, 512))
    out = int4_gemm(x.to(DEV), packed.to(DEV), s.to(DEV), path="gemv")
    assert torch.isfinite(out).all()
    assert rel(out, ref_int4_gemm(x, packed, s)) < TOL


@pytest.mark.parametrize("step", ["packed", "packed_pf"], indirect=True)
@pytest.mark.parametrize("tokens, experts, top_k, a_is_pairs", [(1, 16, 4, False), (5, 8, 2, True), (9, 4, 2, False)])
def test_int4_moe_gemv_steps(step, tokens, experts, top_k, a_is_pairs):
    gen = torch.Generator().manual_seed(8000 * tokens + experts)
    k_in, n = 392, 40
    ids, wts = _routing(gen, tokens, experts, top_k)
    x = torch.randn(tokens * top_k if a_is_pairs else tokens, k_in, generator=gen).to(torch.bfloat16)
    wq, ws, ref, launch = moe_case("int4", x, make_weight(gen, experts, n, k_in), ids, wts, a_is_pairs)
    out = torch.full((tokens * top_k, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    launch(x.to(DEV), wq.to(DEV), ws.to(DEV), ids.to(DEV), wts.to(DEV), a_is_pairs=a_is_pairs, out=out, path="gemv")
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL


def test_int4_mode_names():
    assert int4_mode("packed", torch.bfloat16, False) == MODE_PACKED
    assert int4_mode("packed_pf", torch.bfloat16, False) == MODE_PACKED_PF
    assert int4_mode("packed", torch.bfloat16, True) == MODE_PACKED_EMU
    assert int4_mode("packed", torch.float16, False) == MODE_F32  # fp16 activations: no bf16 pairs
    assert int4_mode("f32", torch.bfloat16, False) == MODE_F32
    assert int4_mode("words", torch.bfloat16, False) == MODE_WORDS
    with pytest.raises(ValueError, match="int4 GEMV step must be"):
        int4_mode("fast", torch.bfloat16, False)
