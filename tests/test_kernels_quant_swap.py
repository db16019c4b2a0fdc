"""The swap-AB FP8 path of the quantized GEMMs (`quant_swap`: weights in the MMA's M slot, M <= 64) against the fp64
references of test_kernels_quant (written independently of the module), its split-K, dispatch and errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from test_kernels_quant import DEV, TOL, fp8_case, make_weight, ref_fp8_gemm, rel  # noqa: E402
from wmtp.measure.kernels import quant_gemm as qg  # noqa: E402
from wmtp.measure.kernels.quant_gemm import fp8_gemm, quantize_act_fp8, quantize_fp8_block  # noqa: E402
from wmtp.measure.kernels.quant_swap import swap_plan  # noqa: E402

pytestmark = pytest.mark.kernels

# M = 1, 5, 33 (BLOCK_M 16, 16, 64); N not a multiple of 64 / 128 and crossing a 128-row scale block inside a
# 128-wide tile only when tiles are 64 + 128 apart; K = 3 groups + 8 (a ragged last group), 2 groups, 1 group + 40
SWAP_SHAPES = [(1, 200, 392), (5, 70, 256), (33, 130, 168)]


@pytest.mark.parametrize("split_k", [None, 1, 2])
@pytest.mark.parametrize("m, n, k", SWAP_SHAPES)
def test_fp8_swap_matches_reference(m, n, k, split_k):
    x, wq, ws, ref = fp8_case(m, n, k, 7000 * m + n + k)
    assert ref.abs().max() > 1e-2
    xq, xs = quantize_act_fp8(x.to(DEV))  # pre-quantized activations: the same numbers, so the same output
    pre = fp8_gemm(xq, wq.to(DEV), ws.to(DEV), x_scale=xs, split_k=split_k, path="swap")
    assert rel(pre, ref) < TOL
    for act in ("pre", "loop", "prologue"):  # `quantize_act_fp8` first, in the K loop, in a prologue of the kernel
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)
        qg.SWAP_ACT, saved = act, qg.SWAP_ACT
        try:
            fp8_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV), split_k=split_k, out=out, path="swap")
        finally:
            qg.SWAP_ACT = saved
        assert not torch.isnan(out).any()
        assert torch.equal(out, pre), act


def test_fp8_swap_block_n_64_and_128_cross_scale_blocks():
    """Rows 0..255 with a different scale per 128-row block (weights built so each block's scale differs by 16x):
    a tile that applied one block's scale to the other's rows would be off by O(1)."""
    gen = torch.Generator().manual_seed(31)
    w = make_weight(gen, 256, 256)
    w[128:] *= 16.0
    wq, ws = quantize_fp8_block(w)
    assert float(ws[1].min()) > 8 * float(ws[0].max())
    x = torch.randn(3, 256, generator=gen).to(torch.bfloat16)
    ref = ref_fp8_gemm(x, wq, ws)
    for bn in (64, 128):
        out = fp8_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV), block_n=bn, out_dtype=torch.float32, path="swap")
        # fp8 tensor-core sums are not exact fp32 (1.3e-4 measured on the H200); a wrong block scale is O(1)
        assert rel(out[:, :128], ref[:, :128]) < 1e-3 and rel(out[:, 128:], ref[:, 128:]) < 1e-3


def test_fp8_swap_known_answer():
    """One-hot weights and activations exactly representable in e4m3: y[m, n] = x[m, n % K] by hand."""
    k, n = 128, 96
    w = torch.zeros(n, k)
    w[torch.arange(n), torch.arange(n) % k] = 1.0
    wq, ws = quantize_fp8_block(w)  # scale 1 / 448 per block; 1.0 -> 448 exactly
    x = torch.tensor([[float(2 ** (j % 5)) for j in range(k)], [-0.5] * k]).to(torch.bfloat16)
    out = fp8_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV), out_dtype=torch.float32, path="swap").cpu()
    want = torch.tensor([[float(2 ** (j % 5)) for j in range(n)], [-0.5] * n])
    assert torch.allclose(out, want, rtol=1e-6, atol=0)


def test_swap_plan():
    """BLOCK_M the power of two >= M (>= 16); 128-wide tiles when they give an SM a tile each; split-K to about 4
    programs per SM, capped so the fp32 partials stay under half the weight bytes."""
    assert swap_plan(1, 20480, 3072, 132) == (16, 128, 4, 6)  # 160 tiles; want 4 splits of 24 groups: 6 each
    assert swap_plan(33, 3072, 8192, 132)[:2] == (64, 64)  # 24 tiles of 128 < 132: 64-wide
    # M = 64: want ceil(4 * 132 / 160 tiles) = 4 splits, cap K / (16 M) = 3 at K = 3072
    assert swap_plan(64, 20480, 3072, 132) == (64, 128, 3, 8)
    assert swap_plan(2, 200, 392, 4, split_k=3) == (16, 64, 2, 2)  # 4 groups: splits of 2, no empty third split
    # fit: at most C programs an SM. 160 tiles, C = 2: floor(264 / 160) = 1 split; C = 4: floor(528 / 160) = 3 of 8
    assert swap_plan(1, 20480, 3072, 132, ctas_per_sm=2, fit=True) == (16, 128, 1, 24)
    assert swap_plan(1, 20480, 3072, 132, ctas_per_sm=4, fit=True) == (16, 128, 3, 8)
    for n, k, c in ((18560, 4096, 2), (4096, 8192, 3), (17408, 3072, 6), (131072, 4096, 2)):
        _, bn, split, per = swap_plan(2, n, k, 132, ctas_per_sm=c, fit=True)
        tiles, groups = -(-n // bn), -(-k // 128)
        assert tiles * split <= max(c * 132, tiles) and (split - 1) * per < groups <= split * per


def test_swap_errors():
    x = torch.zeros(2, 256, dtype=torch.bfloat16, device=DEV)
    wq = torch.zeros(64, 256, dtype=torch.float8_e4m3fn, device=DEV)
    ws = torch.ones(1, 2, device=DEV)
    with pytest.raises(ValueError, match="1..64 rows"):
        fp8_gemm(torch.zeros(65, 256, dtype=torch.bfloat16, device=DEV), wq, ws, path="swap")
    with pytest.raises(ValueError, match="block_n 64 or 128"):
        fp8_gemm(x, wq, ws, block_n=32, path="swap")
    with pytest.raises(ValueError, match="split_k must be in"):
        fp8_gemm(x, wq, ws, split_k=3, path="swap")
    with pytest.raises(ValueError, match="path must be one of auto, gemv, dot, got"):  # dense int4 has one
        qg.int4_moe_gemm(x, torch.zeros(1, 64, 128, dtype=torch.uint8, device=DEV),
                         torch.ones(1, 64, 2, dtype=torch.bfloat16, device=DEV),
                         torch.zeros(2, 1, dtype=torch.int64, device=DEV), path="swap")


def test_fp8_swap_runs_the_one_wave_plan(monkeypatch):
    """fp8_gemm's 'auto' at SWAP_AUTO_M rows takes swap-AB planned for SWAP_CTAS programs an SM with fit=True
    (`launch_swap` records its stages, programs an SM and fit, then runs), and matches the fp64 reference."""
    x, wq, ws, ref = fp8_case(3, 200, 392, 4242)
    seen = []
    real = qg.launch_swap
    monkeypatch.setattr(qg, "launch_swap", lambda *a: seen.append((a[11], a[12], a[14])) or real(*a))
    assert rel(fp8_gemm(x.to(DEV), wq.to(DEV), ws.to(DEV)), ref) < TOL
    assert seen == [(qg.SWAP_STAGES, qg.SWAP_CTAS, qg.SWAP_FIT)] and qg.SWAP_FIT


def test_swap_plan_fits_the_resident_programs():
    """The fp8 swap-AB build of 128-wide tiles (16 rows, SWAP_STAGES stages) lets SWAP_CTAS programs reside on an SM
    (ptxas for sm_90 with this Triton; the device run printed the lent GPU's), so the plan is one wave there; the
    64-wide build lets more reside (it runs fewer programs than fit, which run3 timed as no slower in geomean)."""
    pytest.importorskip("triton.backends.nvidia")
    from probe_proc import run_probe
    from wmtp.measure.kernels import quant_gemm as qg

    got64 = run_probe("swap_compile_probe.py", 64, 16, qg.SWAP_STAGES)
    assert got64["resident"] >= qg.SWAP_CTAS, got64
    got = run_probe("swap_compile_probe.py", 128, 16, qg.SWAP_STAGES)
    assert got["spill_stores"] == 0 and got["resident"] >= qg.SWAP_CTAS, got
