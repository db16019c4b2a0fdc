"""The packed-rows kernel's launch plan (wmtp.kernel_plan.rows_tiling / balanced_splits / rows_plan)
against hand arithmetic."""

from __future__ import annotations

import pytest

from wmtp.kernel_plan import balanced_splits, rows_plan, rows_tiling


@pytest.mark.parametrize("group, d, block_m, m_blocks", [
    (16, 1, 16, 1),  # decode: 16 rows
    (8, 1, 16, 1),  # 8 rows padded to the 16-row minimum of tl.dot
    (8, 4, 32, 1),
    (16, 4, 64, 1),
    (16, 5, 128, 1),  # 80 rows: one 128-row tile, K/V read once (v1 cut this into 2 tiles of 8 heads)
    (16, 7, 128, 1),  # 112 rows
    (16, 9, 128, 2),  # 144 rows: two 128-row tiles
    (8, 9, 128, 1),  # 72 rows
    (16, 17, 128, 3),  # 272 rows
])
def test_rows_tiling_packs_rows(group, d, block_m, m_blocks):
    got = rows_tiling(group, d, 256)
    assert got[:2] == (block_m, m_blocks)


def test_rows_tiling_max_rows_caps_the_tile():
    assert rows_tiling(16, 7, 128, max_rows=64)[:2] == (64, 2)  # 112 rows over 64-row tiles
    assert rows_tiling(16, 7, 128, max_rows=16)[:2] == (16, 7)


def test_balanced_splits_round_down_to_whole_waves():
    # 16 requests x 2 KV heads = 32 programs per split; 4 waves of 132 SMs = 528 -> 16 splits (512 programs),
    # not ceil(528 / 32) = 17 (544 programs: a 16-program tail wave).
    assert balanced_splits(1 << 20, 16, 2, 1, 132, waves=4) == 16
    assert balanced_splits(1 << 20, 1, 2, 1, 132, waves=4) == 264
    assert balanced_splits(1 << 20, 1, 2, 2, 132, waves=1) == 33
    # short contexts: no split shorter than min_keys keys
    assert balanced_splits(1000, 1, 2, 1, 132, waves=4, min_keys=64) == 16
    assert balanced_splits(1000, 1, 2, 1, 132, waves=4, min_keys=1024) == 1
    assert balanced_splits(1 << 20, 64, 2, 1, 132, waves=1) == 1  # more programs than SMs: one split


def test_rows_plan_overrides():
    p = rows_plan(1, 2, 16, 7, 256, 1 << 20, 132)
    assert (p.kernel, p.block_m, p.m_blocks, p.splits) == ("rows", 128, 1, 264)
    q = rows_plan(1, 2, 16, 7, 256, 1 << 20, 132, num_splits=5, block_n=64, num_warps=4, num_stages=3, waves=1)
    assert (q.splits, q.block_n, q.num_warps, q.num_stages) == (5, 64, 4, 3)
    assert rows_plan(1, 2, 16, 7, 256, 1 << 20, 132, waves=1).splits == 66
