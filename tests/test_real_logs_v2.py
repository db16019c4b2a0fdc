"""The version corpus (tests/data/real_v2/: one synthetic excerpt per real engine log format, numbers ours):
`wmtp logs` / `wmtp accept` (both views) read every file with no traceback and no garbled line, and agree with
the hand-derived values of EXPECTED.tsv within 1 % (TPOT: per line running / throughput, median; AL: see README)."""

from __future__ import annotations

from pathlib import Path

from corpus_checks import corpus  # noqa: E402
from wmtp.log_records import DecodeLine, VllmSpecLine, VllmThroughput
from wmtp.logs import parse_other

V2 = Path(__file__).parent / "data" / "real_v2"
ROWS, FILES = corpus(V2)


def test_the_corpus_is_whole_and_every_file_has_a_tpot():
    """(`tests/test_real_corpora.py` reads each file through `wmtp logs` / `wmtp accept` against these rows.)"""
    assert len(FILES) >= 19 and set(FILES) == set(ROWS)
    assert all(ROWS[name]["expect_tpot_ms"] for name in FILES)  # every file of this corpus has a TPOT


def test_sglang_v01_line_without_decode_batch_is_a_decode_record():
    line = ("I0228 11:50:57.566828 24354 model_rpc.py:697] #running-req: 12, #token: 8650, token usage: 0.09, "
            "gen throughput (token/s): 375.00, #queue-req: 0\n")
    rec = parse_other(line, 7)
    assert isinstance(rec, DecodeLine)
    assert (rec.line_no, rec.running, rec.gen_throughput, rec.queue) == (7, 12, 375.0, 0)


def test_lmdeploy_line_gives_its_window_and_its_spec_fields():
    line = ("[2026-05-10 10:00:10 Engine 003] Avg thr (in/out): 12.5 / 500.0 tokens/s, Server (succeeded/failed/"
            "routed/waiting): 5 / 0 / 10 / 0, Engine (running/waiting): 10 / 2, KV cache: 5.2%, SpecDecoding metrics: "
            "Draft acceptance rate: 40.00%, Mean acceptance length: 2.20, Accepted: 1200 tokens, Drafted: 3000 tokens, "
            "Per-position acceptance rate: 0.600, 0.400, 0.200\n")
    thr, spec = parse_other(line, 4)
    assert isinstance(thr, VllmThroughput) and isinstance(spec, VllmSpecLine)
    assert (thr.engine, thr.prompt_thr, thr.gen_thr, thr.running) == ("003", 12.5, 500.0, 10)
    assert (spec.accepted, spec.drafted, spec.k, spec.mean_al) == (1200, 3000, 3, 2.2)


def test_lmdeploy_line_with_a_broken_number_is_garbled_not_dropped():
    line = "[2026-02-05 17:05:17 DP0] Avg thr (in/out): 0.0 / x tokens/s, Engine (running/waiting): 4 / 0, \n"
    assert parse_other(line, 1) is False
