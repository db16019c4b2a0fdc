"""The warp-specialized paged attention kernel (`measure/kernels/paged_ws.py`): its shared-memory plan on any
machine; its answers against the fp64 reference on a Hopper GPU (Gluon warp specialization has no CPU interpreter)."""

from __future__ import annotations

import pytest
import torch

from kernel_refs import ref_attention

ws = pytest.importorskip("wmtp.measure.kernels.paged_ws")

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9
SMEM = 227 * 1024  # bytes a Hopper block may use


@pytest.mark.parametrize("rows", [1, 16, 64, 65, 112, 128, 144, 256])
@pytest.mark.parametrize("hd", [64, 128, 256])
@pytest.mark.parametrize("block_n", [None, 32])
def test_tiling_fits_shared_memory(rows, hd, block_n):
    bm, mb, bn, ns, nw = ws.ws_tiling(rows, hd, block_n)
    assert bm in (64, 128) and mb * bm >= rows and (mb - 1) * bm < rows  # fewest row blocks that cover the rows
    assert nw == bm // 16  # one warpgroup per 64 rows
    q_bytes, stage = bm * hd * 2, 2 * bn * hd * 2  # Q tile; K and V tiles of one stage (bf16)
    assert 2 <= ns <= 6 and q_bytes + ns * stage + 1024 <= SMEM
    assert ns == 6 or q_bytes + (ns + 1) * stage + 1024 > SMEM  # as many stages as fit, up to 6


def test_tiling_by_hand():
    # 112 rows (16 heads x d = 7), head dim 256: one 128-row tile; 64 KiB of Q + two 64 KiB stages of 64 keys
    assert ws.ws_tiling(112, 256) == (128, 1, 64, 2, 8)
    # same rows in 64-row tiles: two programs of 32-key tiles (16 KiB each of K and V); 32 KiB of Q leave room for six
    assert ws.ws_tiling(112, 256, max_rows=64) == (64, 2, 32, 6, 4)
    # 64-key tiles at 64 rows (asked for): 64 KiB stages, three fit beside 32 KiB of Q
    assert ws.ws_tiling(40, 256, block_n=64) == (64, 1, 64, 3, 4)
    # head dim 128: 32 KiB stages, six fit beside 32 KiB of Q
    assert ws.ws_tiling(112, 128) == (128, 1, 64, 6, 8)
    with pytest.raises(ValueError):
        ws.ws_tiling(112, 256, max_rows=32)


def _case(hq, hkv, hd, d, n_kv, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    slots = sum(n_kv) + 5
    k = torch.randn(slots, hkv, hd, generator=g).bfloat16().cuda()
    v = torch.randn(slots, hkv, hd, generator=g).bfloat16().cuda()
    ind = torch.randperm(slots, generator=g)[: sum(n_kv)].to(torch.int32).cuda()
    ptr = torch.tensor([0] + list(torch.tensor(n_kv).cumsum(0)), dtype=torch.int32).cuda()
    q = torch.randn(len(n_kv) * d, hq, hd, generator=g).bfloat16().cuda()
    qo = torch.arange(len(n_kv) + 1, dtype=torch.int32).cuda() * d
    return q, k, v, ptr, ind, qo


@pytest.mark.skipif(not HOPPER, reason="warp specialization needs a Hopper (or newer) GPU")
@pytest.mark.parametrize("shape", [(16, 2, 256), (32, 2, 256), (32, 2, 128), (8, 1, 64)])
@pytest.mark.parametrize("d", [1, 2, 5, 7, 9])
@pytest.mark.parametrize("kw", [{}, dict(block_n=32), dict(max_rows=64), dict(num_splits=37), dict(consumers=2),
                                dict(consumers=2, block_n=32)])
def test_ws_against_fp64(shape, d, kw):
    hq, hkv, hd = shape
    n_kv = [3001, 64, d, 700]  # a tile-aligned request, one with only the new tokens
    q, k, v, ptr, ind, qo = _case(hq, hkv, hd, d, n_kv, seed=d * 31 + hq)
    ref = ref_attention(q, k.float(), v.float(), ptr, ind, qo)
    out = torch.full_like(q, float("nan"))
    ws.ws_attention(q, k, v, ptr, ind, None if d == 1 else qo, d, max(n_kv), out=out, **kw)
    assert not torch.isnan(out).any()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err < 1e-2, err  # bf16 inputs and P: about 3e-3 (the rows kernel's level)


@pytest.mark.skipif(not HOPPER, reason="warp specialization needs a Hopper (or newer) GPU")
def test_ws_rejects_what_it_cannot_run():
    q, k, v, ptr, ind, qo = _case(16, 2, 256, 1, [100], seed=1)
    with pytest.raises(ValueError):
        ws.ws_attention(q, k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn), ptr, ind, None, 1, 100)
    q2, k2, v2, ptr2, ind2, qo2 = _case(16, 2, 32, 1, [100], seed=2)
    with pytest.raises(ValueError):
        ws.ws_attention(q2, k2, v2, ptr2, ind2, None, 1, 100)
