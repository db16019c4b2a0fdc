"""Programmatic dependent launch of the dense decode GEMMs (`quant_pdl`): with PDL every path must give the output it
gives without (the kernel after the wait is unchanged), also when each GEMM consumes the previous one's output inside
one CUDA graph (a wait placed too late would read half-written activations), and match the fp64 references of
test_kernels_quant. The GPU cases need Hopper or newer; on a CPU (interpreter) PDL must stay off."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from test_kernels_quant import DEV, TOL, fp8_case, make_weight, ref_int4_gemm, rel  # noqa: E402
from wmtp.measure.kernels import quant_pdl  # noqa: E402
from wmtp.measure.kernels.quant_gemm import fp8_gemm, int4_gemm, quantize_int4_group  # noqa: E402

pytestmark = pytest.mark.kernels
HOPPER = DEV == "cuda" and torch.cuda.get_device_capability()[0] >= 9
gpu = pytest.mark.skipif(not HOPPER, reason="PDL needs a CUDA GPU of compute capability >= 9")

# rows: 1 (fp8 GEMV / int4 quad or GEMV), 2 and 9 (swap-AB); N not a multiple of any tile width (rows past N are
# clamped in the prefetch); K: ragged last group, one group + 40, several steps of split-K
SHAPES = [(1, 200, 392), (2, 70, 256), (9, 130, 1160), (1, 1000, 2048)]


@pytest.fixture
def pdl():
    saved = quant_pdl.ENABLED

    def set_(on: bool):
        quant_pdl.ENABLED = on
    yield set_
    quant_pdl.ENABLED = saved


def test_pdl_off_on_cpu_and_under_the_interpreter(pdl, monkeypatch):
    pdl(True)
    assert quant_pdl.use_pdl(torch.device("cpu")) is False
    assert quant_pdl.pdl_launch(torch.device("cpu")) == {"PDL": False}  # no launch option: a plain launch
    monkeypatch.setattr(quant_pdl, "use_pdl", lambda device: True)  # where PDL is on: the constexpr and the option
    assert quant_pdl.pdl_launch(torch.device("cpu")) == {"PDL": True, "launch_pdl": True}
    assert quant_pdl.pdl_launch(torch.device("cpu"), allowed=False) == {"PDL": False}


def _int4_case(m, n, k, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen).to(torch.bfloat16)
    packed, s = quantize_int4_group(make_weight(gen, n, k))
    return x, packed, s, ref_int4_gemm(x, packed, s)


def _both(pdl, fn):
    outs = []
    for on in (False, True):
        pdl(on)
        outs.append(fn())
    return outs


@gpu
@pytest.mark.parametrize("split_k", [None, 1, 3])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_pdl_output_equals_output_without(pdl, m, n, k, split_k):
    if split_k and split_k > -(-k // 128):
        pytest.skip("more splits than K groups")
    x, wq, ws, ref8 = fp8_case(m, n, k, 100 * m + n + k)
    xi, packed, s, ref4 = _int4_case(m, n, k, 200 * m + n + k)
    for path in ("auto", "gemv") if m == 1 else ("auto", "swap"):
        def run8():
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
            return fp8_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV), split_k=split_k, out=out, path=path)

        def run4():
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
            return int4_gemm(xi.to(DEV), packed.to(DEV), s.to(DEV), split_k=split_k, out=out, path=path)
        for (off, on), ref in ((_both(pdl, run8), ref8), (_both(pdl, run4), ref4)):
            assert not torch.isnan(on).any()
            assert torch.equal(off, on), path
            assert rel(on, ref) < TOL


@gpu
@pytest.mark.parametrize("fmt", ["fp8", "int4"])
@pytest.mark.parametrize("m", [1, 4])
def test_pdl_chain_in_one_graph_reads_the_previous_output(pdl, fmt, m):
    """Three square GEMMs, each on the previous one's output, captured in one CUDA graph: with PDL the next kernel's
    programs start before the previous grid ends, so a read of the activations before the wait would see stale or
    NaN values. The chain must equal the chain without PDL bit for bit."""
    n = k = 1024
    gen = torch.Generator().manual_seed(41 + m)
    ws = [make_weight(gen, n, k) for _ in range(3)]
    if fmt == "fp8":
        from wmtp.measure.kernels.quant_gemm import quantize_fp8_block
        ops = [tuple(t.to(DEV) for t in quantize_fp8_block(w)) for w in ws]
        gemm = fp8_gemm
    else:
        ops = [tuple(t.to(DEV) for t in quantize_int4_group(w)) for w in ws]
        gemm = int4_gemm
    x0 = torch.randn(m, k, generator=gen).to(torch.bfloat16).to(DEV)

    def chain(on):
        pdl(on)
        bufs = [torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV) for _ in range(3)]

        def run():
            h = x0
            for (w, sc), out in zip(ops, bufs):
                h = gemm(h, w, sc, out=out)
            return h
        run()  # compile outside the capture
        for b in bufs:
            b.fill_(float("nan"))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            run()
        for b in bufs:
            b.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        return [b.clone() for b in bufs]
    off, on = chain(False), chain(True)
    for a, b in zip(off, on):
        assert not torch.isnan(b).any()
        assert torch.equal(a, b)


def _e4m3_midpoints() -> torch.Tensor:
    """Every midpoint between neighbouring positive e4m3 values (normals and subnormals), by hand: below 2^-6 the
    values are j * 2^-9, above them (1 + j / 8) * 2^e for e = -6..8, up to 448."""
    vals = [j * 2.0 ** -9 for j in range(8)] + [(1 + j / 8) * 2.0 ** e for e in range(-6, 9) for j in range(8)]
    vals = sorted(v for v in vals if v <= 448)
    return torch.tensor([(a + b) / 2 for a, b in zip(vals, vals[1:])], dtype=torch.float64)


@gpu
@pytest.mark.parametrize("scale", [3.0, 0.7, 1e-4, 37.0])
def test_fp8_gemv_division_modes_give_the_same_codes(scale):
    """The fp8 GEMV quantizes its activations per 128-group by x / s. Without an IEEE division ('nodiv', the default)
    the scale and quotient must be the IEEE ones ('rn'), so the outputs must be bit-identical, also where
    x / s is exactly a midpoint between two e4m3 codes (where any 1-ulp error flips the rounding): each group holds
    448 * scale (so s = scale, up to its bf16 / fp32 rounding) and scale * midpoints, plus random values over 8
    decades below it."""
    from wmtp.measure.kernels import quant_gemm as qg
    mids = _e4m3_midpoints()
    k = 128 * 64
    gen = torch.Generator().manual_seed(int(scale * 1000) % 9973)
    x = torch.randn(1, k, generator=gen, dtype=torch.float64) * torch.logspace(-6, 2, k, dtype=torch.float64) * scale
    x = x.clamp(-400 * scale, 400 * scale)  # below each group's 448 * scale, so that it sets the group's scale
    for g in range(0, k, 128):
        x[0, g] = 448 * scale
        j = torch.randint(0, len(mids), (60,), generator=gen)
        x[0, g + 1:g + 61] = mids[j] * scale * torch.where(torch.rand(60, generator=gen) < 0.5, -1.0, 1.0)
    x = x.to(torch.bfloat16)  # the midpoints times scale may round in bf16: the set stays adversarial near them
    n = 256
    wq, ws = qg.quantize_fp8_block(make_weight(gen, n, k))
    outs = {}
    saved = qg.GEMV_ACT_DIV
    try:
        for mode in ("rn", "nodiv"):
            qg.GEMV_ACT_DIV = mode
            outs[mode] = fp8_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV), path="gemv", out_dtype=torch.float32)
    finally:
        qg.GEMV_ACT_DIV = saved
    pre_q, pre_s = qg.quantize_act_fp8(x.to(DEV))  # the act-quant kernel, its own launch
    pre = fp8_gemm(pre_q, wq.to(DEV), ws.to(DEV), x_scale=pre_s, path="gemv", out_dtype=torch.float32)
    assert torch.equal(outs["rn"], pre)
    assert torch.equal(outs["nodiv"], outs["rn"])


@pytest.fixture(scope="module")
def div_kernel():
    import triton
    import triton.language as tl
    from wmtp.measure.kernels.quant_formats import rn_quotient, rn_scale

    @triton.jit
    def kernel(X, S, Q, A, R, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = i < n
        x = tl.load(X + i, mask=ok, other=0.0)
        s = tl.load(S + i, mask=ok, other=1.0)
        tl.store(Q + i, rn_quotient(x, s), mask=ok)
        tl.store(R + i, rn_scale(tl.load(A + i, mask=ok, other=1.0), 448.0), mask=ok)
    return kernel


def _floats(bits_lo, bits_hi, n, gen):
    """n fp32 values whose bit patterns are uniform in [bits_lo, bits_hi) (uniform in exponent and mantissa)."""
    b = torch.randint(bits_lo, bits_hi, (n,), generator=gen, dtype=torch.int64).to(torch.int32)
    return b.view(torch.float32)


@pytest.mark.skipif(DEV != "cuda", reason="fma is exact only on the GPU (the interpreter rounds twice)")
def test_division_free_quotient_and_scale_are_ieee(div_kernel):
    """`rn_quotient` (x / s) and `rn_scale` (amax / 448) against torch's IEEE fp32 division, bit for bit, over 2^22
    random pairs: s uniform in bits over 2^-40..2^40 with a quarter of its mantissas forced to all ones (the
    reciprocal iteration's exception) or one below, x over 2^-30..2^30 with both signs, amax over 1e-10..2^60."""
    n = 1 << 22
    gen = torch.Generator().manual_seed(2026)
    one = 0x3F800000
    s = _floats(one - (40 << 23), one + (40 << 23), n, gen)
    sb = s.view(torch.int32)
    pick = torch.randint(0, 8, (n,), generator=gen)
    sb = torch.where(pick == 0, sb | 0x7FFFFF, torch.where(pick == 1, (sb | 0x7FFFFF) - 1, sb))
    s = sb.view(torch.float32)
    x = _floats(one - (30 << 23), one + (30 << 23), n, gen) * torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)
    amax = _floats(0x2EDBE6FF, one + (60 << 23), n, gen)  # 1e-10 (FP8_EPS) .. 2^60
    q, r = torch.empty(n, device=DEV), torch.empty(n, device=DEV)
    xs, ss, aa = x.to(DEV), s.to(DEV), amax.to(DEV)
    div_kernel[(n // 1024,)](xs, ss, q, aa, r, n, BLOCK=1024)
    assert torch.equal(q, xs / ss)
    assert torch.equal(r, aa / torch.full_like(aa, 448.0))  # a tensor divisor: torch turns a scalar one into a product


@pytest.mark.parametrize("args, fragment", [(["--ms", "abc"], "--ms"), (["--ms", "0"], "--ms"),
                                            (["--models", "q35,zz"], "'zz'")])
def test_pdl_bench_bad_options_are_one_error_line(tmp_path, capsys, args, fragment):
    from wmtp.measure.scripts import quant_pdl_bench
    assert quant_pdl_bench.main(["--out", str(tmp_path / "o"), "--quick", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0]
    assert not (tmp_path / "o").exists()  # nothing written
