"""CLI checks the hostile-input tests share: run a command in-process, and assert it failed with exactly one
`error:` line (no traceback, no exception but SystemExit) that names what it should."""

from __future__ import annotations

from typer.testing import CliRunner

from wmtp.cli.main import app


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def assert_one_error(r, *fragments: str) -> str:
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    for f in fragments:
        assert f.lower() in lines[0].lower(), lines[0]
    return lines[0]


def shipped_raw_with_cell(tmp_path, col: str, value: str, row: int = 5, lines: int | None = None):
    """The shipped H200 raw sweep (its first `lines` lines, or all) as tmp_path/raw.csv, with one cell of data row
    `row` replaced by `value`."""
    import gzip

    from wmtp.profile import PROFILES_DIR

    text = gzip.decompress((PROFILES_DIR / "h200.raw.csv.gz").read_bytes()).decode().splitlines()
    text = text[:lines] if lines else text
    header = text[0].split(",")
    cells = text[row].split(",")
    cells[header.index(col)] = value
    text[row] = ",".join(cells)
    p = tmp_path / "raw.csv"
    p.write_text("\n".join(text) + "\n")
    return p
