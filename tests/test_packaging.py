"""Packaging: the predict path stays light, and a built wheel ships the data the code reads, under `wmtp/`
only (nothing with a generic top-level name such as `cli` or `measure` lands in site-packages)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The repository folders the wheel maps under `wmtp` (pyproject [tool.setuptools] package-dir).
FOLDERS = ("wmtp_model", "measure", "calibrate", "cli", "reports")
REQUIRED = ("wmtp/data/profiles/h200.json", "wmtp/data/engines/sglang-b200-paper.json",
            "wmtp/data/engines/sglang-b200-paper.points.csv")


def test_predict_path_imports_no_heavy_modules():
    code = (
        "import sys, wmtp.cli.main, wmtp.predict, wmtp.cli.render, wmtp.hf_config\n"
        "from typer.testing import CliRunner\n"
        "r = CliRunner().invoke(wmtp.cli.main.app, ['predict', '--model', 'q122', '--ctx', '1M', '--json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "bad = sorted(m for m in ('torch', 'triton', 'plotly', 'pandas', 'scipy') if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"predict imported {out.stdout.strip()}"


def _copy_source(dst: Path) -> Path:
    """The project's sources without build outputs, so that building never writes into the checkout."""
    skip = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                  ".hypothesis", ".venv*", "out", "tests")
    src = dst / "src"
    shutil.copytree(ROOT, src, ignore=skip)
    return src


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    try:
        import setuptools  # noqa: F401  (built in the venv, offline: no build isolation)
    except ImportError:
        pytest.skip("setuptools is not installed in this environment")
    tmp = tmp_path_factory.mktemp("wheel")
    src = _copy_source(tmp)
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(src),
                        "-w", str(tmp / "dist")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = (tmp / "dist").glob("wmtp-*.whl")
    return whl


def test_wheel_ships_the_data_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [n for n in REQUIRED if n not in names]
    assert not missing, f"not in the wheel: {missing}"
    # Every validation table and every shipped profile in the repository is shipped too.
    expected = [f"wmtp/calibrate/validation/{p.name}" for p in (ROOT / "calibrate" / "validation").glob("*.csv")]
    expected += [f"wmtp/data/profiles/{p.name}" for p in (ROOT / "wmtp_model" / "data" / "profiles").glob("*.json")]
    assert any(n.startswith("wmtp/calibrate/validation/") for n in expected)
    assert not [n for n in expected if n not in names]


def test_wheel_has_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith((".dist-info", ".data"))}
    assert tops == {"wmtp"}, f"top-level entries besides wmtp: {sorted(tops - {'wmtp'})}"
    for sub in ("measure", "calibrate", "cli", "reports"):
        assert f"wmtp/{sub}/__init__.py" in names


def test_installed_wheel_finds_its_data(wheel, tmp_path):
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                        str(target), str(wheel)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    code = (
        "import wmtp, wmtp.calibrate\n"
        "from pathlib import Path\n"
        "from wmtp.engine import engines_dir, load_preset\n"
        "from wmtp.profile import shipped_profile_path\n"
        "print(Path(wmtp.__file__).resolve())\n"
        "assert shipped_profile_path('h200') is not None\n"
        "assert (engines_dir() / 'sglang-b200-paper.points.csv').is_file()\n"
        "load_preset('sglang-b200-paper')\n"
        "assert list((Path(wmtp.calibrate.__file__).parent / 'validation').glob('*.csv'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(target.resolve()), "imported the checkout, not the wheel"
    for folder in FOLDERS:
        assert not (target / folder).exists(), f"{folder}/ installed top-level"


def test_wheel_ships_the_paper_figures_backends_and_the_flashinfer_profile(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "wmtp/reports/paper_figures.csv" in names
    assert "wmtp/measure/backends/flashinfer.py" in names
    assert "wmtp/data/profiles/h200-flashinfer.json" in names
