"""The version corpus, round 6 (tests/data/real_v6/: records joined on one line, an AISBench table cut inside its numbers,
AIPerf's spec-decode export objects, LMDeploy's /metrics; numbers ours, each format's public source in the folder's
README): every corpus file through `corpus_checks` (what tests/test_real_corpora.py does for real_v2 to real_v5), then
the joined-record splitter and the vLLM Accepted > Drafted contradiction with their near misses. The box-table joiner,
AIPerf's JSON objects and LMDeploy's metrics are in tests/test_real_logs_v6_tables.py. Expected values are hand
arithmetic on the lines written here (in the comments)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpus_checks import check_accept, check_logs, corpus  # noqa: E402
from corpus_checks import logs_json as _logs  # noqa: E402
from corpus_checks import one_error as _one_error  # noqa: E402
from corpus_checks import write_log as _write  # noqa: E402

V6 = Path(__file__).parent / "data" / "real_v6"
ROWS, FILES = corpus(V6)


def _same_both_ways(path: Path) -> dict:
    from wmtp.log_analysis import analyse

    new, ref = analyse(path), analyse(path, reference=True)
    assert json.dumps(new, sort_keys=True, default=str) == json.dumps(ref, sort_keys=True, default=str)
    return new


# --------------------------------------------------------------------------------------------------- the corpus
def test_every_file_has_an_expected_row():
    assert FILES and set(FILES) == set(ROWS)


@pytest.mark.parametrize("name", FILES)
def test_logs_reads_the_format(name):
    check_logs(V6 / name, ROWS[name])


@pytest.mark.parametrize("name", FILES)
def test_accept_reads_the_format(name):
    check_accept(V6 / name, ROWS[name])


@pytest.mark.parametrize("name", FILES)
def test_block_and_line_readers_agree(name):
    _same_both_ways(V6 / name)


def test_the_joined_sglang_line_is_named_in_a_note():
    out = _logs(V6 / "sglang-script-capture-dp2-crlf-ansi-joined-records-2026.log")
    assert any("line 15" in n and "no line end" in n for n in out["notes"]), out["notes"]
    assert out["lines"] == 26  # the file's own line count: the split adds no line


# ------------------------------------------------------------------------------------- records joined on one line
_D = ("[2026-10-05 14:02:{s:02d} DP{r} TP{r}] Decode batch, #running-req: 8, #token: {t}, token usage: 0.03, "
      "accept len: {al}, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 400.00, #queue-req: 0")


def _dec(s, r=0, al="2.50", t=4000):
    return _D.format(s=s, r=r, al=al, t=t + 400 * s)


def test_two_decode_records_on_one_line_are_both_read(tmp_path):
    # 7 lines at AL 2.00, then one line holding a 2.00 record and a 4.00 one: 9 records; the run's AL over the lines
    # used (the first 2 steady ones set aside, the estimator's rule) = (6 x 2.00 + 4.00) / 7 (without the split: 2.00)
    text = "".join(_dec(s, al="2.00") + "\n" for s in range(7)) + _dec(7, al="2.00") + _dec(8, al="4.00") + "\n"
    out = _same_both_ways(_write(tmp_path, text))
    assert out["records"]["sglang_decode"] == 9 and out["garbled"] == 0 and out["lines"] == 8
    assert out["runs"][0]["mean_accept_length"] == pytest.approx(16 / 7)
    assert any("line 8" in n for n in out["notes"])


def test_three_records_and_prefixes_of_other_lengths(tmp_path):
    # DP10's prefix is longer than DP0's: the cut falls at the prefix's first bracket
    line = _dec(1) + _dec(1, r=10) + _dec(2) + "\n"
    out = _same_both_ways(_write(tmp_path, _dec(0) + "\n" + line))
    assert out["records"]["sglang_decode"] == 4 and out["garbled"] == 0


def test_a_record_cut_short_by_the_next_is_garbled_and_the_next_read(tmp_path):
    # another process broke into the first record after `#token: 4`: that record is garbled (counted), the second read
    cut = _dec(1)[:_dec(1).index("#token: ") + 9]
    out = _same_both_ways(_write(tmp_path, _dec(0) + "\n" + cut + _dec(2) + "\n" + _dec(3) + "\n"))
    assert out["records"]["sglang_decode"] == 3 and out["garbled"] == 1


@pytest.mark.parametrize("text", [
    "`Decode batch` lines and `Prefill batch` lines are the scheduler's\n",  # prose naming both kinds
    "[2026-11-01 00:01:29 TP0] Prefill batch. Decode batch #new-seq: 1, #running-req: 1, #queue-req: 0\n",  # no field
])
def test_lines_naming_two_kinds_without_two_records_are_not_split(tmp_path, text):
    from wmtp.log_joined import split_joined

    assert split_joined(text) is None
    out = _same_both_ways(_write(tmp_path, text + _dec(0) + "\n"))
    assert out["records"]["sglang_decode"] == 1 and not any("no line end" in n for n in out["notes"])


def test_two_prefill_records_on_one_line_read_the_same_both_ways(tmp_path):
    pre = "[2026-10-05 14:02:{s:02d} DP0 TP0] Prefill batch, #new-seq: 8, #new-token: 8192, #cached-token: 0, " \
          "token usage: 0.02, #running-req: 0, #queue-req: 0, input throughput (token/s): 10240.00"
    text = pre.format(s=0) + pre.format(s=1) + "\n" + "".join(_dec(s) + "\n" for s in range(2, 9))
    out = _same_both_ways(_write(tmp_path, text))
    assert out["records"]["other"] == 2 and out["records"]["sglang_decode"] == 7


def test_a_vllm_spec_line_with_a_throughput_line_glued_on():
    # real_v6's file: interval 3's counts (Accepted 3200 of 4800) are read: 1 + 15200 / 9600, not 1 + 12000 / 8000
    out = _logs(V6 / "vllm-v1-spec-line-and-next-window-joined-2026.log")
    assert out["accept_length"] == pytest.approx(1 + 15200 / 9600) and out["records"]["vllm_spec"] == 6


def test_the_splitter_keeps_each_records_prefix_and_drops_the_line_end():
    from wmtp.log_joined import split_joined

    a, b = _dec(1), _dec(1, r=1)
    assert split_joined(a + b + "\r\n") == [a + "\n", b + "\n"]
    assert split_joined(a + "\n") is None
    bare = "Decode batch. #running-req: 1, gen throughput (token/s): 5.0, #queue-req: 0"
    assert split_joined(bare + bare + "\n") == [bare + "\n", bare + "\n"]  # no prefix: cut at the kind's text


# -------------------------------------------------------------------------------- vLLM: Accepted > Drafted
_SPEC = ("(APIServer pid=1) INFO 05-08 13:54:{s:02d} [loggers.py:123] SpecDecoding metrics: Mean acceptance length: {al}, "
         "Accepted throughput: 35.20 tokens/s, Drafted throughput: 72.80 tokens/s, Accepted: {a} tokens, Drafted: 728 "
         "tokens, Per-position acceptance rate: 0.736, 0.477, 0.242, Avg Draft acceptance rate: 48.4%\n")


def test_more_accepted_than_drafted_is_refused_not_replaced_by_the_printed_mean(tmp_path):
    # Drafted 728 / k 3 = 242.67 drafts; Accepted 800 -> 1 + 800 / 242.67 = 4.297 > d = 4: one error (before: AL 2.43,
    # the printed mean, from drafts = 800 / 1.43)
    p = _write(tmp_path, _SPEC.format(s=0, al="2.43", a=800))
    _one_error(p, "4.2967 is above d = 4", "x.log:1-1")


def test_a_contradictory_line_among_good_ones_is_named_in_a_note(tmp_path):
    # lines 1 and 3: Accepted 352 of 728 (mean AL 1 + 352 / 242.67 = 2.45); line 2: Accepted 800; all its counts pooled:
    # 1 + (352 + 800 + 352) / (3 x 242.67) = 1 + 1504 / 728 = 3.066; the rates contradict those counts: flagged too
    text = _SPEC.format(s=0, al="2.45", a=352) + _SPEC.format(s=1, al="2.43", a=800) + _SPEC.format(s=2, al="2.45", a=352)
    out = _same_both_ways(_write(tmp_path, text))
    assert out["accept_length"] == pytest.approx(1 + 1504 / 728)
    assert any("more Accepted than Drafted" in n and "line 2" in n for n in out["notes"]), out["notes"]
    assert out["al"]["per_position_conflict"][0] == 3


def test_a_printed_mean_that_disagrees_with_drafted_over_k_still_counts_short_drafts(tmp_path):
    # Accepted 300 <= Drafted 728: drafts shorter than k (1 + 300 / 242.67 = 2.236 is not the printed 2.50), so the
    # line's own Accepted / (mean AL - 1) = 200 drafts count them: AL 2.50 (the rule the contradiction must not break)
    out = _logs(_write(tmp_path, _SPEC.format(s=0, al="2.50", a=300)))
    assert out["accept_length"] == pytest.approx(2.5) and not any("Accepted than" in n for n in out["notes"])


# ------------------------------------------------------------------ TGI /metrics without decode-batch durations
def test_tgi_request_times_are_not_turned_into_a_decode_time(tmp_path):
    # 10 requests, 1010 generated tokens, inference 30.0 s in all, 4 prefill batches 9.0 s: (30.0 - 9.0) / (1010 - 10)
    # = 21 ms would assume each request waited on one prefill batch of its own and on no other's, which the histograms
    # cannot say (4 batches for 10 requests; TGI runs a new batch's prefill while the running ones wait). The reader
    # keeps the per-request mean 0.30 / 10 = 30 ms, said to hold the prefill, confidence low.
    text = ("tgi_request_inference_duration_sum 30.0\ntgi_request_inference_duration_count 10\n"
            "tgi_request_generated_tokens_sum 1010\ntgi_request_generated_tokens_count 10\n"
            "tgi_request_mean_time_per_token_duration_sum 0.30\ntgi_request_mean_time_per_token_duration_count 10\n"
            'tgi_batch_inference_duration_sum{method="prefill"} 9.0\n'
            'tgi_batch_inference_duration_count{method="prefill"} 4\n')
    tpot = _logs(_write(tmp_path, text))["tpot"]
    assert tpot["value_ms"] == pytest.approx(30.0) and tpot["confidence"] == "low"
    assert "prefill included" in tpot["estimator"]
