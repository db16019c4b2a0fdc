"""Hostile inputs found by the sixth adversarial sweep (after test_hostile.py, test_hostile_inputs.py and
test_hostile_sweep3/4/5/5b.py): a working directory deleted under a relative path, raw sweep and engine points whose
times are blank or absurd (silently dropped, or fitted to zero), config.json fields whose meaning wmtp misread (a
string for use_sliding_window, Nemotron-H's ungated sliding_window, a model_type named only under text_config), and
numbers written in other scripts' digits, read by float() where every other option refuses them. Each bad input ends
in exit code 1 and exactly one `error:` line; each family has a legal control beside it, so the cases can fail.
Expected sizes are worked out by hand from the config fields in the comments, not taken from the code under test."""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import pytest

from wmtp.profile import PROFILES_DIR
from cli_checks import assert_one_error, invoke  # noqa: E402
from test_hostile_sweep5 import NEMOTRON_H, write  # noqa: E402

ENGINES = Path(__file__).resolve().parents[1] / "wmtp_model" / "data" / "engines"
CTX = 65536  # --ctx 64K


def _native(args) -> dict:
    r = invoke(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# ------------------------------------------------------------------------- a deleted working directory
def test_relative_profile_in_a_deleted_working_directory(tmp_path, monkeypatch):
    """os.path.realpath('p.json') asks for the working directory: a FileNotFoundError traceback when it was deleted."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert_one_error(invoke("predict", "--model", "q35", "--profile", "p.json"), "p.json")
    # the control: an absolute path still reads, the deleted directory notwithstanding
    out = _native(["predict", "--model", "q35", "--profile", PROFILES_DIR / "h200.json"])
    assert out["methods"]["native"]["tpot_ms"] > 0


# ------------------------------------------------------------------------- raw sweep times
def _raw(tmp_path: Path, change) -> Path:
    lines = gzip.decompress((PROFILES_DIR / "h200.raw.csv.gz").read_bytes()).decode().splitlines()
    header = lines[0].split(",")
    col = header.index("time_ms")
    rows = [ln.split(",") for ln in lines[1:]]
    change(rows, col)
    p = tmp_path / "raw.csv"
    p.write_text("\n".join([lines[0]] + [",".join(r) for r in rows]) + "\n")
    return p


def _set(value, rows_to=(4,)):
    def change(rows, col):
        assert all(rows[i][-3] == "ok" for i in rows_to)  # status is the third column from the end
        for i in rows_to:
            rows[i][col] = value
    return change


def _set_all(value):
    def change(rows, col):
        for r in rows:
            r[col] = value
    return change


@pytest.mark.parametrize("change, fragment", [
    (_set(""), "data row 5 has no time"),  # a successful row without a time was dropped from the fit, silently
    (_set("1e300"), "data row 5 has 1e+300"),  # a finite but absurd time was fitted
    (_set_all("1e-300"), "data row 1 has 1e-300"),  # the copy ceiling came out infinite: an error about the output
])
def test_raw_sweep_time_blank_or_absurd(tmp_path, change, fragment):
    out = tmp_path / "cal"
    r = invoke("calibrate", "--from-raw", _raw(tmp_path, change), "--out", out)
    assert_one_error(r, "raw.csv", "time_ms", fragment)
    assert not out.exists()


def test_raw_sweep_times_at_the_ends_of_the_range_refit(tmp_path):  # the control: 1e-6 and 1e8 ms are read
    out = tmp_path / "cal"
    r = invoke("calibrate", "--from-raw", _raw(tmp_path, _set("0.000001", (4,))), "--out", out)
    assert r.exit_code == 0 and (out / "profile.json").is_file(), r.output


# ------------------------------------------------------------------------- engine points values
def _points(tmp_path: Path, value: str) -> Path:
    import csv
    import io

    rows = list(csv.reader(io.StringIO((ENGINES / "sglang-b200-paper-v1.points.csv").read_text())))
    rows[1][rows[0].index("value_ms")] = value
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    p = tmp_path / "points.csv"
    p.write_text(buf.getvalue())
    return p


@pytest.mark.parametrize("value", ["1e-300", "1e300", "1e-7"])
def test_engine_points_with_an_absurd_time(tmp_path, value):
    """1e-300 ms at every point fitted every term to 0 ms and wrote the preset (exit 0); 1e300 was fitted too."""
    out = tmp_path / "preset.json"
    r = invoke("engines", "--fit", _points(tmp_path, value), "--out", out)
    assert_one_error(r, "points.csv, line 2", "value_ms", repr(value))
    assert not out.exists()


def test_engine_points_with_a_sound_time_fit(tmp_path):  # the control
    out = tmp_path / "preset.json"
    r = invoke("engines", "--fit", _points(tmp_path, "26.7"), "--out", out)
    assert r.exit_code == 0 and json.loads(out.read_text())["fit"]["points"] == 19, r.output


# ------------------------------------------------------------------------- config.json fields misread
@pytest.mark.parametrize("doc, fragment", [
    # "true" (a string) read as false: priced as full attention over the whole context, silently
    ({**NEMOTRON_H, "model_type": "nemotron_h", "use_sliding_window": "true"}, "use_sliding_window must be true or"),
    # NemotronH's attention passes sliding_window=config.sliding_window to every call (no use_sliding_window switch)
    ({**NEMOTRON_H, "sliding_window": 4096}, "sliding_window is 4096"),
    ({**NEMOTRON_H, "sliding_window": 4096, "use_sliding_window": False}, "sliding_window is 4096"),
])
def test_config_attention_misread(tmp_path, doc, fragment):
    p = write(tmp_path / "m" / "config.json", doc)
    for cmd in (["predict"], ["sweep", "depth"], ["simulate"]):
        assert_one_error(invoke(*cmd, "--config", p, "--ctx", "64K"), "config.json", fragment)


def test_nemotron_h_without_a_window_is_priced(tmp_path):  # the control: sliding_window null, as published
    out = _native(["predict", "--config", write(tmp_path / "m" / "config.json", NEMOTRON_H), "--ctx", "64K"])
    # 4 '*' layers x 2 (K, V) x 8 KV heads x 128 x 2 bytes
    assert out["memory"]["per_request"]["native"]["target_kv_bytes"] == 4 * 2 * 8 * 128 * 2 * CTX


# Qwen3.5-35B-A3B's config.json as published: a multimodal wrapper, the language model under text_config
QWEN35_TEXT = {"model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40,
               "layer_types": ["linear_attention"] * 3 + ["full_attention"],
               "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
               "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "head_dim": 256, "num_attention_heads": 16,
               "num_key_value_heads": 2, "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
               "shared_expert_intermediate_size": 512, "vocab_size": 248320, "mtp_num_hidden_layers": 1,
               "tie_word_embeddings": False}
QWEN35_TEXT["layer_types"] = QWEN35_TEXT["layer_types"] * 10  # 40 layers, every fourth full attention
GLM46 = {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "hidden_size": 5120,
         "intermediate_size": 12288, "num_hidden_layers": 92, "num_attention_heads": 96, "num_key_value_heads": 8,
         "head_dim": 128, "n_routed_experts": 160, "n_shared_experts": 1, "moe_intermediate_size": 1536,
         "first_k_dense_replace": 3, "num_experts_per_tok": 8, "vocab_size": 151552, "num_nextn_predict_layers": 1,
         "partial_rotary_factor": 0.5, "tie_word_embeddings": False}


@pytest.mark.parametrize("doc, full_layers, kv_bytes_layer", [
    # 10 of 40 layers full attention; 2 (K, V) x 2 KV heads x 256 x 2 bytes = 2048 B per token and layer
    ({"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
      "vision_config": {"depth": 27}, "text_config": QWEN35_TEXT}, 10, 2 * 2 * 256 * 2),
    # the same wrapper naming its model_type only under text_config: was "model_type None is not supported"
    ({"architectures": ["Qwen3_5MoeForConditionalGeneration"], "text_config": QWEN35_TEXT}, 10, 2 * 2 * 256 * 2),
    # GLM-4.6: all 92 layers attend; 2 x 8 KV heads x 128 x 2 bytes = 4096 B per token and layer
    (GLM46, 92, 2 * 8 * 128 * 2),
])
def test_new_configs_are_priced_from_their_own_fields(tmp_path, doc, full_layers, kv_bytes_layer):
    out = _native(["predict", "--config", write(tmp_path / "m" / "config.json", doc), "--ctx", "64K"])
    mem = out["memory"]["per_request"]["native"]
    assert mem["target_kv_bytes"] == full_layers * kv_bytes_layer * CTX
    assert mem["draft_kv_bytes"] == kv_bytes_layer * CTX  # one MTP layer
    assert all(math.isfinite(m["tpot_ms"]) and m["tpot_ms"] > 0 for m in out["methods"].values())


@pytest.mark.parametrize("model_type", ["minimax_m2", "granitemoehybrid", "falcon_h1", "jamba", "kimi_k2",
                                        "deepseek_v32", "qwen3_5", "gpt_oss"])
def test_unsupported_2025_families_are_refused_by_name(tmp_path, model_type):
    p = write(tmp_path / "m" / "config.json", {**GLM46, "model_type": model_type})
    assert_one_error(invoke("predict", "--config", p), f"model_type '{model_type}' is not supported")


# ------------------------------------------------------------------------- other scripts' digits
@pytest.mark.parametrize("args, fragment", [
    (["predict", "--model", "q35", "--ctx", "\u0663K"], "--ctx"),  # an Arabic-Indic three: was read as 3K
    (["predict", "--model", "q35", "--window", "\uff13K"], "--window"),  # a fullwidth three
    (["predict", "--model", "q35", "--depth", "\u0667"], "--depth"),
    (["predict", "--model", "q35", "--accept-length", "\u0663"], "--accept-length"),
    (["predict", "--model", "q35", "--accept-length", "3:\u0664"], "--accept-length"),
    (["sweep", "window", "--model", "q35", "--al-window", "16K:\u0663"], "--al-window"),
    (["sweep", "window", "--model", "q35", "--al-window", "\u0664K:3"], "--al-window"),
    (["simulate", "--model", "q35", "--tokens", "100", "--phases", "0.\u0665:100"], "--phases"),
    (["simulate", "--model", "q35", "--tokens", "100", "--phases", "0.5:\uff11\uff10\uff10"], "--phases"),
])
def test_numbers_in_other_scripts_digits_are_refused(args, fragment):
    assert_one_error(invoke(*args), fragment)


def test_the_same_numbers_in_ascii_digits_are_read():  # the control
    out = _native(["predict", "--model", "q35", "--ctx", "3K", "--window", "1K", "--accept-length", "3:4"])
    assert out["ctx"] == 3 * 1024 and out["window"] == 1024
    assert out["methods"]["native"]["accept_length"] == pytest.approx(3.0)
    assert out["methods"]["window"]["accept_length"] == pytest.approx(4.0)


# ------------------------------------------------------------------------- a step no input should price
def _preset(tmp_path: Path, moe_tbps: float) -> Path:
    doc = json.loads((ENGINES / "sglang-b200-paper.json").read_text())
    doc["per_model"]["q35"]["moe_tbps"] = moe_tbps
    return write(tmp_path / "preset.json", doc)


@pytest.mark.parametrize("cmd", [["predict"], ["sweep", "ctx"], ["simulate"]])
def test_engine_moe_rate_near_zero_prices_no_answer(tmp_path, cmd):
    """moe_tbps 1e-300 (finite, positive) priced the B200 step at 6.8e299 ms, printed with exit 0."""
    r = invoke(*cmd, "--model", "q35", "--hw", "b200", "--framework", _preset(tmp_path, 1e-300))
    assert_one_error(r, "step", "at most 1e+08 ms")


def test_engine_moe_rate_as_fitted_prices(tmp_path):  # the control: the shipped rate, 5.27 TB/s
    out = _native(["predict", "--model", "q35", "--hw", "b200", "--framework", _preset(tmp_path, 5.27)])
    assert 0 < out["methods"]["native"]["tpot_ms"] < 1e3


def test_config_too_wide_for_any_step_is_refused(tmp_path):
    """hidden_size 2**31 (the largest width a config may give): every matrix holds 2**62 bytes and more, hours per
    step at 4.8 TB/s; was printed as an answer."""
    doc = {"model_type": "mimo", "hidden_size": 2**31, "intermediate_size": 11008, "num_hidden_layers": 36,
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151680,
           "num_nextn_predict_layers": 1}
    assert_one_error(invoke("predict", "--config", write(tmp_path / "m" / "config.json", doc)), "at most 1e+08 ms")
    doc["hidden_size"] = 4096  # the control: MiMo-7B as published
    write(tmp_path / "m" / "config.json", doc)
    assert _native(["predict", "--config", tmp_path / "m" / "config.json"])["methods"]["native"]["tpot_ms"] > 0


# ------------------------------------------------------------------------- raw sweep data without an end
def test_raw_sweep_from_a_device_or_a_gzip_bomb(tmp_path):
    """calibrate --from-raw /dev/zero read until memory ran out (pandas reads to EOF); so did a small .gz that
    inflates past any sweep (here 600 MiB of '1,2' rows from about 0.6 MB)."""
    bomb = tmp_path / "raw.csv.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as g:
        g.write(b"a,b\n")
        for _ in range(150):
            g.write(b"1,2\n" * (1 << 20))  # 4 MiB a write, 600 MiB in all: past the 512 MiB cap
    assert bomb.stat().st_size < 4 << 20
    for raw in (Path("/dev/zero"), bomb):
        out = tmp_path / "cal"
        assert_one_error(invoke("calibrate", "--from-raw", raw, "--out", out), str(raw), "more than 512 MiB")
        assert not out.exists()


# ------------------------------------------------------------------------- a profile of a GPU wmtp does not know
def test_profile_of_an_unknown_gpu_names_the_profile(tmp_path):
    """A profile measured on 'a100' (no hardware row) priced for the H200: "unknown hardware 'a100'", which named
    neither the file nor an option the user gave."""
    doc = json.loads((PROFILES_DIR / "h200.json").read_text())
    doc["hardware"] = "a100"
    p = write(tmp_path / "a100.json", doc)
    assert_one_error(invoke("predict", "--model", "q35", "--profile", p), "a100.json", "measured on 'a100'",
                     "cannot be scaled to h200")
    doc["hardware"] = "b200"  # the control: a known GPU's profile is scaled, and says so
    out = _native(["predict", "--model", "q35", "--profile", write(tmp_path / "b200.json", doc)])
    assert out["methods"]["native"]["tpot_ms"] > 0 and "scaled from b200" in json.dumps(out)


# ------------------------------------------------------------------------- a list that names a value twice
@pytest.mark.parametrize("args, fragment", [
    (["validate", "--depths", "3,3"], "--depths lists 3 twice"),  # was measured twice on the GPU
    (["validate", "--ctx", "1M,1048576"], "--ctx lists 1M twice"),  # the same context, written two ways
    (["validate", "--models", "q35,nem,q35"], "--models lists 'q35' twice"),
    (["calibrate", "--models", "q35,q35"], "--models lists 'q35' twice"),
    (["measure", "kernels", "--batch", "1,1"], "--batch lists 1 twice"),
])
def test_a_list_option_naming_a_value_twice(tmp_path, args, fragment):
    """Checked before the GPU is looked for: on this machine (no GPU) the error is the list's, not the GPU's."""
    extra = ["--out", tmp_path / "o"] if args[0] in ("validate", "calibrate") else []
    extra += ["--profile", PROFILES_DIR / "h200.json", "--moe-backend", "wmtp"] if args[0] == "validate" else []
    assert_one_error(invoke(*args, *extra), fragment)


def test_list_values_are_parsed_in_any_order():  # the control: distinct values, reversed, are read as given
    from wmtp.units import parse_int_list

    assert parse_int_list("1M,64K,4K", what="--ctx") == [1 << 20, 64 << 10, 4 << 10]


# ------------------------------------------------------------------------- a config in a folder named like a row
MIMO = {"architectures": ["MiMoForCausalLM"], "model_type": "mimo", "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 151680,
        "num_nextn_predict_layers": 1}


@pytest.mark.parametrize("folder", ["q35", "Q35", "nem"])
@pytest.mark.parametrize("how", ["--config", "--model"])
def test_config_in_a_folder_named_like_a_registry_row(tmp_path, folder, how):
    """A MiMo config in a folder named q35 was keyed q35 and priced with the paper's measured q35 acceptance (AL 4.49 /
    4.74 at d 7), silently; it is keyed q35-config, uses no preset of another model, and says so."""
    p = write(tmp_path / folder / "config.json", MIMO)
    out = _native(["predict", how, p.parent])
    assert out["model"] == f"{folder}-config"
    assert any(f"keyed '{folder}-config'" in w for w in out["warnings"])
    assert any(f"no acceptance data for '{folder}-config'" in w for w in out["warnings"])
    # the control: a folder of its own name keeps it
    own = _native(["predict", how, write(tmp_path / "MiMo-7B-RL" / "config.json", MIMO).parent])
    assert own["model"] == "MiMo-7B-RL" and not any("keyed" in w for w in own["warnings"])


# ------------------------------------------------------------------------- outputs over the shipped data
@pytest.mark.parametrize("args, shipped", [
    # report read the default H200 profile without being told, then replaced it with its HTML
    (["report", "--model", "q35", "--out"], PROFILES_DIR / "h200.json"),
    (["sweep", "ctx", "--model", "q35", "--csv"], PROFILES_DIR / "h200.md"),
    (["report", "--model", "q35", "--out"], ENGINES / "sglang-b200-paper.json"),
    # engines --fit on the shipped points, no --out: the default (beside the points) was the shipped preset
    (["engines", "--fit", ENGINES / "sglang-b200-paper.points.csv"], ENGINES / "sglang-b200-paper.json"),
])
def test_an_output_over_a_shipped_file_is_refused(args, shipped):
    before = shipped.read_bytes()
    r = invoke(*args, *([shipped] if args[-1] in ("--out", "--csv") else []))
    assert_one_error(r, str(shipped.name), "ships and reads by default")
    assert shipped.read_bytes() == before


def test_engines_fit_default_out_beside_ones_own_points(tmp_path):  # the control: beside the user's own points
    pts = tmp_path / "mine.points.csv"
    pts.write_bytes((ENGINES / "sglang-b200-paper-v1.points.csv").read_bytes())
    r = invoke("engines", "--fit", pts)
    assert r.exit_code == 0 and json.loads((tmp_path / "mine.json").read_text())["fit"]["points"] == 19, r.output
