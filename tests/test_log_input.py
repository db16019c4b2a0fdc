"""Inputs that are not regular files (a FIFO, a process substitution's pipe) and files that start with a
byte-order mark: `wmtp logs` and `wmtp accept` read them as they read the same bytes from a plain file, and a FIFO
nobody writes to is one error line, not a hang."""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wmtp.cli.main import app

DATA = Path(__file__).parent / "data"
SPEC = DATA / "real" / "vllm-v1-specdecoding-al1-pd-ascend-13665.log"
pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


def _run(*args) -> tuple[int, str]:
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert "Traceback" not in r.output
    return r.exit_code, r.output


_OPEN_FDS: list[int] = []


@pytest.fixture(autouse=True)
def _close_pipes():
    yield
    while _OPEN_FDS:
        os.close(_OPEN_FDS.pop())


def _fifo(tmp_path: Path, data: bytes | None, name: str = "in") -> Path:
    """What a process substitution hands over: /dev/fd/N of a pipe whose writer (a thread) is attached before the
    reader comes and fills it with `data`, then closes. None: a named FIFO nobody ever writes to."""
    if data is None:
        p = tmp_path / name
        os.mkfifo(p)
        return p
    r, w = os.pipe()
    _OPEN_FDS.append(r)

    def feed():  # blocks while the pipe is full, until the reader drains it
        view = memoryview(data)
        while view:
            view = view[os.write(w, view):]
        os.close(w)
    threading.Thread(target=feed, daemon=True).start()
    return Path(f"/dev/fd/{r}")


@pytest.mark.parametrize("gz", [False, True])
def test_logs_from_a_pipe_read_as_the_file(tmp_path, gz):
    src = DATA / "sglang_decode.log"
    data = src.read_bytes()
    code, plain = _run("logs", src, "--json")
    code2, piped = _run("logs", _fifo(tmp_path, gzip.compress(data) if gz else data), "--json")
    assert code == code2 == 0
    a, b = json.loads(plain)[0], json.loads(piped)[0]
    assert a["tpot_ms"] == b["tpot_ms"] and a["accept_length"] == b["accept_length"] and a["tpot_ms"] > 0


def test_a_fifo_nobody_writes_is_one_error_line(tmp_path):
    for cmd in ("logs", "accept"):
        code, out = _run(cmd, _fifo(tmp_path, None, f"{cmd}.log"))
        assert code != 0 and out.startswith("error:") and "empty" in out and out.count("\n") == 1


def test_accept_reads_a_histogram_from_a_pipe(tmp_path):
    # H = [10, 20, 30] (steps that accepted 0, 1, 2 drafts): AL = 1 + (20 + 2 * 30) / 60 = 2.333
    code, out = _run("accept", _fifo(tmp_path, b"[10, 20, 30]\n"), "--json")
    assert code == 0 and json.loads(out)["files"][0]["accept_length"] == pytest.approx(1 + 80 / 60)
    code, out = _run("accept", _fifo(tmp_path, SPEC.read_bytes(), "spec"), "--json")
    assert code == 0 and json.loads(out)["files"][0]["accept_length"] == pytest.approx(1.0)


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path):
    bom = b"\xef\xbb\xbf"
    h = tmp_path / "h.json"
    h.write_bytes(bom + b"[10, 20, 30]")
    code, out = _run("accept", h, "--json")
    assert code == 0 and json.loads(out)["files"][0]["accept_length"] == pytest.approx(1 + 80 / 60)
    a = tmp_path / "a.txt"
    a.write_bytes(bom + b"mean acceptance length: 2.49\n")
    code, out = _run("accept", a, "--depth", "5", "--json")
    assert code == 0 and json.loads(out)["files"][0]["accept_length"] == pytest.approx(2.49)
    # the first decode line of an SGLang log behind a BOM still counts: same reading as without it
    src = DATA / "sglang_decode.log"
    b = tmp_path / "bom.log"
    b.write_bytes(bom + src.read_bytes())
    assert json.loads(_run("logs", b, "--json")[1])[0]["tpot_ms"] == json.loads(_run("logs", src, "--json")[1])[0]["tpot_ms"]
