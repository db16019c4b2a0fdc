"""Round 7's decode MoE kernels (`quant_moe`: one launch over token-expert pairs, GEMV or swap-AB, per pair or per
chunk of one expert's pairs) against the fp64 references of test_kernels_quant (written independently of the module),
hand-computed known answers, repeated experts, split-K, the dispatch from `quant_gemm` and the errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from test_kernels_quant import DEV, TOL, _routing, make_weight, moe_case, rel  # noqa: E402
from wmtp.measure.kernels import quant_gemm as qg  # noqa: E402
from wmtp.measure.kernels import quant_moe as qm  # noqa: E402
from wmtp.measure.kernels.quant_formats import quantize_act_fp8, quantize_fp8_block  # noqa: E402

pytestmark = pytest.mark.kernels

MODES = list(qm.MOE_MODES)
_COUNT = {}


def counters(n):
    """Zeroed split-K semaphores (the launch re-arms them)."""
    buf = _COUNT.get(DEV)
    if buf is None or buf.numel() < n:
        buf = _COUNT[DEV] = torch.zeros(max(n, 4096), dtype=torch.int32, device=DEV)
    return buf


def run(fmt, mode, x, wq, ws, ids, wts, a_is_pairs, n, **kw):
    """launch_moe into a NaN-poisoned output (fp8 swap modes: activations quantized first, as a caller does)."""
    xs = None
    x = x.to(DEV)
    if fmt == "fp8" and qm.MOE_MODES[mode][0]:
        x, xs = quantize_act_fp8(x)
    out = torch.full((ids.numel(), n), float("nan"), dtype=torch.bfloat16, device=DEV)
    qm.launch_moe(x, xs, wq.to(DEV), ws.to(DEV), ids.to(DEV), wts.to(DEV) if wts is not None else None, out,
                  a_is_pairs, mode, 4, counters, **kw)
    return out


# tokens, experts, top_k, expert taking every token, per-pair input, routing weights, N, K, split_k
CASES = [
    (1, 8, 3, None, False, True, 80, 264, None),  # one token: no expert repeats; N not a multiple of 32 / 64
    (5, 4, 2, None, True, False, 40, 136, 2),  # 10 pairs over 4 experts: every expert repeated; K = 128 + 8
    (3, 16, 2, 5, False, True, 130, 392, 3),  # expert 5 takes all 3 tokens; N crosses a 128-row scale block
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", ["fp8", "int4"])
@pytest.mark.parametrize("tokens, experts, top_k, all_to, a_is_pairs, scale, n, k, split_k", CASES)
def test_moe_modes_match_reference(fmt, mode, tokens, experts, top_k, all_to, a_is_pairs, scale, n, k, split_k):
    gen = torch.Generator().manual_seed(4000 * tokens + 10 * experts + top_k)
    ids, wts = _routing(gen, tokens, experts, top_k, all_to)
    x = torch.randn(tokens * top_k if a_is_pairs else tokens, k, generator=gen).to(torch.bfloat16)
    wq, ws, ref, _ = moe_case(fmt, x, make_weight(gen, experts, n, k), ids, wts if scale else None, a_is_pairs)
    assert ref.abs().max() > 1e-2
    out = run(fmt, mode, x, wq, ws, ids, wts if scale else None, a_is_pairs, n, split_k=split_k)
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL


@pytest.mark.parametrize("mode, rows", [("pair", 2), ("pair-g", 2), ("pair-g", 4), ("swap", 2), ("swap-p", 2)])
@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_one_expert_takes_every_token(fmt, mode, rows):
    """20 tokens, top 1, all on expert 2: 20 pairs of one expert = 2 swap chunks (16 + 4) or 10 / 5 GEMV chunks;
    a chunk that lost or doubled a pair fails the reference or leaves NaN."""
    gen = torch.Generator().manual_seed(77)
    tokens, experts, n, k = 20, 4, 48, 256
    ids = torch.full((tokens, 1), 2, dtype=torch.int64)
    wts = torch.rand(tokens, 1, generator=gen)
    x = torch.randn(tokens, k, generator=gen).to(torch.bfloat16)
    wq, ws, ref, _ = moe_case(fmt, x, make_weight(gen, experts, n, k), ids, wts, False)
    out = run(fmt, mode, x, wq, ws, ids, wts, False, n, rows=rows, split_k=2)
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL


def _one_hot_int4(experts, n, k):
    """Codes 9 (= +1) at column n % K of row n, 8 (= 0) elsewhere; scale e + 1 for expert e: w[e] = (e + 1) * onehot."""
    codes = torch.full((experts, n, k), 8, dtype=torch.uint8)
    codes[:, torch.arange(n), torch.arange(n) % k] = 9
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    scales = (torch.arange(experts, dtype=torch.float32) + 1)[:, None, None].expand(experts, n, k // 128)
    return packed.contiguous(), scales.to(torch.bfloat16).contiguous()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_known_answer_by_hand(fmt, mode):
    """y[t*k + j, c] = (ids[t, j] + 1) * x[t, c % K] * wts[t, j]: one-hot weights, expert e scaled by e + 1, small
    power-of-two activations 0, +-1, +-2, +-4 (every 128-group holds a 4, so fp8's x / s = 112 x is exact in e4m3)."""
    experts, n, k = 3, 40, 256
    ids = torch.tensor([[2, 0], [1, 2], [2, 1]])
    wts = torch.tensor([[0.5, 0.25], [1.0, 2.0], [0.125, 4.0]])
    x = torch.tensor([-4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0])[(torch.arange(3 * k) + 5) % 7].reshape(3, k)
    if fmt == "fp8":
        w = torch.zeros(experts, n, k)
        w[:, torch.arange(n), torch.arange(n) % k] = 1.0
        w *= (torch.arange(experts, dtype=torch.float32) + 1)[:, None, None]
        wq, ws = quantize_fp8_block(w)
    else:
        wq, ws = _one_hot_int4(experts, n, k)
    want = torch.stack([(int(ids[t, j]) + 1) * x[t, torch.arange(n) % k] * float(wts[t, j])
                        for t in range(3) for j in range(2)])
    out = run(fmt, mode, x.to(torch.bfloat16), wq, ws, ids, wts, False, n, split_k=2)
    assert torch.allclose(out.float().cpu(), want, rtol=2 ** -8, atol=0)  # bf16 output (8-bit significand)


def test_path_pair_and_auto_dispatch(monkeypatch):
    """path='pair' takes `quant_moe` with MOE_PAIR_MODE; path='auto' only at the tokens of a MOE_PAIR_AUTO range, with
    at least MOE_PAIR_AUTO_MIN_EXPERTS experts and without a named tile; the result equals a direct launch."""
    gen = torch.Generator().manual_seed(5)
    ids, wts = _routing(gen, 2, 8, 2)
    x = torch.randn(2, 256, generator=gen).to(torch.bfloat16)
    wq, ws, ref, _ = moe_case("int4", x, make_weight(gen, 8, 64, 256), ids, None, False)
    calls = []
    real = qm.launch_moe
    monkeypatch.setattr(qm, "launch_moe", lambda *a, **kw: calls.append(a[8]) or real(*a, **kw))
    args = (x.to(DEV), wq.to(DEV), ws.to(DEV), ids.to(DEV))
    pair = qg.int4_moe_gemm(*args, path="pair")
    assert calls == [qm.MOE_PAIR_MODE["int4_group"]] and rel(pair, ref) < TOL
    monkeypatch.setitem(qm.MOE_PAIR_AUTO, "int4_group", ((2, 2, "swap"),))
    qg.int4_moe_gemm(*args)  # 8 experts: below MOE_PAIR_AUTO_MIN_EXPERTS, the earlier paths
    assert calls == ["pair"]
    monkeypatch.setattr(qm, "MOE_PAIR_AUTO_MIN_EXPERTS", 8)
    auto = qg.int4_moe_gemm(*args)
    assert calls == ["pair", "swap"]
    qg.int4_moe_gemm(*args, block_m=16)  # a named tile: the earlier paths
    qg.int4_moe_gemm(x[:1].to(DEV), wq.to(DEV), ws.to(DEV), ids[:1].to(DEV))  # 1 token: not listed
    assert calls == ["pair", "swap"]
    assert torch.equal(auto, run("int4", "swap", x, wq, ws, ids, None, False, 64))
    fq, fs, fref, _ = moe_case("fp8", x, make_weight(gen, 8, 64, 256), ids, None, False)
    monkeypatch.setitem(qm.MOE_PAIR_AUTO, "fp8_block", ((2, 3, "swap"),))
    assert rel(qg.fp8_moe_gemm(x.to(DEV), fq.to(DEV), fs.to(DEV), ids.to(DEV)), fref) < TOL and calls[-1] == "swap"


@pytest.mark.parametrize("mode", MODES)
def test_fp8_in_kernel_quantization_equals_prequantized(mode):
    """bf16 activations quantized in the kernel (GEMV modes always; swap modes in their K loop, as fp8_moe_gemm's
    fuse_act_quant) give the same output bits as `quantize_act_fp8` first: the same fp8 values and scales."""
    gen = torch.Generator().manual_seed(9)
    ids, wts = _routing(gen, 3, 6, 2)
    x = torch.randn(3, 392, generator=gen).to(torch.bfloat16)
    wq, ws, ref, _ = moe_case("fp8", x, make_weight(gen, 6, 72, 392), ids, wts, False)
    xq, xs = quantize_act_fp8(x.to(DEV))
    outs = []
    for a, a_s in ((x.to(DEV), None), (xq, xs)):
        out = torch.full((6, 72), float("nan"), dtype=torch.bfloat16, device=DEV)
        outs.append(qm.launch_moe(a, a_s, wq.to(DEV), ws.to(DEV), ids.to(DEV), wts.to(DEV), out, False, mode, 4,
                                  counters, split_k=2))
    assert torch.equal(outs[0], outs[1]) and rel(outs[0], ref) < TOL
    fused = qg.fp8_moe_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV), ids.to(DEV), wts.to(DEV), fuse_act_quant=True)
    assert torch.equal(fused, qg.fp8_moe_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV), ids.to(DEV), wts.to(DEV)))


def test_plan_fills_the_gpu_and_covers_k():
    """Split-K covers every 128-group exactly once (splits x per >= groups, no empty split), GEMV splits are whole
    steps, and at one token of q35 / q122 / nem the live programs reach the 132 SMs."""
    for pairs, n_exp, n, k in ((8, 256, 1024, 2048), (8, 256, 2048, 512), (8, 256, 2048, 3072), (22, 512, 1024, 2688)):
        for fmt in ("fp8_block", "int4_group"):
            for mode in MODES:
                block_m, block_n, g, split, per = qm.moe_plan(pairs, n_exp, n, k, 132, fmt, mode)
                groups = -(-k // 128)
                assert split * per >= groups and (split - 1) * per < groups
                assert per % g == 0 or per == groups or split == 1
                assert pairs * -(-n // block_n) * split >= 132
                assert block_m == (16 if qm.MOE_MODES[mode][0] else 2 if mode == "pair-g" else 1)


def test_expected_routed():
    """E (1 - (1 - 1/E)^P): one pick routes one expert; P picks of one expert route it; many picks approach E."""
    assert qm.expected_routed(1, 256) == pytest.approx(1.0)
    assert qm.expected_routed(5, 1) == pytest.approx(1.0)
    assert 255 < qm.expected_routed(10000, 256) <= 256


def test_errors():
    gen = torch.Generator().manual_seed(1)
    ids, wts = _routing(gen, 2, 4, 2)
    x = torch.randn(2, 200, generator=gen).to(torch.bfloat16)  # K % 8 == 0 but 200 = 128 + 72
    wq, ws, _, _ = moe_case("int4", x, make_weight(gen, 4, 32, 200), ids, None, False)
    with pytest.raises(ValueError, match="mode must be one of"):
        run("int4", "nope", x, wq, ws, ids, None, False, 32)
    with pytest.raises(ValueError, match="split_k must be in"):
        run("int4", "pair", x, wq, ws, ids, None, False, 32, split_k=3)
    with pytest.raises(ValueError, match="block_n must be"):
        run("int4", "swap", x, wq, ws, ids, None, False, 32, block_n=32)
    with pytest.raises(ValueError, match="rows must be"):
        run("int4", "pair-g", x, wq, ws, ids, None, False, 32, rows=3)
    x12 = torch.randn(2, 12, generator=gen).to(torch.bfloat16)
    w12, s12, _, _ = moe_case("int4", x12, make_weight(gen, 4, 32, 12), ids, None, False)
    with pytest.raises(ValueError, match="multiple of 8"):
        run("int4", "pair", x12, w12, s12, ids, None, False, 32)
    out = torch.empty(4, 32, dtype=torch.bfloat16, device=DEV)
    with pytest.raises(ValueError, match="at most"):
        qm.moe_plan(qm.MOE_GROUP_MAX_PAIRS + 1, 256, 64, 256, 132, "int4_group", "swap")
    with pytest.raises(ValueError, match="out must be"):
        qg.int4_moe_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV), ids.to(DEV), path="pair", out=out[:3])
    fq, fs, _, _ = moe_case("fp8", x, make_weight(gen, 4, 32, 200), ids, None, False)
    with pytest.raises(ValueError, match="x must be bf16, fp16 or fp32"):  # fp8 x without its scales
        qg.fp8_moe_gemm(quantize_act_fp8(x.to(DEV))[0], fq.to(DEV), fs.to(DEV), ids.to(DEV), path="pair")
    with pytest.raises(ValueError, match="topk_ids must be"):
        qg.fp8_moe_gemm(x.to(DEV), fq.to(DEV), fs.to(DEV), ids.float().to(DEV), path="pair")
