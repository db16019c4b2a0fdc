"""Hostile sweep 5, second part (test_hostile_sweep5.py holds the first): outputs written in pairs, an ASCII-only
stdout, engine presets and framework profiles over kernels or GPUs they were not fitted with, outputs that name an
input, configs that name no MTP layer, refits predict would refuse, ModelOpt's quantization file beside config.json,
and the log-reader cases the sweep routed on. Each bad input ends in exit code 1 and exactly one `error:` line; each
family has a legal control beside it; expected values are worked out by hand in the comments."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from wmtp.hf_config import load_config
from cli_checks import assert_one_error, invoke  # noqa: E402
from test_hostile_sweep5 import (FRAMEWORK_PROFILE, GLM45_AIR, MIMO_7B, NEMOTRON_H, _predict, _wmtp,  # noqa: E402
                                 write)

# ------------------------------------------------------------------------------ outputs written in pairs
def test_refit_writes_no_profile_when_its_summary_cannot_be_written(tmp_path):
    """`calibrate --from-raw` wrote profile.json, then failed on profile.md: a half-written output folder."""
    from wmtp.profile import PROFILES_DIR

    out = tmp_path / "cal"
    (out / "profile.md").mkdir(parents=True)
    r = invoke("calibrate", "--from-raw", PROFILES_DIR / "h200.raw.csv.gz", "--out", out)
    assert_one_error(r, "profile.md", "it is a folder")
    assert sorted(p.name for p in out.iterdir()) == ["profile.md"]


def test_a_name_an_ascii_stdout_cannot_encode(tmp_path):
    """PYTHONIOENCODING=ascii and a model named with a non-ASCII letter: a UnicodeEncodeError traceback."""
    p = write(tmp_path / "modèle" / "config.json", {**MIMO_7B, "architectures": ["MiMoFörCausalLM"]})
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    r = _wmtp("predict", "--config", str(p), stdout=subprocess.PIPE, env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "MiMoF\\xf6rCausalLM" in r.stdout and "mod\\xe8le" in r.stdout  # escaped, not dropped


# ------------------------------------------------------------------ an engine preset over other kernels
def _warnings(*args) -> list[str]:
    r = invoke("predict", "--model", "q35", "--framework", "sglang-b200-paper", *args, "--json")
    assert r.exit_code == 0, r.output
    return [w for w in json.loads(r.stdout)["warnings"] if "fitted over the measured" in w]


def test_engine_preset_over_kernels_it_was_not_fitted_with_is_said():
    """sglang-b200-paper's terms were fitted over the FlashInfer kernels (h200-flashinfer); --profile of wmtp's own
    kernels or --speed-of-light replaced those kernels without a word."""
    from wmtp.profile import PROFILES_DIR

    own = _warnings("--profile", PROFILES_DIR / "h200.json")
    assert len(own) == 1 and "--profile measured wmtp kernels" in own[0] and "h200-flashinfer" in own[0]
    sol = _warnings("--speed-of-light")
    assert len(sol) == 1 and "--speed-of-light" in sol[0]
    # the controls: the preset's own kernels, named or by default
    assert _warnings("--profile", PROFILES_DIR / "h200-flashinfer.json") == [] and _warnings() == []


# ------------------------------------------------------------------------------ an output that is an input
def _copy(src: Path, dst: Path) -> Path:
    dst.write_bytes(src.read_bytes())
    return dst


@pytest.mark.parametrize("make_args, option", [
    (lambda d, p, c, pts: ["sweep", "depth", "--model", "q35", "--profile", p, "--csv", p], "--profile"),
    (lambda d, p, c, pts: ["sweep", "depth", "--config", c, "--csv", c], "--config"),
    (lambda d, p, c, pts: ["report", "--config", c.parent, "--out", c], "--config"),  # a model folder's config.json
    (lambda d, p, c, pts: ["report", "--model", "q35", "--profile", p, "--out", p], "--profile"),
    (lambda d, p, c, pts: ["engines", "--fit", pts, "--out", pts], "--fit"),
    (lambda d, p, c, pts: ["calibrate", "--from-raw", p, "--out", d], "--from-raw"),  # d/profile.json is the input
])
def test_an_output_that_names_an_input_is_refused(tmp_path, make_args, option):
    """`--csv` naming the profile just read replaced it with the sweep's rows (and `engines --fit P --out P` the
    points with the preset): the input was lost."""
    from wmtp.engine import engines_dir
    from wmtp.profile import PROFILES_DIR

    p = _copy(PROFILES_DIR / "h200.json", tmp_path / "profile.json")
    c = write(tmp_path / "m" / "config.json", MIMO_7B)
    pts = _copy(engines_dir() / "sglang-b200-paper.points.csv", tmp_path / "points.csv")
    before = {f: f.read_bytes() for f in (p, c, pts)}
    assert_one_error(invoke(*make_args(tmp_path, p, c, pts)), "would destroy that input", option)
    assert {f: f.read_bytes() for f in before} == before


def test_engine_preset_out_named_like_its_summary(tmp_path):
    """--out x.md: the preset JSON was written to x.md, then replaced by its own summary (x.md as well)."""
    from wmtp.engine import engines_dir

    out = tmp_path / "preset.md"
    assert_one_error(invoke("engines", "--fit", engines_dir() / "sglang-b200-paper.points.csv", "--out", out),
                     "ends in .md")
    assert not out.exists()


# --------------------------------------------------------------------------- a config with no MTP layer named
def test_a_config_that_names_no_mtp_layer_says_so(tmp_path):
    """Nemotron-H-8B names no MTP layer: it was priced with one, silently (an explicit 0 is refused, sweep 4)."""
    p = write(tmp_path / "m" / "config.json", NEMOTRON_H)
    said = [w for w in _predict(p)["warnings"] if "names no MTP layers" in w]
    assert len(said) == 1 and "config.json" in said[0]
    r = invoke("sweep", "depth", "--config", p, "--ctx", "64K", "--json")
    assert r.exit_code == 0 and "names no MTP layers" in json.loads(r.stdout)["warning"], r.output
    one = write(tmp_path / "n" / "config.json", {**NEMOTRON_H, "num_nextn_predict_layers": 1})  # the control
    assert not [w for w in _predict(one)["warnings"] if "MTP" in w]


def test_framework_profile_from_another_gpu_is_said(tmp_path):
    """A framework profile fitted from H200 logs priced a B200 with its H200 constants, silently (an engine preset
    fitted on another GPU says so)."""
    fw = write(tmp_path / "fw.json", FRAMEWORK_PROFILE)  # "hardware": "h200"

    def said(hw):
        r = invoke("predict", "--model", "q35", "--hw", hw, "--framework", fw, "--json")
        assert r.exit_code == 0, r.output
        return [w for w in json.loads(r.stdout)["warnings"] if "fitted from h200's logs" in w]

    assert len(said("b200")) == 1 and "applied to b200" in said("b200")[0]
    assert said("h200") == []  # the control: its own GPU


# ------------------------------------------------------------------------ refits predict would refuse
def _raw_rows(tmp_path: Path, change) -> Path:
    import csv
    import gzip
    import io

    from wmtp.profile import PROFILES_DIR

    rows = list(csv.DictReader(io.StringIO(gzip.decompress((PROFILES_DIR / "h200.raw.csv.gz").read_bytes()).decode())))
    kept = [r2 for r2 in (change(dict(r)) for r in rows) if r2 is not None]
    p = tmp_path / "raw.csv"
    with open(p, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(kept)
    return p


@pytest.mark.parametrize("change, fragments", [
    # every verify_attn row failed: the refit wrote a profile that `predict` then refused ("no fit ...; recalibrate")
    (lambda r: {**r, "status": "error: oom"} if r["kernel"] == "verify_attn" else r,
     ["cannot price q35", "no fit for 'verify_attn'"]),
    # no decode_attn rows: "it holds a non-finite number" without saying where; then "NaN at draft_loop_check.0"
    # without saying what was missing (test_hostile_sweep13): the kind the draft forward lacks is named
    (lambda r: None if r["kernel"] == "decode_attn" else r, ["no successful decode_attn", "draft forward"]),
])
def test_refit_that_predict_would_refuse_writes_nothing(tmp_path, change, fragments):
    out = tmp_path / "cal"
    r = invoke("calibrate", "--from-raw", _raw_rows(tmp_path, change), "--out", out)
    assert_one_error(r, "not writing a profile", *fragments)
    assert not out.exists() or not any(out.iterdir())


# --------------------------------------------------------------- ModelOpt's quantization beside config.json
MODELOPT_SIDECAR = {"producer": {"name": "modelopt", "version": "0.23.0"},
                    "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                                     "exclude_modules": ["lm_head", "model.layers.46*"]}}


def test_modelopt_hf_quant_config_beside_config_json(tmp_path):
    """A ModelOpt unified checkpoint keeps its quantization in hf_quant_config.json (vLLM and SGLang read it there);
    config.json alone was priced as bf16. GLM's MTP block is layer 46, excluded here: kept in bf16."""
    folder = tmp_path / "glm-nvfp4"
    write(folder / "config.json", GLM45_AIR)
    assert load_config(folder).weight_dtype == "bf16"  # the control: no sidecar
    write(folder / "hf_quant_config.json", MODELOPT_SIDECAR)
    spec = load_config(folder)
    assert (spec.weight_dtype, spec.mtp_bf16) == ("nvfp4", True)
    r = invoke("predict", "--config", folder, "--weight-dtype", "fp8", "--json")  # the user's dtype wins
    assert r.exit_code == 0 and json.loads(r.stdout)["weight_dtype"] == "fp8", r.output
    own = write(tmp_path / "own" / "config.json", {**GLM45_AIR, "quantization_config": {"quant_method": "fp8"}})
    write(own.parent / "hf_quant_config.json", MODELOPT_SIDECAR)
    assert load_config(own).weight_dtype == "fp8"  # config.json's own quantization_config wins


@pytest.mark.parametrize("doc, fragment", [
    ({"quantization": {"quant_algo": "W8A8_SQ"}}, "quant_algo 'W8A8_SQ' is not a supported format"),
    ([1], "no quantization object"),
    ({"producer": {"name": "modelopt"}}, "no quantization object"),
])
def test_modelopt_sidecar_unreadable(tmp_path, doc, fragment):
    folder = tmp_path / "m"
    write(folder / "config.json", GLM45_AIR)
    write(folder / "hf_quant_config.json", doc)
    assert_one_error(invoke("predict", "--config", folder), "hf_quant_config.json", fragment)


# ---- routed from the sweep to the log readers (fixed in wmtp_model/logstats.py, wmtp_model/acceptance.py)

SUBNORMAL_SGLANG = ("[04:40:57 TP0] Decode batch. #running-req: 1, #token: 4102, token usage: 0.00, "
                    "gen throughput (token/s): {thr}, #queue-req: 0\n")
SUBNORMAL_VLLM = ("INFO 05-12 10:01:59 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
                  "throughput: {thr} tokens/s, Running: 10 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix "
                  "cache hit rate: 0.0%\n")


@pytest.mark.parametrize("layout", [SUBNORMAL_SGLANG, SUBNORMAL_VLLM])
def test_a_subnormal_throughput_is_no_decode_rate(tmp_path, layout):
    """1e-320 tok/s made 1 / throughput overflow the log-spaced bins (OverflowError traceback). A rate below one token
    in 11.6 days (1e-6 tok/s) is a line without a throughput, so a file of only such lines has nothing to read; the
    control at 50 tok/s reads: SGLang 1 request / 50 tok/s = 20 ms, vLLM 10 requests / 50 tok/s = 200 ms."""
    bad = write(tmp_path / "bad.log", layout.format(thr="1e-320"))
    for cmd in ("logs", "accept"):
        assert_one_error(invoke(cmd, bad))
    good = write(tmp_path / "good.log", layout.format(thr="50.0") * 3)
    r = invoke("logs", good, "--json")
    assert r.exit_code == 0, r.output
    want = 20.0 if layout is SUBNORMAL_SGLANG else 200.0
    assert abs(json.loads(r.output)[0]["tpot_ms"] - want) < 2e-3 * want  # log-spaced bins 0.1 % wide


def test_a_histogram_row_with_a_third_column_is_refused(tmp_path):
    """'0,5,1' is not n,count: the third column was dropped silently. A trailing empty cell ('0,5,') stays legal:
    bins 0: 5, 1: 3 give AL = 1 + 3 / 8 = 1.375."""
    assert_one_error(invoke("accept", write(tmp_path / "h.csv", "0,5,1\n1,3,2\n")), "n,count")
    r = invoke("accept", write(tmp_path / "ok.csv", "0,5,\n1,3\n"), "--json")
    assert r.exit_code == 0, r.output
    assert "1.375" in r.output
