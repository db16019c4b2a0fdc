"""The log reader's fast paths read exactly what its general paths read: the one-regex SGLang decode
path (`parse_sglang` on the common layouts) against the string-find path, on layouts and values meant to
sit on the edges (markdown, separators, NaN, out-of-range and huge numbers, a key inside a value);
`stream` handing decode lines to `SglangRuns.decode` against the records path; `num` without the
exception against float-then-regex; the benchmark's generated logs (every format) through `analyse`."""

from __future__ import annotations

import math
import random
from pathlib import Path

from hypothesis import given, settings, strategies as st

from wmtp.calibrate.log_benchmark import FORMATS, generate
from wmtp.log_analysis import analyse
from wmtp.log_records import NUM_RE, num
from wmtp.logs import DecodeLine, ParseStats, PrefillLine, _parse_sglang_general, parse_sglang, stream
from wmtp.logstats import SglangRuns, estimate_segments

DATA = Path(__file__).parent / "data"
LAYOUTS = [  # {0}..{6}: running, tokens, accept len, accept rate, cuda graph, throughput, queue
    "Decode batch. #running-req: {0}, #token: {1}, token usage: 0.41, accept len: {2}, cuda graph: {4}, "
    "gen throughput (token/s): {5}, #queue-req: {6}",
    "Decode batch [12], #running-req: {0}, #full token: {1}, full token usage: 0.40, mamba num: 3, mamba usage: 0.02, "
    "accept len: {2}, accept rate: {3}, cuda graph: {4}, gen throughput (token/s): {5}, #queue-req: {6}",
    "Decode batch, #running-req: {0}, #token: {1}, token usage: 0.29, cuda graph: {4}, gen throughput (token/s): {5}, "
    "#queue-req: {6}, ",
    "Decode batch. #running-req: {0}, #token: {1}, token usage: 0.13, accept len: {2}, accept rate: {3}, "
    "gen throughput (token/s): {5}",
    "Decode batch, #running-req: {0}, #full token: {1}, full token usage: 0.4, accept len: {2}, cuda graph: {4}, "
    "gen throughput (token/s): {5}, #queue-req: {6},",
    "Decode batch. #running-req: {0}, #token: {1}, token usage: 0.13, accept len: {2}, pre-allocated usage: 0.1, "
    "#retracted-req: 2, cuda graph: {4}, gen throughput (token/s): {5}, #queue-req: {6}",
    "Decode batch, #running-req: {0}, #cached-token: {6}, #token: {1}, token usage: 0.13, accept len: {2}, "  # (2026)
    "accept rate: {3}, cuda graph: {4}, gen throughput (token/s): {5}, #queue-req: {6}",
]
PREFIXES = ["", "[2025-05-31 18:31:21 DP0 TP0] ", "[04:40:55 TP0] ", "(SGLangEngine pid=7) [2025-05-31 18:31:21 TP0] ",
            "INFO 05-31 18:31:22 [DP1 TP0 EP0 scheduler.py:12] ", "**[x]** ", "`[2025-05-31 18:31:21 TP0]` ", "+ "]
ODD = ["0", "00", "007", "1", "8", "3.5", "2.90", "0.5", "1000", "1000.01", "10000000", "10000001", "999999999999",
       "1000000000000", "1000000000001", "1e5", "1_000", "nan", "NaN", "inf", "-1", "-0", "+2", ".5", "3.", " 5", "5 ",
       "", "x", "1,5", "1:5", "**3**", "`3`", "True", "False", "true", "2.6 accept rate: 0.5", "4 #token: 9"]
value = st.sampled_from(ODD) | st.floats(0, 1e13, allow_nan=False).map(lambda x: f"{x:.2f}")


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(LAYOUTS), st.lists(value, min_size=7, max_size=7), st.sampled_from(PREFIXES),
       st.sampled_from(["", "\n", "\r\n", " \n", ", \n"]), st.integers(0, 400),
       st.sampled_from(["", "*", "`", ",", ": "]))
def test_fast_decode_path_reads_what_the_general_path_reads(layout, values, prefix, end, at, extra):
    cg = values[4] if values[4] in ("True", "False") else "True"
    line = prefix + layout.format(*values[:4], cg, *values[5:]) + end
    if extra:  # a stray character anywhere
        at %= len(line) + 1
        line = line[:at] + extra + line[at:]
    assert repr(parse_sglang(line, 7)) == repr(_parse_sglang_general(line, 7))


def test_fast_decode_path_takes_the_common_layouts():
    line = ("[2025-05-31 18:31:21 DP0 TP0] Decode batch [3], #running-req: 8, #full token: 37217, "
            "full token usage: 0.13, mamba num: 8, mamba usage: 0.02, accept len: 2.90, accept rate: 0.41, "
            "cuda graph: True, gen throughput (token/s): 171.01, #queue-req: 0\n")
    rec = parse_sglang(line, 1)
    assert rec == _parse_sglang_general(line, 1)
    assert (rec.running, rec.tokens, rec.accept_len, rec.accept_rate, rec.gen_throughput, rec.dp) == \
        (8, 37217, 2.9, 0.41, 171.01, 0)


def _runs_by_records(path):
    stats = ParseStats()
    return estimate_segments(stream(path, stats)), stats


def _runs_by_fields(path):
    stats, runs = ParseStats(), SglangRuns()
    for r in stream(path, stats, decode=runs.decode):
        if isinstance(r, (DecodeLine, PrefillLine)):
            runs.add(r)
    return runs.estimates(), stats


def test_stream_hands_decode_lines_to_the_runs_as_the_records_would(tmp_path):
    lines = (DATA / "sglang_decode.log").read_text().splitlines()
    rng = random.Random(3)
    mixed = tmp_path / "mixed.log"  # the fixture's lines shuffled, some decorated (general path), some truncated
    mixed.write_text("\n".join(rng.choice(["**", "", "", ""]) + rng.choice(lines)[:rng.choice([400, 400, 60])]
                               for _ in range(3000)) + "\n")
    for path in (DATA / "sglang_decode.log", mixed, *sorted((DATA / "real").glob("sglang-*.log"))):
        a, sa = _runs_by_records(path)
        b, sb = _runs_by_fields(path)
        assert [s.to_dict() for s in a] == [s.to_dict() for s in b], path
        assert sa == sb, path


def _num_reference(v):  # float(), else the first number: what `num` did before it spared the exception
    if v is None:
        return None
    try:
        x = float(v)
    except ValueError:
        m = NUM_RE.search(v)
        if not m:
            return None
        x = float(m.group(0))
    return x if math.isfinite(x) else math.nan


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=" \t\u00a05.e-+_%xinfaINFA0123456789", max_size=12)
       | st.sampled_from(["535.49 tokens/s", " 75.6%", " 9 reqs", " 1_000", "Infinity", "nan x", "1e400", "-inf %"])
       | st.floats() | st.integers())
def test_num_reads_as_float_then_regex(v):
    assert repr(num(v)) == repr(_num_reference(v))


def test_benchmark_logs_of_every_format_are_read(tmp_path):
    for fmt in FORMATS:
        path = tmp_path / f"{fmt}.log"
        n = generate(path, 1, fmt=fmt)
        rep = analyse(path)
        assert rep["lines"] == n and rep["tpot_ms"] is not None and rep["accept_length"] is not None, fmt
        assert rep["garbled"] < n / 20, fmt
