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
    assert (stats.lines, stats.decode, stats.garbled, stats.skipped) == (15, 12, 1, 2)
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
    assert sum(1 for _ in stream(g)) == 12


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
    runs = [f"{_log(tmp_path / f'd{d}.log', 1.19 * (d - 1) + 20.0, 3.0)}:{d}" for d in (3, 5, 7)]
    args = ["calibrate", "--models", "q35", "--out", str(tmp_path)] + sum((["--from-logs", r] for r in runs), [])
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    fw = json.loads((tmp_path / "framework.json").read_text())
    assert fw["t_iter_fit"]["t_fwd_ms"] == pytest.approx(1.19, rel=1e-2)  # medians from 0.1 %-wide bins
    base = json.loads(runner.invoke(app, ["predict", "--model", "q35", "--json"]).output)
    out = json.loads(runner.invoke(app, ["predict", "--model", "q35", "--json", "--framework",
                                         str(tmp_path / "framework.json")]).output)
    # With the framework profile the native step at d = 7 is the logged step (kernel + fitted overhead).
    assert out["methods"]["native"]["step_ms"] == pytest.approx(1.19 * 6 + 20.0, rel=0.01)
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
    h = tmp_path / "h.json"
    h.write_text("[10, 20, 30, 40]")
    r = runner.invoke(app, ["accept", str(h), "--json"])
    assert r.exit_code == 0
    out = json.loads(r.output)["files"][0]
    assert out["accept_length"] == pytest.approx(3.0) and out["al_by_depth"]["9"]["extrapolated"]
    r = runner.invoke(app, ["accept", str(DATA / "sglang_decode.log")])
    assert r.exit_code == 1 and "--depth" in r.output
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
