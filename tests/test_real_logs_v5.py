"""The version corpus, round 5 (tests/data/real_v5/: guidellm's tables, AIPerf and AISBench tables at the widths real
consoles print them, TGI's and MLC-LLM's metrics, EvalScope's summaries before 2025-07; numbers ours, each format's
public source in the folder's README): the parsers behind each fix and the near misses they must leave alone (every
corpus file's own `wmtp logs` / `wmtp accept` check is tests/test_real_corpora.py's). Expected values are hand arithmetic
on the lines written here (in the comments)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpus_checks import logs_json as _logs  # noqa: E402
from corpus_checks import run as _run  # noqa: E402

V5 = Path(__file__).parent / "data" / "real_v5"
V4 = Path(__file__).parent / "data" / "real_v4"


def _accept(path: Path) -> dict:
    r = _run(["accept", str(path), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)["files"][0]


def _one_error(path: Path, *words):
    r = _run(["logs", str(path)])
    assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
    for w in words:
        assert w in r.output, r.output


def _write(tmp_path, text: str, name: str = "x.log") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --------------------------------------------------------------------------------------------- guidellm 0.3 / 0.7
_G03 = ("Benchmarks Stats:\n"
        "====================================================\n"
        "Metadata   | TTFT (ms)   || ITL (ms)    || TPOT (ms) |\n"
        "  Benchmark| mean| median| mean| median| mean| median\n"
        "-----------|-----|-------|-----|-------|-----|-------\n"
        "{row}\n"
        " throughput|900.0|  880.0| 36.0|   35.8| 44.6|   44.5\n")


def test_guidellm_03_reads_the_itl_section_of_the_first_row_not_its_tpot(tmp_path):
    # sections: Metadata 1 column, TTFT 2 (`||`), ITL 2, TPOT 2 (the last: one bar fewer) -> ITL mean is cell 3 of 7
    p = _write(tmp_path, _G03.format(row="constant@4.00|110.0|  108.5| 18.0|   17.9| 19.9|   19.8"))
    out = _logs(p)
    assert out["tpot_ms"] == pytest.approx(18.0) and "ITL" in out["tpot"]["estimator"]  # not the TPOT 19.9 or 36.0


def test_guidellm_03_row_without_an_itl_value_gives_no_tpot(tmp_path):
    p = _write(tmp_path, _G03.format(row="synchronous|110.0|  108.5|   --|     --| 19.9|   19.8"))
    _one_error(p, "no usable")  # the first row's ITL is `--`: nothing, not its TPOT nor the second row's ITL


def test_guidellm_07_itl_median_of_the_merged_header(tmp_path):
    text = ("| Benchmark   | TTFT          || ITL         || TPOT        ||\n"
            "| Strategy    | ms            || ms          || ms          ||\n"
            "|             | Mdn   | p95   | Mdn  | p95  | Mdn  | p95  |\n"
            "|-------------|-------|-------|------|------|------|------|\n"
            "| poisson     | 150.0 | 190.2 | 24.0 | 26.5 | 25.3 | 27.8 |\n")
    out = _logs(_write(tmp_path, text))
    assert out["tpot_ms"] == pytest.approx(24.0) and "Mdn" in out["tpot"]["estimator"]  # cell 3 of 7, not TPOT 25.3


@pytest.mark.parametrize("text", [
    # a token table (no ITL group): its rows are no latency
    "| Benchmark   | Output Tok     ||\n| Strategy    | Per Req        ||\n|             | Mdn   | p95   |\n"
    "| synchronous | 100.0 | 100.0 |\n",
    # a sections row without an ITL section
    "Metadata   | TPOT (ms)   ||\n  Benchmark| mean| median\nsynchronous| 20.9|   20.8\n",
    # a strategy row with no header before it
    "| synchronous | 2.1 | 2.2 | 110.0 | 128.4 | 20.0 | 21.9 |\n",
])
def test_guidellm_near_misses_give_no_tpot(tmp_path, text):
    _one_error(_write(tmp_path, text), "no usable")


# ---------------------------------------------------------------------- box-table cells wrapped over several rows
def _box(rows):
    return "".join("│ " + a.rjust(17) + " │ " + b.rjust(6) + " │ " + c.rjust(6) + " │\n" for a, b, c in rows)


def test_a_label_wrapped_over_rows_names_the_first_rows_value(tmp_path):
    rows = [("Request", "2,800.00", "190.0"), ("Latency", "", ""), ("(ms)", "", ""),  # request latency: not a TPOT
            ("Inter", "15.00", "2.10"), ("Token", "", ""), ("Latency", "", ""), ("(ms)", "", "")]
    out = _logs(_write(tmp_path, _box(rows)))
    assert out["tpot_ms"] == pytest.approx(15.0)  # `Inter Token Latency (ms)` joined: its avg 15.00


def test_a_wrapped_token_weighted_row_wins_over_the_per_request_mean(tmp_path):
    rows = [("Acceptance Length", "2.90", "1.50"), ("(ratio)", "", ""), ("Token-Weighted", "2.50", "N/A"),
            ("Acceptance Length", "", ""), ("(ratio)", "", "")]
    out = _logs(_write(tmp_path, _box(rows)))
    assert out["accept_length"] == pytest.approx(2.50) and "Token-Weighted" in out["al"]["estimator"]


def test_fragments_without_a_starting_row_and_markdown_rows_are_not_joined(tmp_path):
    # a continuation with no row of numbers before it; a markdown table's empty cells (no box) never continue a label
    text = _box([("Token", "", ""), ("Latency (ms)", "", "")]) + "| Inter | 15.00 | 2.1 |\n| Token Latency (ms) | | |\n"
    _one_error(_write(tmp_path, text), "no usable")


# ------------------------------------------------------------------------------- AIPerf's accepted-draft histogram
def test_a_histogram_line_alone_gives_al_and_per_position_rates(tmp_path):
    # 1 + (0x40 + 1x30 + 2x20 + 3x10) / 100 = 2.00; reached: 60 %, 30 %, 10 %
    p = _write(tmp_path, "  Accepted-draft histogram (% steps):  0: 40%   1: 30%   2: 20%   3: 10%\n")
    assert _logs(p)["accept_length"] == pytest.approx(2.0)
    f = _accept(p)
    assert f["accept_length"] == pytest.approx(2.0) and f["measured_depth"] == 4
    assert [a["alpha"] for a in f["alphas"]] == pytest.approx([0.6, 0.5, 1 / 3])  # 0.6, 0.3 / 0.6, 0.1 / 0.3
    assert all(a["ci95"] is None for a in f["alphas"])  # percentages: no step count, no interval


def test_the_2026_histogram_label_gives_per_position_rates_beside_the_token_weighted_al():
    # real_v4: 0: 10%  1: 10%  2: 0%  3: 80% -> reached 0.9, 0.8, 0.8: alpha 0.9, 0.8/0.9, 1.0; AL stays 3.50
    al = _logs(V4 / "aiperf-2026-llm-metrics-then-spec-decode-section.log")["al"]
    assert al["value"] == pytest.approx(3.5) and al["per_position"] == pytest.approx([0.9, 0.8, 0.8])


@pytest.mark.parametrize("line", ["  Accepted-draft histogram (% steps):  0: 50%   2: 50%\n",  # a bin missing
                                  "  Accepted-draft histogram (% steps):  0: 30%   1: 30%\n"])  # 60 %: not all steps
# (a lone `0: 100%` is no broken line: the run that accepted no draft, AL 1; tests/test_real_logs_v22.py)
def test_a_broken_histogram_line_is_garbled_not_read(tmp_path, line):
    r = _run(["logs", str(_write(tmp_path, line)), "--json"])
    assert r.exit_code == 1 and r.output.startswith("error: ") and "1 garbled" in r.output, r.output


# ----------------------------------------------------------------------------------- AISBench under 60 columns
@pytest.mark.parametrize("piece, tpot", [("│ TPOT                     │ total   │ 30.0 ms", 30.0),
                                         ("│ TPOT                     │ total   │ 0.03 s", 30.0),
                                         ("│ TPOT                     │ total   │ 30.0 m", None),  # its unit cut
                                         ("│ TPOT                     │ total   │ 30.0", None),
                                         ("│ TPOT                     │ total   │ 3", None)])
def test_an_aisbench_row_cut_after_its_average_cell(tmp_path, piece, tpot):
    p = _write(tmp_path, piece + "\n         │ 29.8 ms         │ 30.3 ms\n")
    if tpot is None:
        _one_error(p, "no usable")
    else:
        assert _logs(p)["tpot_ms"] == pytest.approx(tpot)


# ------------------------------------------------------------------------------ text-generation-inference /metrics
_TGI = ("tgi_request_skipped_tokens_sum 300\ntgi_request_skipped_tokens_count 210\n"
        "tgi_request_mean_time_per_token_duration_sum 0.25\ntgi_request_mean_time_per_token_duration_count 10\n")


def test_tgi_decode_batches_over_al_beat_the_prefill_biased_mean(tmp_path):
    # AL 1 + 300 / (210 - 10 prefill generations) = 2.5; step 2.0 s / 40 batches = 50 ms -> TPOT 50 / 2.5 = 20 ms
    p = _write(tmp_path, _TGI + 'tgi_batch_inference_duration_sum{method="decode"} 2.0\n'
               'tgi_batch_inference_duration_count{method="decode"} 40\n'
               'tgi_batch_inference_duration_sum{method="prefill"} 9.0\n'
               'tgi_batch_inference_duration_count{method="prefill"} 4\n')  # (prefill batches: not summed in)
    out = _logs(p)
    assert out["accept_length"] == pytest.approx(2.5) and out["tpot_ms"] == pytest.approx(20.0)
    assert out["tpot"]["confidence"] == "high" and "decode" in out["tpot"]["estimator"]


def test_tgi_without_decode_batches_falls_back_to_the_mean_said_to_include_prefill(tmp_path):
    p = _write(tmp_path, _TGI + 'tgi_batch_inference_duration_sum{method="prefill"} 9.0\n'
               'tgi_batch_inference_duration_count{method="prefill"} 4\n')
    out = _logs(p)
    assert out["tpot_ms"] == pytest.approx(25.0)  # 0.25 s / 10 requests
    assert out["tpot"]["confidence"] == "low" and "prefill included" in out["tpot"]["estimator"]


def test_tgi_skipped_tokens_without_a_request_count_say_so(tmp_path):
    p = _write(tmp_path, "tgi_request_skipped_tokens_sum 300\ntgi_request_skipped_tokens_count 200\n")
    al = _logs(p)["al"]
    assert al["value"] == pytest.approx(2.5) and "no request count" in al["estimator"]  # 1 + 300 / 200


def test_another_engines_batch_duration_is_not_tgis(tmp_path):
    p = _write(tmp_path, 'vllm:batch_inference_duration_sum{method="decode"} 2.0\n'
               'vllm:batch_inference_duration_count{method="decode"} 40\n')
    _one_error(p, "no usable")


# ----------------------------------------------------------------------------------------- MLC-LLM metrics
def test_mlc_json_pretty_printed_with_four_spaces_reads_as_one_line(tmp_path):
    doc = json.loads((V5 / "mlc-llm-engine-metrics-jq-pretty-2025.json").read_text())
    (tmp_path / "a.json").write_text(json.dumps(doc, indent=4))
    (tmp_path / "b.json").write_text(json.dumps(doc))
    a, b = _logs(tmp_path / "a.json"), _logs(tmp_path / "b.json")
    assert a["accept_length"] == b["accept_length"] == pytest.approx(2.5)  # 2500 / 1000
    assert a["lines"] == len(json.dumps(doc, indent=4).splitlines())  # the joined lines keep their numbers


def test_the_array_joiner_leaves_other_arrays_and_log_lines_alone():
    from io import StringIO

    from wmtp.log_wrap import ArraysJoined, pretty_json
    text = '{\n  "names": [\n    "a",\n    "b"\n  ],\n  "accept_count": [\n    3,\n    1\n  ]\n}\n'
    got = list(ArraysJoined(StringIO(text)))
    assert got[1:5] == ['  "names": [\n', '    "a",\n', '    "b"\n', '  ],\n'] and len(got) == len(text.splitlines())
    assert got[5] == '"accept_count": [ 3, 1 ]\n' and got[6:8] == ["\n", "\n"]
    assert pretty_json(text) and not pretty_json('[2026-01-02 10:00:00] "accept_count": [\n')


def test_mlc_metrics_text_gives_al_and_rates(tmp_path):
    f = _accept(V5 / "mlc-llm-serve-metrics-prometheus-text-2025.log")
    assert f["accept_length"] == pytest.approx(2.2) and f["measured_depth"] == 3  # 1 + 0.75 + 0.45
    assert [a["alpha"] for a in f["alphas"]] == pytest.approx([0.75, 0.6])  # rates 0.75, 0.45: 0.45 / 0.75 = 0.6


@pytest.mark.parametrize("text, al", [
    ("spec_decode_accept_len_accept_len{step=0}\t1.0\nspec_decode_accept_len_accept_len{step=2}\t2.2\n", None),  # gap
    ("spec_decode_accept_len_accept_len{step=0}\t1.0\nspec_decode_accept_len_accept_len{step=1}\t1.6\n"
     "spec_decode_accept_prob_accept_prob{step=1}\t0.6\n", 1.6),
])
def test_mlc_metrics_text_needs_every_step(tmp_path, text, al):
    p = _write(tmp_path, text)
    if al is None:
        _one_error(p, "no usable")
    else:
        assert _logs(p)["accept_length"] == pytest.approx(al)


# ----------------------------------------------------------------------------------- EvalScope before 2025-07
def test_an_evalscope_summary_with_package_rows_sets_its_tpot_row_aside(tmp_path):
    # (8.2 - 0.2) / (201 - 1) s = 40 ms, not the row's 5.1 ms (102.5 s / 20100 tokens)
    rows = [("Average latency (s)", "8.2"), ("Average time to first token (s)", "0.2"),
            ("Average time per output token (s)", "0.0051"), ("Average output tokens per request", "201.0"),
            ("Average package latency (s)", "0.04")]
    out = _logs(_write(tmp_path, "".join(f"| {a:<35} | {b:<8} |\n" for a, b in rows)))
    assert out["tpot_ms"] == pytest.approx(40.0) and "EvalScope before 2025-07" in " ".join(out["notes"])


def test_an_old_evalscope_summary_without_latency_is_one_error_naming_why(tmp_path):
    p = _write(tmp_path, " Average time per output token: 0.00510\n Average package per request: 199.000\n")
    _one_error(p, "no usable", "EvalScope before 2025-07")


def test_a_2025_evalscope_summary_with_an_itl_row_keeps_its_tpot_row(tmp_path):
    rows = [("Average latency (s)", "8.2"), ("Average time to first token (s)", "0.2"),
            ("Average time per output token (s)", "0.0400"), ("Average inter-token latency (s)", "0.0399"),
            ("Average output tokens per request", "201")]
    out = _logs(_write(tmp_path, "".join(f"| {a:<35} | {b:<8} |\n" for a, b in rows)))
    assert out["tpot_ms"] == pytest.approx(40.0) and out["tpot"]["estimator"] == "bench summary Mean TPOT"


@pytest.mark.parametrize("text", ["Average latency: 120 ms\n",  # another tool's line: no EvalScope summary
                                  " Average latency: 8.200\n Average time to first token: 0.200\n"])
def test_unit_less_latency_labels_alone_give_nothing(tmp_path, text):
    _one_error(_write(tmp_path, text), "no usable")


# ---------------------------------------------------------------------------- AIPerf / genai-perf JSON export
@pytest.mark.parametrize("text, itl", [
    ('{\n  "inter_token_latency": {\n    "unit": "ms",\n    "avg": 12.5,\n    "p50": 12.4\n  }\n}\n', 12.5),
    ('{\n  "inter_token_latency": {\n    "unit": "sec",\n    "avg": 0.0125\n  }\n}\n', 12.5),  # another time unit
    ('{"inter_token_latency": {"unit": "ms", "avg": 12.5, "p99": 13.3}}\n', 12.5),  # one line
    ('{"inter_token_latency": {"unit": "ns", "avg": 12500000.0}}\n', 12.5),
])
def test_aiperf_json_export_itl_object(tmp_path, text, itl):
    out = _logs(_write(tmp_path, text, "e.json"))
    assert out["tpot_ms"] == pytest.approx(itl) and "ITL" in out["tpot"]["estimator"]


@pytest.mark.parametrize("text", [
    '{\n  "time_to_first_token": {\n    "unit": "ms",\n    "avg": 400.0\n  }\n}\n',  # another metric's avg
    '{\n  "inter_token_latency": {\n    "unit": "tokens",\n    "avg": 12.5\n  }\n}\n',  # not a time
    '{\n  "inter_token_latency": {\n    "unit": "ms",\n    "p1": 1,\n    "p5": 2,\n    "p10": 3,\n    "avg": 12.5\n'
    '  }\n}\n',  # its avg too far from the key (not AIPerf's field order)
])
def test_aiperf_json_export_near_misses_give_no_tpot(tmp_path, text):
    _one_error(_write(tmp_path, text, "e.json"), "no usable")
