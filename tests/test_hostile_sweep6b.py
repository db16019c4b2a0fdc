"""Sweep 6, routed to the maintainer: endless or binary streams given as logs, SIGTERM, and errors about a spooled
pipe that named the temporary copy. Each as a user runs it (a subprocess of the console entry point)."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CMD = [sys.executable, "-m", "wmtp.cli.main"]
REAL = sorted((Path(__file__).parent / "data" / "real").glob("*.log"))


def _run(args, **kw):
    return subprocess.run(CMD + args, capture_output=True, text=True, timeout=60, **kw)


def _one_error(r):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1, r
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize("cmd", [["logs"], ["accept"], ["calibrate-logs", "--model", "q35", "--out", "/dev/null"]])
def test_endless_binary_device_is_one_error_at_once(device, cmd):
    """/dev/zero was copied into a temporary file until the disk filled (~1 GB/s); its first megabyte shows binary
    data (NUL bytes), so it is refused before the second."""
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    args = cmd + ([f"{device}:3", f"{device}:5"] if cmd[0] == "calibrate-logs" else [device])
    t0 = time.monotonic()
    line = _one_error(_run(args))
    assert time.monotonic() - t0 < 30
    assert device in line and ("binary" in line or "NUL" in line)


def test_gzip_through_a_pipe_is_still_read():
    """A gzip stream has NUL bytes of its own: it is read (by its magic bytes), not refused as binary."""
    r = subprocess.run(CMD + ["logs", "/dev/stdin"], input=gzip.compress(REAL[0].read_bytes()), capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert b"Traceback" not in r.stderr


def test_acceptance_error_names_the_input_not_the_temporary_copy():
    line = _one_error(_run(["accept", "/dev/stdin"], input="hello\nworld\n"))
    assert "/dev/stdin" in line and "/tmp" not in line.replace("/dev/stdin", "")


def test_sigterm_is_one_line_and_exit_143():
    """SIGTERM while a pipe is being read (stdin open, no EOF): one `error: terminated` line, exit 128 + 15, through
    the finally blocks (a spooled pipe's temporary file is anonymous or in a removed folder)."""
    p = subprocess.Popen(CMD + ["logs", "/dev/stdin"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        p.stdin.write("a line\n")
        p.stdin.flush()
        time.sleep(4)  # past the imports, into the read
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines() == ["error: terminated"]


def test_underscore_numbers_are_garbage_on_every_path(tmp_path):
    """float() reads `1_000` as 1000; no engine prints one. The fast decode path (one regex, values by float) read
    `#queue-req: 1_000,` as 1000 and the general path as 1 (CI's hypothesis run found it): both now treat such a
    field as garbage. A required field (running) garbles the line; an optional one (queue) reads as absent."""
    from wmtp.logs import _parse_sglang_general, parse_sglang

    q = ("Decode batch, #running-req: 2, #full token: 9, full token usage: 0.4, accept len: 3.5, cuda graph: True, "
         "gen throughput (token/s): 50.0, #queue-req: 1_000,")
    for rec in (parse_sglang(q, 1), _parse_sglang_general(q, 1)):
        assert rec is not None and rec.queue is None and rec.running == 2 and rec.gen_throughput == 50.0
    bad = "Decode batch, #running-req: 1_0, #token: 5, token usage: 0.1, gen throughput (token/s): 3.0, #queue-req: 0"
    assert parse_sglang(bad, 1) is None and _parse_sglang_general(bad, 1) is None
    log = tmp_path / "u.log"
    log.write_text(bad + "\n" + q.replace("#running-req: 2", "#running-req: 1") + "\n")
    r = _run(["logs", str(log), "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)[0]
    assert doc["garbled"] == 1 and doc["records"]["sglang_decode"] == 1
    assert doc["tpot_ms"] == pytest.approx(1000 * 1 / 50.0, rel=1e-3)  # 1 request at 50 tok/s: 20 ms a token
