"""Round 7's int4 GEMV (issue 17): interleaved weight words (`quant_gemv_int4.interleave_int4`, nibbles j / j + 4 =
elements 2j / 2j + 1) read by the quad kernel with the activations as bf16 pairs (MODE_IL; emulated in fp32 under
the interpreter), clamped reads where K is a whole number of groups. Against the fp64 references of
test_kernels_quant: a hand-worked repacking, its inverse, awkward N / K / M, split-K, tile widths, the shared-memory
variant, NaN-poisoned outputs, one-hot known answers for every nibble, the documented error bound, inf in an
activation of another split's group, and errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from test_kernels_quant import DEV, TOL, make_weight, ref_int4_gemm, ref_int4_weight, rel  # noqa: E402
from wmtp.measure.kernels import quant_gemm as qg  # noqa: E402
from wmtp.measure.kernels.quant_gemm import int4_gemm, quantize_int4_group  # noqa: E402
from wmtp.measure.kernels.quant_gemv_int4 import interleave_int4  # noqa: E402

pytestmark = pytest.mark.kernels
# K = 9 groups + 8 (a last group of one word: masked reads), 2 groups + 8, 3 groups + 8, 2 / 3 whole groups (clamped
# reads); M = 1, 2, 3, 5, 16 (rows past M clamped); N not a multiple of the tiles
SHAPES = [(1, 200, 1160), (2, 70, 264), (3, 130, 392), (5, 33, 256), (16, 40, 384), (1, 37, 1024)]


def _deinterleave(w):
    """The inverse of the repacking, written from its definition: nibble n of a word holds element (0, 2, 4, 6, 1,
    3, 5, 7)[n], so element e sits at nibble e // 2 + 4 * (e % 2)."""
    nib = torch.stack((w & 15, w >> 4), -1).reshape(*w.shape[:-1], -1, 8)
    codes = nib[..., [e // 2 + 4 * (e % 2) for e in range(8)]]
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).reshape(w.shape)


def _case(m, n, k, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    packed, s = quantize_int4_group(make_weight(gen, n, k))
    return x, packed, s, ref_int4_gemm(x, packed, s)


def _run(x, packed, s, **kw):
    out = torch.full((x.shape[0], packed.shape[0]), float("nan"), dtype=x.dtype, device=DEV)
    int4_gemm(x.to(DEV), interleave_int4(packed).to(DEV), s.to(DEV), out=out, layout="interleaved", **kw)
    assert not torch.isnan(out).any()
    return out


def test_interleave_known_answer():
    """One word with elements 0..7 holding codes 0..7: standard bytes 0x10 0x32 0x54 0x76 (element 2b low, 2b + 1
    high); interleaved nibbles (0, 2, 4, 6, 1, 3, 5, 7) give bytes 0x20 0x64 0x31 0x75."""
    w = torch.tensor([[0x10, 0x32, 0x54, 0x76]], dtype=torch.uint8)
    assert interleave_int4(w).tolist() == [[0x20, 0x64, 0x31, 0x75]]


def test_interleave_inverse_and_shape():
    w = torch.randint(0, 256, (3, 5, 64), dtype=torch.uint8, generator=torch.Generator().manual_seed(4))
    il = interleave_int4(w)
    assert il.shape == w.shape and il.dtype == torch.uint8
    assert torch.equal(_deinterleave(il), w)
    assert not torch.equal(il, w)
    with pytest.raises(ValueError, match="K / 2 a multiple of 4"):
        interleave_int4(torch.zeros(2, 6, dtype=torch.uint8))
    with pytest.raises(ValueError, match="uint8"):
        interleave_int4(torch.zeros(2, 8, dtype=torch.int32))


@pytest.mark.parametrize("split_k", [None, 2])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_il_matches_reference(m, n, k, split_k):
    x, packed, s, ref = _case(m, n, k, 7500 * m + n + k)
    assert rel(_run(x, packed, s, split_k=split_k), ref) < TOL


@pytest.mark.parametrize("block_n, m, k", [(4, 1, 1160), (8, 3, 512), (16, 2, 1160), (32, 1, 512)])
def test_il_tile_widths_and_shared_memory_variant(monkeypatch, block_n, m, k):
    x, packed, s, ref = _case(m, 70, k, 310 + block_n)
    assert rel(_run(x, packed, s, block_n=block_n), ref) < TOL
    monkeypatch.setattr(qg, "INT4_GEMV_STEP", "quad_xs")
    assert rel(_run(x, packed, s, block_n=block_n), ref) < TOL


@pytest.mark.parametrize("k", [256, 264])
def test_il_one_hot_picks_each_nibble(k):
    """Unit rows at 16 columns (every element of word 0, and of words in both groups): output row i is exactly
    w[:, col_i] (bf16-exact scales 0.5 / 2; one nonzero product per output). K = 264: the masked path."""
    gen = torch.Generator().manual_seed(12)
    n = 24
    packed = torch.randint(0, 256, (n, k // 2), generator=gen, dtype=torch.uint8)
    s = torch.tensor([0.5, 2.0, 4.0][: (k + 127) // 128], dtype=torch.bfloat16).repeat(n, 1)
    cols = list(range(8)) + [11, 21, 38, 125, 131, 200, 250, 255]
    x = torch.zeros(len(cols), k, dtype=torch.bfloat16)
    x[torch.arange(len(cols)), cols] = 1.0
    out = _run(x, packed, s)
    assert torch.equal(out.double().cpu(), ref_int4_weight(packed, s)[:, cols].T)


def test_il_error_within_documented_bound():
    """As the packed step (test_kernels_quant_gemv4): at most 7 bf16 roundings per word partial (4 products per
    lane), |out - ref| <= 7.01 * 2^-9 * sum_k |w x| + 2^-8 |ref|, elementwise."""
    gen = torch.Generator().manual_seed(14)
    x = torch.randn(3, 2048, generator=gen).to(torch.bfloat16)
    packed, s = quantize_int4_group(make_weight(gen, 64, 2048))
    w_ref = ref_int4_weight(packed, s)
    ref = x.double() @ w_ref.T
    out = _run(x, packed, s).double().cpu()
    bound = 7.01 * 2.0 ** -9 * (x.double().abs() @ w_ref.abs().T) + 2.0 ** -8 * ref.abs()
    assert ((out - ref).abs() <= bound).all()


def test_il_inf_in_another_splits_group_stays_there():
    """K = 9 groups, split_k = 3, steps of 4 groups: split 0 reads group 3 (split 1's) and split 2 re-reads group 8
    (clamped past K); those products are zeroed by selection, not by a zero scale (0 * inf = nan). With inf at an
    element of group 3, each output is what IEEE arithmetic gives in fp64: +-inf where its weight there is nonzero
    (a scale-zeroed overrun would add nan), nan where it is zero (0 * inf)."""
    gen = torch.Generator().manual_seed(15)
    n, k, col = 32, 9 * 128, 3 * 128 + 5
    x = torch.randn(1, k, generator=gen).to(torch.bfloat16)
    packed, s = quantize_int4_group(make_weight(gen, n, k))
    codes = torch.tensor([8] * (n // 4) + [3, 13] * (3 * n // 8), dtype=torch.uint8)  # weight 0, then -5 s / +5 s
    packed[:, col // 2] = (packed[:, col // 2] & 0x0F) | (codes << 4)  # element col: the high nibble
    x[0, col] = float("inf")
    ref = x.double() @ ref_int4_weight(packed, s).T
    out = torch.empty(1, n, dtype=torch.bfloat16, device=DEV)
    int4_gemm(x.to(DEV), interleave_int4(packed).to(DEV), s.to(DEV), out=out, layout="interleaved", split_k=3)
    out = out.double().cpu()
    assert torch.isnan(ref[0, : n // 4]).all() and torch.isinf(ref[0, n // 4:]).all()
    assert torch.equal(torch.isnan(out), torch.isnan(ref))
    assert torch.equal(out[0, n // 4:], ref[0, n // 4:])


def test_il_errors():
    x = torch.zeros(1, 256, dtype=torch.float16, device=DEV)
    w = torch.zeros(8, 128, dtype=torch.uint8, device=DEV)
    s = torch.ones(8, 2, device=DEV)
    with pytest.raises(ValueError, match="bf16 activations"):
        int4_gemm(x, w, s, layout="interleaved")
    with pytest.raises(ValueError, match="layout must be"):
        int4_gemm(x.bfloat16(), w, s, layout="marlin")
    with pytest.raises(ValueError, match="1..16 rows"):
        int4_gemm(torch.zeros(17, 256, dtype=torch.bfloat16, device=DEV), w, s, layout="interleaved")
