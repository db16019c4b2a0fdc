"""Per-M regimes of the quantized fits (issue 17): the split on a hand-built table whose winners are known by
construction, each regime's fit recovering its own constant and bandwidth, pricing that takes the regime of a
call's M (hand arithmetic), profiles without regimes pricing by the one-fit rule as before, and corrupt regimes
refused with one error line."""

from __future__ import annotations

import gzip
import json
import math

import pandas as pd
import pytest
from typer.testing import CliRunner

from wmtp.calibrate import quant_fit
from wmtp.calibrate.quant_fit import TIE_REL, fit_quant, merge_quant, shapes, split_m
from wmtp.cli.main import app
from wmtp.errors import ProfileError, WmtpError
from wmtp.hardware import get_hardware
from wmtp.latency import draft_fwd_work, verify_work
from wmtp.models import get_model
from wmtp.profile import PROFILES_DIR, ProfileCostModel, load_profile, regime_index
from wmtp.work import Work

OURS, TINY, OTHER = "wmtp_int4_group_auto", "torch_int4pack_mm", "wmtp_int4_group_swap[x]"
# (model, component, N, K, weight bytes): weight bytes chosen apart from N K so that bytes and flops are not
# collinear within one M.
SHAPES = [("q35", "attn_qkv", 1024, 2048, 3.0e6), ("q35", "lin_in", 2048, 2048, 9.0e6),
          ("q122", "attn_qkv", 1536, 1024, 20.0e6), ("q122", "lin_in", 1024, 4096, 7.0e6),
          ("nem", "attn_qkv", 512, 2048, 40.0e6), ("nem", "lin_in", 4096, 1024, 14.0e6)]


SHIPPED_SWITCH = dict(quant_fit.KERNEL_SWITCH_M)  # read before the fixture below empties it


@pytest.fixture(autouse=True)
def no_kernel_switches(monkeypatch):
    """The split by winners alone (the shipped `KERNEL_SWITCH_M` names OURS; its own tests set it)."""
    monkeypatch.setattr(quant_fit, "KERNEL_SWITCH_M", {})


def _row(kernel, model, comp, m, n, k, wb, t):
    return {"kernel": kernel, "model": model, "component": comp, "M": m, "N": n, "K": k, "E": 1, "top_k": 1,
            "weight_bytes": wb, "time_ms": t, "error": ""}


def _table(times) -> pd.DataFrame:
    """One row per (kernel, shape, M) with time `times(kernel, shape index, M)` (None: not run)."""
    rows = [_row(kern, s[0], s[1], m, s[2], s[3], s[4], t)
            for kern in (OURS, TINY, OTHER) for i, s in enumerate(SHAPES) for m in (1, 2, 4, 8, 16, 32)
            if (t := times(kern, i, m)) is not None]
    return pd.DataFrame(rows)


def _canonical(df: pd.DataFrame) -> pd.DataFrame:
    """The table as `read_quant` hands it on (its `bytes` column is the benchmark's weight bytes)."""
    return df.rename(columns={"weight_bytes": "bytes"})


def _by_construction(kern, i, m):
    """Winners by construction: M = 1 ours (geomean, though slower on 4 of 6 shapes), M = 2 tinygemm, M = 4 and 8
    ours (OTHER 0.5 % faster at M = 8: a tie), M = 16 and 32 only tinygemm ran."""
    if kern == TINY:
        return 0.010
    if m >= 16:
        return None
    if kern == OURS:
        if m == 1:  # 0.004 ms on two shapes, 0.011 ms on four: geomean (0.004^2 0.011^4)^(1/6) = 0.00787 < 0.010
            return 0.004 if i < 2 else 0.011
        return 0.020 if m == 2 else 0.008
    return 0.008 * (1 - TIE_REL / 2) if m == 8 else 0.012  # OTHER


def test_split_m_finds_the_winners_built_into_the_table():
    g = shapes(_canonical(_table(_by_construction)))
    regs = split_m(g, "int4", "gemm", OURS)
    assert [(r["m_range"], r["impl"]) for r in regs] == [([1, 1], OURS), ([2, 2], TINY), ([4, 8], OURS),
                                                        ([16, 32], TINY)]
    # per regime: the geometric means over the shapes every candidate ran at its M
    m1 = regs[0]["candidates"]
    assert m1[OURS]["geomean_ms"] == pytest.approx((0.004 ** 2 * 0.011 ** 4) ** (1 / 6))
    assert m1[TINY]["geomean_ms"] == pytest.approx(0.010) and m1[OTHER]["geomean_ms"] == pytest.approx(0.012)
    assert regs[2]["candidates"][OURS]["common_shapes"] == 12  # 6 shapes x M = 4, 8
    assert regs[2]["candidates"][OTHER]["geomean_ms"] == pytest.approx(
        math.sqrt(0.012 * 0.008 * (1 - TIE_REL / 2)))
    assert set(regs[3]["candidates"]) == {TINY}


def test_a_lead_beyond_the_tie_takes_the_m():
    def times(kern, i, m):  # OTHER 3 % faster than ours at M = 8: a regime of its own
        t = _by_construction(kern, i, m)
        return 0.008 * 0.97 if kern == OTHER and m == 8 else t

    regs = split_m(shapes(_canonical(_table(times))), "int4", "gemm", OURS)
    assert [(r["m_range"], r["impl"]) for r in regs][2:4] == [([4, 4], OURS), ([8, 8], OTHER)]


def test_one_winner_everywhere_writes_the_component_as_before():
    table = _table(lambda kern, i, m: (0.005 if kern == OURS else 0.010) if m <= 16 else None)
    fits = fit_quant(_canonical(table))
    f = fits["gemm@int4"]
    assert f["regimes"] is None and f["impl"] == OURS and f["fit"].n_shapes == 6 * 5


def test_a_kernel_switch_splits_one_winners_m(monkeypatch):
    """One implementation fastest at every M, but a dispatcher that changes kernels after M = 1 and after M = 8:
    three regimes of it, each fitted on its own rows."""
    monkeypatch.setattr(quant_fit, "KERNEL_SWITCH_M", {OURS: (1, 8)})
    table = _table(lambda kern, i, m: (0.005 if kern == OURS else 0.010) if m <= 16 else None)
    g = shapes(_canonical(table))
    assert [(r["m_range"], r["impl"]) for r in split_m(g, "int4", "gemm", OURS)] == [
        ([1, 1], OURS), ([2, 8], OURS), ([16, 16], OURS)]
    f = fit_quant(_canonical(table))["gemm@int4"]
    assert [r["fit"].n_shapes for r in f["regimes"]] == [6, 18, 6]
    monkeypatch.setattr(quant_fit, "KERNEL_SWITCH_M", {OURS: (3,)})  # between measured M = 2 and 4
    assert [r["m_range"] for r in split_m(g, "int4", "gemm", OURS)] == [[1, 2], [4, 16]]


def test_shipped_switch_points_are_the_dispatchers():
    """`KERNEL_SWITCH_M` of int4 path='auto' against `quant_gemm.int4_gemm`'s constants: a GEMV for one row, swap-AB
    from INT4_SWAP_AUTO_M's first row, the tensor-core kernel up to its AUTO_MAX_ROWS; fp8's against `fp8_gemm`'s."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from wmtp.measure.kernels import quant_gemm as qg
    from wmtp.measure.kernels import quant_mma_i4 as qm

    assert SHIPPED_SWITCH["wmtp_int4_group_auto"] == (qg.INT4_SWAP_AUTO_M[0] - 1, qm.AUTO_MAX_ROWS)
    # fp8 path='auto': the GEMV up to GEMV_MAX_M rows, swap-AB right after it up to SWAP_AUTO_M's last row
    assert qg.SWAP_AUTO_M[0] == qg.GEMV_MAX_M["fp8_block"] + 1
    assert SHIPPED_SWITCH["wmtp_fp8_block_auto"] == (qg.GEMV_MAX_M["fp8_block"], qg.SWAP_AUTO_M[1])


# ------------------------------------------------------------------------------------ fits per regime, merged
CONST = {OURS: 0.003, TINY: 0.005}
BW = {OURS: 2.0e12, TINY: 1.0e12}  # bytes per second


def _linear(kern, i, m):
    """t = const + bytes / bw, bytes as the latency model counts them: weights + bf16 activations in and out.
    Ours wins at M <= 8, tinygemm alone above."""
    if kern == OTHER or (kern == OURS and m > 8):
        return None
    _, _, n, k, wb = SHAPES[i]
    return CONST[kern] + (wb + m * (2 * k + 2 * n)) / BW[kern] * 1e3


def test_each_regime_fit_recovers_its_own_kernel(tmp_path, profile_copy):
    run = tmp_path / "run"
    run.mkdir()
    (run / "quant.csv.gz").write_bytes(gzip.compress(_table(_linear).to_csv(index=False).encode()))
    (run / "quant.md").write_text("# test\n\nGPU: NVIDIA H200 (test); 2026-11-30.\n")
    assert "gemm@int4" in merge_quant(profile_copy, run)
    comp = load_profile(profile_copy)["components"]["gemm@int4"]
    regs = comp["regimes"]
    assert [(r["m_range"], r["impl"]) for r in regs] == [([1, 8], OURS), ([16, 32], TINY)]
    for r in regs:
        coef = dict(zip(r["features"], r["coef_ms"]))
        assert coef["const"] == pytest.approx(CONST[r["impl"]], rel=1e-3)
        assert 1e3 / coef["bytes"] == pytest.approx(BW[r["impl"]], rel=1e-3)
        assert r["heldout"]["max_rel"] < 1e-3
        assert r["n_shapes"] == 6 * (4 if r["impl"] == OURS else 2)
    # the top level stays the all-M choice's fit (readers that do not know regimes)
    assert comp["impl"] == OURS and comp["const_per_kernel"] is True
    (src,) = load_profile(profile_copy)["weight_dtype_raw_data"].values()
    assert src["regimes"]["gemm@int4"] == [[1, 8, OURS], [16, 32, TINY]]
    md = profile_copy.with_suffix(".md").read_text()
    assert f"| gemm@int4 | 16-32 | {TINY} | 12 |" in md


# ------------------------------------------------------------------------------------------------ pricing
def _comp(const, bytes_coef=0.0, **kw):
    return {"features": ["const", "bytes", "flops"], "coef_ms": [const, bytes_coef, 0.0], "groups": {},
            "bytes_range": [0.0, 1e12], "flops_range": [0.0, 1e16], "n_shapes": 2,
            "heldout": {"median_rel": None, "p90_rel": None, "max_rel": None}, **kw,
            "points": [{"model": "x", "bytes": b, "flops": b * 1e3, "batch": 1.0} for b in (0.0, 1e12)]}


def _regime_profile() -> dict:
    regimes = [_comp(0.2, m_range=[1, 1], impl="kern_a"), _comp(0.3, m_range=[2, 2], impl="kern_b"),
               _comp(0.5, 1e-9, m_range=[4, 16], impl="kern_c")]
    comps = {"gemm": _comp(100.0), "moe": _comp(100.0), "lm_head": _comp(100.0),
             "gemm@int4": _comp(7.0, impl="kern_a", const_per_kernel=True, const_launches=None, regimes=regimes)}
    return {"hardware": "h200", "provenance": {"gpu_sm_count": 132}, "components": comps}


@pytest.mark.parametrize("tokens, per_call_ms, impl, outside", [
    (1, 0.2, "kern_a", False),
    (2, 0.3, "kern_b", False),
    (3, 0.5 + 1e-9 * 4e8 / 2, "kern_c", False),  # log(4/3) < log(3/2): the M 4-16 regime
    (7, 0.5 + 1e-9 * 4e8 / 2, "kern_c", False),
    (16, 0.5 + 1e-9 * 4e8 / 2, "kern_c", False),
    (40, 0.5 + 1e-9 * 4e8 / 2, "kern_c", True),  # above every measured M: the last regime, extrapolated
])
def test_pricing_takes_the_regime_of_the_calls_m(tokens, per_call_ms, impl, outside):
    model, h200, spec = ProfileCostModel(_regime_profile()), get_hardware("h200"), get_model("q122")
    # two launches of 4e8 bytes in all: const per launch, the byte term over the item's bytes; 3 layers
    w = Work("gemm", "verify.attn_proj", 4e8, 1e9, 2, 3, {"tokens": tokens, "wdtype": "int4"})
    p = model.price(w, h200, spec)
    assert p.time_ms == pytest.approx(3 * 2 * per_call_ms)
    assert impl in p.source and ("outside the measured M" in p.source) == outside
    assert p.source.origin.value == ("extrapolated" if outside else "interpolated")


def test_lm_head_and_items_without_tokens_take_a_regime():
    model, h200, spec = ProfileCostModel(_regime_profile()), get_hardware("h200"), get_model("q122")
    lm = Work("lm_head", "fwd.lm_head", 1e8, 1e9, 1, 1, {"tokens": 2, "wdtype": "int4"})
    assert model.price(lm, h200, spec).time_ms == pytest.approx(0.3)
    w = Work("gemm", "verify.attn_proj", 0.0, 1e9, 1, 1, {"batch": 2, "d": 8, "wdtype": "int4"})  # M = 16
    assert model.price(w, h200, spec).time_ms == pytest.approx(0.5)


def test_regime_index_by_hand():
    comp = {"regimes": [{"m_range": [1, 2]}, {"m_range": [8, 8]}, {"m_range": [32, 256]}]}
    assert regime_index(comp, 2.0) == (0, False)
    assert regime_index(comp, 4.0) == (0, False)  # log(4/2) == log(8/4): the lower regime
    assert regime_index(comp, 5.0) == (1, False)
    assert regime_index(comp, 20.0) == (2, False)  # log(32/20) = 0.47 < log(20/8) = 0.92
    assert regime_index(comp, 300.0) == (2, True)
    assert regime_index({"coef_ms": [1.0]}, 5.0) == (None, False)


# ------------------------------------------------------------------------------ profiles without regimes
def _one_fit_price(comps: dict, w: Work, spec, wdtype: str) -> float:
    """The pricing rule of a profile without regimes, written out: factor x (const x launches + bytes + flops
    terms) x count with the dtype's fit (the dense int4 fit for an lm_head), and the bf16 reference's rate where it
    is cheaper: the quant benchmark's bf16 GEMM (`gemm@bf16`, per call, no shape factor) for dense items, the
    sweep's bf16 fit (with its factor) for the experts and where the profile has no `gemm@bf16`."""
    from wmtp.features import group_name

    def t(c, launches, factor=True):
        co = dict(zip(c["features"], c["coef_ms"]))
        f = c.get("groups", {}).get(f"{spec.key}|{group_name(w.name)}", 1.0) if factor else 1.0
        return f * (co["const"] * launches + co["bytes"] * w.bytes + co["flops"] * w.flops) * w.count

    path = {"nvfp4": "int4"}.get(wdtype, wdtype)
    q = comps.get(f"{w.kind}@{path}") or (comps.get(f"gemm@{path}") if w.kind == "lm_head" else None)
    if q is None or path == "bf16":  # bf16 weights (an lm_head the checkpoint keeps): the sweep's fit
        return t(comps[w.kind], 1.0)
    ref = comps.get("gemm@bf16") if w.kind != "moe" else None
    bf16 = t(ref, float(max(w.kernels, 1)), factor=False) if ref else t(comps[w.kind], 1.0)
    return min(bf16, t(q, float(q.get("const_launches") or max(w.kernels, 1))))


@pytest.mark.parametrize("name", ["h200", "h200-flashinfer"])
def test_a_profile_without_regimes_loads_and_prices_by_the_one_fit_rule(tmp_path, name):
    prof = json.loads((PROFILES_DIR / f"{name}.json").read_text())
    for c in prof["components"].values():
        c.pop("regimes", None)  # the format of every profile written before regimes existed
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(prof))
    model, h200 = ProfileCostModel(load_profile(p)), get_hardware("h200")
    comps = prof["components"]
    n = 0
    for key, wdtype in (("q122", "nvfp4"), ("q35", "int4"), ("nem", "fp8"), ("q35", "nvfp4")):
        spec = get_model(key).with_dtypes(weight_dtype=wdtype)
        for w in [*verify_work(spec, 4096, 5, 2), *verify_work(spec, 4096, 1, 1), *draft_fwd_work(spec, 4096, 3)]:
            if w.kind in ("gemm", "moe", "lm_head"):
                wd = w.shape.get("wdtype") or spec.weight_dtype
                p_ = model.price(w, h200, spec)
                assert p_.time_ms == pytest.approx(_one_fit_price(comps, w, spec, wd), rel=1e-12), w.name
                assert "regime" not in p_.source
                n += 1
    assert n > 20


def test_components_without_regimes_in_the_shipped_profile_price_by_the_one_fit_rule():
    prof = json.loads((PROFILES_DIR / "h200.json").read_text())
    model, h200, spec = ProfileCostModel(prof), get_hardware("h200"), get_model("q122")
    assert "regimes" not in prof["components"]["moe@int4"]
    for w in verify_work(spec, 4096, 3, 2):
        if w.kind == "moe":
            assert model.price(w, h200, spec).time_ms == pytest.approx(
                _one_fit_price(prof["components"], w, spec, w.shape.get("wdtype") or spec.weight_dtype), rel=1e-12)


# ------------------------------------------------------------------------------------------ corrupt regimes
@pytest.mark.parametrize("change, fragment", [
    (lambda regs: regs.reverse(), "regime 1: m_range"),  # not ascending
    (lambda regs: regs[0].__setitem__("m_range", [0, 1]), "regime 0: m_range"),
    (lambda regs: regs[1].__setitem__("m_range", "2-4"), "regime 1: m_range"),
    (lambda regs: regs[0].pop("impl"), "regime 0: it must name"),
    (lambda regs: regs[2].__setitem__("coef_ms", [1.0, "x", 0.0]), "regime 2: it has a coefficient"),
    (lambda regs: regs[1].pop("points"), "regime 1: it is malformed: points"),
    (lambda regs: regs.clear(), "regimes must be a non-empty list"),
])
def test_a_corrupt_regime_is_one_error(tmp_path, change, fragment):
    prof = json.loads((PROFILES_DIR / "h200.json").read_text())
    change(prof["components"]["gemm@int4"]["regimes"])
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(prof))
    with pytest.raises(ProfileError, match="gemm@int4") as e:
        load_profile(p)
    assert fragment in str(e.value) and isinstance(e.value, WmtpError)
    r = CliRunner().invoke(app, ["predict", "--model", "q35", "--profile", str(p)])
    assert r.exit_code == 1
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert lines[0].startswith("error:") and "Traceback" not in r.output, r.output


def test_not_a_list_of_regimes_is_one_error(tmp_path):
    prof = json.loads((PROFILES_DIR / "h200.json").read_text())
    prof["components"]["gemm@int4"]["regimes"] = {"m_range": [1, 1]}
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(prof))
    with pytest.raises(ProfileError, match="regimes must be a non-empty list"):
        load_profile(p)
