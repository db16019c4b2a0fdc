"""Round 10's 4-bit tensor-core GEMM for decode rows (`quant_mma_i4`): its weight layout against an independent decode
of the layout's definition, the kernel against the fp64 reference of test_kernels_quant (awkward N / K, M = 1..8,
split-K, NaN-poisoned outputs), a one-hot known answer per nibble position, and its errors. Under the interpreter
the MMA is emulated from the same fragment registers (`EMU`); on a GPU the inline `mma.sync` runs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from test_kernels_quant import DEV, TOL, make_weight, ref_int4_gemm, ref_int4_weight, rel  # noqa: E402
from wmtp.measure.kernels.quant_formats import quantize_int4_group  # noqa: E402
from wmtp.measure.kernels.quant_mma_i4 import int4_mma_gemm, mma_plan, pack_int4_mma  # noqa: E402

pytestmark = pytest.mark.kernels
# N not a multiple of 16, K not a multiple of 128 (a last group of 8 / 64 / 72 codes), one group, several
# (M = 9..16: the second MMA N tile, TOK2)
SHAPES = [(1, 40, 264), (2, 16, 128), (3, 70, 392), (5, 33, 1160), (8, 48, 200), (7, 100, 2048), (4, 24, 136),
          (9, 40, 264), (16, 33, 392), (13, 70, 1160)]


def unpack_reference(words, n, k):
    """Codes [N, K] read back from the layout's definition (module docstring): nibble j of word (tile, chunk, lane,
    c) is row 16 tile + g + 8 hi, k = 64 chunk + 16 q + 4 c + e, with lane = 4 g + q and
    j = hi + 2 (e >> 1) + 4 (e & 1)."""
    t, kc = words.shape[:2]
    w = words.to(torch.int64) & 0xFFFFFFFF
    codes = torch.full((16 * t, 64 * kc), -1, dtype=torch.int64)
    for lane in range(32):
        g, q = divmod(lane, 4)
        for c in range(4):
            for hi in range(2):
                for e in range(4):
                    j = hi + 2 * (e >> 1) + 4 * (e & 1)
                    rows = torch.arange(t) * 16 + g + 8 * hi
                    cols = torch.arange(kc) * 64 + 16 * q + 4 * c + e
                    codes[rows[:, None], cols[None, :]] = (w[:, :, lane, c] >> (4 * j)) & 0xF
    return codes[:n, :k], codes


def _case(m, n, k, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    packed, s = quantize_int4_group(make_weight(gen, n, k))
    ref = ref_int4_gemm(x, packed, s)
    assert ref.abs().max() > 1e-2
    return x, packed, s, ref


def _run(x, packed, s, **kw):
    n = packed.shape[0]
    out = torch.full((x.shape[0], n), float("nan"), dtype=torch.bfloat16, device=DEV)
    int4_mma_gemm(x.to(DEV), pack_int4_mma(packed).to(DEV), s.to(DEV), n, out=out, **kw)
    assert not torch.isnan(out).any()
    return out


@pytest.mark.parametrize("n, k", [(40, 264), (16, 128), (33, 1160)])
def test_layout_decodes_back_to_the_codes(n, k):
    gen = torch.Generator().manual_seed(n + k)
    packed = torch.randint(0, 256, (n, k // 2), generator=gen, dtype=torch.uint8)
    words = pack_int4_mma(packed)
    assert words.shape == (-(-n // 16), 2 * -(-k // 128), 32, 4) and words.dtype == torch.int32
    codes, full = unpack_reference(words, n, k)
    p = packed.long()
    assert torch.equal(codes[:, 0::2], p & 0xF) and torch.equal(codes[:, 1::2], p >> 4)
    pad = torch.ones_like(full, dtype=torch.bool)
    pad[:n, :k] = False
    assert (full[pad] == 8).all()  # padding is code 8: weight 0


@pytest.mark.parametrize("split_k", [None, 1, 2])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_mma_matches_reference(m, n, k, split_k):
    x, packed, s, ref = _case(m, n, k, 9100 * m + n + k)
    groups = -(-k // 128)
    if split_k is not None and split_k > groups:
        pytest.skip("more splits than K groups")
    assert rel(_run(x, packed, s, split_k=split_k), ref) < TOL


@pytest.mark.parametrize("num_warps, ctas, sub_mma", [(1, 32, False), (1, 16, True), (2, 16, False)])
@pytest.mark.parametrize("m, n, k", [(1, 40, 264), (13, 70, 392)])
def test_mma_fewer_warps_more_programs(m, n, k, num_warps, ctas, sub_mma):
    """One or two row tiles per program (the benchmark's w1 / w2 variants), split-K planned for up to 32 programs per
    SM, both dequantizations: the same fp64 reference."""
    x, packed, s, ref = _case(m, n, k, 7700 * m + n + k + num_warps)
    assert rel(_run(x, packed, s, num_warps=num_warps, ctas=ctas, sub_mma=sub_mma), ref) < TOL


@pytest.mark.parametrize("num_warps, sub_mma, split_k", [(1, False, None), (4, True, 3), (2, False, 1)])
@pytest.mark.parametrize("m, n, k", [(1, 40, 264), (5, 33, 1160), (13, 70, 392), (2, 16, 128)])
def test_mma_prefetch_same_sums(m, n, k, num_warps, sub_mma, split_k):
    """The register prefetch (next group's words and scales loaded a group ahead, the last group's twice) changes when
    loads are issued, not what is summed: its output equals the kernel's without it bit for bit (a wrong rotation of
    the loaded registers would not), and both match the fp64 reference; one group (K 128) and splits of one group
    run its shortest loops. (The clamp keeps the last load inside the split; its values are discarded, so an unclamped
    read would not change the output: that is guarded by the clamp's code, not by this test.)"""
    x, packed, s, ref = _case(m, n, k, 5300 * m + n + k + num_warps)
    groups = -(-k // 128)
    split_k = None if split_k is None else min(split_k, groups)
    kw = dict(num_warps=num_warps, sub_mma=sub_mma, split_k=split_k, ctas=16)
    plain, ahead = _run(x, packed, s, **kw), _run(x, packed, s, prefetch=True, **kw)
    assert torch.equal(plain, ahead)
    assert rel(ahead, ref) < TOL


@pytest.mark.parametrize("n, k, warps, ctas", [(20480, 3072, 4, 9), (18560, 4096, 4, 10), (4096, 8192, 1, 16),
                                                (2048, 3072, 4, 9), (248320, 3072, 1, 16)])
def test_plan_fit_is_one_wave(n, k, warps, ctas):
    """fit=True: the grid never exceeds ctas programs an SM (one wave where they are resident) unless the programs
    of one split alone do, the splits still cover every K group once, and it never splits more than the default."""
    sm, groups = 132, -(-k // 128)
    progs, split, per = mma_plan(1, n, k, sm, warps, None, ctas, fit=True)
    d_progs, d_split, _ = mma_plan(1, n, k, sm, warps, None, ctas)
    assert progs == -(-(-(-n // 16)) // warps) == d_progs
    assert (split - 1) * per < groups <= split * per
    assert progs * split <= max(ctas * sm, progs)
    assert split <= d_split


def test_one_hot_picks_every_nibble_position():
    """x = unit rows at 8 columns covering every (q, c, e) class of a chunk and both chunks of a group and two
    groups: output row i is exactly column col_i of the dequantized weight (bf16-exact scales), rows g and g + 8."""
    gen = torch.Generator().manual_seed(5)
    n, k = 32, 256
    packed = torch.randint(0, 256, (n, k // 2), generator=gen, dtype=torch.uint8)
    s = torch.tensor([0.5, 2.0], dtype=torch.bfloat16).repeat(n, 1)
    w_ref = ref_int4_weight(packed, s)
    for cols in ([0, 1, 2, 3, 17, 38, 59, 63], [64, 81, 102, 127, 128, 149, 200, 255]):
        x = torch.zeros(len(cols), k, dtype=torch.bfloat16)
        x[torch.arange(len(cols)), cols] = 1.0
        out = _run(x, packed, s)
        assert torch.equal(out.double().cpu(), w_ref[:, cols].T), cols


def test_plan_and_errors():
    # N 12288 -> 768 tiles -> 192 programs of 4 warps; 132 SMs x 4 / 192 -> 3 splits of 8 of K 3072's 24 groups
    assert mma_plan(1, 12288, 3072, 132) == (192, 3, 8)
    assert mma_plan(1, 248320, 3072, 132) == (3880, 1, 24)  # enough programs: no split
    assert mma_plan(8, 2048, 512, 132) == (32, 1, 4)  # partial cap: K // (64 M) = 1
    # q122 lin_in: 320 programs of 4 warps x 4 splits = 1280 > 9 an SM x 132 = 1188 resident -> fit: 1188 // 320 = 3
    # splits of 8 groups
    assert mma_plan(1, 20480, 3072, 132, 4, None, 9) == (320, 4, 6)
    assert mma_plan(1, 20480, 3072, 132, 4, None, 9, fit=True) == (320, 3, 8)
    with pytest.raises(ValueError, match="split_k must be in"):
        mma_plan(1, 64, 256, 132, split_k=3)
    with pytest.raises(ValueError, match="K % 8"):
        int4_mma_gemm(torch.zeros(1, 132, dtype=torch.bfloat16), pack_int4_mma(torch.zeros(16, 66, dtype=torch.uint8)),
                      torch.ones(16, 2, dtype=torch.bfloat16), 16)
    x = torch.zeros(17, 256, dtype=torch.bfloat16)
    w = pack_int4_mma(torch.zeros(16, 128, dtype=torch.uint8))
    with pytest.raises(ValueError, match="1..16"):
        int4_mma_gemm(x, w, torch.ones(16, 2, dtype=torch.bfloat16), 16)
    with pytest.raises(ValueError, match="w_mma must be"):
        int4_mma_gemm(x[:1], w, torch.ones(16, 3, dtype=torch.bfloat16), 16)
    with pytest.raises(ValueError, match="uint8"):
        pack_int4_mma(torch.zeros(16, 128, dtype=torch.int32))


def test_int4_gemm_path_mma_and_auto_dispatch(monkeypatch):
    """path 'mma' runs this kernel (and needs the repacked weights); path 'auto' takes it only with the repacked
    weights, bf16 rows M <= AUTO_MAX_ROWS and at least AUTO_BYTES of codes, else the earlier paths."""
    from wmtp.measure.kernels import quant_gemm as qg
    from wmtp.measure.kernels import quant_mma_i4 as qm

    x, packed, s, ref = _case(3, 48, 256, 77)
    x, packed, s = x.to(DEV), packed.to(DEV), s.to(DEV)
    wm = pack_int4_mma(packed)
    y = qg.int4_gemm(x, packed, s, path="mma", w_mma=wm)
    assert rel(y, ref) < TOL
    with pytest.raises(ValueError, match="needs the weights in its layout"):
        qg.int4_gemm(x, packed, s, path="mma")
    log = []
    real = qm.int4_mma_gemm
    monkeypatch.setattr(qm, "int4_mma_gemm", lambda *a, **kw: log.append((kw["ctas"], kw["fit"])) or real(*a, **kw))
    monkeypatch.setattr(qm, "AUTO_BYTES", 48 * 128)  # this weight's codes: 48 x 128 bytes
    qg.int4_gemm(x, packed, s, w_mma=wm)
    assert log == [(qm.AUTO_FIT_CTAS, True)]
    qg.int4_gemm(x, packed, s)  # no repacked weights
    qg.int4_gemm(x.to(torch.float16), packed, s, w_mma=wm)  # fp16 rows
    qg.int4_gemm(torch.cat([x] * 3), packed, s, w_mma=wm)  # 9 rows > AUTO_MAX_ROWS
    monkeypatch.setattr(qm, "AUTO_BYTES", 48 * 128 + 1)
    qg.int4_gemm(x, packed, s, w_mma=wm)  # one byte under the size rule
    assert log == [(qm.AUTO_FIT_CTAS, True)]
    # path 'mma' at 9 rows (the TOK2 build, which lets fewer programs reside): the plan rounded up, not fitted
    assert rel(qg.int4_gemm(torch.cat([x] * 3), packed, s, path="mma", w_mma=wm), torch.cat([ref] * 3)) < TOL
    assert log == [(qm.AUTO_FIT_CTAS, True), (qm.AUTO_CTAS, False)]


@pytest.mark.parametrize("t, top_k, n_exp, a_is_pairs, split_k", [
    (1, 2, 4, False, None), (3, 2, 5, False, 2), (2, 3, 4, True, None), (4, 2, 3, True, 1)])
def test_moe_matches_reference(t, top_k, n_exp, a_is_pairs, split_k):
    """Grouped over token-expert pairs: ids with repeated experts (fewer experts than pairs), route weights on the
    pairs' rows (down projection), awkward N / K, split-K."""
    from test_kernels_quant import ref_moe_gemm

    from wmtp.measure.kernels.quant_mma_i4 import int4_mma_moe

    gen = torch.Generator().manual_seed(31 * t + top_k + n_exp)
    n, k = 40, 392
    packed, s = quantize_int4_group(make_weight(gen, n_exp, n, k))
    ids = torch.randint(0, n_exp, (t, top_k), generator=gen, dtype=torch.int32)
    wts = torch.rand(t, top_k, generator=gen) if a_is_pairs else None
    x = torch.randn(t * top_k if a_is_pairs else t, k, generator=gen).to(torch.bfloat16)
    w_deq = torch.stack([ref_int4_weight(packed[e], s[e]) for e in range(n_exp)])
    ref = ref_moe_gemm(x, w_deq, ids.long(), wts, a_is_pairs)
    out = torch.full((t * top_k, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    int4_mma_moe(x.to(DEV), pack_int4_mma(packed).to(DEV), s.to(DEV), ids.to(DEV),
                 None if wts is None else wts.to(DEV), a_is_pairs, n, out=out, split_k=split_k)
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL


@pytest.mark.parametrize("num_warps, ctas", [(1, 32), (2, 16)])
def test_moe_fewer_warps_more_programs(num_warps, ctas):
    """The grouped kernel with one / two row tiles per program and split-K for up to 32 programs per SM."""
    from test_kernels_quant import ref_moe_gemm

    from wmtp.measure.kernels.quant_mma_i4 import int4_mma_moe

    gen = torch.Generator().manual_seed(77 + num_warps)
    n, k, n_exp = 40, 392, 4
    packed, s = quantize_int4_group(make_weight(gen, n_exp, n, k))
    ids = torch.tensor([[0, 3], [3, 1]], dtype=torch.int32)
    x = torch.randn(2, k, generator=gen).to(torch.bfloat16)
    w_deq = torch.stack([ref_int4_weight(packed[e], s[e]) for e in range(n_exp)])
    ref = ref_moe_gemm(x, w_deq, ids.long(), None, False)
    out = torch.full((4, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    int4_mma_moe(x.to(DEV), pack_int4_mma(packed).to(DEV), s.to(DEV), ids.to(DEV), None, False, n, out=out,
                 num_warps=num_warps, ctas=ctas, sub_mma=False)
    assert not torch.isnan(out).any()
    assert rel(out, ref) < TOL


def test_moe_dispatch(monkeypatch):
    """int4_moe_gemm: path 'mma' runs the grouped kernel (needs w_mma); 'auto' takes it given w_mma for bf16 rows
    at the experts and tokens of quant_moe.MOE_PAIR_AUTO, else the earlier paths."""
    from wmtp.measure.kernels import quant_gemm as qg
    from wmtp.measure.kernels import quant_mma_i4 as qm

    gen = torch.Generator().manual_seed(3)
    n_exp, n, k = 4, 32, 256
    packed, s = quantize_int4_group(make_weight(gen, n_exp, n, k))
    packed, s = packed.to(DEV), s.to(DEV)
    ids = torch.randint(0, n_exp, (2, 2), generator=gen, dtype=torch.int32).to(DEV)
    x = torch.randn(2, k, generator=gen).to(torch.bfloat16).to(DEV)
    wm = pack_int4_mma(packed)
    y = qg.int4_moe_gemm(x, packed, s, ids, path="mma", w_mma=wm)
    from test_kernels_quant import ref_moe_gemm
    w_deq = torch.stack([ref_int4_weight(packed[e].cpu(), s[e].cpu()) for e in range(n_exp)])
    assert rel(y, ref_moe_gemm(x.cpu(), w_deq, ids.long().cpu(), None, False)) < TOL
    with pytest.raises(ValueError, match="needs the weights in its layout"):
        qg.int4_moe_gemm(x, packed, s, ids, path="mma")
    log = []
    real = qm.int4_mma_moe
    monkeypatch.setattr(qm, "int4_mma_moe", lambda *a, **kw: log.append(1) or real(*a, **kw))
    qg.int4_moe_gemm(x, packed, s, ids, w_mma=wm)  # 4 experts < MOE_PAIR_AUTO_MIN_EXPERTS: earlier paths
    assert log == []
    monkeypatch.setattr(qm, "MOE_PAIR_AUTO_MIN_EXPERTS", 4)
    qg.int4_moe_gemm(x, packed, s, ids, w_mma=wm)
    assert log == [1]
    qg.int4_moe_gemm(x, packed, s, ids)  # no repacked weights
    qg.int4_moe_gemm(x.half(), packed, s, ids, w_mma=wm)  # fp16 rows
    qg.int4_moe_gemm(x, packed, s, ids, w_mma=wm, block_n=32)  # a named tile: the earlier paths
    many = torch.randint(0, n_exp, (17, 2), generator=gen, dtype=torch.int32).to(DEV)
    qg.int4_moe_gemm(torch.cat([x] * 9)[:17], packed, s, many, w_mma=wm)  # 17 tokens > MOE_PAIR_AUTO's 16
    assert log == [1]


def test_auto_plans_by_size_and_tokens(monkeypatch):
    """path='auto': the dense kernel runs 1 warp a program at AUTO_W1_CTAS from AUTO_W1_BYTES of codes (4 warps at
    most AUTO_FIT_CTAS an SM below), the grouped one 1 warp at MOE_W1_CTAS from MOE_W1_MIN_TOKENS tokens (4 warps
    below); results equal the fp64 reference either way."""
    from test_kernels_quant import ref_moe_gemm

    from wmtp.measure.kernels import quant_gemm as qg
    from wmtp.measure.kernels import quant_mma_i4 as qm

    x, packed, s, ref = _case(3, 48, 256, 91)
    x, packed, s = x.to(DEV), packed.to(DEV), s.to(DEV)
    wm = pack_int4_mma(packed)
    log = []
    real = qm.int4_mma_gemm
    monkeypatch.setattr(qm, "int4_mma_gemm",
                        lambda *a, **kw: log.append((kw["num_warps"], kw["ctas"], kw["fit"])) or real(*a, **kw))
    monkeypatch.setattr(qm, "AUTO_BYTES", 48 * 128)
    monkeypatch.setattr(qm, "AUTO_W1_BYTES", 48 * 128 + 1)  # one byte over these codes: 4 warps
    assert rel(qg.int4_gemm(x, packed, s, w_mma=wm), ref) < TOL
    monkeypatch.setattr(qm, "AUTO_W1_BYTES", 48 * 128)  # the fma dequantization there
    assert rel(qg.int4_gemm(x, packed, s, w_mma=wm), ref) < TOL
    assert log == [(4, qm.AUTO_FIT_CTAS, True), (1, qm.AUTO_W1_CTAS, False)]

    gen = torch.Generator().manual_seed(5)
    n_exp, n, k = 4, 32, 256
    pk, sc = quantize_int4_group(make_weight(gen, n_exp, n, k))
    w_deq = torch.stack([ref_int4_weight(pk[e], sc[e]) for e in range(n_exp)])
    pk, sc = pk.to(DEV), sc.to(DEV)
    wmoe = pack_int4_mma(pk)
    monkeypatch.setattr(qm, "MOE_PAIR_AUTO_MIN_EXPERTS", 4)
    monkeypatch.setattr(qm, "MOE_W1_MIN_TOKENS", 2)  # the rule at a threshold of 2 (shipped: 1, every call)
    seen = []
    real_moe = qm.int4_mma_moe
    monkeypatch.setattr(qm, "int4_mma_moe",
                        lambda *a, **kw: seen.append((kw["num_warps"], kw["ctas"])) or real_moe(*a, **kw))
    for tokens in (1, 2):
        ids = torch.randint(0, n_exp, (tokens, 2), generator=gen, dtype=torch.int32)
        xt = torch.randn(tokens, k, generator=gen).to(torch.bfloat16)
        y = qg.int4_moe_gemm(xt.to(DEV), pk, sc, ids.to(DEV), w_mma=wmoe)
        assert rel(y, ref_moe_gemm(xt, w_deq, ids.long(), None, False)) < TOL
    assert seen == [(4, qm.AUTO_CTAS), (1, qm.MOE_W1_CTAS)]


def _i4_probe(*args) -> dict:
    """`i4_compile_probe.py ARGS` in a process without Triton's interpreter: the sm_90 build's registers and fit."""
    from probe_proc import run_probe

    return run_probe("i4_compile_probe.py", *args)


def test_resident_programs_by_hand():
    """The probe's occupancy arithmetic: 54 registers round to 56, 56 x 32 x 4 = 7168 of 65536 -> 9 programs of 4
    warps; 64 registers, 1 warp -> 32 (the program limit); 65 -> 72 x 128 = 9216 -> 7; shared memory can bind."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from sm90_build import resident

    assert resident(54, 4, 4096) == 9
    assert resident(64, 1, 0) == 32
    assert resident(65, 4, 0) == 7
    assert resident(32, 4, 100 * 1024) == 2


def test_auto_plans_fit_the_resident_programs():
    """The plans path='auto' launches assume that many programs reside on an SM at once (`AUTO_FIT_CTAS` for the
    4-warp dense kernel, AUTO_W1_CTAS / MOE_W1_CTAS for the 1-warp ones): the sm_90 builds' registers allow it, with
    no spills (checked with this Triton; the device runs print the lent GPU's)."""
    pytest.importorskip("triton.backends.nvidia")
    from wmtp.measure.kernels import quant_mma_i4 as qm

    for (kind, warps, sub), need in ((("dense", 4, True), qm.AUTO_FIT_CTAS), (("dense", 1, False), qm.AUTO_W1_CTAS),
                                     (("moe", 1, qm.MOE_SUB_MMA), qm.MOE_W1_CTAS)):
        got = _i4_probe(kind, warps, int(sub), 0)
        assert got["spill_stores"] == 0 and got["resident"] >= need, (kind, warps, got)
