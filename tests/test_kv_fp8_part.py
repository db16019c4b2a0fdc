"""The `kv-fp8` part of the calibration sweep: attention over an fp8 KV cache measured as its own rows (`dtype`
fp8), merged beside the bf16 attention rows without replacing them, fitted as KIND@fp8 and priced from there."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from wmtp.calibrate.raw_rows import split_kv_dtypes
from wmtp.calibrate.sweep_run import merge_raw, parse_parts, row_key
from wmtp.errors import WmtpError
from wmtp.measure.harness import COLUMNS


def _rows(rows: list[tuple[str, str, float]]) -> pd.DataFrame:
    out = []
    for kernel, dtype, t in rows:
        row = {c: "" for c in COLUMNS}
        row.update(kernel=kernel, dtype=dtype, impl="wmtp", model="q35", time_ms=t, bytes=1.0, flops=0.0, status="ok")
        out.append(row)
    return pd.DataFrame(out, columns=COLUMNS)


def test_row_keys_tell_fp8_attention_apart():
    assert row_key("verify_attn", "fp8") == "verify_attn@fp8"
    assert row_key("decode_attn", " fp8 ") == "decode_attn@fp8"
    assert row_key("verify_attn", "bf16") == row_key("verify_attn", "") == "verify_attn"
    assert row_key("gemm", "fp8") == "gemm"  # weight kinds are not KV attention: their dtype is not a KV dtype
    assert row_key("index_build", "fp8") == "index_build"


def test_kv_fp8_is_a_part_of_its_own():
    assert parse_parts("kv-fp8") == ("kv-fp8",)
    assert parse_parts("attention,kv-fp8") == ("attention", "kv-fp8")
    with pytest.raises(WmtpError, match="unknown sweep part"):
        parse_parts("kv-int4")


def test_remeasuring_kv_fp8_keeps_the_bf16_attention_rows(tmp_path):
    base = _rows([("decode_attn", "bf16", 1.0), ("verify_attn", "bf16", 2.0), ("verify_attn", "fp8", 9.0),
                  ("gemm", "bf16", 3.0), ("copy", "bf16", 4.0)])
    new = _rows([("verify_attn", "fp8", 1.5), ("decode_attn", "fp8", 0.5), ("copy", "bf16", 4.5)])
    base.to_csv(tmp_path / "base.csv", index=False)
    new.to_csv(tmp_path / "new.csv", index=False)
    out, info = merge_raw(tmp_path / "new.csv", tmp_path / "base.csv", ("kv-fp8",), tmp_path / "m.csv")
    got = sorted(zip(*(pd.read_csv(out)[c] for c in ("kernel", "dtype", "time_ms"))))
    # the base's bf16 attention and gemm rows stay; its fp8 verify (9.0) and copy (4.0) are replaced
    assert got == sorted([("decode_attn", "bf16", 1.0), ("verify_attn", "bf16", 2.0), ("gemm", "bf16", 3.0),
                          ("verify_attn", "fp8", 1.5), ("decode_attn", "fp8", 0.5), ("copy", "bf16", 4.5)])
    assert info["base_rows_kept"] == 3
    # and the other way: re-measuring the attention part keeps the base's fp8 rows
    out, _ = merge_raw(tmp_path / "new.csv", tmp_path / "base.csv", ("attention",), tmp_path / "m2.csv")
    kept = pd.read_csv(out)
    assert ((kept.kernel == "verify_attn") & (kept.dtype == "fp8") & (kept.time_ms == 9.0)).sum() == 1
    assert not ((kept.kernel == "decode_attn") & (kept.dtype == "bf16")).any()


def test_split_kv_dtypes():
    df = _rows([("decode_attn", "bf16", 1.0), ("verify_attn", "fp8", 2.0), ("gemm", "fp8", 3.0),
                ("decode_attn", "", 4.0)])
    rest, other = split_kv_dtypes(df)
    assert sorted(rest.time_ms) == [1.0, 3.0, 4.0] and list(other) == ["fp8"]
    assert list(other["fp8"].time_ms) == [2.0]
    assert split_kv_dtypes(df.drop(columns="dtype"))[1] == {}  # a raw without the column: all bf16
    with pytest.raises(WmtpError, match="KV dtype 'int4'"):
        split_kv_dtypes(_rows([("verify_attn", "int4", 1.0)]))


def test_a_shipped_raw_with_fp8_rows_fits_and_prices_fp8_attention(tmp_path):
    """The shipped raw's q35 attention rows copied as fp8 rows (half the bytes, 0.6x the time, every rep): refitted,
    the profile holds decode_attn@fp8 / verify_attn@fp8, an fp8-KV prediction prices its attention from them (not
    from the bf16 fit, which was tagged extrapolated), and at a measured shape the price is about 0.6x the bf16 one's
    (the fp8 fit's features see the fp8 kernels' tiles, so not exactly: within 25 %)."""
    from importlib.resources import files

    from wmtp.calibrate.fitting import fit_raw_to_profile
    from wmtp.calibrate.raw_csv import read_raw
    from wmtp.hardware import get_hardware
    from wmtp.models import get_model
    from wmtp.profile import ProfileCostModel, load_profile

    raw = read_raw(files("wmtp") / "data" / "profiles" / "h200.raw.csv.gz")
    meta = json.loads((files("wmtp") / "data" / "profiles" / "h200.raw.meta.json").read_text())
    att = raw[raw.kernel.isin(["decode_attn", "verify_attn"]) & (raw.model == "q35") & (raw.status == "ok")].copy()
    att["dtype"], att["bytes"], att["time_ms"] = "fp8", att["bytes"] / 2, att["time_ms"] * 0.6
    path = tmp_path / "raw.csv"
    pd.concat([raw, att]).to_csv(path, index=False)
    prof_path = fit_raw_to_profile(path, tmp_path / "profile.json", meta, ["q35", "q122", "nem"])
    prof = load_profile(prof_path)
    assert {"decode_attn@fp8", "verify_attn@fp8"} <= set(prof["components"])
    assert prof["components"]["verify_attn@fp8"]["points"]  # fitted on the fp8 rows
    cm = ProfileCostModel(prof)
    h200 = get_hardware("h200")
    from wmtp.latency import verify_work

    for kv in ("fp8", "bf16"):
        spec = get_model("q35").with_dtypes(kv_dtype=kv)
        w = [x for x in verify_work(spec, (1 << 20) - 7, 7, 1) if x.kind == "verify_attn"][0]
        p = cm.price(w, h200, spec)
        if kv == "fp8":
            t8, tag8 = p.time_ms, str(p.source)
        else:
            t16 = p.time_ms
    assert "extrapolated" not in tag8 and "bf16-KV fit" not in tag8
    assert 0.6 * 0.75 < t8 / t16 < 0.6 * 1.25
