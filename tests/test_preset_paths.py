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
