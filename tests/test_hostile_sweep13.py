"""Hostile inputs of the thirteenth adversarial sweep (after test_hostile_sweep12.py; its calibration and profile
inputs are in test_hostile_sweep13_calibrate.py): tables that cut numbers and provenance tags to '…' (`wmtp logs` at
the 80 columns a pipe gets printed a run's TPOT as '49.…'; `predict` at 40 columns its tags as 'extra…');
`simulate --phases` pricing each step's draft extend with the phases' stated lengths, not the tokens each governs in
the decode (a phase past --tokens changed the TPOT, a last phase that runs on to the end was weighed at its stated
length); vLLM SpecDecoding lines whose per-position rates contradict their own Accepted / Drafted counts (`wmtp
accept` printed 'AL 2.500 at d=4' above 'AL by depth: d=4: 1.16'); a negative `simulate --seed` (Python's random
seeds -5 as 5: two seeds, one sample, with no word); histogram bins and counts written with '_', '+' or other
scripts' digits (int() read the CSV line '1_0,5' as 5 steps at bin 10: AL 4.333 at d = 11 for a d = 2 histogram).
Each bad input ends in exit code 1 and exactly one `error:` line (no traceback); each has a legal control beside it.
Expected values are worked out by hand in the comments or are properties, not taken from the code under test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_checks import assert_one_error, invoke  # noqa: E402


# --- tables narrower than their numbers -------------------------------------------------------------------------------

LOG = Path(__file__).parent / "data" / "sglang_decode.log"


def _at_width(monkeypatch, columns: int, *args):
    monkeypatch.setenv("COLUMNS", str(columns))
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    return r.output


def test_logs_table_shows_every_run_number_whole(monkeypatch):
    """At 80 columns (what a pipe or CliRunner gets) the runs table printed run 0's artifact TPOT as '49.…': each
    run's numbers from --json, at the table's two decimals, are in the table, and nothing is cut."""
    runs = json.loads(_at_width(monkeypatch, 80, "logs", LOG, "--json"))[0]["runs"]
    text = _at_width(monkeypatch, 80, "logs", LOG)
    assert "…" not in text
    for r in runs:
        for key in ("tpot_ms", "tpot_line_ms", "accept_length"):
            if r[key] is not None:
                assert f"{r[key]:.2f}" in text, (key, r[key])


@pytest.mark.parametrize("columns", [40, 50, 60])
@pytest.mark.parametrize("args", [
    ("predict", "--model", "q35"),
    ("predict", "--model", "q122", "--hw", "b200", "--framework", "sglang-b200-paper"),
    ("logs", LOG),
])
def test_a_narrow_terminal_folds_cells_but_cuts_none(monkeypatch, columns, args):
    """A narrow terminal may fold a cell onto two lines; '…' (rich's default) threw characters away: a number's
    provenance tag ('extra…'), a label ('acceptan…')."""
    assert "…" not in _at_width(monkeypatch, columns, *args)


def test_predict_table_at_its_usual_width_is_unchanged(monkeypatch):
    """The control: at 100 columns the predict table holds each method's step and TPOT with its tag, on one line."""
    out = json.loads(_at_width(monkeypatch, 100, "predict", "--model", "q122", "--json"))["methods"]
    text = _at_width(monkeypatch, 100, "predict", "--model", "q122")
    for key, label in (("step_ms", "step"), ("tpot_ms", "TPOT")):
        row = next(ln for ln in text.splitlines() if re.match(rf"│ {label} +│", ln))
        assert [f"{out[m][key]:.3f}" for m in ("dense", "native", "window")] == re.findall(r"\d+\.\d{3}", row)


# --- simulate's phases against --tokens -------------------------------------------------------------------------------

def _sim(*phases_tokens: str, tokens: int = 500) -> dict:
    r = invoke("simulate", "--model", "q35", "--method", "native", "--tokens", tokens, "--phases",
               ",".join(phases_tokens), "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_a_phase_the_decode_never_reaches_changes_nothing():
    """500 tokens decode within the first phase: the same draws (same seed) and the same steps as that phase alone,
    so the same TPOT; the unreached 0.0 phase priced the draft extend at a lower acceptance (2.887 ms for 2.893)."""
    alone, padded = _sim("0.9:500"), _sim("0.9:500", "0.0:1000000")
    assert padded["steps"] == alone["steps"] and padded["tokens"] == alone["tokens"]
    assert padded["tpot_ms"] == pytest.approx(alone["tpot_ms"], rel=1e-12)


def test_the_last_phase_runs_on_to_the_end_and_weighs_as_much():
    """0.95:100 as the last phase of a 2000-token decode governs its last 1900 tokens, as 0.95:1900 does (weighed at
    100 tokens, the extend was priced at a mean alpha of 0.575 where the decode ran at 0.9175)."""
    short, long = _sim("0.2:100", "0.95:100", tokens=2000), _sim("0.2:100", "0.95:1900", tokens=2000)
    assert short["steps"] == long["steps"]
    assert short["tpot_ms"] == pytest.approx(long["tpot_ms"], rel=1e-12)


def test_phase_weights_by_hand():
    from wmtp.simulate import phase_weights

    ph = [(100, [0.9]), (100, [0.1]), (50, [0.5])]
    assert phase_weights(ph, 500) == [100, 100, 300]  # the last runs on to 500
    assert phase_weights(ph, 150) == [100, 50, 0]  # the decode ends inside the second
    assert phase_weights(ph, None) == [100, 100, 50]  # their own lengths


# --- vLLM per-position rates against the counts of their lines --------------------------------------------------------

def _v1_spec(rates: str, accepted: int = 130) -> str:
    """A vLLM V1 SpecDecoding line: 300 draft tokens at k = 3 (100 drafts); 130 accepted: AL = 1 + 130 / 100 = 2.3,
    and rates accepted at position i / drafts that sum to 130 / 100 = 1.3."""
    return ("INFO 08-05 12:25:03 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
            f"{1 + accepted / 100:.2f}, Accepted throughput: 0.72 tokens/s, Drafted throughput: 2.64 tokens/s, "
            f"Accepted: {accepted} tokens, Drafted: 300 tokens, Per-position acceptance rate: {rates}, Avg Draft "
            "acceptance rate: 43.3%")


@pytest.mark.parametrize("rates", ["0.100, 0.050, 0.010",  # sum 0.16: AL 1.16 at d = 4 beside the counts' 2.30
                                   "0.900, 0.800, 0.700"])  # sum 2.40: AL 3.40
def test_per_position_rates_that_contradict_their_counts(tmp_path, rates):
    p = tmp_path / "v.log"
    p.write_text((_v1_spec(rates) + "\n") * 3)
    assert_one_error(invoke("accept", p), "per-position", "contradict")
    r = invoke("logs", p, "--json")  # the headline AL, from the counts, is still read by `wmtp logs`
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)[0]["al"]["value"] == pytest.approx(2.3)


def test_per_position_rates_that_sum_to_their_counts_are_read(tmp_path):
    """The control: 0.7 + 0.4 + 0.2 = 1.3 = 130 / 100; alpha = 0.7, 0.4 / 0.7, 0.2 / 0.4; AL at d = 4 is 2.3, the
    headline's, within the rates' rounding (0.697 etc. printed to three places)."""
    p = tmp_path / "v.log"
    p.write_text(_v1_spec("0.697, 0.403, 0.200") + "\n")
    r = invoke("accept", p, "--json")
    assert r.exit_code == 0, r.output
    f = json.loads(r.output)["files"][0]
    assert f["accept_length"] == pytest.approx(2.3)
    assert f["al_by_depth"]["4"]["al"] == pytest.approx(2.3, abs=0.001)


# --- simulate --seed --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", ["-1", "-5", "-99999999999999999999"])
def test_a_negative_seed_is_refused(seed):
    """random.Random(-5) draws what random.Random(5) does: seeds -10..10 averaged as 21 samples were 11."""
    assert_one_error(invoke("simulate", "--model", "q35", "--tokens", "200", "--seed", seed), "--seed")


def test_distinct_seeds_draw_distinct_samples():
    """The control: seeds 0, 1 and 5 each draw their own decode of 1000 tokens (about 200 steps): their 95 % intervals
    come from the 20 batches' token sums, which two different draws share only if every batch sum agrees."""
    runs = [json.loads(invoke("simulate", "--model", "q35", "--tokens", "1000", "--seed", s, "--json").output)
            for s in ("0", "1", "5")]
    assert all(r["tpot_ci95"] is not None for r in runs)
    assert len({tuple(r["tpot_ci95"]) for r in runs}) == 3


# --- histogram numbers in plain digits --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, text", [
    ("h.csv", "0,10\n1_0,5\n"),  # bin 10 where 1 or 0 was meant: d = 11
    ("h.csv", "0,10\n+1,5\n"),
    ("h.csv", "0,10\n\u0663,5\n"),  # Arabic-Indic three
    ("h.csv", "0,10\n1,1_000\n"),  # 1000 steps at bin 1
    ("h.csv", "0,10\n1,\u0665\n"),
    ("h.json", '{"0": 10, "\u0663": 5}'),
])
def test_histogram_numbers_not_in_plain_digits(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    assert_one_error(invoke("accept", p), "histogram")


@pytest.mark.parametrize("name, text", [("h.csv", "n,count\n0,10\n 1 , 5.0\n"), ("h.json", '{"0": 10, "1": 5}'),
                                        ("h.csv", "0,10\n1,5e0\n")])
def test_histogram_numbers_in_plain_digits_are_read(tmp_path, name, text):
    """The control: H = [10, 5]: AL at d = 2 is (1 x 10 + 2 x 5) / 15 = 4 / 3; spaces around a cell and a
    float's own notation are still plain numbers."""
    p = tmp_path / name
    p.write_text(text)
    r = invoke("accept", p, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["files"][0]["accept_length"] == pytest.approx(4 / 3)
