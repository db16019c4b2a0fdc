"""Hostile inputs found by the fourth adversarial sweep of the CLI (after test_hostile.py, test_hostile_inputs.py and
test_hostile_sweep3.py): inputs that were read without complaint and priced a silently wrong number, or ended in a
traceback. Each bad input ends in exit code 1 and exactly one `error:` line naming what was wrong; each family has
a legal control beside it, so the cases can fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wmtp.acceptance import wilson_interval
from wmtp.profile import PROFILES_DIR
from cli_checks import assert_one_error, invoke, shipped_raw_with_cell  # noqa: E402

SHIPPED_PROFILE = json.loads((PROFILES_DIR / "h200.json").read_text())


def write(path: Path, doc) -> Path:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _native(args) -> dict:
    r = invoke(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["methods"]["native"]


def tpot(args) -> float:
    return _native(args)["tpot_ms"]


# ------------------------------------------------------------------------ profile feature names
@pytest.mark.parametrize("kind, index, name, fragment", [
    ("lm_head", 2, "x", "unknown feature 'x'"),  # was priced with the flops term as zero
    ("lm_head", 2, "steps", "unknown feature 'steps'"),  # a feature of another kind: zero as well
    ("gemm", 2, "bytes", "listed twice"),  # dict(zip(...)) kept one of the two coefficients
    ("decode_attn", 1, "flops", "unknown feature 'flops'"),
    ("allreduce_tp2", 1, "flops", "unknown feature 'flops'"),
])
def test_profile_feature_the_pricing_does_not_compute(tmp_path, kind, index, name, fragment):
    doc = json.loads(json.dumps(SHIPPED_PROFILE))
    doc["components"][kind]["features"][index] = name
    p = write(tmp_path / "p.json", doc)
    assert_one_error(invoke("predict", "--model", "q35", "--profile", p), repr(kind), fragment)


def test_profile_feature_in_a_regime_is_checked_too(tmp_path):
    doc = json.loads(json.dumps(SHIPPED_PROFILE))
    doc["components"]["gemm@int4"]["regimes"][1]["features"][0] = "konst"
    p = write(tmp_path / "p.json", doc)
    assert_one_error(invoke("predict", "--model", "q35", "--profile", p), "'gemm@int4'", "regime 1",
                     "unknown feature 'konst'")


def test_profile_with_its_features_reordered_prices_the_same(tmp_path):
    """The control: features are matched by name, so a permuted (features, coef_ms) pair is the same fit."""
    doc = json.loads(json.dumps(SHIPPED_PROFILE))
    comp = doc["components"]["lm_head"]
    pairs = list(zip(comp["features"], comp["coef_ms"]))[::-1]
    comp["features"], comp["coef_ms"] = [f for f, _ in pairs], [c for _, c in pairs]
    p = write(tmp_path / "p.json", doc)
    shipped = tpot(["predict", "--model", "q35", "--profile", PROFILES_DIR / "h200.json"])
    assert tpot(["predict", "--model", "q35", "--profile", p]) == pytest.approx(shipped, rel=1e-12)


# ------------------------------------------------------------------------------- configs without MTP layers
DS = {"model_type": "deepseek_v3", "hidden_size": 7168, "vocab_size": 129280, "num_hidden_layers": 61,
      "num_attention_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
      "v_head_dim": 128, "q_lora_rank": 1536, "n_routed_experts": 256, "num_experts_per_tok": 8,
      "moe_intermediate_size": 2048, "n_shared_experts": 1, "first_k_dense_replace": 3,
      "intermediate_size": 18432, "num_nextn_predict_layers": 1}
QWEN_NEXT = {"model_type": "qwen3_next", "hidden_size": 2048, "vocab_size": 151936, "num_hidden_layers": 48,
             "full_attention_interval": 4, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
             "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
             "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
             "shared_expert_intermediate_size": 512}
NEM = {"model_type": "nemotron_h", "hidden_size": 4096, "vocab_size": 131072, "hybrid_override_pattern": "ME" * 4 + "*",
       "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "mamba_num_heads": 128,
       "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "n_routed_experts": 512,
       "num_experts_per_tok": 22, "moe_intermediate_size": 2688}


@pytest.mark.parametrize("base, field", [(DS, "num_nextn_predict_layers"), (QWEN_NEXT, "mtp_num_hidden_layers"),
                                         (NEM, "num_nextn_predict_layers")])
def test_config_with_no_mtp_layer_is_refused_in_every_family(tmp_path, base, field):
    """Only the dense families refused 0 MTP layers; the others priced one MTP forward per draft token while the
    memory and weight accounts held no MTP block."""
    ok = write(tmp_path / "ok.json", {**base, field: 1})
    assert invoke("predict", "--config", ok, "--ctx", "64K").exit_code == 0  # the control
    bad = write(tmp_path / "config.json", {**base, field: 0})
    for cmd in (["predict"], ["sweep", "depth"], ["simulate"]):
        assert_one_error(invoke(*cmd, "--config", bad, "--ctx", "64K"), "config.json", f"{field} is 0",
                         "no MTP head")


# ------------------------------------------------------------------------------------- --al-window points
@pytest.mark.parametrize("points, fragment", [
    ("4096:3,4096:4", "W=4096 twice"),  # the 4 was dropped: AL 3 at W=4096
    ("1M:2,1M:3", "W=1M is not below the context"),  # held every window of the grid at AL 2
    ("2M:3", "W=2M is not below the context"),
    ("", "--al-window is empty"),  # was the preset, silently
    (" ", "--al-window is empty"),
])
def test_al_window_points_that_contradict(points, fragment):
    assert_one_error(invoke("sweep", "window", "--model", "q35", "--al-window", points), fragment)


def test_al_window_point_must_lie_below_a_given_context():
    assert_one_error(invoke("sweep", "window", "--model", "q35", "--ctx", "64K", "--al-window", "64K:3"),
                     "W=64K is not below the context (64K)")
    r = invoke("sweep", "window", "--model", "q35", "--ctx", "64K", "--al-window", "16K:3", "--json")
    assert r.exit_code == 0, r.output  # the control: below the context
    rows = {row["window"]: row for row in json.loads(r.stdout)["rows"]}
    assert rows[16384]["accept_length"] == pytest.approx(3.0)


def test_al_window_points_in_any_order_are_read_alike():
    def als(points):
        r = invoke("sweep", "window", "--model", "q35", "--al-window", points, "--json")
        assert r.exit_code == 0, r.output
        return [row["accept_length"] for row in json.loads(r.stdout)["rows"]]

    assert als("1K:3.5,4032:4.5") == als("4032:4.5,1K:3.5")
    assert als("1K:3.5,4032:4.5")[2] == pytest.approx(3.5)  # the grid's third window is W = 1K


# ------------------------------------------------------------------------------- Wilson intervals
def test_wilson_interval_against_textbook_values():
    # 95 % Wilson score intervals, as tabulated (e.g. Newcombe 1998, Table I: 81/263 -> 0.2553, 0.3662)
    assert wilson_interval(81, 263) == pytest.approx((0.2553, 0.3662), abs=5e-5)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=5e-5)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=5e-5)


@pytest.mark.parametrize("text", ["[1e-320, 1e-320]", "[5e-324, 5e-324, 5e-324]"])
def test_histogram_of_subnormal_counts(tmp_path, text):
    """Counts so small that n**2 underflows to 0: the interval divided by it (a ZeroDivisionError traceback).
    So little data carries no information: alpha is the ratio of the counts, its interval [0, 1]. A histogram file
    holds whole counts of verify steps (sweep 9), so such a file is one error; the library's profiles (vLLM's pooled
    rates) still reach the interval with fractional counts."""
    from wmtp.acceptance import alpha_intervals, from_histogram

    p = write(tmp_path / "h.json", text)
    assert_one_error(invoke("accept", p, "--json"), "whole number")
    # n equal counts c in bins 0..n-1: position j is reached by the n - j + 1 bins >= j - 1 and passed by the n - j
    # bins >= j, so alpha_j = (n - j) c / ((n - j + 1) c), e.g. n = 3: 2/3, 1/2
    n = len(json.loads(text))
    rows = alpha_intervals(from_histogram(json.loads(text), "subnormal"))
    assert [a for a, _, _ in rows] == pytest.approx([(n - j) / (n - j + 1) for j in range(1, n)])
    assert all((lo, hi) == (0.0, 1.0) for _, lo, hi in rows)


# ------------------------------------------------------------------------------- histogram bins given twice
@pytest.mark.parametrize("name, text", [
    ("h.json", '{"0": 5, "00": 7, "1": 3}'),  # "00" and "0" are both bin 0: the 5 was dropped (AL 1.3, not 1.2)
    ("h.json", '{"1": 3, "01": 4, "0": 5}'),
    ("h.csv", "0,5\n0,7\n1,3\n"),  # two lines for bin 0: the first was dropped
])
def test_histogram_bin_given_twice(tmp_path, name, text):
    p = write(tmp_path / name, text)
    assert_one_error(invoke("accept", p), "given twice")
    out = tmp_path / "r.html"
    assert_one_error(invoke("report", "--model", "q35", "--histogram", f"native={p}", "--out", out), "given twice")
    assert not out.exists()


def test_histogram_each_bin_once_reads_its_al(tmp_path):
    # the control: H = [5, 3] -> AL = 1 + 3/8 (one bonus token a step, plus 1 accepted in 3 of 8 steps)
    p = write(tmp_path / "h.csv", "0,5\n1,3\n")
    r = invoke("accept", p, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["files"][0]["accept_length"] == pytest.approx(1.375)


# ------------------------------------------------------------------------------------ traces past any depth
@pytest.mark.parametrize("text", ["3\n100\n2\n", "9" * 400 + "\n", "64\n"])
def test_trace_count_no_draft_can_accept(tmp_path, text):
    """Counts were clamped to d - 1 silently: a trace of 100s simulated as a perfect AL of 7.00."""
    p = write(tmp_path / "t.txt", text)
    line = assert_one_error(invoke("simulate", "--model", "q35", "--trace", p), "t.txt", "at most 63")
    assert len(line) < 300


def test_trace_counts_deeper_than_the_simulated_depth_are_capped():
    """The control: a trace from a deeper run simulated at a shallower depth keeps at most d - 1 a step (by design):
    all 63s at d = 3 give AL 3 (2 drafts + the bonus token)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d) / "t.txt", "63\n" * 50)
        r = invoke("simulate", "--model", "q35", "--trace", p, "--depth", "3", "--tokens", "300", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["steps"] == 100 and out["tokens"] == 300


# ------------------------------------------------------------------------------------- raw sweep shapes
def _raw(tmp_path: Path, lines: int | None, col: str, value: str, row: int = 5) -> Path:
    return shipped_raw_with_cell(tmp_path, col, value, row, lines)


@pytest.mark.parametrize("col, value", [
    ("batch", "1e308"),  # was an OverflowError traceback in the attention features
    ("kv_heads", "1e400"),  # read as inf: an OverflowError traceback
    ("ctx", "-4096"), ("head_dim", "inf"), ("bytes", "-1"),
])
def test_raw_sweep_shape_out_of_range(tmp_path, col, value):
    out = tmp_path / "cal"
    assert_one_error(invoke("calibrate", "--from-raw", _raw(tmp_path, 3000, col, value), "--out", out),
                     f"column {col}", "data row 5", "finite number")
    assert not out.exists()


def test_raw_sweep_text_in_a_numeric_column_of_a_large_file(tmp_path):
    """pandas read a large file in chunks and printed a DtypeWarning on stderr before the error line."""
    import warnings

    out = tmp_path / "cal"
    with warnings.catch_warnings(record=True) as caught:  # pytest would swallow the warning: record it here
        warnings.simplefilter("always")
        r = invoke("calibrate", "--from-raw", _raw(tmp_path, None, "batch", "dense", row=60_000), "--out", out)
    assert_one_error(r, "column batch holds 'dense'", "data row 60000")
    assert [str(w.category.__name__) for w in caught] == [] and not out.exists()


# --------------------------------------------------------------------------------- engine points' fit column
ENGINES = Path(__file__).resolve().parents[1] / "wmtp_model" / "data" / "engines"
POINTS = (ENGINES / "sglang-b200-paper.points.csv").read_text()


@pytest.mark.parametrize("value", ["false", "0", "x", "n"])
def test_engine_points_fit_column_is_yes_or_no(tmp_path, value):
    """Anything but "no" was fitted: a held-out row marked "false" silently joined the fit."""
    lines = POINTS.splitlines()
    held_out = next(i for i, ln in enumerate(lines) if ",no," in ln)
    lines[held_out] = lines[held_out].replace(",no,", f",{value},", 1)
    p = write(tmp_path / "points.csv", "\n".join(lines) + "\n")
    out = tmp_path / "preset.json"
    assert_one_error(invoke("engines", "--fit", p, "--out", out), f"line {held_out + 1}", "fit is yes or no")
    assert not out.exists()


def test_engine_points_fit_column_case_and_blank(tmp_path):
    """The control: YES / No / blank read as before (blank: yes), and each gives the shipped preset's fit (the
    shipped sglang-b200-paper.json is fitted from these points; test_engine.py re-fits it the same way)."""
    lines = POINTS.splitlines()
    swapped = [ln.replace(",yes,", ",YES,", 1).replace(",no,", ",No,", 1) for ln in lines]
    blank = [ln.replace(",yes,", ",,", 1) for ln in lines]
    assert sum(",," in ln for ln in blank) == sum(",yes," in ln for ln in lines) > 0  # the blanks are really there
    fits = []
    for name, text in (("a", lines), ("b", swapped), ("c", blank)):
        d = tmp_path / name  # the shipped name, with its structure file beside it: the same (v2) fit as shipped
        d.mkdir()
        write(d / "sglang-b200-paper.structure.json", (ENGINES / "sglang-b200-paper.structure.json").read_text())
        out = d / "preset.json"
        r = invoke("engines", "--fit", write(d / "sglang-b200-paper.points.csv", "\n".join(text) + "\n"), "--out", out)
        assert r.exit_code == 0, r.output
        doc = json.loads(out.read_text())
        fits.append((doc["terms"], doc["per_model"]))
        # the shipped preset was fitted on another machine: its floats may differ in the last bits (BLAS kernels)
        assert doc["terms"] == pytest.approx(ENGINE_PRESET["terms"], rel=1e-9), name
        for m, terms in ENGINE_PRESET["per_model"].items():
            assert doc["per_model"][m] == pytest.approx(terms, rel=1e-9, abs=1e-12), (name, m)
    assert fits[0] == fits[1] == fits[2]  # on one machine the three spellings are the same input, bit for bit


# ------------------------------------------------------------------------- acceptance length outside [1, d]
VLLM_AL99 = ("INFO 01-01 00:00:00 [metrics.py:1] SpecDecoding metrics: Mean acceptance length: 99.00, Accepted "
             "throughput: 1.00 tokens/s, Drafted throughput: 1.00 tokens/s, Accepted: 98 tokens, Drafted: 4 tokens, "
             "Per-position acceptance rate: 1.000, 1.000, 1.000, 1.000, Avg Draft acceptance rate: 100.0%\n")


@pytest.mark.parametrize("text, depth, fragment", [
    (VLLM_AL99, [], "99 is above d = 5"),  # 4 rates: d = 5 from the line itself (1 + 98 / (4 / 4) = 99)
    (VLLM_AL99, ["--depth", "5"], "99 is above d = 5"),
    ("mean acceptance length: 99\n", ["--depth", "5"], "99 is above d = 5"),
    ("mean acceptance length: 5.5\n", ["--depth", "5"], "5.5 is above d = 5"),
    ("mean acceptance length: 0.5\n", ["--depth", "5"], "0.5 is below 1"),
    ("mean acceptance length: 0.5\n", [], "0.5 is below 1"),  # no depth: below 1 is still impossible
])
def test_accept_length_outside_its_physical_range(tmp_path, text, depth, fragment):
    """Was printed as "AL 99.000 at d=5" or "AL 0.500": an AL counts the tokens a verify step emits, bonus included."""
    f = write(tmp_path / "run.log", text)
    assert_one_error(invoke("accept", f, *depth), "run.log:1-1", fragment)


def test_accept_length_at_the_ends_of_its_range_is_read(tmp_path):
    """The control: AL = d (every draft accepted) and AL = 1 (none) are legal; a bare mean above 1 needs no depth, up
    to the deepest draft wmtp models (d = 64; 99 is refused: tests/test_real_logs_v7.py)."""
    for text, depth, al in (("mean acceptance length: 5\n", ["--depth", "5"], 5.0),
                            ("mean acceptance length: 1\n", ["--depth", "5"], 1.0),
                            ("mean acceptance length: 64\n", [], 64.0)):
        r = invoke("accept", write(tmp_path / "run.log", text), *depth, "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["files"][0]["accept_length"] == al


def test_logs_refuses_an_impossible_accept_length_too(tmp_path):
    """`wmtp logs` reads the same headline AL: one check for every reader."""
    assert_one_error(invoke("logs", write(tmp_path / "run.log", VLLM_AL99)), "99 is above d = 5")


# ------------------------------------------------------------------ model configs with zero or uneven head counts
@pytest.mark.parametrize("base, field, value, fragment", [
    (QWEN_NEXT, "linear_num_key_heads", 0, "must be a positive integer"),
    (QWEN_NEXT, "linear_num_value_heads", 0, "must be a positive integer"),
    (QWEN_NEXT, "linear_value_head_dim", 0, "must be a positive integer"),
    (QWEN_NEXT, "linear_conv_kernel_dim", 0, "must be a positive integer"),  # conv state: (kernel - 1) columns
    (QWEN_NEXT, "linear_num_key_heads", 5, "must divide linear_num_value_heads (32)"),  # 32 / 5 heads per group
    ({**QWEN_NEXT, "model_type": "qwen3_5_moe"}, "linear_num_key_heads", 0, "must be a positive integer"),
    (NEM, "n_groups", 0, "must be a positive integer"),
    (NEM, "n_groups", 3, "must divide mamba_num_heads (128)"),
    (NEM, "mamba_head_dim", 0, "must be a positive integer"),
    (DS, "v_head_dim", 0, "must be a positive integer"),
    (DS, "qk_rope_head_dim", 0, "must be a positive integer"),
    (DS, "qk_nope_head_dim", 0, "must be a positive integer"),
    (DS, "kv_lora_rank", 0, "must be a positive integer"),
])
def test_config_with_a_zero_or_uneven_size(tmp_path, base, field, value, fragment):
    """Were priced: a zero head count or width multiplies a weight or state to nothing; uneven groups do not exist."""
    p = write(tmp_path / "config.json", {**base, field: value})
    assert_one_error(invoke("predict", "--config", p, "--ctx", "1M"), field, fragment)


@pytest.mark.parametrize("base, field, value", [
    (QWEN_NEXT, None, None), (NEM, None, None), (DS, None, None),
    (QWEN_NEXT, "linear_num_key_heads", 32), (NEM, "n_groups", 128),  # one head per group: legal
])
def test_config_with_sizes_that_divide_is_priced(tmp_path, base, field, value):
    doc = {**base, **({field: value} if field else {})}
    assert tpot(["predict", "--config", write(tmp_path / "config.json", doc), "--ctx", "1M"]) > 0


def test_model_row_refuses_uneven_groups_however_it_is_built():
    """The row itself (not only config.json) keeps the rules: a row built in code or by `replace`."""
    from dataclasses import replace

    from wmtp.errors import WmtpError
    from wmtp.models import get_model

    for key, change, fragment in (("q35", {"lin_k_heads": 0}, "lin_k_heads"), ("q35", {"lin_k_heads": 5}, "lin_k_heads"),
                                  ("nem", {"ssm_groups": 3}, "ssm_groups"), ("nem", {"conv_kernel": 0}, "conv_kernel")):
        with pytest.raises(WmtpError, match=fragment):
            replace(get_model(key), **change)


# ------------------------------------------------------------------------------ --sink and --tree-width bounds
@pytest.mark.parametrize("args, fragment", [
    (["--sink", str(10**23)], "--sink"),
    (["--sink", str((1 << 34) + 1)], "--sink"),  # one past the largest context (16G tokens)
    (["--tree-width", str(10**23)], "--tree-width"),
    (["--tree-width", str((1 << 34) + 1)], "--tree-width"),
])
def test_sink_and_tree_width_wider_than_any_context(args, fragment):
    """Were accepted; --tree-width 1e23 reported memory.reclaimable_bytes of about -1.4e27."""
    assert_one_error(invoke("predict", "--model", "q35", *args), fragment, "largest context")


def test_sink_bound_holds_for_every_command():
    for cmd in (["sweep", "depth"], ["simulate", "--method", "native"]):
        assert_one_error(invoke(*cmd, "--model", "q35", "--sink", str(10**23)), "--sink", "largest context")


def _memory(*args) -> dict:
    r = invoke("predict", "--model", "q35", "--ctx", "1M", *args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["memory"]


def test_a_ring_wider_than_the_context_reclaims_nothing():
    """--tree-width 10^6 at d = 7: a ring of 64 + 4032 + 7e6 slots would hold more than the 1M context, so the
    windowed draft keeps the native cache (was -1.2e10 bytes reclaimable)."""
    m = _memory("--tree-width", str(10**6))
    assert m["reclaimable_bytes"] == 0 and m["ring_slots"] == 0


def test_a_ring_inside_the_context_reclaims_in_proportion():
    """The control: reclaimable = n_mtp * kv bytes * (S - ring); the kv bytes cancel in a ratio of two widths:
    ring(k = 1) = 64 + 4032 + 7 = 4103, ring(k = 64) = 64 + 4032 + 448 = 4544 slots."""
    one, wide = _memory(), _memory("--tree-width", "64")
    assert (one["ring_slots"], wide["ring_slots"]) == (4103, 4544)
    s = 1 << 20
    assert wide["reclaimable_bytes"] / one["reclaimable_bytes"] == pytest.approx((s - 4544) / (s - 4103), rel=1e-12)


# ----------------------------------------------------------------------------- engine preset time terms >= 0
ENGINE_PRESET = json.loads((Path(__file__).resolve().parents[1] / "wmtp_model/data/engines/sglang-b200-paper.json")
                           .read_text())


@pytest.mark.parametrize("where, term", [
    ("q35", "host_step_ms"),  # printed a host component of -1.0 ms
    ("q35", "moe_call_ms"),
    (None, "fwd_ms"), (None, "step_ms"), (None, "eager_extend_ms"), (None, "plan_fwd_ms"), (None, "dense_step_ms"),
])
def test_engine_preset_negative_time_term(tmp_path, where, term):
    doc = json.loads(json.dumps(ENGINE_PRESET))
    (doc["per_model"][where] if where else doc["terms"])[term] = -1
    p = write(tmp_path / "mine.json", doc)
    assert_one_error(invoke("predict", "--model", "q35", "--framework", p), "mine.json", term, "must be >= 0")


def test_shipped_engine_presets_and_a_zero_term_load(tmp_path):
    """The control: every shipped preset prices, and a term of exactly 0 ms is legal."""
    from wmtp.engine import engines_dir, preset_names

    assert preset_names()
    for name in preset_names():
        assert (engines_dir() / f"{name}.json").is_file()
        assert tpot(["predict", "--model", "q35", "--framework", name]) > 0
    # host_step_ms is added once to every step (engine.py: t_verify += host_step_ms + ...): at 0 the step is shorter
    # by exactly the shipped preset's q35 term
    doc = json.loads(json.dumps(ENGINE_PRESET))
    doc["per_model"]["q35"]["host_step_ms"] = 0
    host_ms = ENGINE_PRESET["per_model"]["q35"]["host_step_ms"]
    assert host_ms > 0
    shipped = _native(["predict", "--model", "q35", "--framework", "sglang-b200-paper"])
    zero = _native(["predict", "--model", "q35", "--framework", write(tmp_path / "zero.json", doc)])
    assert shipped["step_ms"] - zero["step_ms"] == pytest.approx(host_ms, rel=1e-9)
    assert zero["tpot_ms"] == pytest.approx(zero["step_ms"] / zero["accept_length"], rel=1e-9)
