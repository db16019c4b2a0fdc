"""Hostile inputs of the fifteenth adversarial sweep (after test_hostile_sweep14.py): `predict --headroom --depth auto`,
where the main table runs native and window each at its own best depth and the headroom priced both at native's (the
window's engine / own / floor columns were a step of another depth, said as 'Headroom at d 5'); a Qwen3-Next /
Qwen3.5 config.json whose Gated-DeltaNet keys are narrower or wider than its values (linear_key_head_dim was never
read: the layer's state and convolution were priced with the value width, and 0 or a string was accepted).
Each bad input ends in exit code 1 and exactly one `error:` line (no traceback); each has a legal control beside it.
Expected values are read from the command's own main result or worked out by hand, not from the code under test."""

from __future__ import annotations

import json

import pytest

from cli_checks import assert_one_error, invoke
from test_hf_config import QWEN_NEXT as _HF_QWEN_NEXT

# --- predict --headroom --depth auto ----------------------------------------------------------------------------------


@pytest.mark.parametrize("model, ctx", [("q35", "32K"), ("q122", "32K")])
def test_headroom_prices_each_method_at_the_depth_it_runs(model, ctx):
    """At 32K the auto depth differs between the methods (q35: native 5, window 6; q122: native 7, window 4): the
    headroom's draft forwards of a method run gamma = d - 1 times, d the depth the main result gives that method."""
    r = invoke("predict", "--model", model, "--ctx", ctx, "--depth", "auto", "--headroom", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    depths = {m: doc["methods"][m]["depth"] for m in ("native", "window")}
    assert depths["native"] != depths["window"], depths  # the case this test is about
    for m, d in depths.items():
        times = {c["times"] for c in doc["headroom"]["components"] if c["method"] == m and c["phase"] == "fwd"}
        assert times == {d - 1}, (m, d, times)
    assert doc["headroom"]["depth"] == depths  # not one d for both


def test_headroom_at_a_fixed_depth_is_one_depth():
    r = invoke("predict", "--model", "q35", "--ctx", "32K", "--depth", "5", "--headroom", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["headroom"]["depth"] == 5
    assert {c["times"] for c in doc["headroom"]["components"] if c["phase"] == "fwd"} == {4}


def test_headroom_table_names_both_depths():
    r = invoke("predict", "--model", "q35", "--ctx", "32K", "--depth", "auto", "--headroom")
    assert r.exit_code == 0, r.output
    title = next(ln for ln in r.output.splitlines() if "Headroom at" in ln)
    doc = json.loads(invoke("predict", "--model", "q35", "--ctx", "32K", "--depth", "auto", "--json").output)
    for m in ("native", "window"):
        assert f"{m} d {doc['methods'][m]['depth']}" in title, title


# --- config.json: Gated-DeltaNet key head width -----------------------------------------------------------------------

# test_hf_config's Qwen3-Next config (its registry-row match is tested there), with the MTP layer the real one ships
QWEN_NEXT = {**_HF_QWEN_NEXT, "num_nextn_predict_layers": 1}


def _predict(tmp_path, cfg):
    p = tmp_path / "qn" / "config.json"
    p.parent.mkdir(exist_ok=True)
    p.write_text(json.dumps(cfg))
    return invoke("predict", "--config", p, "--ctx", "128K", "--json")


@pytest.mark.parametrize("key_dim, fragment", [(64, "differs"), (256, "differs"), (0, "positive"),
                                               ("128", "integer"), (-128, "linear_key_head_dim")])
def test_gdn_key_width_other_than_the_value_width_is_refused(tmp_path, key_dim, fragment):
    """Keys 64 wide, values 128: the GDN state is v_heads x 64 x 128 and the conv channels (2 x 16 x 64 + 32 x 128),
    not the v_heads x 128 x 128 and (2 x 16 + 32) x 128 a one-width row prices: refused, not priced silently."""
    assert_one_error(_predict(tmp_path, {**QWEN_NEXT, "linear_key_head_dim": key_dim}), "linear_key_head_dim", fragment)


def test_gdn_key_width_equal_or_unsaid_prices_as_the_registry_row(tmp_path):
    """128 = 128 (Qwen3-Next's own), and left out (HF's Qwen3NextConfig default, 128): one price, the qnext row's."""
    ref = json.loads(invoke("predict", "--model", "qnext", "--weight-dtype", "bf16", "--ctx", "128K", "--json").output)
    for cfg in (QWEN_NEXT, {k: v for k, v in QWEN_NEXT.items() if k != "linear_key_head_dim"}):
        r = _predict(tmp_path, cfg)
        assert r.exit_code == 0, r.output
        doc = json.loads(r.output)
        for m in ("dense", "native", "window"):
            assert doc["methods"][m]["step_ms"] == pytest.approx(ref["methods"][m]["step_ms"], rel=1e-9), m


def test_gdn_value_width_other_than_hf_default_key_width_is_refused(tmp_path):
    """linear_value_head_dim 64 with no linear_key_head_dim: the engine runs HF's default key width, 128, not 64."""
    cfg = {k: v for k, v in QWEN_NEXT.items() if k != "linear_key_head_dim"}
    assert_one_error(_predict(tmp_path, {**cfg, "linear_value_head_dim": 64}), "linear_key_head_dim (128)")
