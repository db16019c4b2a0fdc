"""Kernel correctness against fp64 torch references. On a machine without a GPU the kernels run
under TRITON_INTERPRET=1 (set in conftest) at small sizes; on a GPU the same tests run compiled,
plus the larger `gpu`-marked sizes."""

from __future__ import annotations

import math
import zlib

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernel_refs import ref_attention, ref_index  # noqa: E402
from wmtp.measure.kernels.index_build import build_kv_indices  # noqa: E402
from wmtp.measure.kernels.paged_attention import decode_attention, paged_attention, verify_attention  # noqa: E402


def stable_seed(*key) -> int:
    """A seed that is the same in every process (Python's hash() of a str is salted per process)."""
    return zlib.crc32(repr(key).encode())

pytestmark = pytest.mark.kernels
DEV = "cuda" if torch.cuda.is_available() else "cpu"
GPU = DEV == "cuda"
TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3}


def rel_err(out, ref):
    return float((out.double().cpu() - ref).norm() / ref.norm())


def make_pool(slots, hkv, hd, dtype, gen):
    k = torch.randn(slots, hkv, hd, generator=gen).to(dtype)
    v = torch.randn(slots, hkv, hd, generator=gen).to(dtype)
    return k.to(DEV), v.to(DEV)


def make_r2t(seq_lens, gen, width=None):
    """Each request's positions map to distinct, permuted (non-contiguous) slots."""
    width = width or max(seq_lens)
    total = sum(seq_lens)
    perm = torch.randperm(total + 7, generator=gen)[:total].to(torch.int32)
    r2t = torch.full((len(seq_lens), width), -1, dtype=torch.int32)
    start = 0
    for b, s in enumerate(seq_lens):
        r2t[b, :s] = perm[start:start + s]
        start += s
    return r2t, total + 7


# ------------------------------------------------------------------ references on known answers
def test_reference_attention_known_answers():
    # Identical keys -> uniform softmax -> the mean of V; a single key -> that V row.
    hd = 4
    q = torch.randn(1, 2, hd)
    k = torch.ones(3, 1, hd)
    v = torch.arange(12, dtype=torch.float32).reshape(3, 1, hd)
    ind = torch.tensor([0, 3], dtype=torch.int32)
    out = ref_attention(q, k, v, ind, torch.arange(3, dtype=torch.int32), torch.tensor([0, 1], dtype=torch.int32))
    assert torch.allclose(out[0, 0], v[:, 0].double().mean(0)) and torch.allclose(out[0, 1], out[0, 0])
    # Causal: with two new queries over 3 keys, the first query sees keys 0..1 only.
    q2 = torch.zeros(2, 1, hd)
    out2 = ref_attention(q2, k, v, ind, torch.arange(3, dtype=torch.int32), torch.tensor([0, 2], dtype=torch.int32))
    assert torch.allclose(out2[0, 0], v[:2, 0].double().mean(0))
    assert torch.allclose(out2[1, 0], v[:, 0].double().mean(0))


def test_reference_index_known_answer():
    r2t = torch.arange(20, dtype=torch.int32).reshape(1, 20) + 100
    _, idx = ref_index(r2t, torch.tensor([10], dtype=torch.int32), "window", 2, 3, 1)
    assert idx.tolist() == [100, 101, 107, 108, 109]
    _, ring = ref_index(r2t, torch.tensor([10], dtype=torch.int32), "ring", 2, 3, 1)
    assert ring.tolist() == [0, 1, 2 + (7 - 2) % 4, 2 + (8 - 2) % 4, 2 + (9 - 2) % 4]


# ------------------------------------------------------------------ index build
INDEX_CASES = [
    ([1], 4, 8), ([5, 1000, 37], 4, 64), ([300], 0, 100), ([300], 16, 0), ([70], 64, 4032), ([129, 2000], 3, 61),
]


@pytest.mark.parametrize("mode", ["native", "window", "ring"])
@pytest.mark.parametrize("seq_lens, n_sink, window", INDEX_CASES)
def test_index_build(mode, seq_lens, n_sink, window):
    gen = torch.Generator().manual_seed(stable_seed(mode, tuple(seq_lens), n_sink, window))
    r2t, _ = make_r2t(seq_lens, gen, width=max(seq_lens) + 5)
    pool_rows = torch.randperm(len(seq_lens) + 2, generator=gen)[: len(seq_lens)].to(torch.int32)
    big = torch.full((len(seq_lens) + 2, r2t.shape[1]), -1, dtype=torch.int32)
    big[pool_rows.long()] = r2t
    sl = torch.tensor(seq_lens, dtype=torch.int32)
    ref_ptr, ref_idx = ref_index(big, sl, mode, n_sink, window, 3, pool_rows)
    out = torch.full((len(ref_idx),), -7, dtype=torch.int32, device=DEV)  # poisoned
    ptr, idx = build_kv_indices(big.to(DEV), sl.to(DEV), mode, n_sink, window, 3, pool_rows.to(DEV),
                                max_len=max(seq_lens), out=out, block=64)
    assert ptr.cpu().tolist() == ref_ptr.tolist()
    assert idx.cpu().tolist() == ref_idx.tolist()
    if mode == "window" and max(seq_lens) <= n_sink + window:
        _, nat = ref_index(big, sl, "native", n_sink, window, 3, pool_rows)
        assert idx.cpu().tolist() == nat.tolist()  # identical to native when S <= n_sink + W


def test_ring_slots_are_unique_within_request():
    sl = torch.tensor([5000], dtype=torch.int32)
    r2t = torch.zeros(1, 5000, dtype=torch.int32)
    _, idx = build_kv_indices(r2t.to(DEV), sl.to(DEV), "ring", 64, 512, 7, block=256)
    assert len(set(idx.cpu().tolist())) == 64 + 512
    assert max(idx.cpu().tolist()) < 64 + 512 + 7


def test_index_build_errors():
    r2t = torch.zeros(1, 8, dtype=torch.int32, device=DEV)
    with pytest.raises(ValueError, match="unknown index mode"):
        build_kv_indices(r2t, torch.tensor([4], dtype=torch.int32, device=DEV), "tree")
    with pytest.raises(ValueError, match="int32"):
        build_kv_indices(r2t.long(), torch.tensor([4], dtype=torch.int32, device=DEV))
    with pytest.raises(ValueError, match="exceeds"):
        build_kv_indices(r2t, torch.tensor([9], dtype=torch.int32, device=DEV))


# ------------------------------------------------------------------ attention
def run_attention(seq_lens, q_lens, hq, hkv, hd, dtype, index_mode="native", n_sink=4, window=16, seed=0,
                  **kw):
    gen = torch.Generator().manual_seed(seed)
    r2t, slots = make_r2t(seq_lens, gen)
    k_pool, v_pool = make_pool(slots, hkv, hd, dtype, gen)
    sl = torch.tensor(seq_lens, dtype=torch.int32)
    ptr, idx = ref_index(r2t, sl, index_mode, n_sink, window, 1)
    qo = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32)
    q = torch.randn(int(qo[-1]), hq, hd, generator=gen).to(dtype)
    ref = ref_attention(q.to(DEV), k_pool, v_pool, ptr, idx, qo).cpu()
    assert ref.abs().max() > 1e-3  # not trivially zero
    out = torch.full_like(q, float("nan"), device=DEV)
    max_kv = int((ptr[1:] - ptr[:-1]).max())
    paged_attention(q.to(DEV), k_pool, v_pool, ptr.to(DEV), idx.to(DEV), qo.to(DEV), max(q_lens), max_kv,
                    out=out, **kw)
    assert not torch.isnan(out).any(), "unwritten or NaN output"
    return rel_err(out, ref)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("hq, hkv, hd", [(2, 2, 64), (16, 2, 128), (16, 1, 256), (32, 2, 64)])
@pytest.mark.parametrize("seq_lens", [[1], [63], [200, 5, 77]])
def test_decode_attention(dtype, hq, hkv, hd, seq_lens):
    err = run_attention(seq_lens, [1] * len(seq_lens), hq, hkv, hd, dtype, seed=len(seq_lens) + hd)
    assert err < TOL[dtype]


@pytest.mark.parametrize("splits", [1, 3, 16])
@pytest.mark.parametrize("index_mode", ["native", "window"])
def test_decode_splits_and_windows(splits, index_mode):
    err = run_attention([150, 20, 97], [1, 1, 1], 8, 2, 64, torch.bfloat16, index_mode, n_sink=4, window=32,
                        num_splits=splits, block_n=16)
    assert err < TOL[torch.bfloat16]


@pytest.mark.parametrize("d", [1, 2, 7, 16])
@pytest.mark.parametrize("hq, hkv, hd", [(8, 2, 64), (16, 1, 128), (2, 2, 256)])
def test_verify_attention_causal_chain(d, hq, hkv, hd):
    err = run_attention([90, 33], [d, d], hq, hkv, hd, torch.bfloat16, seed=d, num_splits=2)
    assert err < TOL[torch.bfloat16]


def test_verify_mixed_query_lengths_and_small_row_tiles():
    # Requests with 1, 5 and 3 new tokens; max_rows=16 forces several head blocks per KV group.
    err = run_attention([40, 130, 9], [1, 5, 3], 16, 2, 64, torch.float16, seed=3, max_rows=16, num_splits=4)
    assert err < TOL[torch.float16]


def test_extend_over_ring_window():
    # The draft-extend pass: ~AL queries over the draft's windowed keys.
    err = run_attention([300], [4], 16, 2, 128, torch.bfloat16, "window", n_sink=8, window=56, seed=9)
    assert err < TOL[torch.bfloat16]


def test_decode_and_verify_launchers_agree():
    gen = torch.Generator().manual_seed(5)
    k, v = make_pool(64, 2, 64, torch.bfloat16, gen)
    ptr = torch.tensor([0, 40], dtype=torch.int32, device=DEV)
    idx = torch.randperm(64, generator=gen)[:40].to(torch.int32).to(DEV)
    q = torch.randn(1, 8, 64, generator=gen).to(torch.bfloat16).to(DEV)
    a = decode_attention(q, k, v, ptr, idx, 40)
    b = verify_attention(q, k, v, ptr, idx, torch.tensor([0, 1], dtype=torch.int32, device=DEV), 1, 40)
    assert torch.equal(a, b)


def test_attention_errors():
    k = torch.zeros(8, 2, 64, dtype=torch.bfloat16, device=DEV)
    ptr = torch.tensor([0, 4], dtype=torch.int32, device=DEV)
    idx = torch.arange(4, dtype=torch.int32, device=DEV)
    q = torch.zeros(1, 3, 64, dtype=torch.bfloat16, device=DEV)
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        decode_attention(q, k, k, ptr, idx, 4)
    with pytest.raises(ValueError, match="head_dim 48"):
        z = torch.zeros(8, 2, 48, dtype=torch.bfloat16, device=DEV)
        decode_attention(torch.zeros(1, 2, 48, dtype=torch.bfloat16, device=DEV), z, z, ptr, idx, 4)
    with pytest.raises(ValueError, match="not supported"):
        decode_attention(q[:, :2].float(), k.float(), k.float(), ptr, idx, 4)
    with pytest.raises(ValueError, match="one query row"):
        decode_attention(torch.zeros(2, 2, 64, dtype=torch.bfloat16, device=DEV), k, k, ptr, idx, 4)


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="large sizes need a GPU")
@pytest.mark.parametrize("seq_lens, q_len, hq, hkv, hd", [
    ([65537], 1, 16, 2, 256), ([300000, 1000, 77777], 1, 32, 2, 128), ([131072], 7, 16, 2, 256),
    ([100000, 30], 7, 32, 2, 256), ([50000], 16, 32, 2, 128), ([4096 + 64], 1, 16, 2, 256),
])
def test_attention_large_on_gpu(seq_lens, q_len, hq, hkv, hd):
    err = run_attention(seq_lens, [q_len] * len(seq_lens), hq, hkv, hd, torch.bfloat16, seed=11)
    assert err < TOL[torch.bfloat16]


# ------------------------------------------------------------------ packed-rows kernel
@pytest.mark.parametrize("d", [1, 2, 5, 9])
@pytest.mark.parametrize("hq, hkv, hd", [(16, 2, 32), (32, 2, 16), (8, 1, 64)])
def test_rows_kernel_verify(d, hq, hkv, hd):
    # Three requests, one shorter than a split, all with d causal query rows.
    err = run_attention([90, 33, d + 1], [d] * 3, hq, hkv, hd, torch.bfloat16, seed=17 + d, kernel="rows",
                        num_splits=3, block_n=16)
    assert err < TOL[torch.bfloat16]


@pytest.mark.parametrize("max_rows, splits", [(16, 1), (32, 4), (None, 7)])
def test_rows_kernel_row_blocks_and_mixed_lengths(max_rows, splits):
    # 16 heads x 5 rows = 80 rows: several row blocks when max_rows < 80; requests of 1, 5 and 3 rows.
    err = run_attention([40, 130, 9], [1, 5, 3], 32, 2, 32, torch.float16, seed=3, kernel="rows",
                        max_rows=max_rows, num_splits=splits, block_n=16)
    assert err < TOL[torch.float16]


@pytest.mark.parametrize("index_mode", ["native", "window"])
def test_rows_kernel_decode(index_mode):
    err = run_attention([150, 20, 97], [1, 1, 1], 16, 2, 64, torch.bfloat16, index_mode, n_sink=4, window=32,
                        kernel="rows", num_splits=5, block_n=16)
    assert err < TOL[torch.bfloat16]


@pytest.mark.parametrize("kernel, d, seed, fp8_dot", [("rows", 1, 41, "bf16"), ("rows", 4, 44, "bf16"),
                                                       ("rows", 1, 42, "f16"), ("rows", 7, 47, "f16"),
                                                       ("rows", 1, 43, "auto"), ("rows", 3, 45, "auto"),
                                                       ("sub", 1, 51, "bf16"), ("sub", 5, 55, "auto")])
def test_kernel_fp8_kv_with_scales(kernel, d, seed, fp8_dot):
    gen = torch.Generator().manual_seed(seed)
    hq, hkv, hd, n = 16, 2, 32, 77
    k = (torch.randn(n + 5, hkv, hd, generator=gen) * 4).to(torch.float8_e4m3fn)
    v = (torch.randn(n + 5, hkv, hd, generator=gen) * 4).to(torch.float8_e4m3fn)
    ptr = torch.tensor([0, n], dtype=torch.int32)
    idx = torch.randperm(n + 5, generator=gen)[:n].to(torch.int32)
    qo = torch.tensor([0, d], dtype=torch.int32)
    q = torch.randn(d, hq, hd, generator=gen).to(torch.bfloat16)
    ref = ref_attention(q, k.double() * 0.25, v.double() * 0.5, ptr, idx, qo)  # dequantized K, V
    out = torch.full_like(q, float("nan"), device=DEV)
    paged_attention(q.to(DEV), k.to(DEV), v.to(DEV), ptr.to(DEV), idx.to(DEV), qo.to(DEV), d, n, out=out,
                    kernel=kernel, k_scale=0.25, v_scale=0.5, num_splits=2, block_n=16, fp8_dot=fp8_dot)
    assert not torch.isnan(out).any()
    assert rel_err(out, ref) < TOL[torch.bfloat16]


@pytest.mark.parametrize("fp8_dot", ["f16", "auto"])
def test_fp8_decode_fp16_dots_take_queries_beyond_fp16_range(fp8_dot):
    # |q| up to about 1.2e5 (fp16 overflows at 65504) with a small K scale: q x score scale stays in range, so the
    # fp16 dots must give the fp64 reference (q converted to fp16 unscaled would be inf, the output NaN).
    gen = torch.Generator().manual_seed(61)
    hq, hkv, hd, n = 16, 2, 32, 77
    k = (torch.randn(n + 5, hkv, hd, generator=gen) * 4).to(torch.float8_e4m3fn)
    v = (torch.randn(n + 5, hkv, hd, generator=gen) * 4).to(torch.float8_e4m3fn)
    ptr = torch.tensor([0, n], dtype=torch.int32)
    idx = torch.randperm(n + 5, generator=gen)[:n].to(torch.int32)
    q = (torch.randn(1, hq, hd, generator=gen) * 3e4).to(torch.bfloat16)
    assert q.abs().max() > 65504
    ref = ref_attention(q, k.double() * 2e-5, v.double() * 0.5, ptr, idx, torch.tensor([0, 1], dtype=torch.int32))
    out = torch.full_like(q, float("nan"), device=DEV)
    decode_attention(q.to(DEV), k.to(DEV), v.to(DEV), ptr.to(DEV), idx.to(DEV), n, out=out, kernel="rows",
                     k_scale=2e-5, v_scale=0.5, num_splits=2, block_n=16, fp8_dot=fp8_dot)
    assert not torch.isnan(out).any()
    assert rel_err(out, ref) < TOL[torch.bfloat16]


def test_rows_kernel_errors():
    k = torch.zeros(8, 2, 64, dtype=torch.float8_e4m3fn, device=DEV)
    ptr = torch.tensor([0, 4], dtype=torch.int32, device=DEV)
    idx = torch.arange(4, dtype=torch.int32, device=DEV)
    q = torch.zeros(1, 4, 64, dtype=torch.bfloat16, device=DEV)
    with pytest.raises(ValueError, match="rows kernel"):
        decode_attention(q, k, k, ptr, idx, 4, kernel="v1")
    with pytest.raises(ValueError, match="unknown attention kernel"):
        decode_attention(q, k, k, ptr, idx, 4, kernel="tiles")
    with pytest.raises(ValueError, match="share q's dtype"):
        decode_attention(q, k, k.to(torch.float8_e5m2), ptr, idx, 4, kernel="rows")
    with pytest.raises(ValueError, match="fp8_dot"):
        decode_attention(q, k, k, ptr, idx, 4, kernel="rows", fp8_dot="fp16")
    with pytest.raises(ValueError, match="fp8 KV only"):
        decode_attention(q, q.new_zeros(8, 2, 64), q.new_zeros(8, 2, 64), ptr, idx, 4, kernel="rows", fp8_dot="f16")


# ------------------------------------------------------------------ sub-block kernel
@pytest.mark.parametrize("merge", ["kernel", "fused"])
@pytest.mark.parametrize("d", [1, 2, 5, 9])
@pytest.mark.parametrize("hq, hkv, hd", [(16, 2, 32), (8, 1, 64)])
def test_sub_kernel_verify(d, hq, hkv, hd, merge):
    # Three requests, one shorter than a split; 16 heads x 5 rows = 80 rows run as 64 + 16.
    err = run_attention([90, 33, d + 1], [d] * 3, hq, hkv, hd, torch.bfloat16, seed=23 + d, kernel="sub",
                        merge=merge, num_splits=3, block_n=16)
    assert err < TOL[torch.bfloat16]


@pytest.mark.parametrize("max_rows, part_max, splits, pow2", [(16, 16, 1, False), (48, 16, 4, False),
                                                           (None, 32, 7, False), (256, 64, 2, False),
                                                           (None, None, 3, True), (64, None, 2, True)])
def test_sub_kernel_row_blocks_and_mixed_lengths(max_rows, part_max, splits, pow2):
    # 32 heads over 2 KV heads x 11 rows = 176 rows per group: up to four sub-blocks (64+64+32+16), several
    # row blocks, or power-of-two blocks (pow2: 2 x 128, 3 x 64); requests of 1, 11 and 3 rows.
    tune = dict(max_rows=max_rows, part_max=part_max, pow2=pow2)
    err = run_attention([40, 130, 9], [1, 11, 3], 32, 2, 32, torch.float16, seed=5, kernel="sub",
                        num_splits=splits, block_n=16, **{k: v for k, v in tune.items() if v})
    assert err < TOL[torch.float16]


def test_sub_kernel_fused_merge_rearms():
    # The fused merge's semaphores are re-armed by the merging program: a second call (fresh inputs) is right too.
    for seed in (1, 2):
        err = run_attention([150, 20, 97], [1, 1, 1], 16, 2, 64, torch.bfloat16, "window", n_sink=4, window=32,
                            seed=seed, kernel="sub", merge="fused", num_splits=5, block_n=16)
        assert err < TOL[torch.bfloat16]


def test_sub_kernel_errors():
    k = torch.zeros(8, 2, 64, dtype=torch.bfloat16, device=DEV)
    ptr = torch.tensor([0, 4], dtype=torch.int32, device=DEV)
    idx = torch.arange(4, dtype=torch.int32, device=DEV)
    q = torch.zeros(1, 4, 64, dtype=torch.bfloat16, device=DEV)
    with pytest.raises(ValueError, match="unknown merge"):
        decode_attention(q, k, k, ptr, idx, 4, kernel="sub", merge="tree")
    with pytest.raises(ValueError, match="sub kernel only"):
        decode_attention(q, k, k, ptr, idx, 4, kernel="rows", merge="fused")
    with pytest.raises(ValueError, match="sub kernel only"):
        decode_attention(q, k, k, ptr, idx, 4, kernel="rows", part_max=32)
    with pytest.raises(ValueError, match="sub kernel only"):
        decode_attention(q, k, k, ptr, idx, 4, kernel="rows", prefetch=True)
    if not GPU:
        with pytest.raises(ValueError, match="Hopper"):
            decode_attention(q, k, k, ptr, idx, 4, kernel="sub", merge="pdl")
        with pytest.raises(ValueError, match="CUDA GPU"):
            decode_attention(q, k, k, ptr, idx, 4, kernel="sub", prefetch=True)


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="large sizes need a GPU")
@pytest.mark.parametrize("merge, extra", [("kernel", {}), ("pdl", {}), ("fused", {}), ("kernel", {"prefetch": True}),
                                          ("kernel", {"prefetch": True, "pow2": True})])
@pytest.mark.parametrize("seq_lens, q_len, hq, hkv, hd", [
    ([65537], 1, 16, 2, 256), ([300000, 1000, 77777], 1, 32, 2, 128), ([100000, 30], 7, 32, 2, 256),
    ([50000], 9, 32, 2, 128), ([4096 + 64], 1, 16, 2, 256),
])
def test_sub_kernel_large_on_gpu(seq_lens, q_len, hq, hkv, hd, merge, extra):
    err = run_attention(seq_lens, [q_len] * len(seq_lens), hq, hkv, hd, torch.bfloat16, seed=13, kernel="sub",
                        merge=merge, **extra)
    assert err < TOL[torch.bfloat16]


@pytest.mark.parametrize("merge", ["kernel", "fused"])
def test_sub_kernel_decode_launcher(merge):
    # decode_attention (no qo_indptr: the kernel's DECODE path) against the fp64 reference.
    gen = torch.Generator().manual_seed(61)
    k, v = make_pool(300, 2, 64, torch.bfloat16, gen)
    ptr = torch.tensor([0, 200, 203], dtype=torch.int32)
    idx = torch.randperm(300, generator=gen)[:203].to(torch.int32)
    q = torch.randn(2, 16, 64, generator=gen).to(torch.bfloat16)
    ref = ref_attention(q.to(DEV), k, v, ptr, idx, torch.tensor([0, 1, 2], dtype=torch.int32)).cpu()
    out = torch.full_like(q, float("nan"), device=DEV)
    decode_attention(q.to(DEV), k, v, ptr.to(DEV), idx.to(DEV), 200, out=out, kernel="sub", merge=merge,
                     num_splits=4, block_n=16)
    assert not torch.isnan(out).any()
    assert rel_err(out, ref) < TOL[torch.bfloat16]
