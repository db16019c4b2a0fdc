"""Defects of review 25, each pinned by a regression test whose expected values are worked out by hand:
- `wmtp.simulate` had its own `MAX_DEPTH = 64` beside `wmtp.acceptance.MAX_DEPTH` (the deepest draft any command
  models): two limits that agreed only by accident;
- an acceptance file (histogram JSON, meta_info, per-step JSONL) holding an integer of 5000 digits got an error
  line quoting Python's int() message (`use sys.set_int_max_str_digits() to increase the limit`), and one of 400
  digits Python's `int too large to convert to float`; a bin index of 5000 digits the same.
(The report's figures: tests/test_audit24.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cli_checks import assert_one_error, invoke

HUGE = "9" * 5000  # past Python's 4300-digit int() limit
WIDE = "9" * 400  # int() reads it; no float holds it


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


# --- 2. a number too long to read in an acceptance file -----------------------------------------------------------

def _meta(count: str) -> str:
    return json.dumps({"meta_info": {"spec_accept_histogram": [1, 2]}}).replace("[1, 2]", f"[1, {count}]")


HUGE_FILES = [  # (file name, text): each holds one integer of 5000 digits where a count or a bin is read
    ("list.json", f"[1, {HUGE}, 3]"),
    ("object.json", f'{{"0": 1, "1": {HUGE}}}'),
    ("meta.json", _meta(HUGE)),
    ("steps.jsonl", f'{{"accept_length": 2}}\n{{"accept_length": {HUGE}}}\n'),
    ("bin.json", f'{{"0": 1, "{HUGE}": 2}}'),
    ("bin.csv", f"0,1\n{HUGE},2\n"),
]


def _check_huge(line: str, name: str) -> None:
    assert "set_int_max_str_digits" not in line and "Exceeds the limit" not in line
    if name.startswith("bin"):  # the bin index: out of range, its digits cut and counted
        assert "(5000 digits) is outside 0..63" in line and HUGE not in line
    else:
        assert "a number of 5000 digits (more than 4300 digits): too long to be a count" in line


@pytest.mark.parametrize("name, text", HUGE_FILES, ids=[n for n, _ in HUGE_FILES])
def test_a_5000_digit_number_in_an_acceptance_file_is_one_error_in_wmtps_words(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    _check_huge(assert_one_error(invoke("accept", p), f"error: {p}:"), name)
    line = assert_one_error(invoke("report", "--model", "q35", "--histogram", f"window={p}", "--out",
                                   tmp_path / "r.html"), str(p))
    _check_huge(line, name)
    assert not (tmp_path / "r.html").exists()


def test_a_5000_digit_number_in_an_acceptance_file_through_a_subprocess(tmp_path):
    """The installed command, end to end: exit 1, one stderr line starting `error:` naming the file, no traceback."""
    p = tmp_path / "h.json"
    p.write_text(f"[1, {HUGE}, 3]")
    r = subprocess.run([sys.executable, "-m", "wmtp.cli.main", "accept", str(p)], capture_output=True, text=True,
                       timeout=120)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), r.stdout + r.stderr
    assert str(p) in lines[0] and "set_int_max_str_digits" not in lines[0] and "Traceback" not in r.stderr


WIDE_FILES = [  # 400 digits: int() reads it, float() overflows (Python's 'int too large to convert to float')
    ("list.json", f"[1, {WIDE}, 3]", "bin n=1: a count above 1e308 is too large to be a number of verify steps"),
    ("meta.json", _meta(WIDE), "bin n=1: a count above 1e308 is too large to be a number of verify steps"),
    ("steps.jsonl", f'{{"accept_length": 2}}\n{{"accept_length": {WIDE}}}\n',
     f"line 2: accept_length '{WIDE[:40]}' is not a per-step accept length (a whole number of tokens in 1..64)"),
    ("bin.json", f'{{"0": 1, "{WIDE}": 2}}', "(400 digits) is outside 0..63"),
]


@pytest.mark.parametrize("name, text, said", WIDE_FILES, ids=[n for n, _, _ in WIDE_FILES])
def test_a_400_digit_count_is_one_error_in_wmtps_words(tmp_path, name, text, said):
    p = tmp_path / name
    p.write_text(text)
    line = assert_one_error(invoke("accept", p), str(p), said)
    assert "int too large to convert to float" not in line


def test_a_profile_with_a_5000_digit_number_is_one_error_naming_it(tmp_path):
    """`--profile` (and every JSON document `wmtp.fileio.read_json` reads: presets, framework profiles, configs)."""
    from wmtp.profile import PROFILES_DIR

    doc = json.loads((PROFILES_DIR / "h200.json").read_text())
    p = tmp_path / "p.json"
    p.write_text(json.dumps(doc).replace('"schema_version": ', f'"schema_version": {HUGE}', 1).replace(
        f"{HUGE}{doc['schema_version']}", HUGE, 1))
    assert HUGE in p.read_text()
    line = assert_one_error(invoke("predict", "--model", "q35", "--profile", p), str(p),
                            "5000 digits (more than 4300 digits): too long")
    assert "set_int_max_str_digits" not in line


def test_json_int_reads_every_integer_int_reads_below_the_limit():
    """The JSON readers' parse_int: the same integers as int() up to the limit (signs, zeros), refused past it."""
    from wmtp.fileio import INT_DIGITS, json_int

    for text in ("0", "-0", "7", "-12", "9" * INT_DIGITS, "-" + "9" * INT_DIGITS):
        assert json_int(text) == int(text)
    assert json.loads(f"[-{'1' * INT_DIGITS}]", parse_int=json_int) == [-int("1" * INT_DIGITS)]
    said = rf"a number of {INT_DIGITS + 1} digits \(more than {INT_DIGITS} digits\): too long"
    with pytest.raises(ValueError, match=said):
        json_int("-" + "9" * (INT_DIGITS + 1))
