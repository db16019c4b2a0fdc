"""Hostile inputs found by the fifth adversarial sweep (after test_hostile.py, test_hostile_inputs.py,
test_hostile_sweep3.py and test_hostile_sweep4.py): options valid alone that contradict each other, config.json
files of real model families whose attention wmtp does not model (priced as full attention, silently), MoE
layer strides that were read as "every layer", traces that Python's int() reads too generously, and a stdout or
Ctrl-C that ended in a traceback or in silence. Each bad input ends in exit code 1 (130 for Ctrl-C) and exactly
one `error:` line; each family has a legal control beside it, so the cases can fail. Expected sizes are worked
out by hand from the config fields in the comments, not taken from the code under test."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wmtp.hf_config import load_config
from cli_checks import assert_one_error, invoke  # noqa: E402

CTX = 65536  # --ctx 64K


def write(path: Path, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


# Field values as published in each family's config.json (abridged to what wmtp reads, plus fields it must not
# misread: partial_rotary_factor, sliding_window with use_sliding_window false, a quantization_config).
GLM45_AIR = {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "hidden_size": 4096,
             "intermediate_size": 10944, "num_hidden_layers": 46, "num_attention_heads": 96,
             "num_key_value_heads": 8, "head_dim": 128, "n_routed_experts": 128, "n_shared_experts": 1,
             "moe_intermediate_size": 1408, "first_k_dense_replace": 1, "num_experts_per_tok": 8,
             "vocab_size": 151552, "num_nextn_predict_layers": 1, "partial_rotary_factor": 0.5,
             "tie_word_embeddings": False, "use_qk_norm": False}
MIMO_7B = {"architectures": ["MiMoForCausalLM"], "model_type": "mimo", "hidden_size": 4096, "intermediate_size": 11008,
           "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 151680,
           "num_nextn_predict_layers": 1, "sliding_window": 32768, "use_sliding_window": False,
           "max_window_layers": 36, "tie_word_embeddings": False}
NEMOTRON_H = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 4096,
              "intermediate_size": 21504, "num_hidden_layers": 52,
              "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
              "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "mamba_num_heads": 128,
              "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4, "vocab_size": 131072,
              "sliding_window": None}
DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
               "vocab_size": 129280, "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
               "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
               "q_lora_rank": 1536, "n_routed_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
               "n_shared_experts": 1, "first_k_dense_replace": 3, "intermediate_size": 18432,
               "num_nextn_predict_layers": 1, "moe_layer_freq": 1,
               "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                       "weight_block_size": [128, 128]}}
QWEN3_NEXT = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 2048,
              "vocab_size": 151936, "num_hidden_layers": 48, "full_attention_interval": 4, "num_attention_heads": 16,
              "num_key_value_heads": 2, "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
              "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
              "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
              "shared_expert_intermediate_size": 512, "intermediate_size": 5120, "mlp_only_layers": [],
              "decoder_sparse_step": 1}


def _predict(path: Path) -> dict:
    r = invoke("predict", "--config", path, "--ctx", "64K", "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# ------------------------------------------------------------------------------- real configs, priced
@pytest.mark.parametrize("cfg, full_layers, kv_bytes_layer, weight_dtype", [
    # 2 (K and V) x 8 KV heads x 128 head_dim x 2 bytes (bf16) = 4096 B per token and layer; all 46 layers attend
    (GLM45_AIR, 46, 2 * 8 * 128 * 2, "bf16"),
    (MIMO_7B, 36, 2 * 8 * 128 * 2, "bf16"),  # use_sliding_window false: every layer is full attention
    # the pattern has 4 '*' (attention) blocks among its 52 characters
    (NEMOTRON_H, 4, 2 * 8 * 128 * 2, "bf16"),
    # MLA caches one latent of kv_lora_rank + qk_rope_head_dim = 512 + 64 values, bf16: 1152 B per token and layer
    (DEEPSEEK_V3, 61, (512 + 64) * 2, "fp8"),
    # full_attention_interval 4 over 48 layers: 12 attention layers, 2 KV heads x 256 x 2 (K, V) x 2 bytes
    (QWEN3_NEXT, 12, 2 * 2 * 256 * 2, "bf16"),
])
def test_real_config_is_priced_from_its_own_fields(tmp_path, cfg, full_layers, kv_bytes_layer, weight_dtype):
    out = _predict(write(tmp_path / "m" / "config.json", cfg))
    mem = out["memory"]["per_request"]
    assert mem["native"]["target_kv_bytes"] == full_layers * kv_bytes_layer * CTX
    assert mem["native"]["draft_kv_bytes"] == 1 * kv_bytes_layer * CTX  # one MTP layer, as the config says
    assert out["weight_dtype"] == weight_dtype
    for m in out["methods"].values():
        assert math.isfinite(m["tpot_ms"]) and m["tpot_ms"] > 0 and m["source"]


def test_deepseek_v3_total_parameters_match_the_published_count(tmp_path):
    # DeepSeek-V3: 671B main model + 14B MTP module = 685B parameters (its model card)
    spec = load_config(write(tmp_path / "ds" / "config.json", DEEPSEEK_V3))
    assert spec.total_params == pytest.approx(685e9, rel=0.01)


# ---------------------------------------------------------------------- attention wmtp does not model
@pytest.mark.parametrize("base, change, fragments", [
    # MiMo / Qwen2 with sliding windows switched on: was priced as full attention over the whole context
    (MIMO_7B, {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 0},
     ["use_sliding_window is true", "sliding_window 4096"]),
    ({**MIMO_7B, "model_type": "qwen2"}, {"use_sliding_window": True}, ["use_sliding_window is true"]),
    # transformers writes layer_types; sliding layers were ignored
    (MIMO_7B, {"layer_types": ["sliding_attention"] * 18 + ["full_attention"] * 18},
     ["layer_types lists 'sliding_attention'"]),
    (GLM45_AIR, {"layer_types": ["chunked_attention"] * 46}, ["layer_types lists 'chunked_attention'"]),
    # DeepSeek-V3.2's sparse attention (an indexer picks 2048 keys per query) under model_type deepseek_v3
    (DEEPSEEK_V3, {"index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128},
     ["index_topk (2048)", "DeepSeek Sparse Attention"]),
    (QWEN3_NEXT, {"text_config": "qwen3_next"}, ["text_config must be an object"]),
])
def test_config_with_attention_wmtp_does_not_model(tmp_path, base, change, fragments):
    p = write(tmp_path / "m" / "config.json", {**base, **change})
    for cmd in (["predict"], ["sweep", "depth"], ["simulate"]):
        assert_one_error(invoke(*cmd, "--config", p, "--ctx", "64K"), "config.json", *fragments)


@pytest.mark.parametrize("base, change", [
    (MIMO_7B, {}),  # sliding_window given, use_sliding_window false: full attention
    (MIMO_7B, {"layer_types": ["full_attention"] * 36}),
    (MIMO_7B, {"use_sliding_window": True, "sliding_window": None}),  # no window to slide
    (DEEPSEEK_V3, {"index_topk": None}),
])
def test_config_whose_attention_is_all_full_is_priced(tmp_path, base, change):
    assert _predict(write(tmp_path / "m" / "config.json", {**base, **change}))["methods"]["native"]["tpot_ms"] > 0


# ----------------------------------------------------------------------------- MoE layer strides
def test_qwen_decoder_sparse_step_makes_dense_layers(tmp_path):
    """HF Qwen3-Next: layer i is MoE iff (i + 1) % decoder_sparse_step == 0 (and not in mlp_only_layers); the others
    run a dense MLP of intermediate_size. Step 2 over 48 layers: 24 MoE (i = 1, 3, ..., 47), 24 dense; with
    mlp_only_layers [1]: 23 MoE. Was: 48 MoE whatever the step."""
    two = load_config(write(tmp_path / "a" / "config.json", {**QWEN3_NEXT, "decoder_sparse_step": 2}))
    assert (two.n_moe, two.n_dense_ffn, two.dense_ffn) == (24, 24, 5120)
    only = load_config(write(tmp_path / "b" / "config.json", {**QWEN3_NEXT, "decoder_sparse_step": 2,
                                                               "mlp_only_layers": [1]}))
    assert (only.n_moe, only.n_dense_ffn) == (23, 25)
    one = load_config(write(tmp_path / "c" / "config.json", QWEN3_NEXT))  # the control: step 1, every layer MoE
    assert (one.n_moe, one.n_dense_ffn) == (48, 0)


def test_deepseek_moe_layer_freq_makes_dense_layers(tmp_path):
    """HF DeepSeek: layer i is MoE iff i >= first_k_dense_replace and i % moe_layer_freq == 0. Freq 2, first 3,
    61 layers: MoE at i = 4, 6, ..., 60 (29 layers), dense at the other 32. Was: 58 MoE whatever the freq."""
    spec = load_config(write(tmp_path / "a" / "config.json", {**DEEPSEEK_V3, "moe_layer_freq": 2}))
    assert (spec.n_moe, spec.n_dense_ffn, spec.dense_ffn) == (29, 32, 18432)
    control = load_config(write(tmp_path / "b" / "config.json", DEEPSEEK_V3))
    assert (control.n_moe, control.n_dense_ffn) == (61 - 3, 3)


@pytest.mark.parametrize("base, change, fragment", [
    (QWEN3_NEXT, {"decoder_sparse_step": 0}, "'decoder_sparse_step' must be a positive integer"),
    ({k: v for k, v in QWEN3_NEXT.items() if k != "intermediate_size"}, {"decoder_sparse_step": 2},
     "needs intermediate_size"),  # dense layers without a dense width
    (DEEPSEEK_V3, {"moe_layer_freq": 0}, "'moe_layer_freq' must be a positive integer"),
])
def test_moe_stride_fields_out_of_range(tmp_path, base, change, fragment):
    p = write(tmp_path / "m" / "config.json", {**base, **change})
    assert_one_error(invoke("predict", "--config", p, "--ctx", "64K"), "config.json", fragment)


# -------------------------------------------------------------------------------- conflicting options
FRAMEWORK_PROFILE = {"schema_version": 1, "kind": "wmtp-framework-profile", "model": "q35", "hardware": "h200",
                     "ctx": 1048576, "method": "native", "batch": 1, "window": 4032, "sink": 64,
                     "overhead": {"const_ms": 1.0, "per_forward_ms": 0.1}}


@pytest.mark.parametrize("args, fragments", [
    # the second preset's terms were priced over the first one's kernels and memory accounting
    (["predict", "--model", "q35", "--framework", "sglang-b200-paper", "--framework", "sglang-b200-paper-v1"],
     ["2 engine presets", "give one"]),
    (["sweep", "depth", "--model", "q35", "--framework", "sglang-b200-paper-v1", "--framework", "sglang-b200-paper"],
     ["2 engine presets"]),
    (["simulate", "--model", "q35", "--framework", "sglang-b200-paper", "--framework", "sglang-b200-paper-v1"],
     ["2 engine presets"]),
    # the headroom table read measured profiles under a speed-of-light prediction
    (["predict", "--model", "q35", "--headroom", "--speed-of-light"], ["--headroom", "--speed-of-light", "not both"]),
    (["simulate", "--model", "q35", "--phases", ""], ["--phases is empty"]),  # was the preset profile, silently
    (["simulate", "--model", "q35", "--phases", "  "], ["--phases is empty"]),
])
def test_options_that_contradict(args, fragments):
    assert_one_error(invoke(*args), *fragments)


def test_two_framework_profiles_for_one_method(tmp_path):
    a = write(tmp_path / "a.json", FRAMEWORK_PROFILE)
    b = write(tmp_path / "b.json", {**FRAMEWORK_PROFILE, "overhead": {"const_ms": 5.0, "per_forward_ms": 0.1}})
    assert_one_error(invoke("predict", "--model", "q35", "--framework", a, "--framework", b),
                     "two framework profiles for the native method", "a.json", "b.json")
    w = write(tmp_path / "w.json", {**FRAMEWORK_PROFILE, "method": "window"})
    r = invoke("predict", "--model", "q35", "--framework", a, "--framework", w, "--json")  # the control
    assert r.exit_code == 0, r.output


def test_one_preset_named_twice_is_one_preset():
    """The control: the same preset twice is not a conflict, and prices as the preset once."""
    def tpot(*fw):
        r = invoke("predict", "--model", "q35", *[a for f in fw for a in ("--framework", f)], "--json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["methods"]["native"]["tpot_ms"]

    assert tpot("sglang-b200-paper", "sglang-b200-paper") == tpot("sglang-b200-paper")


# ------------------------------------------------------------------------------------------ traces
@pytest.mark.parametrize("text, word", [("1_0\n2\n", "1_0"), ("+1\n2\n", "+1"), ("1\n-1\n", "-1"), ("3\n0x2\n", "0x2")])
def test_trace_word_that_is_not_a_plain_count(tmp_path, text, word):
    """int() reads '1_0' as 10 and '+1' as 1: a trace line is one non-negative integer in ASCII digits."""
    p = write(tmp_path / "t.txt", text)
    assert_one_error(invoke("simulate", "--model", "q35", "--trace", p), "t.txt", repr(word))


def test_trace_with_crlf_and_blank_lines_is_read(tmp_path):
    # the control: counts 1, 2, 0, 3 with Windows line ends: 4 steps emit (1 + 2 + 0 + 3) + 4 bonus = 10 tokens
    p = tmp_path / "t.txt"
    p.write_bytes(b"1\r\n2\r\n\r\n0\r\n3\r\n")
    r = invoke("simulate", "--model", "q35", "--trace", p, "--tokens", "10", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["steps"] == 4


# ------------------------------------------------------------------------- sources of sweep and simulate
@pytest.mark.parametrize("what, keys", [
    ("ctx", ["dense_step_source", "native_step_source", "window_step_source"]),
    ("depth", ["native_step_source", "window_step_source"]),
    ("window", ["window_step_source", "native_step_source"]),
    ("batch", ["step_source"]),
])
def test_every_sweep_row_says_where_its_step_costs_come_from(what, keys):
    """A sweep printed numbers with no measured / interpolated / extrapolated tag; under --speed-of-light every
    row's source is the datasheet's."""
    r = invoke("sweep", what, "--model", "q35", "--speed-of-light", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    assert rows and all(row[k] == "speed-of-light" for row in rows for k in keys)
    r = invoke("sweep", what, "--model", "q35", "--speed-of-light")
    findings = ("break-even context", "best depth", "TPOT-optimal window", "Pareto-optimal")
    lines = r.stdout.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.strip().startswith("─")) + 1  # below the header rule
    end = next(i for i, ln in enumerate(lines) if ln.startswith(findings))  # the table ends at the finding
    assert r.exit_code == 0 and sum(ln.rstrip().endswith("sol") for ln in lines[first:end]) == len(rows), r.stdout
    # the finding is computed from those rows, so it carries their tag too (its sentence may wrap: up to 'acceptance:')
    stop = next(i for i in range(end, len(lines)) if lines[i].startswith("acceptance:"))
    assert " ".join(lines[end:stop]).rstrip().endswith("sol"), r.stdout


def test_simulate_says_where_its_step_costs_come_from():
    r = invoke("simulate", "--model", "q35", "--speed-of-light", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["step_source"] == {"7": "speed-of-light"}  # fixed depth 7: one depth priced
    r = invoke("simulate", "--model", "q35", "--speed-of-light")
    assert "(sol;" in r.stdout, r.stdout


def test_predict_decisions_carry_a_source():
    r = invoke("predict", "--model", "q35", "--speed-of-light", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["decisions"]["source"] == "speed-of-light", r.output


# ------------------------------------------------------------------------ stdout and Ctrl-C (real processes)
def _wmtp(*args, **popen) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wmtp.cli.main", *args], stderr=subprocess.PIPE, text=True,
                          timeout=120, **popen)


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["predict", "--model", "q35", "--json"], ["sweep", "ctx", "--model", "q35"],
                                  ["models"]])
def test_stdout_on_a_full_device(args):
    with open("/dev/full", "w") as full:  # was an OSError traceback from click or rich
        r = _wmtp(*args, stdout=full)
    assert r.returncode == 1 and "No space left" in _one_line(r.stderr)


def test_stdout_closed():
    """`wmtp predict >&-`: nothing printed, and it exited 0."""
    r = _wmtp("predict", "--model", "q35", stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1))
    assert r.returncode == 1 and "standard output is closed" in _one_line(r.stderr)


def test_stdout_pipe_closed_by_the_reader():
    """`wmtp ... | head -1`: the reader went away; exit 1 quietly (no traceback, no line)."""
    p = subprocess.Popen([sys.executable, "-m", "wmtp.cli.main", "sweep", "batch", "--model", "q35", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()  # before the command writes anything
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1 and err.strip() == "", err


def test_ctrl_c_during_a_command_is_one_line_and_130():
    """typer turned Ctrl-C into exit code 130 with nothing said; the interrupt is raised inside the sweep here."""
    code = ("import sys, wmtp.decisions as d\n"
            "def boom(*a, **k): raise KeyboardInterrupt\n"
            "d.sweep = boom\n"
            "from wmtp.cli.main import main\n"
            "sys.argv = ['wmtp', 'sweep', 'ctx', '--model', 'q35']\n"
            "main()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 130 and _one_line(r.stderr) == "error: interrupted" and r.stdout == ""


def test_ctrl_c_while_the_command_line_imports():
    """Ctrl-C in the first tenths of a second: a KeyboardInterrupt traceback from deep inside an import."""
    code = "import os, signal, wmtp.cli\nos.kill(os.getpid(), signal.SIGINT)\nimport time; time.sleep(30)\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 130 and _one_line(r.stderr) == "error: interrupted"
    code = "import os, signal, wmtp.cli.main\nos.kill(os.getpid(), signal.SIGINT)\n"  # the control: imports done
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "KeyboardInterrupt" in r.stderr  # Python's own handler is back


def test_nemotron_layer_count_must_match_its_pattern(tmp_path):
    """num_hidden_layers 10 beside a 52-character pattern was ignored (the pattern's 52 layers priced)."""
    p = write(tmp_path / "m" / "config.json", {**NEMOTRON_H, "num_hidden_layers": 10})
    assert_one_error(invoke("predict", "--config", p), "num_hidden_layers (10)", "hybrid_override_pattern's length (52)")


# ------------------------------------------------------------------ quantized weights without their own fit
def _components(*args) -> dict:
    r = invoke("predict", "--model", "q35", "--ctx", "64K", *args, "--json")
    assert r.exit_code == 0, r.output
    return {c["name"]: c["source"] for c in json.loads(r.stdout)["methods"]["native"]["components"]}


@pytest.mark.parametrize("weight_dtype, fit", [("nvfp4", "moe@int4"), ("fp8", "moe@fp8")])
def test_quantized_weights_priced_by_the_bf16_fit_are_extrapolated(tmp_path, weight_dtype, fit):
    """A profile without the format's kernel fits priced nvfp4 / fp8 weights with the bf16 fit at their bytes and
    tagged them interpolated or measured: a price across dtypes, like fp8 KV on a bf16-KV fit, is extrapolated."""
    from wmtp.profile import PROFILES_DIR

    doc = json.loads((PROFILES_DIR / "h200.json").read_text())
    doc["components"] = {k: v for k, v in doc["components"].items() if "@" not in k}  # the bf16 fits only
    p = write(tmp_path / "bf16-only.json", doc)
    moe = _components("--profile", p, "--weight-dtype", weight_dtype)["verify.moe"]
    assert moe.startswith("extrapolated") and f"no {fit} fit" in moe, moe
    control = _components("--profile", p, "--weight-dtype", "bf16")["verify.moe"]  # the fit's own dtype
    assert not control.startswith("extrapolated") and "no moe@" not in control, control


# ------------------------------------------------------------------------- which count is wrong
@pytest.mark.parametrize("args, opt", [
    (["predict", "--model", "q35", "--window", "0"], "--window"),  # was "token count must be positive": of which?
    (["predict", "--model", "q35", "--ctx", "1e3K"], "--ctx"),
    (["sweep", "depth", "--model", "q35", "--ctx", "abc"], "--ctx"),
    (["simulate", "--model", "q35", "--window", "-3"], "--window"),
    (["measure", "kernels", "--batch", "0"], "--batch"),  # a list option, checked before any GPU is looked for
    (["measure", "kernels", "--ctx", "64K,x"], "--ctx"),
])
def test_a_bad_count_names_its_option(tmp_path, args, opt):
    line = assert_one_error(invoke(*args, *(["--out", tmp_path / "o"] if args[0] == "measure" else [])))
    assert line.startswith(f"error: {opt}: "), line
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------- head_dim left out
def test_head_dim_left_out_where_the_width_does_not_divide(tmp_path):
    """GLM-4.5-Air without head_dim: 4096 // 96 = 42 was priced (its heads are 128 wide); HF has no such default."""
    no_hd = {k: v for k, v in GLM45_AIR.items() if k != "head_dim"}
    assert_one_error(invoke("predict", "--config", write(tmp_path / "g" / "config.json", no_hd)),
                     "no head_dim", "hidden_size (4096)", "num_attention_heads (96)")
    # the control: MiMo leaves head_dim out and 4096 / 32 = 128 divides: 2 x 8 x 128 x 2 B per token and layer
    spec = load_config(write(tmp_path / "m" / "config.json", MIMO_7B))
    assert spec.head_dim == 128 and spec.kv_bytes_per_token_layer == 4096


# ------------------------------------------------------------------- an MTP block left out of quantization
def _nvfp4(ignore: list[str]) -> dict:
    return {"quant_method": "compressed-tensors",
            "config_groups": {"group_0": {"targets": ["Linear"],
                                          "weights": {"num_bits": 4, "type": "float", "group_size": 16}}},
            "ignore": ignore}


@pytest.mark.parametrize("ignore, mtp_bf16", [
    (["lm_head", "model.layers.46.eh_proj"], True),  # GLM keeps its MTP block as decoder layer 46 (of 46: 0..45)
    (["lm_head", "re:model.layers.46.*"], True),
    (["lm_head", r"re:.*layers\.46\..*"], True),  # a regex entry, its dots escaped
    (["lm_head", "model.layers.45.mlp.gate"], False),  # the model's own last layer
    (["lm_head"], False),
    (["mtp.fc"], True),  # Qwen's name for it
])
def test_mtp_block_left_unquantized_by_layer_number(tmp_path, ignore, mtp_bf16):
    """The MTP block past num_hidden_layers was recognised only by the word 'mtp': GLM's / DeepSeek's
    `model.layers.{num_hidden_layers}` in an ignore list was priced as quantized."""
    spec = load_config(write(tmp_path / "m" / "config.json", {**GLM45_AIR, "quantization_config": _nvfp4(ignore)}))
    assert (spec.weight_dtype, spec.mtp_bf16) == ("nvfp4", mtp_bf16)


def test_modules_to_not_convert_must_be_names(tmp_path):
    q = {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": "lm_head"}
    p = write(tmp_path / "m" / "config.json", {**GLM45_AIR, "quantization_config": q})
    assert_one_error(invoke("predict", "--config", p), "modules_to_not_convert must be a list of module names")
