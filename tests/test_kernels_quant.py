"""Quantized-weight GEMMs (FP8 block W8A8, int4 group W4A16; dense and grouped MoE) against fp64 references."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from wmtp.measure.kernels.quant_gemm import (  # noqa: E402
    dequantize_fp8_block, dequantize_int4_group, fp8_gemm, fp8_moe_gemm, int4_gemm, int4_moe_gemm,
    quantize_act_fp8, quantize_fp8_block, quantize_int4_group, weight_bytes,
)

pytestmark = pytest.mark.kernels
DEV = "cuda" if torch.cuda.is_available() else "cpu"
FP8 = torch.float8_e4m3fn
TOL = 1e-2  # bf16 output rounding (2^-9 relative) plus fp32 accumulation order; a wrong block is O(1)


# ---------------------------------------------------------------------------------------------
# references (fp64), written independently of the module's dequantize helpers


def ref_act_quant(x):
    """Per-token groups of 128 along K: s = max(|x|, 1e-10) / 448, q = e4m3(x / s). Returns (q as fp64, s [M, G])."""
    m, k = x.shape
    xf = x.float()
    idx = torch.arange(k) // 128
    s = torch.stack([xf[:, idx == g].abs().amax(1) for g in range(int(idx.max()) + 1)], 1).clamp_min(1e-10) / 448.0
    q = (xf / s[:, idx]).clamp(-448, 448).to(FP8)
    return q.double(), s.double()


def ref_fp8_weight(wq, ws):
    n, k = wq.shape
    return wq.double() * ws.double()[torch.arange(n)[:, None] // 128, torch.arange(k)[None, :] // 128]


def ref_int4_weight(packed, s):
    p = packed.long()
    n, kh = p.shape
    codes = torch.empty(n, 2 * kh, dtype=torch.long)
    codes[:, 0::2] = p % 16
    codes[:, 1::2] = p // 16
    return (codes - 8).double() * s.double()[:, torch.arange(2 * kh) // 128]


def ref_fp8_gemm(x, wq, ws):
    q, s = ref_act_quant(x)
    return (q * s[:, torch.arange(x.shape[1]) // 128]) @ ref_fp8_weight(wq, ws).T


def ref_int4_gemm(x, packed, s):
    return x.double() @ ref_int4_weight(packed, s).T


def ref_moe_gemm(x, w_deq, ids, wts, a_is_pairs):
    """Row t*k + j: x[t] (or x[t*k + j]) @ w_deq[ids[t, j]]^T, times wts[t, j] when given."""
    t_len, top_k = ids.shape
    xd = x.double()
    rows = []
    for t in range(t_len):
        for j in range(top_k):
            r = xd[t * top_k + j] if a_is_pairs else xd[t]
            y = r @ w_deq[int(ids[t, j])].T
            rows.append(y * float(wts[t, j]) if wts is not None else y)
    return torch.stack(rows)


def rel(out, ref):
    return float((out.double().cpu() - ref).norm() / ref.norm())


def make_weight(gen, *shape):
    return torch.randn(*shape, generator=gen) / shape[-1] ** 0.5


def fp8_case(m, n, k, seed):
    """bf16 activations [m, k], a block-quantized fp8 weight [n, k] with its scales, and the fp64 reference."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    wq, ws = quantize_fp8_block(make_weight(gen, n, k))
    return x, wq, ws, ref_fp8_gemm(x, wq, ws)


def check_int4_gemv(m, n, k, split_k, seed):
    """The GEMV path of int4_gemm (whichever step `quant_gemm.INT4_GEMV_STEP` names) against the fp64 reference."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    packed, s = quantize_int4_group(make_weight(gen, n, k))
    ref = ref_int4_gemm(x, packed, s)
    assert ref.abs().max() > 1e-2
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    int4_gemm(x.to(DEV), packed.to(DEV), s.to(DEV), split_k=split_k, out=out, path="gemv")
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL


# ---------------------------------------------------------------------------------------------
# references and formats on known answers


def test_ref_fp8_gemm_known_answer():
    # group amax 2 -> s = 2/448, codes 224 and 448 (exact in e4m3); W = [[1, 1], [0.5, -2]] * 2.
    x = torch.tensor([[1.0, 2.0]])
    wq = torch.tensor([[1.0, 1.0], [0.5, -2.0]]).to(FP8)
    out = ref_fp8_gemm(x, wq, torch.tensor([[2.0]]))
    assert torch.allclose(out, torch.tensor([[6.0, -7.0]], dtype=torch.float64))


def test_ref_int4_gemm_known_answer():
    # byte 0x69: element 0 code 9 (+1), element 1 code 6 (-2); scale 0.5 -> W = [0.5, -1].
    out = ref_int4_gemm(torch.tensor([[2.0, 3.0]]), torch.tensor([[0x69]], dtype=torch.uint8), torch.tensor([[0.5]]))
    assert out.tolist() == [[-2.0]]


def test_ref_moe_known_answer():
    w = torch.stack([torch.eye(2), 2 * torch.eye(2)]).double()
    out = ref_moe_gemm(torch.tensor([[1.0, -1.0]]), w, torch.tensor([[1, 0]]), torch.tensor([[0.5, 0.25]]), False)
    assert out.tolist() == [[1.0, -1.0], [0.25, -0.25]]


def test_quantize_int4_known_answer_and_packing():
    w = torch.tensor([[7.0, -7.0, 3.0, 0.0]])  # amax 7 -> scale 1, codes 15, 1, 11, 8
    packed, s = quantize_int4_group(w)
    assert s.tolist() == [[1.0]]
    assert packed.tolist() == [[15 | (1 << 4), 11 | (8 << 4)]]
    assert torch.equal(dequantize_int4_group(packed, s), w)


def test_quantize_fp8_block_round_trip():
    gen = torch.Generator().manual_seed(1)
    w = make_weight(gen, 3, 200, 300)  # batched (experts), ragged blocks in N and K
    q, s = quantize_fp8_block(w)
    assert q.dtype == FP8 and s.shape == (3, 2, 3)
    assert torch.allclose(dequantize_fp8_block(q[1], s[1]).double(), ref_fp8_weight(q[1], s[1]), rtol=1e-6, atol=0)
    err = (dequantize_fp8_block(q, s) - w).abs()
    assert float(err.max()) <= float(s.max()) * 448 / 16  # e4m3: half a step of 2^-3 relative
    assert rel(dequantize_fp8_block(q, s), w.double()) < 0.05


def test_quantize_int4_group_round_trip():
    gen = torch.Generator().manual_seed(2)
    w = make_weight(gen, 2, 70, 260)
    packed, s = quantize_int4_group(w)
    assert packed.shape == (2, 70, 130) and s.shape == (2, 70, 3) and s.dtype == torch.bfloat16
    deq = dequantize_int4_group(packed, s)
    assert torch.equal(deq[0].double(), ref_int4_weight(packed[0], s[0]))
    step = s.float().repeat_interleave(128, -1)[..., :260]
    assert bool(((deq - w).abs() <= 0.5 * step * 1.02).all())  # bf16-rounded scale: slack 1 %


def test_weight_bytes():
    assert weight_bytes("fp8_block", 256, 300) == 256 * 300 + 4 * 2 * 3
    assert weight_bytes("int4_group", 10, 256, experts=3) == 3 * (10 * 128 + 2 * 10 * 2)
    assert weight_bytes("bf16", 4, 8) == 64
    with pytest.raises(ValueError, match="unknown weight format"):
        weight_bytes("nvfp4", 1, 1)


# ---------------------------------------------------------------------------------------------
# kernels against the references


@pytest.mark.parametrize("m, k", [(1, 128), (3, 300), (17, 1000)])
def test_act_quant_matches_reference(m, k):
    gen = torch.Generator().manual_seed(m + k)
    x = (torch.randn(m, k, generator=gen) * torch.logspace(-3, 2, k)).to(torch.bfloat16)
    q, s = quantize_act_fp8(x.to(DEV))
    q_ref, s_ref = ref_act_quant(x)
    assert torch.allclose(s.double().cpu(), s_ref, rtol=1e-6, atol=0)
    assert torch.equal(q.double().cpu(), q_ref)


DENSE_SHAPES = [(1, 200, 384), (3, 64, 300), (17, 130, 384), (3, 16, 1030), (130, 40, 384)]  # ragged N / K, K = 8 blocks + 6;
# M = 130: two 128-row tiles


@pytest.mark.parametrize("split_k", [None, 1, 3])
@pytest.mark.parametrize("m, n, k", DENSE_SHAPES)
def test_fp8_gemm_matches_reference(m, n, k, split_k):
    x, wq, ws, ref = fp8_case(m, n, k, 1000 * m + n + k)
    assert ref.abs().max() > 1e-2
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    fp8_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV), split_k=split_k, out=out)
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL


def test_fp8_gemm_prequantized_matches_fused():
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(5, 384, generator=gen).to(torch.bfloat16).to(DEV)
    wq, ws = (t.to(DEV) for t in quantize_fp8_block(make_weight(gen, 96, 384)))
    xq, xs = quantize_act_fp8(x)
    fused = fp8_gemm(x, wq, ws, fuse_act_quant=True)  # activations quantized inside the GEMM
    assert torch.equal(fp8_gemm(xq, wq, ws, x_scale=xs), fp8_gemm(x, wq, ws))
    assert torch.equal(fused, fp8_gemm(x, wq, ws))
    ids = torch.tensor([[0, 1], [1, 0], [1, 1], [0, 0], [1, 0]], device=DEV)
    w2, s2 = (torch.stack([t, t.flip(0)]) for t in (wq, ws))
    assert torch.equal(fp8_moe_gemm(x, w2, s2, ids, fuse_act_quant=True), fp8_moe_gemm(x, w2, s2, ids))


@pytest.mark.parametrize("split_k", [None, 1, 3])
@pytest.mark.parametrize("m, n, k", DENSE_SHAPES)
def test_int4_gemm_matches_reference(m, n, k, split_k):
    gen = torch.Generator().manual_seed(2000 * m + n + k)
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    packed, s = quantize_int4_group(make_weight(gen, n, k))
    ref = ref_int4_gemm(x, packed, s)
    assert ref.abs().max() > 1e-2
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    int4_gemm(x.to(DEV), packed.to(DEV), s.to(DEV), split_k=split_k, out=out)
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL


def test_int4_gemm_fp32_scales_and_fp16():
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(2, 256, generator=gen).to(torch.float16)
    packed, s = quantize_int4_group(make_weight(gen, 48, 256), scale_dtype=torch.float32)
    out = int4_gemm(x.to(DEV), packed.to(DEV), s.to(DEV))
    assert out.dtype == torch.float16
    assert rel(out, ref_int4_gemm(x, packed, s)) < TOL


def moe_case(fmt, x, w, ids, wts, a_is_pairs):
    """Quantized expert weights of `w` [E, N, K] in `fmt`, the fp64-path reference output and the launcher."""
    experts, k_in = w.shape[0], w.shape[2]
    if fmt == "fp8":
        wq, ws = quantize_fp8_block(w)
        w_deq = torch.stack([ref_fp8_weight(wq[e], ws[e]) for e in range(experts)])
        q, s = ref_act_quant(x)
        return wq, ws, ref_moe_gemm(q * s[:, torch.arange(k_in) // 128], w_deq, ids, wts, a_is_pairs), fp8_moe_gemm
    wq, ws = quantize_int4_group(w)
    w_deq = torch.stack([ref_int4_weight(wq[e], ws[e]) for e in range(experts)])
    return wq, ws, ref_moe_gemm(x, w_deq, ids, wts, a_is_pairs), int4_moe_gemm


def _routing(gen, tokens, experts, top_k, all_to=None):
    if all_to is not None:  # expert `all_to` takes every token (first slot), the rest random
        ids = torch.stack([torch.cat([torch.tensor([all_to]), torch.randperm(experts, generator=gen)[:top_k - 1]])
                           if top_k > 1 else torch.tensor([all_to]) for _ in range(tokens)])
        ids[:, 1:] = torch.where(ids[:, 1:] == all_to, (all_to + 1) % experts, ids[:, 1:])
    else:
        ids = torch.stack([torch.randperm(experts, generator=gen)[:top_k] for _ in range(tokens)])
    wts = torch.softmax(torch.randn(tokens, top_k, generator=gen), -1)
    return ids, wts


MOE_CASES = [  # tokens, experts, top_k, expert taking all tokens, per-pair input, routing weights
    (1, 8, 2, None, False, True),
    (3, 16, 2, None, False, False),  # at most 6 of 16 experts used
    (17, 6, 3, None, True, True),
    (33, 8, 1, 5, False, True),  # expert 5 takes all 33 tokens (3 blocks of 16), 7 experts unused
    (20, 4, 2, 0, True, False),
]


@pytest.mark.parametrize("split_k", [None, 2])
@pytest.mark.parametrize("fmt", ["fp8", "int4"])
@pytest.mark.parametrize("tokens, experts, top_k, all_to, a_is_pairs, scale", MOE_CASES)
def test_moe_gemm_matches_reference(fmt, tokens, experts, top_k, all_to, a_is_pairs, scale, split_k):
    gen = torch.Generator().manual_seed(3000 * tokens + 10 * experts + top_k)
    k_in, n = 260, 80  # ragged K (2 blocks + 4) and N
    ids, wts = _routing(gen, tokens, experts, top_k, all_to)
    if all_to is not None:
        assert (ids == all_to).sum(1).tolist() == [1] * tokens
    x = torch.randn(tokens * top_k if a_is_pairs else tokens, k_in, generator=gen).to(torch.bfloat16)
    w = make_weight(gen, experts, n, k_in)
    wq, ws, ref, launch = moe_case(fmt, x, w, ids, wts if scale else None, a_is_pairs)
    assert ref.abs().max() > 1e-2
    out = torch.full((tokens * top_k, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    launch(x.to(DEV), wq.to(DEV), ws.to(DEV), ids.to(DEV), wts.to(DEV) if scale else None,
           a_is_pairs=a_is_pairs, split_k=split_k, out=out)
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL


@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_moe_many_experts_and_pairs(fmt):
    """E = 300 (not a power of two) and 330 pairs (> the router's 256-id chunk): ids int64, random routing."""
    gen = torch.Generator().manual_seed(11)
    tokens, experts, top_k, k_in, n = 110, 300, 3, 256, 48
    ids, wts = _routing(gen, tokens, experts, top_k)
    ids = ids.to(torch.int64)
    x = torch.randn(tokens, k_in, generator=gen).to(torch.bfloat16)
    w = make_weight(gen, experts, n, k_in)
    if fmt == "fp8":
        wq, ws = quantize_fp8_block(w)
        w_deq = torch.stack([ref_fp8_weight(wq[e], ws[e]) for e in range(experts)])
        q, s = ref_act_quant(x)
        ref = ref_moe_gemm(q * s[:, torch.arange(k_in) // 128], w_deq, ids, wts, False)
        launch = fp8_moe_gemm
    else:
        wq, ws = quantize_int4_group(w)
        w_deq = torch.stack([ref_int4_weight(wq[e], ws[e]) for e in range(experts)])
        ref = ref_moe_gemm(x, w_deq, ids, wts, False)
        launch = int4_moe_gemm
    out = torch.full((tokens * top_k, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    launch(x.to(DEV), wq.to(DEV), ws.to(DEV), ids.to(DEV), wts.to(DEV), out=out)
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL


@pytest.mark.parametrize("launch", ["fp8", "int4"])
def test_split_k_semaphores_rearm(launch):
    """The in-kernel split-K reduction leaves its semaphores at zero, so a second launch (and one with another
    split) computes the same output; fresh NaN outputs each time."""
    from wmtp.measure.kernels import quant_gemm as qg

    gen = torch.Generator().manual_seed(12)
    x = torch.randn(5, 1024, generator=gen).to(torch.bfloat16).to(DEV)
    w = make_weight(gen, 96, 1024)
    if launch == "fp8":
        wq, ws = (t.to(DEV) for t in quantize_fp8_block(w))
        fn, ref = fp8_gemm, ref_fp8_gemm(x.cpu(), wq.cpu(), ws.cpu())
    else:
        wq, ws = (t.to(DEV) for t in quantize_int4_group(w))
        fn, ref = int4_gemm, ref_int4_gemm(x.cpu(), wq.cpu(), ws.cpu())
    outs = []
    for split in (4, 4, 8, 3):
        out = torch.full((5, 96), float("nan"), dtype=torch.bfloat16, device=DEV)
        fn(x, wq, ws, split_k=split, block_n=32, out=out)
        outs.append(out)
        assert int(qg._COUNTERS[str(x.device)].abs().sum()) == 0
    assert torch.equal(outs[0], outs[1])
    for out in outs:
        assert not torch.isnan(out).any()
        assert rel(out, ref) < TOL


def test_moe_routing_weights_scale_rows():
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(4, 128, generator=gen).to(torch.bfloat16).to(DEV)
    wq, ws = (t.to(DEV) for t in quantize_int4_group(make_weight(gen, 3, 32, 128)))
    ids = torch.tensor([[0, 2], [1, 2], [2, 0], [1, 0]], device=DEV)
    wts = torch.full((4, 2), 0.5, device=DEV)
    plain = int4_moe_gemm(x, wq, ws, ids)
    half = int4_moe_gemm(x, wq, ws, ids, wts)
    assert torch.allclose(half.float(), plain.float() * 0.5, rtol=1e-2, atol=1e-3)


# ---------------------------------------------------------------------------------------------
# error paths


def test_errors():
    x = torch.zeros(2, 256, dtype=torch.bfloat16, device=DEV)
    wq = torch.zeros(64, 256, dtype=FP8, device=DEV)
    ws = torch.ones(1, 2, device=DEV)
    p = torch.zeros(64, 128, dtype=torch.uint8, device=DEV)
    s = torch.ones(64, 2, dtype=torch.bfloat16, device=DEV)
    with pytest.raises(ValueError, match="K must be even"):
        int4_gemm(torch.zeros(2, 255, dtype=torch.bfloat16, device=DEV), p, s)
    with pytest.raises(ValueError, match="K must be even"):
        quantize_int4_group(torch.zeros(4, 7))
    with pytest.raises(ValueError, match="w_scale must be float32"):
        fp8_gemm(x, wq, torch.ones(1, 1, device=DEV))
    with pytest.raises(ValueError, match="w_scale must be bf16/fp16/fp32"):
        int4_gemm(x, p, s[:, :1])
    with pytest.raises(ValueError, match="w must be float8_e4m3fn"):
        fp8_gemm(x, wq.to(torch.bfloat16), ws)
    with pytest.raises(ValueError, match="last dimension must be K"):
        fp8_gemm(x[:, :128], wq, ws)
    with pytest.raises(ValueError, match="block_n must be a power of two"):
        fp8_gemm(x, wq, ws, block_n=48)
    with pytest.raises(ValueError, match="split_k must be in"):
        int4_gemm(x, p, s, split_k=3)
    with pytest.raises(ValueError, match="x_scale"):
        fp8_gemm(x.to(FP8), wq, ws)
    with pytest.raises(ValueError, match="out must be"):
        fp8_gemm(x, wq, ws, out=torch.empty(2, 64, device=DEV))
    ids = torch.zeros(2, 1, dtype=torch.int32, device=DEV)
    we = torch.zeros(2, 64, 128, dtype=torch.uint8, device=DEV)
    se = torch.ones(2, 64, 2, dtype=torch.bfloat16, device=DEV)
    with pytest.raises(ValueError, match="topk_ids must be"):
        int4_moe_gemm(x, we, se, ids.float())
    with pytest.raises(ValueError, match="rows"):
        int4_moe_gemm(x[:1], we, se, ids)
    with pytest.raises(ValueError, match="topk_weights"):
        int4_moe_gemm(x, we, se, ids, torch.ones(2, 1, dtype=torch.float64, device=DEV))


# ---------------------------------------------------------------------------------------------
# wide K steps (block_k = 2 or 4 groups of 128; int4 optionally prefetching one step ahead)

WIDE = [(256, False), (512, False), (256, True), (512, True)]


@pytest.mark.parametrize("block_k, prefetch", WIDE)
@pytest.mark.parametrize("m, n, k, split_k", [(3, 48, 1030, None), (17, 40, 2688, 5), (1, 64, 640, 2)])
def test_wide_k_steps_match_reference(m, n, k, split_k, block_k, prefetch):
    """K = 8 groups + 6, 21 groups (no multiple of 2 or 4) and 5 groups; split_k 5 / 2 end splits inside a step,
    so masked groups sit at the end of K and at split ends."""
    gen = torch.Generator().manual_seed(4000 * m + n + k + block_k)
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    w = make_weight(gen, n, k)
    wq, ws = quantize_fp8_block(w)
    packed, s = quantize_int4_group(w)
    for fn, ops, ref, extra in ((fp8_gemm, (wq, ws), ref_fp8_gemm(x, wq, ws), {}),
                                (int4_gemm, (packed, s), ref_int4_gemm(x, packed, s), {"prefetch": prefetch})):
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
        fn(x.to(DEV), *(t.to(DEV) for t in ops), split_k=split_k, out=out, path="dot", block_k=block_k, **extra)
        assert not torch.isnan(out).any()
        assert rel(out, ref) < TOL


@pytest.mark.parametrize("block_k, prefetch", WIDE)
def test_wide_k_steps_moe(block_k, prefetch):
    gen = torch.Generator().manual_seed(17 + block_k)
    tokens, experts, top_k, k_in, n = 5, 6, 2, 300, 40  # K = 2 groups + 44
    ids, wts = _routing(gen, tokens, experts, top_k)
    x = torch.randn(tokens, k_in, generator=gen).to(torch.bfloat16)
    w = make_weight(gen, experts, n, k_in)
    wq, ws = quantize_fp8_block(w)
    pq, ps = quantize_int4_group(w)
    q, sa = ref_act_quant(x)
    fp8_ref = ref_moe_gemm(q * sa[:, torch.arange(k_in) // 128],
                           torch.stack([ref_fp8_weight(wq[e], ws[e]) for e in range(experts)]), ids, wts, False)
    int4_ref = ref_moe_gemm(x, torch.stack([ref_int4_weight(pq[e], ps[e]) for e in range(experts)]), ids, wts, False)
    for fn, ops, ref, extra in ((fp8_moe_gemm, (wq, ws), fp8_ref, {}),
                                (int4_moe_gemm, (pq, ps), int4_ref, {"prefetch": prefetch})):
        for split_k in (None, 2):
            out = fn(x.to(DEV), *(t.to(DEV) for t in ops), ids.to(DEV), wts.to(DEV), split_k=split_k, path="dot",
                     block_k=block_k, **extra)
            assert rel(out, ref) < TOL


def test_wide_k_split_plan_and_errors():
    from wmtp.measure.kernels import quant_gemm as qg

    dev = torch.device("cpu")
    for groups in (1, 5, 21, 64):
        for g_step in (1, 2, 4):
            split, per = qg._split_plan(1, 1, groups, 1, 64, 1 << 30, dev, None, g_step)
            assert per % g_step == 0 and (split - 1) * per < groups <= split * per  # whole steps, no empty split
    assert qg._split_plan(1, 1, 21, 1, 64, 1 << 30, dev, 5, 4) == (5, 5)  # explicit: 128-groups, not steps
    assert qg._dot_config("fp8_block", 16, 128, 512, None, 4) == (512, False, 4)  # 3 x 72 KiB buffers fit
    assert qg._dot_config("fp8_block", 64, 128, 512, None, 4)[2] == 2  # wgmma stages all 4: 96 KiB each
    assert qg._dot_config("fp8_block", 16, 64, 256, True, 4)[1] is False  # prefetch is int4 only
    x = torch.zeros(2, 256, dtype=torch.bfloat16, device=DEV)
    with pytest.raises(ValueError, match="block_k must be 128, 256 or 512"):
        int4_gemm(x, torch.zeros(8, 128, dtype=torch.uint8, device=DEV),
                  torch.ones(8, 2, dtype=torch.bfloat16, device=DEV), block_k=384, path="dot")
