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
from wmtp.log_input import open_text

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
    assert ref["accept_length"] == out["accept_length"]
    return out


def _accept(path) -> float:
    r = CliRunner().invoke(app, ["accept", str(path), "--json"])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    return json.loads(r.output)["files"][0]["accept_length"]


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


LLAMA_SERVER = """\
slot print_timing: id  0 | task 0 |
prompt eval time =   12,345.67 ms /  1,024 tokens (   12.06 ms per token,    82.95 tokens per second)
       eval time =   23,456.78 ms /  2,160 tokens (   10.86 ms per token,    92.08 tokens per second)
      total time =   35,802.45 ms /  3,184 tokens
draft acceptance rate = 0.57130 ( 1,234 accepted /  2,160 generated)
"""
LLAMA_SPECULATIVE = """\
decoded 2,345 tokens in   25.000 seconds, speed:   93.800 t/s

n_draft   = 16
n_predict = 2,345
n_drafted = 1,800
n_accept  = 1,200
accept    = 66.667%
"""


def test_thousands_separators_in_llama_cpp_lines(tmp_path):
    """llama-server: TPOT = the printed 10.86 ms per token; AL = eval tokens / (eval tokens - accepted) =
    2160 / (2160 - 1234). llama-speculative: TPOT = 25 s / 2345 tokens; AL = 2345 / (2345 - 1200)."""
    p = tmp_path / "server.log"
    p.write_text(LLAMA_SERVER)
    out = _both(p)
    assert out["tpot_ms"] == pytest.approx(10.86) and out["accept_length"] == pytest.approx(2160 / 926)
    assert _accept(p) == pytest.approx(2160 / 926)
    p.write_text(LLAMA_SPECULATIVE)
    out = _both(p)
    assert out["tpot_ms"] == pytest.approx(25000 / 2345) and out["accept_length"] == pytest.approx(2345 / 1145)


V1_PAIR = ("(APIServer pid=7) INFO 06-16 10:03:14 [loggers.py:87] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
           "Avg generation throughput: 120.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, "
           "Prefix cache hit rate: 0.0%\n"
           "(APIServer pid=7) INFO 06-16 10:03:14 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.50, "
           "Accepted throughput: 72.0 tokens/s, Drafted throughput: 144.0 tokens/s, Accepted: 720 tokens, Drafted: "
           "1440 tokens, Per-position acceptance rate: 0.700, 0.500, 0.300, Avg Draft acceptance rate: 50.0%\n")


def test_tabs_between_labels_and_values_in_engine_lines(tmp_path):
    """vLLM V1: TPOT = 3 reqs / 120 tokens/s = 25 ms; AL = 1 + 720 / (1440 / 3) = 2.5. llama.cpp and a
    bench summary with tabs: the printed values."""
    p = tmp_path / "tabs.log"
    p.write_text(V1_PAIR.replace(": ", ":\t") * 3)
    out = _both(p)
    assert out["tpot_ms"] == pytest.approx(25.0, rel=BIN) and out["accept_length"] == pytest.approx(2.5)
    assert _accept(p) == pytest.approx(2.5)
    p.write_text(LLAMA_SPECULATIVE.replace(" = ", "\t=\t").replace("decoded ", "decoded\t"))
    out = _both(p)
    assert out["tpot_ms"] == pytest.approx(25000 / 2345) and out["accept_length"] == pytest.approx(2345 / 1145)
    p.write_text("Successful requests:\t4\nMean TPOT (ms):\t\t9.50\nMean ITL (ms):\t9.40\n")
    assert _both(p)["tpot_ms"] == pytest.approx(9.5)


def _wrap(text: str, width: int) -> str:
    """What a terminal `width` columns wide leaves of `text` when copied: every line cut into pieces."""
    out = []
    for line in text.splitlines():
        out += [line[i:i + width] for i in range(0, max(len(line), 1), width)]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("width", [80, 120])
def test_terminal_wrapped_engine_lines(tmp_path, width):
    """Lines cut at the terminal's width read as the whole lines (a first line the paste's author added may
    be longer); the results name the lines where the joined lines began."""
    head = "# source: a paste from a terminal, with a comment line longer than the terminal is wide " * 2 + "\n"
    p = tmp_path / "wrapped.log"
    p.write_text(head + _wrap(V1_PAIR * 3, width))
    out = _both(p)
    assert out["tpot_ms"] == pytest.approx(25.0, rel=BIN) and out["accept_length"] == pytest.approx(2.5)
    assert _accept(p) == pytest.approx(2.5)
    first, last = out["tpot"]["lines"]
    lines = p.read_text().splitlines()
    assert "Engine 000" in lines[first - 1] and "Engine 000" in lines[last - 1]
    p.write_text(head + _wrap(SGL * 3 + VLLM_V0, width))  # SGLang decode lines, then a V0 line: SGLang's TPOT
    out = _both(p)
    assert out["tpot_ms"] == pytest.approx(8 / 171.01 * 1e3, rel=BIN) and out["accept_length"] == pytest.approx(2.90)


def test_a_line_cut_once_at_an_unusual_width_is_one_error_line(tmp_path):
    """One cut at 110 columns (not a usual width), before `Running:`, nothing else to tell the width by: not read, said in one line."""
    p = tmp_path / "cut.log"
    p.write_text(_wrap(VLLM_V0, 110))
    assert "Running" not in p.read_text().splitlines()[0]
    r = CliRunner().invoke(app, ["logs", str(p)])
    assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1


def test_unwrapped_reads_the_same_in_chunks_and_by_lines(tmp_path):
    p = tmp_path / "wrapped.log"
    p.write_text(_wrap(V1_PAIR * 40 + SGL * 40, 80))
    with open_text(p) as f:
        lines = list(f)
    with open_text(p) as f:
        chunks = "".join(iter(lambda: f.read(1000), ""))
    assert "".join(lines) == chunks and len(lines) == p.read_text().count("\n")
    assert sum("Engine 000: " in ln and "Prefix cache hit rate: 0.0%" in ln for ln in lines) == 40


def test_colour_codes_that_first_appear_after_the_first_64_kib(tmp_path):
    """100 KiB of plain access lines, then coloured decode lines: TPOT = 8 / 171.01 tokens/s, AL 2.90."""
    plain = 'INFO:     127.0.0.1:40052 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    coloured = SGL.replace("171.01", "\x1b[32m171.01\x1b[0m").replace("Decode batch", "\x1b[1mDecode batch\x1b[0m")
    p = tmp_path / "late.log"
    p.write_text(plain * (100 * 1024 // len(plain)) + coloured * 3)
    assert p.read_bytes().find(b"\x1b") > 100 * 1024
    out = _both(p)
    assert out["tpot_ms"] == pytest.approx(8 / 171.01 * 1e3, rel=BIN) and out["accept_length"] == pytest.approx(2.90)


def test_spec_decoding_line_without_its_counts_gives_its_printed_al(tmp_path):
    """A SpecDecoding line the author shortened (no Accepted/Drafted) and wrapped: AL = the printed 2.74."""
    p = tmp_path / "short.log"
    p.write_text("SpecDecoding metrics: Mean acceptance length: 2.74, Per-position acceptance rate:\n"
                 "0.579, 0.447, 0.316, 0.237, 0.158, Avg Draft acceptance rate: 34.7%\n")
    assert _both(p)["accept_length"] == pytest.approx(2.74) and _accept(p) == pytest.approx(2.74)


def test_llama_statistics_of_the_request_win_over_the_inferred_al(tmp_path):
    """Statistics whose accepted tokens are the request's (36 = 36): AL = 1 + 36 / 18 drafts, not the
    inference 57 / (57 - 36) from eval tokens; statistics of other requests (20 != 128) do not."""
    eval_line = "       eval time =    1287.69 ms /    57 tokens (   22.59 ms per token,    44.27 tokens per second)\n"
    stats = ("statistics mtp: #calls(b,g,a) = 1 20 18, #gen drafts = 18, #acc drafts = 18, #gen tokens = 36, "
             "#acc tokens = 36, dur(b,g,a) = 0.004, 143.316, 0.009 ms\n")
    p = tmp_path / "stats.log"
    p.write_text(eval_line + "draft acceptance rate = 1.00000 (   36 accepted /    36 generated)\n" + stats)
    assert _both(p)["accept_length"] == pytest.approx(3.0)
    p.write_text(eval_line + "draft acceptance rate = 0.68449 (  28 accepted /    30 generated)\n" + stats)
    assert _both(p)["accept_length"] == pytest.approx(57 / (57 - 28))
