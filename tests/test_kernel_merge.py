"""The split merge (`measure/kernels/paged_merge.py`) against a merge written out in fp64 torch: partials weighted by
2^lse over the non-empty splits. An empty split (lse -inf) adds nothing whatever its partial holds: the merge loads
partials unmasked beside the log-sum-exps, so NaN or inf there must not reach the output."""

from __future__ import annotations

import pytest
import torch

from wmtp.measure.kernels.paged_merge import merge_splits

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _by_hand(mid_o, mid_l):
    """out = sum_s 2^lse_s o_s / sum_s 2^lse_s over the splits whose lse is finite (fp64)."""
    lse = mid_l.double()
    keep = torch.isfinite(lse)
    w = torch.where(keep, torch.exp2(lse - lse.masked_fill(~keep, float("-inf")).amax(-1, keepdim=True)), 0.0)
    o = torch.where(keep[..., None], mid_o.double(), 0.0)
    return (w[..., None] * o).sum(-2) / w.sum(-1, keepdim=True)


@pytest.mark.parametrize("splits, hd", [(5, 64), (70, 128)])  # 70: three chunks of 32 splits, the first all empty
@pytest.mark.parametrize("poison", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("opts", [{}, dict(split_block=128), dict(split_block=128, block_d=16, num_warps=1),
                                  dict(split_block=4, block_d=32, num_warps=2)])
def test_empty_splits_add_nothing_whatever_their_partials_hold(splits, hd, poison, opts):
    g = torch.Generator().manual_seed(splits + hd)
    total_q, hq = 3, 2
    mid_o = torch.randn(total_q, hq, splits, hd, generator=g)
    mid_l = torch.randn(total_q, hq, splits, generator=g) * 4
    empty = torch.rand(total_q, hq, splits, generator=g) < 0.4
    if splits > 32:
        empty[..., :32] = True  # a whole chunk of empty splits before the first non-empty one
    empty[..., -1] = False  # every row keeps at least one split with keys
    mid_l[empty] = float("-inf")
    clean = mid_o.masked_fill(empty[..., None], 0.0)  # what the split kernels write for an empty split
    want = _by_hand(clean, mid_l)
    outs = []
    for partials in (clean, mid_o.masked_fill(empty[..., None], poison)):
        out = torch.full((total_q, hq, hd), float("nan"), device=DEV)
        merge_splits(partials.to(DEV), mid_l.to(DEV), out, **opts)
        outs.append(out.cpu())
    assert not torch.isnan(outs[1]).any()
    assert torch.equal(outs[0], outs[1])  # the poisoned empty splits change no bit
    assert torch.allclose(outs[1].double(), want, rtol=1e-5, atol=1e-6)


def test_by_hand_merge_known_answer():
    # two splits of lse 0 and 1 (weights 1 and 2) holding 3 and 6: (3 + 12) / 3 = 5; a third, empty, holding NaN
    mid_o = torch.tensor([3.0, 6.0, float("nan")]).view(1, 1, 3, 1)
    mid_l = torch.tensor([0.0, 1.0, float("-inf")]).view(1, 1, 3)
    assert _by_hand(mid_o, mid_l).item() == 5.0


@pytest.mark.parametrize("hd, opts", [(128, dict(split_block=48)), (128, dict(block_d=24)), (128, dict(split_block=0)),
                                      (80, {})])  # 80: the default 32-dim slice does not divide it
def test_merge_options_are_checked(hd, opts):
    mid_o, mid_l = torch.zeros(1, 1, 4, hd), torch.zeros(1, 1, 4)
    with pytest.raises(ValueError):
        merge_splits(mid_o.to(DEV), mid_l.to(DEV), torch.zeros(1, 1, hd, device=DEV), **opts)
