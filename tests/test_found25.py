"""Defects of review 25, each pinned by a regression test whose expected values are worked out by hand:
- `wmtp.simulate` had its own `MAX_DEPTH = 64` beside `wmtp.acceptance.MAX_DEPTH` (the deepest draft any command
  models): two limits that agreed only by accident;
(The report's figures: tests/test_audit24.py.)"""

from __future__ import annotations

import subprocess
import sys


from cli_checks import assert_one_error, invoke

# --- 1. simulate's depth limit is acceptance's -------------------------------------------------------------------

def test_simulate_takes_its_depth_limit_from_acceptance():
    """With `wmtp.acceptance.MAX_DEPTH` set to 9 before `wmtp.simulate` is imported, simulate's limits follow it: a
    policy d of 9 runs and 10 is refused; a trace step may accept at most gamma = 9 - 1 = 8 drafts. (A constant of
    its own, 64, ran d = 10 and read a step of 9.)"""
    code = """
import wmtp.acceptance as acc
acc.MAX_DEPTH = 9
from wmtp.errors import WmtpError
from wmtp.simulate import MAX_DEPTH, read_trace, simulate
import pathlib, sys, tempfile
assert MAX_DEPTH == 9, MAX_DEPTH
assert simulate(lambda d: 1.0, [(10, [0.5])], 10, policy=9).policy == "9"
try:
    simulate(lambda d: 1.0, [(10, [0.5])], 10, policy=10)
    sys.exit("policy 10 ran")
except WmtpError as e:
    assert "1..9" in str(e), e
d = pathlib.Path(tempfile.mkdtemp())
(d / "ok.txt").write_text("8\\n0\\n")
assert read_trace(d / "ok.txt") == [8, 0]
(d / "deep.txt").write_text("9\\n0\\n")
try:
    read_trace(d / "deep.txt")
    sys.exit("a step of 9 read")
except WmtpError as e:
    assert "at most 8 a step" in str(e), e
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_wmtp_simulate_depth_and_trace_limits_are_acceptance_max_depth(tmp_path):
    """Through the CLI at the shipped limit: --depth MAX_DEPTH runs, MAX_DEPTH + 1 is one error line; a trace step of
    MAX_DEPTH - 1 accepted drafts (d = MAX_DEPTH's gamma) is read, one of MAX_DEPTH is one error line."""
    from wmtp.acceptance import MAX_DEPTH

    assert invoke("simulate", "--model", "q35", "--depth", MAX_DEPTH, "--tokens", 200).exit_code == 0
    assert_one_error(invoke("simulate", "--model", "q35", "--depth", MAX_DEPTH + 1), f"2..{MAX_DEPTH}")
    ok, deep = tmp_path / "ok.txt", tmp_path / "deep.txt"
    ok.write_text(f"{MAX_DEPTH - 1}\n2\n")
    deep.write_text(f"{MAX_DEPTH}\n2\n")
    r = invoke("simulate", "--model", "q35", "--trace", ok, "--tokens", MAX_DEPTH + 3, "--json")
    assert r.exit_code == 0, r.output
    assert_one_error(invoke("simulate", "--model", "q35", "--trace", deep), str(deep), f"at most {MAX_DEPTH - 1}")


def test_simulate_defines_no_depth_limit_of_its_own():
    import wmtp.acceptance
    import wmtp.simulate

    assert "MAX_DEPTH =" not in open(wmtp.simulate.__file__).read()
    assert wmtp.simulate.MAX_DEPTH == wmtp.acceptance.MAX_DEPTH
