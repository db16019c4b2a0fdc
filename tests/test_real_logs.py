"""The real-excerpt corpus (tests/data/real/, one file per public source): every file is read by
`wmtp logs` (both views) and, where it holds acceptance data, by `wmtp accept`, with no traceback; the
TPOT and AL agree with EXPECTED.tsv (hand-derived from each file's own numbers) within 30 % / 5 %.
Rows marked AMBIGUOUS may disagree (skipped for the agreement check only). Rows with neither expectation (NOTHING TO
READ: the file holds no TPOT and no AL) must be refused by both views with one `error:` line and exit 1."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wmtp.cli.main import app

REAL = Path(__file__).parent / "data" / "real"
ROWS = {r["file"]: r for r in csv.DictReader((REAL / "EXPECTED.tsv").open(), delimiter="\t")}
FILES = sorted(p.name for p in REAL.iterdir() if p.name not in ("README.md", "EXPECTED.tsv"))
TPOT_TOL, AL_TOL = 0.30, 0.05


def _run(args, columns=None):
    env = {"COLUMNS": str(columns)} if columns else {}
    r = CliRunner().invoke(app, args, env=env)
    assert "Traceback" not in r.output and (r.exception is None or isinstance(r.exception, SystemExit)), r.output
    return r


def _json(name: str, cmd: str) -> dict | None:
    r = _run([cmd, str(REAL / name), "--json"])
    if r.exit_code != 0:
        return None
    out = json.loads(r.output)
    return out[0] if cmd == "logs" else out["files"][0]


def test_every_file_has_an_expected_row():
    assert len(FILES) >= 40 and set(FILES) == set(ROWS)


def _nothing(name: str) -> bool:
    return not ROWS[name]["expect_tpot_ms"] and not ROWS[name]["expect_al"]


def _refused(name: str) -> bool:
    """Both `wmtp logs` views say, in one `error:` line and exit 1, that the file has nothing to read."""
    for args in (["--json"], []):
        r = _run(["logs", str(REAL / name), *args], columns=80)
        if r.exit_code != 1 or not r.output.startswith("error: ") or r.output.count("\n") != 1:
            return False
    return True


@pytest.mark.parametrize("name", [f for f in FILES if _nothing(f)])
def test_a_file_with_nothing_to_read_is_one_error_line(name):
    assert "NOTHING TO READ" in ROWS[name]["how"]
    assert _refused(name), _run(["logs", str(REAL / name)]).output


@pytest.mark.parametrize("name", [f for f in FILES if not _nothing(f)])
def test_logs_reads_every_file_in_both_views(name):
    r = _run(["logs", str(REAL / name), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)[0]
    assert out["tpot_ms"] is not None or out["accept_length"] is not None
    for res in (out["tpot"], out["al"]):  # every result names its estimator and source lines
        if res and (res.get("value_ms") or res.get("value")):
            assert res["estimator"] and res["source"].startswith(str(REAL / name) + ":")
            a, b = res["lines"]
            assert 1 <= a <= b
    for cols in (80, 120):
        r = _run(["logs", str(REAL / name)], columns=cols)
        assert r.exit_code == 0 and "TPOT:" in r.output and "AL:" in r.output, r.output


@pytest.mark.parametrize("name", [f for f in FILES if ROWS[f]["expect_al"]])
def test_accept_reads_every_file_with_an_al(name):
    for args in (["--json"], []):
        r = _run(["accept", str(REAL / name), *args], columns=80)
        assert r.exit_code == 0, r.output
    assert _json(name, "accept")["accept_length"] >= 1.0


@pytest.mark.parametrize("name", [f for f in FILES if not ROWS[f]["expect_al"]])
def test_accept_on_a_file_without_al_is_one_error_line(name):
    r = _run(["accept", str(REAL / name)])
    if r.exit_code:  # files with no acceptance data: one line that says what the file has instead
        assert r.output.startswith("error: ") and r.output.count("\n") == 1 and "no acceptance length" in r.output


def _agreement(name: str) -> list[str]:
    row, out, bad = ROWS[name], _json(name, "logs"), []
    if row["expect_tpot_ms"]:
        want, got = float(row["expect_tpot_ms"]), out and out["tpot_ms"]
        if got is None or abs(got / want - 1) > TPOT_TOL:
            bad.append(f"TPOT {got} vs {want}")
    if row["expect_al"]:
        want, acc = float(row["expect_al"]), _json(name, "accept")
        got = acc and acc["accept_length"]
        if got is None or abs(got / want - 1) > AL_TOL:
            bad.append(f"AL {got} vs {want}")
    return bad


@pytest.mark.parametrize("name", FILES)
def test_agrees_with_expected(name):
    bad = _agreement(name)
    if bad and "AMBIGUOUS" in ROWS[name]["how"]:
        pytest.skip(f"AMBIGUOUS row: {bad}")
    assert not bad, bad


def test_corpus_agreement_rate():
    """Over the whole corpus (AMBIGUOUS rows included): >= 95 % read, >= 90 % agree."""
    read = sum(1 for f in FILES if (_refused(f) if _nothing(f) else
                                    _json(f, "logs") is not None or _json(f, "accept") is not None))
    agree = sum(1 for f in FILES if not _agreement(f))
    assert read / len(FILES) >= 0.95 and agree / len(FILES) >= 0.90, (read, agree, len(FILES))
