"""The GEMV path of the quantized-weight GEMMs (`quant_gemv`, few rows, no tl.dot) against the fp64 references of
test_kernels_quant (written independently of the module), and its dispatch and errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from test_kernels_quant import (DEV, TOL, _routing, check_int4_gemv, fp8_case, make_weight, moe_case,  # noqa: E402
                                ref_fp8_gemm, ref_int4_gemm, rel)
from wmtp.measure.kernels import quant_gemm as qg  # noqa: E402
from wmtp.measure.kernels.quant_gemm import (fp8_gemm, int4_gemm, int4_moe_gemm,  # noqa: E402
                                             quantize_act_fp8, quantize_fp8_block, quantize_int4_group)

pytestmark = pytest.mark.kernels

# M = 1, 3, 8; N not a multiple of the 16 / 32 tiles nor of 128; K = 8 groups + 8 (past one 1024 step, and a
# last group of one int32 word), 2 groups + 8, 3 groups + 8
GEMV_SHAPES = [(1, 200, 1032), (3, 70, 264), (8, 130, 392)]


@pytest.mark.parametrize("split_k", [None, 2])
@pytest.mark.parametrize("m, n, k", GEMV_SHAPES)
def test_int4_gemv_matches_reference(m, n, k, split_k):
    check_int4_gemv(m, n, k, split_k, 4000 * m + n + k)


@pytest.mark.parametrize("split_k", [None, 3])
@pytest.mark.parametrize("m, n, k", GEMV_SHAPES)
def test_fp8_gemv_matches_reference(m, n, k, split_k):
    """W8A8 like the tensor-core path: activations quantized per 1x128 group inside the kernel."""
    x, wq, ws, ref = fp8_case(m, n, k, 5000 * m + n + k)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    fp8_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV), split_k=split_k, out=out, path="gemv")
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL
    xq, xs = quantize_act_fp8(x.to(DEV))  # pre-quantized activations: the same numbers, so the same output
    assert torch.equal(fp8_gemm(xq, wq.to(DEV), ws.to(DEV), x_scale=xs, split_k=split_k, path="gemv"), out)


def test_gemv_fp32_out_and_fp16_scales():
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(2, 512, generator=gen).to(torch.float16)
    packed, s = quantize_int4_group(make_weight(gen, 48, 512), scale_dtype=torch.float16)
    out = int4_gemm(x.to(DEV), packed.to(DEV), s.to(DEV), path="gemv")
    assert out.dtype == torch.float16 and rel(out, ref_int4_gemm(x, packed, s)) < TOL
    wq, ws = quantize_fp8_block(make_weight(gen, 48, 512))
    out = fp8_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV), out_dtype=torch.float32, path="gemv")
    assert out.dtype == torch.float32 and rel(out, ref_fp8_gemm(x, wq, ws)) < 1e-4  # no output rounding


MOE_GEMV_CASES = [  # tokens, experts, top_k, expert taking all tokens, per-pair input, routing weights
    (1, 16, 4, None, False, True),  # M = 1: 4 of 16 experts, one row each
    (5, 8, 2, 3, False, True),  # expert 3 takes all 5 tokens (3 blocks of 2 rows), at most 6 experts used
    (3, 6, 2, None, True, False),  # per-pair input (down projection), repeated experts likely
]


@pytest.mark.parametrize("fmt", ["fp8", "int4"])
@pytest.mark.parametrize("tokens, experts, top_k, all_to, a_is_pairs, scale", MOE_GEMV_CASES)
def test_moe_gemv_matches_reference(fmt, tokens, experts, top_k, all_to, a_is_pairs, scale):
    gen = torch.Generator().manual_seed(6000 * tokens + 10 * experts + top_k)
    k_in, n = 264, 40
    ids, wts = _routing(gen, tokens, experts, top_k, all_to)
    if all_to is not None:
        assert (ids == all_to).sum(1).tolist() == [1] * tokens
    assert ids.unique().numel() < experts  # some experts unused
    x = torch.randn(tokens * top_k if a_is_pairs else tokens, k_in, generator=gen).to(torch.bfloat16)
    w = make_weight(gen, experts, n, k_in)
    wq, ws, ref, launch = moe_case(fmt, x, w, ids, wts if scale else None, a_is_pairs)
    out = torch.full((tokens * top_k, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    launch(x.to(DEV), wq.to(DEV), ws.to(DEV), ids.to(DEV), wts.to(DEV) if scale else None,
           a_is_pairs=a_is_pairs, out=out, path="gemv")
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL


class _Spy:
    """Stands in for a Triton kernel: records that it was launched and launches nothing."""

    def __init__(self, log, name):
        self.log, self.name = log, name

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.log.append(self.name)


def test_auto_dispatch_by_rows(monkeypatch):
    """path='auto': the GEMV kernel up to GEMV_MAX_M rows (dense) / GEMV_MAX_MOE_ROWS mean rows per routed expert,
    fp8 dense the swap-AB kernel over SWAP_AUTO_M rows (int4: INT4_SWAP_AUTO_M, before the GEMV; one row of at most
    INT4_QUAD_AUTO_BYTES the quad-word GEMV), the tensor-core kernel above; int4 with K % 8 != 0 at one row the
    tensor-core kernel."""
    log = []
    monkeypatch.setattr(qg, "quant_gemv_kernel", _Spy(log, "gemv"))
    monkeypatch.setattr(qg, "quant_gemm_kernel", _Spy(log, "dot"))
    monkeypatch.setattr(qg, "launch_swap", lambda *a, **kw: log.append("swap"))
    gen = torch.Generator().manual_seed(9)
    packed, s = (t.to(DEV) for t in quantize_int4_group(make_weight(gen, 96, 1024)))
    wq, ws = (t.to(DEV) for t in quantize_fp8_block(make_weight(gen, 96, 1024)))
    x = torch.randn(20, 1024, generator=gen).to(torch.bfloat16).to(DEV)
    monkeypatch.setattr(qg, "launch_int4_swap", lambda *a, **kw: log.append("swap4"))
    monkeypatch.setattr(qg, "launch_quad", lambda *a, **kw: log.append("quad"))
    top, (lo4, hi4) = qg.GEMV_MAX_M["int4_group"], qg.INT4_SWAP_AUTO_M  # int4: the swap-AB kernel first
    assert 96 * 1024 // 2 <= qg.INT4_QUAD_AUTO_BYTES  # one row of these small weights: the quad-word GEMV
    for m in (1, 2, top, top + 1, 16, 17):
        log.clear()
        int4_gemm(x[:m], packed, s)
        want = "quad" if m == 1 else "swap4" if lo4 <= m <= hi4 else "gemv" if m <= top else "dot"
        assert log[-1] == want, ("int4", m)
    monkeypatch.setattr(qg, "INT4_QUAD_AUTO_BYTES", 96 * 1024 // 2 - 1)  # one byte over: round 4's GEMV step
    log.clear()
    int4_gemm(x[:1], packed, s)
    assert log == ["gemv"]
    lo, hi = qg.SWAP_AUTO_M  # fp8: GEMV up to GEMV_MAX_M rows, then the swap-AB kernel from lo to hi rows, then dot
    assert qg.GEMV_MAX_M["fp8_block"] < lo <= hi < 20
    for m in range(1, 20):
        log.clear()
        fp8_gemm(x[:m], wq, ws)
        want = "gemv" if m <= qg.GEMV_MAX_M["fp8_block"] else "swap" if lo <= m <= hi else "dot"
        assert log == [want], ("fp8", m)
    log.clear()
    fp8_gemm(x[:lo], wq, ws, block_n=64)  # a tensor-core launch configuration named: the tensor-core kernel
    assert log == ["dot"]
    p2, s2 = (torch.stack([t, t]) for t in (packed, s))
    for tokens, ids in ((1, [[0, 1]]), (2, [[0, 1], [1, 0]])):  # 1 and 2 rows per routed expert
        log.clear()
        int4_moe_gemm(x[:tokens], p2, s2, torch.tensor(ids, device=DEV))
        assert log[-1] == ("gemv" if tokens <= qg.GEMV_MAX_MOE_ROWS["int4_group"] else "dot")
    log.clear()
    int4_gemm(x[:1, :996], packed[:, :498], s[:, :8])  # K = 996: not whole words
    assert log == ["dot"]


def test_gemv_errors():
    x = torch.zeros(2, 264, dtype=torch.bfloat16, device=DEV)
    p = torch.zeros(32, 132, dtype=torch.uint8, device=DEV)
    s = torch.ones(32, 3, dtype=torch.bfloat16, device=DEV)
    wq = torch.zeros(256, 264, dtype=torch.float8_e4m3fn, device=DEV)
    ws = torch.ones(2, 3, device=DEV)
    with pytest.raises(ValueError, match="path must be one of"):
        int4_gemm(x, p, s, path="fast")
    with pytest.raises(ValueError, match="multiple of 8"):
        int4_gemm(x[:, :260], p[:, :130], s, path="gemv")
    with pytest.raises(ValueError, match="at most 16 rows"):
        int4_gemm(torch.zeros(17, 264, dtype=torch.bfloat16, device=DEV), p, s, path="gemv")
    with pytest.raises(ValueError, match="block_n <= 128"):
        fp8_gemm(x, wq, ws, block_n=256, path="gemv")
    with pytest.raises(ValueError, match="split_k must be in"):
        fp8_gemm(x, wq, ws, split_k=4, path="gemv")
    out = int4_gemm(x[:, :260], p[:, :130], s)  # auto: K % 8 != 0 takes the tensor-core kernel
    assert out.shape == (2, 32) and not torch.isnan(out).any()


class _Grid:
    def __init__(self, log):
        self.log = log

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.log.append(tuple(grid))


def test_int4_gemv_split_plan_programs_per_sm(monkeypatch):
    """Dense int4 GEMV up to 2 rows plans split-K for INT4_GEMV_CTAS programs per SM, 3+ rows for _CTAS_PER_SM. On
    the CPU the plan counts 4 SMs; N = 32 gives two 16-wide tiles, K = 8192 64 groups. By hand: 2 per SM wants
    ceil(8 / 2) = 4 splits (of 16 groups), 4 per SM 8 splits (of 8 groups; 1 row steps 8 groups, 3 rows 2)."""
    grids = []
    monkeypatch.setattr(qg, "quant_gemv_kernel", _Grid(grids))
    monkeypatch.setattr(qg, "INT4_GEMV_CTAS", 2)
    monkeypatch.setattr(qg, "_CTAS_PER_SM", 4)
    gen = torch.Generator().manual_seed(3)
    packed, s = (t.to(DEV) for t in quantize_int4_group(make_weight(gen, 32, 8192)))
    x = torch.randn(3, 8192, generator=gen).to(torch.bfloat16).to(DEV)
    if DEV != "cpu":
        pytest.skip("the hand-derived split counts assume the CPU's 4 'SMs'")
    for m in (1, 2, 3):
        int4_gemm(x[:m], packed, s, path="gemv")
    monkeypatch.setattr(qg, "INT4_GEMV_CTAS", None)
    int4_gemm(x[:1], packed, s, path="gemv")
    assert grids == [(1, 2, 4), (1, 2, 4), (1, 2, 8), (1, 2, 8)]


@pytest.mark.parametrize("wide", [True, False])
def test_fp8_gemv_tile_width_rule(monkeypatch, wide):
    """fp8 GEMV tiles (h200-quant-v10): 32-wide where 32-wide tiles fill the SMs, else 64-wide with more split-K
    (GEMV_FP8_WIDE off: 16). CPU: 4 'SMs', 4 programs per SM. By hand, M = 1: N = 2048, K = 256: 64 tiles of 32 >= 4
    -> (1, 64, 1) either way (want ceil(16 / 64) = 1 split); N = 96, K = 1024 (8 groups): 3 tiles of 32 < 4 ->
    64-wide, 2 tiles, want ceil(16 / 2) = 8 splits, cap 98336 // (32 * 96) = 32, steps of 4 groups -> splits of 4
    groups -> (1, 2, 2) (off: 16-wide, 6 tiles, want 3 -> 4 groups -> (1, 6, 2))."""
    if DEV != "cpu":
        pytest.skip("the hand-derived grids assume the CPU's 4 'SMs'")
    grids = []
    monkeypatch.setattr(qg, "quant_gemv_kernel", _Grid(grids))
    monkeypatch.setattr(qg, "_CTAS_PER_SM", 4)
    monkeypatch.setattr(qg, "GEMV_FP8_WIDE", wide)
    gen = torch.Generator().manual_seed(5)
    for n, k in ((2048, 256), (96, 1024)):
        wq, ws = quantize_fp8_block(make_weight(gen, n, k))
        fp8_gemm(torch.randn(1, k, generator=gen).to(torch.bfloat16), wq, ws, path="gemv")
    assert grids == [(1, 64, 1), (1, 2, 2) if wide else (1, 6, 2)]
