"""Hostile inputs found by an adversarial sweep of every command and file reader (the cases
test_hostile.py did not cover): corrupt framework profiles and engine presets, overheads that would
price a negative time, malformed profile components, non-numeric or impossible raw sweep data, output
paths that loop or are too long, conflicting calibrate modes, empty dtypes and absurd batches.
Each ends in exit code 1 and exactly one `error:` line naming what was wrong, with no traceback and
no output file left behind."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from wmtp.engine import engines_dir
from wmtp.profile import PROFILES_DIR
from cli_checks import assert_one_error, invoke  # noqa: E402

SHIPPED_PROFILE = json.loads((PROFILES_DIR / "h200.json").read_text())
PRESET = json.loads((engines_dir() / "sglang-b200-paper.json").read_text())
POINTS = engines_dir() / "sglang-b200-paper.points.csv"
RAW = PROFILES_DIR / "h200.raw.csv.gz"




def framework_profile(**changes) -> dict:
    """A framework profile as `wmtp calibrate-logs` writes one (the fields `wmtp.framework.load` reads)."""
    doc = {"schema_version": 1, "kind": "wmtp-framework-profile", "model": "q35", "hardware": "h200", "ctx": 1048576,
           "method": "native", "batch": 1, "window": 4032, "sink": 64,
           "overhead": {"const_ms": 1.0, "per_forward_ms": 0.1}}
    for key, value in changes.items():
        path = key.split(".")
        target = doc
        for k in path[:-1]:
            target = target[k]
        if value is DELETE:
            target.pop(path[-1])
        else:
            target[path[-1]] = value
    return doc


DELETE = object()


# ------------------------------------------------------------------------------------ framework profiles
@pytest.mark.parametrize("changes, fragment", [
    ({"schema_version": True}, "schema version"),
    ({"model": DELETE}, "model"),
    ({"hardware": DELETE}, "hardware"),
    ({"ctx": DELETE}, "ctx"),
    ({"ctx": "1M"}, "ctx"),
    ({"method": ["native"]}, "method"),
    ({"method": {"a": None}}, "method"),
    ({"method": "bogus"}, "method"),
    ({"overhead": [1, 2]}, "overhead"),
    ({"overhead.const_ms": DELETE}, "overhead"),
    ({"overhead.const_ms": "nan"}, "overhead.const_ms"),
    ({"overhead.per_forward_ms": 1e308}, "overhead.per_forward_ms"),
    ({"overhead.per_forward_ms": True}, "overhead.per_forward_ms"),
])
def test_corrupt_framework_profile(tmp_path, changes, fragment):
    p = tmp_path / "fw.json"
    p.write_text(json.dumps(framework_profile(**changes)))
    assert_one_error(invoke("predict", "--model", "q35", "--framework", p), fragment)


def test_valid_framework_profile_loads(tmp_path):  # the builder above is a loadable profile: the cases can fail
    p = tmp_path / "fw.json"
    p.write_text(json.dumps(framework_profile()))
    r = invoke("predict", "--model", "q35", "--framework", p, "--json")
    assert r.exit_code == 0, r.output


# Overheads larger than any kernel time, negative: the step (or one phase of it) would be negative. A negative
# overhead is a time below zero: refused when the file is read (test_hostile_sweep4.py), before any pricing.
@pytest.mark.parametrize("changes, field", [
    ({"overhead.const_ms": -1e5}, "overhead.const_ms"),
    ({"overhead.per_forward_ms": -1e5}, "overhead.per_forward_ms"),
])
def test_overhead_pricing_a_negative_time_is_refused(tmp_path, changes, field):
    p = tmp_path / "fw.json"
    p.write_text(json.dumps(framework_profile(**changes)))
    for cmd in (["predict"], ["sweep", "depth"], ["simulate", "--method", "native"]):
        assert_one_error(invoke(*cmd, "--model", "q35", "--framework", p), field, "must lie in [0, ")


@pytest.mark.parametrize("term", ["fwd_ms", "plan_fwd_ms", "step_ms"])
def test_engine_preset_with_a_negative_term_larger_than_the_kernels(tmp_path, term):
    doc = json.loads(json.dumps(PRESET))
    doc["terms"][term] = -1e5
    p = tmp_path / "preset.json"
    p.write_text(json.dumps(doc))
    assert_one_error(invoke("predict", "--model", "q35", "--hw", "b200", "--framework", p), term, "must be >= 0")


# -------------------------------------------------------------------------------------------- profiles
@pytest.mark.parametrize("value", ["abc", -1, 1e9, [3]])
def test_profile_const_launches_must_be_a_count(tmp_path, value):
    prof = json.loads(json.dumps(SHIPPED_PROFILE))
    prof["components"]["moe@int4"]["const_launches"] = value
    p = tmp_path / "p.json"
    p.write_text(json.dumps(prof))
    assert_one_error(invoke("predict", "--model", "q35", "--profile", p), "const_launches")


@pytest.mark.parametrize("change, fragment", [
    (lambda p: p.__setitem__("ceilings", "abc"), "ceilings"),
    (lambda p: p["ceilings"].__setitem__("copy_tbps", "4.2"), "ceilings"),
    (lambda p: p["ceilings"].__setitem__("gemm_bf16_tflops", -1), "ceilings"),
    (lambda p: p.__setitem__("schema_version", True), "schema version"),  # True == 1 in Python, not in JSON
])
def test_profile_top_level_fields(tmp_path, change, fragment):
    prof = json.loads(json.dumps(SHIPPED_PROFILE))
    change(prof)
    p = tmp_path / "p.json"
    p.write_text(json.dumps(prof))
    assert_one_error(invoke("predict", "--model", "q35", "--profile", p), fragment)


def test_profile_without_flops_range_prices(tmp_path):
    """flops_range is optional in a component (load_profile reads it as [0, 0]); pricing must agree."""
    prof = json.loads(json.dumps(SHIPPED_PROFILE))
    del prof["components"]["moe@int4"]["flops_range"]
    p = tmp_path / "p.json"
    p.write_text(json.dumps(prof))
    r = invoke("predict", "--model", "q35", "--profile", p, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["methods"]["native"]["tpot_ms"] > 0


# -------------------------------------------------------------------------------------------- raw data
def _raw_with_time(tmp_path: Path, value: str) -> Path:
    lines = gzip.decompress(RAW.read_bytes()).decode().splitlines()[:3000]
    col = lines[0].split(",").index("time_ms")
    row = lines[5].split(",")
    assert row[lines[0].split(",").index("status")] == "ok"
    row[col] = value
    lines[5] = ",".join(row)
    p = tmp_path / "raw.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("value, fragment", [("abc", "not a number"), ("-1", "positive"), ("0", "positive"),
                                             ("inf", "positive"), ("1e400", "positive")])
def test_raw_sweep_data_with_an_impossible_time(tmp_path, value, fragment):
    raw = _raw_with_time(tmp_path, value)
    out = tmp_path / "cal"
    assert_one_error(invoke("calibrate", "--from-raw", raw, "--out", out), "time_ms", "data row 5", fragment)
    assert not out.exists()


# ----------------------------------------------------------------------------------------- output paths
def _loop(tmp_path: Path) -> Path:
    link = tmp_path / "loop"
    link.symlink_to(link)
    return link


@pytest.mark.parametrize("target, fragment", [
    (lambda t: _loop(t), "symlink loop"),
    (lambda t: t / ("a" * 300), "too long"),
    (lambda t: t / ("a" * 300) / "x.csv", "too long"),
])
def test_unwritable_output_paths(tmp_path, target, fragment):
    path = target(tmp_path)
    before = sorted(os.listdir(tmp_path))
    assert_one_error(invoke("sweep", "depth", "--model", "q35", "--csv", path), fragment)
    assert_one_error(invoke("report", "--model", "q35", "--out", path), fragment)
    assert_one_error(invoke("engines", "--fit", POINTS, "--out", path), fragment)
    assert sorted(os.listdir(tmp_path)) == before


# -------------------------------------------------------------------------------------------- options
@pytest.mark.parametrize("args, fragment", [
    (["calibrate", "--from-raw", RAW, "--resume"], "--resume does not apply to --from-raw"),
    (["calibrate", "--from-raw", RAW, "--quick"], "--quick"),
    (["calibrate", "--from-raw", RAW, "--add-tp", "x"], "give one of"),
    (["calibrate", "--from-logs", "x.log:3", "--from-raw", RAW], "give one of"),
    (["calibrate", "--from-raw", RAW, "--method", "dense"], "--method"),
    (["calibrate", "--min-gamma", "2"], "--min-gamma does not apply to a sweep"),
    (["predict", "--model", "q35", "--kv-dtype", ""], "--kv-dtype is empty"),
    (["predict", "--model", "q35", "--weight-dtype", " "], "--weight-dtype is empty"),
    (["sweep", "ctx", "--model", "q35", "--kv-dtype", ""], "--kv-dtype is empty"),
    (["predict", "--model", "q35", "--batch", "99999999999999999999"], "concurrent requests"),
    (["predict", "--model", "q35", "--batch", str((1 << 20) + 1)], "concurrent requests"),
    (["sweep", "depth", "--model", "q35", "--batch", "2000000"], "concurrent requests"),
    (["simulate", "--model", "q35", "--tokens", "100", "--phases", "0.5:100"], None),
])
def test_bad_option_combinations(tmp_path, args, fragment):
    r = invoke(*args, *(["--out", tmp_path / "o"] if args[0] == "calibrate" else []))
    if fragment is None:  # the control: a legal simulate
        assert r.exit_code == 0, r.output
        return
    assert_one_error(r, fragment)
    assert not (tmp_path / "o").exists()


def test_largest_batch_is_legal():
    r = invoke("predict", "--model", "q35", "--batch", str(1 << 20), "--json")
    assert r.exit_code == 0, r.output


# ---------------------------------------------------------------------------- options a mode never reads
@pytest.mark.parametrize("args, fragment", [
    (["engines", "--profile", "x.json"], "--profile"),
    (["engines", "--out", "x.json"], "--out"),
    (["engines", "--hw", "h200"], "--hw"),
    (["sweep", "depth", "--model", "q35", "--al-window", "4096:3"], "--al-window"),
    (["sweep", "window", "--model", "q35", "--threshold", "0.1"], "--threshold"),
])
def test_an_option_the_mode_ignores_is_refused(tmp_path, args, fragment):
    assert_one_error(invoke(*args), fragment, "only")
    assert not (Path.cwd() / "x.json").exists()


@pytest.mark.parametrize("cmd", [["sweep", "ctx"], ["simulate"]])
def test_weights_that_fit_on_no_gpu_are_said_out_loud(cmd):
    # GLM-4.5 in bf16: 355B parameters x 2 bytes is over 600 GiB; an 80 GiB H100 holds none of it; q35 in NVFP4
    # (35B parameters at about 4.5 bits) fits an H200 many times over
    r = invoke(*cmd, "--model", "glm45", "--hw", "h100-sxm")
    assert r.exit_code == 0, r.output
    assert "do not fit" in " ".join(r.output.split())
    r = invoke(*cmd, "--model", "q35", "--hw", "h200")
    assert r.exit_code == 0 and "do not fit" not in r.output, r.output


# ------------------------------------------------------------------------------ CSV tables past the limits
def test_points_csv_with_a_field_over_the_csv_limit(tmp_path):
    p = tmp_path / "points.csv"
    p.write_text("model,method\n" + "x" * 200_000 + ",native\n")
    assert_one_error(invoke("engines", "--fit", p, "--out", tmp_path / "o.json"), "not a CSV table")
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("content, fragment", [
    (bytes(range(256)) * 4, "binary"),
    (b"a,b\n\xff\xfe,1\n", "UTF-8"),
    (b"status,x\nok," + b"x" * 200_000 + b"\n", "not a CSV table"),
    (b"status,model,ctx\nok,q35,1\n", "needs the columns"),
    (b"model,ctx,d,method,measured_ms,predicted_ms,status\nq35,1,7,native,abc,1.0,ok\n", "finite times"),
    (b"model,ctx,d,method,measured_ms,predicted_ms,status\nq35,1,7,native,1e999,1.0,ok\n", "finite times"),
])
def test_report_beside_a_corrupt_validation_table(tmp_path, content, fragment):
    """`wmtp report --profile P` reads P's sibling validation.csv when there is one."""
    (tmp_path / "profile.json").write_text(json.dumps(SHIPPED_PROFILE))
    (tmp_path / "validation.csv").write_bytes(content)
    out = tmp_path / "r.html"
    assert_one_error(invoke("report", "--model", "q35", "--profile", tmp_path / "profile.json", "--out", out),
                     "validation table", fragment)
    assert not out.exists()


@pytest.mark.parametrize("args", [
    ["predict", "--model", "q35", "--profile"], ["sweep", "ctx", "--model", "q35", "--profile"],
    ["predict", "--config"], ["simulate", "--model", "q35", "--trace"], ["predict", "--model", "q35", "--framework"],
    ["accept"], ["logs"],
])
def test_input_that_is_a_symlink_loop(tmp_path, args):
    assert_one_error(invoke(*args, _loop(tmp_path)))
