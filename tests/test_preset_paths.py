"""Shipped data names no path of the machine it was made on."""

from pathlib import Path


def test_the_shipped_engine_preset_names_no_machine_path():
    """The preset (and its .md) are shipped: the kernel profile it was fitted over is named from the project root.
    A refit on this machine writes the same (`engine_fit._portable`)."""
    from wmtp.calibrate.engine_fit import _portable
    from wmtp.profile import PROFILES_DIR

    root = Path(__file__).resolve().parents[1] / "wmtp_model" / "data" / "engines"
    for f in ("sglang-b200-paper.json", "sglang-b200-paper.md"):
        text = (root / f).read_text()
        assert "(wmtp_model/data/profiles/h200-flashinfer.json)" in text and "/work/" not in text
    assert _portable(f"measured profile h200 ({PROFILES_DIR / 'h200.json'})") == \
        "measured profile h200 (wmtp_model/data/profiles/h200.json)"


def test_a_refit_writes_no_machine_path(tmp_path):
    """The refit itself (the structure-file fit the shipped preset comes from, not only `_portable`): its preset
    and .md name the kernel profile from the project root, never this checkout's absolute folder."""
    from wmtp.calibrate import engine_fit
    from wmtp.profile import PROFILES_DIR

    points = Path(__file__).resolve().parents[1] / "wmtp_model" / "data" / "engines" / "sglang-b200-paper.points.csv"
    out = tmp_path / "preset.json"
    assert engine_fit.main([str(points), "--hw", "b200", "--out", str(out)]) == 0
    for f in (out, out.with_suffix(".md")):
        text = f.read_text()
        assert str(PROFILES_DIR.resolve()) not in text and str(PROFILES_DIR) not in text, f
        assert "(wmtp_model/data/profiles/h200-flashinfer.json)" in text, f
