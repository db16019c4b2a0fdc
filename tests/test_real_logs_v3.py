"""The version corpus, round 3 (tests/data/real_v3/: one synthetic excerpt per engine log format that the readers did
not read before, numbers ours, the format's public source in the folder's README): `wmtp logs` / `wmtp accept` (both
views) read every file with no traceback and no garbled line, and agree with the hand-derived values of EXPECTED.tsv
within 1 %; and the parsers behind each fix, one line at a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpus_checks import run as _run  # noqa: E402

V3 = Path(__file__).parent / "data" / "real_v3"


def test_sglang_2026_decode_line_with_cached_token_takes_the_fast_paths():
    from wmtp.log_blocks import _DEC, _SKELETONS, _ZERO_UTF8
    from wmtp.logs import GENERAL, _parse_sglang_general, decode_fast, parse_sglang
    line = ("[2026-08-10 10:00:04 TP0] Decode batch, #running-req: 8, #cached-token: 96, #token: 9216, token usage: "
            "0.06, accept len: 2.40, accept rate: 0.47, cuda graph: True, gen throughput (token/s): 400.00, #queue-req: 0")
    d = line.find("Decode batch")
    assert decode_fast(line, d, lambda *a: a, 1, None, None, None, None) is not GENERAL
    assert repr(parse_sglang(line + "\n", 3)) == repr(_parse_sglang_general(line + "\n", 3))
    assert _SKELETONS[line.encode().translate(_ZERO_UTF8)][1] == _DEC


@pytest.mark.parametrize("prefix", ["trtllm_", "trtllm:"])  # (`trtllm:` behind Dynamo's /metrics)
def test_trtllm_prometheus_per_position_counters_and_tpot(tmp_path, prefix):
    lab = 'model_name="m",engine_type="trtllm"'
    text = "".join([
        f'{prefix}time_per_output_token_seconds_sum{{{lab}}} 0.2\n', f'{prefix}time_per_output_token_seconds_count{{{lab}}} 10\n',
        *(f'{prefix}spec_decode_drafted_tokens_total{{{lab},token_position="{i}"}} 100.0\n' for i in range(2)),
        f'{prefix}spec_decode_accepted_tokens_total{{{lab},token_position="0"}} 70.0\n',
        f'{prefix}spec_decode_accepted_tokens_total{{{lab},token_position="1"}} 30.0\n'])
    p = tmp_path / "m.txt"
    p.write_text(text)
    out = json.loads(_run(["logs", str(p), "--json"]).output)[0]
    assert out["tpot_ms"] == pytest.approx(20.0) and out["accept_length"] == pytest.approx(2.0)
    assert out["al"]["per_position"] == pytest.approx([0.7, 0.3])


def test_trtllm_acceptance_gauge_alone_is_a_fallback(tmp_path):
    p = tmp_path / "m.txt"
    p.write_text('trtllm_spec_decode_acceptance_length{model_name="m",engine_type="trtllm"} 2.25\n'
                 'trtllm_spec_decode_num_draft_tokens_total{model_name="m",engine_type="trtllm"} 300.0\n')
    out = json.loads(_run(["logs", str(p), "--json"]).output)[0]
    assert out["accept_length"] == pytest.approx(2.25) and "last iteration" in out["al"]["estimator"]


_TRT_2025 = ("[01/16/2026-06:20:18] [TRT-LLM] [RANK 0] [I] iter = {i}, global_rank = 0, rank = 0, currank_total_requests = "
             "0/0, host_step_time = {ms}ms, prev_device_step_time = 19.4ms, timestamp = 2026-01-16 06:20:18, "
             "num_scheduled_requests: 4, states = {{'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': {g}}}\n")


def test_trtllm_iter_log_2025_layout_and_seconds_spelling():
    from wmtp.log_engines import parse_trt_iter
    v = parse_trt_iter(_TRT_2025.format(i=7, ms="20.512208938598633", g=4), 3)
    assert v.key == "engine_step" and v.value == pytest.approx([20.512208938598633, 4, 0, 1.0, 0, 0, 0])
    old = ("[TRT-LLM] [I] iter = 9, global_rank = 0, rank = 0, currank_total_requests = 0/0, elapsed_time = 0.0205s, "
           "timestamp = 2025-03-01 10:00:00, num_scheduled_requests: 4, states = {'num_ctx_requests': 0, "
           "'num_ctx_tokens': 0, 'num_generation_tokens': 4}")
    assert parse_trt_iter(old, 1).value[0] == pytest.approx(20.5)
    assert parse_trt_iter(old.split(", states")[0], 1) is None  # cut before its states: garbled


def test_trtllm_verify_iterations_need_the_files_al(tmp_path):
    lines = [_TRT_2025.format(i=i, ms=ms, g=16) for i, ms in enumerate(["30.0", "30.0", "33.0"])]  # 4 requests x (1 + 3)
    p = tmp_path / "spec.log"
    p.write_text("".join(lines))
    r = _run(["logs", str(p)])
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "verify iterations (median step 30.00 ms)" in r.output
    p.write_text("".join(lines) + "Accept length: 2.50\n")
    out = json.loads(_run(["logs", str(p), "--json"]).output)[0]
    assert out["tpot_ms"] == pytest.approx(12.0, rel=1e-3) and "the file's AL 2.50" in out["tpot"]["estimator"]


def test_trtllm_iteration_stats_step_time_choice(tmp_path):
    """The C++ executor's records (avgNumDecodedTokensPerIter filled) time with iterLatencyMS; the PyTorch executor's
    under the overlap scheduler without hostStepTimeMS give no TPOT, only AL and a note."""
    def rec(avg, mode=None):
        d = {"iter": 1, "iterLatencyMS": 50.0, "inflightBatchingStats": {"avgNumDecodedTokensPerIter": avg,
             "numContextRequests": 0, "numGenRequests": 8}, "specDecodingStats": {"numAcceptedTokens": 8,
             "numRequestsWithDraftTokens": 8}}
        return json.dumps({**d, "schedulerMode": mode} if mode else d) + "\n"
    p = tmp_path / "s.jsonl"
    p.write_text(rec(2.0) * 3)
    out = json.loads(_run(["logs", str(p), "--json"]).output)[0]
    assert out["tpot_ms"] == pytest.approx(25.0, rel=1e-3) and out["accept_length"] == pytest.approx(2.0)
    p.write_text(rec(0.0) * 3)
    out = json.loads(_run(["logs", str(p), "--json"]).output)[0]
    assert out["tpot_ms"] is None and out["accept_length"] == pytest.approx(2.0)
    assert any("spans about two loops" in n for n in out["notes"])
    p.write_text(rec(0.0, "non_overlap") * 3)
    assert json.loads(_run(["logs", str(p), "--json"]).output)[0]["tpot_ms"] == pytest.approx(25.0, rel=1e-3)
    p.write_text('{"iter": 1, "iterLatencyMS": "fast"}\n')
    r = _run(["logs", str(p)])
    assert r.exit_code == 1 and "1 garbled" in r.output
    from wmtp.log_engines import parse_trt_stats
    assert parse_trt_stats('{"iter": 1, "iterLatencyMS": -3}', 1) is False
    assert parse_trt_stats('    "iterLatencyMS": 25.0,', 1) is None  # a pretty-printed record's inner line


def test_tgi_plain_text_success_line():
    from wmtp.log_engines import parse_tgi
    line = ('2024-12-10T21:50:03.478010Z  INFO chat_completions{total_time="735.200735ms" validation_time="955.594µs" '
            'queue_time="73.176µs" inference_time="734.172108ms" time_per_token="36.708605ms" seed="Some(1)"}: '
            'text_generation_router::server: router/src/server.rs:622: Success')
    assert parse_tgi(line, 1).value == pytest.approx(36.708605)
    assert parse_tgi(line.replace('"36.708605ms"', '"1.2s"'), 1).value == pytest.approx(1200.0)


def test_prometheus_sample_lines_of_one_length_are_no_terminal_wrap():
    from wmtp.log_wrap import wrap_width
    head = "".join(f'vllm:num_requests_running{{engine="{i}",model_name="some/model-name-x"}} 3.0\n' for i in range(6))
    head += 'vllm:inter_token_latency_seconds_sum{engine="0",model_name="x"} 2.0\n'
    assert wrap_width(head, True) is None


def test_inter_token_latency_is_not_pooled_with_time_per_output_token(tmp_path):
    p = tmp_path / "m.txt"
    p.write_text('sglang:time_per_output_token_seconds_sum{m="a"} 5.0\nsglang:time_per_output_token_seconds_count{m="a"} 50\n'
                 'sglang:inter_token_latency_seconds_sum{m="a"} 10.0\nsglang:inter_token_latency_seconds_count{m="a"} 1000\n'
                 'sglang:spec_accept_length{m="a"} 2.0\n')
    out = json.loads(_run(["logs", str(p), "--json"]).output)[0]
    assert out["tpot_ms"] == pytest.approx(10.0) and "inter-token" in out["tpot"]["estimator"]
    p.write_text('vllm:time_per_output_token_seconds_sum{m="a"} 5.0\nvllm:time_per_output_token_seconds_count{m="a"} 500\n'
                 'vllm:spec_decode_num_drafts_total{m="a"} 10\nvllm:spec_decode_num_accepted_tokens_total{m="a"} 15\n')
    assert json.loads(_run(["logs", str(p), "--json"]).output)[0]["tpot_ms"] == pytest.approx(10.0)


def test_bench_one_batch_server_without_report_and_a_dense_table(tmp_path):
    block = ("batch size: 4\ninput_len: 1024\noutput_len: 256\nlatency: 1.10 s\ninput throughput: 40960.00 tok/s\n"
             "output throughput: 1000.00 tok/s\nlast_ttft: 0.10 s\nlast generation throughput: 990.00 tok/s\n")
    p = tmp_path / "b.log"
    p.write_text(block + "acc_length: 2.20 \n")
    out = json.loads(_run(["logs", str(p), "--json"]).output)[0]
    assert out["tpot_ms"] == pytest.approx(4.0) and out["accept_length"] == pytest.approx(2.2)
    p.write_text(block + "| batch size | input len | latency (s) | input throughput (tok/s)  | output throughput (tok/s) | "
                 "acc length | ITL (ms) | input cost ($/1M) | output cost ($/1M) |\n| --- | --- | --- | --- | --- | --- | --- "
                 "| --- | --- |\n| 4 | 1024 | 1.10 | 40960.00 | 1000.00 | n/a | 4.00 | 0.02 | 0.56 |\n")
    out = json.loads(_run(["logs", str(p), "--json"]).output)[0]
    assert out["tpot_ms"] == pytest.approx(4.0) and out["accept_length"] is None
    assert "first row" in out["tpot"]["estimator"]


def test_trtllm_stats_line_cut_inside_its_only_record_is_garbled():
    from wmtp.log_engines import parse_trt_stats
    rec = '{"iter": 3, "iterLatencyMS": 20.0, "inflightBatchingStats": {"numContextRequests": 0, "numGenRequests": 4}}'
    assert parse_trt_stats(rec[:40], 1) is False
    assert len(parse_trt_stats("[" + rec + "," + rec[:40], 1)) == 1


def test_vllm_bench_serve_json_per_position_rates_give_the_profile():
    out = json.loads(_run(["accept", str(V3 / "vllm-bench-serve-2026-save-result-json-per-position.json"), "--json"]).output)
    f = out["files"][0]
    assert f["measured_depth"] == 4
    assert [a["alpha"] for a in f["alphas"]] == pytest.approx([0.7, 0.5 / 0.7, 0.3 / 0.5])


def test_trtllm_bench_report_json_on_one_line_and_a_stray_average(tmp_path):
    p = tmp_path / "r.json"
    p.write_text('{"streaming_metrics": {"avg_tpot_ms": 7.5}, "decoding_stats": {"acceptance_length_percentiles": '
                 '{"p50": 2.0, "p95": 3.0, "p99": 3.0, "minimum": 1.0, "maximum": 3.0, "average": 2.2}}}\n')
    out = json.loads(_run(["logs", str(p), "--json"]).output)[0]
    assert out["tpot_ms"] == pytest.approx(7.5) and out["accept_length"] == pytest.approx(2.2)
    lines = ['{', '    "decoding_stats": {', '        "acceptance_length_percentiles": null,', '        "x": {',
             *['            "p%d": 1.0,' % i for i in range(12)], '            "average": 3.0', '        }', '    },',
             '    "streaming_metrics": {"avg_tpot_ms": 7.5}', '}']
    p.write_text("\n".join(lines) + "\n")  # a null AL object and an `average` of another object: no AL
    assert json.loads(_run(["logs", str(p), "--json"]).output)[0]["accept_length"] is None
