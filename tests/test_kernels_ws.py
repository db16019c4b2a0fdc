"""The warp-specialized paged attention kernel (`measure/kernels/paged_ws.py`): its shared-memory plan on any
machine; its answers against the fp64 reference on a Hopper GPU (Gluon warp specialization has no CPU interpreter)."""

from __future__ import annotations

import pytest
import torch

from ws_checks import against_fp64, case, probe

from wmtp.kernel_plan import (WS3_SET, WS_SET, attention_features, default_kernel, feature_backend, ws_default, ws_plan,
                              ws_tiling)

ws = pytest.importorskip("wmtp.measure.kernels.paged_ws")
from wmtp.measure.kernels.gluon_support import build_failure  # noqa: E402 (after the skip, with the module)

HOPPER = torch.cuda.is_available() and ws.hopper(torch.device("cuda"))
SMEM = 227 * 1024  # bytes a Hopper block may use


@pytest.mark.parametrize("rows", [1, 16, 64, 65, 112, 128, 144, 256])
@pytest.mark.parametrize("hd", [64, 128, 256])
@pytest.mark.parametrize("block_n", [None, 32])
@pytest.mark.parametrize("max_rows", [128, 192])
def test_tiling_fits_shared_memory(rows, hd, block_n, max_rows):
    bm, mb, bn, ns, nw = ws_tiling(rows, hd, block_n, max_rows=max_rows)
    assert bm in (64, 128, 192) and mb * bm >= rows and (mb - 1) * bm < rows  # fewest row blocks that cover the rows
    assert bm != 192 or (max_rows == 192 and hd < 256 and 128 < rows <= 192)
    assert nw == bm // 16  # one warpgroup per 64 rows
    q_rows = 256 if bm == 192 else bm  # the kernel's Q tile: a power of two rows
    q_bytes, stage = q_rows * hd * 2, 2 * bn * hd * 2  # Q tile; K and V tiles of one stage (bf16)
    assert 2 <= ns <= 6 and q_bytes + ns * stage + 1024 <= SMEM
    assert ns == 6 or q_bytes + (ns + 1) * stage + 1024 > SMEM  # as many stages as fit, up to 6


def test_tiling_by_hand():
    # 112 rows (16 heads x d = 7), head dim 256: one 128-row tile; 64 KiB of Q + two 64 KiB stages of 64 keys
    assert ws_tiling(112, 256) == (128, 1, 64, 2, 8)
    # same rows in 64-row tiles: two programs of 32-key tiles (16 KiB each of K and V); 32 KiB of Q leave room for six
    assert ws_tiling(112, 256, max_rows=64) == (64, 2, 32, 6, 4)
    # 64-key tiles at 64 rows (asked for): 64 KiB stages, three fit beside 32 KiB of Q
    assert ws_tiling(40, 256, block_n=64) == (64, 1, 64, 3, 4)
    # head dim 128: 32 KiB stages, six fit beside 32 KiB of Q
    assert ws_tiling(112, 128) == (128, 1, 64, 6, 8)
    # 144 rows (16 heads x d = 9), head dim 128, max_rows = 192: one 192-row block (12 warps), Q held in a 256-row
    # tile (64 KiB); 32 KiB stages: (227 KiB - 1 KiB - 64 KiB) // 32 KiB = 5
    assert ws_tiling(144, 128, max_rows=192) == (192, 1, 64, 5, 12)
    # the same at head dim 256 keeps two 128-row blocks (three warpgroups' accumulators would not fit)
    assert ws_tiling(144, 256, max_rows=192) == ws_tiling(144, 256) == (128, 2, 64, 2, 8)
    # more than 192 rows: 128-row blocks
    assert ws_tiling(208, 128, max_rows=192)[:2] == (128, 2)
    with pytest.raises(ValueError):
        ws_tiling(112, 256, max_rows=32)
    with pytest.raises(ValueError):
        ws_tiling(112, 256, max_rows=256)


def test_plan_by_hand():
    # q122 verify d = 7 at 1M, B = 1 on 132 SMs: 112 rows, one 128-row block per KV head; one program per SM,
    # so 66 splits per KV head (each 15,888 keys, far above 4 tiles); head dim 256 keeps one consumer
    p = ws_plan(1, 2, 16, 7, 256, 1 << 20, 132)
    assert (p.kernel, p.block_m, p.m_blocks, p.splits, p.block_n, p.num_stages, p.consumers) == \
        ("ws", 128, 1, 66, 64, 2, 1)
    # nem (head dim 128) at the same d: two consumer partitions of 64 rows
    assert ws_plan(1, 2, 16, 7, 128, 1 << 20, 132).consumers == 2
    # d = 9 with max_rows = 192: one 192-row block of three consumers, still one program per SM (66 splits)
    p3 = ws_plan(1, 2, 16, 9, 128, 1 << 20, 132, max_rows=192)
    assert (p3.block_m, p3.m_blocks, p3.consumers, p3.splits) == (192, 1, 3, 66)
    assert ws_plan(1, 2, 16, 9, 128, 1 << 20, 132).consumers == 3  # the default
    assert ws_plan(1, 2, 16, 9, 128, 1 << 20, 132, max_rows=128).consumers == 2  # two 128-row blocks
    # consumers given: the partitions of a 128-row block, so d = 9 is two 128-row blocks of that many (not silently
    # one 192-row block of three); with max_rows = 192 too it is an error, as is a count a 128-row block cannot take
    for c in (1, 2):
        pc = ws_plan(1, 2, 16, 9, 128, 1 << 20, 132, consumers=c)
        assert (pc.block_m, pc.m_blocks, pc.consumers, pc.splits) == (128, 2, c, 33)
        with pytest.raises(ValueError, match="three consumer partitions"):
            ws_plan(1, 2, 16, 9, 128, 1 << 20, 132, consumers=c, max_rows=192)
    assert ws_plan(1, 2, 16, 13, 128, 1 << 20, 132, consumers=2, max_rows=192).m_blocks == 2  # 208 rows: 128-row blocks
    with pytest.raises(ValueError, match="must be 1 or 2, got 3"):
        ws_plan(1, 2, 16, 9, 128, 1 << 20, 132, consumers=3)
    # a short context caps the splits at 4 tiles each: 1000 keys / (4 x 32) -> 8 splits (64-row block, 32 keys)
    assert ws_plan(1, 2, 8, 1, 256, 1000, 132).splits == 8
    # B = 8 decode of 16-head groups: 8 x 2 programs per split column, 132 // 16 = 8 splits
    assert ws_plan(8, 2, 16, 1, 256, 1 << 20, 132).splits == 8
    with pytest.raises(ValueError):
        ws_plan(1, 2, 16, 17, 256, 1000, 132)  # 272 rows: more than two 128-row blocks
    with pytest.raises(ValueError):
        ws_plan(1, 2, 16, 1, 96, 1000, 132)  # head dim 96: no tile


def test_default_rule():
    # B <= 2: every shape the kernel takes, decode too
    assert all(ws_default(b, g, d, hd) for b in (1, 2) for g in (8, 16) for d in (1, 3, 9) for hd in (128, 256))
    # B = 3..8: verifies of more than 64 rows per KV group only (16 x 5 = 80 yes; 8 x 8 = 64 no; decode no)
    assert ws_default(4, 16, 5, 256) and not ws_default(4, 8, 8, 256) and not ws_default(8, 16, 1, 128)
    assert not ws_default(16, 16, 7, 256)  # B >= 16: the rows kernel
    assert not ws_default(1, 16, 17, 256) and not ws_default(1, 8, 1, 96)  # rows or head dim it cannot take
    # default_kernel offers ws only when told it can run; otherwise its earlier answers stand
    assert default_kernel(1, 16, 7, 256, ws=True) == "ws"
    assert default_kernel(1, 16, 7, 256) == "rows" and default_kernel(1, 16, 3, 256) == "v1"


def test_features_follow_the_kernel_set():
    kw = dict(batch=1, kv_heads=2, group=16, q_len=7, head_dim=256, keys=1 << 20, sm_count=132)
    bf16 = 4 * 256 * 2  # K and V, two bytes each, two KV heads, per token
    old = attention_features(**kw, kv_bytes_per_token=bf16, backend="wmtp")
    new = attention_features(**kw, kv_bytes_per_token=bf16, backend="wmtp+ws")
    fp8 = attention_features(**kw, kv_bytes_per_token=bf16 / 2, backend="wmtp+ws")
    assert old["tiling"] == "128x1" and new["tiling"] == "ws128x1"
    assert new["splits"] == 66.0  # one program per SM (ws_plan), against the rows kernel's 4 waves
    # fp8 K/V, B = 1 verify: the ws kernel's fp8 tiles, 64-row blocks at head dim 256 (112 rows: two blocks)
    assert (fp8["tiling"], fp8["extra_pass_bytes"]) == ("ws64x2", float(1 << 20) * bf16 / 2)
    assert feature_backend("wmtp", WS_SET) == "wmtp+ws" and feature_backend("wmtp", WS3_SET) == "wmtp+ws3"
    assert feature_backend("wmtp", None) == "wmtp" and feature_backend("flashinfer", WS_SET) == "flashinfer"
    # nem d = 9 (16 heads x 9 = 144 rows, head dim 128): a profile of the first ws set read K/V twice (two 128-row
    # blocks); one of the ws3 set, once (a 192-row block); both one program per SM: 132 // (2 KV heads x blocks)
    nem = dict(kw, q_len=9, head_dim=128)
    ws = attention_features(**nem, kv_bytes_per_token=4 * 128 * 2, backend="wmtp+ws")
    ws3 = attention_features(**nem, kv_bytes_per_token=4 * 128 * 2, backend="wmtp+ws3")
    assert (ws["tiling"], ws["splits"], ws["extra_pass_bytes"]) == ("ws128x2", 33.0, (1 << 20) * 4 * 128 * 2)
    assert (ws3["tiling"], ws3["splits"], ws3["extra_pass_bytes"]) == ("ws192x1", 66.0, 0.0)


MIB = 1 << 20


@pytest.mark.parametrize("backend, want", [
    # nem-like verify (B = 1, 2 KV heads, 16-head groups, head dim 128) at d = 12: 192 rows, 1M keys of 1 KiB each
    # (K and V, 2 KV heads, 128 bf16 each). wmtp+ws: two 128-row ws blocks, 132 // (2 heads x 2 blocks) = 33 splits
    ("wmtp+ws", ("ws128x2", 2.0, 4.0 * 2 * 128 * 2 * MIB * 128, 1024.0 * MIB, 2.0 * 12 * 2 * 16 * 33 * 128 * 4, 33.0)),
    # wmtp+ws3: one 192-row block, 132 // 2 = 66 splits, K/V read once
    ("wmtp+ws3", ("ws192x1", 3.0, 4.0 * 2 * 192 * 1 * MIB * 128, 0.0, 2.0 * 12 * 2 * 16 * 66 * 128 * 4, 66.0)),
    # wmtp (no ws): the rows kernel (two 128-row tiles; v1 would cut four blocks of 4 heads), 4 waves: 528 // 4 = 132
    ("wmtp", ("128x2", 5.0, 4.0 * 2 * 128 * 2 * MIB * 128, 1024.0 * MIB, 2.0 * 12 * 2 * 16 * 132 * 128 * 4, 132.0)),
    # FlashInfer FA2: 192 packed rows -> 128-row query tiles, two of them; 2 CTAs per SM: 264 // 4 = 66 chunks
    ("flashinfer", ("fa2:128x2", 3.0, 4.0 * 2 * 128 * 2 * MIB * 128, 1024.0 * MIB, 2.0 * 12 * 2 * 16 * 66 * 128 * 4,
                    66.0)),
])
def test_features_of_each_kernel_set_by_hand(backend, want):
    """A profile's attention features by kernel set, from the tilings by hand: the older sets (v1+rows+ws, v1+rows,
    flashinfer) keep what they gave before the 192-row block existed."""
    got = attention_features(1, 2, 16, 12, 128, MIB, 132, 1024.0, backend)
    keys = ("tiling", "merge_iters", "padded_flops", "extra_pass_bytes", "mid_bytes", "splits")
    assert tuple(got[k] for k in keys) == want


@pytest.mark.parametrize("backend", ["wmtp", "wmtp+ws", "wmtp+ws3"])
def test_features_where_ws_is_not_the_default_by_hand(backend):
    # B = 4 decode (8-head groups, head dim 256): never ws; v1's 8 heads in one 16-row tile, ceil(4 x 132 / 8) = 66
    dec = attention_features(4, 2, 8, 1, 256, 65536, 132, 2048.0, backend)
    assert (dec["tiling"], dec["splits"], dec["extra_pass_bytes"]) == ("16x1", 66.0, 0.0)
    # B = 2 verify d = 5 over 4096 keys (40 rows, 1 KV head): ws (B <= 2) in both ws sets, one 64-row block of 32-key
    # tiles: 132 // 2 = 66 splits, capped at 4096 / (4 x 32) = 32; without ws v1's one 64-row block (8 heads x 5):
    # ceil(4 x 132 / 2) = 264 splits, capped at 4096 / 64 = 64
    ver = attention_features(2, 1, 8, 5, 256, 4096, 132, 1024.0, backend)
    assert (ver["tiling"], ver["splits"]) == (("64x1", 64.0) if backend == "wmtp" else ("ws64x1", 32.0))


@pytest.mark.skipif(not HOPPER, reason="the ws kernel needs a Hopper GPU")
@pytest.mark.parametrize("shape", [(16, 2, 256), (32, 2, 256), (32, 2, 128), (8, 1, 64), (16, 1, 64)])
@pytest.mark.parametrize("d", [1, 2, 5, 7, 9, 12])
@pytest.mark.parametrize("kw", [{}, dict(block_n=32), dict(max_rows=64), dict(num_splits=37), dict(consumers=2),
                                dict(consumers=2, block_n=32), dict(max_rows=192), dict(max_rows=128),
                                dict(pdl=True), dict(pdl="late"), dict(merge=dict(split_block=128, block_d=32)),
                                dict(pdl="late", merge=dict(split_block=128, block_d=16, num_warps=1)),
                                dict(loop="paired"), dict(loop="pingpong"), dict(loop="pingpong", max_rows=128),
                                dict(loop="pingpong", num_splits=37), dict(loop="overlap"),
                                dict(loop="overlap", num_splits=37), dict(loop="overlap", max_rows=128),
                                dict(loop="overlap-pp"), dict(loop="overlap-pp", num_splits=37)])
def test_ws_against_fp64(shape, d, kw):
    against_fp64(shape, d, kw, seed=d * 31 + shape[0])


@pytest.mark.skipif(not HOPPER, reason="the ws kernel needs a Hopper GPU")
def test_ws_rejects_what_it_cannot_run():
    q, k, v, ptr, ind, qo = case(16, 2, 256, 1, [100], seed=1)
    with pytest.raises(ValueError):  # K fp8, V bf16
        ws.ws_attention(q, k.to(torch.float8_e4m3fn), v, ptr, ind, None, 1, 100)
    q2, k2, v2, ptr2, ind2, qo2 = case(16, 2, 32, 1, [100], seed=2)
    with pytest.raises(ValueError):
        ws.ws_attention(q2, k2, v2, ptr2, ind2, None, 1, 100)



def test_an_unknown_loop_order_is_refused_before_any_launch():
    q = torch.zeros(1, 16, 128, dtype=torch.bfloat16)
    k = torch.zeros(4, 2, 128, dtype=torch.bfloat16)
    ind = torch.zeros(4, dtype=torch.int32)
    with pytest.raises(ValueError, match="loop must be one of serial, paired, pingpong"):
        ws.ws_attention(q, k, k, torch.tensor([0, 4], dtype=torch.int32), ind, None, 1, 4, loop="fa3")
    with pytest.raises(ValueError, match="fp8 K/V runs the serial loop only"):  # the other orders: bf16 measured only
        k8 = k.to(torch.float8_e4m3fn)
        ws.ws_attention(q, k8, k8, torch.tensor([0, 4], dtype=torch.int32), ind, None, 1, 4, loop="paired")


@pytest.mark.parametrize("rows, head_dim, consumers, max_rows", [(112, 128, 2, 128), (144, 128, 3, 192),
                                                                 (112, 256, 1, 128)])
@pytest.mark.parametrize("loop", [1, 2])
def test_the_paired_loops_compile_without_new_spills(rows, head_dim, consumers, max_rows, loop):
    """The paired / ping-pong orders hold the previous tile's P beside the next S: on the 128- and 192-row blocks
    below head dim 256 they must build for sm_90 and spill (ptxas -v) at most a few registers more than the serial
    order (16 bytes; paired with three consumers spills 8 under Triton 3.9, where the dropped swap-AB kernel spilled
    128-2152: measure/results/h200-swap-verify); at head dim 256 (one 8-warp partition of 128 rows) the serial
    order already spills, so the test asks only that they build. The hand-over barriers (four, 8 bytes each) come
    out of the plan's 1 KB of slack."""
    got = probe(rows, head_dim, 0, consumers, max_rows, 0, 0, loop)
    serial = probe(rows, head_dim, 0, consumers, max_rows, 0, 0, 0)
    assert got["wgmma"] and got["setmaxnreg"]
    if head_dim < 256:
        assert got["spill_stores"] <= serial["spill_stores"] + 16
    assert got["shared"] <= serial["shared"] + 64 <= SMEM


@pytest.mark.parametrize("rows, head_dim, decode, consumers, max_rows", [
    (112, 256, False, 1, 128), (112, 128, False, 2, 128), (16, 256, True, 1, 128), (144, 128, False, 3, 192),
    (144, 64, False, 3, 192)])
def test_compiles_for_hopper(rows, head_dim, decode, consumers, max_rows):
    """Catches a Triton whose Gluon API moved (3.6 on the lent H200, 3.9 in CI): the kernel must build for sm_90
    (in a process without Triton's interpreter), warp-specialized (register reallocation between partitions), with
    cp.async loads that arrive on the stage's barrier and warpgroup MMAs, in the shared memory its plan budgets: the
    Q tile and the K/V ring, plus a few barriers."""
    got = probe(rows, head_dim, int(decode), consumers, max_rows)
    assert got["setmaxnreg"] and got["cp_async"] and got["wgmma"] and got["arrive_noinc"]
    bm, mb, bn, ns, nw = ws_tiling(rows, head_dim, max_rows=max_rows)
    q_rows = 256 if bm == 192 else bm  # a 192-row block holds Q in a 256-row tile
    planned = q_rows * head_dim * 2 + ns * 2 * bn * head_dim * 2  # bf16 Q tile + K and V tiles per stage
    assert planned <= got["shared"] <= planned + 1024 <= SMEM
    assert got["launch_dependents"] == 0  # no PDL trigger unless asked for


@pytest.mark.parametrize("rows, head_dim, decode, consumers, max_rows", [
    (16, 128, True, 1, 128), (112, 128, False, 2, 128), (144, 128, False, 3, 192)])
@pytest.mark.parametrize("trigger", [1, 2])
def test_pdl_trigger_is_compiled_where_asked(rows, head_dim, decode, consumers, max_rows, trigger):
    """pdl='start' (TRIGGER 1) issues griddepcontrol.launch_dependents once at the program's start; pdl='late'
    (TRIGGER 2) in the consumer partitions, after their loops over the K/V tiles (the first issue in a program
    counts; with three consumers the PTX holds two copies, so the test asks for at least one, not one per consumer)."""
    got = probe(rows, head_dim, int(decode), consumers, max_rows, trigger)
    assert got["launch_dependents"] == 1 if trigger == 1 else got["launch_dependents"] >= 1


def test_pdl_option_is_checked_before_any_launch():
    q = torch.zeros(1, 8, 64, dtype=torch.bfloat16)
    k = torch.zeros(64, 1, 64, dtype=torch.bfloat16)
    ptr = torch.tensor([0, 64], dtype=torch.int32)
    with pytest.raises(ValueError, match="pdl must be"):
        ws.ws_attention(q, k, k, ptr, torch.arange(64, dtype=torch.int32), None, 1, 64, pdl="soon", sm_count=132)


def test_a_triton_that_cannot_compile_it_falls_back(monkeypatch):
    """A Triton whose Gluon no longer builds the kernel: a default choice falls back (once warned, and every later
    shape skips ws), a kernel asked for by name is an error naming the reason."""
    from triton.compiler.errors import CompilationError

    from wmtp.measure.kernels import paged_attention as pa

    def broken(*a, **k):
        raise CompilationError("src", None, "async_copy_global_to_shared has been removed")

    monkeypatch.setattr(ws, "ws_attention", broken)
    monkeypatch.setattr(ws, "_BROKEN", [])
    args = (None,) * 11
    with pytest.warns(RuntimeWarning, match="does not compile"):
        assert pa._try_ws(False, *args) is False
    assert ws._BROKEN and "async_copy_global_to_shared has been removed" in ws._BROKEN[0]
    with pytest.raises(ValueError, match="does not compile here"):
        pa._try_ws(True, *args)
    q = torch.zeros(1, 8, 64, dtype=torch.bfloat16)
    assert not ws.ws_available(q, q)  # and ws is no longer offered
    # what counts as a build failure: Triton's own errors and a failed MLIR pipeline; a launch's error does not
    from triton.runtime.errors import OutOfResources
    assert build_failure(OutOfResources(300000, 232448, "shared memory"))
    assert build_failure(RuntimeError("PassManager::run failed"))
    assert not build_failure(RuntimeError("CUDA error: an illegal memory access was encountered"))
    monkeypatch.setattr(ws, "ws_attention", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("CUDA error: x")))
    with pytest.raises(RuntimeError, match="CUDA error"):
        pa._try_ws(False, *args)  # passed on, not taken for a Triton that cannot build the kernel


@pytest.mark.parametrize("cap, hip, want", [((9, 0), None, True),  # H100 / H200
                                            ((10, 0), None, False), ((12, 0), None, False),  # Blackwell: no wgmma
                                            ((8, 0), None, False),  # Ampere
                                            ((9, 4), "6.2", False)])  # ROCm's MI300X reports gfx942 as 9.4
def test_only_hopper_runs_it(monkeypatch, cap, hip, want):
    """Blackwell has no warpgroup MMA: Triton 3.9 compiling the kernel for sm_100 aborts the process (LLVM ERROR:
    Cannot select: intrinsic %llvm.nvvm.wgmma...), so a `>= 9` test would take down a B200 sweep at its probe."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: cap)
    monkeypatch.setattr(torch.version, "hip", hip)
    assert ws.hopper(0) is want


def test_plan_names_options_the_ws_kernel_lacks():
    """The sweep's tuning variants (measure/bench.py: block_n, num_warps, num_stages) at B = 1, where ws is the
    default on a Hopper: num_warps is no ws option (its warps follow the row block), one ValueError naming it, not
    ws_plan's TypeError; ws-only options (consumers) on the other kernels likewise."""
    from wmtp.measure.kernels import paged_attention as pa

    args = (1, 2, 16, 7, 256, 1 << 20, 132)  # q122 verify d = 7 at 1M, B = 1
    with pytest.raises(ValueError, match="no option num_warps"):
        pa._plan(None, *args, dict(block_n=32, num_warps=8), False, True)
    # where ws cannot run, the same options tune the rows kernel (112 rows: one 128-row tile, v1 would cut two)
    p = pa._plan(None, *args, dict(block_n=32, num_warps=8), False, False)
    assert (p.kernel, p.block_m, p.m_blocks, p.block_n, p.num_warps) == ("rows", 128, 1, 32, 8)
    # ws options it has: 64-row blocks -> two blocks of the 112 rows, 32-key tiles at head dim 256
    p = pa._plan(None, *args, dict(max_rows=64), False, True)
    assert (p.kernel, p.block_m, p.m_blocks, p.block_n) == ("ws", 64, 2, 32)
    with pytest.raises(ValueError, match="consumers applies to the ws kernel only"):
        pa._plan(None, *args, dict(consumers=2), False, False)
    # the ws kernel's 192-row block asked for where ws cannot run (or failed to build): the rows kernel keeps its
    # 128-row tiles (nem d = 9: 144 rows -> two tiles), not a 256-row one
    nem = (1, 2, 16, 9, 128, 1 << 20, 132)
    assert pa._plan(None, *nem, dict(max_rows=192), False, True).block_m == 192
    p = pa._plan(None, *nem, dict(max_rows=192), False, False)
    assert (p.kernel, p.block_m, p.m_blocks) == ("rows", 128, 2)


def test_fp8_kv_features_take_the_models_kv_dtype():
    """The KV dtype is the model's: a verify's bytes include its d new tokens' K/V, so fp8 over ctx <= 2 d keys read
    as more than 3 bytes per K/V element pair and took bf16's tiling, a plan the fp8 launcher never runs."""
    from wmtp.features import work_features
    from wmtp.latency import verify_work
    from wmtp.models import MODELS

    for ctx, backend in ((8, "wmtp+ws"), (10, "wmtp+ws"), (1 << 20, "wmtp+ws"), (8, "wmtp+ws3"), (1 << 20, "wmtp+ws3")):
        got = {}
        for dt in ("fp8", "bf16"):
            spec = MODELS["q35"].with_dtypes(kv_dtype=dt)
            w = [x for x in verify_work(spec, ctx, 9, 1) if x.kind == "verify_attn"][0]
            got[dt] = work_features(w, spec, 132, backend)["tiling"]
        # q35: 8-head groups, head dim 256; d = 9 -> 72 rows. bf16 at B = 1: ws, one 128-row block. fp8: the ws
        # kernel's fp8 tiles hold 64 rows at head dim 256 (`ws_tiling(kv_fp8=True)`): two blocks
        assert got == {"fp8": "ws64x2", "bf16": "ws128x1"}, (ctx, backend, got)


def test_tuning_variants_name_the_kernel_they_tune():
    """`wmtp measure kernels`' tuning variants (num_warps, block_n, ...) are options of the v1 / rows kernels; where
    ws is now the default they name the kernel chosen without it (q122: 16-head groups, head dim 256)."""
    from wmtp.measure.attention import _pinned
    from wmtp.models import get_model

    tune = {("decode_attn", "native"): [dict(num_warps=8)], ("verify_attn", "native"): [dict(block_n=32)],
            ("index_build", "native"): [dict(block=256)]}
    got = _pinned(tune, get_model("q122"), 1, {"verify_attn": 7})
    assert got[("decode_attn", "native")] == [dict(num_warps=8, kernel="v1")]  # decode: v1 below B = 16
    assert got[("verify_attn", "native")] == [dict(block_n=32, kernel="rows")]  # 112 rows: rows reads K/V once
    assert got[("index_build", "native")] == [dict(block=256)]  # not attention: untouched
    assert _pinned(tune, get_model("q122"), 16, {"verify_attn": 7})[("decode_attn", "native")][0]["kernel"] == "rows"
