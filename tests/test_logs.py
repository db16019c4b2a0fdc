"""Serving logs and acceptance data: real line formats (tests/data/sglang_decode.log holds lines as
printed in sgl-project/sglang PRs #6081 and #22331, plus the hybrid-model fields), the artifact's
TPOT estimator against hand computation and synthetic logs, histograms with closed-form alpha and
AL, vLLM metric lines, top-down calibration."""

from __future__ import annotations

import gzip
import json
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from wmtp.acceptance_io import compare, profile_from_file, profile_from_vllm
from wmtp.cli.main import app
from wmtp.errors import WmtpError
from wmtp.calibrate.framework_fit import fit_t_iter
from wmtp.logs import DecodeLine, ParseStats, VllmSpecLine, parse_sglang, parse_vllm, stream
from wmtp.logstats import estimate_segments

DATA = Path(__file__).parent / "data"
runner = CliRunner()


def test_sglang_line_variants():
    a = parse_sglang("[2025-05-31 18:31:21 DP0 TP0] Decode batch. #running-req: 8, #token: 37217, token usage: 0.13, "
                     "accept len: 2.90, cuda graph: True, gen throughput (token/s): 171.01, #queue-req: 0", 1)
    assert (a.running, a.tokens, a.accept_len, a.cuda_graph, a.gen_throughput, a.queue) == (8, 37217, 2.9, True, 171.01, 0)
    assert a.time == "2025-05-31 18:31:21"
    b = parse_sglang("Decode batch [12], #running-req: 3, #full token: 100, full token usage: 0.1, mamba num: 3, "
                     "mamba usage: 0.01, accept len: 3.5, accept rate: 0.62, cuda graph: False, "
                     "gen throughput (token/s): 50.5, #queue-req: 2", 2)
    assert (b.running, b.tokens, b.accept_len, b.accept_rate, b.cuda_graph, b.time) == (3, 100, 3.5, 0.62, False, None)
    c = parse_sglang("INFO scheduler: Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: True, "
                     "gen throughput (token/s): 144.95, #queue-req: 0", 3)
    assert c.accept_len is None and c.running == 5
    assert parse_sglang("[x] Decode batch. #running-req: 8, #token: 37787, accept len: 2.6", 4) is None  # truncated


def test_vllm_lines():
    r = parse_vllm("INFO 05-01 SpecDecoding metrics: Mean acceptance length: 2.43, Accepted throughput: 35.2 tokens/s, "
                   "Drafted throughput: 72.8 tokens/s, Accepted: 352 tokens, Drafted: 728 tokens, "
                   "Per-position acceptance rate: 0.736, 0.477, 0.242, Avg Draft acceptance rate: 48.4%", 1)
    assert (r.mean_al, r.accepted, r.drafted, r.per_position) == (2.43, 352, 728, [0.736, 0.477, 0.242])
    old = parse_vllm("SpecDecoding metrics: Draft acceptance rate: 100.0%, Accepted: 66 tokens, Drafted: 66 tokens", 2)
    assert (old.accepted, old.drafted, old.per_position) == (66, 66, [])


def test_stream_counts_and_estimator_by_hand():
    stats = ParseStats()
    recs = list(stream(DATA / "sglang_decode.log", stats))
    assert (stats.lines, stats.decode, stats.garbled, stats.skipped, stats.other) == (15, 12, 1, 1, 1)  # prefill: other
    segs = estimate_segments(recs)
    spec, dense = segs
    assert spec.speculative and not dense.speculative and spec.b_eff == 8 and dense.b_eff == 5
    # B=8 lines after the first two, the #full token: 0 line dropped: 2.94/173.06, 2.65/155.80, 2.58/152.08
    t = sorted([2.94 / 173.06, 2.65 / 155.80, 2.58 / 152.08])[1]
    al = (2.94 + 2.65 + 2.58) / 3
    assert spec.n_steady == 3
    assert spec.t_iter_ms == pytest.approx(t * 1e3, rel=6e-4)
    assert spec.tpot_ms == pytest.approx(t * 8 / al * 1e3, rel=6e-4)
    assert dense.mean_accept_length == 1.0


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 16), st.floats(5.0, 80.0), st.floats(1.0, 6.0), st.integers(20, 200), st.integers(0, 2**31))
def test_estimator_recovers_a_known_step(batch, step_ms, al_mean, n, seed):
    """Synthetic log: each line's throughput = B * AL / step (logged AL noisy, step jittered 2 %):
    TPOT must come back as step / AL within the noise."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        al = max(1.0, al_mean + rng.uniform(-0.3, 0.3))
        s = step_ms * (1 + rng.uniform(-0.02, 0.02)) / 1e3
        lines.append(DecodeLine(i + 1, None, batch, 1000, round(al, 2), None, batch * round(al, 2) / s, True, 0))
    seg = estimate_segments(lines, batch)[0]
    assert seg.b_eff == batch
    assert seg.t_iter_ms == pytest.approx(step_ms / batch, rel=0.025)  # T_iter = AL / throughput = step / B
    assert seg.step_ms == pytest.approx(step_ms, rel=0.025)
    assert seg.tpot_ms == pytest.approx(step_ms / seg.mean_accept_length, rel=0.025)


def test_segments_split_on_time_gap_and_mode(tmp_path):
    rows = []
    for h, al in ((10, "accept len: 3.00, "), (11, "accept len: 4.00, ")):
        for s in range(10):
            rows.append(f"[2026-01-01 {h}:00:{s:02d}] Decode batch. #running-req: 1, #token: 10, token usage: 0.1, "
                        f"{al}cuda graph: True, gen throughput (token/s): 100.0, #queue-req: 0")
    (tmp_path / "two.log").write_text("\n".join(rows))
    segs = estimate_segments(stream(tmp_path / "two.log"))
    assert len(segs) == 2 and [round(s.mean_accept_length) for s in segs] == [3, 4]


def test_meta_info_histogram_closed_form(tmp_path):
    # sglang meta_info as quoted in sgl-project/sglang PR #33518: AL = completion / verify_ct = 106 / 43.
    meta = {"meta_info": {"spec_accept_rate": 0.2930, "spec_accept_length": 2.4651, "spec_num_correct_drafts": 63,
                          "spec_num_proposed_drafts": 215, "spec_verify_ct": 43,
                          "spec_correct_drafts_histogram": [11, 14, 11, 4, 0, 3]}}
    p = tmp_path / "meta.json"
    p.write_text(json.dumps([meta, {"meta_info": {"spec_accept_histogram": [1, 0, 0, 0, 0, 0]}}]))
    prof, info = profile_from_file(p)
    assert info["kind"] == "sglang meta_info histograms"
    assert prof.counts[0] == 12
    assert prof.accept_length(6) == pytest.approx((106 + 1) / 44)
    assert prof.alphas[0] == pytest.approx(32 / 44)


def test_per_step_jsonl_and_gzip(tmp_path):
    p = tmp_path / "steps.jsonl"
    p.write_text("\n".join(json.dumps({"accept_length": x}) for x in [1, 2, 3, 3, 4, 1]) + "\n{broken\n")
    prof, info = profile_from_file(p)
    assert info["kind"] == "per-step accept lengths" and prof.accept_length(4) == pytest.approx(14 / 6)
    g = tmp_path / "log.gz"
    with gzip.open(g, "wt") as f:
        f.write((DATA / "sglang_decode.log").read_text())
    assert sum(isinstance(r, DecodeLine) for r in stream(g)) == 12


def test_vllm_per_position_to_conditional():
    # Unconditional per-position rates of a chain with alpha = 0.8, 0.5, 0.25: 0.8, 0.4, 0.1
    lines = [VllmSpecLine(1, 2.3, 130, 300, [0.8, 0.4, 0.1]), VllmSpecLine(2, 2.3, 130, 300, [0.8, 0.4, 0.1])]
    prof = profile_from_vllm(lines, "test")
    assert prof.alphas == pytest.approx([0.8, 0.5, 0.25])
    assert prof.accept_length(4) == pytest.approx(1 + 0.8 + 0.4 + 0.1)
    with pytest.raises(WmtpError, match="per-position"):
        profile_from_vllm([VllmSpecLine(1, None, 66, 66, [])], "x")


def test_compare_flags_significant_differences():
    from wmtp.acceptance import from_histogram

    a = from_histogram([100, 100, 800], "a")  # alpha_1 = 0.9
    b = from_histogram([500, 100, 400], "b")  # alpha_1 = 0.5
    rows = compare(a, b)
    assert rows[0]["significant"] and rows[0]["z"] > 0
    c = from_histogram([101, 99, 800], "c")
    assert not compare(a, c)[0]["significant"]


def test_framework_fit_closed_form():
    pts = [{"gamma": g, "t_iter_ms": 1.19 * g + 18.0} for g in (2, 4, 6, 8)]
    f = fit_t_iter(pts)
    assert f["t_fwd_ms"] == pytest.approx(1.19) and f["c_ms"] == pytest.approx(18.0)
    assert f["heldout_median_rel"] < 1e-9
    cliff = pts + [{"gamma": 1, "t_iter_ms": 5.0}]
    assert fit_t_iter(cliff, min_gamma=2)["t_fwd_ms"] == pytest.approx(1.19)
    with pytest.raises(WmtpError, match="2 depths"):
        fit_t_iter(pts[:1])


def _log(path: Path, step_ms: float, al: float, batch: int = 1, n: int = 40):
    thr = batch * al / (step_ms / 1e3)
    path.write_text("\n".join(
        f"[2026-01-01 10:00:{i % 60:02d}] Decode batch. #running-req: {batch}, #token: 10, token usage: 0.1, "
        f"accept len: {al:.2f}, cuda graph: True, gen throughput (token/s): {thr:.3f}, #queue-req: 0" for i in range(n)))
    return path


def test_calibrate_from_logs_and_predict_with_framework(tmp_path):
    # logged steps grow 2.5 ms per draft forward: faster than the kernel model of q35 on the H200 (NVFP4 priced as
    # the measured 4-bit weight-only kernels, about 1.9 ms per depth at 1M), so the fitted overhead is positive
    runs = [f"{_log(tmp_path / f'd{d}.log', 2.5 * (d - 1) + 30.0, 3.0)}:{d}" for d in (3, 5, 7)]
    args = ["calibrate", "--models", "q35", "--out", str(tmp_path)] + sum((["--from-logs", r] for r in runs), [])
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    fw = json.loads((tmp_path / "framework.json").read_text())
    assert fw["t_iter_fit"]["t_fwd_ms"] == pytest.approx(2.5, rel=1e-2)  # medians from 0.1 %-wide bins
    base = json.loads(runner.invoke(app, ["predict", "--model", "q35", "--json"]).output)
    out = json.loads(runner.invoke(app, ["predict", "--model", "q35", "--json", "--framework",
                                         str(tmp_path / "framework.json")]).output)
    # With the framework profile the native step at d = 7 is the logged step (kernel + fitted overhead).
    assert out["methods"]["native"]["step_ms"] == pytest.approx(2.5 * 6 + 30.0, rel=0.01)
    assert out["methods"]["window"]["step_ms"] == pytest.approx(base["methods"]["window"]["step_ms"])
    assert any("framework" in c["source"] for c in out["methods"]["native"]["components"])
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    r = runner.invoke(app, ["predict", "--model", "q35", "--framework", str(bad)])
    assert r.exit_code == 1 and "not a wmtp framework profile" in r.output


def test_cli_logs_and_accept(tmp_path):
    r = runner.invoke(app, ["logs", str(DATA / "sglang_decode.log"), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)[0]["garbled"] == 1
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\nat all\n")
    r = runner.invoke(app, ["logs", str(empty)])
    assert r.exit_code == 1 and r.output.startswith("error: ") and "no usable decode line" in r.output
    assert "Traceback" not in r.output
    h = tmp_path / "h.json"
    h.write_text("[10, 20, 30, 40]")
    r = runner.invoke(app, ["accept", str(h), "--json"])
    assert r.exit_code == 0
    out = json.loads(r.output)["files"][0]
    assert out["accept_length"] == pytest.approx(3.0) and out["al_by_depth"]["9"]["extrapolated"]
    r = runner.invoke(app, ["accept", str(DATA / "sglang_decode.log"), "--json"])  # a mean AL needs no depth
    out = json.loads(r.output)["files"][0]
    assert r.exit_code == 0 and out["alphas"] == [] and "--depth" in out["note"]
    assert out["accept_length"] == pytest.approx((2.90 + 2.86 + 2.65 + 2.58) / 4)  # line 4 follows the prefill, line 9 has #full token 0
    r = runner.invoke(app, ["accept", str(DATA / "sglang_decode.log"), "--depth", "7", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["files"][0]["kind"].startswith("SGLang")
    r = runner.invoke(app, ["accept", str(h), str(h), "--compare"])
    assert r.exit_code == 0 and "native vs window" in r.output
    assert math.isfinite(json.loads(runner.invoke(app, ["accept", str(h), "--json"]).output)["files"][0]["alphas"][0]["alpha"])


def test_presets_by_task_and_al_window_points():
    r = runner.invoke(app, ["predict", "--model", "q35", "--task", "cwe", "--json"])
    out = json.loads(r.output)
    assert out["methods"]["native"]["accept_length"] == pytest.approx(2.8)
    assert any("matched" in w for w in out["warnings"])
    r = runner.invoke(app, ["predict", "--model", "q35", "--task", "h100", "--json"])
    assert r.exit_code == 1 and "known:" in r.output
    r = runner.invoke(app, ["sweep", "window", "--model", "q122", "--al-window", "1K:3.9,4032:4.74", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["rows"]
    assert rows[2]["window"] == 1024 and rows[2]["accept_length"] == pytest.approx(3.9)
    assert rows[2]["accept_source"].startswith("--al-window")
    r = runner.invoke(app, ["sweep", "window", "--model", "q122", "--al-window", "abc"])
    assert r.exit_code == 1 and "--al-window" in r.output


# --- rules of `wmtp logs` on small hand-made inputs (expected values computed by hand) ---------------

from wmtp.log_analysis import analyse  # noqa: E402
from wmtp.logstats import median_of_bins  # noqa: E402


def _sgl(t: str, b: int, thr: float, al: float | None = None, tok: int = 100, prefix: str = "TP0", rate=None) -> str:
    spec = "" if al is None else f"accept len: {al:.2f}, "
    spec += "" if rate is None else f"accept rate: {rate:.2f}, "
    return (f"[2026-01-01 {t} {prefix}] Decode batch. #running-req: {b}, #token: {tok}, token usage: 0.10, {spec}"
            f"cuda graph: True, gen throughput (token/s): {thr:.2f}, #queue-req: 0")


def _write(tmp_path, name, lines) -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_median_of_bins_even_count_is_the_mean_of_the_middle_two():
    from wmtp.logstats import _bin

    bins = {}
    for x in (10.0, 20.0, 30.0, 40.0):
        bins[_bin(x)] = bins.get(_bin(x), 0) + 1
    assert median_of_bins(bins) == pytest.approx(25.0, rel=1e-3)


def test_per_line_tpot_on_a_drain_and_confidence(tmp_path):
    # batch 4, 3, 2 at 100, 90, 80 tok/s: per-line TPOT 40, 33.33, 25 ms -> pooled median 33.33 ms, low confidence
    p = _write(tmp_path, "drain.log", [_sgl("10:00:01", 4, 100), _sgl("10:00:02", 3, 90), _sgl("10:00:03", 2, 80)])
    out = analyse(p)
    assert out["tpot_ms"] == pytest.approx(1000 * 3 / 90, rel=2e-3)
    assert out["tpot"]["batch"] is None and "pooled" in out["tpot"]["estimator"] and out["tpot"]["confidence"] == "medium"
    assert [r["batch"] for r in out["runs"][0]["tpot_by_batch"]] == [2, 3, 4]
    one = analyse(_write(tmp_path, "one.log", [_sgl("10:00:01", 8, 200, 2.5)]))
    assert one["tpot_ms"] == pytest.approx(40.0, rel=1e-3) and one["tpot"]["confidence"] == "low"
    assert one["accept_length"] == pytest.approx(2.5)


def test_first_decode_line_after_a_prefill_is_dropped(tmp_path):
    pre = "[2026-01-01 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 28, #cached-token: 0, #running-req: 0"
    lines = [pre, _sgl("10:00:01", 1, 0.5, 2.0)] + [_sgl(f"10:00:0{i}", 1, 100 + i, 3.0) for i in range(2, 7)]
    out = analyse(_write(tmp_path, "p.log", lines))
    # kept throughputs 102..106 -> median 104 -> 1000/104 ms; AL over the kept lines = 3.0
    assert out["tpot_ms"] == pytest.approx(1000 / 104, rel=2e-3) and out["accept_length"] == pytest.approx(3.0)
    assert out["runs"][0]["dropped_after_prefill"] == 1
    only = analyse(_write(tmp_path, "only.log", [pre, _sgl("10:00:01", 32, 40.0, 2.5)]))  # nothing else: used, flagged
    assert only["tpot_ms"] == pytest.approx(800.0, rel=2e-3) and only["tpot"]["confidence"] == "low"


def test_runs_split_on_backwards_time_gap_and_restart_but_dp_ranks_pool(tmp_path):
    a = [_sgl(f"10:00:0{i}", 2, 100, prefix=f"DP{i % 2} TP{i % 2}") for i in range(4)]  # two ranks, one run
    back = [_sgl("09:00:00", 2, 50)]  # time goes back an hour
    gap = [_sgl("11:00:00", 2, 40)]  # a long gap
    out = analyse(_write(tmp_path, "r.log", a + back + gap))
    assert len(out["runs"]) == 3 and out["runs"][0]["ranks"] == ["0", "1"] and out["runs"][0]["tpot_samples"] == 4
    pid = [f"(SGLangEngine pid={p}) " + _sgl(f"10:00:0{i}", 1, 100) for i, p in enumerate((7, 7, 8))]
    assert len(analyse(_write(tmp_path, "pid.log", pid))["runs"]) == 2  # same (no) DP rank, new process


def test_markdown_and_lost_columns(tmp_path):
    md = ("[2026-01-01 10:00:01 TP0] Decode batch. **#running-req**: 4, #token: 10, **accept len**: `2.50`, "
          "gen throughput (token/s): **200.00**, #queue-req: 0")
    out = analyse(_write(tmp_path, "md.log", [md]))
    assert out["tpot_ms"] == pytest.approx(20.0, rel=1e-3) and out["accept_length"] == pytest.approx(2.5)
    cut = ("[2026-05-28 02:59:59 TP0] Decode batch, #running-req: 45, #token: 44672, token usaccept rate: 0.32, "
           "npu graph: False, gen throughput (token/s): 863.65, #queue-req")
    out = analyse(_write(tmp_path, "cut.log", [cut]))
    assert out["runs"][0]["speculative"] and out["accept_length"] is None and "unknown" in out["al"]["estimator"]
    assert out["tpot_ms"] == pytest.approx(45 / 863.65 * 1e3, rel=2e-3)


def test_stalls_are_flagged_not_used(tmp_path):
    lines = [_sgl(f"10:00:0{i}", 2, 100, tok=100 + i) for i in range(5)] + [_sgl("10:00:06", 2, 10, tok=104)]
    out = analyse(_write(tmp_path, "s.log", lines))
    assert out["events"]["stalls"] == 1 and out["tpot_ms"] == pytest.approx(20.0, rel=2e-3)


def test_retractions_and_oom_are_counted(tmp_path):
    lines = [_sgl("10:00:01", 2, 100),
             "[2026-01-01 10:00:02 TP0] Decode out of memory happened. #retracted_reqs: 3, #new_token_ratio: 0.5 -> 0.8",
             "[2026-01-01 10:00:03 TP0] KV cache pool is full. Retract requests.",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    ev = analyse(_write(tmp_path, "oom.log", lines))["events"]
    assert (ev["retraction"], ev["oom"]) == (4, 1)


def test_vllm_v0_spec_line_and_typo_variants():
    v0 = parse_vllm("INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.642, System "
                    "efficiency: 0.598, Number of speculative tokens: 3, Number of accepted tokens: 8547, Number of "
                    "draft tokens: 13311, Number of emitted tokens: 10616.", 1)
    assert (v0.k, v0.accepted, v0.drafted, v0.emitted, v0.accept_rate) == (3, 8547, 13311, 10616, 0.642)
    typo = parse_vllm("Speculative Metrics: Draft acceptance rate: 0.5, Number of spec tokens: 2, "
                      "Number of accepted tokens: 10, Number of draft tokens: 20, Number of emitted tokens: 15", 1)
    assert (typo.k, typo.emitted) == (2, 15)


def test_vllm_pairs_throughput_and_spec_lines_per_process(tmp_path):
    eng = ("(APIServer pid={p}) INFO 07-20 18:11:49 [loggers.py:271] Engine 00{e}: Avg prompt throughput: 0.0 tokens/s, "
           "Avg generation throughput: {g} tokens/s, Running: {n} reqs, Waiting: 0 reqs")
    spec = ("(APIServer pid={p}) INFO 07-20 18:11:49 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
            "{m}, Accepted: {a} tokens, Drafted: {d} tokens, Per-position acceptance rate: {r}, Avg Draft acceptance rate: 1%")
    lines = [eng.format(p=1, e=0, g=50.0, n=2), eng.format(p=2, e=1, g=25.0, n=1),
             spec.format(p=1, m=2.0, a=10, d=20, r="0.600, 0.400"), spec.format(p=2, m=3.0, a=20, d=20, r="1.000, 1.000")]
    out = analyse(_write(tmp_path, "v1.log", lines))
    # TPOT: 2/50 = 40 ms and 1/25 = 40 ms; AL = 1 + (10 + 20) / (20/2 + 20/2) = 2.5
    assert out["tpot_ms"] == pytest.approx(40.0, rel=2e-3) and out["accept_length"] == pytest.approx(2.5)
    rows = out["vllm_windows"]["rows"]
    assert [r["accept_length"] for r in rows] == [pytest.approx(2.0), pytest.approx(3.0)]
    agg = ("INFO 07-20 18:11:49 [loggers.py:271] 2 Engines Aggregated: Avg prompt throughput: 0.0 tokens/s, "
           "Avg generation throughput: 100.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs")
    assert analyse(_write(tmp_path, "agg.log", [agg]))["tpot_ms"] == pytest.approx(40.0, rel=2e-3)


def test_summaries_offline_llamacpp_and_meta_info(tmp_path):
    bench = ["============ Serving Benchmark Result ============", "Mean ITL (ms):        3.00  ",
             "Accept length:       2.50  "]
    out = analyse(_write(tmp_path, "b.log", bench))
    assert out["tpot_ms"] == 3.0 and "ITL" in out["tpot"]["estimator"] and out["accept_length"] == 2.5
    off = ["num_drafts: 100", "num_accepted_tokens: 150", "mean acceptance length: 2.49",
           "acceptance at token 0: 0.80", "acceptance at token 1: 0.70"]
    prof, info = profile_from_file(_write(tmp_path, "off.log", off))
    assert info["accept_length"] == pytest.approx(2.5)  # 1 + 150/100
    assert prof.alphas == pytest.approx([0.8, 0.7 / 0.8])
    llama = ["       eval time =  1000.00 ms /   100 tokens (   10.00 ms per token,   100.00 tokens per second)",
             "draft acceptance rate = 0.50000 (   60 accepted /   120 generated)"]
    out = analyse(_write(tmp_path, "ll.log", llama))
    assert out["tpot_ms"] == 10.0 and out["accept_length"] == pytest.approx(100 / 40)  # inferred: 100 / (100 - 60)
    multi = ['{"meta_info": {"completion_tokens": 30,', ' "spec_verify_ct": 10}}', '{"meta_info": {"completion_tokens": 10,',
             ' "spec_verify_ct": 10}}']
    assert analyse(_write(tmp_path, "m.txt", multi))["accept_length"] == pytest.approx(40 / 20)
    jsonl = [json.dumps({"meta_info": {"completion_tokens": c, "spec_verify_ct": v}}) for c, v in ((8, 2), (4, 2))]
    assert analyse(_write(tmp_path, "m.jsonl", jsonl))["accept_length"] == pytest.approx(12 / 4)
    rep = ["result {'meta_info': {'completion_tokens': 14, 'spec_verify_ct': 4, 'spec_accept_length': 3.5}}"]
    assert analyse(_write(tmp_path, "m.log", rep))["accept_length"] == pytest.approx(3.5)


def test_logs_on_an_al_only_file_reports_it_and_accept_refuses_tpot_only(tmp_path):
    off = _write(tmp_path, "off.log", ["num_drafts: 100", "num_accepted_tokens: 150"])
    r = runner.invoke(app, ["logs", str(off)])
    assert r.exit_code == 0 and "no TPOT in this file" in r.output
    bench = _write(tmp_path, "b.log", ["Mean TPOT (ms):   12.5"])
    r = runner.invoke(app, ["accept", str(bench)])
    assert r.exit_code == 1 and r.output.startswith("error: ") and "TPOT (12.50 ms" in r.output


@pytest.mark.parametrize("kind", ["binary", "not-gzip", "truncated-gzip", "empty", "nan", "huge", "folder"])
def test_hostile_inputs_give_one_error_line(tmp_path, kind):
    p = tmp_path / ("x.log.gz" if "gzip" in kind else "x.log")
    if kind == "binary":
        p.write_bytes(bytes(range(256)) * 40)
    elif kind == "not-gzip":
        p.write_text(_sgl("10:00:01", 1, 100) + "\n")
    elif kind == "truncated-gzip":
        p.write_bytes(gzip.compress(("\n".join(_sgl("10:00:01", 1, 100 + i % 7) for i in range(5000))).encode())[:3000])
    elif kind == "empty":
        p.write_text("")
    elif kind == "nan":
        p.write_text(_sgl("10:00:01", 1, 100).replace("100.00", "nan") + "\nMean TPOT (ms): NaN\n")
    elif kind == "huge":
        p.write_text(_sgl("10:00:01", 1, 100).replace("100.00", "1e999").replace("#running-req: 1", "#running-req: 9" * 40))
    else:
        p = tmp_path
    for cmd in ("logs", "accept"):
        r = runner.invoke(app, [cmd, str(p)])
        assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
        assert "Traceback" not in r.output and not isinstance(r.exception, (EOFError, OSError))


def test_calibrate_refuses_the_wrong_method_and_negative_fits(tmp_path):
    dense = tmp_path / "dense.log"
    dense.write_text("\n".join(_sgl(f"10:00:{i:02d}", 1, 50.0) for i in range(20)))
    r = runner.invoke(app, ["calibrate-logs", f"{dense}:3", f"{dense}:5", "--model", "q35", "--method", "native",
                            "--out", str(tmp_path / "fw.json")])
    assert r.exit_code == 1 and "no steady speculative" in r.output and not (tmp_path / "fw.json").exists()
    # T_iter that falls with depth: a negative t_fwd is refused, not written
    runs = [f"{_log(tmp_path / f'n{d}.log', 40.0 - 3.0 * d, 3.0)}:{d}" for d in (3, 5, 7)]
    r = runner.invoke(app, ["calibrate-logs", *runs, "--model", "q35", "--out", str(tmp_path / "fw2.json")])
    assert r.exit_code == 1 and r.output.startswith("error: ") and "t_fwd_ms" in r.output
    assert not (tmp_path / "fw2.json").exists()
