"""Line layouts the engines' current source prints (SGLang's metrics_reporter / pool stats / bench_one_batch,
vLLM's LoggingStatLogger and SpecDecodingLogging), built from their format strings with our own numbers
(tests/data/real/*-format-*, sources in each file's first line). Expected values are hand arithmetic on
those numbers; `wmtp logs` (block reader) and the per-line reference reader must agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wmtp.cli.main import app
from wmtp.log_analysis import analyse
from wmtp.acceptance_io import profile_from_vllm
from wmtp.log_records import ParseStats, VllmSpecLine, v1_drafts
from wmtp.logs import stream

REAL = Path(__file__).parent / "data" / "real"
BIN = 0.001  # TPOT medians come from log-spaced bins 0.1 % wide


def _run(*args) -> dict:
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    return json.loads(r.output)


def _logs(path: Path) -> dict:
    out = _run("logs", str(path))[0]
    ref = analyse(path, reference=True)  # the per-line reader
    assert (ref["tpot"] and ref["tpot"]["value_ms"]) == out["tpot_ms"]
    assert ref["accept_length"] == out["accept_length"]
    return out


def _stats(path: Path) -> ParseStats:
    st = ParseStats()
    for _ in stream(path, st):
        pass
    return st


# (file, TPOT ms, AL or None): the medians and means worked in EXPECTED.tsv's `how`
CASES = [
    # 32 / (1280, 1250, 1300, 1280, 1220) tok/s -> 25.00, 25.60, 24.62, 25.00, 26.23 ms; AL mean of 3.10..3.15
    ("sglang-format-2026-first-graph-replay-mfu-suffix.log", 32 / 1280 * 1e3, (3.10 + 3.30 + 3.20 + 3.25 + 3.15) / 5),
    # 8 / (320, 310, 330, 320, 300) tok/s -> median 8/320 s; AL mean of 2.40..2.35
    ("sglang-format-2026-hybrid-swa-mamba-pd-decode-npu.log", 8 / 320 * 1e3, (2.40 + 2.50 + 2.30 + 2.45 + 2.35) / 5),
    # the benchmark run's `Decode.  median latency: 0.02000 s` (not the warmup's 0.03000 s)
    ("sglang-format-bench-one-batch-warmup-then-benchmark.log", 20.0, None),
    # Running 8 / (320, 330, 310, 320, 300) tok/s -> median 25 ms; AL 1 + (960+840+1080) / ((1920+1800+1980)/3)
    ("vllm-format-0.11-loggers-deferred-preemptions-spec.log", 8 / 320 * 1e3, 1 + 2880 / 1900),
    # drafts shorter than k=4: drafts = Accepted / (printed AL - 1) = 100, 80, 120 -> AL 1 + 462 / 300
    ("vllm-format-0.11-suffix-variable-length-drafts.log", 4 / 160 * 1e3, 1 + (150 + 96 + 216) / (100 + 80 + 120)),
]


@pytest.mark.parametrize("name,tpot_ms,al", CASES)
def test_current_layouts_give_the_hand_values_and_no_garbled_line(name, tpot_ms, al):
    out = _logs(REAL / name)
    assert out["garbled"] == 0
    assert out["tpot_ms"] == pytest.approx(tpot_ms, rel=BIN)
    if al is None:
        assert out["accept_length"] is None
    else:
        assert out["accept_length"] == pytest.approx(al, rel=1e-9)
        assert _run("accept", str(REAL / name))["files"][0]["accept_length"] == pytest.approx(al, rel=1e-9)
    assert _stats(REAL / name).garbled == 0


def test_first_graph_replay_notice_is_skipped_not_garbled(tmp_path):
    """SGLang's one-off notice has #running-req but no gen throughput by design; a decode line that lost its
    throughput otherwise is still garbled (the notice's tag, not its shape, makes it skipped)."""
    notice = "[2026-03-01 10:00:00 TP0] Decode batch [first graph replay], #running-req: 32, cuda graph: True, #queue-req: 0\n"
    lost = "[2026-03-01 10:00:02 TP0] Decode batch, #running-req: 32, cuda graph: True, #queue-req: 0\n"
    p = tmp_path / "n.log"
    p.write_text(notice + lost)
    st = _stats(p)
    assert (st.decode, st.skipped, st.garbled) == (0, 1, 1)
    r = CliRunner().invoke(app, ["logs", str(p)])
    assert r.exit_code == 1 and r.output.startswith("error: ") and "1 garbled, 1 skipped" in r.output, r.output


def test_first_graph_replay_file_counts():
    st = _stats(REAL / "sglang-format-2026-first-graph-replay-mfu-suffix.log")
    assert (st.lines, st.decode, st.skipped, st.garbled) == (7, 5, 2, 0)  # skipped: the comment and the notice
    out = _logs(REAL / "sglang-format-2026-first-graph-replay-mfu-suffix.log")
    assert (out["skipped"], out["tpot"]["lines"]) == (2, [3, 7])


def test_bench_one_batch_takes_the_last_median_line(tmp_path):
    """Two batch sizes in one file: the last `Decode.  median latency` is the one read (its line named); the
    per-step `Decode N. Batch size` lines and the `Total.` / `Prefill.` lines give no record."""
    p = tmp_path / "b.log"
    p.write_text("Decode 0. Batch size: 1, latency: 0.00900 s, throughput:    111.11 token/s\n"
                 "Decode.  median latency: 0.00850 s, median throughput:    117.65 token/s\n"
                 "Total. latency:  1.000 s, throughput:    300.00 token/s\n"
                 "Prefill. latency: 0.05000 s, throughput:  20480.00 token/s\n"
                 "Decode.  median latency: 0.01250 s, median throughput:    1280.00 token/s\n")
    out = _logs(p)
    assert out["tpot_ms"] == pytest.approx(12.5, rel=1e-12) and out["tpot"]["lines"] == [5, 5]
    assert out["records"]["other"] == 2 and out["skipped"] == 3


def test_bench_one_batch_line_with_a_bad_number_is_garbled(tmp_path):
    p = tmp_path / "b.log"
    p.write_text("Decode.  median latency: nan s, median throughput:      nan token/s\n")
    r = CliRunner().invoke(app, ["logs", str(p)])
    assert r.exit_code == 1 and "1 garbled" in r.output and "Traceback" not in r.output, r.output


def test_v1_drafts_keeps_drafted_over_k_unless_the_printed_al_says_drafts_were_shorter():
    assert v1_drafts(3, 1920, 960, 2.50) == 640  # every draft k long: 1 + 960/640 = 2.50 as printed
    assert v1_drafts(3, 3000, 1504, 2.50) == 1000  # 1 + 1504/1000 = 2.504 prints as 2.50: within rounding
    assert v1_drafts(4, 250, 150, 2.50) == pytest.approx(100, rel=1e-12)  # 62.5 drafts would mean AL 3.40
    assert v1_drafts(4, 250, 150, None) == 62.5  # no printed AL (older layout): nothing to check against
    assert v1_drafts(4, 250, 150, 1.00) == 62.5  # a printed AL of 1 cannot count drafts
    assert v1_drafts(4, 250, 0, 1.00) == 62.5


def test_variable_length_drafts_profile_matches_the_printed_al():
    """`wmtp accept`'s per-position profile pools the same drafts: its AL at d = k + 1 is the pooled AL, and
    alpha_1 is the drafts-weighted position-1 rate (0.7*100 + 0.6*80 + 0.8*120) / 300."""
    lines = [VllmSpecLine(1, 2.50, 150, 250, [0.700, 0.450, 0.250, 0.100]),
             VllmSpecLine(2, 2.20, 96, 210, [0.600, 0.350, 0.200, 0.050]),
             VllmSpecLine(3, 2.80, 216, 330, [0.800, 0.550, 0.300, 0.150])]
    prof = profile_from_vllm(lines, "t")
    assert prof.alphas[0] == pytest.approx((70 + 48 + 96) / 300, rel=1e-9)
    assert prof.accept_length(5) == pytest.approx(1 + 462 / 300, rel=1e-9)
