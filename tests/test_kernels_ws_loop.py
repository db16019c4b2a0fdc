"""The ws kernel's consumer-loop options (`paged_ws_loop`: loop orders and their default, q_regs, exp2, ablate,
lazy): fp64 checks on a Hopper GPU, refusals before any launch, and what the sm_90 build holds."""

from __future__ import annotations

import pytest
import torch

from kernel_refs import ref_attention
from ws_checks import against_fp64, case, probe

from wmtp.kernel_plan import ws_plan, ws_tiling

ws = pytest.importorskip("wmtp.measure.kernels.paged_ws")
from wmtp.measure.kernels import paged_ws_loop  # noqa: E402 (after the skip, with the module)

HOPPER = torch.cuda.is_available() and ws.hopper(torch.device("cuda"))


@pytest.mark.skipif(not HOPPER, reason="the ws kernel needs a Hopper GPU")
@pytest.mark.parametrize("shape", [(32, 2, 128), (8, 1, 64), (16, 1, 64), (16, 2, 256)])
@pytest.mark.parametrize("d", [1, 2, 5, 7, 9])
@pytest.mark.parametrize("kw", [dict(q_regs=True), dict(q_regs=True, num_splits=37), dict(q_regs=True, loop="pingpong"),
                                dict(q_regs=True, consumers=1), dict(exp2="fma"), dict(exp2="fma", num_splits=37),
                                dict(exp2="fma", q_regs=True), dict(exp2="fma", loop="paired"),
                                dict(q_regs=True, loop="serial")])
def test_consumer_options_against_fp64(shape, d, kw):
    """q_regs (Q loaded into registers once, S = Q K^T from them) where it runs (head dim <= 128, one or two consumer
    partitions) and exp2='fma' (the softmax's exponentials as a cubic on the FMA pipes) everywhere, against fp64
    torch with a NaN-poisoned output; 37 forced splits leave most splits a partial tile or empty."""
    hq, hkv, hd = shape
    if kw.get("q_regs") and (hd > 128 or (hq // hkv) * d > 128):
        pytest.skip("q_regs is refused here (test_q_regs_is_refused_where_it_spills_before_any_launch)")
    against_fp64(shape, d, kw, seed=d * 17 + hq)


@pytest.mark.skipif(not HOPPER, reason="the ws kernel needs a Hopper GPU")
@pytest.mark.parametrize("shape, d", [((32, 2, 128), 5), ((32, 2, 128), 7), ((32, 2, 128), 9), ((8, 1, 64), 9)])
@pytest.mark.parametrize("kw", [dict(lazy=True, loop="overlap"), dict(lazy=True, loop="overlap", num_splits=37),
                                dict(lazy=True, loop="overlap-pp")])
def test_lazy_rescale_against_fp64(shape, d, kw):
    """lazy (a row's maximum moves only by more than 2^8; the accumulator rescaled only where one moved) in the
    overlapped orders, on blocks of two or three consumer partitions: the division by the sum makes it exact. With
    N(0, 1) keys no row's maximum moves by 2^8 after its first tile, so the rescale branch would go untested: one key
    past the first 2000 of the long request is scaled by 40, which moves most rows' maxima by far more."""
    hq, hkv, hd = shape
    n_kv = [3001, 64, d, 700]
    q, k, v, ptr, ind, qo = case(hq, hkv, hd, d, n_kv, seed=d * 13 + hq)
    k[ind[2049].long()] *= 40
    ref = ref_attention(q, k.float(), v.float(), ptr, ind, qo)
    out = torch.full_like(q, float("nan"))
    ws.ws_attention(q, k, v, ptr, ind, None if d == 1 else qo, d, max(n_kv), out=out, **kw)
    assert not torch.isnan(out).any()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err < 1e-2, err


def test_consumer_options_are_refused_where_they_do_not_run_before_any_launch():
    """Refused with a reason, on a CPU tensor (no launch is reached): q_regs at head dim 256 (64 more registers a
    thread beside a 128-register accumulator) and with three consumer partitions (spills); q_regs, exp2, ablate and
    lazy each with fp8 K/V; an unknown exp2 or ablate; ablate outside the serial order (its ablations are of that
    order); lazy outside the overlapped orders."""
    def call(hq, hd, d, kv_dtype=torch.bfloat16, **kw):
        q = torch.zeros(d, hq, hd, dtype=torch.bfloat16)
        k = torch.zeros(64, 2, hd, dtype=torch.bfloat16).to(kv_dtype)
        ptr = torch.tensor([0, 64], dtype=torch.int32)
        ws.ws_attention(q, k, k, ptr, torch.arange(64, dtype=torch.int32), torch.tensor([0, d], dtype=torch.int32),
                        d, 64, sm_count=132, **kw)
    with pytest.raises(ValueError, match="head dim 128 and below, got 256"):
        call(32, 256, 2, q_regs=True)
    with pytest.raises(ValueError, match="3 consumer partitions spills"):
        call(32, 128, 9, q_regs=True)  # 144 rows: one 192-row block
    for opt in (dict(q_regs=True), dict(exp2="fma"), dict(ablate="pv"), dict(lazy=True)):
        with pytest.raises(ValueError, match="bf16 / fp16 K/V only"):  # q_regs on fp8: a wrong result (h200-ws5)
            call(32, 128, 5, torch.float8_e4m3fn, **opt)
    with pytest.raises(ValueError, match="exp2 must be 'mufu' or 'fma'"):
        call(32, 128, 2, exp2="poly")
    with pytest.raises(ValueError, match="ablate None, 'softmax' or 'pv', got 'mufu', 'none'"):
        call(32, 128, 2, ablate="none")
    with pytest.raises(ValueError, match="ablate runs in the serial order only .* not 'overlap'"):
        call(32, 128, 5, ablate="softmax", loop="overlap")
    with pytest.raises(ValueError, match=r"lazy runs in the overlapped orders only, not 'serial' \(the default wi"):
        call(32, 128, 2, lazy=True)  # 32 rows: one consumer partition, the serial order
    with pytest.raises(ValueError, match="lazy runs in the overlapped orders only, not 'paired'$"):
        call(32, 128, 5, lazy=True, loop="paired")  # 80 rows: two partitions, an order lazy does not run in


def test_ablations_run_the_serial_order_whatever_the_plans_default(monkeypatch):
    """ablate with no loop named takes the serial order even where the plan's default is the overlapped one (80 rows
    at head dim 128: two consumer partitions), since run 2's ablations were of the serial order: the launch gets
    LOOP 0 and the ablation's option bit (8: no P V MMA); without ablate the same plan gets LOOP 3."""
    seen = []

    class Launch:
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append((kw["LOOP"], kw["OPTS"]))

    monkeypatch.setattr(ws, "_ws_split_kernel", Launch())
    monkeypatch.setattr(ws, "merge_splits", lambda mid_o, mid_l, out, **kw: out)
    q = torch.zeros(5, 32, 128, dtype=torch.bfloat16)
    k = torch.zeros(64, 2, 128, dtype=torch.bfloat16)
    args = (q, k, k, torch.tensor([0, 64], dtype=torch.int32), torch.arange(64, dtype=torch.int32),
            torch.tensor([0, 5], dtype=torch.int32), 5, 64)
    ws.ws_attention(*args, sm_count=132, ablate="pv")
    ws.ws_attention(*args, sm_count=132)
    assert seen == [(0, 8), (3, 0)]


@pytest.mark.parametrize("rows, head_dim, decode, consumers", [(16, 128, True, 1), (112, 128, False, 2),
                                                                (64, 64, False, 1)])
def test_q_regs_takes_the_score_mma_operand_from_registers(rows, head_dim, decode, consumers):
    """With QREG every S = Q K^T warpgroup MMA (N = the key tile) reads A from registers, without it from shared
    memory; P V reads P from registers in both; QREG adds no spill (sm_90 build, the installed Triton)."""
    base = probe(rows, head_dim, int(decode), consumers, 128, 0, 0, 0, 0)
    qreg = probe(rows, head_dim, int(decode), consumers, 128, 0, 0, 0, 1)
    bn = ws_tiling(rows, head_dim, max_rows=128)[2]
    score = f"m64n{bn}k16"
    assert base["wgmma_forms"].get(f"{score} SS") and not base["wgmma_forms"].get(f"{score} RS")
    assert qreg["wgmma_forms"].get(f"{score} RS") == base["wgmma_forms"][f"{score} SS"]
    assert not qreg["wgmma_forms"].get(f"{score} SS")
    pv = f"m64n{head_dim}k16 RS"
    assert qreg["wgmma_forms"][pv] == base["wgmma_forms"][pv] > 0
    assert qreg["spill_stores"] <= base["spill_stores"]


@pytest.mark.parametrize("rows, head_dim, decode, consumers, max_rows", [(16, 128, True, 1, 128),
                                                                          (112, 128, False, 2, 128)])
def test_the_overlapped_loop_waits_for_s_alone(rows, head_dim, decode, consumers, max_rows):
    """loop='overlap' (LOOP 3): the loop waits for the S MMA with one group (the P V issued after it) still in
    flight, which the serial and paired orders never do; on one or two 64-row consumers no spill is added."""
    serial = probe(rows, head_dim, int(decode), consumers, max_rows, 0, 0, 0, 0)
    paired = probe(rows, head_dim, int(decode), consumers, max_rows, 0, 0, 1, 0)
    over = probe(rows, head_dim, int(decode), consumers, max_rows, 0, 0, 3, 0)
    assert serial["wait_groups"] == paired["wait_groups"] == [0]
    assert over["wait_groups"] == [0, 1]
    assert over["spill_stores"] <= serial["spill_stores"]


@pytest.mark.parametrize("rows, head_dim, decode, consumers, max_rows", [(16, 128, True, 1, 128),
                                                                          (112, 128, False, 2, 128),
                                                                          (144, 128, False, 3, 192),
                                                                          (16, 256, True, 1, 128)])
def test_exp2_fma_leaves_the_mufu_the_rescale_only(rows, head_dim, decode, consumers, max_rows):
    """exp2='fma' (OPTS bit 2): the tile's exponentials leave the MUFU (ex2.approx): what is left is the rescale
    factor's, one per row a thread holds, against one per score element without it; no new spill."""
    base = probe(rows, head_dim, int(decode), consumers, max_rows, 0, 0, 0, 0)
    fma = probe(rows, head_dim, int(decode), consumers, max_rows, 0, 0, 0, 2)
    assert base["ex2"] > 0 and fma["ex2"] * 8 <= base["ex2"]
    assert fma["spill_stores"] <= base["spill_stores"]


@pytest.mark.parametrize("rows, head_dim, fp8, want", [(16, 128, False, "serial"), (80, 128, False, "overlap"),
                                                     (144, 128, False, "overlap"), (80, 256, False, "serial"),
                                                     (80, 128, True, "serial"), (64, 64, False, "serial")])
def test_the_default_loop_order_by_consumer_partitions(rows, head_dim, fp8, want):
    """Two or three consumer partitions (64-row warpgroups of a 128 / 192-row block below head dim 256) run the
    overlapped order by default; one partition (64-row blocks, or the 8-warp partition of head dim 256) and fp8 K/V
    the serial one (h200-ws5 run 3)."""
    plan = ws_plan(1, 2, rows, 1, head_dim, 1 << 20, 132, kv_fp8=fp8)
    assert paged_ws_loop.default_loop(plan.consumers, fp8) == want
