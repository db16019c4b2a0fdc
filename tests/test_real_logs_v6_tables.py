"""Round 6's readers behind tests/data/real_v6/ (see tests/test_real_logs_v6.py for the corpus itself): box tables
hard-wrapped below the wrap reader's 60 columns (`wmtp.log_wrap.BoxJoined`), AIPerf's spec-decode objects in its JSON
export, LMDeploy's /metrics; each with the near misses it must leave alone. Expected values are hand arithmetic on the
lines written here (in the comments)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpus_checks import logs_json as _logs  # noqa: E402
from corpus_checks import one_error as _one_error  # noqa: E402
from corpus_checks import write_log as _write  # noqa: E402

V6 = Path(__file__).parent / "data" / "real_v6"
V4 = Path(__file__).parent / "data" / "real_v4"
AIS40 = V6 / "aisbench-perf-fancy-grid-40-column-cut-inside-numbers-2025.log"


def _unwrapped_table() -> list[str]:
    """real_v6's 40-column AISBench file joined back by hand: its lines as the whole table printed them (every piece but
    a line's last was 40 characters before the capture trimmed its trailing spaces)."""
    from wmtp.log_input import open_text

    with open_text(AIS40) as f:
        return [ln.rstrip("\n") for ln in f if ln.strip()]


def _wrap(lines: list[str], width: int, trim: bool = True) -> str:
    out = []
    for ln in lines:
        while len(ln) > width:
            out.append(ln[:width].rstrip() if trim else ln[:width])
            ln = ln[width:]
        out.append(ln.rstrip())
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------- box tables cut below 60
def test_the_joined_table_is_the_table():
    lines = _unwrapped_table()
    rows = [ln for ln in lines if ln.startswith("│")]
    assert len({len(r) for r in rows[:8]}) == 1 and len(rows[0]) == 170  # 26 + 9 + 7 x 17 + 5 columns, 11 bars
    assert "│ TPOT                     │ total   │ 32.5 ms         │ 32.2 ms" in lines[lines.index(rows[3])]
    assert {len(r) for r in rows[8:]} == {57}  # the `Common Metric` table: 26 + 9 + 18 columns and 4 bars


@pytest.mark.parametrize("width", [20, 27, 33, 39, 40, 41, 44, 45, 52, 59])
@pytest.mark.parametrize("trim", [True, False])
def test_the_table_reads_at_every_width(tmp_path, width, trim):
    # TPOT Average 32.5 ms = (E2EL 16850.0 - TTFT 242.5) / (512 - 1), wherever the cut falls (inside `32.5`, before
    # its unit, on a bar)
    p = _write(tmp_path, _wrap(_unwrapped_table(), width, trim))
    out = _logs(p)
    assert out["tpot_ms"] == pytest.approx(32.5) and out["garbled"] == 0


def test_a_table_cut_off_inside_its_tpot_row_gives_no_number(tmp_path):
    # the capture ends on the TPOT row's first piece, `│ TPOT ... │ 3`: no Average to read (not 3 ms)
    text = _wrap(_unwrapped_table(), 40)
    cut = text[:text.index("│ TPOT")] + "│ TPOT                     │ total   │ 3\n"
    _one_error(_write(tmp_path, cut), "no usable")


def test_a_log_line_after_a_cut_row_is_not_glued_into_it(tmp_path):
    text = _wrap(_unwrapped_table(), 40)
    cut = text[:text.index("│ TPOT")] + "│ TPOT                     │ total   │ 3\n[2025-09-17 21:09:00,001] [ais_bench] [INFO] x\n"
    from wmtp.log_input import open_text

    with open_text(_write(tmp_path, cut)) as f:
        got = [ln for ln in f if ln.strip()]
    assert got[-2:] == ["│ TPOT                     │ total   │ 3\n", "[2025-09-17 21:09:00,001] [ais_bench] [INFO] x\n"]


def test_real_v4s_whole_table_and_a_rule_without_a_cut_are_left_alone():
    from wmtp.log_wrap import box_width

    head = (V4 / "aisbench-perf-fancy-grid-vllm-ascend-2025.log").read_text()
    assert box_width(head) is None  # every row whole (170 columns): nothing to join
    assert box_width("╒════════════════════╤═══╕\n│ a                  │ 1 │\n") is None  # a narrow table, whole
    assert box_width("╒" + "═" * 39 + "\n" + "═" * 10 + "╕\n") == (40, 51)


# --------------------------------------------------------------------------- AIPerf JSON export: spec decode
def _export(**objs) -> str:
    return json.dumps({k: v for k, v in objs.items()}, indent=2) + "\n"


_TW = {"unit": "ratio", "avg": 2.5}
_PR = {"unit": "ratio", "avg": 2.9, "p1": 1.95, "p50": 2.85, "p99": 3.9, "min": 1.95, "max": 3.9, "std": 0.41}


def test_the_token_weighted_object_wins_over_the_per_request_mean(tmp_path):
    # the per-request mean first in the file, as AIPerf's display order puts it (5000 before 5010)
    p = _write(tmp_path, _export(spec_decode_acceptance_length=_PR, spec_decode_token_weighted_acceptance_length=_TW),
               "e.json")
    al = _logs(p)["al"]
    assert al["value"] == pytest.approx(2.5) and "Token-Weighted" in al["estimator"]


def test_the_per_request_mean_alone_is_read_and_said_to_be_one(tmp_path):
    al = _logs(_write(tmp_path, _export(spec_decode_acceptance_length=_PR), "e.json"))["al"]
    assert al["value"] == pytest.approx(2.9) and "per-request" in al["estimator"]


def test_one_line_export_with_several_objects(tmp_path):
    text = json.dumps({"inter_token_latency": {"unit": "ms", "avg": 15.0},
                       "spec_decode_token_weighted_acceptance_length": _TW}) + "\n"
    out = _logs(_write(tmp_path, text, "e.json"))
    assert out["tpot_ms"] == pytest.approx(15.0) and out["accept_length"] == pytest.approx(2.5)


@pytest.mark.parametrize("obj", [
    {"unit": "%", "avg": 2.5},  # not a ratio: no AL
    {"avg": 2.5},  # no unit
    {"unit": "ratio", "p1": 1.0, "p5": 1.1, "p10": 1.2, "avg": 2.5},  # the avg too far from the key
])
def test_aiperf_acceptance_objects_that_are_not_read(tmp_path, obj):
    _one_error(_write(tmp_path, _export(spec_decode_token_weighted_acceptance_length=obj), "e.json"), "no usable")


def test_the_draft_acceptance_rates_are_no_acceptance_length(tmp_path):
    p = _write(tmp_path, _export(spec_decode_overall_draft_acceptance_rate={"unit": "%", "avg": 50.0},
                                 spec_decode_draft_acceptance_rate={"unit": "%", "avg": 63.3}), "e.json")
    _one_error(p, "no usable")


# ------------------------------------------------------------------------------------------ LMDeploy /metrics
_L = '{model_name="m",engine="0"}'


def _lmd(**series) -> str:
    return "".join(f"lmdeploy:{k}{_L} {v}\n" for k, v in series.items())


def test_lmdeploy_decode_time_over_the_tokens_after_each_first():
    # real_v6: 80.0 s / (10100 - 100) tokens = 8.0 ms; AL 1 + 6000 / 4000; the mean-AL gauge 2.44 not used
    out = _logs(V6 / "lmdeploy-metrics-spec-decode-counters-iter-latency-2026.log")
    assert out["tpot_ms"] == pytest.approx(8.0) and out["tpot"]["confidence"] == "high"
    assert out["accept_length"] == pytest.approx(2.5) and out["al"]["per_position"] == pytest.approx([0.7, 0.5, 0.3])


def test_lmdeploy_without_its_iteration_latency_falls_back_to_a_flagged_mean(tmp_path):
    p = _write(tmp_path, _lmd(time_per_output_token_seconds_sum=43.333, time_per_output_token_seconds_count=4000))
    tpot = _logs(p)["tpot"]
    assert tpot["value_ms"] == pytest.approx(10.83325) and tpot["confidence"] == "low"
    assert "averaged over iterations" in tpot["estimator"]


def test_lmdeploy_counters_alone_give_al_and_the_gauge_alone_too(tmp_path):
    c = _lmd(spec_decode_num_drafts_total=100.0, spec_decode_num_accepted_tokens_total=150.0)
    assert _logs(_write(tmp_path, c))["accept_length"] == pytest.approx(2.5)  # 1 + 150 / 100
    g = _lmd(spec_decode_mean_accept_length=2.2)
    assert _logs(_write(tmp_path, g, "g.log"))["accept_length"] == pytest.approx(2.2)


@pytest.mark.parametrize("text", [
    _lmd(iter_token_latency_sum=80.0, time_to_first_token_seconds_count=100),  # no generated tokens
    _lmd(iter_token_latency_sum=80.0, generation_tokens_total=100, time_to_first_token_seconds_count=100),  # none after
    # another engine's series of the same names: not LMDeploy's iteration latency
    'vllm:iter_token_latency_sum{engine="0"} 80.0\nvllm:generation_tokens_total{engine="0"} 10100\n'
    'vllm:time_to_first_token_seconds_count{engine="0"} 100\n',
])
def test_lmdeploy_near_misses_give_no_tpot(tmp_path, text):
    _one_error(_write(tmp_path, text), "no usable")
