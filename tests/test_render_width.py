"""Tables read well at 80 and 120 columns: nothing runs past the width, nothing is cut with '…', the
keys a user types appear whole, numbers appear whole, and footers are sentences, not Python dicts."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from wmtp.cli.main import app
from wmtp.hardware import HARDWARE
from wmtp.models import MODELS

WIDTHS = (80, 120)


def run(width: int, *args: str):
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    return r.output


def assert_fits(text: str, width: int) -> None:
    for line in text.splitlines():
        assert len(line) <= width, f"{len(line)} > {width}: {line!r}"
    assert "…" not in text, text
    assert not re.search(r"\{'\w+': ", text), text  # no raw dict repr


@pytest.mark.parametrize("width", WIDTHS)
def test_models_keys_whole(width):
    out = run(width, "models")
    assert_fits(out, width)
    first_cells = [line.split()[0] for line in out.splitlines() if line.strip()]
    for key in MODELS:
        assert key in first_cells, (key, out)


@pytest.mark.parametrize("width", WIDTHS)
def test_hardware_notes_readable(width):
    out = run(width, "hardware")
    assert_fits(out, width)
    first_cells = [line.split()[0] for line in out.splitlines() if line.strip()]
    for key in HARDWARE:
        assert key in first_cells
    table = out.split("fp4 '-'")[0]
    assert len(table.splitlines()) <= 4 + 3 * len(HARDWARE)  # not 20 lines per GPU
    for h in HARDWARE.values():  # every source note in full, once
        assert " ".join(h.source.split()) in " ".join(out.split())


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("what", ["ctx", "depth", "window", "batch"])
def test_sweep_tables_show_whole_numbers(width, what):
    args = ["sweep", what, "--model", "q35"] + (["--tp", "2"] if what == "batch" else [])
    out = run(width, *args)
    assert_fits(out, width)
    rows = json.loads(run(width, *args, "--json"))["rows"]
    flat = " ".join(out.split())
    for r in rows[:5]:
        for key in ("native_tpot_ms", "window_tpot_ms", "tpot_ms"):
            if key in r:
                assert f"{r[key]:.3f}" in flat, (key, r[key])
    title = " ".join(out.split("────")[0].split())  # the title may wrap at 80 columns
    if what == "ctx":
        assert "ctx 1M" not in title and "1048576" not in title
    if what == "batch":
        assert "TP 2" in title


@pytest.mark.parametrize("width", WIDTHS)
def test_sweep_footers_are_sentences(width):
    out = run(width, "sweep", "window", "--model", "q35")
    flat = " ".join(out.split())
    assert "TPOT-optimal window W=4032" in flat and "beats native" in flat
    assert "{" not in out and "[" not in out.split("acceptance:")[0].split("beats")[-1]
    out = run(width, "sweep", "batch", "--model", "q35")
    assert "Pareto-optimal" in out and "['" not in out


@pytest.mark.parametrize("width", WIDTHS)
def test_predict_fits(width):
    assert_fits(run(width, "predict", "--model", "q122", "--ctx", "1M"), width)
