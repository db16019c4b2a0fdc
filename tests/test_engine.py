"""Serving-engine overhead: its physics in step_cost, the fitter, the shipped preset, the CLI."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from wmtp.acceptance import choose_acceptance, deep_shift, geometric
from wmtp.calibrate.engine_fit import fit, fit_file
from wmtp.calibrate.engine_inputs import read_points
from wmtp.cli.main import app
from wmtp.engine import EngineOverhead, engines_dir, load_preset, resolve
from wmtp.errors import WmtpError
from wmtp.hardware import get_hardware
from wmtp.latency import SpeedOfLight, step_cost
from wmtp.models import get_model

H200 = get_hardware("h200")
SOL = SpeedOfLight()
runner = CliRunner()


def _attn(c, phase, kind):
    return sum(p.time_ms for p in getattr(c, phase).items if p.work.kind == kind)


def _engine(c, phase):
    return sum(p.time_ms for p in getattr(c, phase).items if p.work.kind == "engine")


def test_overhead_terms_scale_as_stated():
    spec = get_model("q35")
    ov = EngineOverhead("test", step_ms=1.0, dense_step_ms=0.5, fwd_ms=0.2, index_ns_per_token=4.0,
                        verify_attn_factor=2.0, draft_attn_factor=1.5)
    for method in ("native", "window"):
        c = step_cost(spec, H200, SOL, method, 2**20, 7, 2, overhead=ov)
        assert _engine(c, "t_verify") == pytest.approx(1.0 + _attn(c, "t_verify", "verify_attn"))
        assert _engine(c, "t_ctx") == pytest.approx(4e-6 * 2 * c.s_eff + 0.5 * _attn(c, "t_ctx", "extend_attn"))
        assert _engine(c, "t_fwd") == pytest.approx(0.2 + 0.5 * _attn(c, "t_fwd", "decode_attn"))
        bare = step_cost(spec, H200, SOL, method, 2**20, 7, 2)
        extra = _engine(c, "t_verify") + _engine(c, "t_ctx") + 6 * _engine(c, "t_fwd")
        assert c.step_ms == pytest.approx(bare.step_ms + extra)
    dense = step_cost(spec, H200, SOL, "dense", 2**20, 1, 1, overhead=ov)
    assert _engine(dense, "t_verify") == pytest.approx(0.5)  # dense: its constant only
    # windowing removes the O(S) index term: native's ctx overhead at 1M is ~256x the window's index part
    n = step_cost(spec, H200, SOL, "native", 2**20, 7, 1, overhead=EngineOverhead("t", index_ns_per_token=5.0))
    w = step_cost(spec, H200, SOL, "window", 2**20, 7, 1, overhead=EngineOverhead("t", index_ns_per_token=5.0))
    assert _engine(n, "t_ctx") == pytest.approx(5e-6 * 2**20) and _engine(w, "t_ctx") == pytest.approx(5e-6 * 4096)


def test_overhead_rejects_nonsense():
    with pytest.raises(WmtpError, match="finite"):
        EngineOverhead("x", step_ms=float("nan"))
    with pytest.raises(WmtpError, match="factors"):
        EngineOverhead("x", verify_attn_factor=0.0)


def _synthetic_points(truth_shared, truth_model):
    pts = []
    for key in ("q35", "nem"):
        ov = EngineOverhead("truth", **truth_shared, **truth_model[key])
        for method, ctx, d in [("native", 2**20, 7), ("window", 2**20, 7), ("native", 2**18, 7),
                               ("window", 2**18, 7), ("native", 2**20, 4), ("window", 2**18, 3), ("dense", 2**20, 1)]:
            # the fitter prices the draft extend at the paper's acceptance preset (its rows = ceil(AL))
            al = None if method == "dense" else getattr(choose_acceptance(key, d, None), method).accept_length(d)
            ms = step_cost(get_model(key), H200, SOL, method, ctx, 1 if method == "dense" else d, 1,
                           accept_length=al, overhead=ov).step_ms
            pts.append({"model": key, "method": method, "ctx": ctx, "d_lo": d, "d_hi": d, "quantity": "step",
                        "value_ms": ms, "source": "synthetic"})
    return pts


def test_fit_recovers_known_terms():
    shared = {"dense_step_ms": 1.5, "index_ns_per_token": 5.0, "draft_attn_factor": 1.6}
    per = {"q35": {"step_ms": 2.0, "fwd_ms": 0.4, "verify_attn_factor": 2.1},
           "nem": {"step_ms": 3.0, "fwd_ms": 0.7, "verify_attn_factor": 3.5}}
    out = fit(_synthetic_points(shared, per), H200, SOL, "synthetic")
    for k, v in shared.items():
        assert out["terms"][k] == pytest.approx(v, rel=1e-6)
    for m in per:
        for k, v in per[m].items():
            assert out["per_model"][m][k] == pytest.approx(v, rel=1e-6)
    assert out["fit"]["max_abs_rel_error"] < 1e-9 and out["unconstrained"] == []


def test_v1_fit_holds_out_rows_marked_no():
    """A v1 fit (no structure file) fits only the rows marked fit = yes: a held-out row whose value is wildly off
    leaves the recovered terms exact, is reported with its own error, and counts in neither in-sample statistic."""
    shared = {"dense_step_ms": 1.5, "index_ns_per_token": 5.0, "draft_attn_factor": 1.6}
    per = {"q35": {"step_ms": 2.0, "fwd_ms": 0.4, "verify_attn_factor": 2.1},
           "nem": {"step_ms": 3.0, "fwd_ms": 0.7, "verify_attn_factor": 3.5}}
    pts = [{**p, "fit": True} for p in _synthetic_points(shared, per)]
    pts.append({**pts[0], "value_ms": pts[0]["value_ms"] * 3.0, "fit": False})  # held out: 3x the truth
    out = fit(pts, H200, SOL, "synthetic")
    for k, v in shared.items():
        assert out["terms"][k] == pytest.approx(v, rel=1e-6)
    assert out["fit"]["fit_points"] == len(pts) - 1 and out["fit"]["max_abs_rel_error"] < 1e-9
    held = out["residuals"][-1]
    assert held["fit"] is False and held["rel_error"] == pytest.approx(1 / 3 - 1, rel=1e-6)
    with pytest.raises(WmtpError, match="marked fit = yes"):
        fit([{**p, "fit": False} for p in pts], H200, SOL, "synthetic")


def test_shipped_preset_is_the_fit_of_its_points(tmp_path):
    """The shipped preset must be reproducible from its committed points (no hand edits)."""
    shipped = load_preset("sglang-b200-paper")
    src = engines_dir() / "sglang-b200-paper.points.csv"
    assert shipped["points"]["sha256"] == __import__("hashlib").sha256(src.read_bytes()).hexdigest()
    structure = engines_dir() / "sglang-b200-paper.structure.json"
    assert shipped["structure"]["sha256"] == __import__("hashlib").sha256(structure.read_bytes()).hexdigest()
    shutil.copy(src, tmp_path / "refit.points.csv")
    shutil.copy(structure, tmp_path / "refit.structure.json")
    refit = fit_file(tmp_path / "refit.points.csv", "b200", tmp_path / "refit.json")
    for k, v in refit["terms"].items():
        assert shipped["terms"][k] == pytest.approx(v, rel=1e-6)
    for m, terms in refit["per_model"].items():
        for k, v in terms.items():
            assert shipped["per_model"][m][k] == pytest.approx(v, rel=1e-6, abs=1e-9)
    assert shipped["kernel_profile"] == "h200-flashinfer" and shipped["memory"]["mem_fraction_static"] == 0.85
    # the declared subset: every 1M point fitted, every other context held out
    assert all(r["fit"] == (r["ctx"] == 1_040_000) for r in shipped["residuals"])
    assert (tmp_path / "refit.md").read_text().startswith("# Engine preset")


def test_points_file_errors(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("model,method\nq35,native\n")
    with pytest.raises(WmtpError, match="columns"):
        read_points(bad)
    good = (engines_dir() / "sglang-b200-paper.points.csv").read_text().splitlines()
    bad.write_text("\n".join(good[:2] + [good[2].replace("18.4", "fast")]) + "\n")
    with pytest.raises(WmtpError, match="line 3"):
        read_points(bad)
    r = runner.invoke(app, ["engines", "--fit", str(tmp_path / "missing.csv")])
    assert r.exit_code == 1 and r.output.startswith("error: cannot read engine points")
    # a row with a context or depth no step has, a depth range backwards, a step over a range, an unknown model:
    # the file and the line are named (controls: the unchanged row reads)
    head, row = good[0], good[1].split(",")
    cols = head.split(",")
    assert len(read_points(_rows(bad, head, row))) == 1

    def edited(**kw):
        r = list(row)
        for k, v in kw.items():
            r[cols.index(k)] = v
        return r

    for kw in ({"ctx": "0"}, {"d_lo": "0", "d_hi": "0"}, {"d_lo": "7", "d_hi": "5", "quantity": "slope"},
               {"d_lo": "5", "d_hi": "7"}, {"model": "nosuchmodel"}):
        with pytest.raises(WmtpError, match="line 2"):
            read_points(_rows(bad, head, edited(**kw)))


def _rows(path, head: str, row: list) -> object:
    path.write_text(head + "\n" + ",".join(row) + "\n")
    return path


def test_preset_needs_a_name_a_gpu_and_per_model_terms(tmp_path):
    doc = json.loads((engines_dir() / "sglang-b200-paper.json").read_text())
    assert load_preset(tmp_path, doc)["name"] == "sglang-b200-paper"  # control
    for key, value in (("name", 7), ("hardware", ""), ("per_model", {})):
        with pytest.raises(WmtpError, match="corrupt"):
            load_preset(tmp_path, {**doc, key: value})


def test_resolve_presets_and_framework_profiles(tmp_path):
    ovs, warnings = resolve("q35", "b200", ["sglang-b200-paper"])
    assert set(ovs) == {"dense", "native", "window"} and warnings == []
    ovs, warnings = resolve("qnext", "h200", ["sglang-b200-paper"])
    assert any("no constants for 'qnext'" in w for w in warnings) and any("fitted on b200" in w for w in warnings)
    with pytest.raises(WmtpError, match="unknown engine preset 'vllm-nope'"):
        resolve("q35", "b200", ["vllm-nope"])
    corrupt = tmp_path / "corrupt.json"
    doc = json.loads((engines_dir() / "sglang-b200-paper.json").read_text())
    doc["terms"]["index_ns_per_token"] = "fast"
    corrupt.write_text(json.dumps(doc))
    with pytest.raises(WmtpError, match="corrupt"):
        resolve("q35", "b200", [str(corrupt)])
    copy = tmp_path / "mine.json"
    shutil.copy(engines_dir() / "sglang-b200-paper-v1.json", copy)
    assert resolve("q35", "b200", [str(copy)])[0]["native"].index_ns_per_token > 0  # v1: a fitted index term
    v2 = resolve("q35", "b200", ["sglang-b200-paper"])[0]["native"]
    # v2: structural counts (the draft build measured as 3 walks on the H200: measure/results/h200-draft-index)
    assert (v2.verify_index_walks, v2.draft_index_walks, v2.index_ns_per_token) == (1, 3, 0.0)


def test_cli_uses_engine_presets():
    base = json.loads(runner.invoke(app, ["predict", "--model", "q35", "--hw", "b200", "--json"]).output)
    r = runner.invoke(app, ["predict", "--model", "q35", "--hw", "b200", "--json", "--framework", "sglang-b200-paper"])
    assert r.exit_code == 0, r.output
    eng = json.loads(r.output)
    assert eng["engine_overhead"] == "engine preset sglang-b200-paper" and base["engine_overhead"].startswith("none")
    for m in ("dense", "native", "window"):
        assert eng["methods"][m]["step_ms"] > base["methods"][m]["step_ms"]
        assert any(c["kind"] == "engine" for c in eng["methods"][m]["components"])
    r = runner.invoke(app, ["predict", "--model", "q35", "--framework", "nope"])
    assert r.exit_code == 1 and r.output.startswith("error: unknown engine preset")
    r = runner.invoke(app, ["sweep", "depth", "--model", "q122", "--hw", "b200", "--framework", "sglang-b200-paper",
                            "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["engine_overhead"] == "engine preset sglang-b200-paper"
    r = runner.invoke(app, ["simulate", "--model", "q35", "--hw", "b200", "--framework", "sglang-b200-paper",
                            "--tokens", "500", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["engine_overhead"] == "engine preset sglang-b200-paper"
    r = runner.invoke(app, ["engines", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)[0]["name"] == "sglang-b200-paper"
    r = runner.invoke(app, ["sweep", "depth", "--model", "q35", "--task", "cwe", "--json"])
    assert r.exit_code == 0 and "cwe" in json.loads(r.output)["acceptance"]["native"]


def test_deep_shift_keeps_alpha_1_and_the_accept_length():
    native = geometric(5.57, 7, "n")
    w = deep_shift(native, 4.74, 7, "w")
    assert w.alphas[0] == pytest.approx(native.alphas[0])
    assert w.accept_length(7) == pytest.approx(4.74, abs=1e-9)
    assert all(a == pytest.approx(w.alphas[1]) for a in w.alphas[1:]) and w.alphas[1] < native.alphas[1]
    assert w.is_extrapolated(5) and not w.is_extrapolated(7)
    # alpha_1 alone cannot give an AL this low: falls back to a geometric profile
    assert deep_shift(native, 1.5, 7, "w").kind == "geometric"
    assert choose_acceptance("q122", 7, None).window.kind == "deep-shift"


def test_v2_terms_price_index_walks_and_plans_as_stated():
    """Index walks are index builds priced by the cost model (S + d keys in the verify, S_eff in the draft);
    plan_fwd_ms is paid by native draft forwards only; request_ms scales with B."""
    from wmtp.latency import INDEX_BYTES_PER_ENTRY
    from wmtp.work import Work

    spec = get_model("q35")
    ov = EngineOverhead("t", plan_fwd_ms=0.3, request_ms=0.1, verify_index_walks=1, draft_index_walks=4)
    for method in ("native", "window"):
        c = step_cost(spec, H200, SOL, method, 2**20, 7, 2, overhead=ov)
        walks = [p for p in c.t_ctx.items if p.work.name == "ctx.engine_index"]
        expect = SOL.price(Work("index_build", "x", 2 * c.s_eff * INDEX_BYTES_PER_ENTRY, 0.0, 1, 4), H200, spec)
        assert len(walks) == 1 and walks[0].time_ms == pytest.approx(expect.time_ms)
        vw = [p for p in c.t_verify.items if p.work.name == "verify.engine_index"][0]
        assert vw.work.bytes == 2 * (2**20 + 7) * INDEX_BYTES_PER_ENTRY and vw.work.count == 1
        assert _engine(c, "t_verify") == pytest.approx(0.1 * 2)
        assert _engine(c, "t_fwd") == pytest.approx(0.3 if method == "native" else 0.0)
    dense = step_cost(spec, H200, SOL, "dense", 2**20, 1, 2, overhead=ov)
    assert not [p for p in dense.t_verify.items if "engine_index" in p.work.name]
    with pytest.raises(WmtpError, match="integer"):
        EngineOverhead("x", draft_index_walks=1.5)


def test_each_framework_file_is_read_once(tmp_path, monkeypatch):
    import wmtp.engine as engine

    copy = tmp_path / "once.json"
    shutil.copy(engines_dir() / "sglang-b200-paper.json", copy)
    reads = []
    real = engine.read_json
    monkeypatch.setattr(engine, "read_json", lambda p, *a: reads.append(p) or real(p, *a))
    engine.resolve("q35", "b200", [str(copy)])
    assert engine.memory_config("q35", [str(copy)]).mem_fraction_static == 0.85
    assert engine.kernel_profile([str(copy)]) == "h200-flashinfer"
    assert len(reads) == 1


def test_verify_factor_is_one_where_the_engine_kernel_was_measured_on_that_architecture():
    """The fitted verify_attn_factor relates the engine's verify on the target GPU to the measured kernel scaled by
    bandwidth: on a GPU of the measured one's architecture (H100 beside an H200 FlashInfer profile) it is 1; on
    another architecture (B200) and over wmtp's own kernels it applies."""
    from types import SimpleNamespace

    from wmtp.engine import extra_ms, verify_factor_applies

    fi_h200 = SimpleNamespace(backend="flashinfer", hw_key="h200")
    own_h200 = SimpleNamespace(backend="wmtp", hw_key="h200")
    assert not verify_factor_applies(fi_h200, get_hardware("h100-sxm"))
    assert not verify_factor_applies(fi_h200, get_hardware("h200"))
    assert verify_factor_applies(fi_h200, get_hardware("b200"))
    assert verify_factor_applies(own_h200, get_hardware("h100-sxm"))
    ov = EngineOverhead("t", host_step_ms=1.0, verify_attn_factor=1.5)
    assert extra_ms(ov, "verify", "native", 4.0, 1, 1000) == pytest.approx(1.0 + 0.5 * 4.0)
    assert extra_ms(ov, "verify", "native", 4.0, 1, 1000, verify_factor=False) == pytest.approx(1.0)


def test_predict_reports_each_method_at_its_largest_mem_fraction():
    """JSON and table carry the largest mem_fraction_static per method and the seats there; the JSON's extra-request
    count is the difference of the two seat counts it prints."""
    args = ["predict", "--model", "q35", "--hw", "b200", "--ctx", "1.04M", "--framework", "sglang-b200-paper"]
    r = runner.invoke(app, args + ["--json"])
    assert r.exit_code == 0, r.output
    mem = json.loads(r.output)["memory"]
    at = mem["engine_at_largest_mem_fraction"]
    assert set(at) == {"dense", "native", "window"}
    for method in ("native", "window"):
        assert 0.85 <= at[method]["mem_fraction_static"] < 1
        assert at[method]["max_batch"] >= mem["engine"][method]["max_batch"]
    assert mem["extra_requests_window_at_largest_mem_fraction"] == at["window"]["max_batch"] - at["native"]["max_batch"]
    table = runner.invoke(app, args)
    flat = " ".join(table.output.split())
    assert table.exit_code == 0 and "largest" in table.output
    assert f"{mem['extra_requests_window_at_largest_mem_fraction']:+d} with each at its largest mem_fraction_static" in flat


def test_named_engine_moe_kernel_replaces_the_cost_models_moe():
    """A preset's named MoE kernel prices each MoE layer as moe_call_ms + routed bytes / moe_tbps + flops at the GPU's
    peak, in every phase; nothing else moves. Hand arithmetic on the work items' own bytes and flops."""
    spec, b200 = get_model("q122"), get_hardware("b200")
    ov = EngineOverhead("t", moe_call_ms=0.02, moe_tbps=5.0)
    c = step_cost(spec, b200, SOL, "native", 2**20, 7, 1, overhead=ov)
    bare = step_cost(spec, b200, SOL, "native", 2**20, 7, 1, overhead=EngineOverhead("t"))
    moved = 0
    for phase in ("t_verify", "t_ctx", "t_fwd"):
        for p, q in zip(getattr(c, phase).items, getattr(bare, phase).items):
            if p.work.kind == "moe":
                w = p.work
                peak = b200.tflops_for(w.shape.get("wdtype") or spec.weight_dtype) * 1e9  # flops per ms
                assert p.time_ms == pytest.approx(w.count * (0.02 + w.bytes / 5e9 + w.flops / peak))
                assert "engine's MoE kernel on b200" in str(p.source)
                moved += 1
            else:
                assert p.time_ms == pytest.approx(q.time_ms)
    assert moved >= 3  # the verify's, the draft extend's and the draft forward's MoE layers
    # 48 layers at 1 token would each pay the call constant: a floor the time cannot go under
    dense = step_cost(spec, b200, SOL, "dense", 2**20, 1, 1, overhead=ov)
    moe = [p for p in dense.t_verify.items if p.work.kind == "moe"][0]
    assert moe.work.count == 48 and moe.time_ms > 48 * 0.02
    with pytest.raises(WmtpError, match="moe_call_ms"):
        EngineOverhead("x", moe_tbps=-1.0)


def test_named_moe_kernel_is_the_presets_gpus_only(tmp_path):
    """On another GPU than the preset's the named kernel is dropped (with a warning): it is the preset GPU's kernel."""
    from wmtp.calibrate.engine_inputs import read_structure

    shipped = load_preset("sglang-b200-paper")
    assert shipped["per_model"]["q122"]["moe_tbps"] > 0  # the shipped preset names one
    on_b200, _ = resolve("q122", "b200", ["sglang-b200-paper"])
    on_h200, warnings = resolve("q122", "h200", ["sglang-b200-paper"])
    assert on_b200["native"].moe_tbps > 0 and on_h200["native"].moe_tbps == 0
    assert any("MoE kernel" in w for w in warnings)
    bad = json.loads((engines_dir() / "sglang-b200-paper.structure.json").read_text())
    bad["named"] = {"q35": {"moe_rate": 1.0}}
    (tmp_path / "x.structure.json").write_text(json.dumps(bad))
    with pytest.raises(WmtpError, match="named"):
        read_structure(tmp_path / "x.structure.json")
