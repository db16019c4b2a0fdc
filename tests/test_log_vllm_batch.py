"""vLLM lines fed a block at a time (`wmtp.log_vllm_batch`, what `wmtp logs` runs) give what the per-line
reader (`analyse(..., reference=True)`) gives, to the last bit of every number: interleaved processes and
engines, `N Engines Aggregated:` lines (parsed line by line, so their blocks go the records' way), several
numbers of positions, lines without drafts, idle and prefill windows, out-of-range numbers, V0 and V1 lines
in one block, lines falling on block edges."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from wmtp import log_blocks
from wmtp.log_analysis import analyse
from wmtp.log_vllm_batch import VllmBatch, numbers_fixed


def _both(path) -> tuple:
    return tuple(json.dumps(analyse(path, reference=ref), sort_keys=True) for ref in (False, True))


def _v1_lines(rng: random.Random, n: int, odd: float) -> list[str]:
    """V1 throughput and spec lines of processes 11 and 12 (and engines 0-1, aggregated now and then), with
    access lines between; `odd`: the share of lines with something unusual."""
    out = []
    for i in range(n):
        sec = i // 3
        ts = f"11-0{1 + sec // 86400} {sec // 3600 % 24:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"
        pid = rng.choice([11, 12])
        pre = f"(APIServer pid={pid}) INFO {ts} [loggers.py:{rng.choice([271, 1012])}] "
        r = rng.random()
        if i % 3 == 0:
            run = 0 if rng.random() < odd else rng.randint(1, 64)
            prompt = f"{rng.uniform(0, 900):.1f}" if rng.random() < odd else "0.0"
            head = f"{rng.choice([2, 4])} Engines Aggregated" if r < odd / 2 else f"Engine {rng.choice(['000', '001'])}"
            out.append(f"{pre}{head}: Avg prompt throughput: {prompt} tokens/s, Avg generation throughput: "
                       f"{rng.uniform(1, 9000):.{rng.choice([1, 2])}f} tokens/s, Running: {run} reqs, Waiting: 0 reqs, "
                       f"GPU KV cache usage: 4.2%, Prefix cache hit rate: 0.0%")
        elif i % 3 == 1:
            k = rng.choice([3, 3, 3, 2, 4]) if rng.random() < odd * 3 else 3
            pos = sorted((rng.uniform(0.05, 0.95) for _ in range(k)), reverse=True)
            drafts = rng.randint(1, 4000)
            acc = round(drafts * sum(pos))
            dr = 0 if r < odd else drafts * k + rng.choice([0, 0, 1])  # Drafted / k: not always a whole number
            mean = f"{1 + acc / drafts:.2f}" if rng.random() >= odd else rng.choice(["1.00", "0.50"])
            if rng.random() < odd / 4:
                acc = 99999999999999  # out of range: the parsers' say
            out.append(f"{pre.replace('loggers.py:271', 'metrics.py:101')}SpecDecoding metrics: Mean acceptance "
                       f"length: {mean}, Accepted throughput: {acc / 10:.2f} tokens/s, Drafted throughput: "
                       f"{dr / 10:.2f} tokens/s, Accepted: {acc} tokens, Drafted: {dr} tokens, Per-position "
                       f"acceptance rate: {', '.join(f'{p:.{rng.choice([3, 3, 4])}f}' for p in pos)}, "
                       f"Avg Draft acceptance rate: {100 * acc / max(dr, 1):.1f}%")
        else:
            out.append(f"(APIServer pid={pid}) INFO:     127.0.0.1:{40000 + i} - \"POST /v1/completions HTTP/1.1\" 200 OK")
    return out


def _v0_lines(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        ts = f"11-01 00:{i // 600 % 60:02d}:{i // 10 % 60:02d}"
        if i % 2:
            steps = 300 * i + rng.randint(0, 99)
            out.append(f"INFO {ts} metrics.py:367] Speculative metrics: Draft acceptance rate: {rng.random():.3f}, "
                       f"System efficiency: 0.598, Number of speculative tokens: {rng.choice([3, 3, 5])}, Number of "
                       f"accepted tokens: {steps * 2}, Number of draft tokens: {steps * 3}, Number of emitted tokens: "
                       f"{steps * 3 + rng.randint(0, 9)}.")
        else:
            out.append(f"INFO {ts} metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
                       f"{rng.uniform(1, 900):.1f} tokens/s, Running: {rng.randint(0, 9)} reqs, Swapped: 0 reqs, "
                       "Pending: 0 reqs, GPU KV cache usage: 4.2%, CPU KV cache usage: 0.0%.")
    return out


def _counting(monkeypatch) -> list:
    """Each call of `VllmBatch.feed`: the kinds of the groups it took."""
    fed = []
    real = VllmBatch.feed
    monkeypatch.setattr(VllmBatch, "feed", lambda self, groups, last_of: fed.append([g[0] for g in groups]) or
                        real(self, groups, last_of))
    return fed


@pytest.mark.parametrize("block", [1 << 21, 30011, 997])
@pytest.mark.parametrize("odd", [0.0, 0.01, 0.05])
def test_v1_processes_engines_and_odd_lines_read_the_same(tmp_path, monkeypatch, block, odd):
    monkeypatch.setattr(log_blocks, "BLOCK_CHARS", block)
    fed = _counting(monkeypatch)
    rng = random.Random(block + int(odd * 100))
    path = tmp_path / "v1.log"
    path.write_text("\n".join(_v1_lines(rng, 60000, odd)) + "\n")
    new, ref = _both(path)
    assert new == ref
    rep = json.loads(new)
    assert rep["al"]["kind"] == "vLLM V1 SpecDecoding metrics" and rep["vllm_windows"]["samples"] > 0
    if odd == 0 or block < 30011:  # some blocks fed a column at a time (not where every one holds an odd line)
        assert fed and {"v1t", "v1s"} <= {k for f in fed for k in f}


@pytest.mark.parametrize("block", [1 << 21, 4099])
def test_v0_and_v1_lines_in_one_block_read_the_same(tmp_path, monkeypatch, block):
    """V0 and V1 spec lines share `SpecLines`' counts and accept-rate sums (in line order); V0 keeps the last
    line of its process, V1 pools its intervals."""
    monkeypatch.setattr(log_blocks, "BLOCK_CHARS", block)
    fed = _counting(monkeypatch)
    rng = random.Random(block)
    v1, v0 = _v1_lines(rng, 20000, 0.0), _v0_lines(rng, 20000)
    lines = [rng.choice([a, b]) for a, b in zip(v1, v0)]
    path = tmp_path / "v0v1.log"
    path.write_text("\n".join(lines))  # no final newline
    new, ref = _both(path)
    assert new == ref
    assert {"v0s", "v1s", "v0t"} <= {k for f in fed for k in f}


def test_a_v1_spec_line_split_across_blocks_reads_the_same(tmp_path, monkeypatch):
    """Blocks shorter than one spec line: each line is carried over block reads whole."""
    monkeypatch.setattr(log_blocks, "BLOCK_CHARS", 101)
    rng = random.Random(3)
    path = tmp_path / "split.log"
    path.write_text("\n".join(_v1_lines(rng, 3000, 0.0)) + "\n")
    new, ref = _both(path)
    assert new == ref
    assert json.loads(new)["records"]["vllm_spec"] == 1000


def _read(lines: list[str]) -> list:
    """`numbers_fixed` of `lines` (one skeleton, the block's first), as `wmtp.log_blocks` calls it."""
    raw = ("\n".join(lines) + "\n").encode()
    skels = raw.translate(log_blocks._ZERO_UTF8).split(b"\n")[:-1]
    key, kind, spans, _ = log_blocks._SKELETONS[skels[0]]
    starts = np.cumsum([0] + [len(s) + 1 for s in skels])
    return numbers_fixed(log_blocks._VKINDS[kind], np.frombuffer(raw, dtype=np.uint8), starts[:-1], spans, skels[0], key)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**16), st.integers(0, 15), st.integers(0, 10**8)), min_size=1, max_size=12),
       st.integers(1, 4))
def test_numbers_read_from_the_bytes_are_what_float_and_int_read(nums, k):
    """Generation throughputs and per-position rates of up to 16 digits, any number of them after the point,
    running counts and token counts: what `float` / `int` read from the text, to the last bit; None (the
    texts' way) past 15 digits, False past the parsers' range."""
    digits = 1 + max(len(str(m)) for m, _, _ in nums)
    width = max(digits, max(p for _, p, _ in nums) + 1)
    text = [f"{m:0{width}d}" for m, _, _ in nums]
    point = nums[0][1]
    thr = [t[:-point] + "." + t[-point:] if point else t for t in text]  # one skeleton: one shape
    lines = [f"(APIServer pid=7) INFO 11-01 00:00:00 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 "
             f"tokens/s, Avg generation throughput: {x} tokens/s, Running: {r % 10**6:07d} reqs, Waiting: 0 reqs, "
             "GPU KV cache usage: 4.2%, Prefix cache hit rate: 0.0%" for x, (_, _, r) in zip(thr, nums)]
    got = _read(lines)
    want = [[0.0] * len(nums), list(map(float, thr)), [r % 10**6 for _, _, r in nums]]
    if width > 15:
        assert got is None
    elif max(want[1]) > 1e12:
        assert got is False
    else:
        assert [[x.hex() for x in c] for c in got[:2]] == [[x.hex() for x in c] for c in want[:2]] and got[2] == want[2]
    rates = [", ".join(f"0.{(m + j) % 10**point:0{point}d}" if point else str((m + j) % 7) for j in range(k))
             for m, _, _ in nums]
    spec = [f"(APIServer pid=7) INFO 11-01 00:00:00 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
            f"1.50, Accepted throughput: 1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: {a:09d} tokens, "
            f"Drafted: {a * 3 % 10**9:09d} tokens, Per-position acceptance rate: {r}, Avg Draft acceptance rate: 1.0%"
            for (_, _, a), r in zip(nums, rates)]
    got = _read(spec)
    flat = [list(map(float, r.split(", "))) for r in rates]
    if point > 15 - 1:
        assert got is None
    else:
        assert got[1] == [a for _, _, a in nums] and got[2] == [a * 3 % 10**9 for _, _, a in nums]
        assert [[x.hex() for x in c] for c in got[3:]] == [[row[j].hex() for row in flat] for j in range(k)]


@pytest.mark.parametrize("block_chars", [None, 4096])
def test_windows_that_ran_prefill_are_left_out_of_the_tpot(tmp_path, monkeypatch, block_chars):
    """300 Engine windows at Running 1: odd ones ran prefill (prompt 800 tok/s, gen 10 tok/s: 100 ms), even ones
    did not (gen 50 tok/s: 20 ms). The decode rate is the prefill-free windows': 1 / 50 = 20 ms, whichever reader,
    also past the 200 displayed windows (where the block feed counts them)."""
    if block_chars:
        monkeypatch.setattr(log_blocks, "BLOCK_CHARS", block_chars)
    lines = []
    for i in range(300):
        ts = f"11-01 10:{i // 60:02d}:{i % 60:02d}"
        prompt, gen = ("800.0", "10.0") if i % 2 else ("0.0", "50.0")
        lines.append(f"(APIServer pid=7) INFO {ts} [loggers.py:271] Engine 000: Avg prompt throughput: {prompt} "
                     f"tokens/s, Avg generation throughput: {gen} tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
                     "GPU KV cache usage: 4.2%, Prefix cache hit rate: 0.0%")
    p = tmp_path / "v1.log"
    p.write_text("\n".join(lines) + "\n")
    fast, ref = _both(p)
    assert fast == ref
    d = json.loads(fast)
    t = d["tpot"]
    assert t["value_ms"] == pytest.approx(20.0, rel=0.001) and t["samples"] == 150
    assert "150 window(s) that also ran prefill left out" in d["vllm_windows"]["note"]
    # control: with no prefill-free window, every window counts (median of 150 x 100 ms and 150 x 20 ms is between)
    p.write_text("\n".join(ln.replace("Avg prompt throughput: 0.0", "Avg prompt throughput: 5.0") for ln in lines) + "\n")
    d = json.loads(_both(p)[0])
    assert d["tpot"]["samples"] == 300 and "diluted" in d["vllm_windows"]["note"]
