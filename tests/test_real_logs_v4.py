"""The version corpus, round 4 (tests/data/real_v4/: one synthetic excerpt per log format or file encoding the readers
did not read, or read off the block reader's fast path; numbers ours, each format's public source in the folder's
README): `wmtp logs` / `wmtp accept` (both views) read every file with no traceback and no garbled line and agree with
the hand-derived values of EXPECTED.tsv within 1 %; and the parsers behind each fix, with the near misses they must
leave alone. Expected values are hand arithmetic on the lines written here (in the comments)."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from corpus_checks import logs_json as _logs  # noqa: E402
from corpus_checks import run as _run  # noqa: E402

V4 = Path(__file__).parent / "data" / "real_v4"
V3 = Path(__file__).parent / "data" / "real_v3"


def _one_error(args, *words):
    r = _run(args)
    assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
    for w in words:
        assert w in r.output, r.output


# ------------------------------------------------------------------------------------------ wide Unicode files
_SG = ("[2026-04-02 09:15:0{s}] Decode batch, #running-req: 4, #token: 4300, token usage: 0.02, accept len: 2.50, "
       "cuda graph: True, gen throughput (token/s): {thr}, #queue-req: 0\n")
_SG_TEXT = "".join(_SG.format(s=s, thr=thr) for s, thr in enumerate((200.00, 200.00, 160.00, 200.00)))
# 4/200 = 20, 20, 4/160 = 25, 20 -> median 20 ms; AL 2.50 on every line


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le"])
def test_a_wide_unicode_log_with_its_mark_reads_as_its_utf8_twin(tmp_path, codec):
    bom = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE, "utf-32-le": codecs.BOM_UTF32_LE}[codec]
    (tmp_path / "wide.log").write_bytes(bom + _SG_TEXT.replace("\n", "\r\n").encode(codec))
    (tmp_path / "plain.log").write_text(_SG_TEXT)
    wide, plain = _logs(tmp_path / "wide.log"), _logs(tmp_path / "plain.log")
    assert wide["tpot_ms"] == pytest.approx(20.0, rel=0.01) and wide["accept_length"] == pytest.approx(2.5)
    assert wide["records"] == plain["records"] == {"sglang_decode": 4, "vllm_spec": 0, "other": 0}
    assert wide["tpot_ms"] == plain["tpot_ms"] and wide["lines"] == 4


def test_a_gzipped_utf16_log_and_a_pipe_giving_one_are_read(tmp_path):
    import gzip
    import subprocess
    import sys
    raw = codecs.BOM_UTF16_LE + _SG_TEXT.encode("utf-16-le")
    (tmp_path / "w.log.gz").write_bytes(gzip.compress(raw))
    assert _logs(tmp_path / "w.log.gz")["records"]["sglang_decode"] == 4
    (tmp_path / "w.log").write_bytes(raw)
    code = ("import sys; from wmtp.cli.main import main; sys.argv = ['wmtp', 'logs', '/dev/stdin', '--json']; main()")
    with open(tmp_path / "w.log", "rb") as f:
        r = subprocess.run([sys.executable, "-c", code], stdin=f, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)[0]["records"]["sglang_decode"] == 4


def test_a_utf16_bench_json_keeps_its_per_position_rates(tmp_path):
    # vllm bench serve --save-result (real_v3), re-saved as UTF-16: AL 1 + 15360 / 10240 = 2.50, rates 0.7, 0.5, 0.3
    text = (V3 / "vllm-bench-serve-2026-save-result-json-per-position.json").read_text()
    (tmp_path / "r.json").write_bytes(text.encode("utf-16"))  # (Python writes the mark)
    r = _run(["accept", str(tmp_path / "r.json"), "--json"])
    assert r.exit_code == 0, r.output
    f = json.loads(r.output)["files"][0]
    assert f["accept_length"] == pytest.approx(2.5)
    assert _logs(tmp_path / "r.json")["tpot_ms"] == pytest.approx(12.5)


def test_wide_text_without_a_mark_and_nul_bytes_stay_refused(tmp_path):  # near misses: no mark, no codec guessed
    (tmp_path / "nobom.log").write_bytes(_SG_TEXT.encode("utf-16-le"))
    _one_error(["logs", str(tmp_path / "nobom.log")], "binary data")
    (tmp_path / "bin.log").write_bytes(b"\xff\xfd\x00\x00\x01\x02" * 100)  # (no mark: \xff\xfd is none)
    _one_error(["logs", str(tmp_path / "bin.log")], "binary data")


def test_a_mark_on_garbage_is_one_error_not_a_traceback(tmp_path):
    (tmp_path / "g.log").write_bytes(codecs.BOM_UTF16_LE + bytes(range(256)) * 8 + b"\x00")  # odd length, junk
    _one_error(["logs", str(tmp_path / "g.log")], "no usable")


# ------------------------------------------------------------------------- summaries in seconds (EvalScope, GKE)
def test_evalscope_summary_row_in_seconds(tmp_path):
    p = tmp_path / "e.log"
    p.write_text("| Average time per output token (s) |    0.0125 |\n")  # 0.0125 s = 12.5 ms
    out = _logs(p)
    assert out["tpot_ms"] == pytest.approx(12.5) and "Mean TPOT" in out["tpot"]["estimator"]


def test_inter_token_latency_in_seconds_is_the_fallback(tmp_path):
    p = tmp_path / "g.log"
    p.write_text("Average Time to First Token (s): 0.50\nAverage Inter-Token Latency (s): 0.04\n")  # 0.04 s = 40 ms
    out = _logs(p)
    assert out["tpot_ms"] == pytest.approx(40.0) and "ITL" in out["tpot"]["estimator"]


@pytest.mark.parametrize("line", [
    "Average time per output token (ms): 20.0",   # another unit: not this label (not read as 20 s)
    "Average milliseconds/output_token (includes waiting time on server): 52.25",  # the first token's wait included
    "Average seconds/token (includes waiting time on server): 0.05",
    "| Average time to first token (s)   |    0.2    |",
])
def test_near_miss_second_labels_give_no_tpot(tmp_path, line):
    p = tmp_path / "n.log"
    p.write_text(line + "\n")
    _one_error(["logs", str(p)], "no usable")


def test_a_garbled_seconds_value_is_garbled_not_zero(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("Average Time Per Output Token (s): nan\n")
    r = _run(["logs", str(p), "--json"])
    assert r.exit_code == 1 and r.output.startswith("error: ") and "1 garbled" in r.output, r.output


# ------------------------------------------------------------------------------------- AISBench's perf table
_AIS = "│ {name:<24} │ {stage:<7} │ {avg:<15} │ {mn:<15} │  8  │\n"


def test_aisbench_tpot_row_gives_its_average_cell(tmp_path):
    rows = [("E2EL", "total", "2754.0 ms", "2189.0 ms"), ("TPOT", "total", "18.4 ms", "17.0 ms"),
            ("ITL", "total", "18.2 ms", "0.1 ms")]
    p = tmp_path / "a.log"
    p.write_text("".join(_AIS.format(name=a, stage=b, avg=c, mn=d) for a, b, c, d in rows))
    out = _logs(p)
    assert out["tpot_ms"] == pytest.approx(18.4)  # the TPOT row's Average (first number cell), not ITL's 18.2


def test_aisbench_itl_row_alone_and_a_seconds_cell(tmp_path):
    p = tmp_path / "a.log"
    p.write_text(_AIS.format(name="ITL", stage="stable", avg="0.0215 s", mn="0.0001 s"))  # 0.0215 s = 21.5 ms
    out = _logs(p)
    assert out["tpot_ms"] == pytest.approx(21.5) and "ITL" in out["tpot"]["estimator"]


@pytest.mark.parametrize("row", [
    "│ TPOT │ 25.0 ms │ 24.0 ms │\n",           # no stage cell: not AISBench's layout
    "│ TPOT │ p99 │ 30.0 ms │ 31.0 ms │\n",     # a percentile label, not a stage word
    "│ TPOT │ total │ 25.0 token/s │ 1 │\n",     # no time unit
    "│ TTFT │ total │ 200.0 ms │ 190.0 ms │\n",  # another metric
])
def test_aisbench_near_miss_rows_are_not_read(tmp_path, row):
    p = tmp_path / "n.log"
    p.write_text(row)
    _one_error(["logs", str(p)], "no usable")


# ---------------------------------------------------------------------------- tables of one width, wraps joined
def test_equal_width_box_table_is_not_joined_as_a_terminal_wrap():
    from wmtp.log_input import open_text
    with open_text(V4 / "aiperf-llm-metrics-wide-rich-box-2025.log") as f:
        lines = list(f)
    assert len(lines) == 14 and all(line.count("\n") == 1 for line in lines)
    assert sum("Inter Token Latency (ms)" in line for line in lines) == 1 and len(lines[7]) == 116


def test_a_real_terminal_wrap_next_to_a_box_table_is_still_joined(tmp_path):
    # a vLLM V1 line of 181 characters cut at 120 columns, twice; then a one-width box table (120 wide)
    line = ("INFO 03-01 10:00:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
            "throughput: 100.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.5%, Prefix cache hit "
            "rate: 0.0%")
    text = ""
    for s in (0, 10):
        full = line.format(s=s)
        text += full[:120] + "\n" + full[120:] + "\n"
    box = "│ " + "Time to First Token (ms)".rjust(60) + " │ " + "16.26".rjust(53) + " │"
    assert len(box) == 120
    text += ("┏" + "━" * 118 + "┓\n") + box + "\n" + ("└" + "─" * 118 + "┘\n")
    p = tmp_path / "w.log"
    p.write_text(text)
    out = _logs(p)
    assert out["tpot_ms"] == pytest.approx(20.0, rel=0.01)  # 2 running / 100 tokens/s (medians: 0.1 % bins)
    from wmtp.log_input import open_text
    with open_text(p) as f:
        got = [x for x in f if x.strip()]
    assert got[3].rstrip("\n") == box and sum("Engine 000" in x for x in got) == 2 and len(got) == 5


# ----------------------------------------------------------------- SGLang decode lines on the block fast path
@pytest.mark.parametrize("name", ["sglang-pd-decode-npu-graph-dp-attention-2026.log",
                                  "sglang-epd-language-only-waiting-image-req-2026.log"])
def test_pd_npu_and_waiting_image_decode_lines_take_the_fast_path(name):
    from wmtp.log_blocks import _DEC, _SKELETONS, _ZERO_UTF8
    for line in (V4 / name).read_text().splitlines():
        assert _SKELETONS[line.encode().translate(_ZERO_UTF8)][1] == _DEC, line


@pytest.mark.parametrize("extra, graph", [("", "cpu graph: False"), ("#retracted-req: 2, ", "npu graph: True")])
def test_fast_path_fields_read_as_the_parsers_read_them(tmp_path, extra, graph):
    from wmtp.log_analysis import analyse
    lines = "".join(
        f"[2026-05-20 14:02:{s:02d} DP0 TP0] Decode batch, #running-req: 16, #token: {9000 + s}, token usage: 0.31, "
        f"accept len: 2.50, accept rate: 0.50, pre-allocated usage: 0.04, #prealloc-req: 0, #transfer-req: 1, "
        f"{extra}{graph}, gen throughput (token/s): {thr:.2f}, #queue-req: 0\n"
        for s, thr in enumerate((800.0, 800.0, 640.0, 800.0)))  # 16/800 = 20, 20, 16/640 = 25, 20 -> median 20 ms
    p = tmp_path / "pd.log"
    p.write_text(lines)
    fast, ref = analyse(p), analyse(p, reference=True)
    assert fast["tpot_ms"] == pytest.approx(20.0, rel=0.01) and fast["accept_length"] == pytest.approx(2.5)
    assert json.dumps(fast, sort_keys=True, default=str) == json.dumps(ref, sort_keys=True, default=str)


def test_a_near_miss_pd_line_missing_a_queue_field_leaves_the_fast_path_and_still_reads(tmp_path):
    from wmtp.log_blocks import _DEC, _SKELETONS, _ZERO_UTF8
    line = ("[2026-05-20 14:02:00 DP0 TP0] Decode batch, #running-req: 16, #token: 9000, token usage: 0.31, "
            "pre-allocated usage: 0.04, #transfer-req: 1, cuda graph: True, gen throughput (token/s): 800.00, "
            "#queue-req: 0")  # no `#prealloc-req`: not the layout the fast path slices (the parsers read it)
    assert _SKELETONS[line.encode().translate(_ZERO_UTF8)][1] != _DEC
    p = tmp_path / "pd.log"
    p.write_text("\n".join([line] * 3) + "\n")
    assert _logs(p)["tpot_ms"] == pytest.approx(20.0, rel=0.01)  # 16 / 800 (medians: 0.1 % bins)


# ------------------------------------------------------------------------------- AIPerf's Spec Decode section
_AIP = "│ {name:>33} │ {avg:>6} │ {mn:>5} │\n"


def test_aiperf_token_weighted_acceptance_length_wins_over_the_per_request_mean(tmp_path):
    rows = [("Acceptance Length (ratio)", "4.19", "1.83"), ("Token-Weighted Acceptance Length", "4.63", "N/A"),
            ("(ratio)", "", ""), ("Draft Acceptance Rate (%)", "63.83", "16.52"),
            ("Accepted per Verified (ratio)", "0.70", "0.30")]
    p = tmp_path / "a.log"
    p.write_text("".join(_AIP.format(name=a, avg=b, mn=c) for a, b, c in rows))
    out = _logs(p)
    assert out["accept_length"] == pytest.approx(4.63) and "Token-Weighted" in out["al"]["estimator"]


def test_aiperf_per_request_acceptance_length_alone_is_read(tmp_path):
    p = tmp_path / "a.log"
    p.write_text(_AIP.format(name="Acceptance Length (ratio)", avg="3.80", mn="1.50"))
    assert _logs(p)["accept_length"] == pytest.approx(3.80)


@pytest.mark.parametrize("name, avg", [("Accepted per Verified (ratio)", "0.70"),  # a utilization, not an AL
                                       ("Overall Draft Acceptance Rate (%)", "72.65"),
                                       ("Spec Decode Steps (count)", "118.53")])
def test_aiperf_near_miss_spec_rows_give_no_acceptance_length(tmp_path, name, avg):
    p = tmp_path / "a.log"
    p.write_text(_AIP.format(name=name, avg=avg, mn="1.00"))
    _one_error(["logs", str(p)], "no usable")


# ------------------------------------------------ vLLM V1 spec lines whose Drafted counts more than k per draft
_SPEC = ("(APIServer pid=7) INFO 03-01 10:00:{s:02d} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.50, "
         "Accepted throughput: 30.00 tokens/s, Drafted throughput: 90.00 tokens/s, Accepted: 300 tokens, Drafted: "
         "{drafted} tokens, Per-position acceptance rate: 0.700, 0.500, 0.300, Avg Draft acceptance rate: {rate}%{tail}\n")


def test_a_tree_drafts_line_counts_drafts_from_its_printed_acceptance_length(tmp_path):
    # a tree-verifying fork: Drafted 900 = 4.5 nodes per draft at k = 3 depths. Drafted / k = 300 drafts would give
    # AL 1 + 300 / 300 = 2.0; the line's own mean AL 2.50 (and its rates, 0.7 + 0.5 + 0.3 = 1.5 = Accepted / drafts)
    # say 300 / 1.5 = 200 drafts: AL 2.50
    p = tmp_path / "t.log"
    p.write_text("".join(_SPEC.format(s=s, drafted=900, rate="33.3", tail=", Avg tree nodes per depth: 2.0, 1.5, 1.0")
                         for s in (0, 10)))
    out = _logs(p)
    assert out["accept_length"] == pytest.approx(2.5)
    r = _run(["accept", str(p), "--json"])
    f = json.loads(r.output)["files"][0]
    assert f["accept_length"] == pytest.approx(2.5)


def test_a_full_length_drafts_line_still_counts_drafted_over_k(tmp_path):  # the control: Drafted = k x drafts
    # Drafted 600 = 3 x 200: AL 1 + 300 / 200 = 2.50 either way; then a line printed 2.49 (rounding of 2.4949):
    # within the 0.005 rounding Drafted / k is kept: 1 + 299 / 200 = 2.495
    p = tmp_path / "f.log"
    p.write_text(_SPEC.format(s=0, drafted=600, rate="50.0", tail="")
                 + _SPEC.format(s=10, drafted=600, rate="49.8", tail="").replace("length: 2.50", "length: 2.49")
                 .replace("Accepted: 300", "Accepted: 299"))
    assert _logs(p)["accept_length"] == pytest.approx(1 + (300 + 299) / 400)


# ------------------------------------------------------------------------------ text-generation-inference scrape
def test_tgi_histograms_give_tpot_and_al_and_their_buckets_do_not(tmp_path):
    p = tmp_path / "m.txt"
    p.write_text("tgi_request_mean_time_per_token_duration_bucket{le=\"0.05\"} 10\n"
                 "tgi_request_mean_time_per_token_duration_sum 0.3\ntgi_request_mean_time_per_token_duration_count 10\n"
                 "tgi_request_skipped_tokens_bucket{le=\"1\"} 300\n"  # a bucket: not a count of accepted tokens
                 "tgi_request_skipped_tokens_sum 150\ntgi_request_skipped_tokens_count 300\n")
    out = _logs(p)
    assert out["tpot_ms"] == pytest.approx(30.0)  # 0.3 s / 10 requests
    # 1 + 150 / (300 - 10): each of the 10 requests' prefill generation is one observation with no draft (round 5:
    # backends/v3/src/backend.rs records `n - 1` for every generation, the prefill's included)
    assert out["accept_length"] == pytest.approx(1 + 150 / 290)


@pytest.mark.parametrize("text", [
    'tgi_batch_forward_duration_sum{method="decode"} 91.2\ntgi_batch_forward_duration_count{method="decode"} 4000\n',
    "tgi_request_duration_sum 186.4\ntgi_request_duration_count 40\n",  # end-to-end, not per token
    "tgi_request_generated_tokens_sum 9500\ntgi_request_generated_tokens_count 40\n",
    "tgi_request_skipped_tokens_bucket{le=\"2\"} 4000\n",
])
def test_tgi_near_miss_samples_give_nothing(tmp_path, text):
    p = tmp_path / "m.txt"
    p.write_text(text)
    _one_error(["logs", str(p)], "no usable")


# ------------------------------------------------------------------------------------ MLC-LLM engine metrics
def _mlc(acc, drafted) -> str:
    return json.dumps({"completion_tokens_sum": 100, "last_finished_request": {"completion_tokens": 40},
                       "spec_decode": {"draft_count": drafted, "accept_count": acc}}) + "\n"


def test_mlc_spec_decode_counts_give_al_and_conditional_rates(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(_mlc([1000, 800, 600, 400], [1000] * 4))  # AL (1000 + 800 + 600 + 400) / 1000 = 2.8
    assert _logs(p)["accept_length"] == pytest.approx(2.8)
    r = _run(["accept", str(p), "--json"])
    f = json.loads(r.output)["files"][0]
    assert f["accept_length"] == pytest.approx(2.8)
    assert [a["alpha"] for a in f["alphas"]] == pytest.approx([0.8, 600 / 800, 400 / 600])  # accept_count[j] / [j-1]


@pytest.mark.parametrize("acc, drafted", [
    ([1000, 800, 900], [1000] * 3),   # more steps emitted 3 tokens than 2: not counts of this kind
    ([900, 800], [1000, 1000]),       # steps counted twice differently (accept_count[0] is every step)
    ([1000, 800], [1000, 1000, 1000]),  # lengths differ
])
def test_mlc_inconsistent_counts_are_not_read(tmp_path, acc, drafted):
    p = tmp_path / "m.json"
    p.write_text(_mlc(acc, drafted))
    _one_error(["logs", str(p)], "no usable")


# ---------------------------------------------- a vLLM fork's spec line: conditional rates and their coverage after them
_FORK = ("(APIServer pid=7) INFO 03-01 10:00:00 [metrics.py:140] SpecDecoding metrics: Mean acceptance length: 2.50, "
         "Mean verification depth: 2.50/3, Accepted throughput: 30.00 tokens/s, Drafted throughput: 50.00 tokens/s, "
         "Accepted: 300 tokens, Drafted: 500 tokens, Per-position acceptance rate: {rates}, "
         "Per-position verification coverage: {cover}, Avg Draft acceptance rate: 60.0%\n")


def test_fork_conditional_rates_times_coverage_are_the_unconditional_ones(tmp_path):
    # 200 drafts reaching positions 1-3: 200, 160, 140 (coverage 1.0, 0.8, 0.7; Drafted 500), accepting 140, 100, 60
    # (Accepted 300; AL 1 + 300 / 200 = 2.50): printed conditional rates 140/200, 100/160, 60/140 = 0.700, 0.625,
    # 0.429; unconditional 0.7, 0.5, 0.3 -> alphas 0.7, 0.5/0.7, 0.3/0.5. Before, the coverage list was read as three
    # more rates (k = 6, d = 7)
    p = tmp_path / "f.log"
    p.write_text(_FORK.format(rates="0.700, 0.625, 0.429", cover="1.000, 0.800, 0.700"))
    r = _run(["accept", str(p), "--json"])
    f = json.loads(r.output)["files"][0]
    assert f["accept_length"] == pytest.approx(2.5) and f["measured_depth"] == 4
    assert [a["alpha"] for a in f["alphas"]] == pytest.approx([0.7, 0.5 / 0.7, 0.3 / 0.5], rel=2e-3)


def test_fork_rate_dashes_read_as_zero_and_a_short_coverage_list_gives_no_rates(tmp_path):
    p = tmp_path / "f.log"  # no draft reached position 3: `-----`, coverage 0
    p.write_text(_FORK.format(rates="0.700, 0.625, -----", cover="1.000, 0.800, 0.000")
                 .replace("Accepted: 300", "Accepted: 240").replace("length: 2.50", "length: 2.20"))
    from wmtp.logs import parse_vllm
    rec = parse_vllm(p.read_text(), 1)
    assert rec.per_position == pytest.approx([0.7, 0.5, 0.0]) and rec.k == 3
    rec = parse_vllm(_FORK.format(rates="0.700, 0.625, 0.429", cover="1.000, 0.800"), 1)
    assert rec.per_position == [] and rec.accepted == 300


def test_upstream_rates_stop_at_the_next_field():  # the control: upstream's line, and a field after the rates
    from wmtp.logs import parse_vllm
    line = ("SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 30.00 tokens/s, Drafted "
            "throughput: 60.00 tokens/s, Accepted: 300 tokens, Drafted: 600 tokens, Per-position acceptance rate: "
            "0.700, 0.500, 0.300, Avg Draft acceptance rate: 50.0%, Avg tree nodes per depth: 2.0, 1.5, 1.0")
    assert parse_vllm(line, 1).per_position == pytest.approx([0.7, 0.5, 0.3])
