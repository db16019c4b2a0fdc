"""Log round 22 (tests/data/real/README.md): which estimator reads each new file, and the parsers behind the fixes,
with the near misses they must not take: AIPerf's one-bucket histogram `0: 100%` (AL 1, not refused), SGLang's
`generation_tokens_total / spec_verify_calls_total` counters before its `spec_accept_length` gauge (the source tag says
which), SGLang meta_info without `completion_tokens` pooled by verify steps, and TensorRT-LLM's per-request
`avg_decoded_tokens_per_iter` (tagged as one request's figure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpus_checks import run, write_log

REAL = Path(__file__).parent / "data" / "real"
V3 = Path(__file__).parent / "data" / "real_v3"
HIST = "  Accepted drafts per step (% of steps):  0: 100%\n"


def _logs(path: Path) -> dict:
    r = run(["logs", str(path), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)[0]


def _one_error(path: Path, *words) -> str:
    for args in (["--json"], []):
        r = run(["logs", str(path), *args])
        assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
        assert "Traceback" not in r.output
        for w in words:
            assert w in r.output, r.output
    return r.output


# ------------------------------------------------------------------------------------------------- AIPerf `0: 100%`
def test_aiperf_zero_bucket_file_reads_its_token_weighted_al_and_the_histogram_agrees():
    out = _logs(REAL / "aiperf-format-2026-histogram-only-bucket-zero-100.log")
    assert out["accept_length"] == pytest.approx(1.0) and out["tpot_ms"] == pytest.approx(9.40)
    assert "0: 100%" in out["al"]["estimator"] and "agrees" in out["al"]["estimator"]
    assert out["garbled"] == 0 and not out["notes"]


@pytest.mark.parametrize("text", [HIST, "  Accepted-draft histogram (% steps):  0: 100%\n"])  # (PR #1191's label)
def test_aiperf_zero_bucket_line_alone_is_al_one(tmp_path, text):
    out = _logs(write_log(tmp_path, text))
    assert out["accept_length"] == 1.0
    assert out["al"]["estimator"].startswith("AIPerf accepted-draft histogram `0: 100%`")
    assert "per_position" not in out["al"] and out["garbled"] == 0
    r = run(["accept", str(tmp_path / "x.log"), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["files"][0]["accept_length"] == 1.0


@pytest.mark.parametrize("line", ["0: 98%", "0: 100", "1: 100%", ">=8: 100%", "0: 100%   1:"])
def test_aiperf_one_bucket_near_misses_are_not_al_one(tmp_path, line):
    """A share that is not all the steps, a share cut short, a bucket other than 0, a folded bucket, a second bucket
    cut: none is the no-draft run."""
    path = write_log(tmp_path, f"  Accepted drafts per step (% of steps):  {line}\n")
    r = run(["logs", str(path), "--json"])
    assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1, r.output


def test_aiperf_zero_bucket_contradicting_its_token_weighted_al_keeps_the_counts(tmp_path):
    text = "Token-Weighted Acceptance Length (ratio): 2.40\n" + HIST
    out = _logs(write_log(tmp_path, text))
    assert out["accept_length"] == pytest.approx(2.40)
    assert any("contradict" in n for n in out["notes"])


# ------------------------------------------------------------------------------------------------ SGLang /metrics
def test_sglang_counters_beat_the_gauge_and_say_so():
    out = _logs(REAL / "sglang-format-2026-metrics-spec-verify-calls-counter.log")
    assert out["accept_length"] == pytest.approx(61440 / 19200) and out["tpot_ms"] == pytest.approx(10.0)
    est = out["al"]["estimator"]
    assert "counters" in est and "spec_verify_calls_total" in est and "gauge" not in est
    assert out["al"]["lines"] == [16, 22]  # (the two counters' lines, not the gauge's)


def test_sglang_gauge_only_scrape_is_tagged_as_the_gauge():
    out = _logs(V3 / "sglang-2026-enable-metrics-scrape-dp2.log")
    assert out["accept_length"] == pytest.approx(2.5)
    assert out["al"]["estimator"].startswith("SGLang Prometheus gauge spec_accept_length")
    assert "no spec_verify_calls_total counter" in out["al"]["estimator"]


_G = 'sglang:spec_accept_length{tp_rank="0"} 2.75\n'


@pytest.mark.parametrize("counters, want, why", [
    ('sglang:generation_tokens_total{m="a"} 300\nsglang:spec_verify_calls_total{m="a"} 100\n', 3.0, "counters"),
    ('sglang_generation_tokens_total{m="a"} 300\nsglang_spec_verify_calls_total{m="a"} 100\n', 3.0, "counters"),
    ('sglang:generation_tokens_total{m="a"} 300\nsglang:spec_verify_calls_total{m="a"} 0\n', 2.75, "counter is 0"),
    ('sglang:generation_tokens_total{m="a"} 50\nsglang:spec_verify_calls_total{m="a"} 100\n', 2.75, "contradict"),
    ('vllm:generation_tokens_total{m="a"} 300\nsglang:spec_verify_calls_total{m="a"} 100\n', 2.75, "contradict"),
    ('sglang:spec_verify_calls_created{m="a"} 1.79e9\n', 2.75, "no spec_verify_calls_total"),
])
def test_sglang_counters_and_their_near_misses(tmp_path, counters, want, why):
    """SGLang's pair, also with the `sglang_` prefix (a sidecar's re-export); a zero or contradicting counter, another
    engine's generated tokens and the `_created` gauge fall back to the gauge, which says why."""
    out = _logs(write_log(tmp_path, _G + counters))
    assert out["accept_length"] == pytest.approx(want) and why in out["al"]["estimator"]


def test_sglang_counters_are_summed_over_series(tmp_path):
    text = ('sglang:generation_tokens_total{dp="0"} 300\nsglang:generation_tokens_total{dp="1"} 500\n'
            'sglang:spec_verify_calls_total{dp="0"} 100\nsglang:spec_verify_calls_total{dp="1"} 150\n')
    assert _logs(write_log(tmp_path, text))["accept_length"] == pytest.approx(800 / 250)


def test_sglang_counters_without_a_gauge_and_a_lone_counter(tmp_path):
    assert _logs(write_log(tmp_path, 'sglang:generation_tokens_total 90\nsglang:spec_verify_calls_total 30\n',
                           "a.log"))["accept_length"] == pytest.approx(3.0)
    _one_error(write_log(tmp_path, "sglang:spec_verify_calls_total 30\n", "b.log"))


# ------------------------------------------------------------------------------------- SGLang meta_info, no tokens
def test_meta_info_without_completion_tokens_is_pooled_by_verify_steps():
    out = _logs(REAL / "sglang-format-2026-meta-info-no-completion-tokens-two-requests.jsonl")
    assert out["accept_length"] == pytest.approx(581 / 200)
    assert "spec_accept_length x spec_verify_ct" in out["al"]["estimator"] and out["al"]["samples"] == 2
    assert out["tpot_ms"] is None


def test_meta_info_mixes_requests_with_and_without_completion_tokens(tmp_path):
    text = ('{"meta_info": {"completion_tokens": 300, "spec_verify_ct": 100, "spec_accept_length": 3.0}}\n'
            '{"meta_info": {"spec_verify_ct": 50, "spec_accept_length": 2.0}}\n')
    out = _logs(write_log(tmp_path, text, "m.jsonl"))
    assert out["accept_length"] == pytest.approx(400 / 150) and "1 without completion_tokens" in out["al"]["estimator"]


def test_meta_info_accepted_tokens_without_an_al(tmp_path):
    """`spec_accept_token_num` and `spec_verify_ct` only: 1 + accepted / verify steps."""
    text = '{"meta_info": {"spec_verify_ct": 40, "spec_accept_token_num": 60, "spec_draft_token_num": 160}}\n'
    assert _logs(write_log(tmp_path, text, "m.jsonl"))["accept_length"] == pytest.approx(2.5)


def test_meta_info_cut_inside_its_numbers_is_one_error(tmp_path):
    _one_error(write_log(tmp_path, '{"meta_info": {"spec_verify_ct": 4e, "spec_accept_length": 2.', "m.jsonl"))


# ---------------------------------------------------------------------------------- TensorRT-LLM per-request figure
def test_trtllm_response_is_one_requests_figure():
    out = _logs(REAL / "trtllm-serve-completion-avg-decoded-tokens-per-iter-mistral-large-3.log")
    assert out["accept_length"] == 1.0 and out["tpot_ms"] is None
    assert out["al"]["scope"] == "request" and "a single request's figure" in out["al"]["estimator"]


def test_trtllm_responses_pooled_by_iterations(tmp_path):
    one = '{{"choices":[{{"index":0,"avg_decoded_tokens_per_iter":{}}}],"usage":{{"completion_tokens":{}}}}}\n'
    text = "".join(one.format(a, c) for a, c in ((2.0, 100), (4.0, 400)))
    out = _logs(write_log(tmp_path, text, "r.jsonl"))
    assert out["accept_length"] == pytest.approx(500 / 150) and out["al"]["scope"] == "requests"


def test_trtllm_pretty_printed_choice_and_the_benchmark_mean(tmp_path):
    pretty = '{\n  "choices": [\n    {\n      "avg_decoded_tokens_per_iter": 2.5\n    }\n  ]\n}\n'
    assert _logs(write_log(tmp_path, pretty, "p.json"))["accept_length"] == pytest.approx(2.5)
    bench = '{"completed": 64, "mean_tpot_ms": 8.5, "mean_avg_decoded_tokens_per_iter": 2.8}\n'
    out = _logs(write_log(tmp_path, bench, "b.json"))
    assert out["accept_length"] == pytest.approx(2.8) and out["al"]["estimator"] == "printed acceptance length"


def test_trtllm_zero_iterations_is_not_an_al(tmp_path):
    _one_error(write_log(tmp_path, '{"choices":[{"avg_decoded_tokens_per_iter":0.0}]}\n', "z.json"))
