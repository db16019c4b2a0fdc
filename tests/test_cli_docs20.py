"""The docs against the CLI (session docs20): README's example output is what `wmtp predict` prints, its numbers are
the shipped validation tables' own, and every printed number says where it came from (the tags the README lists),
in each command's output; plus the defects that check found: a generic acceptance tagged 'preset', a window sweep
naming the --window preset as the source of AL(W) rows, sweeps and simulations at a window that covers the context
with no warning (predict gives one), one error line naming --batch when only --sink was wrong.

Expected values come from the README's own text, the shipped validation CSV recomputed here, the rows' JSON sources
read by their words ('extrapolated', '--al-window'), and error prefixes written out by hand."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wmtp.cli.main import app
from cli_checks import assert_one_error  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def run(*args, columns: int = 100):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)})


def ok_json(*args) -> dict:
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def readme_example() -> str:
    """The fenced block after README's 'Example (`wmtp predict --model q122 --ctx 1M`...' line."""
    head = README.index("Example (`wmtp predict --model q122 --ctx 1M`")
    start = README.index("```\n", head) + 4
    return README[start:README.index("```\n", start)]


# --- README text against the commands ------------------------------------------------------------------------------

def test_readme_example_is_what_predict_prints_at_100_columns():
    r = run("predict", "--model", "q122", "--ctx", "1M")
    assert r.exit_code == 0, r.output
    assert r.stdout == readme_example()


def test_readme_tp2_validation_numbers_are_the_tables():
    """README: 'at most 3.1 % error speculative, 6.7-8.7 % dense', recomputed from calibrate/validation/h200-tp2.csv."""
    rows = list(csv.DictReader((ROOT / "calibrate/validation/h200-tp2.csv").open()))
    err = [(r["method"], abs(float(r["predicted_ms"]) / float(r["measured_ms"]) - 1) * 100) for r in rows]
    spec = max(e for m, e in err if m != "dense")
    dense = sorted(e for m, e in err if m == "dense")
    text = f"at most {spec:.1f} % error speculative, {dense[0]:.1f}-{dense[-1]:.1f} % dense"
    assert text in README


@pytest.mark.parametrize("ctx, tokens", [("1G", 1 << 30), ("16G", 1 << 34)])
def test_readme_ctx_suffix_g(ctx, tokens):
    assert "`1G` (binary: K = 1024, M = 1,048,576, G = 1024 M; at most 16G)" in README
    assert ok_json("predict", "--model", "q35", "--ctx", ctx)["ctx"] == tokens


def test_ctx_past_16g_is_one_error():
    assert_one_error(run("predict", "--model", "q35", "--ctx", "17G"), "--ctx", "16G")


def test_calibrate_quick_help_agrees_with_readme():
    """README: 'wmtp calibrate --out cal/  # sweep (about 2 minutes on an H200; --quick: under 1)'; the help said
    --quick took about 2 minutes (measured on the lent H200: --quick 56 s, the full sweep 85 s with warm caches)."""
    assert "(about 2 minutes on an H200; --quick: under 1)" in README
    r = run("calibrate", "--help", columns=200)
    assert r.exit_code == 0
    assert "Corners of the grid only (under a minute on an H200; the full sweep about 2)" in r.stdout


def test_sweep_threshold_help_names_its_unit():
    r = run("sweep", "--help", columns=250)
    assert "at least this fraction longer than the window's (0.05 = 5 %)" in " ".join(r.stdout.split())


# --- tags --------------------------------------------------------------------------------------------------------

def test_generic_acceptance_is_tagged_generic_not_preset():
    """dsv3 has no paper preset: its AL is 'generic (mean of paper presets)', which the tag read as 'preset'."""
    doc = ok_json("predict", "--model", "dsv3")
    assert doc["methods"]["native"]["accept_source"].startswith("generic")
    line = next(ln for ln in run("predict", "--model", "dsv3").stdout.splitlines() if "acceptance length AL" in ln)
    assert line.count("generic") == 2 and "preset" not in line


def test_window_seats_line_is_tagged():
    own = run("predict", "--model", "q122").stdout
    assert re.search(r"window seats \+\d+ request\(s\) vs native model", " ".join(own.split()))
    eng = run("predict", "--model", "q122", "--hw", "b200", "--framework", "sglang-b200-paper", columns=200).stdout
    assert re.search(r"vs native \(\+\d+ with each at its largest mem_fraction_static\) engine", eng)


def _table_rows(text: str, first: str) -> dict[str, list[str]]:
    return {ln.split()[0]: ln.split() for ln in text.splitlines() if ln.split() and ln.split()[0] in first}


def test_depth_sweep_tags_each_rows_acceptance():
    rows = ok_json("sweep", "depth", "--model", "q35")["rows"]
    out = run("sweep", "depth", "--model", "q35").stdout
    assert "AL      cost" in out and "source  source" in out
    table = _table_rows(out, [str(r["depth"]) for r in rows])
    for r in rows:
        srcs = (r["native_accept_source"], r["window_accept_source"])
        expected = "extrap" if all("extrapolated" in s for s in srcs) else "preset"
        assert all(("extrapolated" in s) == (expected == "extrap") for s in srcs)
        assert table[str(r["depth"])][-2] == expected, (r["depth"], table[str(r["depth"])])
    assert table["7"][-2] == "preset" and table["2"][-2] == "extrap"


def test_window_sweep_names_the_al_window_points_as_its_acceptance():
    args = ("sweep", "window", "--model", "q122", "--al-window", "1K:3.0,4032:3.5")
    doc = ok_json(*args)
    assert doc["acceptance"]["window"].startswith("--al-window points")
    by_w = {r["window"]: r for r in doc["rows"]}
    assert by_w[1024]["accept_length"] == pytest.approx(3.0) and by_w[4032]["accept_length"] == pytest.approx(3.5)
    table = _table_rows(run(*args).stdout, ["256", "1K", "4032", "8K"])
    assert table["256"][-2] == "extrap"  # below the smallest point
    assert table["1K"][-2] == "flag" and table["4032"][-2] == "flag"  # the user's own points
    assert table["8K"][-2] == "interp"  # between the last point and the native AL at W = S


def test_window_sweep_without_al_model_says_held_fixed():
    doc = ok_json("sweep", "window", "--model", "q122")
    assert doc["acceptance"]["window"].startswith("held fixed (no AL(W) model)")
    assert all(r["accept_source"].startswith("held fixed") for r in doc["rows"])


def test_simulate_says_where_its_acceptance_comes_from():
    assert ok_json("simulate", "--model", "q35", "--phases", "0.9:100")["acceptance_source"].startswith("--phases")
    default = ok_json("simulate", "--model", "q35")["acceptance_source"]
    assert default.startswith("preset q35/")
    assert f"acceptance: {default}" in run("simulate", "--model", "q35", columns=400).stdout


# --- a window that covers the context ------------------------------------------------------------------------------

COVERS = "covers the whole context (4096 tokens)"


@pytest.mark.parametrize("args", [
    ("predict", "--model", "q35"),
    ("sweep", "depth", "--model", "q35"),
    ("sweep", "batch", "--model", "q35"),
    ("simulate", "--model", "q35", "--tokens", "200"),
])
def test_window_covering_the_context_is_warned(args):
    r = run(*args, "--ctx", "4K", "--window", "8K")
    assert r.exit_code == 0, r.output
    assert COVERS in r.output


def test_no_coverage_warning_where_the_window_is_not_priced_as_given():
    """A ctx sweep runs its own context grid and native simulation drafts the whole context: nothing to say."""
    r = run("sweep", "ctx", "--model", "q35", "--window", "8K")
    assert r.exit_code == 0 and "covers the whole context" not in r.output
    r = run("simulate", "--model", "q35", "--method", "native", "--ctx", "4K", "--tokens", "200")
    assert r.exit_code == 0 and "covers the whole context" not in r.output


# --- errors that name the option that was wrong ----------------------------------------------------------------------

SINK = ("--sink", "-1", "error: --sink must be >= 0, got -1")
BATCH = ("--batch", "0", "error: --batch must be >= 1, got 0")


@pytest.mark.parametrize("cmd, opt, value, expected", [  # simulate decodes one request: it has no --batch
    (cmd, *case) for cmd in (("sweep", "depth"), ("simulate",), ("report", "--out", "r.html")) for case in (SINK, BATCH)
    if not (cmd == ("simulate",) and case is BATCH)])
def test_batch_and_sink_errors_name_their_option(tmp_path, monkeypatch, cmd, opt, value, expected):
    monkeypatch.chdir(tmp_path)
    line = assert_one_error(run(*cmd, "--model", "q35", opt, value))
    assert line == expected
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("extra, expected", [
    (["--profile", "x.json"], "error: --profile works only with --fit"),
    (["--profile", "x.json", "--out", "y.json"], "error: --profile and --out work only with --fit"),
])
def test_engines_stray_options_read_as_english(extra, expected):
    assert assert_one_error(run("engines", *extra)).startswith(expected)


@pytest.mark.parametrize("args", [
    ("predict", "--model", "q35", "--framework", "sglang-b200-paper", "--hw", "b200"),
    ("sweep", "window", "--model", "q122", "--al-window", "1K:3.9"),
    ("sweep", "depth", "--model", "q35", "--ctx", "4K", "--window", "8K"),
    ("simulate", "--model", "q35", "--depth", "adaptive", "--tokens", "300"),
])
def test_json_of_the_changed_outputs_parses(args):
    doc = ok_json(*args)
    assert doc["model"] in ("q35", "q122")
