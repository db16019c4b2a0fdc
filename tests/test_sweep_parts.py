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


def test_the_merge_copies_every_kept_and_new_line_as_it_stands(tmp_path):
    """A round trip through pandas rewrote the base's `1` as `1.0` and dropped digits of its times (0.004092444313897027
    became 0.004092444313897): the shipped raw's kept rows were no longer the ones measured. A new run with its
    columns in another order is aligned to the base's header."""
    import gzip

    header = ",".join(COLUMNS)
    blank = {c: "" for c in COLUMNS}

    def line(**cells):
        return ",".join(str({**blank, **cells}[c]) for c in COLUMNS)

    kept = [line(kernel="linear_state", impl="wmtp", model="q35", batch=1, d=1, time_ms="0.004092444313897027",
                 bytes=4194304, flops="3145728.0", status="ok", config='"a,b"'),
            line(kernel="gemm", impl="wmtp", model="q35", batch=1, time_ms="1e-3", bytes=7, flops=0, status="ok")]
    gone = line(kernel="decode_attn", impl="wmtp", model="q35", batch=1, time_ms="9", bytes=1, flops=0, status="ok")
    (tmp_path / "base.csv.gz").write_bytes(gzip.compress(("\n".join([header, kept[0], gone, kept[1]]) + "\n").encode()))
    order = list(reversed(COLUMNS))
    new_cells = {**blank, "kernel": "decode_attn", "impl": "wmtp", "model": "nem", "batch": "1",
                 "time_ms": "0.30000000000000004", "bytes": "5", "flops": "0", "status": "ok"}
    (tmp_path / "new.csv").write_text(",".join(order) + "\n" + ",".join(new_cells[c] for c in order) + "\n")
    out, info = merge_raw(tmp_path / "new.csv", tmp_path / "base.csv.gz", ("attention",), tmp_path / "m.csv")
    got = out.read_text().splitlines()
    assert got == [header, *kept, line(**new_cells)]
    assert info["base_rows_kept"] == 2 and info["new_rows"] == 1


def test_the_bases_splice_records_travel_with_the_rows_they_describe(tmp_path):
    """The shipped raw's sidecar says its linear_state rows were spliced in from another run (with that file's hash);
    a merge that kept those rows dropped the record. It stays for a kind the merge keeps, goes for one it replaces,
    and the base's own merge record is kept beside the new one."""
    import json

    base = _rows([("linear_state", 1.0), ("decode_attn", 2.0)])
    base.to_csv(tmp_path / "base.csv", index=False)
    _rows([("decode_attn", 0.5)]).to_csv(tmp_path / "new.csv", index=False)
    side = {"spliced_rows": {"linear_state": {"sha256": "aa"}, "decode_attn": {"sha256": "bb"}},
            "merged_from": {"base_raw": "older.csv"}}
    (tmp_path / "base.meta.json").write_text(json.dumps(side))
    _, info = merge_raw(tmp_path / "new.csv", tmp_path / "base.csv", ("attention",), tmp_path / "m.csv")
    assert info["spliced_rows"] == {"linear_state": {"sha256": "aa"}}
    assert info["base_merged_from"] == {"base_raw": "older.csv"}


def test_a_corrupt_splice_record_is_an_error(tmp_path):
    _rows([("gemm", 1.0)]).to_csv(tmp_path / "base.csv", index=False)
    _rows([("decode_attn", 0.5)]).to_csv(tmp_path / "new.csv", index=False)
    (tmp_path / "base.meta.json").write_text('{"spliced_rows": ["linear_state"]}')
    with pytest.raises(WmtpError, match="spliced_rows must be an object"):
        merge_raw(tmp_path / "new.csv", tmp_path / "base.csv", ("attention",), tmp_path / "m.csv")
    assert not (tmp_path / "m.csv").exists()  # refused before anything is written


def test_a_row_that_is_not_one_line_is_an_error(tmp_path):
    """A quoted field across two lines is one row to pandas (the fit would read it) but two to a line copy."""
    base = _rows([("gemm", 1.0), ("moe", 2.0)])
    base.loc[1, "config"] = "a\nb"
    base.to_csv(tmp_path / "base.csv", index=False)
    _rows([("decode_attn", 0.5)]).to_csv(tmp_path / "new.csv", index=False)
    with pytest.raises(WmtpError, match="line 3 holds"):
        merge_raw(tmp_path / "new.csv", tmp_path / "base.csv", ("attention",), tmp_path / "m.csv")
    assert not (tmp_path / "m.csv").exists()


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

    from wmtp.calibrate.raw_csv import raw_sidecar, read_sidecar
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
