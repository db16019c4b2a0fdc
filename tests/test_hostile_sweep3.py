"""Hostile inputs to what came after the second sweep (test_hostile.py, test_hostile_inputs.py): an engine
preset's `memory` section, `calibrate-logs` / `calibrate --from-logs`, `logs --batch`, `accept --depth` and its
JSON, `validate`'s options and the profile's kernel backends, repeated JSON keys, dtype options, empty model lists.
Each bad input ends in exit code 1 and exactly one `error:` line naming what was wrong, no traceback, nothing
written; each family has a legal control beside it, so the cases can fail."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from wmtp.cli.common import echo_json
from wmtp.engine import engines_dir
from wmtp.errors import WmtpError
from wmtp.fileio import read_json
from wmtp.profile import PROFILES_DIR
from cli_checks import assert_one_error, invoke  # noqa: E402

PRESET = json.loads((engines_dir() / "sglang-b200-paper.json").read_text())
FI_PROFILE = json.loads((PROFILES_DIR / "h200-flashinfer.json").read_text())
BIG = 10**400  # an integer JSON reads exactly and no float holds
DELETE = object()




def strict_json(text: str):
    """Parse as a strict JSON reader would: NaN and Infinity are not JSON."""
    def refuse(name):
        raise ValueError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


def write(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc))
    return path


# ------------------------------------------------------------------------------- engine preset memory
def preset_with_memory(**changes) -> dict:
    doc = json.loads(json.dumps(PRESET))
    for k, v in changes.items():
        if v is DELETE:
            doc["memory"].pop(k, None)
        else:
            doc["memory"][k] = v
    return doc


@pytest.mark.parametrize("changes, fragment", [
    ({"max_running_requests": BIG}, "max_running_requests"),  # was an OverflowError traceback
    ({"chunked_prefill_size": BIG}, "chunked_prefill_size"),  # was an OverflowError traceback
    ({"cuda_graph_max_bs": 10**30}, "cuda_graph_max_bs"),
    ({"max_new_tokens": BIG}, "max_new_tokens"),
    ({"max_new_tokens": None}, "max_new_tokens"),
    ({"max_running_requests": True}, "max_running_requests"),  # JSON true is not a count
    ({"max_running_requests": "48"}, "max_running_requests"),
    ({"mem_fraction_static": True}, "mem_fraction_static"),
    ({"mamba_full_memory_ratio": {"default": True}}, "mamba_full_memory_ratio"),
    ({"radix_cache": True}, "radix_cache"),  # not modelled: was silently ignored
    ({"radix_cache": "no"}, "radix_cache"),
    ({"engine": "vllm"}, "engine"),  # the accounting is SGLang's
    ({"engine": 5}, "engine"),
    ({"source": [1]}, "source"),
    ({"bogus_setting": 1}, "bogus_setting"),
])
def test_preset_memory_section(tmp_path, changes, fragment):
    p = write(tmp_path / "preset.json", preset_with_memory(**changes))
    for extra in ([], ["--json"]):
        assert_one_error(invoke("predict", "--model", "q35", "--hw", "b200", "--framework", p, *extra), fragment)


@pytest.mark.parametrize("changes", [{}, {"mem_fraction_static": 0.5}, {"max_running_requests": 1 << 31},
                                     {"mamba_full_memory_ratio": 0}, {"mem_fraction_static": DELETE}])
def test_preset_memory_section_legal_values(tmp_path, changes):
    p = write(tmp_path / "preset.json", preset_with_memory(**changes))
    r = invoke("predict", "--model", "q35", "--hw", "b200", "--ctx", "256K", "--framework", p, "--json")
    assert r.exit_code == 0, r.output
    assert strict_json(r.output)["methods"]["native"]["tpot_ms"] > 0


# ----------------------------------------------------------------------------------- repeated JSON keys
def _dup_key(doc: dict, key: str) -> str:
    """`doc` as JSON text with `key` written twice (the second time with an absurd value)."""
    return json.dumps(doc)[:-1] + f', "{key}": 999999999}}'


@pytest.mark.parametrize("flag, doc, key", [
    ("--config", {"model_type": "mimo", "hidden_size": 4096, "vocab_size": 151680, "num_hidden_layers": 36,
                  "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 11008,
                  "num_nextn_predict_layers": 1}, "hidden_size"),
    ("--profile", FI_PROFILE, "hardware"),
    ("--framework", PRESET, "name"),
])
def test_a_key_written_twice_is_refused(tmp_path, flag, doc, key):
    once, twice = tmp_path / "once.json", tmp_path / "twice.json"  # two names: profiles are cached by path
    once.write_text(json.dumps(doc))
    twice.write_text(_dup_key(doc, key))
    for p in (once, twice):
        args = ["predict", "--config", p] if flag == "--config" else ["predict", "--model", "q35", flag, p]
        r = invoke(*args)
        if p == once:
            assert r.exit_code == 0, r.output  # the control: the same document, each key once
        else:
            assert_one_error(r, "appears twice", key)


# ------------------------------------------------------------------------------- calibrate-logs / --from-logs
def _log(path: Path, step_ms: float, al: float = 3.0, n: int = 40) -> Path:
    thr = al / (step_ms / 1e3)  # batch 1: tokens per second of one request
    path.write_text("\n".join(
        f"[2026-01-01 10:00:{i % 60:02d}] Decode batch. #running-req: 1, #token: 10, token usage: 0.1, "
        f"accept len: {al:.2f}, cuda graph: True, gen throughput (token/s): {thr:.3f}, #queue-req: 0" for i in range(n)))
    return path


@pytest.fixture
def runs(tmp_path):
    return [f"{_log(tmp_path / f'd{d}.log', 2.5 * (d - 1) + 30.0)}:{d}" for d in (3, 5, 7)]


@pytest.mark.parametrize("make, extra, fragment", [
    (lambda r: [r[0].rsplit(":", 1)[0] + ":\u00b2", r[1]], [], "LOG:D"),  # a superscript two: was a ValueError traceback
    (lambda r: [r[0].rsplit(":", 1)[0] + ":\u0663", r[1]], [], "LOG:D"),  # an Arabic-Indic three
    (lambda r: [r[0].rsplit(":", 1)[0] + ":65", r[1]], [], "1..64"),
    (lambda r: [r[0].rsplit(":", 1)[0] + ":" + "9" * 30, r[1]], [], "1..64"),
    (lambda r: r, ["--batch", "0"], "--batch"),
    (lambda r: r, ["--batch", "-4"], "--batch"),
    (lambda r: r, ["--batch", str((1 << 20) + 1)], "--batch"),
])
def test_calibrate_logs_bad_runs_and_batch(tmp_path, runs, make, extra, fragment):
    out = tmp_path / "fw.json"
    assert_one_error(invoke("calibrate-logs", *make(runs), "--model", "q35", "--out", out, *extra), fragment)
    assert not out.exists()


def test_a_two_run_fit_writes_strict_json_that_predict_reads(tmp_path, runs):
    """With two runs there is no leave-one-out error: the fit wrote NaN there, which its own reader refused."""
    out = tmp_path / "fw.json"
    r = invoke("calibrate-logs", *runs[:2], "--model", "q35", "--out", out)
    assert r.exit_code == 0, r.output
    fw = strict_json(out.read_text())
    assert fw["t_iter_fit"]["points_used"] == 2 and fw["t_iter_fit"]["heldout_median_rel"] is None
    r = invoke("predict", "--model", "q35", "--framework", out, "--json")
    assert r.exit_code == 0, r.output
    out3 = tmp_path / "fw3.json"  # three runs: a held-out error, and the fit is exact (logs on a line)
    assert invoke("calibrate-logs", *runs, "--model", "q35", "--out", out3).exit_code == 0
    assert strict_json(out3.read_text())["t_iter_fit"]["heldout_median_rel"] < 0.01


# --------------------------------------------------------------------------------------- logs / accept
@pytest.fixture
def mean_al(tmp_path) -> Path:
    p = tmp_path / "offline.log"
    p.write_text("mean acceptance length: 2.49\n")
    return p


@pytest.mark.parametrize("batch", ["0", "-1", "99999999999999999999"])
def test_logs_batch_out_of_range(tmp_path, batch):
    log = _log(tmp_path / "a.log", 30.0)
    assert invoke("logs", log).exit_code == 0  # the control
    assert_one_error(invoke("logs", log, "--batch", batch), "--batch")


@pytest.mark.parametrize("depth", ["0", "1", "65", "1000"])
def test_accept_depth_out_of_range(mean_al, depth):
    assert_one_error(invoke("accept", mean_al, "--depth", depth), "--depth", "2..64")


def test_accept_json_without_counts_is_strict_json(mean_al, tmp_path):
    """A mean AL at --depth has no counts, so no interval: null, not NaN (which is not JSON)."""
    r = invoke("accept", mean_al, "--depth", "5", "--json")
    assert r.exit_code == 0, r.output
    alphas = strict_json(r.output)["files"][0]["alphas"]
    assert len(alphas) == 4 and all(a["ci95"] is None for a in alphas)  # d = 5: positions 1..4
    hist = tmp_path / "h.json"
    hist.write_text("[10, 20, 30]")  # 3 bins: depth 3, positions 1..2 with counts; the mean AL's reach 4
    r = invoke("accept", mean_al, hist, "--compare", "--depth", "5", "--json")
    assert r.exit_code == 0, r.output
    rows = strict_json(r.output)["comparison"]
    assert [row["window"] is None for row in rows] == [False, False, True, True]
    r = invoke("accept", mean_al, hist, "--compare", "--depth", "5")
    assert r.exit_code == 0 and "│ 4 │" in r.output  # the table still shows the missing positions,
    assert "nan" not in r.output  # as '-' (sweep 8: it printed 'nan')


def test_json_output_refuses_non_finite_numbers(capsys):
    with pytest.raises(WmtpError, match="non-finite"):
        echo_json({"tpot_ms": float("nan")})
    echo_json({"tpot_ms": 1.5, "ci95": None})
    assert strict_json(capsys.readouterr().out) == {"tpot_ms": 1.5, "ci95": None}


# -------------------------------------------------------------------------------- validate (no GPU needed)
@pytest.mark.parametrize("extra, fragment", [
    (["--moe-backend", ""], "--moe-backend is empty"),  # was: silently the profile's own
    (["--backend", ""], "--backend is empty"),
    (["--backend", "bogus", "--moe-backend", "wmtp"], "unknown backend 'bogus'"),
    (["--models", "", "--moe-backend", "wmtp"], "--models is empty"),
    (["--models", ",,", "--moe-backend", "wmtp"], "--models is empty"),
    (["--depths", "1", "--moe-backend", "wmtp"], "--depths"),
    (["--depths", "1000", "--moe-backend", "wmtp"], "--depths"),
    (["--ctx", "abc", "--moe-backend", "wmtp"], "token count"),
])
def test_validate_checks_its_options_before_the_gpu(tmp_path, extra, fragment):
    """Each was 'no CUDA GPU is visible' on a machine without one: the bad value is the error to report."""
    out = tmp_path / "val"
    assert_one_error(invoke("validate", "--profile", PROFILES_DIR / "h200-flashinfer.json", "--out", out, *extra),
                     fragment)
    assert not out.exists()


def test_validate_names_the_profile_as_the_source_of_an_unknown_moe_kernel(tmp_path):
    doc = json.loads(json.dumps(FI_PROFILE))
    doc["moe_backend"] = "triton"
    p = write(tmp_path / "p.json", doc)
    assert_one_error(invoke("validate", "--profile", p, "--out", tmp_path / "val"), "'triton'", "the profile's")


@pytest.mark.parametrize("where, key, value", [
    ("top", "backend", 5), ("top", "moe_backend", 7), ("top", "moe_backend", ["sglang"]), ("top", "moe_backend", ""),
    ("provenance", "backend", 5), ("provenance", "moe_impl", 3), ("top", "backend", "x" * 200),
])
def test_profile_kernel_backends_must_be_names(tmp_path, where, key, value):
    doc = json.loads(json.dumps(FI_PROFILE))
    (doc if where == "top" else doc["provenance"])[key] = value
    p = write(tmp_path / "p.json", doc)
    for args in (["predict", "--model", "q35", "--profile", p], ["predict", "--model", "q35", "--headroom", "--profile", p],
                 ["validate", "--profile", p, "--out", tmp_path / "val"]):
        assert_one_error(invoke(*args), key, "must name a kernel backend")


# ------------------------------------------------------------------------------ dtypes and model lists
@pytest.mark.parametrize("args, fragment", [
    (["predict", "--model", "q35", "--weight-dtype", "nonsense"], "--weight-dtype must be one of"),
    (["predict", "--model", "q35", "--weight-dtype", "FP8"], "--weight-dtype must be one of"),
    (["predict", "--model", "q35", "--kv-dtype", "int4"], "--kv-dtype must be one of"),
    (["sweep", "ctx", "--model", "q35", "--weight-dtype", "int8"], "--weight-dtype must be one of"),
    (["simulate", "--model", "q35", "--kv-dtype", "fp16"], "--kv-dtype must be one of"),
    (["calibrate", "--models", ""], "--models is empty"),
    (["calibrate", "--models", " , "], "--models is empty"),
    (["measure", "kernels", "--model", ""], "--model is empty"),
])
def test_bad_dtypes_and_empty_model_lists(tmp_path, args, fragment):
    assert_one_error(invoke(*args, *(["--out", tmp_path / "o"] if args[0] == "calibrate" else [])), fragment)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("wd, tp", [("fp8", 2), ("int4", 4), ("nvfp4", 2), ("bf16", 1)])
def test_legal_dtypes_with_tp(wd, tp):
    r = invoke("predict", "--model", "q35", "--weight-dtype", wd, "--tp", tp, "--json")
    assert r.exit_code == 0, r.output
    out = strict_json(r.output)
    assert all(m["tpot_ms"] > 0 for m in out["methods"].values())


# ----------------------------------------------------------------------------- inputs that are not files
@pytest.mark.parametrize("args", [
    ["predict", "--config", "{}"], ["predict", "--model", "q35", "--profile", "{}"],
    ["predict", "--model", "q35", "--framework", "{}"], ["simulate", "--model", "q35", "--trace", "{}"],
])
def test_a_fifo_nobody_writes_to_is_an_error_not_a_hang(tmp_path, args):
    """open() of a FIFO waits for a writer: it was a hang; the readers now open without waiting and read EOF."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", invoke(*[a.replace("{}", str(fifo)) for a in args])),
                         daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():  # unblock the reader so the test run can end, then fail
        with open(fifo, "w"):
            pass
        t.join(5)
        pytest.fail(f"{args} waited on a FIFO with no writer")
    assert_one_error(result["r"], "fifo.json")


def test_a_pipe_with_a_writer_is_read(tmp_path):
    """The non-blocking open must not break a process substitution: bash's `<(cmd)` hands over /dev/fd/N, a pipe
    whose writer is already attached and may still be writing. Read it as it fills, up to the writer's close."""
    cfg = {"model_type": "mimo", "hidden_size": 4096, "vocab_size": 151680, "num_hidden_layers": 36,
           "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 11008,
           "num_nextn_predict_layers": 1}
    data = json.dumps(cfg).encode()
    r, w = os.pipe()

    def writer():  # the first half now, the rest after the reader has had time to block on the empty pipe
        os.write(w, data[: len(data) // 2])
        time.sleep(0.3)
        os.write(w, data[len(data) // 2:])
        os.close(w)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        doc = read_json(f"/dev/fd/{r}", "config", WmtpError)
    finally:
        t.join(10)
        os.close(r)
    assert doc == cfg


# --------------------------------------------------------------------------------- conflicting options
@pytest.mark.parametrize("args, fragment", [
    (["predict", "--model", "q35", "--speed-of-light", "--profile", "/nonexistent.json"], "not both"),  # was exit 0
    (["sweep", "ctx", "--model", "q35", "--speed-of-light", "--profile", PROFILES_DIR / "h200.json"], "not both"),
    (["predict", "--model", "q35", "--framework", ""], "--framework is empty"),  # read the current folder
    (["sweep", "depth", "--model", "q35", "--framework", " "], "--framework is empty"),
    (["simulate", "--model", "q35", "--framework", ""], "--framework is empty"),
    (["predict", "--model", "q" * 5000], "+4,940 characters"),  # the key is cut, the line stays short
    (["predict", "--model", "q35", "--hw", "h" * 500], "+440 characters"),
])
def test_conflicting_and_empty_options(args, fragment):
    line = assert_one_error(invoke(*args), fragment)
    assert len(line) < 400


def test_report_refuses_two_files_for_one_method(tmp_path):
    hist = tmp_path / "h.json"
    hist.write_text("[10, 20, 30]")
    out = tmp_path / "r.html"
    assert_one_error(invoke("report", "--model", "q35", "--out", out, "--histogram", f"native={hist}",
                            "--histogram", f"native={hist}"), "native= twice")
    assert not out.exists()
    r = invoke("report", "--model", "q35", "--out", out, "--histogram", f"native={hist}", "--histogram",
               f"window={hist}")
    assert r.exit_code == 0 and out.exists(), r.output  # the control: one file per method


# ------------------------------------------------------------------- integers no float holds; refit sidecars
def _huge_term(doc: dict) -> dict:
    doc["terms"]["fwd_ms"] = BIG
    return doc


def _huge_per_model(doc: dict) -> dict:
    per = next(iter(doc["per_model"].values()))
    per[next(iter(per))] = BIG
    return doc


@pytest.mark.parametrize("mutate", [_huge_term, _huge_per_model])
def test_engine_preset_term_no_float_holds(tmp_path, mutate):  # was an OverflowError traceback
    p = write(tmp_path / "preset.json", mutate(json.loads(json.dumps(PRESET))))
    assert_one_error(invoke("predict", "--model", "q35", "--framework", p), "corrupt")


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d["provenance"].__setitem__("gpu_sm_count", BIG), "gpu_sm_count"),  # was an OverflowError traceback
    (lambda d: next(iter(d["components"].values())).__setitem__("bytes_range", [0, BIG]), "bytes_range"),
    (lambda d: d["ceilings"].__setitem__("copy_tbps", BIG), "ceilings"),
])
def test_profile_number_no_float_holds(tmp_path, mutate, fragment):
    doc = json.loads(json.dumps(FI_PROFILE))
    mutate(doc)
    assert_one_error(invoke("predict", "--model", "q35", "--profile", write(tmp_path / "p.json", doc)), fragment)


@pytest.fixture(scope="module")
def raw_csv(tmp_path_factory) -> Path:
    import gzip

    p = tmp_path_factory.mktemp("raw") / "raw.csv"
    p.write_bytes(gzip.decompress((PROFILES_DIR / "h200.raw.csv.gz").read_bytes()))
    return p


@pytest.mark.parametrize("change, fragment", [
    ({"gpu_sm_count": "abc"}, "gpu_sm_count"),  # was a ValueError traceback
    ({"gpu_sm_count": [132]}, "gpu_sm_count"),  # was a TypeError traceback
    ({"gpu_sm_count": 0}, "gpu_sm_count"),  # wrote a profile that predict then refused
    ({"gpu_sm_count": True}, "gpu_sm_count"),
    ({"backend": 5}, "could not read back"),  # likewise
    ({"moe_impl": ["sglang"]}, "could not read back"),
])
def test_refit_with_a_corrupt_sidecar_writes_nothing(tmp_path, raw_csv, change, fragment):
    meta = json.loads((PROFILES_DIR / "h200.raw.meta.json").read_text())
    write(raw_csv.with_name("raw.meta.json"), {**meta, **change})
    out = tmp_path / "cal"
    assert_one_error(invoke("calibrate", "--from-raw", raw_csv, "--out", out), fragment)
    assert not (out / "profile.json").exists() and not (out / "profile.md").exists()


def test_refit_with_a_sound_sidecar_writes_a_profile_predict_reads(tmp_path, raw_csv):
    write(raw_csv.with_name("raw.meta.json"), json.loads((PROFILES_DIR / "h200.raw.meta.json").read_text()))
    out = tmp_path / "cal"
    r = invoke("calibrate", "--from-raw", raw_csv, "--out", out)
    assert r.exit_code == 0, r.output
    r = invoke("predict", "--model", "q35", "--profile", out / "profile.json", "--json")
    assert r.exit_code == 0 and strict_json(r.output)["methods"]["native"]["tpot_ms"] > 0, r.output


def test_add_tp_with_a_corrupt_fit_leaves_the_profile_as_it_was(tmp_path):
    tp_dir, out = tmp_path / "tp", tmp_path / "cal"
    tp_dir.mkdir()
    out.mkdir()
    shipped = (PROFILES_DIR / "h200.json").read_bytes()
    (out / "profile.json").write_bytes(shipped)
    (tp_dir / "tp_raw.csv").write_text("a,b\n")
    (tp_dir / "allreduce_tp2.json").write_text('{"features": ["bytes"], "coef_ms": ["abc"]}')
    assert_one_error(invoke("calibrate", "--add-tp", tp_dir, "--out", out), "allreduce_tp2", "could not read back")
    assert (out / "profile.json").read_bytes() == shipped


@pytest.mark.parametrize("what, opt, value", [("ctx", "--ctx", "64K"), ("window", "--window", "1K"),
                                              ("batch", "--batch", "4")])
def test_a_sweep_refuses_a_value_of_the_variable_it_sweeps(what, opt, value):
    """The sweep runs over its own grid: the rows were identical with and without the option (silently ignored)."""
    assert_one_error(invoke("sweep", what, "--model", "q35", opt, value), opt, "varies")
    other = "depth"  # the control: the same option where it is held fixed
    r = invoke("sweep", other, "--model", "q35", opt, value, "--json")
    assert r.exit_code == 0, r.output


def test_simulate_depth_with_a_non_ascii_digit(tmp_path):  # '²'.isdigit() is True, int('²') a ValueError traceback
    assert_one_error(invoke("simulate", "--model", "q35", "--depth", "\u00b2"), "--depth")


def test_simulate_refuses_phases_beside_a_trace(tmp_path):
    """A trace fixes each step's accepted count: the phases were silently ignored (same TPOT with or without)."""
    trace = tmp_path / "trace.txt"
    trace.write_text("3\n2\n6\n1\n")
    assert_one_error(invoke("simulate", "--model", "q35", "--trace", trace, "--phases", "0.1:4096"), "not both")
    r = invoke("simulate", "--model", "q35", "--trace", trace, "--json")  # the control
    assert r.exit_code == 0 and strict_json(r.output)["steps"] > 0, r.output
