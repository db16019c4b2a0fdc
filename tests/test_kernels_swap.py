"""The swap-AB verify kernel (`measure/kernels/paged_swap.py`) against the fp64 reference: partials merged by a
plain-torch log-sum-exp, so a wrong partial cannot hide behind the project's own merge kernel."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernel_refs import ref_attention, ref_index  # noqa: E402
from test_kernels import DEV, GPU, TOL, make_pool, make_r2t, rel_err, stable_seed  # noqa: E402
from wmtp.measure.kernels.paged_swap import swap_partials, swap_pieces  # noqa: E402

pytestmark = pytest.mark.kernels
LOG2E = 1.4426950408889634


def torch_merge(mid_o, mid_l):
    """out = sum_s 2^(lse_s - m) o_s / sum_s 2^(lse_s - m), splits with lse = -inf weigh nothing."""
    m = mid_l.max(dim=2, keepdim=True).values
    w = torch.exp2(mid_l - m)
    w = torch.where(torch.isfinite(mid_l), w, torch.zeros_like(w))
    return (w[..., None] * mid_o.nan_to_num(0.0)).sum(2) / w.sum(2)[..., None]


def run_swap(seq_lens, q_lens, hq, hkv, hd, dtype, splits, block_n=16, seed=0, pieces=None, index_mode="native",
             vt=False):
    gen = torch.Generator().manual_seed(seed)
    r2t, slots = make_r2t(seq_lens, gen)
    k_pool, v_pool = make_pool(slots, hkv, hd, dtype, gen)
    ptr, idx = ref_index(r2t, torch.tensor(seq_lens, dtype=torch.int32), index_mode, 4, 16, 1)
    qo = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32)
    q = torch.randn(int(qo[-1]), hq, hd, generator=gen).to(dtype)
    ref = ref_attention(q.to(DEV), k_pool, v_pool, ptr, idx, qo).cpu()
    pieces = pieces or swap_pieces(hq // hkv * max(q_lens))
    upcast = DEV == "cpu" and dtype == torch.bfloat16
    mid_o, mid_l = swap_partials(q.to(DEV), k_pool, v_pool, qo.to(DEV), ptr.to(DEV), idx.to(DEV), pieces=pieces,
                                 splits=splits, block_n=block_n, num_warps=4, num_stages=2,
                                 qk_scale=hd ** -0.5 * LOG2E, v_scale=1.0, upcast=upcast, vt=vt)
    out = torch_merge(mid_o.cpu(), mid_l.cpu())
    assert not torch.isnan(out).any(), "a row was not written or is NaN"
    return rel_err(out, ref)


def test_pieces_cover_the_rows_in_powers_of_two():
    for rows in range(1, 385):
        p = swap_pieces(rows)
        assert sum(p) >= rows and all(x >= 16 and x & (x - 1) == 0 for x in p) and len(p) <= 3
        assert list(p) == sorted(p, reverse=True)
    # by hand: 16-row padding, largest piece first
    assert swap_pieces(80) == (64, 16) and swap_pieces(112) == (64, 32, 16) and swap_pieces(144) == (128, 16)
    assert swap_pieces(5) == (16,) and swap_pieces(240) == (128, 128)
    with pytest.raises(ValueError):
        swap_pieces(385)
    with pytest.raises(ValueError):
        swap_pieces(0)


@pytest.mark.parametrize("hq, hkv, d", [(8, 2, 5), (16, 1, 5), (16, 1, 7), (8, 1, 9), (4, 2, 1)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("vt", [False, True])
def test_swap_verify_matches_reference(hq, hkv, d, dtype, vt):
    err = run_swap([70, 33], [d, d], hq, hkv, 32, dtype, splits=3, seed=stable_seed(hq, hkv, d, str(dtype)), vt=vt)
    assert err < TOL[dtype]


def test_swap_mixed_query_lengths_short_requests_and_empty_splits():
    # request 1 has fewer keys than splits x block: some splits see no key and must weigh nothing
    err = run_swap([90, 7, 40], [3, 2, 4], 16, 2, 64, torch.float16, splits=4, seed=3)
    assert err < TOL[torch.float16]


def test_swap_explicit_pieces_and_window_index():
    # the same rows as one padded piece or as two pieces give the reference either way
    for pieces in ((64,), (32, 16)):
        err = run_swap([120], [5], 8, 1, 32, torch.float16, splits=2, pieces=pieces, seed=5, index_mode="window")
        assert err < TOL[torch.float16]


def test_swap_piece_errors():
    q = torch.zeros(1, 2, 16)
    with pytest.raises(ValueError, match="powers of two"):
        swap_partials(q, q, q, None, None, None, pieces=(24,), splits=1, block_n=16, num_warps=4, num_stages=2,
                      qk_scale=1.0, v_scale=1.0, upcast=False)


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="large sizes need a GPU")
@pytest.mark.parametrize("hq, hkv, hd, d", [(32, 2, 256, 5), (32, 2, 256, 9), (16, 2, 256, 7), (32, 2, 128, 7)])
@pytest.mark.parametrize("vt", [False, True])
def test_swap_large_on_gpu(hq, hkv, hd, d, vt):
    err = run_swap([20000, 3000], [d, d], hq, hkv, hd, torch.bfloat16, splits=16, block_n=64, seed=11, vt=vt)
    assert err < TOL[torch.bfloat16]
