"""Hostile inputs of the thirteenth adversarial sweep (after test_hostile_sweep12.py): `python -m
wmtp.calibrate.engine_fit` (the entry ARCHITECTURE names for new presets) with an --out naming its own points CSV
or structure file (the points were replaced by the preset JSON: the one copy of the published figures lost) or a
--name that is a path (a ValueError traceback).
Each bad input ends in exit code 1 and exactly one `error:` line (no traceback) and writes nothing; each has a legal
control beside it. Expected values are worked out by hand in the comments or are properties, not taken from the code
under test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from wmtp.engine import engines_dir


# --- python -m wmtp.calibrate.engine_fit ----------------------------------------------------------------------------

def _engine_inputs(tmp_path: Path) -> Path:
    """A copy of the shipped points and structure (NAME.points.csv beside NAME.structure.json)."""
    for suffix in (".points.csv", ".structure.json"):
        shutil.copy(engines_dir() / f"sglang-b200-paper{suffix}", tmp_path / f"e{suffix}")
    return tmp_path / "e.points.csv"


def _one_error(capsys) -> str:
    captured = capsys.readouterr()
    lines = [ln for ln in (captured.out + captured.err).splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("target", ["e.points.csv", "e.structure.json"])
def test_engine_fit_module_out_over_its_own_input(tmp_path, capsys, target):
    """`wmtp engines --fit` refused these; the module's own entry wrote the preset over them."""
    from wmtp.calibrate.engine_fit import main

    points = _engine_inputs(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main([str(points), "--out", str(tmp_path / target)]) == 1
    assert "destroy" in _one_error(capsys)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written, nothing replaced


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "x\ny"])
def test_engine_fit_module_name_that_is_no_file_name(tmp_path, capsys, name):
    from wmtp.calibrate.engine_fit import main

    points = _engine_inputs(tmp_path)
    assert main([str(points), "--name", name]) == 1
    assert "--name" in _one_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.points.csv", "e.structure.json"]
    assert not (tmp_path.parent / "x.json").exists()


def test_engine_fit_module_writes_beside_its_points(tmp_path, capsys):
    """The control: a plain --name and a new --out fit and write NAME.json / NAME.md, the inputs untouched."""
    from wmtp.calibrate.engine_fit import main

    points = _engine_inputs(tmp_path)
    before = points.read_bytes()
    assert main([str(points), "--name", "mine", "--out", str(tmp_path / "out.json")]) == 0, capsys.readouterr()
    assert (tmp_path / "out.json").is_file() and (tmp_path / "out.md").is_file()
    assert points.read_bytes() == before
