"""`wmtp.calibrate.splice`: one kind's rows re-measured and spliced into a raw sweep, the rest kept verbatim; the
extras of a shipped profile carried into the refit; the shipped H200 raws are that splice of run 1's state rows."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from wmtp.calibrate.splice import carry_extras, main, splice_rows
from wmtp.errors import WmtpError

ROOT = Path(__file__).resolve().parents[1]
HEAD = "kernel,impl,model,ctx,batch,d,window,sink,q_heads,kv_heads,head_dim,dtype,rep,time_ms,bytes,flops,status,config,timer"


def _row(kind, t, status="ok", batch="1.0"):
    return f"{kind},wmtp,q35,,{batch},1.0,,,16.0,2.0,256.0,bf16,0,{t},4194304.0,3145728.0,{status},cfg,timer"


def _write(path: Path, lines: list[str], end: str, gz: bool = True) -> Path:
    text = "".join(ln + end for ln in lines)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def test_splice_replaces_only_the_kind_and_keeps_every_other_line_verbatim(tmp_path):
    base = _write(tmp_path / "x.raw.csv.gz", [HEAD, _row("gemm", "0.5"), _row("linear_state", "0.1"),
                                              _row("gemm", "0.6", batch="16"), _row("linear_state", "0.2")], "\n")
    (tmp_path / "x.raw.meta.json").write_text(json.dumps({"gpu_name": "NVIDIA H200"}))
    new = _write(tmp_path / "new.csv", [HEAD, _row("linear_state", "0.3"), _row("linear_state", "0.4"),
                                        _row("linear_state", "0.5")], "\r\n", gz=False)
    (tmp_path / "new.meta.json").write_text(json.dumps({"git_sha": "abc", "command": "state_rows"}))
    target, replaced, added = splice_rows(base, new, "linear_state", tmp_path / "out")
    assert (replaced, added) == (2, 3)
    text = gzip.decompress(target.read_bytes()).decode()
    assert "\r" not in text  # the new rows take the base's line end
    assert text.splitlines() == [HEAD, _row("gemm", "0.5"), _row("gemm", "0.6", batch="16"),
                                 _row("linear_state", "0.3"), _row("linear_state", "0.4"), _row("linear_state", "0.5")]
    side = json.loads((tmp_path / "out" / "x.raw.meta.json").read_text())
    assert side["gpu_name"] == "NVIDIA H200"
    rec = side["spliced_rows"]["linear_state"]
    assert (rec["replaced_rows"], rec["new_rows"], rec["git_sha"], rec["command"]) == (2, 3, "abc", "state_rows")


@pytest.mark.parametrize("rows, why", [
    ([_row("gemm", "0.3")], "ok rows of kind linear_state only"),
    ([_row("linear_state", "nan", status="error: x")], "ok rows of kind linear_state only"),
    ([], "ok rows of kind linear_state only"),
])
def test_splice_refuses_rows_of_another_kind_or_failed(tmp_path, rows, why):
    base = _write(tmp_path / "x.raw.csv.gz", [HEAD, _row("linear_state", "0.1")], "\n")
    new = _write(tmp_path / "new.csv.gz", [HEAD, *rows], "\n")
    with pytest.raises(WmtpError, match=why):
        splice_rows(base, new, "linear_state", tmp_path / "out")
    assert not (tmp_path / "out" / "x.raw.csv.gz").exists()


def test_splice_refuses_other_columns(tmp_path, capsys):
    base = _write(tmp_path / "x.raw.csv.gz", [HEAD, _row("linear_state", "0.1")], "\n")
    new = _write(tmp_path / "new.csv.gz", [HEAD.replace(",timer", ""), _row("linear_state", "0.1")], "\n")
    assert main(["rows", str(base), str(new), "linear_state", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "columns" in err[0]


def test_carry_keeps_what_the_refit_lacks(tmp_path):
    shipped = json.loads((ROOT / "wmtp_model/data/profiles/h200.json").read_text())
    refit = {**shipped, "components": {k: v for k, v in shipped["components"].items()  # fp8-KV attention: fitted
                                       if ("@" not in k or "_attn@" in k) and k != "allreduce_tp2"}}  # from raw
    for k in ("tp_raw_data", "weight_dtype_raw_data"):
        refit.pop(k)
    src = tmp_path / "shipped.json"
    src.write_text(json.dumps(shipped))
    (tmp_path / "shipped.md").write_text("# Latency profile\n\n## Quantized weights (merged)\n\nkept\n")
    (tmp_path / "refit.json").write_text(json.dumps(refit))
    carried = carry_extras(src, tmp_path / "refit.json", tmp_path / "out.json")
    assert carried == ["allreduce_tp2", "gemm@bf16", "gemm@fp8", "gemm@int4", "moe@fp8", "moe@int4"]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["components"] == shipped["components"] and out["tp_raw_data"] == shipped["tp_raw_data"]
    assert (tmp_path / "out.md").read_text().endswith("## Quantized weights (merged)\n\nkept\n")


@pytest.mark.parametrize("name", ["h200", "h200-flashinfer"])
def test_shipped_raws_hold_run_1s_state_rows(name):
    """The shipped raws' linear_state rows are run 1's (measure/results/h200-s15), line for line, and the sidecar
    says so with the file's hash."""
    import hashlib

    new = ROOT / "measure/results/h200-s15/run1/state_raw.csv.gz"
    raw = gzip.decompress((ROOT / f"wmtp_model/data/profiles/{name}.raw.csv.gz").read_bytes()).decode().splitlines()
    got = [ln for ln in raw if ln.startswith("linear_state,")]
    want = [ln.rstrip("\r") for ln in gzip.decompress(new.read_bytes()).decode().splitlines()[1:]]
    assert got == want and len(got) == 10800
    side = json.loads((ROOT / f"wmtp_model/data/profiles/{name}.raw.meta.json").read_text())
    assert side["spliced_rows"]["linear_state"]["sha256"] == hashlib.sha256(new.read_bytes()).hexdigest()
