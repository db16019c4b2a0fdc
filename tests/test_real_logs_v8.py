"""Log round 8: AIPerf's spec-decode outputs whose values span lines (the console's accepted-draft line wrapped by rich,
its `>=8` bucket folded; `profile_export_aiperf.json`'s pretty-printed `pooled_spec_decode_acceptance_histogram` and
its `warmup_metrics`; `profile_export_aiperf.csv`'s two sections), vLLM's per-choice `speculative_decoding_stats`
with a sparse `{"j": steps}` histogram, and hostile variants of each (cut lines, NaN / negative / absurd numbers,
repeated blocks, histograms summing to 0). The corpus files are tests/data/real/*-format-2026-* (BUILT from the
tools' exporter code, numbers ours). Expected values are hand arithmetic on the text written here (in the comments).
Definition checked: a histogram H[j] of verify steps by accepted drafts j gives AL = 1 + sum j H[j] / sum H[j] and the
unconditional rate at position i, sum_{j >= i} H[j] / sum H[j]."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from corpus_checks import one_error, run, write_log

REAL = Path(__file__).parent / "data" / "real"
CONSOLE = REAL / "aiperf-format-2026-spec-decode-80-cols-histogram-wrapped-folded.log"
JSON_EXPORT = REAL / "aiperf-format-2026-profile-export-json-pooled-histogram-warmup.json"
CSV_EXPORT = REAL / "aiperf-format-2026-profile-export-csv-spec-decode-totals.csv"
VLLM_SPARSE = REAL / "vllm-format-2026-per-choice-speculative-decoding-stats-sparse-histogram.jsonl"
LABEL = "  Accepted drafts per step (% of steps):  "


def _both(path) -> dict:
    """The analysis of `path`, the same from the block reader and the per-line one."""
    from wmtp.log_analysis import analyse

    new, ref = analyse(path), analyse(path, reference=True)
    assert json.dumps(new, sort_keys=True, default=str) == json.dumps(ref, sort_keys=True, default=str)
    return new


def _accept(path) -> dict:
    r = run(["accept", str(path), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)["files"][0]


def _accept_error(path, *words) -> None:
    r = run(["accept", str(path)])
    assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
    assert all(w in r.output for w in words), r.output


# ------------------------------------------------------------------------------------------ the corpus files
def test_console_at_80_columns_wrapped_and_folded_histogram():
    out = _both(CONSOLE)
    assert out["garbled"] == 0
    assert out["tpot_ms"] == pytest.approx(12.00)  # Inter Token Latency avg
    assert out["accept_length"] == pytest.approx(5.65)  # Token-Weighted: 1 + 20925 / 4500
    # shares 15 12 10 9 8 7 6 5 | >=8: 28 (sum 100): reached at i = 1..8: 100 - 15 = 85, 85 - 12 = 73, 63, 54, 46, 39,
    # 33, 28 (the fold: position 8 is the last known)
    assert out["al"]["per_position"] == pytest.approx([0.85, 0.73, 0.63, 0.54, 0.46, 0.39, 0.33, 0.28])
    assert out["al"]["lines"][1] == 55  # the histogram's wrapped rest (`8%   5: 7% ... >=8: 28%`) is line 55
    assert any("`>=8` (28 % of steps)" in n and "d = 9" in n for n in out["notes"])
    f = _accept(CONSOLE)
    assert f["accept_length"] == pytest.approx(5.65) and "`>=8`" in f["note"]
    assert [a["alpha"] for a in f["alphas"]][:2] == pytest.approx([0.85, 0.73 / 0.85])


def test_json_export_pooled_histogram_and_warmup_left_out():
    out = _both(JSON_EXPORT)
    assert out["tpot_ms"] == pytest.approx(9.0)  # the profiling ITL, not warmup_metrics' 40.0
    # 0x600 + 1x450 + 2x390 + 3x310 + 4x1250 = 7160 accepted over 3000 steps
    assert out["accept_length"] == pytest.approx(1 + 7160 / 3000)
    assert out["al"]["histogram"] == [600, 450, 390, 310, 1250]
    f = _accept(JSON_EXPORT)
    # reached 2400, 1950, 1560, 1250 of 3000: alpha 2400/3000, 1950/2400, 1560/1950, 1250/1560
    assert [a["alpha"] for a in f["alphas"]] == pytest.approx([0.8, 0.8125, 0.8, 1250 / 1560])
    assert all(a["ci95"] is not None for a in f["alphas"])  # counts of steps: Wilson intervals
    assert f["measured_depth"] == 5


def test_csv_export_totals_beat_the_two_decimal_ratio():
    out = _both(CSV_EXPORT)
    assert out["garbled"] == 0 and out["tpot_ms"] == pytest.approx(9.0)
    assert out["accept_length"] == pytest.approx(1 + 7160 / 3000)  # not the printed 3.39, nor the mean 3.41
    assert _accept(CSV_EXPORT)["accept_length"] == pytest.approx(1 + 7160 / 3000)  # a log, not `n,count` lines


def test_vllm_per_choice_sparse_histograms_are_summed():
    out = _both(VLLM_SPARSE)
    # {0: 39, 1: 1, 3: 3} + {0: 4, 1: 6, 2: 10, 3: 20} + {2: 5, 3: 15} = [43, 7, 15, 38]
    assert out["al"]["histogram"] == [43, 7, 15, 38]
    assert out["accept_length"] == pytest.approx(1 + 151 / 103)  # 7 + 30 + 114 = 151 accepted, 103 steps
    f = _accept(VLLM_SPARSE)
    assert [a["alpha"] for a in f["alphas"]] == pytest.approx([60 / 103, 53 / 60, 38 / 53])


# ------------------------------------------------------------------------------- the console line, wrapped
# 0: 20  1: 30  2: 30  3: 10  4: 10 -> AL 1 + (30 + 60 + 30 + 40) / 100 = 2.60; reached 80, 50, 20, 10 %
_BODY = ["0: 20%", "1: 30%", "2: 30%", "3: 10%", "4: 10%"]


@pytest.mark.parametrize("text", [
    LABEL + "   ".join(_BODY) + "\n",
    LABEL + "0: 20%   1: 30%   2: 30%   3: 10%   4:\n10%\n",  # cut between a bucket and its share
    LABEL + "0: 20%   1: 30%   2: 30%   3: 10%   4: \n10%\n",  # the same, rich's trailing space kept
    LABEL + "0: 20%   1: 30%   2: 30%\n3: 10%   4: 10%\n",  # cut between buckets
    LABEL + "0: 20%   1:\n30%   2: 30%\n3: 10%   4:\n10%\n",  # four lines
    "\r\n".join([LABEL + "0: 20%   1: 30%   2: 30%   3: 10%   4:", "10%", ""]),  # CRLF
])
def test_a_wrapped_histogram_line_is_read_whole(tmp_path, text):
    p = write_log(tmp_path, "header line\n" + text + "\nnext line\n")
    out = _both(p)
    assert out["garbled"] == 0 and out["accept_length"] == pytest.approx(2.60)
    assert out["al"]["per_position"] == pytest.approx([0.8, 0.5, 0.2, 0.1])


@pytest.mark.parametrize("width", [40, 50, 60, 80, 100])
def test_rich_wraps_at_every_console_width_are_read(tmp_path, width):
    from rich.console import Console

    # 0..7: 10 each (80 %), >=8: 20 % -> AL at most-8 = 1 + 10 x (0 + 1 + ... + 7) / 100 + 8 x 0.2 = 1 + 2.8 + 1.6
    line = LABEL + "   ".join([f"{j}: 10%" for j in range(8)] + [">=8: 20%"])
    buf = io.StringIO()
    Console(file=buf, width=width, force_terminal=False, color_system=None).print(line)
    assert buf.getvalue().count("\n") >= (2 if width <= 100 else 1)
    out = _both(write_log(tmp_path, buf.getvalue() + "\n"))
    assert out["accept_length"] == pytest.approx(5.40) and len(out["al"]["per_position"]) == 8
    assert any("lower bound" in n for n in out["notes"])  # no token-weighted AL in the file: said so


def test_the_folded_bucket_gives_a_lower_bound_said_so(tmp_path):
    # 0: 20  1: 30  >=2: 50 -> 1 + 0.3 + 2 x 0.5 = 2.30, the >=2 steps counted as 2
    p = write_log(tmp_path, LABEL + "0: 20%   1: 30%   >=2: 50%\n")
    out = _both(p)
    assert out["accept_length"] == pytest.approx(2.30) and out["al"]["per_position"] == pytest.approx([0.8, 0.5])
    assert any("lower bound" in n for n in out["notes"])
    assert "lower bound" in _accept(p)["note"]


def test_folded_rates_are_not_the_profile_of_a_deeper_token_weighted_al(tmp_path):
    # Token-Weighted 9.50 > d = 9 of rates known to position 8: the AL kept, the rates dropped (not claimed as d = 9)
    text = ("Token-Weighted Acceptance Length (ratio): 9.50\n"
            + LABEL + "   ".join([f"{j}: 5%" for j in range(8)] + [">=8: 60%"]) + "\n")
    out = _both(write_log(tmp_path, text))
    assert out["accept_length"] == pytest.approx(9.5) and "per_position" not in out["al"]


def test_a_stray_piece_is_not_glued_onto_a_histogram(tmp_path):
    # the rest `10%` two lines later (a blank line between) is no continuation: the line stays cut at `4:`
    p = write_log(tmp_path, LABEL + "0: 20%   1: 30%   2: 30%   3: 10%   4:\n\n10%\n")
    one_error(p, "cut inside a bucket", "1 garbled")
    one_error(write_log(tmp_path, "12%\n", "y.log"), "no usable")


def test_a_repeated_histogram_line_keeps_the_last(tmp_path):
    # two runs' lines: the second (0: 50  1: 50 -> AL 1.5) is the file's
    text = LABEL + "   ".join(_BODY) + "\n" + LABEL + "0: 50%   1: 50%\n"
    assert _both(write_log(tmp_path, text))["accept_length"] == pytest.approx(1.5)


# ------------------------------------------------------------------------------------- hostile console lines
@pytest.mark.parametrize("body, words", [
    ("0: 50%   1: nan%", "a share of nan%"), ("0: 50%   1: -5%", "a share of -5%"),
    ("0: 50%   1: 150%", "a share of 150%"), ("0: 60%   1: 40%   99: 0%", "bucket 99"),
    ("0: 50%   1: inf%", "a share of inf%")])
def test_impossible_shares_are_refused_naming_the_line(tmp_path, body, words):
    p = write_log(tmp_path, "x\n" + LABEL + body + "\n")
    one_error(p, "x.log:2:", words)
    _accept_error(p, "x.log:2:", words)


@pytest.mark.parametrize("body, words", [
    ("0: 12%   1: 12%   2: 2", "cut inside a bucket"),  # the file ends inside a share
    ("0: 12%   1: 12%   2:", "cut inside a bucket"),
    ("0: 0%   1: 0%", "sum to 0 %"),  # counts summing to 0 (AIPerf prints no line then)
    ("0: 12%   1: 12%   2: 25%   3: 38%", "sum to 87 %"),  # its wrapped rest lost: 87 < 100 - 4 x 0.5
    ("0: 50%   2: 50%", "not 0, 1, 2"),
    ("0: 50%   1: 50%   >=3: 0%", "not 0, 1, 2")])  # a fold that skips bucket 2
def test_a_cut_or_broken_histogram_is_one_error_line_saying_why(tmp_path, body, words):
    p = write_log(tmp_path, LABEL + body)  # (no line end: a truncated file)
    one_error(p, "no usable", words, "1 garbled")
    _accept_error(p, "no acceptance length", words)


def test_a_broken_histogram_beside_a_token_weighted_al_is_a_note(tmp_path):
    text = "Token-Weighted Acceptance Length (ratio): 2.60\n" + LABEL + "0: 12%   1: 12%   2: 2\n"
    out = _both(write_log(tmp_path, text))
    assert out["accept_length"] == pytest.approx(2.60) and out["garbled"] == 1
    assert any("cut inside a bucket" in n for n in out["notes"])


# ------------------------------------------------------------------------------------ hostile JSON exports
_POOL = ('"pooled_spec_decode_acceptance_histogram": {\n    "0": 600,\n    "1": 450,\n    "2": 390,\n    "3": 310,\n'
         '    "4": 1250\n  }')


def _export(tmp_path, pool: str | None = None, cut_at: str | None = None) -> Path:
    text = JSON_EXPORT.read_text().split("\n", 1)[1]  # (no `# source:` line)
    assert _POOL in text
    text = text.replace(_POOL, pool) if pool is not None else text
    return write_log(tmp_path, text[:text.index(cut_at)] if cut_at else text, "x.json")


@pytest.mark.parametrize("bins, words", [
    ('"0": -5, "1": 450', "bucket 0: -5 is no count"), ('"0": 2.5, "1": 450', "bucket 0: 2.5 is no count"),
    ('"0": NaN, "1": 450', "bucket 0: NaN is no count"), ('"0": Infinity, "1": 450', "Infinity is no count"),
    ('"0": 5, "0": 450', "bucket 0 given twice"), ('"99": 5, "0": 450', "bucket 99 is deeper")])
def test_impossible_pooled_counts_are_refused(tmp_path, bins, words):
    pretty = "\n".join(f"    {b}," for b in bins.split(", "))[:-1]
    for pool in ('"pooled_spec_decode_acceptance_histogram": {\n' + pretty + "\n  }",
                 '"pooled_spec_decode_acceptance_histogram": {' + bins + "}"):
        p = _export(tmp_path, pool)
        one_error(p, "x.json:", words)
        _accept_error(p, words)


def test_a_pooled_entry_that_is_no_bucket(tmp_path):
    # one line: refused naming it; pretty-printed (the object left unjoined at its `"x"` line): set aside, the totals
    # read
    one_error(_export(tmp_path, '"pooled_spec_decode_acceptance_histogram": {"0": 5, "x": 450}'), "x.json:", "no `")
    out = _both(_export(tmp_path, '"pooled_spec_decode_acceptance_histogram": {\n    "0": 5,\n    "x": 450\n  }'))
    assert out["accept_length"] == pytest.approx(1 + 7160 / 3000) and any("not read whole" in n for n in out["notes"])


def test_pooled_counts_summing_to_zero_leave_the_totals(tmp_path):
    out = _both(_export(tmp_path, '"pooled_spec_decode_acceptance_histogram": {\n    "0": 0,\n    "1": 0\n  }'))
    assert out["accept_length"] == pytest.approx(1 + 7160 / 3000)  # the totals' 1 + 7160 / 3000
    assert "histogram" not in out["al"] and any("sum to 0" in n for n in out["notes"]) and out["garbled"] == 1


def test_pooled_counts_summing_to_zero_alone_are_one_error(tmp_path):
    p = write_log(tmp_path, '{\n  "pooled_spec_decode_acceptance_histogram": {\n    "0": 0,\n    "1": 0\n  }\n}\n',
                  "x.json")
    one_error(p, "sum to 0", "1 garbled")


def test_a_pooled_histogram_contradicting_the_counts_is_set_aside(tmp_path):
    # bucket 2 lost: [600, 450, 0, 310] gives 1 + (450 + 930) / 1360 = 2.0147, the counts 3.3867: noted, counts read
    out = _both(_export(tmp_path, '"pooled_spec_decode_acceptance_histogram": {\n    "0": 600,\n    "1": 450,\n'
                                  '    "3": 310\n  }'))
    assert out["accept_length"] == pytest.approx(1 + 7160 / 3000) and "histogram" not in out["al"]
    assert any("contradicts" in n and "2.0147" in n for n in out["notes"])


def test_a_document_cut_inside_the_histogram(tmp_path):
    p = _export(tmp_path, cut_at='"2": 390')  # the objects after it (ALs, totals) lost with it
    out = _both(p)
    assert out["tpot_ms"] == pytest.approx(9.0) and out["accept_length"] is None
    assert "not read whole" in out["al"]["estimator"]
    _accept_error(p, "no acceptance length", "not read whole")


def test_a_one_line_document_drops_its_warmup_objects(tmp_path):
    doc = {"inter_token_latency": {"unit": "ms", "avg": 9.0},
           "warmup_metrics": {"inter_token_latency": {"unit": "ms", "avg": 40.0},
                              "spec_decode_token_weighted_acceptance_length": {"unit": "ratio", "avg": 1.8}},
           "pooled_spec_decode_acceptance_histogram": {"0": 1, "1": 1, "2": 2, "3": 3, "4": 1}}
    out = _both(write_log(tmp_path, json.dumps(doc) + "\n", "x.json"))
    # 1 + (1 + 4 + 9 + 4) / 8 = 3.25 (vLLM's worked example), the ITL not the warm-up's
    assert out["tpot_ms"] == pytest.approx(9.0) and out["accept_length"] == pytest.approx(3.25)


def test_two_exports_concatenated_keep_the_last(tmp_path):
    first = JSON_EXPORT.read_text().split("\n", 1)[1]
    second = first.replace('"avg": 9.0,', '"avg": 11.0,').replace(_POOL, _POOL.replace('"4": 1250', '"4": 0'))
    out = _both(write_log(tmp_path, first + second, "x.json"))
    # the second: [600, 450, 390, 310, 0], 1750 steps, 450 + 780 + 930 = 2160 accepted -> 1 + 2160 / 1750 = 2.234;
    # it contradicts its own token-weighted 3.3867, so the totals (7160 / 3000) are the AL and a note says why
    assert out["tpot_ms"] == pytest.approx(11.0) and out["accept_length"] == pytest.approx(1 + 7160 / 3000)
    assert any("contradicts" in n for n in out["notes"]) and any("repeat" in n for n in out["notes"])


# ------------------------------------------------------------------------------------- hostile CSV exports
_CSV_HEAD = ("Metric,avg,min,max,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\r\n"
             "Inter Token Latency (ms),9.00,8.10,10.20,8.15,8.30,8.45,8.70,8.95,9.25,9.60,9.85,10.15,0.40\r\n"
             "\r\nMetric,Value\r\n")


@pytest.mark.parametrize("rows", [
    "Token-Weighted Acceptance Length (ratio),nan\r\n",
    "Token-Weighted Acceptance Length (ratio),3.3",  # cut inside `3.39` (AIPerf writes `%.2f`)
    "Total Accepted Draft Tokens (tokens),-7160.00\r\nTotal Spec Decode Steps,3000.00\r\n",
    "Total Accepted Draft Tokens (tokens),7160.00\r\nTotal Spec Decode Steps,0.00\r\n"])
def test_csv_cells_not_as_written_are_garbled_not_read(tmp_path, rows):
    p = write_log(tmp_path, _CSV_HEAD + rows, "x.csv")
    out = _both(p)
    assert out["garbled"] == 1 and out["accept_length"] is None and out["tpot_ms"] == pytest.approx(9.0)
    _accept_error(p, "no acceptance length")


def test_csv_totals_cut_short_contradict_the_token_weighted_al(tmp_path):
    # `3000.00` cut to `300`: 1 + 7160 / 300 = 24.87 against 3.39: the totals set aside, 3.39 read
    rows = ("Token-Weighted Acceptance Length (ratio),3.39\r\nTotal Accepted Draft Tokens (tokens),7160.00\r\n"
            "Total Spec Decode Steps,300")
    out = _both(write_log(tmp_path, _CSV_HEAD + rows, "x.csv"))
    assert out["accept_length"] == pytest.approx(3.39) and out["garbled"] == 1
    assert any("24.8667" in n and "contradict" in n for n in out["notes"])


@pytest.mark.parametrize("al, words", [("99.00", "above 64"), ("0.50", "below 1")])
def test_an_absurd_csv_al_is_refused(tmp_path, al, words):
    p = write_log(tmp_path, _CSV_HEAD + f"Token-Weighted Acceptance Length (ratio),{al}\r\n", "x.csv")
    one_error(p, words)
    _accept_error(p, words)


def test_repeated_csv_sections_keep_the_last_and_say_so(tmp_path):
    text = _CSV_HEAD + "Token-Weighted Acceptance Length (ratio),3.39\r\n" + _CSV_HEAD + \
        "Token-Weighted Acceptance Length (ratio),2.10\r\n"
    out = _both(write_log(tmp_path, text, "x.csv"))
    assert out["accept_length"] == pytest.approx(2.10) and any("repeat" in n for n in out["notes"])


def test_a_genai_perf_grouped_csv_value_is_read(tmp_path):
    text = 'Metric,avg,min,max,p99,p95,p90,p75,p50,p25\r\n"Inter Token Latency (ms)","1,012.50",9.0,2000.0\r\n'
    assert _both(write_log(tmp_path, text, "x.csv"))["tpot_ms"] == pytest.approx(1012.5)


# ----------------------------------------------------------------------- hostile vLLM sparse histograms
_GOOD = ('{"choices":[{"index":0,"speculative_decoding_stats":{"mean_acceptance_length":3.75,'
         '"acceptance_histogram":{"2":5,"3":15},"num_spec_steps":20,"num_accepted_draft_tokens":55}}]}\n')


@pytest.mark.parametrize("hist", ['{"0":-1,"3":3}', '{"0":2.5,"3":3}', '{"70":5,"3":3}', '{"3":5,"3":3}'])
def test_an_impossible_sparse_histogram_line_is_garbled(tmp_path, hist):
    bad = _GOOD.replace('{"2":5,"3":15}', hist)
    out = _both(write_log(tmp_path, bad + _GOOD, "x.jsonl"))
    # the bad line counted garbled; the good one alone: [0, 0, 5, 15] -> 1 + (10 + 45) / 20 = 3.75
    assert out["garbled"] == 1 and out["al"]["histogram"] == [0, 0, 5, 15]
    assert out["accept_length"] == pytest.approx(3.75)
