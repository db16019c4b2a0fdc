"""`wmtp logs -` / `wmtp accept -` read standard input (it was "cannot read -"); text taken from a log (its name, a
source label) reaches the terminal with its control characters escaped (the renderers escaped rich markup
only, so an ESC sequence in a log line reached the terminal raw)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cli_checks import assert_one_error, invoke  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SGL = ROOT / "tests" / "data" / "real_v2" / "sglang-hybrid-gdn-mamba-num-2026.log"
VLLM = ROOT / "tests" / "data" / "real_v2" / "vllm-v1-085-engine-rate-first-per-position.log"


def _wmtp(args: list[str], stdin: bytes | None):
    return subprocess.run([sys.executable, "-m", "wmtp.cli.main", *args], input=stdin, capture_output=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "COLUMNS": "100"})


def test_logs_reads_standard_input_as_the_file_does():
    by_file = json.loads(invoke("logs", SGL, "--json").stdout)[0]
    r = _wmtp(["logs", "-", "--json"], SGL.read_bytes())
    assert r.returncode == 0, r.stderr
    by_stdin = json.loads(r.stdout)[0]
    assert by_stdin["tpot_ms"] == by_file["tpot_ms"] and by_stdin["records"] == by_file["records"]


def test_accept_reads_standard_input_as_the_file_does():
    by_file = json.loads(invoke("accept", VLLM, "--json").stdout)["files"][0]
    r = _wmtp(["accept", "-", "--json"], VLLM.read_bytes())
    assert r.returncode == 0, r.stderr
    by_stdin = json.loads(r.stdout)["files"][0]
    assert by_stdin["accept_length"] == by_file["accept_length"] and by_stdin["alphas"] == by_file["alphas"]


def test_standard_input_given_twice_or_empty_is_one_error():
    for args, stdin in ((["logs", "-", "-"], SGL.read_bytes()), (["accept", "-", "-", "--compare"], b"x"),
                        (["logs", "-"], b"")):
        r = _wmtp(args, stdin)
        err = r.stderr.decode().strip().splitlines()
        assert r.returncode == 1 and len(err) == 1 and err[0].startswith("error:"), (args, r.stderr)
        assert b"Traceback" not in r.stderr


def test_a_log_named_with_an_escape_sequence_is_shown_escaped(tmp_path):
    evil = tmp_path / "run\x1b[2J\x1b]0;pwned\x07.log"
    evil.write_bytes(SGL.read_bytes())
    for cmd in ("logs", "accept"):
        r = invoke(cmd, evil)
        out = r.output
        assert "\x1b" not in out and "\x07" not in out, (cmd, out[:300])
        if cmd == "logs":
            assert r.exit_code == 0 and "\\x1b[2J" in out
        else:  # a dense log holds no acceptance data: one error naming the file, escaped
            assert_one_error(r, "\\x1b")
