"""wmtp report: a self-contained HTML file with every figure, drawn in a real headless browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

pytest.importorskip("plotly")

from wmtp.cli.main import app  # noqa: E402
from wmtp.reports.html import FIGURES, is_self_contained  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "report.html"
    hist = out.parent / "window.json"
    hist.write_text("[120, 80, 60, 50, 40, 30, 220]")
    r = CliRunner().invoke(app, ["report", "--model", "q35", "--ctx", "1M", "--out", str(out),
                                 "--histogram", f"window={hist}"])
    assert r.exit_code == 0, r.output
    return out


def test_report_is_self_contained_and_complete(report_file):
    text = report_file.read_text()
    assert is_self_contained(text)
    assert not re.search(r"<script[^>]+src=", text) and not re.search(r"<link[^>]+href=", text)
    for fig in FIGURES:
        assert f'id="plot-{fig}"' in text, fig
    for word in ("Provenance", "measured profile h200", "TPOT (ms)", "per-GPU throughput (tokens",
                 "histogram window.json", "GiB per request"):
        assert word in text, word


def test_self_contained_check_catches_external_sources():
    assert not is_self_contained('<script src="https://cdn.plot.ly/plotly.js"></script>')
    assert not is_self_contained('<link rel="stylesheet" href="//fonts.example/x.css">')
    assert is_self_contained("<script>var u = 'https://example.org';</script>")


def test_report_errors(tmp_path):
    r = CliRunner().invoke(app, ["report", "--model", "q35", "--histogram", "tree=x.json", "--out", str(tmp_path / "a")])
    assert r.exit_code == 1 and r.output.startswith("error: ") and "--histogram" in r.output
    bad = tmp_path / "h.json"
    bad.write_text("{oops")
    r = CliRunner().invoke(app, ["report", "--model", "q35", "--histogram", f"native={bad}", "--out", str(tmp_path / "b")])
    assert r.exit_code == 1 and r.output.startswith("error: ")
    assert not (tmp_path / "b").exists()  # nothing half-written


def test_report_takes_logs(tmp_path):
    from pathlib import Path

    log = Path(__file__).parent / "data" / "sglang_decode.log"
    r = CliRunner().invoke(app, ["report", "--model", "q35", "--logs", f"native={log}", "--out", str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    assert "SGLang log mean accept len" in (tmp_path / "r.html").read_text()


def test_report_renders_in_headless_chromium(report_file, tmp_path):
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium for the browser test (.ci/run does)")
        pytest.skip("no chromium on this machine (.ci/run installs it)")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
           "--virtual-time-budget=15000", "--dump-dom", report_file.as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    drawn = re.search(r'data-plots-drawn="(\d+)"', dom)
    assert drawn, "the page's load handler did not run"
    assert int(drawn.group(1)) == len(FIGURES)
    assert re.search(r'data-js-errors="0"', dom)
    console_errors = [line for line in res.stderr.splitlines() if "CONSOLE" in line and "rror" in line]
    assert not console_errors, console_errors


def test_report_window_curve_takes_the_acceptance_predict_takes(tmp_path):
    """An explicit --accept-length replaces the task's AL(W) dose-response preset in predict and `sweep window`
    (the AL(W) model of acceptance.choose_acceptance); the report's window curve must follow the same rule: a cost-only curve, and the
    same TPOT-optimal window `sweep window` names for the same arguments."""
    args = ["--model", "q35", "--ctx", "1M", "--accept-length", "4.2:4.4"]
    out = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["report", *args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    s = CliRunner().invoke(app, ["sweep", "window", *args, "--json"])
    assert s.exit_code == 0, s.output
    import json

    be = json.loads(s.output)["break_even_window"]
    assert be["acceptance"] == "held fixed: cost-only curve"
    text = out.read_text()
    assert f"TPOT-optimal window W={be['optimal_window']} " in text
    assert "held fixed: cost-only curve" in text
    # without it, the task's preset (q35 has a dose-response) drives both
    out2 = tmp_path / "r2.html"
    r = CliRunner().invoke(app, ["report", "--model", "q35", "--ctx", "1M", "--out", str(out2)])
    assert r.exit_code == 0, r.output
    assert "AL(W) model" in out2.read_text()
