"""The checks every version corpus (tests/data/real_v2/ to real_v5/: one synthetic excerpt per engine log format,
EXPECTED.tsv with hand-derived TPOT / AL) runs on each of its files: `wmtp logs` and `wmtp accept`, both views, no
traceback, no garbled line, values within `TOL` of the expected ones."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from wmtp.cli.main import app

TOL = 0.01


def corpus(folder: Path) -> tuple[dict, list[str]]:
    """(file -> its EXPECTED.tsv row, the corpus's files)."""
    rows = {r["file"]: r for r in csv.DictReader((folder / "EXPECTED.tsv").open(), delimiter="\t")}
    return rows, sorted(p.name for p in folder.iterdir() if p.name not in ("README.md", "EXPECTED.tsv"))


def run(args):
    r = CliRunner().invoke(app, args, env={"COLUMNS": "100"})
    assert "Traceback" not in r.output and (r.exception is None or isinstance(r.exception, SystemExit)), r.output
    return r


def logs_json(path: Path) -> dict:
    """`wmtp logs PATH --json`'s record of the file (the command must succeed)."""
    r = run(["logs", str(path), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)[0]


def check_logs(path: Path, row: dict) -> None:
    """`wmtp logs`: the decode records counted, TPOT and AL as expected (an empty cell: none in the file)."""
    out = logs_json(path)
    assert out["garbled"] == 0 and out["records"]["sglang_decode"] == int(row["decode_lines"]), out["records"]
    for key, col in (("tpot_ms", "expect_tpot_ms"), ("accept_length", "expect_al")):
        if row[col]:
            assert abs(out[key] / float(row[col]) - 1) <= TOL, (out[key], row["how"])
        else:
            assert out[key] is None
    r = run(["logs", str(path)])
    assert r.exit_code == 0 and "TPOT:" in r.output and "AL:" in r.output, r.output


def check_accept(path: Path, row: dict) -> None:
    """`wmtp accept`: AL as expected, or (no acceptance data) one `error:` line that points at the TPOT."""
    r = run(["accept", str(path), "--json"])
    if not row["expect_al"]:
        assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
        assert "no acceptance length" in r.output
        return
    assert r.exit_code == 0, r.output
    al = json.loads(r.output)["files"][0]["accept_length"]
    assert abs(al / float(row["expect_al"]) - 1) <= TOL, (al, row["how"])
    assert run(["accept", str(path)]).exit_code == 0


def write_log(tmp_path, text: str, name: str = "x.log") -> Path:
    """`text` as a log file in `tmp_path`."""
    p = tmp_path / name
    p.write_text(text)
    return p


def one_error(path: Path, *words) -> None:
    """`wmtp logs PATH` fails with exactly one `error:` line holding each of `words`."""
    r = run(["logs", str(path)])
    assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
    for w in words:
        assert w in r.output, r.output
