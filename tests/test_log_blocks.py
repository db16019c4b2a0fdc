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

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from wmtp import log_blocks
from wmtp.calibrate.log_benchmark import FORMATS, _sglang_line, generate
from wmtp.errors import WmtpError
from wmtp.log_analysis import analyse
from wmtp.log_blocks import _ZERO
from wmtp.log_layout import maybe_ours as _maybe_ours
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


def _decode_line(ts: int, run: str, tok: str, al: str, thr: str, usage: str = "0.41") -> str:
    return (f"[2026-11-01 00:{ts // 60 % 60:02d}:{ts % 60:02d} TP0] Decode batch. #running-req: {run}, #token: {tok}, "
            f"token usage: {usage}, accept len: {al}, cuda graph: True, gen throughput (token/s): {thr}, #queue-req: 0")


@pytest.mark.parametrize("odd", ["points", "long", "non-ascii", "out-of-range"])
def test_decode_numbers_in_other_plain_shapes_read_the_same(tmp_path, monkeypatch, odd):
    """Decode lines whose numbers `wmtp.log_batch.decode_fixed` reads from the bytes (points in running and
    tokens, leading zeros, 15 digits) or leaves to the texts (16 digits, a non-ASCII skeleton), or whose
    numbers fail the range checks, mixed with plain lines: the same report as the per-line reader."""
    monkeypatch.setattr(log_blocks, "BLOCK_CHARS", 30011)
    rng = random.Random(odd)
    shapes = {"points": lambda: (f"{rng.randint(1, 9)}.{rng.randint(0, 99)}", f"{rng.randint(1, 10**6)}.5",
                                 f"00{rng.uniform(1, 7):.3f}", f"{rng.uniform(0, 10**9):.5f}"),
              "long": lambda: ("2", f"{rng.randint(1, 10**6):016d}", "2.5",
                               f"{rng.randint(10**10, 10**11)}.{rng.randint(0, 10**6)}"),
              "non-ascii": lambda: ("2", "123", f"{rng.uniform(1, 7):.2f}", f"{rng.uniform(0, 999):.2f}"),
              "out-of-range": lambda: ("2", "123", rng.choice(["0.5", "1000.01", "2"]), "1000000000000.5")}[odd]
    taken = []
    real = log_blocks.decode_fixed
    monkeypatch.setattr(log_blocks, "decode_fixed", lambda *a: taken.append(real(*a)) or taken[-1])
    lines = []
    for n in range(6000):
        if rng.random() < 0.2:
            lines.append(_decode_line(n // 7, *shapes(), usage="0.41\u00e9" if odd == "non-ascii" else "0.41"))
        else:
            lines.append(_decode_line(n // 7, "2", str(rng.randint(1, 10**6)), f"{rng.uniform(1, 7):.2f}",
                                      f"{rng.uniform(50, 300):.2f}"))
    path = tmp_path / f"{odd}.log"
    path.write_text("\n".join(lines) + "\n")
    new, ref = _both(path)
    assert new == ref
    kinds = {"points": {"ok"}, "long": {False}, "non-ascii": {False}, "out-of-range": {None}}[odd]
    assert {"ok" if type(t) is tuple else t for t in taken} == kinds
    if odd != "out-of-range":
        assert json.loads(new)["records"]["sglang_decode"] == 6000


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**15 - 1), st.integers(0, 14)), min_size=1, max_size=20))
def test_decode_fixed_reads_what_float_reads(nums):
    """Throughputs of up to 15 digits, any number of them after the point: what `float` reads from the
    text, to the last bit, and tokens what `int` reads."""
    thr = [f"{m:0{k + 1}d}"[:-k] + "." + f"{m:0{k + 1}d}"[-k:] if k else str(m) for m, k in nums]
    tok = [str(m // 1000) for m, _ in nums]
    lines = [_decode_line(0, "3", t, "2.50", x) for t, x in zip(tok, thr)]
    raw = ("\n".join(lines) + "\n").encode()
    skels = raw.translate(log_blocks._ZERO_UTF8).split(b"\n")[:-1]
    descs = [log_blocks._SKELETONS[s] for s in skels]
    starts = np.cumsum([0] + [len(s) + 1 for s in skels])
    got = log_blocks.decode_fixed(raw, starts, list(range(len(lines))), descs, skels)
    want = [float(x) for x in thr]
    if max(want) > 1e12:
        assert got is None
        return
    assert got[1] == [int(t) for t in tok] and got[0] == [3] * len(lines) and got[2] == [2.5] * len(lines)
    assert [x.hex() for x in got[4]] == [x.hex() for x in want]


def test_decode_and_prefill_prefixes_of_several_lengths_read_the_same(tmp_path, monkeypatch):
    """Prefixes of several lengths in one block (each run of equal ones sliced once), short prefill lines
    last in a block after long prefixes (then read line by line), non-ASCII lines between."""
    monkeypatch.setattr(log_blocks, "BLOCK_CHARS", 4099)
    rng = random.Random(5)
    got = []
    real = log_blocks.Lines.prefixes
    monkeypatch.setattr(log_blocks.Lines, "prefixes", lambda *a: got.append(real(*a)) or got[-1])
    lines = []
    for n in range(8000):
        long = " ".join(f"{c}{c}{rng.randint(1, 3)}" for c in "ABCDEFGHIJ")
        s = _decode_line(n // 9, "2", str(rng.randint(1, 10**6)), f"{rng.uniform(1, 7):.2f}",
                         f"{rng.uniform(50, 300):.2f}")
        r = rng.random()
        if r < 0.2:
            s = s.replace(" TP0]", f" TP0 {long}]")
        elif r < 0.3:
            s = f"[00:00:{n // 9 % 60:02d} TP0{rng.choice(['', ' ' + long])}] Prefill batch."
        elif r < 0.31:
            s += " \u00e9"
        lines.append(s)
    path = tmp_path / "prefixes.log"
    path.write_text("\n".join(lines) + "\n")
    new, ref = _both(path)
    assert new == ref
    assert None in got and any(type(g) is list and len(set(map(len, g))) > 1 for g in got)
