"""Layouts found in the fifth corpus sweep (tests/data/real/, 2026-11): llama-server's per-round verbose lines
(`accepted A/D draft tokens, new n_tokens = N`), bench results pasted as `|` tables (tabulate grid, markdown) and
files with nothing to read. Expected values are worked by hand from the lines written here."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from wmtp.cli.main import app

ROUND = "slot update_slots: id  3 | task 0 | accepted {a}/{d} draft tokens, new n_tokens = {n}"
GRID = """\
+----+-------------------+----------------+------------------+
|    |   max_concurrency |   mean_tpot_ms |   median_tpot_ms |
+====+===================+================+==================+
|  0 |             1.000 |          7.936 |            7.755 |
+----+-------------------+----------------+------------------+
|  1 |             4.000 |          9.913 |            9.713 |
"""
MARKDOWN = """\
| concurrency | mean_tpot_ms | accept_length |
|---|---|---|
| 1 | 5.20 | 3.10 |
| 8 | 7.90 | 3.00 |
"""


def _write(tmp_path, text: str, name: str = "x.log"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _logs(path) -> dict:
    r = CliRunner().invoke(app, ["logs", str(path), "--json"])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    return json.loads(r.output)[0]


def _refused(path) -> str:
    r = CliRunner().invoke(app, ["logs", str(path)])
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
    return r.output


def test_llama_per_round_lines_give_one_plus_mean_accepted(tmp_path):
    rounds = [(1, 16, 661), (2, 16, 664), (16, 16, 681), (16, 16, 698), (3, 4, 702)]
    p = _write(tmp_path, "\n".join(ROUND.format(a=a, d=d, n=n) for a, d, n in rounds) + "\n")
    out = _logs(p)
    assert out["accept_length"] == pytest.approx(1 + 38 / 5)  # 1 + (1+2+16+16+3)/5 = 8.6
    assert out["tpot_ms"] is None
    assert out["al"]["lines"] == [1, 5] and "per-round" in out["al"]["estimator"]
    r = CliRunner().invoke(app, ["accept", str(p), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["files"][0]["accept_length"] == pytest.approx(8.6)


def test_llama_rounds_of_an_old_build_with_zero_drafted_still_count_accepted(tmp_path):
    """Builds before llama.cpp#18211 log the drafted count as 0 (`accepted 11/0`): the accepted count is still the
    round's, so AL = 1 + (11 + 4)/2 = 8.5."""
    p = _write(tmp_path, ROUND.format(a=11, d=0, n=741) + "\n" + ROUND.format(a=4, d=0, n=746) + "\n")
    assert _logs(p)["accept_length"] == pytest.approx(8.5)


def test_tabulate_grid_gives_its_first_rows_mean_tpot(tmp_path):
    out = _logs(_write(tmp_path, GRID))
    assert out["tpot_ms"] == pytest.approx(7.936)  # the max_concurrency 1 row, not 9.913
    assert out["tpot"]["lines"] == [4, 4] and "table" in out["tpot"]["estimator"]
    assert out["tpot"]["source"].endswith(":4-4")


def test_markdown_table_gives_tpot_and_al_of_its_first_row(tmp_path):
    out = _logs(_write(tmp_path, MARKDOWN))
    assert out["tpot_ms"] == pytest.approx(5.20) and out["accept_length"] == pytest.approx(3.10)


def test_a_labelled_markdown_row_is_still_a_label_not_a_table(tmp_path):
    text = "| Metric | Value |\n|---|---|\n| Mean TPOT (ms) | 12.30 |\n"
    assert _logs(_write(tmp_path, text))["tpot_ms"] == pytest.approx(12.30)


def test_a_row_of_another_width_or_a_header_without_rows_gives_nothing(tmp_path):
    text = "| concurrency | mean_tpot_ms | accept_length |\n| 1 | 5.20 |\n| 2 | 3 | 4 | 5 |\n"
    _refused(_write(tmp_path, text))


def test_an_accept_length_cell_below_one_is_not_an_al(tmp_path):
    text = "| concurrency | mean_tpot_ms | accept_length |\n| 1 | 5.20 | 0.62 |\n"
    out = _logs(_write(tmp_path, text))
    assert out["tpot_ms"] == pytest.approx(5.20) and out["accept_length"] is None


def test_files_with_nothing_to_read_are_one_error_line(tmp_path):
    prefill = ("[2026-06-27 10:02:58 PP0 ATTN_CP1 TP1 EP1] Prefill batch, #new-seq: 1, #new-token: 128, #cached-token: 0, "
               "token usage: 0.00, #running-req: 0, #queue-req: 0, npu graph: False, input throughput (token/s): 2.94\n")
    scrape = ('vllm:spec_decode_num_drafts_total{engine="0", instance="localhost:8000", job="vllm"} | 22\n-- | --\n'
              'vllm:spec_decode_num_drafts_total{engine="1", instance="localhost:8000", job="vllm"} | 15\n')
    zero_eval = ("2.19.394.588 I slot print_timing: id  0 | task 0 |        eval time =       0.00 ms /     1 tokens "
                 "(    0.00 ms per token,     0.00 tokens per second)\n")
    for i, text in enumerate((prefill, scrape, zero_eval)):
        assert "no usable" in _refused(_write(tmp_path, text, f"n{i}.log"))
