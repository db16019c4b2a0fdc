"""The block reader (`wmtp.log_blocks`, `wmtp.log_batch`: what `wmtp logs` runs) gives what the per-line
reader (`wmtp.logs.stream`, `analyse(..., reference=True)`) gives, to the last bit of every number: on every
file under tests/data/, and on the benchmark's generated logs of every format and several seeds, damaged
(truncated lines, markdown, out-of-range numbers, digits in keys, DP ranks and restarts, time jumps, stalls,
blank and non-ASCII lines), gzip-compressed, without a final newline, read in small blocks so that lines
fall on block edges."""

from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from wmtp import log_blocks
from wmtp.calibrate.log_benchmark import FORMATS, _sglang_line, generate
from wmtp.errors import WmtpError
from wmtp.log_analysis import analyse
from wmtp.log_blocks import _ZERO, _maybe_ours
from wmtp.logs import parse_other

DATA = Path(__file__).parent / "data"
FILES = sorted([*DATA.glob("*.log"), *(DATA / "real").iterdir()])


def _both(path, **kw):
    """(block reader's report, per-line reader's report) as JSON text, or the error each raised."""
    out = []
    for ref in (False, True):
        try:
            out.append(json.dumps(analyse(path, reference=ref, **kw), sort_keys=True))
        except WmtpError as e:
            out.append(f"error: {e}")
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_data_file_reads_the_same(path):
    new, ref = _both(path)
    assert new == ref


def _damage(lines: list[str], rng: random.Random) -> list[str]:
    """Lines in the layouts the fast paths take, bent so that many of them must not be taken."""
    edits = [
        lambda s: s[:rng.randrange(len(s) + 1)],  # truncated
        lambda s: s.replace("#running-req: ", "**#running-req:** ", 1),
        lambda s: s.replace("TP0]", "DP1 TP0]", 1),  # another rank
        lambda s: s.replace("[20", "(SGLangEngine pid=7) [20", 1),  # another process (a restart)
        lambda s: s.replace("running-req: ", "running-req: 99999999", 1),
        lambda s: s.replace("accept len: ", "accept len: 0.", 1),
        lambda s: s.replace("(token/s): ", "(token/s): 9999999999999", 1),
        lambda s: s.replace("#token: ", "#token: 0", 1) if "#token: 0" not in s else s.replace("#token: ", "#to1ken: "),
        lambda s: s.replace("#queue-req: ", "#queue-req: 99999999999999", 1),
        lambda s: s.replace("Accepted: ", "Accepted: 99999999999999", 1),
        lambda s: s.replace("Number of emitted tokens: ", "Number of emitted tokens: 1e3", 1),
        lambda s: s.replace("Prefill batch.", "Prefill batch. Decode batch", 1),
        lambda s: s.replace("Running: ", "Running: 0", 1),
        lambda s: s.replace("00:", "23:", 1),  # the clock jumps
        lambda s: s + " \u00e9",
        lambda s: "",
        lambda s: s.replace("0", "\u0663", 1),  # a non-ASCII digit
        lambda s: "> " + s,
        lambda s: s.replace(", ", ",  ", 1),
        lambda s: s.replace("INFO ", "INFO 12 [", 1),
    ]
    out = []
    for s in lines:
        if rng.random() < 0.04:
            s = rng.choice(edits)(s)
        out.append(s)
        if rng.random() < 0.01 and "Decode batch" in s:  # a stall: same #token, throughput collapsed
            out.append(re.sub(r"\(token/s\): [\d.]+", "(token/s): 1.00", s))
    return out


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("seed", [1, 2])
def test_generated_logs_read_the_same(tmp_path, monkeypatch, fmt, seed):
    monkeypatch.setattr(log_blocks, "BLOCK_CHARS", 7919)  # lines fall across block edges
    plain = tmp_path / f"{fmt}.log"
    generate(plain, 1, seed=seed, fmt=fmt)
    rng = random.Random(seed)
    text = plain.read_text()
    assert _both(plain)[0] == _both(plain)[1]
    damaged = tmp_path / f"{fmt}-damaged.log"
    damaged.write_text("\n".join(_damage(text.splitlines(), rng)))  # no final newline
    new, ref = _both(damaged)
    assert new == ref
    assert _both(damaged, gap_s=5.0, requested_batch=3)[0] == _both(damaged, gap_s=5.0, requested_batch=3)[1]
    packed = tmp_path / f"{fmt}.log.gz"
    packed.write_bytes(gzip.compress(damaged.read_bytes()))
    assert _both(packed)[0] == new.replace(str(damaged), str(packed))


def _sglang_spans(rng: random.Random) -> list[str]:
    """The generator's SGLang lines around its run switches: speculative to dense (line 750000, where
    #token stays put and stalls occur), dense to speculative at a new batch size (1000000), batch 1 to 2."""
    return [_sglang_line(rng, n) for a, b in ((249000, 251500), (748000, 752000), (998500, 1001500))
            for n in range(a, b)]


@pytest.mark.parametrize("block", [1 << 20, 30011])
@pytest.mark.parametrize("rate", [0.0, 0.002])
def test_sglang_runs_stalls_and_prefills_read_the_same(tmp_path, monkeypatch, block, rate):
    monkeypatch.setattr(log_blocks, "BLOCK_CHARS", block)
    rng = random.Random(block + int(rate * 1000))
    lines = []
    for s in _sglang_spans(rng):
        lines.append(s if rng.random() >= rate else rng.choice(["", s[:40], s.replace("TP0]", "DP1 TP0]")]))
        if rng.random() < 0.01 and "Decode batch" in s:  # a stall: same #token, throughput collapsed
            lines.append(re.sub(r"\(token/s\): [\d.]+", "(token/s): 1.00", s))
    path = tmp_path / "runs.log"
    path.write_text("\n".join(lines) + "\n")
    new, ref = _both(path)
    assert new == ref
    rep = json.loads(new)
    assert len(rep["runs"]) >= 3 and rep["events"]["stalls"] > 0 and any(r["dropped_after_prefill"] for r in rep["runs"])


def test_a_truncated_gzip_fails_with_the_same_message(tmp_path):
    plain = tmp_path / "s.log"
    generate(plain, 1, fmt="sglang")
    cut = tmp_path / "s.log.gz"
    cut.write_bytes(gzip.compress(plain.read_bytes())[:30000])
    new, ref = _both(cut)
    assert new.startswith("error: ") and new == ref


def test_the_block_reader_is_what_wmtp_logs_runs(tmp_path, monkeypatch):
    path = tmp_path / "v.log"
    generate(path, 1, fmt="vllm-v1")
    calls = []
    real = log_blocks._block
    monkeypatch.setattr(log_blocks, "_block", lambda *a, **k: calls.append(1) or real(*a, **k))
    analyse(path)
    assert calls


_PIECES = ["Decode batch", "Prefill batch", "Avg generation throughput", "SpecDecoding metrics", "Speculative metrics",
           "speculative Metrics", "retracted", "Retract request", "#retracted_reqs: 3", "out of memory", "OutOfMemoryError",
           "OOM", "preempted", "PreemptionMode", "spec_verify_ct: 3", "'accept_length': 2.5", "completion_tokens: 9",
           "predicted_n", "draft_n_accepted", "num_spec_steps", "mean_tpot_ms", "ms per token", "draft acceptance",
           "#mean acc len", "#gen drafts", " tg = ", "decoded ", "[METRIC] tpot=", "Serving Benchmark Result",
           "Speculative Decoding", "Mean TPOT (ms):", "Acceptance rate (%):", "Total generated tokens:",
           "Maximum request concurrency:", "Successful requests:", "num_draft_tokens", "n_drafted", "tpot", "ITL", "Accept", "draft", "position 3", "Mean", ":", "=", " ", ",", "|", "*", "`", "0", "7",
           "1.5", "[METRIC]", "INFO", "pid=", "\u00e9", "requests", "Successful", "n_predict", "tg", "ms", "TTFT"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | st.text(alphabet="abcdefgMNOPT:=.# 0123456789", max_size=6), max_size=8))
def test_a_line_without_the_words_holds_nothing(parts):
    line = "".join(parts)
    if not _maybe_ours(line.translate(_ZERO)):
        assert "Decode batch" not in line and parse_other(line + "\n", 1) is None


@pytest.mark.parametrize("block", [1 << 21, 30011])
def test_sglang_lines_switching_batch_size_every_line_read_the_same(tmp_path, monkeypatch, block):
    """A ramp: #running-req changes line to line (every block holds several batch sizes, each bin's sum of
    accept lengths gathered across them in line order), with prefill lines between and some lines dropping
    their accept len but not their accept rate (1 in the artifact's bins)."""
    monkeypatch.setattr(log_blocks, "BLOCK_CHARS", block)
    rng = random.Random(block)
    lines = []
    for n in range(1, 60000):
        s = re.sub(r"#running-req: \d+", f"#running-req: {rng.choice([1, 2, 3, 8, 64])}", _sglang_line(rng, n))
        lines.append(re.sub(r"accept len: [\d.]+, (?=accept rate)", "", s) if rng.random() < 0.3 else s)
    path = tmp_path / "ramp.log"
    path.write_text("\n".join(lines) + "\n")
    new, ref = _both(path)
    assert new == ref
    rep = json.loads(new)
    assert len(rep["runs"][0]["tpot_by_batch"]) == 5 and rep["runs"][0]["dropped_after_prefill"] > 0


def test_wmtp_predict_and_the_cli_do_not_import_numpy():
    """numpy is imported by the block reader when it first reads a block, not by importing the commands."""
    code = "import sys, wmtp.predict, wmtp.cli.main, wmtp.log_analysis; assert 'numpy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
