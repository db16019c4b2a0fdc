"""Re-measuring part of the calibration sweep (`wmtp calibrate --parts ... --base-raw ...`): what replaces what."""

from __future__ import annotations

import pandas as pd
import pytest

from wmtp.calibrate.sweep_run import merge_raw, parse_parts, run_calibrate
from wmtp.errors import WmtpError
from wmtp.measure.harness import COLUMNS


def _rows(kinds_times: list[tuple[str, float]]) -> pd.DataFrame:
    rows = []
    for kernel, t in kinds_times:
        row = {c: "" for c in COLUMNS}
        row.update(kernel=kernel, impl="wmtp", model="q35", time_ms=t, bytes=1.0, flops=0.0, status="ok")
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def test_new_rows_replace_the_remeasured_kinds_and_the_ceilings(tmp_path):
    base = _rows([("decode_attn", 1.0), ("verify_attn", 1.0), ("gemm", 2.0), ("moe", 3.0), ("draft_loop", 4.0),
                  ("copy", 5.0), ("gemm_peak", 6.0)])
    new = _rows([("decode_attn", 0.5), ("decode_attn", 0.6), ("draft_loop", 0.7), ("copy", 0.8)])
    base.to_csv(tmp_path / "base.csv", index=False)
    new.to_csv(tmp_path / "new.csv", index=False)
    out, info = merge_raw(tmp_path / "new.csv", tmp_path / "base.csv", ("attention", "loop"), tmp_path / "m.csv")
    merged = pd.read_csv(out)
    # kept from the base: the components only (gemm 2.0, moe 3.0); everything else is the new run's
    assert sorted(zip(merged["kernel"], merged["time_ms"])) == sorted(
        [("gemm", 2.0), ("moe", 3.0), ("decode_attn", 0.5), ("decode_attn", 0.6), ("draft_loop", 0.7), ("copy", 0.8)])
    assert info["base_rows_kept"] == 2 and info["new_rows"] == 4
    assert "verify_attn" in info["replaced_kinds"] and "gemm" not in info["replaced_kinds"]


def test_parts_are_checked_before_any_measurement(tmp_path):
    assert parse_parts(None) is None and parse_parts("attention, loop") == ("attention", "loop")
    with pytest.raises(WmtpError, match="unknown sweep part"):
        parse_parts("attention,kernels")
    with pytest.raises(WmtpError, match="--base-raw"):
        run_calibrate([], tmp_path, parts=("attention",))
    with pytest.raises(WmtpError, match="no base raw"):
        run_calibrate([], tmp_path, parts=("attention",), base_raw=tmp_path / "missing.csv.gz")


def test_a_corrupt_base_is_refused_before_any_measurement(tmp_path):
    bad = tmp_path / "base.csv.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00 this is not a gzip stream")
    with pytest.raises(WmtpError, match="not a readable sweep CSV"):
        run_calibrate([], tmp_path / "out", parts=("attention",), base_raw=bad)
    assert not (tmp_path / "out").exists()


def test_the_sidecar_of_a_gzipped_raw(tmp_path):
    """`--from-raw h200.raw.csv.gz` read no provenance (it looked for h200.raw.csv.meta.json): the shipped raw was
    refitted as wmtp's pre-ws kernels (and the FlashInfer raw as wmtp's) on an assumed GPU."""
    import json

    from wmtp.calibrate.fitting import raw_sidecar, read_sidecar
    from wmtp.profile import PROFILES_DIR

    assert raw_sidecar(tmp_path / "h200.raw.csv.gz") == tmp_path / "h200.raw.meta.json"
    assert raw_sidecar(tmp_path / "raw.csv") == tmp_path / "raw.meta.json"
    assert raw_sidecar(tmp_path / "raw.merged.csv") == tmp_path / "raw.merged.meta.json"
    (tmp_path / "x.csv.meta.json").write_text("{}")  # the older name, where only it exists
    assert raw_sidecar(tmp_path / "x.csv.gz") == tmp_path / "x.csv.meta.json"
    for name in ("h200", "h200-flashinfer"):
        assert read_sidecar(PROFILES_DIR / f"{name}.raw.csv.gz") == json.loads(
            (PROFILES_DIR / f"{name}.raw.meta.json").read_text())


@pytest.mark.parametrize("parts, base_kernels, want", [
    (("components",), None, None),  # attention rows from a pre-ws base: its tiling, not this run's ws set
    (("components", "loop"), "v1+rows", "v1+rows"),
    (("attention", "loop"), None, "v1+rows+ws"),  # attention re-measured: this run's set
])
def test_the_kernel_set_follows_the_attention_rows(tmp_path, monkeypatch, parts, base_kernels, want):
    import json

    import wmtp.calibrate.sweep_run as sr
    import wmtp.measure.run as mr

    base = _rows([("decode_attn", 1.0), ("gemm", 2.0), ("draft_loop", 4.0), ("copy", 5.0)])
    base.to_csv(tmp_path / "base.csv", index=False)
    if base_kernels:
        (tmp_path / "base.meta.json").write_text(json.dumps({"attention_kernels": base_kernels}))
    (tmp_path / "out").mkdir()
    _rows([("gemm", 0.5), ("draft_loop", 0.7), ("copy", 0.8)]).to_csv(tmp_path / "out" / "raw.csv", index=False)
    seen = {}
    monkeypatch.setattr(mr, "run_sweep", lambda *a, **k: (tmp_path / "out" / "raw.csv",
                                                          {"backend": "wmtp", "attention_kernels": "v1+rows+ws"}))
    monkeypatch.setattr(sr, "fit_raw_to_profile", lambda raw, path, meta, models: seen.update(meta) or path)
    sr.run_calibrate([], tmp_path / "out", parts=parts, base_raw=tmp_path / "base.csv")
    assert seen.get("attention_kernels") == want
