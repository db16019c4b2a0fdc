"""How the project's paged-attention kernel tiles a problem (pure Python, shared by the launcher in
`wmtp.measure.kernels.paged_attention` and by the latency model, which needs the same numbers as
features: padded tile rows, extra passes over K/V, and the split partials written and re-read).

Rows of one tile are a KV group's query heads times the request's query tokens (q_len). At most
`max_rows` rows share a tile; a group with more rows is cut into `m_blocks` tiles, each of which
walks the keys again (from L2 when they run together). Keys are split across programs
(flash-decoding) so that about `waves` programs per SM run, but no split is shorter than
`min_keys` keys; each split writes fp32 partial outputs that a second kernel merges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


# The split merge (measure/kernels/paged_merge.py) folds up to MERGE_SPLIT_BLOCK splits a round (fewer: the next power
# of two of the splits), MERGE_BLOCK_D dims a program: one round where the kernels before folded 32 splits a round, 64
# dims a program (nem decode at 64K, B = 1: 29.2 -> 26.5 us with the ws kernel's late PDL trigger;
# measure/results/h200-merge run 2). Kernel sets measured with this merge end in MERGE2; their `merge_iters` follow it,
# those before it (and FlashInfer's split merge, which the feature stands in for) MERGE_SPLIT_BLOCK_V1.
MERGE_SPLIT_BLOCK = 128
MERGE_BLOCK_D = 32
MERGE_SPLIT_BLOCK_V1 = 32
MERGE2 = "+m2"


def merge_split_block(splits: int) -> int:
    """Splits the merge folds a round for `splits` splits: the next power of two, at most MERGE_SPLIT_BLOCK."""
    return min(MERGE_SPLIT_BLOCK, 1 << max(0, int(splits) - 1).bit_length())


def merge_rounds(splits: float, backend: str) -> float:
    """The merge's rounds (the `merge_iters` feature) for a feature backend: one per MERGE_SPLIT_BLOCK splits where
    the backend's kernel set ran the one-round merge (MERGE2), else one per MERGE_SPLIT_BLOCK_V1."""
    block = MERGE_SPLIT_BLOCK if backend.endswith(MERGE2) else MERGE_SPLIT_BLOCK_V1
    return float(-(-int(splits) // block))


@dataclass(frozen=True)
class AttentionPlan:
    heads_per_block: int
    m_blocks: int
    block_m: int
    splits: int
    block_n: int
    num_warps: int
    num_stages: int
    kernel: str = "v1"  # v1: heads_per_block heads x Q_PAD rows per tile; rows: packed rows; sub: sub-blocks;
    # ws: packed rows, warp-specialized (loads and MMAs in different warps; Hopper, bf16 / fp16 K/V)
    subs: tuple[int, ...] = ()  # sub: row sub-block sizes of a row block of block_m rows (powers of two)
    consumers: int = 1  # ws: MMA partitions of a row block (one warpgroup of 64 rows each when 2 or 3)


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def choose_splits(max_kv: int, batch: int, kv_heads: int, m_blocks: int, sm_count: int,
                  min_keys: int = 64, waves: int = 4) -> int:
    programs = max(1, batch * kv_heads * m_blocks)
    want = -(-waves * sm_count // programs)
    return int(max(1, min(want, -(-max(max_kv, 1) // min_keys))))


def attention_plan(batch: int, kv_heads: int, group: int, q_len: int, head_dim: int, max_kv: int,
                   sm_count: int, max_rows: int = 64, num_splits: int | None = None,
                   block_n: int | None = None, num_warps: int = 4, num_stages: int = 3) -> AttentionPlan:
    """Defaults from the H200 tuning runs (measure/results): 64-row tiles, 3 pipeline stages,
    32-key tiles for head_dim >= 256 (and for multi-token tiles), 64-key tiles for 1-token decode
    of smaller heads."""
    heads_per_block = min(group, max(1, 2 ** int(math.log2(max(1, max_rows // max(q_len, 1))))))
    m_blocks = -(-group // heads_per_block)
    rows = heads_per_block * q_len
    # 16-row tiles for single-token decode; otherwise at least 64 rows: on the H200, 32-row tiles ran
    # 20-40 % slower than 64-row ones over the same keys (measure/results, verify d = 3, 4).
    block_m = 16 if rows <= 16 else max(64, _next_pow2(rows))
    if block_n is None:
        block_n = 64 if (head_dim < 256 and q_len == 1) else 32
    if num_splits is None:
        num_splits = choose_splits(max_kv, batch, kv_heads, m_blocks, sm_count)
    return AttentionPlan(heads_per_block, m_blocks, block_m, num_splits, block_n, num_warps, num_stages)


ROWS_MAX = 128  # rows per tile of the packed-rows kernel (all of a KV group's rows up to this many)


def rows_tiling(group: int, q_len: int, head_dim: int, max_rows: int | None = None,
                kv_fp8: bool = False) -> tuple[int, int, int, int, int]:
    """Packed-rows kernel tile: (block_m, m_blocks, block_n, num_warps, num_stages). Tile row r of row
    block mb is the KV group's row mb * block_m + r = head * q_len + query (no per-head padding), so a
    group's `group * q_len` rows are padded once, to block_m, and K/V are read once per split when they
    fit one tile. `kv_fp8`: the KV cache is fp8 (decode tiles take the wider key tiles, see below)."""
    rows = max(1, group * q_len)
    cap = max_rows or ROWS_MAX
    block_m = max(16, _next_pow2(min(rows, cap)))
    m_blocks = -(-rows // block_m)
    # Tile options: the fastest of the tuning variants at 1M, B = 1 on the H200
    # (measure/results/h200-kernels-v2, step "tune"; verify tiles of <= 32 rows: h200-kernels-v4, where 64-key
    # tiles (128 for head_dim < 256), 4 warps, 3 stages ran 19-28 % faster than the decode's options, B = 1 and 16).
    # fp8 KV decode: the same options, with fp16 dots, ran 1.6-1.8x faster than the decode's options at 1M, B = 1 and
    # 16 (h200-kernels-v4, round 3: q35 B = 16 9.46 -> 5.72 ms, nem 5.27 -> 2.90 ms); below head dim 256 one warp per
    # tile (no cross-warp row maxima; the [16, 128] fp32 accumulator fits its registers), 64-key tiles, 4 stages:
    # nem B = 16 2.91 -> 2.22-2.36 ms, 85-90 % of copy, B = 1 0.213 -> 0.180 ms (measure/results/h200-fp8-ablation)
    if kv_fp8 and block_m <= 16 and q_len == 1 and head_dim < 256:
        return block_m, m_blocks, 64, 1, 4
    if (q_len > 1 and block_m <= 32) or (kv_fp8 and block_m <= 16):
        return block_m, m_blocks, 64 if head_dim >= 256 else 128, 4, 3
    if block_m <= 16:
        return block_m, m_blocks, 64 if head_dim < 256 else 32, 4, 2
    if block_m <= 64:
        return block_m, m_blocks, 64 if head_dim < 256 else 32, 4, 3
    return block_m, m_blocks, 64, 8 if head_dim >= 256 else 4, 3


def balanced_splits(max_kv: int, batch: int, kv_heads: int, m_blocks: int, sm_count: int, waves: int = 4,
                    min_keys: int = 64) -> int:
    """KV splits for the packed-rows kernel: the largest count whose programs fill at most `waves` x SMs
    (rounding down, so the last wave is not a small tail), with no split shorter than `min_keys` keys."""
    programs = max(1, batch * kv_heads * m_blocks)
    want = max(1, (waves * sm_count) // programs)
    return int(max(1, min(want, -(-max(max_kv, 1) // min_keys))))


def rows_plan(batch: int, kv_heads: int, group: int, q_len: int, head_dim: int, max_kv: int, sm_count: int,
              max_rows: int | None = None, num_splits: int | None = None, block_n: int | None = None,
              num_warps: int | None = None, num_stages: int | None = None, waves: int | None = None,
              min_keys: int | None = None, kv_fp8: bool = False) -> AttentionPlan:
    """The packed-rows kernel's plan; any argument given overrides its default."""
    block_m, m_blocks, bn, nw, ns = rows_tiling(group, q_len, head_dim, max_rows, kv_fp8)
    if waves is None:  # fp8 decode below head dim 256: 8 programs per SM in all (h200-fp8-ablation: nem B = 16 2.75 ->
        # 2.36 ms, B = 1 0.200 -> 0.180 ms; at head dim 256 8 waves cost 8 % at B = 1)
        waves = 8 if kv_fp8 and q_len == 1 and head_dim < 256 else 4
    if num_splits is None:
        num_splits = balanced_splits(max_kv, batch, kv_heads, m_blocks, sm_count, waves, min_keys or 64)
    return AttentionPlan(0, m_blocks, block_m, num_splits, block_n or bn, num_warps or nw, num_stages or ns, "rows")


SUB_PART_MAX = 64  # largest row sub-block of the sub-block kernel (one warpgroup's MMA height)
SUB_ROWS_MAX = 128  # rows per program of the sub-block kernel (its accumulators live in registers)


def sub_parts(rows: int, part_max: int = SUB_PART_MAX, max_parts: int = 4) -> tuple[int, tuple[int, ...]]:
    """(padded rows, sub-block sizes) for `rows` rows: a multiple of 16 cut into at most `max_parts` powers of
    two of 16..part_max, largest first (80 -> 64 + 16; 112 -> 64 + 32 + 16); rounded up further only where
    `max_parts` pieces cannot cover it."""
    if rows < 1 or part_max < 16 or part_max & (part_max - 1):
        raise ValueError(f"need rows >= 1 and part_max a power of two >= 16, got {rows}, {part_max}")
    padded = -(-rows // 16) * 16
    while True:
        parts = [part_max] * (padded // part_max)
        rest, size = padded % part_max, part_max // 2
        while rest:
            if rest >= size:
                parts.append(size)
                rest -= size
            size //= 2
        if len(parts) <= max_parts:
            return padded, tuple(parts)
        padded += 16


def sub_tiling(group: int, q_len: int, head_dim: int, max_rows: int | None = None,
               part_max: int | None = None, pow2: bool = False) -> tuple[int, int, tuple[int, ...], int, int, int]:
    """Sub-block kernel tile: (rows per block, m_blocks, sub-blocks, block_n, num_warps, num_stages). A
    group's `group * q_len` rows are cut into the fewest row blocks of at most `max_rows` rows, of equal
    size (rounded up to 16), each held by one program over one read of its K/V tiles. `pow2`: one sub-block
    per row block, padded to a power of two (the packed-rows kernel's tiles, `rows_tiling`)."""
    rows = max(1, group * q_len)
    cap = max(16, max_rows or SUB_ROWS_MAX)
    if pow2:
        block = max(16, _next_pow2(min(rows, cap)))
        m_blocks, subs = -(-rows // block), (block,)
    else:
        m_blocks = -(-rows // cap)
        block, subs = sub_parts(-(-rows // m_blocks), part_max or SUB_PART_MAX)
    if block <= 16:
        return block, m_blocks, subs, 64 if head_dim < 256 else 32, 4, 2
    if block <= 64:
        return block, m_blocks, subs, 64 if head_dim < 256 else 32, 4, 3
    return block, m_blocks, subs, 64, 8 if head_dim >= 256 else 4, 3


def sub_plan(batch: int, kv_heads: int, group: int, q_len: int, head_dim: int, max_kv: int, sm_count: int,
             max_rows: int | None = None, part_max: int | None = None, num_splits: int | None = None,
             block_n: int | None = None, num_warps: int | None = None, num_stages: int | None = None,
             waves: int | None = None, min_keys: int | None = None, pow2: bool = False) -> AttentionPlan:
    """The sub-block kernel's plan (splits as `rows_plan`); any argument given overrides its default."""
    block, m_blocks, subs, bn, nw, ns = sub_tiling(group, q_len, head_dim, max_rows, part_max, pow2)
    if num_splits is None:
        num_splits = balanced_splits(max_kv, batch, kv_heads, m_blocks, sm_count, waves or 4, min_keys or 64)
    return AttentionPlan(0, m_blocks, block, num_splits, block_n or bn, num_warps or nw, num_stages or ns, "sub",
                         subs)


WS_ROWS_MAX = 256  # a KV group's rows the ws kernel takes (row blocks of <= 128, or one of 192)
WS_SMEM = 227 * 1024  # shared memory a Hopper block may use
WS_HEAD_DIMS = (64, 128, 256)
# the kernel sets a profile measured with the ws kernel records (`attention_kernels`): `ws` with row blocks of up to
# 128 rows (sessions before 2026-12-01), `ws3` with 192-row blocks of three consumers too (head dim < 256); a set
# ending in MERGE2 ran the one-round merge (and, with the ws kernel, its late PDL trigger), from 2026-12-02
WS_SET = "v1+rows+ws"
WS3_SET = "v1+rows+ws3"
BASE_SET = "v1+rows"
# a kernel set -> the feature backend whose tiling and merge it ran
WS_BACKENDS = {WS_SET: "wmtp+ws", WS3_SET: "wmtp+ws3", WS3_SET + MERGE2: "wmtp+ws3" + MERGE2,
               BASE_SET + MERGE2: "wmtp" + MERGE2}
WS_MAX_ROWS = {"wmtp+ws": 128, "wmtp+ws3": 192}  # ws_plan's max_rows for each feature backend (less MERGE2)
WMTP_SETS = (BASE_SET, *WS_BACKENDS)  # every kernel set wmtp's own backend has recorded (`kernel_set`)


PRICED_BACKENDS = ("wmtp", "flashinfer")  # the backends whose tiling `attention_features` follows


def kernels_problem(backend: str | None, provenance_backend: str | None, kernels: str | None) -> str | None:
    """Why a profile's attention cannot be priced with the tiling it was measured with, else None: the backend the
    cost model reads (`backend`, else the provenance's) one this wmtp does not know (it was priced with wmtp's first
    kernels' tiling, silently), or for wmtp's own kernels a kernel set this wmtp does not know."""
    name = backend or provenance_backend or "wmtp"
    if name not in PRICED_BACKENDS:
        return (f"was measured with the attention backend {name!r}, which this wmtp does not know (known: "
                f"{', '.join(PRICED_BACKENDS)}): its attention would be priced with another backend's tiling")
    if name == "wmtp" and kernels is not None and kernels not in WMTP_SETS:
        return (f"was measured with the kernel set {kernels!r}, which this wmtp does not know (known: "
                f"{', '.join(WMTP_SETS)}): its attention would be priced with another tiling; use the wmtp version "
                "that measured it, or re-measure")
    return None


def feature_backend(backend: str, attention_kernels: str | None) -> str:
    """The tiling a profile's attention features follow: its backend's, and for wmtp's own kernels the set it
    was measured with (`wmtp+ws` / `wmtp+ws3` where its sweep ran the ws kernel, of up to 128 / 192-row blocks; with
    MERGE2 appended where it ran the one-round merge)."""
    return WS_BACKENDS.get(attention_kernels, backend) if backend == "wmtp" else backend


def ws_takes(rows: int, head_dim: int) -> bool:
    """Whether the ws kernel has a tile for a KV group of `rows` rows at `head_dim`."""
    return rows <= WS_ROWS_MAX and head_dim in WS_HEAD_DIMS


def ws_tiling(rows: int, head_dim: int, block_n: int | None = None, stages: int | None = None,
              max_rows: int = 192, kv_fp8: bool = False) -> tuple[int, int, int, int, int]:
    """ws kernel tile: (block_m, m_blocks, block_n, stages, consumer warps). 64-row blocks up to 64 rows (or with
    max_rows = 64), else 128-row blocks (two warpgroups); below head dim 256 (and max_rows = 192, the default), one
    block of 192 rows (three consumer warpgroups) for a group of 129..192 rows (nem d = 9..12 at 1M: 0.40-0.41 ms
    against 0.59-0.60 with two 128-row blocks: measure/results/h200-ws3; at head dim 256 a warpgroup's fp32
    accumulator for 64 rows takes 128 registers a thread: three do not fit; four spill at head dim 128). 32-key
    tiles for 64-row blocks of head dim 256 (H200, 1M: 0.99-1.00x the decode against 1.15-1.22x with 64:
    measure/results/h200-ws), else 64 (128 below head dim 128); the K/V ring takes as many stages (2..6) as fit
    beside the Q tile in 227 KiB of shared memory (bf16). `kv_fp8`: row blocks of at most 128 rows (64 at head dim
    256), 64-key tiles at head dim 256 and 128 below; the fp8 ring takes what is left beside the Q tile and the
    converter's two fp16 stages."""
    if max_rows not in (64, 128, 192):
        raise ValueError(f"max_rows must be 64, 128 or 192, got {max_rows}")
    if kv_fp8:  # at head dim 256 a 128-row block's 8 consumer warps beside the producer's and the converter's
        # leave 128 registers a thread at launch: ptxas needs 158 for its MMA (Triton 3.9, sm_90)
        max_rows = 64 if head_dim == 256 else min(max_rows, 128)
    if rows <= 64 or max_rows == 64:
        block_m = 64
    elif rows <= 128 or max_rows == 128 or head_dim == 256 or rows > 192:
        block_m = 128
    else:
        block_m = 192
    if kv_fp8:  # a tile took about 1 us whatever its bytes: 32-key fp8 tiles ran at half the bf16 ones' byte rate;
        # twice the keys: q35 / q122 decode 0.54 -> 0.41 ms, verify 20-25 % faster (measure/results/h200-ws-fp8)
        bn = block_n or (64 if head_dim == 256 else 128)
    else:
        bn = block_n or (128 if head_dim < 128 else 32 if head_dim == 256 and block_m == 64 else 64)
    q_rows = 256 if block_m > 128 else block_m  # the kernel holds Q in a tile of a power of two rows
    room = WS_SMEM - 1024 - q_rows * head_dim * 2 - (2 * 2 * bn * head_dim * 2 if kv_fp8 else 0)
    fit = room // (2 * bn * head_dim * (1 if kv_fp8 else 2))
    return block_m, -(-rows // block_m), bn, stages or max(2, min(6, fit)), block_m // 16


def ws_plan(batch: int, kv_heads: int, group: int, q_len: int, head_dim: int, max_kv: int, sm_count: int,
            num_splits: int | None = None, block_n: int | None = None, num_stages: int | None = None,
            waves: int = 1, max_rows: int | None = None, consumers: int | None = None,
            kv_fp8: bool = False) -> AttentionPlan:
    """The ws kernel's plan: one program per SM (its ring fills shared memory), so `waves` x SMs programs in all,
    each split at least 4 tiles long; two consumer partitions for 128-row blocks below head dim 256 (nem 1M, d = 5..8:
    0.316-0.331 ms against 0.335-0.346 with one), three for 192-row blocks. `consumers` (1 or 2): the partitions of a
    128-row block (64-row blocks have one), so given, row blocks are of at most 128 rows unless `max_rows` says
    otherwise (192 with consumers is an error where it makes a 192-row block: that block runs three). `max_rows`
    None: 192 (`ws_tiling`), 128 where `consumers` is given or K/V are fp8 (`kv_fp8`: `ws_tiling`'s fp8 tiles)."""
    rows = group * q_len
    if not ws_takes(rows, head_dim):
        raise ValueError(f"the ws kernel takes up to {WS_ROWS_MAX} rows per KV group and head dim "
                         f"{WS_HEAD_DIMS}, got {rows} rows, head dim {head_dim}")
    if consumers is not None and consumers not in (1, 2):
        raise ValueError(f"consumers (the partitions of a 128-row block) must be 1 or 2, got {consumers}")
    cap = max_rows if max_rows is not None else 192 if consumers is None and not kv_fp8 else 128
    block_m, m_blocks, bn, ns, nw = ws_tiling(rows, head_dim, block_n, num_stages, cap, kv_fp8)
    if block_m == 192 and consumers is not None:
        raise ValueError(f"consumers={consumers} with max_rows=192: {rows} rows make one 192-row block, which runs "
                         "three consumer partitions; give max_rows=128 for 128-row blocks")
    if consumers is None:
        consumers = 2 if block_m == 128 and head_dim < 256 else 1
    consumers = 3 if block_m == 192 else consumers if block_m == 128 else 1
    if num_splits is None:
        per = max(1, waves * sm_count // max(1, batch * kv_heads * m_blocks))
        num_splits = max(1, min(per, -(-max_kv // (4 * bn))))
    return AttentionPlan(0, m_blocks, block_m, num_splits, bn, nw, ns, "ws", consumers=consumers)


def ws_default(batch: int, group: int, q_len: int, head_dim: int) -> bool:
    """Where the ws kernel is the default (bf16 K/V on Hopper; measure/results/h200-ws, 64K-1M): every shape at
    B <= 2 (verify 2-54 % faster than the kernel before it, decode within 2 %); at B = 3..8 verifies of more than 64
    rows per KV group, where the other kernels run their MMAs after the loads (B = 4 / 8, d = 5..9: 2-25 % faster,
    one shape 2 % slower); smaller tiles and decode at B >= 4 keep the older kernels (ws up to 22 % slower there)."""
    rows = group * q_len
    return ws_takes(rows, head_dim) and (batch <= 2 or (batch <= 8 and q_len > 1 and rows > 64))


def kv_passes(kernel: str, group: int, q_len: int, head_dim: int) -> int:
    """How many times a request's K/V is read per KV head (its row blocks): `v1` cuts a group's heads into blocks of
    at most 64 rows, `rows` packs all `group * q_len` rows into tiles of up to 128, `ws` too (or one block of 129..192
    rows below head dim 256: `ws_tiling`'s default, the kernel set `v1+rows+ws3`)."""
    if kernel == "rows":
        return rows_tiling(group, q_len, head_dim)[1]
    if kernel == "ws":
        return ws_tiling(group * q_len, head_dim)[1]
    return attention_plan(1, 1, group, q_len, head_dim, 1, 1).m_blocks


def default_kernel(batch: int, group: int, q_len: int, head_dim: int, ws: bool = False, kv_fp8: bool = False) -> str:
    """Which paged-attention kernel a shape runs by default (H200):
    - fp8 K/V (`kv_fp8`; v1 reads bf16 / fp16 only): the ws kernel for verifies where it can run (its converter
      partition: faster than the rows kernel at every fp8 verify measured, the three head shapes, d = 2..9: B = 1..8
      at 64K and 1M by 1.16-2.1x, measure/results/h200-ws-fp8, h200-kv-fp8/run2; B = 9 and 16 at 256K by
      1.02-1.9x, h200-validate-fp8/run1), else the rows kernel (its fp8 decode 11-30 % faster than the ws kernel's);
    - with `ws` (the warp-specialized kernel can run: Hopper, bf16 / fp16 K/V), ws where `ws_default` says;
    - at B >= 16 the rows kernel, decode and verify (measure/results/h200-kernels-v2: decode 27 % faster at B = 16,
      where v1's rounded-up split count leaves a tail wave; verify up to 1.5x faster);
    - below, the rows kernel where it reads K/V fewer times than v1 (a verify whose group x d rows v1 cuts into more
      row blocks: 16-head groups at d >= 5, 8-head groups at d >= 9). At B = 1 and 1M that was as fast or faster on
      every such shape (measure/results/h200-kernels-v4: nem d = 5..8 0.413-0.421 vs 0.457-0.476 ms, d = 9 / 10
      0.748 / 0.750 vs 0.889 / 0.902; q122 d = 9 / 10 1.584 / 1.590 vs 1.645 / 1.648; q122 d = 5..8 and q35 d = 9 / 10
      within 1 %);
    - v1 elsewhere: where both read K/V once, v1 was as fast or faster alone (q122 d = 3 / 4 0.558 vs 0.615 ms, q35
      d = 5..8 0.56 vs 0.62), and as the decode default rows made the dense q35 step at 1M slower inside composed
      steps, 12.27 against 10.53 ms (measure/results/h200-remeasure-rows)."""
    if kv_fp8:
        return "ws" if ws and q_len > 1 and ws_takes(group * q_len, head_dim) else "rows"
    if ws and ws_default(batch, group, q_len, head_dim):
        return "ws"
    if batch >= 16:
        return "rows"
    if q_len > 1 and kv_passes("rows", group, q_len, head_dim) < kv_passes("v1", group, q_len, head_dim):
        return "rows"
    return "v1"


def fa2_cta_tile_q(packed_rows: int, head_dim: int) -> int:
    """FlashInfer FA2's query-tile rows for `packed_rows` = query rows x GQA group (FA2DetermineCtaTileQ,
    SM80+; flashinfer 0.6.0 include/flashinfer/attention/scheduler.cuh)."""
    if packed_rows > 64 and head_dim < 256:
        return 128
    return 64 if packed_rows > 16 else 16


def fa2_q_tiles(q_len: int, group: int, head_dim: int, batch: int = 1) -> int:
    """Query tiles per request of a CUDA-graph FA2 plan with `q_len` rows per request; each tile reads the
    request's K/V once. The graph plan sizes the tile for the longest request the captured batch allows
    (batch * (q_len - 1) + 1 rows)."""
    longest = (batch * (q_len - 1) + 1) * group
    return math.ceil(q_len * group / fa2_cta_tile_q(longest, head_dim))


def fa2_splits(batch: int, kv_heads: int, tiles: int, keys: int, sm_count: int, min_keys: int = 256) -> int:
    """KV chunks per (request, KV head, tile) of FA2's split-KV plan: about 2 CTAs per SM in all."""
    programs = max(1, batch * kv_heads * tiles)
    return int(max(1, min(-(-2 * sm_count // programs), -(-max(keys, 1) // min_keys))))


def flashinfer_attention_features(batch: int, kv_heads: int, group: int, q_len: int, head_dim: int, keys: int,
                                  sm_count: int, kv_bytes_per_token: float) -> dict:
    """The same features for FlashInfer as SGLang plans it (FA2, split-KV, page size 1): the query tiles
    of FA2 (each re-reading K/V), tensor-core tiles of 16/64/128 rows, split partials merged."""
    tile = fa2_cta_tile_q((batch * (q_len - 1) + 1) * group, head_dim) if q_len > 1 else 16
    tiles = fa2_q_tiles(q_len, group, head_dim, batch) if q_len > 1 else -(-group // 16)
    splits = fa2_splits(batch, kv_heads, tiles, keys, sm_count)
    kv_bytes = batch * keys * kv_bytes_per_token
    return {
        "tiling": f"fa2:{tile}x{tiles}",
        "merge_iters": merge_rounds(splits, "flashinfer"),
        "padded_flops": 4.0 * batch * kv_heads * tile * tiles * keys * head_dim,
        "extra_pass_bytes": kv_bytes * (tiles - 1),
        "mid_bytes": 2.0 * batch * q_len * kv_heads * group * splits * head_dim * 4,
        "splits": float(splits),
    }


def attention_features(batch: int, kv_heads: int, group: int, q_len: int, head_dim: int, keys: int,
                       sm_count: int, kv_bytes_per_token: float, backend: str = "wmtp",
                       kv_fp8: bool | None = None) -> dict:
    """Work features the profile fits for paged attention (per launch, all requests), following the tiling of
    the backend that was measured (`wmtp`: the project's kernels before the ws kernel; `wmtp+ws` / `wmtp+ws3`: with
    it, of up to 128 / 192-row blocks, which runs bf16 K/V only; any of them with MERGE2 appended: measured with the
    one-round merge, `merge_rounds`; `flashinfer`: FA2 as SGLang plans it). `kv_fp8`:
    whether the KV cache is fp8; None: taken from `kv_bytes_per_token` (exact for a sweep row, whose bytes are its
    keys' K/V)."""
    if backend == "flashinfer":
        return flashinfer_attention_features(batch, kv_heads, group, q_len, head_dim, keys, sm_count,
                                             kv_bytes_per_token)
    if kv_fp8 is None:
        kv_fp8 = kv_bytes_per_token < 3 * head_dim * kv_heads  # K and V of one byte per element, not two
    tiling = backend.removesuffix(MERGE2)
    kernel = default_kernel(batch, group, q_len, head_dim, ws=tiling in WS_MAX_ROWS, kv_fp8=kv_fp8)
    if kernel == "ws":
        plan = ws_plan(batch, kv_heads, group, q_len, head_dim, keys, sm_count,
                       max_rows=None if kv_fp8 else WS_MAX_ROWS[tiling], kv_fp8=kv_fp8)
    elif kernel == "rows":
        plan = rows_plan(batch, kv_heads, group, q_len, head_dim, keys, sm_count, kv_fp8=kv_fp8)
    else:
        plan = attention_plan(batch, kv_heads, group, q_len, head_dim, keys, sm_count)
    kv_bytes = batch * keys * kv_bytes_per_token
    return {
        "tiling": f"{'ws' if plan.kernel == 'ws' else ''}{plan.block_m}x{plan.m_blocks}",
        "merge_iters": merge_rounds(plan.splits, backend),
        "padded_flops": 4.0 * batch * kv_heads * plan.block_m * plan.m_blocks * keys * head_dim,
        "extra_pass_bytes": kv_bytes * (plan.m_blocks - 1),
        "mid_bytes": 2.0 * batch * q_len * kv_heads * group * plan.splits * head_dim * 4,
        "splits": float(plan.splits),
    }
