"""`wmtp validate` composes its steps with the MoE kernel of the profile it validates (CPU, no GPU): the kernel read
from the profile (its `moe_backend`, else its provenance), the `--moe-backend` override, the clear error without
SGLang's files, and the kernel threaded through run_validate and ComposedModel to every MoE call."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from wmtp.calibrate import validate
from wmtp.cli.main import app
from wmtp.errors import WmtpError
from wmtp.measure.backends import sglang_moe
from wmtp.profile import PROFILES_DIR


@pytest.fixture
def no_sglang(tmp_path, monkeypatch):
    """SGLang's files absent: an empty folder as WMTP_SGLANG_DIR, nothing loaded yet."""
    empty = tmp_path / "no-sglang"
    empty.mkdir()
    monkeypatch.setenv("WMTP_SGLANG_DIR", str(empty))
    monkeypatch.setattr(sglang_moe, "_mods", {})
    return empty


@pytest.mark.parametrize("profile,expected", [
    ({"moe_backend": "sglang"}, "sglang"),
    ({"provenance": {"moe_impl": "sglang"}}, "sglang"),  # a sweep run with --moe-backend sglang
    ({"provenance": {"moe_rows": {"impl": "sglang", "rows": 3}}}, "sglang"),  # moe rows replaced from such a run
    ({"moe_backend": "wmtp", "provenance": {"moe_rows": {"impl": "sglang"}}}, "wmtp"),  # the profile's own word
    ({"provenance": {"backend": "flashinfer"}}, "wmtp"),  # profiles before MoE backends: wmtp's kernel
    ({}, "wmtp"),
])
def test_profile_moe_backend(profile, expected):
    assert validate.profile_moe_backend(profile) == expected


def test_shipped_profiles_name_their_moe_kernel():
    fi = json.loads((PROFILES_DIR / "h200-flashinfer.json").read_text())
    assert fi["moe_backend"] == "sglang" and fi["provenance"]["moe_rows"]["impl"] == "sglang"
    assert validate.profile_moe_backend(fi) == "sglang"
    assert validate.profile_moe_backend(json.loads((PROFILES_DIR / "h200.json").read_text())) == "wmtp"


def test_fit_records_the_sweeps_moe_kernel():
    from wmtp.calibrate.fitting import moe_backend_of

    assert moe_backend_of({"moe_impl": "sglang"}) == "sglang"
    assert moe_backend_of({"moe_rows": {"impl": "sglang"}}) == "sglang"
    assert moe_backend_of({"moe_impl": "wmtp"}) == "wmtp" and moe_backend_of({}) == "wmtp"


def test_moe_backend_for_checks_sglangs_files_unless_overridden(no_sglang):
    prof = {"moe_backend": "sglang"}
    with pytest.raises(WmtpError, match="SGLang's Triton MoE files"):
        validate.moe_backend_for(prof)
    assert validate.moe_backend_for(prof, "wmtp") == "wmtp"  # the override needs no SGLang files
    with pytest.raises(WmtpError, match="unknown --moe-backend 'vllm'"):
        validate.moe_backend_for(prof, "vllm")
    with pytest.raises(WmtpError, match="unknown --moe-backend 'triton'"):
        validate.moe_backend_for({"moe_backend": "triton"})


def test_cli_validate_errors_clearly_without_sglangs_files(tmp_path, no_sglang):
    prof = tmp_path / "p.json"
    shutil.copy(PROFILES_DIR / "h200-flashinfer.json", prof)
    r = CliRunner().invoke(app, ["validate", "--profile", str(prof), "--out", str(tmp_path / "out")])
    assert r.exit_code == 1 and "Traceback" not in r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "SGLang's Triton MoE files" in lines[0] and str(no_sglang) in lines[0]
    r = CliRunner().invoke(app, ["validate", "--profile", str(prof), "--moe-backend", "vllm"])
    assert r.exit_code == 1 and "unknown --moe-backend 'vllm'" in r.output
    assert not (tmp_path / "out").exists()


class _Stop(Exception):
    pass


def test_run_validate_builds_steps_with_the_profiles_moe_kernel(tmp_path, monkeypatch):
    """run_validate hands the profile's MoE kernel (or the override) to ComposedModel and writes it in each row."""
    from wmtp import measure
    from wmtp.measure import backends, composed, harness

    seen = []

    class Recorder:
        def __init__(self, spec, max_ctx, l2, backend=None, moe_impl="wmtp"):
            seen.append(moe_impl)
            raise _Stop

    loaded = []
    monkeypatch.setattr(sglang_moe, "load", lambda: loaded.append(1))  # SGLang's files "present"
    monkeypatch.setattr(measure, "require_gpu", lambda: None)
    monkeypatch.setattr(backends, "get_backend", lambda name: name)
    monkeypatch.setattr(harness, "free_bytes", lambda: 1 << 40)
    monkeypatch.setattr(harness, "l2_bytes", lambda: 1 << 20)
    monkeypatch.setattr(composed, "ComposedModel", Recorder)
    from wmtp.models import get_model

    prof = PROFILES_DIR / "h200-flashinfer.json"
    for override, expected in ((None, "sglang"), ("wmtp", "wmtp"), ("sglang", "sglang")):
        with pytest.raises(_Stop):
            validate.run_validate(prof, [get_model("q35")], tmp_path / "o", (65536,), (3,), moe_backend=override)
        assert seen[-1] == expected
    assert len(loaded) == 2  # SGLang's files checked for the two sglang runs only


def test_composed_model_sends_every_moe_call_to_its_kernel(monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from wmtp.measure import components as comp
    from wmtp.measure import composed
    from wmtp.specs import ModelSpec

    tiny = ModelSpec(
        key="tiny", name="tiny", family="qwen3_next", hidden=64, vocab=128, n_layers=4, n_full_attn=1, n_linear=3,
        n_moe=4, n_dense_ffn=0, q_heads=4, kv_heads=2, head_dim=32, attn_out_gate=True, linear_kind="gdn",
        lin_k_heads=2, lin_v_heads=4, lin_head_dim=16, n_experts=8, top_k=2, expert_ffn=32, n_shared=1,
        shared_ffn=32)
    impls = []
    real = comp.moe_component

    def recording(spec, tokens, l2, prefix, copies=None, impl="wmtp"):
        impls.append((prefix, impl))
        return real(spec, tokens, l2, prefix, copies=copies)  # built with wmtp's kernel: no SGLang files needed

    monkeypatch.setattr(comp, "DEVICE", "cpu")
    monkeypatch.setattr(comp, "moe_component", recording)
    with pytest.raises(ValueError, match="unknown MoE implementation 'vllm'"):
        composed.ComposedModel(tiny, 64, 1 << 16, moe_impl="vllm")
    for impl in ("sglang", "wmtp"):
        impls.clear()
        model = composed.ComposedModel(tiny, 64, 1 << 16, moe_impl=impl)
        model.step("native", 64, 3, 16, 4, 2)
        # every routed-expert layer of the verify pass, plus the draft's extend pass and forwards when the MTP
        # layer is MoE
        n_verify = sum(1 for p, _ in impls if p == "verify")
        assert n_verify == tiny.n_moe and {i for _, i in impls} == {impl}
