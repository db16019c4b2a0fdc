"""Hostile inputs found by the eighth adversarial sweep (after test_hostile_sweep7.py): an option that takes one value
given twice (click kept the last one, silently); a file output named with a trailing '/' (written as a file of that
name); a GPU command's --out that is a file (a FileExistsError traceback on a GPU); options the command then ignored
(`sweep depth --depth` without --accept-length, `simulate --method native` with --window / --sink, --task beside
--accept-length, `simulate --seed` beside --trace, `calibrate-logs --window` for native / dense runs, calibrate options
of another mode, `accept --depth` that no file reads): the same numbers as without them; `--tree-width` whose step
costs are a chain's without a word; config.json fields misread (tie_word_embeddings "false" read as true, a null
full_attention_interval reported as 0); 'nan' in the compare table and -0.0 in JSON; a model key or name that the
HTML report or rich's markup took as markup (script injection, a MarkupError traceback). Each bad input ends in exit
code 1 and exactly one `error:` line; each family has a legal control beside it, so the cases can fail. Expected
values come from hand arithmetic on the config's fields or from what the user gave, not from the code under test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_checks import assert_one_error, invoke  # noqa: E402
from test_hostile_sweep5 import MIMO_7B, write  # noqa: E402

ENGINES = Path(__file__).resolve().parents[1] / "wmtp_model" / "data" / "engines"
POINTS = ENGINES / "sglang-b200-paper.points.csv"


def _json(*args) -> dict:
    r = invoke(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# ------------------------------------------------------------------------- 1. one-value options given twice
@pytest.mark.parametrize("args, opt", [
    (["predict", "--model", "q35", "--model", "nem"], "--model"),  # priced nem, silently
    (["predict", "-m", "q35", "--ctx=64K", "--ctx", "1M"], "--ctx"),  # short and --opt=value spellings count too
    (["sweep", "ctx", "--model", "q35", "--hw", "h200", "--hw", "b200"], "--hw"),
    (["simulate", "--model", "q35", "--method", "native", "--method", "window"], "--method"),
    (["predict", "--model", "q35", "--json", "--json"], "--json"),
    (["measure", "kernels", "--variants", "--no-variants"], "--variants/--no-variants"),  # a sub-group's command
    (["validate", "--depths", "3", "--depths", "5"], "--depths"),  # before the GPU check
])
def test_an_option_given_twice_is_refused(args, opt):
    assert_one_error(invoke(*args), opt, "more than once")


def test_an_option_given_twice_writes_nothing(tmp_path):
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    assert_one_error(invoke("report", "--model", "q35", "--out", a, "--out", b), "--out", "more than once")
    assert list(tmp_path.iterdir()) == []


def test_a_repeatable_option_may_repeat():  # the control: --framework takes a list (the same preset twice is one)
    doc = _json("predict", "--model", "q35", "--hw", "b200", "--framework", "sglang-b200-paper",
                "--framework", "sglang-b200-paper")
    assert "sglang-b200-paper" in doc["engine_overhead"]


# ------------------------------------------------------------------------- 2. a file output ending in '/'
@pytest.mark.parametrize("make_args", [
    lambda d: ["report", "--model", "q35", "--out", f"{d}/"],
    lambda d: ["sweep", "ctx", "--model", "q35", "--csv", f"{d}/"],
    lambda d: ["engines", "--fit", POINTS, "--out", f"{d}/"],
    lambda d: ["calibrate-logs", "x.log:3", "y.log:5", "--model", "q35", "--out", f"{d}/"],
])
def test_a_file_output_ending_in_a_slash_is_refused(tmp_path, make_args):
    """`--out results/` wrote a file named `results` (pathlib drops the trailing slash)."""
    target = tmp_path / "results"
    line = assert_one_error(invoke(*make_args(target)), "'--", "names a folder")
    assert "--out" in line or "--csv" in line
    assert not target.exists()


def test_a_file_output_inside_a_new_folder_is_written(tmp_path):  # the control: a file name after the slash
    out = tmp_path / "results" / "r.csv"
    r = invoke("sweep", "ctx", "--model", "q35", "--csv", out)
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("ctx")


# ------------------------------------------------------------------------- 3. options the command ignored
def test_sweep_depth_refuses_a_depth_without_a_measured_accept_length():
    """The rows were those of the default d = 7's presets whatever --depth said; only a label changed."""
    assert_one_error(invoke("sweep", "depth", "--model", "q35", "--depth", "3"), "--depth", "varies",
                     "--accept-length")


def test_sweep_depth_reads_a_depth_with_its_accept_length():  # the control: --depth names where AL was measured
    rows = {r["depth"]: r for r in _json("sweep", "depth", "--model", "q35", "--depth", "3", "--accept-length",
                                         "2.5")["rows"]}
    assert rows[3]["native_accept_length"] == pytest.approx(2.5)  # the user's AL, at the user's depth
    assert rows[3]["window_accept_length"] == pytest.approx(2.5)


@pytest.mark.parametrize("opt, value", [("--window", "1K"), ("--sink", "0"), ("-W", "8192")])
def test_simulate_native_refuses_window_options(opt, value):
    """Native MTP drafts over the whole context: the output was byte-identical with and without them."""
    assert_one_error(invoke("simulate", "--model", "q35", "--method", "native", opt, value, "--tokens", "64"),
                     opt if opt != "-W" else "--window", "--method native")


def test_simulate_window_reads_window_options():  # the control: the windowed draft is priced with them
    base = _json("simulate", "--model", "q35", "--tokens", "256")
    wide = _json("simulate", "--model", "q35", "--tokens", "256", "--window", "256K", "--sink", "0")
    assert wide["total_ms"] > base["total_ms"]  # same seed, same acceptance draws; a wider window reads more keys


# ------------------------------------------------------------------------- 4. config.json true / false fields
@pytest.mark.parametrize("value", ["false", "true", 1, 0, [], "no"])
def test_tie_word_embeddings_must_be_a_boolean(tmp_path, value):
    p = write(tmp_path / "m" / "config.json", {**MIMO_7B, "tie_word_embeddings": value})
    assert_one_error(invoke("predict", "--config", p), "tie_word_embeddings", "true or false")


def test_tied_embeddings_drop_one_vocabulary_matrix(tmp_path):  # the control: real booleans and null
    def weights(value):
        p = write(tmp_path / str(value) / "config.json", {**MIMO_7B, "tie_word_embeddings": value})
        return _json("predict", "--config", p)["memory"]["weights_bytes"]["dense"]

    untied, tied, null = weights(False), weights(True), weights(None)
    assert null == untied  # HF's default for these families: not tied
    assert untied - tied == MIMO_7B["vocab_size"] * MIMO_7B["hidden_size"] * 2  # one bf16 [vocab, hidden] matrix


# ------------------------------------------------------------------------- 5. negative zero
def test_threshold_negative_zero_is_zero():
    """'--threshold -0' was echoed as -0.0 in the JSON and the footer."""
    r = invoke("sweep", "ctx", "--model", "q35", "--threshold", "-0", "--json")
    assert r.exit_code == 0, r.output
    assert '"break_even_threshold": 0.0' in r.stdout and "-0.0" not in r.stdout


# ------------------------------------------------------------------------- 6. NaN in a table
def test_compare_table_shows_no_nan_where_one_profile_is_shallower(tmp_path):
    """`accept --compare` of a d = 4 and a d = 2 histogram printed 'nan' for the positions the d = 2 one lacks."""
    native, window = tmp_path / "n.json", tmp_path / "w.json"
    native.write_text("[10, 5, 3, 2]")  # d = 4: positions 1..3
    window.write_text("[4, 6]")  # d = 2: position 1 only
    r = invoke("accept", native, window, "--compare")
    assert r.exit_code == 0, r.output
    assert "nan" not in r.stdout.lower()
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("│ 2 ")]
    assert len(rows) == 2 and "│      - │" in rows[-1], r.stdout  # the comparison's row 2: window has no value
    j = json.loads(invoke("accept", native, window, "--compare", "--json").stdout)
    assert [c["window"] for c in j["comparison"]][1:] == [None, None]


# ------------------------------------------------------------------------- 7. --tree-width prices the ring only
@pytest.mark.parametrize("k", ["2", "4", "100"])
def test_tree_width_says_its_step_costs_are_a_chains(k):
    """--tree-width k sizes the ring (DESIGN 3) and nothing else: the TPOT was a chain's, shown without a word (and
    past 64 the warning claimed the tree's verify batch was priced)."""
    chain = _json("predict", "--model", "q35")
    tree = _json("predict", "--model", "q35", "--tree-width", k)
    assert tree["methods"]["window"]["tpot_ms"] == chain["methods"]["window"]["tpot_ms"]
    said = " ".join(tree["warnings"])
    assert f"--tree-width {k} sizes the draft ring only" in said and "chain's (k = 1)" in said
    assert "priced as if it were run" not in said
    assert tree["memory"]["ring_slots"] == chain["memory"]["ring_slots"] + 7 * (int(k) - 1)  # d*k slots, d = 7


def test_chain_width_warns_nothing():  # the control
    assert _json("predict", "--model", "q35", "--tree-width", "1")["warnings"] == []


# ------------------------------------------------------------------------- 8. a GPU command's --out folder
PROFILE = Path(__file__).resolve().parents[1] / "wmtp_model" / "data" / "profiles" / "h200.json"


@pytest.mark.parametrize("args", [
    ["validate", "--profile", PROFILE, "--models", "q35"],
    ["measure", "kernels"],
    ["calibrate", "--quick"],
])
@pytest.mark.parametrize("where", ["file", "under-a-file"])
def test_gpu_command_out_that_is_no_folder(tmp_path, args, where):
    """On a GPU machine `--out FILE` reached mkdir after the device was set up: a FileExistsError traceback (here:
    'no CUDA GPU', which hid it). Now refused before the GPU is asked for."""
    f = tmp_path / "f"
    f.write_text("keep")
    out = f if where == "file" else f / "sub"
    assert_one_error(invoke(*args, "--out", out), "--out folder", "not a folder" if where == "file" else str(out))
    assert f.read_text() == "keep"


def test_check_output_folder_takes_new_and_existing_folders(tmp_path):  # the control, on the library
    from wmtp.fileio import WriteError, check_output_folder

    assert check_output_folder(tmp_path) == tmp_path
    assert check_output_folder(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()  # checked, not created
    (tmp_path / "x").write_text("")
    with pytest.raises(WriteError):
        check_output_folder(tmp_path / "x")


# ------------------------------------------------------------------------- 9. a null field is a missing field
def test_null_full_attention_interval_is_missing_not_zero(tmp_path):
    """`"full_attention_interval": null` (and no layer_types) said 'must be >= 1, got 0': a value the file never held."""
    from test_hostile_sweep5 import QWEN3_NEXT

    p = write(tmp_path / "m" / "config.json", {**QWEN3_NEXT, "full_attention_interval": None})
    line = assert_one_error(invoke("predict", "--config", p), "needs full_attention_interval", "lacks")
    assert "got 0" not in line
    p = write(tmp_path / "z" / "config.json", {**QWEN3_NEXT, "full_attention_interval": 0})  # the control: a real 0
    assert_one_error(invoke("predict", "--config", p), "full_attention_interval must be >= 1", "got 0")


# ------------------------------------------------------------------------- 10. more options that changed nothing
@pytest.mark.parametrize("cmd", [["predict"], ["sweep", "ctx"], ["sweep", "window"], ["report"]])
def test_task_beside_a_measured_accept_length_is_refused(tmp_path, cmd):
    """--task picks a paper preset; a measured --accept-length replaces it: the output was identical with and
    without --task cwe."""
    extra = ["--out", tmp_path / "r.html"] if cmd == ["report"] else []
    assert_one_error(invoke(*cmd, "--model", "q35", "--accept-length", "3", "--task", "cwe", *extra), "--task cwe",
                     "--accept-length")
    assert not (tmp_path / "r.html").exists()


def test_task_alone_picks_its_preset():  # the control: cwe's paper AL differs from the default task's
    cwe = _json("predict", "--model", "q35", "--task", "cwe")["methods"]["native"]
    default = _json("predict", "--model", "q35")["methods"]["native"]
    assert cwe["accept_length"] != default["accept_length"]


def test_seed_beside_a_trace_is_refused(tmp_path):
    """A trace replays recorded counts and draws nothing: --seed 5 gave the same result as no seed."""
    trace = tmp_path / "t.txt"
    trace.write_text("3\n4\n2\n")
    assert_one_error(invoke("simulate", "--model", "q35", "--trace", trace, "--seed", "5"), "--seed", "--trace")
    doc = _json("simulate", "--model", "q35", "--trace", trace, "--tokens", "12")  # the control: the trace alone
    assert doc["mean_accept_length"] == pytest.approx((4 + 5 + 3) / 3)  # accepted + 1 bonus per step, d = 7


@pytest.mark.parametrize("method", ["native", "dense"])
@pytest.mark.parametrize("opt, value", [("--window", "1K"), ("--sink", "0")])
def test_calibrate_logs_window_options_of_runs_without_a_window(tmp_path, method, opt, value):
    """A native or dense fit was the same with --window 1K; only the profile's "window" label changed (to a value
    the runs never had)."""
    from test_hostile_sweep3 import _log

    runs = [f"{_log(tmp_path / f'd{d}.log', 2.5 * (d - 1) + 30.0)}:{d}" for d in (3, 5, 7)]
    out = tmp_path / "fw.json"
    assert_one_error(invoke("calibrate-logs", *runs, "--model", "q35", "--method", method, opt, value, "--out", out),
                     opt, f"--method {method}")
    assert not out.exists()


def test_calibrate_logs_window_runs_record_their_window(tmp_path):  # the control
    from test_hostile_sweep3 import _log

    runs = [f"{_log(tmp_path / f'd{d}.log', 2.5 * (d - 1) + 30.0)}:{d}" for d in (3, 5, 7)]
    out = tmp_path / "fw.json"
    r = invoke("calibrate-logs", *runs, "--model", "q35", "--method", "window", "--window", "1K", "--out", out)
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["window"] == 1024


@pytest.mark.parametrize("depth", ["3", "10"])
def test_accept_depth_a_histogram_contradicts(tmp_path, depth):
    """A 4-bin histogram (0..3 accepted: d = 4) with --depth 10 was read as d = 4 whatever --depth said; its AL at
    d = 10 was extrapolated geometrically, though the file shows no step accepting a fourth token."""
    h = tmp_path / "h.json"
    h.write_text("[5, 3, 2, 1]")
    assert_one_error(invoke("accept", h, "--depth", depth), "d = 4", f"--depth {depth}")


def test_accept_depth_that_agrees_or_serves_a_mean(tmp_path):  # the controls
    h = tmp_path / "h.json"
    h.write_text("[5, 3, 2, 1]")
    doc = _json("accept", h, "--depth", "4")
    assert doc["files"][0]["accept_length"] == pytest.approx((0 * 5 + 1 * 3 + 2 * 2 + 3 * 1) / 11 + 1)  # 1.909
    m = tmp_path / "m.jsonl"
    m.write_text('{"spec_accept_length": 2.5, "completion_tokens": 100}\n')
    doc = _json("accept", m, h, "--compare", "--depth", "5")  # --depth serves the mean AL; the histogram keeps d = 4
    assert [f["measured_depth"] for f in doc["files"]] == [5, 4]


# ------------------------------------------------------------------------- 11. calibrate options of another mode
RAW = Path(__file__).resolve().parents[1] / "wmtp_model" / "data" / "profiles" / "h200.raw.csv.gz"


@pytest.mark.parametrize("args, opt, mode", [
    (["--from-raw", RAW, "--ctx", "64K"], "--ctx", "--from-raw"),  # the refit was byte-identical without it
    (["--quick", "--hw", "b200"], "--hw", "a sweep"),  # a sweep measures the GPU it runs on
    (["--add-tp", "TP", "--hw", "b200"], "--hw", "--add-tp"),
    (["--add-tp", "TP", "--models", "q35"], "--models", "--add-tp"),
])
def test_calibrate_option_of_another_mode(tmp_path, args, opt, mode):
    args = [tmp_path if a == "TP" else a for a in args]
    out = tmp_path / "cal"
    assert_one_error(invoke("calibrate", *args, "--out", out), opt, "does not apply to", mode)
    assert not out.exists()


def test_calibrate_from_raw_with_its_own_options(tmp_path):  # the control: --hw and --models apply to a refit
    out = tmp_path / "cal"
    r = invoke("calibrate", "--from-raw", RAW, "--hw", "h200", "--models", "q35", "--out", out)
    assert r.exit_code == 0, r.output
    assert json.loads((out / "profile.json").read_text())["hardware"] == "h200"


# ------------------------------------------------------------------------- 12. the report's HTML
def test_report_escapes_a_model_key_taken_from_a_folder_name(tmp_path):
    """The key (the config's folder name) went into the report's <h1> unescaped: a folder named
    `<img src=x onerror=alert(1)>` ran script when the self-contained report was opened."""
    key = "<img src=x onerror=alert(1)>"
    p = write(tmp_path / key / "config.json", MIMO_7B)
    out = tmp_path / "r.html"
    r = invoke("report", "--config", p, "--out", out)
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert key not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert text.rstrip().endswith("</html>")


# ------------------------------------------------------------------------- 13. names printed through rich markup
@pytest.mark.parametrize("name", ["Mi[/bold]mo", "[bold]Mimo", "Mimo[/]"])
def test_model_name_with_markup_brackets_is_printed_as_written(tmp_path, name):
    """The architecture name went through rich's markup: 'Mi[/bold]mo' was a MarkupError traceback, '[bold]Mimo'
    lost its brackets."""
    p = write(tmp_path / "m" / "config.json", {**MIMO_7B, "architectures": [name]})
    r = invoke("predict", "--config", p)
    assert r.exit_code == 0 and r.exception is None, r.output
    assert name in r.stdout


def test_help_twice_is_help():  # the control for the repeated-option check: --help is eager, not a value
    r = invoke("predict", "--help", "--help")
    assert r.exit_code == 0 and "Usage" in r.output


def test_break_even_threshold_is_said_as_what_it_measures():
    """--threshold 0.5 found where step_native / step_window >= 1.5 (the window 33 % cheaper), and the footer said
    'the window's step is at least 50 % cheaper'; 10 said '1000 % cheaper', a negative step."""
    be = _json("sweep", "ctx", "--model", "q35", "--threshold", "0.5")["break_even_ctx"]
    steps = _json("predict", "--model", "q35", "--ctx", str(be))["methods"]
    assert steps["native"]["step_ms"] / steps["window"]["step_ms"] >= 1.5 * (1 - 1e-9)  # what the threshold measures
    r = invoke("sweep", "ctx", "--model", "q35", "--threshold", "0.5")
    text = " ".join(r.stdout.split())
    assert "native's step is at least 50 % longer than the window's" in text and "cheaper" not in text


def test_from_raw_refuses_a_gpu_its_sidecar_contradicts(tmp_path):
    """`calibrate --from-raw R --hw b200` where R's sidecar says the sweep ran on an H200: the sidecar won silently
    (--hw names the GPU of a sweep without one); now one error. The control: the same --hw without a sidecar."""
    import gzip
    import shutil

    from wmtp.profile import PROFILES_DIR

    raw = tmp_path / "h200.raw.csv"
    with gzip.open(PROFILES_DIR / "h200.raw.csv.gz", "rb") as src, open(raw, "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(PROFILES_DIR / "h200.raw.meta.json", tmp_path / "h200.raw.meta.json")
    assert_one_error(invoke("calibrate", "--from-raw", raw, "--hw", "b200", "--out", tmp_path / "o"),
                     "--hw b200 contradicts", "NVIDIA H200")
    (tmp_path / "h200.raw.meta.json").unlink()
    r = invoke("calibrate", "--from-raw", raw, "--hw", "b200", "--out", tmp_path / "o2")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "o2" / "profile.json").read_text())["hardware"] == "b200"
