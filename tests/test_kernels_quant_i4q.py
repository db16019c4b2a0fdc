"""Round 6's int4 kernels (issue 17) against the fp64 references of test_kernels_quant: the quad-word GEMV
(`quant_gemv_int4.int4_quad_kernel`: 16-byte weight loads; packed bf16x2 arithmetic, emulated in fp32 under the
interpreter) and the swap-AB tensor-core kernel (`quant_swap_i4`: weights dequantized once, M <= 64). Awkward N / K,
NaN-poisoned outputs, split-K, tile widths, one-hot known answers for the nibble and word order, the documented error
bound of the bf16 partials, fp16 activations, dispatch and errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from test_kernels_quant import DEV, TOL, make_weight, ref_int4_gemm, ref_int4_weight, rel  # noqa: E402
from wmtp.measure.kernels import quant_gemm as qg  # noqa: E402
from wmtp.measure.kernels import quant_swap_i4 as qs4  # noqa: E402
from wmtp.measure.kernels.quant_gemm import int4_gemm, quantize_int4_group  # noqa: E402
from wmtp.measure.kernels.quant_gemv_int4 import MODE_WORDS, launch_quad, quad_plan  # noqa: E402

pytestmark = pytest.mark.kernels
# M = 1, 2, 3, 5, 16; N not a multiple of the tiles; K = 9 groups + 8 (a last group of one word), 2 groups + 8,
# 3 groups + 8, 2 groups
SHAPES = [(1, 200, 1160), (2, 70, 264), (3, 130, 392), (5, 33, 1160), (16, 40, 256)]


def _case(m, n, k, seed, dtype=torch.bfloat16):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen).to(dtype)
    packed, s = quantize_int4_group(make_weight(gen, n, k))
    ref = ref_int4_gemm(x, packed, s)
    assert ref.abs().max() > 1e-2
    return x, packed, s, ref


def _run(x, packed, s, **kw):
    out = torch.full((x.shape[0], packed.shape[0]), float("nan"), dtype=x.dtype, device=DEV)
    int4_gemm(x.to(DEV), packed.to(DEV), s.to(DEV), out=out, **kw)
    assert not torch.isnan(out).any()
    return out


@pytest.fixture
def step(request, monkeypatch):
    monkeypatch.setattr(qg, "INT4_GEMV_STEP", request.param)
    return request.param


@pytest.mark.parametrize("step", ["quad", "quad_xs"], indirect=True)
@pytest.mark.parametrize("split_k", [None, 2])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_quad_matches_reference(step, m, n, k, split_k):
    x, packed, s, ref = _case(m, n, k, 7100 * m + n + k)
    assert rel(_run(x, packed, s, split_k=split_k, path="gemv"), ref) < TOL


@pytest.mark.parametrize("step", ["quad"], indirect=True)
@pytest.mark.parametrize("block_n, m", [(4, 1), (8, 3), (16, 2), (64, 1)])
def test_quad_tile_widths(step, block_n, m):
    x, packed, s, ref = _case(m, 70, 1160, 300 + block_n)
    assert rel(_run(x, packed, s, block_n=block_n, path="gemv"), ref) < TOL


@pytest.mark.parametrize("step", ["quad"], indirect=True)
@pytest.mark.parametrize("g, split_k, block_n, m", [(1, None, 32, 1), (2, 5, 16, 2), (4, 3, 8, 1), (1, 10, 32, 3)])
def test_quad_groups_per_step(step, monkeypatch, g, split_k, block_n, m):
    """INT4_QUAD_G (round 9's occupancy variants): 1 / 2 / 4 groups a step, with split-K of one step per program
    (K = 9 groups + a last one of one word: 10 groups) and the launcher's split."""
    monkeypatch.setattr(qg, "INT4_QUAD_G", g)
    x, packed, s, ref = _case(m, 70, 1160, 500 + 10 * g + m)
    assert rel(_run(x, packed, s, block_n=block_n, split_k=split_k, path="gemv"), ref) < TOL


@pytest.mark.parametrize("step", ["quad"], indirect=True)
def test_quad_fp16_activations_exact_step(step):
    x, packed, s, ref = _case(3, 48, 392, 21, torch.float16)
    assert rel(_run(x, packed, s, path="gemv"), ref) < TOL


@pytest.mark.parametrize("step", ["quad", "quad_xs"], indirect=True)
def test_quad_one_hot_picks_each_nibble_and_word(step):
    """x = unit rows at 16 columns: every nibble of word 0, one nibble of words 1, 2, 3 of the first quad, of the
    second and last quad of group 0 and of group 1; output row i is exactly w[:, col_i] (bf16-exact scales 0.5 / 2)."""
    gen = torch.Generator().manual_seed(11)
    n, k = 24, 256
    packed = torch.randint(0, 256, (n, k // 2), generator=gen, dtype=torch.uint8)
    s = torch.tensor([0.5, 2.0], dtype=torch.bfloat16).repeat(n, 1)
    w_ref = ref_int4_weight(packed, s)
    cols = list(range(8)) + [11, 21, 31, 32 + 6, 96 + 29, 128 + 3, 128 + 64 + 12, 255]
    x = torch.zeros(len(cols), k, dtype=torch.bfloat16)
    x[torch.arange(len(cols)), cols] = 1.0
    out = int4_gemm(x.to(DEV), packed.to(DEV), s.to(DEV), path="gemv")
    assert torch.equal(out.double().cpu(), w_ref[:, cols].T)


@pytest.mark.parametrize("split_k", [None, 1, 2])
@pytest.mark.parametrize("m, n, k", SHAPES + [(33, 70, 200), (3, 40, 260)])  # K = 260: not whole words, bytes
def test_int4_swap_matches_reference(m, n, k, split_k):
    x, packed, s, ref = _case(m, n, k, 7300 * m + n + k)
    assert rel(_run(x, packed, s, split_k=split_k, path="swap"), ref) < TOL


@pytest.mark.parametrize("block_n", [64, 128])
def test_int4_swap_tile_widths_and_fp16(block_n):
    for dtype in (torch.bfloat16, torch.float16):
        x, packed, s, ref = _case(4, 200, 520, block_n, dtype)
        assert rel(_run(x, packed, s, block_n=block_n, path="swap"), ref) < TOL


def test_int4_swap_word_and_byte_reads_agree(monkeypatch):
    """The int32-word and the byte reads of the weights dequantize the same codes in the same K order: identical
    outputs (same dot operands and order), both within the reference's tolerance."""
    x, packed, s, ref = _case(5, 70, 1160, 41)
    outs = []
    for words in (True, False):
        monkeypatch.setattr(qs4, "SWAP_I4_WORDS", words)
        outs.append(_run(x, packed, s, path="swap"))
    assert torch.equal(outs[0], outs[1])
    assert rel(outs[0], ref) < TOL


@pytest.mark.parametrize("m, n, k", [(2, 200, 1160), (16, 70, 260)])
def test_int4_swap_lop3_dequantization(monkeypatch, m, n, k):
    """SWAP_I4_LOP3 (on a GPU: the packed bf16 `lop3` dequantization of the byte reads; under the interpreter the
    fp32 one) against the reference, ragged N / K, NaN-poisoned output."""
    monkeypatch.setattr(qs4, "SWAP_I4_LOP3", True)
    x, packed, s, ref = _case(m, n, k, 51 + m)
    assert rel(_run(x, packed, s, path="swap"), ref) < TOL


def test_int4_swap_one_hot_known_answer():
    """Unit rows pick single weights (low and high nibbles, both groups): exact, since code - 8 and the scales are
    bf16-exact and the dot sums one nonzero product."""
    gen = torch.Generator().manual_seed(31)
    n, k = 70, 256
    packed = torch.randint(0, 256, (n, k // 2), generator=gen, dtype=torch.uint8)
    s = torch.tensor([0.25, 4.0], dtype=torch.bfloat16).repeat(n, 1)
    cols = [0, 1, 2, 5, 7, 8, 63, 126, 127, 128, 129, 200, 255]  # every nibble position of word 0
    x = torch.zeros(len(cols), k, dtype=torch.bfloat16)
    x[torch.arange(len(cols)), cols] = 1.0
    for lop3 in (False, True):
        qs4.SWAP_I4_LOP3 = lop3
        try:
            out = int4_gemm(x.to(DEV), packed.to(DEV), s.to(DEV), path="swap")
        finally:
            qs4.SWAP_I4_LOP3 = False
        assert torch.equal(out.double().cpu(), ref_int4_weight(packed, s)[:, cols].T), lop3


def test_auto_takes_swap_and_quad_when_configured(monkeypatch):
    log = []
    monkeypatch.setattr(qg, "launch_int4_swap", lambda *a, **kw: log.append("swap"))
    monkeypatch.setattr(qg, "launch_quad", lambda *a, **kw: log.append("quad"))
    monkeypatch.setattr(qg, "INT4_SWAP_AUTO_M", (3, 12))
    monkeypatch.setattr(qg, "INT4_GEMV_STEP", "quad")
    packed, s = (t.to(DEV) for t in quantize_int4_group(torch.randn(32, 256)))
    x = torch.randn(16, 256).to(torch.bfloat16).to(DEV)
    for m, want in ((1, "quad"), (2, "quad"), (3, "swap"), (12, "swap")):
        log.clear()
        int4_gemm(x[:m], packed, s)
        assert log == [want], m
    for named in (dict(block_k=128), dict(block_n=32)):  # a tile named: not the swap path, the (quad) GEMV
        log.clear()
        int4_gemm(x[:4], packed, s, **named)
        assert log == ["quad"], named


def test_quad_plan_and_errors():
    # N = 12288, K = 3072 (24 groups), 132 SMs: 384 tiles of 32 >= 132; ctas 2 -> 1 split (want 1); M = 1 steps of
    # 8 groups; ctas 4 -> 2 splits of 16 groups (whole steps), G 8
    assert quad_plan(1, 12288, 3072, 132) == (1, 32, 8, 1, 24)
    assert quad_plan(1, 12288, 3072, 132, ctas=4) == (1, 32, 8, 2, 16)
    assert quad_plan(16, 1024, 2048, 132)[:3] == (16, 16, 2)  # 64 tiles of 32 < 132: 16-wide, G = 1 * 32 / 16
    assert quad_plan(1, 1024, 2048, 132, block_n=4)[:3] == (1, 4, 16)  # steps of 64 groups, capped at K's 16
    assert quad_plan(2, 200, 392, 4, split_k=3)[3:] == (2, 2)  # 4 groups: splits of 2, no empty third split
    assert quad_plan(1, 12288, 3072, 132, g_step=2) == (1, 32, 2, 1, 24)  # 384 tiles fill the SMs: no split
    assert quad_plan(1, 12288, 3072, 132, split_k=12, g_step=2)[2:] == (2, 12, 2)  # one step per program
    assert quad_plan(1, 12288, 3072, 132, split_k=6, g_step=8)[2:] == (4, 6, 4)  # G capped at a split's groups
    with pytest.raises(ValueError, match="1..16 rows"):
        quad_plan(17, 64, 256, 132)
    with pytest.raises(ValueError, match="power of two >= 4"):
        quad_plan(1, 64, 256, 132, block_n=12)
    with pytest.raises(ValueError, match="split_k must be in"):
        quad_plan(1, 64, 256, 132, split_k=3)
    with pytest.raises(ValueError, match="g_step"):
        quad_plan(1, 64, 256, 132, g_step=3)
    x = torch.zeros(1, 260, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="multiple of 8"):
        launch_quad(x, torch.zeros(8, 130, dtype=torch.uint8), torch.ones(8, 3), x, 2, 4, None)
    with pytest.raises(ValueError, match="quad kernel takes I4 modes"):
        launch_quad(x[:, :256], torch.zeros(8, 128, dtype=torch.uint8), torch.ones(8, 2), x, MODE_WORDS, 4, None)
    with pytest.raises(ValueError, match="swap path takes 1..64 rows"):
        int4_gemm(torch.zeros(65, 256, dtype=torch.bfloat16, device=DEV),
                  torch.zeros(8, 128, dtype=torch.uint8, device=DEV), torch.ones(8, 2, device=DEV), path="swap")
