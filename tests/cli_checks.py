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
