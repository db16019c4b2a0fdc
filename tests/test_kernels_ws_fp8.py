"""fp8 K/V in the warp-specialized kernel (`paged_ws`, KV8: a converter partition turns each fp8 tile into fp16):
its shared-memory plan and sm_90 build on any machine, its answers against fp64 on the dequantized values on a Hopper
GPU, and that it is never a default (no profile has measured it as one)."""

from __future__ import annotations

import pytest
import torch

from kernel_refs import ref_attention

from wmtp.kernel_plan import ws_plan, ws_tiling

ws = pytest.importorskip("wmtp.measure.kernels.paged_ws")

HOPPER = torch.cuda.is_available() and ws.hopper(torch.device("cuda"))
SMEM = 227 * 1024
E4M3 = torch.float8_e4m3fn


def test_fp8_tiling_by_hand():
    # q35 / q122 decode (8 or 16 rows), head dim 256: one 64-row block of 64-key tiles. Shared memory: Q 64 x 256 x 2
    # = 32 KiB, the converter's two fp16 stages 2 x (K + V) x 64 x 256 x 2 = 128 KiB, so (227 - 1 - 32 - 128) KiB = 66
    # KiB for fp8 stages of 2 x 64 x 256 = 32 KiB: 2
    assert ws_tiling(16, 256, kv_fp8=True) == (64, 1, 64, 2, 4)
    # q122 verify d = 5 (80 rows) at head dim 256: 64-row blocks (a 128-row block's 8 warps beside the producer's and
    # the converter's leave too few registers), two of them
    assert ws_tiling(80, 256, kv_fp8=True) == (64, 2, 64, 2, 4)
    # asked-for 32-key tiles: fp16 stages 64 KiB, (227 - 1 - 32 - 64) KiB / 16 KiB = 8 fp8 stages, capped at 6
    assert ws_tiling(16, 256, block_n=32, kv_fp8=True) == (64, 1, 32, 6, 4)
    # nem verify d = 5 (80 rows), head dim 128: one 128-row block of 128-key tiles; Q 32 KiB, fp16 stages 2 x 2 x 128 x
    # 128 x 2 = 128 KiB, fp8 stages 2 x 128 x 128 = 32 KiB: (227 - 1 - 32 - 128) // 32 = 2
    assert ws_tiling(80, 128, kv_fp8=True) == (128, 1, 128, 2, 8)
    # 144 rows never take the 192-row block with fp8 (three consumers and a converter were not built)
    assert ws_tiling(144, 128, max_rows=192, kv_fp8=True) == (128, 2, 128, 2, 8)
    # head dim 64: 128-key tiles; Q 8 KiB, fp16 stages 2 x 2 x 128 x 64 x 2 = 64 KiB, fp8 stages 16 KiB: 9, capped at 6
    assert ws_tiling(16, 64, kv_fp8=True) == (64, 1, 128, 6, 4)


@pytest.mark.parametrize("rows", [1, 16, 64, 80, 128, 144, 256])
@pytest.mark.parametrize("hd", [64, 128, 256])
def test_fp8_tiling_fits_shared_memory(rows, hd):
    bm, mb, bn, ns, nw = ws_tiling(rows, hd, kv_fp8=True)
    assert bm <= (64 if hd == 256 else 128) and mb * bm >= rows > (mb - 1) * bm
    fixed = bm * hd * 2 + 2 * 2 * bn * hd * 2 + 1024  # Q tile (fp16), two fp16 stages of K and V, barriers
    stage = 2 * bn * hd  # one fp8 stage of K and V
    assert 2 <= ns <= 6 and fixed + ns * stage <= SMEM
    assert ns == 6 or fixed + (ns + 1) * stage > SMEM


def test_fp8_plan_consumers():
    # nem d = 5 at 1M, B = 1: one 128-row block, two consumers (as bf16), 66 splits per KV head on 132 SMs
    p = ws_plan(1, 2, 16, 5, 128, 1 << 20, 132, kv_fp8=True)
    assert (p.block_m, p.m_blocks, p.consumers, p.splits) == (128, 1, 2, 66)
    # head dim 256: 64-row blocks of one consumer; two row blocks share the 132 programs: 33 splits each
    p = ws_plan(1, 2, 16, 5, 256, 1 << 20, 132, kv_fp8=True)
    assert (p.block_m, p.m_blocks, p.consumers, p.splits) == (64, 2, 1, 33)


def test_fp8_options_are_checked_before_any_launch():
    q = torch.zeros(1, 8, 64, dtype=torch.bfloat16)
    k = torch.zeros(64, 1, 64, dtype=torch.bfloat16)
    ptr, ind = torch.tensor([0, 64], dtype=torch.int32), torch.arange(64, dtype=torch.int32)
    with pytest.raises(ValueError, match="fp8 K/V only"):  # scales on bf16 K/V would be silently ignored
        ws.ws_attention(q, k, k, ptr, ind, None, 1, 64, k_scale=0.5, sm_count=132)
    with pytest.raises(ValueError, match="both fp8"):
        ws.ws_attention(q, k.to(E4M3), k, ptr, ind, None, 1, 64, sm_count=132)
    big = ws_plan(1, 1, 16, 9, 128, 64, 132, max_rows=192)  # a 192-row block of three consumers
    with pytest.raises(ValueError, match="at most 128 rows"):
        ws.ws_attention(torch.zeros(9, 16, 128, dtype=torch.bfloat16), torch.zeros(64, 1, 128, dtype=E4M3),
                        torch.zeros(64, 1, 128, dtype=E4M3), ptr, ind, torch.tensor([0, 9], dtype=torch.int32), 9,
                        64, plan=big)


def test_fp8_default_kernel_is_ws_for_verifies():
    """fp8 K/V: the ws kernel for verifies at any batch where it can run (measured faster than the rows kernel at
    B = 1..16), the rows kernel for every decode and wherever the ws kernel cannot run; never v1 (bf16 only)."""
    from wmtp.measure.kernels.paged_attention import _plan

    for d in (2, 5, 9):
        assert _plan(None, 1, 2, 16, d, 128, 1 << 20, 132, {}, kv_fp8=True, ws=True).kernel == "ws"
        assert _plan(None, 1, 2, 16, d, 128, 1 << 20, 132, {}, kv_fp8=True, ws=False).kernel == "rows"
        assert _plan(None, 8, 2, 16, d, 128, 1 << 20, 132, {}, kv_fp8=True, ws=True).kernel == "ws"
        assert _plan(None, 9, 2, 16, d, 128, 1 << 20, 132, {}, kv_fp8=True, ws=True).kernel == "ws"
        assert _plan(None, 16, 2, 16, d, 128, 1 << 20, 132, {}, kv_fp8=True, ws=True).kernel == "ws"
    for batch in (1, 4, 16):  # decode: rows even where the bf16 rule takes ws (B = 1)
        assert _plan(None, batch, 2, 16, 1, 128, 1 << 20, 132, {}, kv_fp8=True, ws=True).kernel == "rows"
        assert _plan(None, batch, 2, 8, 1, 256, 1 << 20, 132, {}, kv_fp8=True, ws=False).kernel == "rows"
    assert _plan(None, 1, 2, 16, 5, 128, 1 << 20, 132, {}, kv_fp8=False, ws=True).kernel == "ws"
    # 16 heads x 5 rows at head dim 256: the fp8 ws tiles hold 64 rows, so two blocks
    plan = _plan(None, 1, 2, 16, 5, 256, 1 << 20, 132, {}, kv_fp8=True, ws=True)
    assert (plan.kernel, plan.block_m, plan.m_blocks) == ("ws", 64, 2)


@pytest.mark.parametrize("rows, head_dim, decode, consumers", [
    (16, 256, True, 1), (80, 128, False, 2), (16, 64, True, 1), (64, 256, False, 1)])
def test_fp8_compiles_for_hopper(rows, head_dim, decode, consumers):
    """KV8 builds for sm_90 with this Triton: warp-specialized, cp.async into the fp8 ring, the e4m3 -> fp16
    conversion, warpgroup MMAs, a partition barrier for the converter, in the shared memory the plan budgets."""
    from ws_checks import probe

    max_rows = 64 if head_dim == 256 else 128
    got = probe(rows, head_dim, int(decode), consumers, max_rows, 0, 1)
    assert got["setmaxnreg"] and got["cp_async"] and got["wgmma"] and got["arrive_noinc"] and got["cvt_fp8"]
    assert got["named_barriers"]  # the converter's barrier over its own warps
    bm, mb, bn, ns, nw = ws_tiling(rows, head_dim, max_rows=max_rows, kv_fp8=True)
    planned = bm * head_dim * 2 + 2 * 2 * bn * head_dim * 2 + ns * 2 * bn * head_dim
    assert planned <= got["shared"] <= planned + 1024 <= SMEM


def _case8(hq, hkv, hd, d, n_kv, seed, scales):
    """`ws_checks.case`'s requests with K and V in e4m3 at per-tensor scales (values of about N(0, 1) / scale)."""
    from ws_checks import case

    q, k, v, ptr, ind, qo = case(hq, hkv, hd, d, n_kv, seed)
    return q, (k.float() / scales[0]).to(E4M3), (v.float() / scales[1]).to(E4M3), ptr, ind, qo


@pytest.mark.skipif(not HOPPER, reason="the ws kernel needs a Hopper GPU")
@pytest.mark.parametrize("shape", [(16, 2, 256), (32, 2, 256), (32, 2, 128), (8, 1, 64)])
@pytest.mark.parametrize("d", [1, 2, 5, 8, 9])
@pytest.mark.parametrize("kw", [{}, dict(num_splits=37), dict(pdl=False), dict(pdl=True), dict(consumers=1),
                                dict(block_n=32), dict(num_splits=300)])
def test_ws_fp8_against_fp64(shape, d, kw):
    hq, hkv, hd = shape
    scales = (0.02, 0.03)  # K and V in e4m3 with per-tensor scales, as an engine's fp8 KV cache
    n_kv = [3001, 64, d, 700]
    q, k, v, ptr, ind, qo = _case8(hq, hkv, hd, d, n_kv, d * 17 + hq, scales)
    ref = ref_attention(q, k.double() * scales[0], v.double() * scales[1], ptr, ind, qo)
    out = torch.full_like(q, float("nan"))
    ws.ws_attention(q, k, v, ptr, ind, None if d == 1 else qo, d, max(n_kv), out=out, k_scale=scales[0],
                    v_scale=scales[1], **kw)
    assert not torch.isnan(out).any()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err < 1e-2, err  # fp16 q, K/V and P: the rows kernel's fp8 level
