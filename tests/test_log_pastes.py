"""What users' pastes do to real lines (found running `wmtp logs` / `wmtp accept` on new real excerpts in
tests/data/real/ and on hostile variants of every file there): colour codes around keys and numbers,
tabs for spaces, thousands separators in a custom summary, several `label: value` pairs on one line, a
bench summary cut before its TPOT and ITL values. Expected values are hand arithmetic on the lines'
own numbers; both readers (the block reader of `wmtp logs` and the per-line reference) must agree."""

from __future__ import annotations

import io
import json

import pytest
from typer.testing import CliRunner

from wmtp.cli.main import app
from wmtp.log_analysis import analyse
from wmtp.log_summary import NoAnsi, parse_label

BIN = 0.001  # TPOT medians come from log-spaced bins 0.1 % wide


def _logs(path) -> dict:
    r = CliRunner().invoke(app, ["logs", str(path), "--json"])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    return json.loads(r.output)[0]


def _both(path) -> dict:
    """`wmtp logs`'s reading, checked against the per-line reference reader."""
    out = _logs(path)
    ref = analyse(path, reference=True)
    assert (ref["tpot"] and ref["tpot"]["value_ms"]) == out["tpot_ms"]
    return out


VLLM_V0 = ("INFO 02-28 21:48:18 metrics.py:161] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
           "44.9 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 82.1%, "
           "CPU KV cache usage: 0.0%\n")
SGL = ("[2025-05-31 18:31:21 DP0 TP0] Decode batch. #running-req: 8, #token: 37217, token usage: 0.13, "
       "accept len: 2.90, cuda graph: True, gen throughput (token/s): 171.01, #queue-req: 0\n")


@pytest.mark.parametrize("line, tpot_ms, al", [(VLLM_V0, 2 / 44.9 * 1e3, None), (SGL, 8 / 171.01 * 1e3, 2.90)])
def test_colour_codes_around_keys_and_numbers_read_as_plain_text(tmp_path, line, tpot_ms, al):
    green, bold, off = "\x1b[32m", "\x1b[1m", "\x1b[0m"
    coloured = line.replace("44.9", f"{green}44.9{off}").replace("171.01", f"{green}171.01{off}")
    coloured = coloured.replace("Avg generation throughput", f"{bold}Avg generation throughput{off}")
    coloured = coloured.replace("Decode batch", f"{bold}Decode batch{off}").replace("INFO", f"{green}INFO{off}")
    assert "\x1b" in coloured
    p = tmp_path / "coloured.log"
    p.write_text(coloured * 3)
    out = _both(p)
    assert out["tpot_ms"] == pytest.approx(tpot_ms, rel=BIN)
    assert out["accept_length"] == (pytest.approx(al) if al else None)


def test_no_ansi_never_cuts_an_escape_sequence_between_chunks():
    text = "a \x1b[32m12.5\x1b[0m b\nc \x1b[1;31md\x1b[0m\n" * 5
    f = NoAnsi(io.StringIO(text))
    chunks = iter(lambda: f.read(7), "")
    assert "".join(chunks) == "a 12.5 b\nc d\n" * 5


def test_tabs_for_spaces_in_an_sglang_decode_line(tmp_path):
    p = tmp_path / "tabs.log"
    p.write_text(SGL.replace(": ", ":\t") * 3)
    out = _both(p)
    assert out["tpot_ms"] == pytest.approx(8 / 171.01 * 1e3, rel=BIN) and out["accept_length"] == pytest.approx(2.90)


def test_several_label_value_pairs_on_one_line(tmp_path):
    """benchmark/mtbench/bench_sglang_eagle.py prints its result on one line."""
    p = tmp_path / "eagle.log"
    p.write_text("EAGLE-3:\n#questions: 80, Throughput: 276.30 token/s, Acceptance length: 5.36\n")
    assert _both(p)["accept_length"] == pytest.approx(5.36)
    p.write_text("#questions: 80, Throughput: 276.30 token/s\n")  # no acceptance length: nothing to read
    r = CliRunner().invoke(app, ["logs", str(p)])
    assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1


def test_thousands_separators_in_a_labelled_number():
    assert parse_label("Total generated tokens:                  15,728,640", 1).value == 15728640
    assert parse_label("Number of accepted tokens: 63,669", 1).value == 63669
    assert parse_label("Mean TPOT (ms):   1,234.5  ", 1).value == 1234.5
    assert parse_label("Mean TPOT (ms):   12,34", 1).value == 12  # not a thousands group: the first number


def test_custom_summary_with_thousands_separators(tmp_path):
    p = tmp_path / "custom.log"
    p.write_text("Total output tokens: 106,678\nNumber of draft proposals: 43,221\n"
                 "Number of draft tokens generated: 259,326\nNumber of accepted tokens: 63,669\n"
                 "Mean acceptance length: 2.47\n")
    assert _both(p)["accept_length"] == pytest.approx(1 + 63669 / 43221)


def test_bench_summary_cut_before_its_tpot_and_itl_values(tmp_path):
    """Every request 404 / 4 = 101 tokens: TPOT = (Mean E2E - Mean TTFT) / 100 = (1100 - 100) / 100 ms."""
    p = tmp_path / "cut.log"
    p.write_text("============ Serving Benchmark Result ============\nSuccessful requests:    4\n"
                 "Total generated tokens:    404\n----------------End-to-End Latency----------------\n"
                 "Mean E2E Latency (ms):    1100.00\n---------------Time to First Token----------------\n"
                 "Mean TTFT (ms):     100.00\n-----Time per Output Token (excl. 1st token)------\n")
    out = _both(p)
    assert out["tpot_ms"] == pytest.approx(10.0) and out["tpot"]["confidence"] == "low"
    assert out["tpot"]["lines"] == [2, 7]
    p.write_text(p.read_text() + "Mean TPOT (ms):     9.50\n")  # a printed TPOT wins
    assert _both(p)["tpot_ms"] == pytest.approx(9.5)


def test_thousands_separators_inside_engine_lines(tmp_path):
    """A comma inside a number groups its thousands; fields end at `, `. Hand values: vLLM V0 AL = emitted /
    (draft tokens / k) = 10616 / (13311 / 3); SGLang TPOT = 1010 / 1397.13 tokens/s."""
    v0 = ("INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.642, System efficiency: "
          "0.598, Number of speculative tokens: 3, Number of accepted tokens: 8,547, Number of draft tokens: 13,311, "
          "Number of emitted tokens: 10,616.\n")
    p = tmp_path / "v0.log"
    p.write_text(v0)
    assert _both(p)["accept_length"] == pytest.approx(10616 / (13311 / 3))
    sgl = ("Decode batch. #running-req: 1,010, #token: 55,006, token usage: 0.93, gen throughput (token/s): 1,397.13, "
           "#queue-req: 12,279\n")
    p.write_text(sgl * 3)
    assert _both(p)["tpot_ms"] == pytest.approx(1010 / 1397.13 * 1e3, rel=BIN)
    v1 = ("INFO 06-16 10:03:14 [loggers.py:87] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
          "throughput: 1,226.3 tokens/s, Running: 1,018 reqs, Waiting: 4 reqs, GPU KV cache usage: 57.9%\n")
    p.write_text(v1 * 3)
    assert _both(p)["tpot_ms"] == pytest.approx(1018 / 1226.3 * 1e3, rel=BIN)
