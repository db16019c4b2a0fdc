"""Hostile inputs of the fourteenth adversarial sweep (after test_hostile_sweep13*.py): `calibrate --add-tp` of a
tp_bench folder whose tp_raw.csv is a folder (an IsADirectoryError traceback) or a FIFO (a hang), whose tp.meta.json
is no object (merged without the GPU check) or that holds an all-reduce fit under a name no TP size prices
(`allreduce_tpX.json`, `allreduce_tp1.json`, a copy `allreduce_tp2.old.json`: merged as components nothing reads);
`calibrate-logs` of runs at two depths with two of them at one depth (refused as 'a single depth' by the held-out
fold that leaves one depth), of one log named twice (one run weighed twice, or fitted at two depths), with a negative
--min-gamma (silently no filter); a raw sweep whose head counts are fractions (0.5 KV heads: a ZeroDivisionError
traceback in the features; 2.5 truncated to 2); an acceptance histogram no profile can be built from, whose error did
not say which file it was (`accept a.json b.json --compare`, `report --histogram`).
Each bad input ends in exit code 1 and exactly one `error:` line (no traceback) and writes nothing; each has a legal
control beside it. Expected values are worked out by hand in the comments or recomputed here, not taken from the code
under test."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from wmtp.profile import PROFILES_DIR
from cli_checks import assert_one_error, invoke, shipped_raw_with_cell  # noqa: E402


# --- calibrate --add-tp ---------------------------------------------------------------------------------------------

def _tp_setup(tmp_path: Path) -> tuple[Path, Path]:
    """A tp_bench output folder (its raw rows and the shipped TP2 all-reduce fit) and a --out folder holding a copy
    of the shipped H200 profile."""
    tp, cal = tmp_path / "tp", tmp_path / "cal"
    tp.mkdir()
    cal.mkdir()
    shutil.copy(PROFILES_DIR / "h200.json", cal / "profile.json")
    (tp / "tp_raw.csv").write_text("kernel,time_ms\nallreduce,0.01\n")
    fit = json.loads((PROFILES_DIR / "h200.json").read_text())["components"]["allreduce_tp2"]
    (tp / "allreduce_tp2.json").write_text(json.dumps(fit))
    return tp, cal


def test_add_tp_whose_raw_rows_are_a_folder(tmp_path):
    """tp_raw.csv a folder: its sha256 was taken with read_bytes, an IsADirectoryError traceback."""
    tp, cal = _tp_setup(tmp_path)
    (tp / "tp_raw.csv").unlink()
    (tp / "tp_raw.csv").mkdir()
    before = (cal / "profile.json").read_bytes()
    assert_one_error(invoke("calibrate", "--add-tp", tp, "--out", cal), "tp_raw.csv", "not a file")
    assert (cal / "profile.json").read_bytes() == before


def test_add_tp_whose_raw_rows_are_a_fifo_is_an_error_not_a_hang(tmp_path):
    tp, cal = _tp_setup(tmp_path)
    (tp / "tp_raw.csv").unlink()
    os.mkfifo(tp / "tp_raw.csv")
    before = (cal / "profile.json").read_bytes()
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", invoke("calibrate", "--add-tp", tp, "--out", cal)),
                         daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():  # unblock the reader so the test run can end, then fail
        with open(tp / "tp_raw.csv", "w"):
            pass
        t.join(5)
        pytest.fail("--add-tp waited on a FIFO with no writer")
    assert_one_error(result["r"], "tp_raw.csv", "not a file")
    assert (cal / "profile.json").read_bytes() == before


@pytest.mark.parametrize("meta", ["[1, 2]", '"NVIDIA H200"', "5"])
def test_add_tp_whose_metadata_is_no_object(tmp_path, meta):
    """tp.meta.json that is no object: the GPU check (a B200 run merged into the H200 profile) was skipped and the
    document recorded as the run's metadata."""
    tp, cal = _tp_setup(tmp_path)
    (tp / "tp.meta.json").write_text(meta)
    before = (cal / "profile.json").read_bytes()
    assert_one_error(invoke("calibrate", "--add-tp", tp, "--out", cal), "tp.meta.json", "object")
    assert (cal / "profile.json").read_bytes() == before


@pytest.mark.parametrize("name", ["allreduce_tpX.json", "allreduce_tp1.json", "allreduce_tp0.json",
                                  "allreduce_tp2.old.json", "allreduce_tp02.json"])
def test_add_tp_of_a_fit_named_for_no_tp_size(tmp_path, name):
    """The pricing reads `allreduce_tp<N>` for N GPUs (N >= 2; one GPU all-reduces nothing): a fit under another
    name was merged as a component nothing reads, and 'added' said it was."""
    tp, cal = _tp_setup(tmp_path)
    shutil.copy(tp / "allreduce_tp2.json", tp / name)
    before = (cal / "profile.json").read_bytes()
    assert_one_error(invoke("calibrate", "--add-tp", tp, "--out", cal), name)
    assert (cal / "profile.json").read_bytes() == before


def test_add_tp_of_fits_named_for_tp_sizes_merges(tmp_path):  # the control: TP2 and TP8 fits, each merged
    tp, cal = _tp_setup(tmp_path)
    shutil.copy(tp / "allreduce_tp2.json", tp / "allreduce_tp8.json")
    (tp / "tp.meta.json").write_text(json.dumps({"gpu_name": "NVIDIA H200"}))
    r = invoke("calibrate", "--add-tp", tp, "--out", cal)
    assert r.exit_code == 0, r.output
    comps = json.loads((cal / "profile.json").read_text())["components"]
    assert {"allreduce_tp2", "allreduce_tp8"} <= set(comps)


# --- calibrate-logs -------------------------------------------------------------------------------------------------

def _log(path: Path, step_ms: float, al: float = 3.0, n: int = 40) -> Path:
    """An SGLang decode log at batch 1 whose every line gives T_iter = accept len / gen throughput = step_ms."""
    thr = al / (step_ms / 1e3)
    path.write_text("\n".join(
        f"[2026-01-01 10:00:{i % 60:02d}] Decode batch. #running-req: 1, #token: 10, token usage: 0.1, "
        f"accept len: {al:.2f}, cuda graph: True, gen throughput (token/s): {thr:.3f}, #queue-req: 0" for i in range(n)))
    return path


def test_calibrate_logs_of_two_depths_one_of_them_run_twice(tmp_path):
    """Runs at d = 3 (two logs) and d = 5: two depths, a line through them; the leave-one-out fold without the d = 5
    run holds one depth, and that fold refused the whole fit as 'the logs cover a single depth'."""
    a, b, c = _log(tmp_path / "a.log", 35.0), _log(tmp_path / "b.log", 35.2), _log(tmp_path / "c.log", 40.0)
    out = tmp_path / "fw.json"
    r = invoke("calibrate-logs", f"{a}:3", f"{b}:3", f"{c}:5", "--model", "q35", "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    fit = doc["t_iter_fit"]
    # least squares over (gamma, ms) = (2, 35.0), (2, 35.2), (4, 40.0): the line through (2, 35.1) and (4, 40.0),
    # within the logs' printed throughput's rounding; exactly, numpy's fit of the points the file records
    assert fit["t_fwd_ms"] == pytest.approx((40.0 - 35.1) / 2, rel=0.01)
    assert fit["c_ms"] == pytest.approx(35.1 - 2 * (40.0 - 35.1) / 2, rel=0.01)
    slope, icept = np.polyfit([p["gamma"] for p in doc["points"]], [p["t_iter_ms"] for p in doc["points"]], 1)
    assert (fit["t_fwd_ms"], fit["c_ms"]) == pytest.approx((slope, icept), rel=1e-9)
    assert fit["points_used"] == 3 and fit["heldout_median_rel"] is not None  # two folds predict their point


@pytest.mark.parametrize("second", ["{a}:5", "{a}:3", "{dot}:7"])
def test_calibrate_logs_naming_one_log_twice(tmp_path, second):
    """One log is one run at one depth: named twice it weighed twice in the fit, or was fitted at two depths."""
    a, b = _log(tmp_path / "a.log", 35.0), _log(tmp_path / "b.log", 40.0)
    dot = Path(os.path.relpath(a.parent)) / "." / a.name  # the same file by another spelling
    out = tmp_path / "fw.json"
    r = invoke("calibrate-logs", f"{a}:3", f"{b}:5", second.format(a=a, dot=dot), "--model", "q35", "--out", out)
    assert_one_error(r, "a.log", "twice")
    assert not out.exists()


@pytest.mark.parametrize("value", ["-1", "-30"])
def test_calibrate_logs_negative_min_gamma(tmp_path, value):
    """gamma = d - 1 >= 1: a negative --min-gamma filtered nothing, silently."""
    a, b = _log(tmp_path / "a.log", 35.0), _log(tmp_path / "b.log", 40.0)
    out = tmp_path / "fw.json"
    r = invoke("calibrate-logs", f"{a}:3", f"{b}:5", "--model", "q35", "--out", out, "--min-gamma", value)
    assert_one_error(r, "--min-gamma")
    assert not out.exists()


def test_calibrate_logs_min_gamma_in_range_filters(tmp_path):  # the control: gamma >= 4 keeps d = 5 and d = 7
    runs = [f"{_log(tmp_path / f'd{d}.log', ms)}:{d}" for d, ms in ((3, 35.0), (5, 40.0), (7, 45.0))]
    out = tmp_path / "fw.json"
    r = invoke("calibrate-logs", *runs, "--model", "q35", "--out", out, "--min-gamma", "4")
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["t_iter_fit"]["points_used"] == 2


# --- raw sweep head counts ------------------------------------------------------------------------------------------

def _raw(tmp_path: Path, col: str, value: str, row: int = 5) -> Path:
    """The shipped H200 raw sweep with one cell of data row `row` replaced."""
    return shipped_raw_with_cell(tmp_path, col, value, row)


@pytest.mark.parametrize("col, value", [
    ("kv_heads", "0.5"),  # int(0.5) = 0 KV heads: q_heads // 0, a ZeroDivisionError traceback
    ("kv_heads", "1e-320"),
    ("q_heads", "2.5"),  # truncated to 2 heads, silently
    ("head_dim", "127.5"),
    ("batch", "1.5"),
    ("kv_heads", "0"),  # no KV heads: read as one, silently
])
def test_raw_sweep_head_count_that_is_no_whole_number(tmp_path, col, value):
    out = tmp_path / "cal"
    assert_one_error(invoke("calibrate", "--from-raw", _raw(tmp_path, col, value), "--out", out),
                     f"column {col}", "data row 5", "whole number")
    assert not out.exists()


def _raw_kind(tmp_path: Path, kind: str, col: str, value: str) -> Path:
    """The shipped H200 raw sweep with `col` of every `kind` row replaced (one row's blank hid behind its shape's
    other repetitions)."""
    text = gzip.decompress((PROFILES_DIR / "h200.raw.csv.gz").read_bytes()).decode().splitlines()
    header = text[0].split(",")
    i, k = header.index(col), header.index("kernel")
    for n in range(1, len(text)):
        cells = text[n].split(",")
        if cells[k] == kind:
            cells[i] = value
            text[n] = ",".join(cells)
    p = tmp_path / "raw.csv"
    p.write_text("\n".join(text) + "\n")
    return p


@pytest.mark.parametrize("kind, col, value, fragments", [
    ("gemm", "bytes", "", ["without bytes"]),  # NaN features: 'array must not contain infs or NaNs' from the fit
    ("moe", "flops", "nan", ["without flops"]),
    ("gemm", "rep", "9" * 400, ["column rep", "not a number"]),  # pandas' to_numeric: an OverflowError traceback
    ("moe", "rep", "2.5", ["column rep", "whole number"]),
])
def test_raw_sweep_rows_without_features_or_a_repetition_count(tmp_path, kind, col, value, fragments):
    out = tmp_path / "cal"
    assert_one_error(invoke("calibrate", "--from-raw", _raw_kind(tmp_path, kind, col, value), "--out", out),
                     *fragments)
    assert not out.exists()


def test_raw_sweep_counts_written_as_decimals_refit(tmp_path):  # the control: '2.0' KV heads is two
    out = tmp_path / "cal"
    r = invoke("calibrate", "--from-raw", _raw(tmp_path, "kv_heads", "2.0"), "--out", out)
    assert r.exit_code == 0, r.output
    assert (out / "profile.json").is_file()


# --- acceptance histograms that give no profile ---------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["[0, 0, 0]", "[1e300, 1e300]", "[7]"])
def test_a_histogram_that_gives_no_profile_names_its_file(tmp_path, bad):
    """The error said 'an acceptance histogram needs >= 2 bins ...': of two files, which one was not said."""
    good, wrong = tmp_path / "native.json", tmp_path / "window.json"
    good.write_text("[5, 3, 1]")
    wrong.write_text(bad)
    assert_one_error(invoke("accept", good, wrong, "--compare"), "window.json")
    assert_one_error(invoke("report", "--model", "q35", "--histogram", f"native={wrong}", "--out",
                            tmp_path / "r.html"), "window.json")
    assert not (tmp_path / "r.html").exists()


def test_a_histogram_of_two_files_compares(tmp_path):  # the control: both give a profile
    native, window = tmp_path / "native.json", tmp_path / "window.json"
    native.write_text("[5, 3, 1]")
    window.write_text("[4, 4, 1]")
    r = invoke("accept", native, window, "--compare", "--json")
    assert r.exit_code == 0, r.output
    first = json.loads(r.stdout)["comparison"][0]
    assert (first["native"], first["window"]) == pytest.approx((4 / 9, 5 / 9))  # alpha_1 = 1 - H[0] / sum H


def test_a_histogram_read_from_standard_input_names_it(tmp_path):
    """A pipe is copied into a temporary 'stream.json': the profile's source said 'histogram stream.json' and a bad
    histogram's error named that file, which the user never gave."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "wmtp.cli.main", "accept", "-"]
    r = subprocess.run(cmd + ["--json"], input="[5, 3, 1]", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"][0]["source"] == "histogram /dev/stdin"
    r = subprocess.run(cmd, input="[0, 0]", capture_output=True, text=True, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: histogram /dev/stdin"), r.stderr
    assert "stream" not in r.stderr, r.stderr


# --- --resume over a run whose metadata is no object ----------------------------------------------------------------

@pytest.mark.parametrize("args, stem", [(["calibrate"], "raw"), (["measure", "kernels"], "kernels")])
@pytest.mark.parametrize("meta", ["[1, 2]", '"wmtp calibrate --quick"'])
def test_resume_over_metadata_that_is_no_object(tmp_path, args, stem, meta):
    """The interrupted run's settings are compared with this run's through its sidecar: one that is no object
    skipped the comparison, and a run of other settings resumed (here: the GPU was looked for next)."""
    (tmp_path / f"{stem}.csv").write_text("kernel,time_ms\ncopy,1.0\n")
    (tmp_path / f"{stem}.steps-done").write_text("ceilings\n")
    (tmp_path / f"{stem}.meta.json").write_text(meta)
    assert_one_error(invoke(*args, "--resume", "--out", tmp_path), "--resume", f"{stem}.meta.json", "object")


def test_a_histogram_redirected_into_standard_input_is_read_as_through_a_pipe(tmp_path):
    """`wmtp accept - < h.json`: /dev/stdin is then the file itself, not a pipe, and its name has no .json, so the
    histogram was read as a log: 'no acceptance length in this file', where `cat h.json | wmtp accept -` read it."""
    import subprocess
    import sys

    h = tmp_path / "h.json"
    h.write_text("[5, 3, 1]")
    cmd = [sys.executable, "-m", "wmtp.cli.main", "accept", "-", "--json"]
    with open(h) as f:
        r = subprocess.run(cmd, stdin=f, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # AL = sum (n + 1) H[n] / sum H[n] = (1 * 5 + 2 * 3 + 3 * 1) / 9
    assert json.loads(r.stdout)["files"][0]["accept_length"] == pytest.approx(14 / 9)
    piped = subprocess.run(cmd, input=h.read_text(), capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and json.loads(piped.stdout) == json.loads(r.stdout), piped.stderr


# --- the validation tables `wmtp report` reads ----------------------------------------------------------------------
VALIDATION = Path(__file__).resolve().parents[1] / "calibrate" / "validation"


def _validation_cell(html: str) -> str:
    return html.split("validation data</td><td>", 1)[1].split("<", 1)[0]


@pytest.mark.parametrize("args, table", [
    ([], "h200.csv"),  # the shipped H200 profile
    (["--profile", PROFILES_DIR / "h200.json"], "h200.csv"),  # the same, named
    (["--hw", "b200", "--model", "q122", "--framework", "sglang-b200-paper"], "h200-flashinfer.csv"),  # its kernels
])
def test_report_shows_the_shipped_profiles_validation(tmp_path, args, table):
    """The report looked for wmtp_model/data/validation/h200.csv, which is not where the tables ship (calibrate/
    validation) since the profiles moved: 'validation data: none' beside the shipped profile, whose table ships."""
    out = tmp_path / "r.html"
    model = [] if "--model" in args else ["--model", "q35"]
    r = invoke("report", *model, *args, "--out", out)
    assert r.exit_code == 0, r.output
    assert Path(_validation_cell(out.read_text())) == VALIDATION / table


def test_report_of_a_profile_without_a_table_shows_none(tmp_path):  # the control: a copy elsewhere has none beside
    shutil.copy(PROFILES_DIR / "h200.json", tmp_path / "profile.json")
    out = tmp_path / "r.html"
    assert invoke("report", "--model", "q35", "--profile", tmp_path / "profile.json", "--out", out).exit_code == 0
    assert _validation_cell(out.read_text()) == "none"


def test_report_out_over_the_validation_table_it_reads(tmp_path):
    """validation.csv beside --profile is read by the report: --out naming it replaced the table with the HTML."""
    shutil.copy(PROFILES_DIR / "h200.json", tmp_path / "profile.json")
    table = tmp_path / "validation.csv"
    shutil.copy(VALIDATION / "h200.csv", table)
    before = table.read_bytes()
    r = invoke("report", "--model", "q35", "--profile", tmp_path / "profile.json", "--out", table)
    assert_one_error(r, "validation.csv", "validation table")
    assert table.read_bytes() == before


@pytest.mark.parametrize("args, fragment", [
    (["report", "--model", "q35", "--out"], "is also the validation table input"),  # the table this report reads
    (["sweep", "ctx", "--model", "q35", "--csv"], "ships and reads by default"),
])
def test_an_output_over_a_shipped_validation_table_is_refused(tmp_path, args, fragment):
    """Through a link to it, as a user's folder may hold one; the shipped table is put back should the check fail
    (the write follows the link)."""
    shipped = VALIDATION / "h200.csv"
    link = tmp_path / "table.csv"
    link.symlink_to(shipped)
    before = shipped.read_bytes()
    try:
        assert_one_error(invoke(*args, link), fragment)
    finally:
        after = shipped.read_bytes()
        shipped.write_bytes(before)
    assert after == before


# --- simulate --trace shorter than the decode -----------------------------------------------------------------------

def test_a_trace_shorter_than_the_decode_says_it_was_replayed(tmp_path):
    """4 recorded steps decoded 4096 tokens as 911 'steps' with a 95 % CI of +-0.3 %, the 4 steps replayed 228 times,
    unsaid. At d = 7 the counts 3, 4, 2, 5 emit 4 + 5 + 3 + 6 = 18 tokens a cycle: 227 cycles give 4086 tokens in 908
    steps, three more steps (4, 5, 3 tokens) reach 4098 in 911."""
    trace = tmp_path / "t.txt"
    trace.write_text("3\n4\n2\n5\n")
    r = invoke("simulate", "--model", "q35", "--trace", trace, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (out["steps"], out["tokens"]) == (911, 4098)
    assert any("replayed" in w and "4 steps" in w for w in out["warnings"]), out["warnings"]


def test_a_trace_that_covers_the_decode_is_not_replayed(tmp_path):  # the control: 10 tokens from 4 steps of 10
    trace = tmp_path / "t.txt"
    trace.write_text("1\n2\n0\n3\n")
    r = invoke("simulate", "--model", "q35", "--trace", trace, "--tokens", "10", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["steps"] == 4 and not any("replayed" in w for w in out["warnings"])


# --- simulate --trace deeper than --depth -------------------------------------------------------------------------

def test_a_trace_deeper_than_the_depth_says_its_counts_were_capped(tmp_path):
    """Counts 7, 7, 2, 3 at --depth 4 (a step drafts 3): the two 7s were capped at 3, unsaid. Capped, the cycle emits
    4 + 4 + 3 + 4 = 15 tokens in 4 steps, so 15 tokens take exactly 4 steps (7s counted in full would have been
    8 + 8 + 3 + 4 = 23)."""
    trace = tmp_path / "t.txt"
    trace.write_text("7\n7\n2\n3\n")
    r = invoke("simulate", "--model", "q35", "--depth", "4", "--trace", trace, "--tokens", "15", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (out["steps"], out["tokens"]) == (4, 15)
    capped = [w for w in out["warnings"] if "capped" in w]
    assert len(capped) == 1 and "2 of the decode's 4 steps" in capped[0] and "d - 1 = 3" in capped[0], out["warnings"]
    assert out["capped_steps"] == 2
    r = invoke("simulate", "--model", "q35", "--depth", "8", "--trace", trace, "--tokens", "15", "--json")
    assert r.exit_code == 0, r.output  # the control: at d = 8 a step drafts 7, nothing is capped
    assert not any("capped" in w for w in json.loads(r.stdout)["warnings"])


def test_an_adaptive_decode_counts_the_steps_it_capped(tmp_path):
    """Adaptive depth starts at the middle of the depth grid and moves at most one step per 16 steps, so a trace of
    nine 9s (d - 1 = 9 only at the grid's deepest, 10) is capped at every one of its 9 steps at the start depth; the
    count comes from the decode itself, not from comparing the trace with the deepest depth (which saw none over 9)."""
    from wmtp import defaults

    start = defaults.DEPTH_GRID[len(defaults.DEPTH_GRID) // 2]
    assert start - 1 < 9 <= max(defaults.DEPTH_GRID) - 1
    trace = tmp_path / "t.txt"
    trace.write_text("9\n" * 9)
    r = invoke("simulate", "--model", "q35", "--depth", "adaptive", "--trace", trace, "--tokens", 9 * start, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (out["steps"], out["capped_steps"]) == (9, 9)
    assert any("9 of the decode's 9 steps" in w and "depth in use" in w for w in out["warnings"]), out["warnings"]
