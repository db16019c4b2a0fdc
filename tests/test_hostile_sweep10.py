"""Hostile inputs found by the tenth adversarial sweep of the CLI (after test_hostile*.py): numbers of thousands of
digits where a count is read (int() refuses more than 4300 digits: a ValueError traceback), paths too long for the
file system to look up (Python 3.11's Path.exists() / is_dir() raise ENAMETOOLONG where 3.12 answers False), a raw
sweep named by a folder without a name, and terminal sizes ($COLUMNS, $LINES, $TERMINAL_WIDTH) rich and typer cannot
use. Each bad input ends in exit code 1 and exactly one `error:` line (no traceback) and writes nothing; each family
has a legal control beside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wmtp.models import MODELS
from wmtp.quant_config import weight_formats
from cli_checks import assert_one_error, invoke  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "tests" / "data" / "sglang_decode.log"
SHIPPED_RAW = ROOT / "wmtp_model" / "data" / "profiles" / "h200.raw.csv.gz"
HUGE = "9" * 5000  # more digits than int() converts (sys.get_int_max_str_digits(): 4300)
DS = {"model_type": "deepseek_v3", "hidden_size": 7168, "vocab_size": 129280, "num_hidden_layers": 61,
      "num_attention_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
      "v_head_dim": 128, "q_lora_rank": 1536, "n_routed_experts": 256, "num_experts_per_tok": 8,
      "moe_intermediate_size": 2048, "n_shared_experts": 1, "first_k_dense_replace": 3,
      "intermediate_size": 18432, "num_nextn_predict_layers": 1}


def _fp8_skipping(module: str) -> dict:
    return {**DS, "quantization_config": {"quant_method": "fp8", "modules_to_not_convert": [module]}}


# ------------------------------------------------------------- a skipped module numbered with thousands of digits
@pytest.mark.parametrize("module, mtp_bf16", [
    (f"model.layers.{HUGE}.mlp", True),  # past num_hidden_layers (61): the MTP block's number space; was a ValueError
    ("model.layers." + "0" * 5000 + "3.mlp", False),  # layer 3 with leading zeros: a target layer
    ("model.layers.61.mlp", True),  # the control: DeepSeek's MTP layer is model.layers.{num_hidden_layers}
    ("model.layers.60.mlp", False),
])
def test_skipped_module_layer_number_of_any_length(module, mtp_bf16):
    assert weight_formats(_fp8_skipping(module))["mtp_bf16"] is mtp_bf16


def test_config_skipping_a_layer_numbered_past_int_is_priced(tmp_path):
    p = tmp_path / "m" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(_fp8_skipping(f"model.layers.{HUGE}.mlp")))
    r = invoke("predict", "--config", p, "--ctx", "64K", "--json")
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    assert json.loads(r.stdout)["model"] == "m"


# ------------------------------------------------------------------------------ counts of thousands of digits
def test_trace_count_of_thousands_of_digits_is_refused(tmp_path):
    p = tmp_path / "trace.txt"
    p.write_text(f"3\n{HUGE}\n2\n")
    line = assert_one_error(invoke("simulate", "--model", "q35", "--trace", p, "--tokens", "50"), "trace",
                            "accepted draft tokens", "at most 63")
    assert HUGE[:17] in line and HUGE not in line  # the count is shown cut, not 5000 digits


def test_trace_count_with_leading_zeros_is_its_value(tmp_path):
    """The control: '000...05' (5001 characters) is the count 5, as a plain integer reads it."""
    p = tmp_path / "trace.txt"
    p.write_text("0" * 5000 + "5\n5\n")
    r = invoke("simulate", "--model", "q35", "--trace", p, "--tokens", "12", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["mean_accept_length"] == pytest.approx(6.0)  # 5 accepted + the bonus token


@pytest.mark.parametrize("args", [
    ["calibrate-logs", f"{LOG}:{HUGE}", f"{LOG}:5", "--model", "q35"],
    ["calibrate", "--from-logs", f"{LOG}:{HUGE}", "--from-logs", f"{LOG}:5", "--models", "q35"],
])
def test_log_depth_of_thousands_of_digits_is_refused(tmp_path, args):
    out = tmp_path / "fw"
    extra = ["--out", out / "framework.json"] if args[0] == "calibrate-logs" else ["--out", out]
    assert_one_error(invoke(*args, *extra), "LOG:D pairs", "d in 1..64")
    assert not out.exists()


# -------------------------------------------------------------------------- paths too long to look up
LONG_NAME = "a" * 300  # one name over NAME_MAX (255 bytes on every Linux file system)


def _long_path(tmp_path: Path) -> str:
    return str(tmp_path / LONG_NAME)


@pytest.mark.parametrize("make_args", [
    lambda p, out: ["predict", "--config", p],
    lambda p, out: ["predict", "--model", p],
    lambda p, out: ["predict", "--model", "q35", "--framework", p],
    lambda p, out: ["sweep", "depth", "--model", "q35", "--framework", p],
    lambda p, out: ["report", "--model", "q35", "--histogram", f"native={p}", "--out", out / "r.html"],
    lambda p, out: ["logs", p],
    lambda p, out: ["accept", p],
    lambda p, out: ["accept", str(LOG), p, "--compare"],
    lambda p, out: ["calibrate", "--from-raw", p, "--out", out],
    lambda p, out: ["calibrate", "--from-logs", f"{p}:3", "--from-logs", f"{LOG}:5", "--models", "q35",
                    "--out", out],
    lambda p, out: ["calibrate-logs", f"{p}:3", f"{LOG}:5", "--model", "q35", "--out", out / "fw.json"],
    lambda p, out: ["calibrate", "--parts", "attention", "--base-raw", p, "--out", out],
])
def test_a_path_too_long_to_look_up_is_one_error(tmp_path, make_args):
    out = tmp_path / "out"
    line = assert_one_error(invoke(*make_args(_long_path(tmp_path), out)), "too long")
    assert LONG_NAME not in line  # the path is shown cut
    assert not out.exists()


def test_sglang_dir_too_long_to_look_up_is_one_error(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    r = invoke_env({"WMTP_SGLANG_DIR": _long_path(tmp_path)}, "calibrate", "--moe-backend", "sglang", "--out",
                   tmp_path / "cal")
    assert_one_error(r, "SGLang's file", "too long")


def test_paths_of_ordinary_length_are_read(tmp_path):
    """The control: the same commands on paths that exist read them."""
    r = invoke("logs", LOG, "--json")
    assert r.exit_code == 0, r.output
    r = invoke("calibrate", "--from-raw", SHIPPED_RAW, "--out", tmp_path / "cal")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "cal" / "profile.json").is_file()


# ---------------------------------------------------------------------------- a raw sweep named by a folder
@pytest.mark.parametrize("raw", ["/", ".", ""])
def test_from_raw_of_a_folder_without_a_name(tmp_path, raw, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "cal"
    assert_one_error(invoke("calibrate", "--from-raw", raw, "--out", out), "is a folder, not a raw sweep CSV")
    assert not out.exists()  # Path('/').with_name(...) was a ValueError traceback


# ------------------------------------------------------------------------------------- terminal sizes
def invoke_env(env: dict, *args):
    from typer.testing import CliRunner

    from wmtp.cli.main import app

    return CliRunner().invoke(app, [str(a) for a in args], env=env)


@pytest.mark.parametrize("env", [{"COLUMNS": "0"}, {"COLUMNS": "²"}, {"LINES": "²"}, {"COLUMNS": HUGE},
                                 {"LINES": HUGE}, {"COLUMNS": "0" * 5000 + "90"}])
def test_a_terminal_size_rich_cannot_use_is_ignored(env):
    """COLUMNS=0 printed nothing and exited 0; '²' and 5000 digits were a ValueError traceback in rich."""
    r = invoke_env(env, "models")
    assert r.exit_code == 0 and r.exception is None, r.output
    first_cells = {line.split()[0] for line in r.output.splitlines() if line.strip()}
    assert set(MODELS) <= first_cells, r.output


def test_an_ordinary_terminal_width_is_kept():
    """The control: COLUMNS=60 still lays the table out in 60 columns."""
    r = invoke_env({"COLUMNS": "60"}, "models")
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.output.splitlines()) <= 60


def _run_cli(env: dict, *args: str, timeout: float = 60):
    full = {**os.environ, **env}
    code = "import sys; from wmtp.cli.main import main; sys.argv = ['wmtp'] + sys.argv[1:]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], env=full, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("env", [{"COLUMNS": "99999999"}, {"TERMINAL_WIDTH": "abc"}, {"TERMINAL_WIDTH": "-5"},
                                 {"TERMINAL_WIDTH": "0"}])
def test_help_under_an_absurd_terminal_width(env):
    """--help with COLUMNS=99999999 padded every line to 1e8 characters (minutes, gigabytes); TERMINAL_WIDTH=abc was a
    ValueError in typer's help, -5 and 0 printed nothing."""
    t0 = time.monotonic()
    r = _run_cli(env, "--help")
    assert time.monotonic() - t0 < 30
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "predict" in r.stdout and max(len(line) for line in r.stdout.splitlines()) <= 10_000
