"""The packed-rows kernel's launch plan (wmtp.kernel_plan.rows_tiling / balanced_splits / rows_plan)
against hand arithmetic."""

from __future__ import annotations

import pytest

from wmtp.kernel_plan import (attention_features, balanced_splits, default_kernel, kv_passes, rows_plan, rows_tiling,
                              sub_parts, sub_plan, sub_tiling)


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


@pytest.mark.parametrize("rows, padded, parts", [
    (1, 16, (16,)),  # at least one 16-row block (tl.dot's minimum)
    (8, 16, (16,)),
    (48, 48, (32, 16)),
    (80, 80, (64, 16)),  # 16 heads x 5 queries: 64 + 16, not a 128-row tile
    (112, 112, (64, 32, 16)),
    (144, 144, (64, 64, 16)),
    (72, 80, (64, 16)),  # rounded up to a multiple of 16
    (176, 176, (64, 64, 32, 16)),
    (240, 256, (64, 64, 64, 64)),  # 64+64+64+32+16 would be five pieces: rounded up to 256
])
def test_sub_parts_pad_to_16_not_to_a_power_of_two(rows, padded, parts):
    assert sub_parts(rows) == (padded, parts)
    assert sum(parts) == padded and all(p & (p - 1) == 0 for p in parts)


def test_sub_parts_rejects_bad_input():
    with pytest.raises(ValueError, match="part_max"):
        sub_parts(10, part_max=48)
    with pytest.raises(ValueError, match="rows >= 1"):
        sub_parts(0)


@pytest.mark.parametrize("group, d, max_rows, rows, m_blocks, parts", [
    (16, 1, None, 16, 1, (16,)),
    (16, 5, None, 80, 1, (64, 16)),
    (16, 9, None, 80, 2, (64, 16)),  # 144 rows over two blocks of 72 (each padded to 80)
    (16, 17, None, 96, 3, (64, 32)),  # 272 rows: three blocks of 91 -> 96
    (16, 9, 256, 144, 1, (64, 64, 16)),
    (8, 7, 32, 32, 2, (32,)),  # 56 rows, at most 32 per block: 2 x 28 -> 32
])
def test_sub_tiling_splits_rows_evenly(group, d, max_rows, rows, m_blocks, parts):
    got = sub_tiling(group, d, 128, max_rows)
    assert got[:3] == (rows, m_blocks, parts)


def test_sub_plan_overrides_and_splits():
    p = sub_plan(1, 2, 16, 7, 256, 1 << 20, 132)
    assert (p.kernel, p.block_m, p.subs, p.m_blocks) == ("sub", 112, (64, 32, 16), 1)
    assert p.splits == 4 * 132 // 2  # 2 programs per split: 264 splits fill 4 waves of 132 SMs
    q = sub_plan(1, 2, 16, 7, 256, 1 << 20, 132, num_splits=5, block_n=16, num_warps=2, num_stages=1, part_max=32)
    assert (q.splits, q.block_n, q.num_warps, q.num_stages, q.subs) == (5, 16, 2, 1, (32, 32, 32, 16))


@pytest.mark.parametrize("group, d, rows, m_blocks", [(16, 5, 128, 1), (16, 9, 128, 2), (8, 3, 32, 1), (8, 1, 16, 1)])
def test_sub_tiling_pow2_matches_the_rows_kernel(group, d, rows, m_blocks):
    got = sub_tiling(group, d, 256, pow2=True)
    assert got[:3] == (rows, m_blocks, (rows,))
    assert got[:2] == rows_tiling(group, d, 256)[:2]


def test_rows_tiling_fp8_decode_takes_wide_key_tiles():
    # fp8 KV decode (one query row, <= 16-row tiles): 64-key tiles, 4 warps, 3 stages at head dim 256 (h200-kernels-v4
    # round 3); below it one warp, 64-key tiles, 4 stages (h200-fp8-ablation); bf16 decode keeps the decode options;
    # verify tiles do not depend on the KV dtype.
    assert rows_tiling(16, 1, 256, kv_fp8=True) == (16, 1, 64, 4, 3)
    assert rows_tiling(16, 1, 128, kv_fp8=True) == (16, 1, 64, 1, 4)
    assert rows_tiling(16, 1, 256) == (16, 1, 32, 4, 2)
    assert rows_tiling(16, 7, 256, kv_fp8=True) == rows_tiling(16, 7, 256)
    assert rows_plan(1, 2, 16, 1, 256, 1 << 20, 132, kv_fp8=True).block_n == 64


def test_fp8_decode_below_head_dim_256_splits_fill_eight_programs_per_sm():
    # B = 16, 2 KV heads, one row block: 32 (request, head) pairs; fp8 decode at head dim 128: floor(8 x 132 / 32) = 33
    # splits; bf16 decode, fp8 decode at head dim 256 and fp8 verify: floor(4 x 132 / 32) = 16 (each split at least
    # 64 of the 1M keys)
    assert rows_plan(16, 2, 16, 1, 128, 1 << 20, 132, kv_fp8=True).splits == 33
    assert rows_plan(16, 2, 16, 1, 128, 1 << 20, 132).splits == 16
    assert rows_plan(16, 2, 16, 1, 256, 1 << 20, 132, kv_fp8=True).splits == 16
    assert rows_plan(16, 2, 8, 2, 128, 1 << 20, 132, kv_fp8=True).splits == 16


# K/V passes and the default kernel, by hand: v1 puts 2^floor(log2(64 // q_len)) heads (at most the group) in a row
# block, so a group is read ceil(group / heads) times; rows packs group * q_len rows into tiles of up to 128.
@pytest.mark.parametrize("group,q_len,v1,rows", [
    (16, 4, 1, 1),   # 64 // 4 = 16 heads: one v1 block; 64 rows: one rows tile
    (16, 5, 2, 1),   # 64 // 5 = 12 -> 8 heads: two v1 blocks; 80 rows -> one 128-row tile
    (16, 9, 4, 2),   # 64 // 9 = 7 -> 4 heads: four blocks; 144 rows -> two 128-row tiles
    (8, 8, 1, 1),    # 8 heads x 8 = 64 rows both ways
    (8, 9, 2, 1),    # 4 heads per v1 block; 72 rows -> one tile
    (8, 1, 1, 1),
])
def test_kv_passes_by_hand(group, q_len, v1, rows):
    assert kv_passes("v1", group, q_len, 256) == v1
    assert kv_passes("rows", group, q_len, 256) == rows


@pytest.mark.parametrize("batch,group,q_len,want", [
    (1, 16, 4, "v1"), (1, 16, 5, "rows"), (8, 16, 9, "rows"), (1, 8, 8, "v1"), (1, 8, 9, "rows"),
    (1, 16, 1, "v1"),  # decode: one pass either way
    (16, 16, 1, "rows"), (16, 8, 2, "rows"),  # B >= 16: rows everywhere
])
def test_default_kernel_reads_kv_the_fewest_times(batch, group, q_len, want):
    assert default_kernel(batch, group, q_len, 128) == want


def test_attention_features_follow_the_default_kernel():
    # nem-like verify (16-head groups, head dim 128) at d = 5: the rows kernel's one 128-row tile, no extra pass;
    # at d = 4 v1's one 64-row tile (16 heads x 4 rows)
    f5 = attention_features(1, 2, 16, 5, 128, 1 << 20, 132, 1024.0)
    f4 = attention_features(1, 2, 16, 4, 128, 1 << 20, 132, 1024.0)
    assert (f5["tiling"], f5["extra_pass_bytes"]) == ("128x1", 0.0)
    assert (f4["tiling"], f4["extra_pass_bytes"]) == ("64x1", 0.0)


def test_fp8_kv_features_follow_the_fp8_kernels():
    """fp8 K/V: the features are the fp8 launcher's (`default_kernel(kv_fp8=True)`): never v1's 64-row blocks. A
    nem-like d = 4 verify (64 rows) at B = 1 with the ws kernel measured: one 64-row ws block; without it (kernel
    set before ws), the rows kernel's one 64-row tile; a q35-like decode: rows tiles of 16 rows (8 heads, padded)."""
    kv8 = 2 * 2 * 128.0  # fp8 K and V of 2 KV heads at head dim 128: one byte an element
    assert default_kernel(1, 16, 4, 128, kv_fp8=True) == "rows"
    assert default_kernel(1, 16, 4, 128, ws=True, kv_fp8=True) == "ws"
    assert default_kernel(1, 16, 1, 128, ws=True, kv_fp8=True) == "rows"
    ws = attention_features(1, 2, 16, 4, 128, 1 << 20, 132, kv8, "wmtp+ws3")
    rows = attention_features(1, 2, 16, 4, 128, 1 << 20, 132, kv8, "wmtp")
    bf16 = attention_features(1, 2, 16, 4, 128, 1 << 20, 132, 2 * kv8, "wmtp")
    assert ws["tiling"] == "ws64x1" and rows["tiling"] == "64x1" and bf16["tiling"] == "64x1"
    # nem d = 9: 144 rows. fp8 ws blocks hold at most 128 rows (two blocks, one extra K/V pass); bf16 ws3 one block
    ws9 = attention_features(1, 2, 16, 9, 128, 1 << 20, 132, kv8, "wmtp+ws3")
    bf9 = attention_features(1, 2, 16, 9, 128, 1 << 20, 132, 2 * kv8, "wmtp+ws3")
    assert (ws9["tiling"], ws9["extra_pass_bytes"]) == ("ws128x2", (1 << 20) * kv8)
    assert (bf9["tiling"], bf9["extra_pass_bytes"]) == ("ws192x1", 0.0)
