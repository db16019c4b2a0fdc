"""Layouts found in the sixth corpus sweep (tests/data/real/, 2026-12): Prometheus `/metrics` samples (vLLM / llama.cpp
spec-decode counters, SGLang's accept-length gauge, TPOT / inter-token latency histograms; exposition text or a Grafana
`metric{labels} | value` table), genai-perf / AIPerf metric tables (box-drawn rules, `Inter Token Latency (ms)` rows),
results-table headers without parentheses and cells with units, bench JSON `avg_per_output_token_latency`, timings
with `draft_rounds`. Expected values are worked by hand from the lines written here."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from test_log_formats5 import _logs, _refused, _write  # the same CLI helpers
from wmtp.cli.main import app
from wmtp.log_analysis import analyse

VLLM_PROM = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 50.0
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7769243940322702e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 180.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 60.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 60.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 20.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 10.0
vllm:request_time_per_output_token_seconds_bucket{engine="0",le="0.01",model_name="m"} 3.0
vllm:request_time_per_output_token_seconds_sum{engine="0",model_name="m"} 2.5
vllm:request_time_per_output_token_seconds_count{engine="0",model_name="m"} 100.0
"""
GENAI_PERF = """\
                                  LLM Metrics
┏━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━┳━━━━━━━━┓
┃                Statistic ┃    avg ┃    min ┃    max ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━╇━━━━━━━━┩
│ Time to first token (ms) │  16.26 │  12.39 │  17.25 │
│ Inter token latency (ms) │   1.85 │   1.55 │   2.04 │
│        Acceptance Length │   2.91 │   1.00 │   4.00 │
└──────────────────────────┴────────┴────────┴────────┘
"""


def test_vllm_prometheus_counters_pool_engines_and_skip_created_gauges(tmp_path):
    out = _logs(_write(tmp_path, VLLM_PROM))
    assert out["accept_length"] == pytest.approx(1 + (180 + 60) / (100 + 50))  # 2.6, not counting 1.78e9 drafts
    assert out["al"]["per_position"] == pytest.approx([(80 + 30) / 150, (60 + 20) / 150, (40 + 10) / 150])
    assert out["tpot_ms"] == pytest.approx(2.5 / 100 * 1e3)  # 25 ms: histogram sum / count
    assert "Prometheus" in out["tpot"]["estimator"] and out["al"]["lines"] == [3, 15]
    r = CliRunner().invoke(app, ["accept", str(tmp_path / "x.log"), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["files"][0]["accept_length"] == pytest.approx(2.6)


def test_a_second_scrape_replaces_the_first_instead_of_adding_to_it(tmp_path):
    """Counters are cumulative: a file with two scrapes holds the totals in the later one: 1 + 300/200 = 2.5 (summing
    both scrapes would give 1 + 350/300 = 2.17)."""
    scrape = ('vllm:spec_decode_num_drafts_total{{engine="0"}} {d}\n'
              'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {a}\n')
    out = _logs(_write(tmp_path, scrape.format(d=100, a=50) + scrape.format(d=200, a=300)))
    assert out["accept_length"] == pytest.approx(2.5)


def test_grafana_table_rows_of_engines_read_like_samples(tmp_path):
    """As Grafana's query table pastes them (PR vllm#24049): a `-- | --` rule under the first row only."""
    rows = [f'vllm:spec_decode_num_{name}_total{{engine="{e}", job="vllm"}} | {x}\n'
            for name, e, x in (("drafts", 0, 22), ("drafts", 1, 15), ("accepted_tokens", 0, 33), ("accepted_tokens", 1, 7))]
    text = rows[0] + "-- | --\n" + "".join(rows[1:])
    assert _logs(_write(tmp_path, text))["accept_length"] == pytest.approx(1 + (33 + 7) / (22 + 15))


def test_sglang_accept_length_gauge_leaves_out_the_draft_engine_and_averages_ranks(tmp_path):
    text = ('# TYPE sglang:spec_accept_length gauge\n'
            'sglang:spec_accept_length{engine_type="draft",model_name="d",tp_rank="0"} 2.7\n'
            'sglang:spec_accept_length{dp_rank="0",engine_type="unified",model_name="m",tp_rank="0"} 2.8\n'
            'sglang:spec_accept_length{dp_rank="1",engine_type="unified",model_name="m",tp_rank="0"} 3.0\n'
            'sglang:inter_token_latency_seconds_sum{model_name="m"} 1.2\n'
            'sglang:inter_token_latency_seconds_count{model_name="m"} 60.0\n')
    out = _logs(_write(tmp_path, text))
    assert out["accept_length"] == pytest.approx((2.8 + 3.0) / 2)
    assert out["tpot_ms"] == pytest.approx(1.2 / 60 * 1e3)  # 20 ms


def test_llamacpp_metrics_counters(tmp_path):
    text = ("# TYPE llamacpp:spec_decode_num_drafts counter\nllamacpp:spec_decode_num_drafts 40\n"
            "llamacpp:spec_decode_num_accepted_tokens 60\nllamacpp:spec_decode_num_draft_tokens 120\n")
    assert _logs(_write(tmp_path, text))["accept_length"] == pytest.approx(1 + 60 / 40)


def test_a_scrape_with_drafts_but_no_accepted_counter_is_one_error_line(tmp_path):
    text = ('vllm:spec_decode_num_drafts_total{engine="0"} 6.491797e+06\n'
            'vllm:spec_decode_num_draft_tokens_total{engine="0"} 6.491797e+06\n'
            '# TYPE vllm:spec_decode_num_accepted_tokens_total counter\nvllm:\n')
    assert "no usable" in _refused(_write(tmp_path, text))


def test_genai_perf_box_table_gives_its_avg_column(tmp_path):
    out = _logs(_write(tmp_path, GENAI_PERF))
    assert out["tpot_ms"] == pytest.approx(1.85) and "ITL" in out["tpot"]["estimator"]
    assert out["accept_length"] == pytest.approx(2.91)


def test_metric_row_table_gives_the_first_runs_inter_token_latency(tmp_path):
    text = ("| Metric | osl-128 avg | osl-512 avg |\n|---|---|---|\n| Request Latency (ms) | 1,075.71 | 3,922.21 |\n"
            "| Inter Token Latency (ms) | 8.17 | 7.75 |\n")
    assert _logs(_write(tmp_path, text))["tpot_ms"] == pytest.approx(8.17)


def test_table_header_without_parentheses_and_cells_with_units(tmp_path):
    text = ("| Concurrency | Mean TTFT ms | Mean TPOT ms | Speedup |\n| ---: | ---: | ---: | ---: |\n"
            "| 4 | 177.22 | 3.51 | 1.27x |\n| 16 | 212.95 | 7.82 | 1.19x |\n")
    out = _logs(_write(tmp_path, text))
    assert out["tpot_ms"] == pytest.approx(3.51) and out["tpot"]["lines"] == [3, 3]


def test_bench_json_per_output_token_latency_when_no_tpot(tmp_path):
    text = '{\n  "metrics": {\n    "avg_latency": 3670.4988956451416,\n    "avg_per_output_token_latency": 69.98,\n'
    out = _logs(_write(tmp_path, text, "b.json"))
    assert out["tpot_ms"] == pytest.approx(69.98) and out["tpot"]["confidence"] == "low"


@pytest.mark.parametrize("accepted, want", [(60, 1 + 60 / 30), (81, (111 - 1) / 30), (95, (111 - 1) / 30)])
def test_timings_with_draft_rounds(tmp_path, accepted, want):
    """1 + draft_n_accepted / draft_rounds (111 tokens, 30 rounds, 60 accepted: 3.0), but at most (predicted_n - 1) /
    draft_rounds = 110/30 = 3.67 (mlx-vlm#2324: its server counts drafts accepted past the reply's end; 81 accepted
    would give 3.7, 95 give 4.17)."""
    text = json.dumps({"timings": {"predicted_n": 111, "predicted_per_token_ms": 12.5, "draft_n": 90,
                                   "draft_n_accepted": accepted, "draft_rounds": 30}}, indent=1)
    out = _logs(_write(tmp_path, text, "t.json"))
    assert out["accept_length"] == pytest.approx(want) and out["tpot_ms"] == pytest.approx(12.5)


def test_block_and_line_readers_agree_on_prometheus_text(tmp_path):
    p = _write(tmp_path, VLLM_PROM)
    a, b = analyse(p), analyse(p, reference=True)
    assert a["accept_length"] == b["accept_length"] == pytest.approx(2.6)
    assert a["tpot_ms"] == b["tpot_ms"] == pytest.approx(25.0)


BENCH = """\
============ Serving Benchmark Result ============
Successful requests:                     640
Mean TTFT (ms):                          313.27
Mean TPOT (ms):                          29.24
---------------Speculative Decoding---------------
Acceptance length:                       2.75
==================================================
"""
PREFIXES = ["2026-05-07T13:40:42.123456789Z ", "[pod/vllm-bench-7d9f-x2x7k/bench] ", "bench-1  | ",
            "2026-05-07T13:40:42.123456789Z stdout F ", "Apr 22 15:35:31 host run_bench.sh[4242]: ",
            "(BenchActor pid=812, ip=10.0.0.3) ", "[pod/b/c] 2026-05-07T13:40:42Z "]


@pytest.mark.parametrize("prefix", PREFIXES)
def test_summary_lines_behind_log_collector_prefixes(tmp_path, prefix):
    """kubectl (--timestamps, --prefix), CRI, docker compose, journald and Ray prefixes before every line of a bench
    summary: the labels are read as without them (Mean TPOT 29.24 ms, Acceptance length 2.75)."""
    out = _logs(_write(tmp_path, "".join(prefix + ln + "\n" for ln in BENCH.splitlines())))
    assert out["tpot_ms"] == pytest.approx(29.24) and out["accept_length"] == pytest.approx(2.75)


def test_prometheus_samples_behind_a_timestamp_prefix(tmp_path):
    text = "".join("2026-05-07T13:40:42Z " + ln + "\n" for ln in VLLM_PROM.splitlines())
    assert _logs(_write(tmp_path, text))["accept_length"] == pytest.approx(2.6)


def test_a_quoted_results_table(tmp_path):
    text = "> | concurrency | mean_tpot_ms |\n> |---|---|\n> | 1 | 5.20 |\n> | 8 | 7.90 |\n"
    assert _logs(_write(tmp_path, text))["tpot_ms"] == pytest.approx(5.20)


def test_a_label_that_looks_like_a_service_name_is_not_stripped(tmp_path):
    """`P99 TPOT (ms)` is not a compose service; `Mean TPOT (ms): 12.3` stays the TPOT."""
    text = "Mean TPOT (ms):   12.3\nP99 TPOT (ms):    31.6\n"
    assert _logs(_write(tmp_path, text))["tpot_ms"] == pytest.approx(12.3)


@pytest.mark.parametrize("numbered", ["{i:6d}\t{line}", "{i}:{line}", "bench.log:{i}:{line}"])
def test_summary_lines_with_line_numbers(tmp_path, numbered):
    """`cat -n`, `grep -n` and `grep -Hn` output of a bench summary: Mean TPOT 29.24 ms, Acceptance length 2.75."""
    text = "".join(numbered.format(i=i, line=ln) + "\n" for i, ln in enumerate(BENCH.splitlines(), 1))
    out = _logs(_write(tmp_path, text))
    assert out["tpot_ms"] == pytest.approx(29.24) and out["accept_length"] == pytest.approx(2.75)


def test_a_long_heading_does_not_hide_a_terminal_wrap(tmp_path):
    """A 100-column terminal cut the one long line (its tail `9 generated), mean len =  4.30` on the next line); the
    heading above it is longer than 100 characters and followed by a line that does not start like one of its own:
    the reader still finds the 100-column wrap and joins the pieces (AL 4.30 printed)."""
    line = ("4.01.806.856 I slot print_timing: id  0 | task 0 | draft acceptance = 0.65959 ( 5995 accepted /  9089 "
            "generated), mean len =  4.30")
    head = "# a heading line of more than a hundred characters, as a paste's first line often is: " + "x" * 30
    text = head + "\n" + line[:100] + "\n" + line[100:] + "\n" + "4.01.809.152 I slot      release: id  0\n"
    assert len(line[:100]) == 100 and len(head) > 100
    assert _logs(_write(tmp_path, text))["accept_length"] == pytest.approx(4.30)


def test_vllm_bench_serve_result_json_spec_keys(tmp_path):
    """`vllm bench serve --save-result` JSON: mean_tpot_ms, and AL = 1 + spec_decode_accepted_tokens /
    spec_decode_num_drafts = 1 + 9/5 = 2.8 (its spec_decode_* keys are not a meta_info request's spec_ fields)."""
    doc = {"backend": "vllm", "completed": 100, "mean_ttft_ms": 120.5, "mean_tpot_ms": 11.88,
           "spec_decode_acceptance_rate": 60.0, "spec_decode_acceptance_length": 2.8, "spec_decode_num_drafts": 5,
           "spec_decode_draft_tokens": 18, "spec_decode_accepted_tokens": 9,
           "spec_decode_per_position_acceptance_rates": [1.0, 0.6, 0.2]}
    out = _logs(_write(tmp_path, json.dumps(doc), "r.json"))
    assert out["tpot_ms"] == pytest.approx(11.88) and out["accept_length"] == pytest.approx(1 + 9 / 5)
    doc.pop("spec_decode_num_drafts")  # without the counts: the printed acceptance length
    doc["spec_decode_acceptance_length"] = 2.75
    assert _logs(_write(tmp_path, json.dumps(doc), "r.json"))["accept_length"] == pytest.approx(2.75)


def test_summary_as_a_markdown_list(tmp_path):
    text = "- Mean TPOT (ms): 12.5\n- Acceptance length: 3.1\n• Mean ITL (ms): 9.0\n"
    out = _logs(_write(tmp_path, text))
    assert out["tpot_ms"] == pytest.approx(12.5) and out["accept_length"] == pytest.approx(3.1)


META_DICT = ("result {'text': 'x', 'meta_info': {'id': 'a1', 'finish_reason': {'type': 'length', 'length': 128}, "
             "'prompt_tokens': 12, 'completion_tokens': 128, 'cached_tokens': 0, 'e2e_latency': 1.4077615810092539%s}}\n")


def test_meta_info_e2e_latency_gives_a_time_per_token(tmp_path):
    """A non-speculative meta_info: 1.4077615810092539 s / 128 tokens = 11.00 ms (the first token's wait included);
    with spec fields the AL as well: 128 / spec_verify_ct 30 = 4.27."""
    out = _logs(_write(tmp_path, META_DICT % ""))
    assert out["tpot_ms"] == pytest.approx(1407.7615810092539 / 128) and out["accept_length"] is None
    out = _logs(_write(tmp_path, META_DICT % ", 'spec_verify_ct': 30"))
    assert out["accept_length"] == pytest.approx(128 / 30) and out["tpot_ms"] == pytest.approx(1407.76158 / 128)


def test_decode_lines_come_before_a_meta_info_time_per_token(tmp_path):
    line = ("[2026-05-07 13:40:42 TP0] Decode batch, #running-req: 1, #token: 700, token usage: 0.01, cuda graph: True, "
            "gen throughput (token/s): 200.00, #queue-req: 0\n")
    out = _logs(_write(tmp_path, line + META_DICT % ""))
    assert out["tpot_ms"] == pytest.approx(1000 / 200, rel=0.01)  # (11.00 ms from the meta_info)


def test_vllm_per_request_metrics_mean_itl(tmp_path):
    doc = {"id": "chatcmpl-abc123", "usage": {"prompt_tokens": 42, "completion_tokens": 128},
           "metrics": {"time_to_first_token_ms": 85.2, "generation_time_ms": 1240.5, "mean_itl_ms": 9.1}}
    assert _logs(_write(tmp_path, json.dumps(doc, indent=2), "m.json"))["tpot_ms"] == pytest.approx(9.1)


def test_bench_latency_steps_with_seconds_printed_as_ms(tmp_path):
    """2024's sglang.bench_latency printed seconds as `ms`: 107.55 tok/s x 0.009 = 1 request, so the steps are 1/107.55 s
    and so on; with no median line the TPOT is the median step: (1000/107.55 + 1000/107.70)/2 = 9.29 ms."""
    steps = [("0.331", "3.02"), ("0.009", "107.55"), ("0.009", "107.70"), ("0.012", "84.28")]
    text = "".join(f"Decode.  latency:  {lat} ms, throughput:    {thr} token/s\n" for lat, thr in steps)
    out = _logs(_write(tmp_path, "Prefill. latency:  5.021 ms, throughput:    203.93 token/s\n" + text))
    assert out["tpot_ms"] == pytest.approx((1000 / 107.55 + 1000 / 84.28) / 2)


def test_bench_latency_steps_in_real_milliseconds_give_their_batch(tmp_path):
    """`ms` meaning milliseconds (20.0 ms x 400 tok/s = 8 requests a step): each request gets a token every 8/400 s =
    20 ms; the median of 20, 20 and 25 ms (8/320) is 20 ms."""
    text = "".join(f"Decode.  latency: {lat} ms, throughput: {thr} token/s\n"
                   for lat, thr in [("20.0", "400.0"), ("20.0", "400.0"), ("25.0", "320.0")])
    assert _logs(_write(tmp_path, text))["tpot_ms"] == pytest.approx(20.0)


V1_FIRST = ("INFO 04-02 18:23:13 [loggers.py:80] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
            "throughput: 50.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit "
            "rate: 0.0%\nINFO 04-02 18:23:13 [metrics.py:60] SpecDecoding metrics: Draft acceptance rate: 60.0%, "
            "Accepted: 180 tokens, Drafted: 300 tokens\n")


@pytest.mark.parametrize("config", [
    """vllm serve m --speculative-config '{"method": "eagle", "num_speculative_tokens": 3}'\n""",
    "python examples/offline_inference/spec_decode.py --method eagle --num_spec_tokens 3\n",
    "llm = LLM(model=m, speculative_config={'model': d, 'num_speculative_tokens': 3})\n"])
def test_first_v1_format_takes_k_from_the_files_config(tmp_path, config):
    """2025's first V1 line gives Accepted / Drafted only: with k = 3 from the launch command, AL = 1 + 3 x 180/300 =
    2.8; without it the AL is unknown (TPOT 1000/50 = 20 ms either way)."""
    out = _logs(_write(tmp_path, config + V1_FIRST))
    assert out["accept_length"] == pytest.approx(1 + 3 * 180 / 300) and "k = 3" in out["al"]["estimator"]
    out = _logs(_write(tmp_path, V1_FIRST))
    assert out["accept_length"] is None and out["tpot_ms"] == pytest.approx(20.0, rel=0.01)


def test_a_one_line_json_with_num_spec_tokens_keeps_its_other_fields(tmp_path):
    doc = {"metrics": {"speculative_decoding": {"mean_acceptance_length": 1.2325581395348837,
                                                "num_spec_steps": 43, "num_accepted_draft_tokens": 10,
                                                "num_spec_tokens": 3}}}
    assert _logs(_write(tmp_path, json.dumps(doc), "s.json"))["accept_length"] == pytest.approx(1 + 10 / 43)


SGL_LINES = ["[2025-02-27 04:37:{s:02d} TP0] Decode batch. #running-req: 8, #token: 67724, token usage: 0.13, accept len: "
             "2.90, cuda graph: True, gen throughput (token/s): {thr}, #queue-req: 0".format(s=s, thr=thr)
             for s, thr in ((29, "180.00"), (31, "160.00"), (33, "200.00"))]
V1_LINES = ["(APIServer pid=1) INFO 09-09 11:51:35 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
            "generation throughput: 40.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix "
            "cache hit rate: 0.0%",
            "(APIServer pid=1) INFO 09-09 11:51:35 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.50, "
            "Accepted throughput: 4.37 tokens/s, Drafted throughput: 4.92 tokens/s, Accepted: 300 tokens, Drafted: 600 "
            "tokens, Per-position acceptance rate: 0.600, 0.400, 0.200, Avg Draft acceptance rate: 50.0%"]


@pytest.mark.parametrize("width", [72, 88, 100])
def test_engine_lines_wrapped_at_spaces(tmp_path, width):
    """An editor's or mail client's wrap (at spaces, the space dropped, pieces of any length up to the width): the
    pieces are joined back. SGLang: 8 requests / median(180, 160, 200) tok/s = 8/180 s = 44.4 ms, accept len 2.90;
    vLLM V1: 2/40 s = 50 ms, AL = 1 + 300/(600/3) = 2.5."""
    import textwrap
    for lines, tpot, al in ((SGL_LINES, 8 / 180 * 1e3, 2.90), (V1_LINES, 2 / 40 * 1e3, 2.5)):
        text = "".join(w + "\n" for ln in lines for w in textwrap.wrap(ln, width, break_on_hyphens=False))
        assert any(len(w) < width - 2 for w in text.splitlines()[:-1])  # pieces of several lengths
        out = _logs(_write(tmp_path, text))
        assert out["tpot_ms"] == pytest.approx(tpot, rel=0.01) and out["accept_length"] == pytest.approx(al)


def test_a_terminal_cut_inside_a_word_is_glued_back_and_a_dropped_space_put_back(tmp_path):
    """Lines of one layout wrapped at spaces all have the same length, as a terminal's cut would: `accept len:` then
    `2.90` gets its space back (SGLang needs `accept len: `), `gen` then `throughput` too (both engine words), while
    `Running: 2 r` then `eqs` is glued (`r` is no word)."""
    cut = SGL_LINES[0].index("accept len:") + len("accept len:")  # the same place in each line
    sgl = [ln[:cut] + "\n" + ln[cut:].lstrip() + "\n" for ln in SGL_LINES]
    out = _logs(_write(tmp_path, "".join(sgl)))
    assert out["accept_length"] == pytest.approx(2.90) and out["tpot_ms"] == pytest.approx(8 / 180 * 1e3, rel=0.01)
    v1 = V1_LINES[0]
    i = v1.index("Running: 2 r") + len("Running: 2 r")
    out = _logs(_write(tmp_path, (v1[:i] + "\n" + v1[i:] + "\n") * 3))
    assert out["tpot_ms"] == pytest.approx(50.0, rel=0.01)
