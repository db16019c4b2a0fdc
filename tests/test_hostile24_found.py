"""Hostile inputs of sweep 24, what its fuzz found (`test_hostile24.py` pins the fuzz: seeded mutations of the log
readers' inputs, of `--profile` / `--framework` files and of output paths). Each bug is pinned here by a regression
test whose expected value is worked out by hand from the file it edits:
- a vLLM spec line with `Accepted: nan tokens` beside a nan per-position rate: a ValueError traceback (int(nan) while
  writing the error);
- an SGLang decode line whose `#full token` has 5000 digits: an OverflowError traceback (int(float) of an infinity);
- a number of more than 4300 digits (int() refuses it) in a vLLM `Running:` column, `num_speculative_tokens`,
  `#retracted_reqs`, an MLC-LLM `step=`, LMDeploy's running count or a `DP` rank: a ValueError traceback;
- a 2024 bench_latency step line with a 400-digit latency: an OverflowError traceback (round(inf));
- a TensorRT-LLM iteration record with `avgNumDecodedTokensPerIter` or `numGenRequests` 1e-320: an OverflowError
  / ValueError (an infinite or zero TPOT binned);
- a UTF-16 log one byte out of step (a byte-wise CRLF conversion): every other line read as mojibake and skipped,
  a different TPOT given, silently;
- a headline TPOT that is a quotient of corrupt numbers: `TPOT: inf ms` (TGI's sum / a count of 1e-320) and
  `TPOT: 0.00 ms` (a sum of 0, a request count of 1e-320) printed as results;
- `Mean TPOT (ms): 0.00` in a bench summary: its Mean ITL read, the estimator saying '(no TPOT section)';
- `engines --fit P --out .` (and `python -m wmtp.calibrate.engine_fit P --out .`): a ValueError traceback;
- a profile whose `hardware` is 5000 characters: a 5100-character error line;
- an engine preset with `verify_attn_factor` 2e-12 (or any factor below 1, which the fit never gives): a negative
  `verify.engine` component time priced and printed; a preset term of the wrong type or range was refused as
  'missing, unknown or non-numeric terms', naming no field."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest

from wmtp.engine import engines_dir
from wmtp.log_analysis import analyse
from wmtp.profile import PROFILES_DIR
from cli_checks import assert_one_error, invoke  # noqa: E402

DATA = Path(__file__).parent / "data"
CORPUS = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix not in (".tsv", ".md"))
POINTS = engines_dir() / "sglang-b200-paper.points.csv"
HUGE = "9" * 5000  # past Python's 4300-digit int() limit
WIDE = "9" * 400  # an integer no float holds: float() gives inf


def _edit(src: Path, dst: Path, line: int, old: str, new: str) -> Path:
    """`src` with `old` replaced by `new` on its 1-based `line`, written to `dst`."""
    lines = src.read_text().split("\n")
    assert old in lines[line - 1], lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    dst.write_text("\n".join(lines))
    return dst


def _both_readers(path: Path) -> dict:
    """`analyse` by the block reader (what `wmtp logs` runs), checked equal to the per-line reference reader."""
    fast, ref = analyse(path), analyse(path, reference=True)
    assert (fast["tpot_ms"], fast["accept_length"], fast["garbled"]) == \
        (ref["tpot_ms"], ref["accept_length"], ref["garbled"])
    return fast


# --- 1. the log readers: what the fuzz found --------------------------------------------------------------------
VLLM_SPEC = DATA / "real" / "vllm-v1-spec-post-lines-spec-first-club3090-137.log"


def test_vllm_spec_line_with_nan_accepted_count_is_one_error(tmp_path):
    """Line 6's `Accepted: 548` as `nan` and its third rate `0.554` as `NaN`: the rates hold a nan, so the line cannot
    be read (vLLM's nan is every position or none); the error said so while formatting int(nan): a traceback."""
    p = _edit(VLLM_SPEC, tmp_path / "a.log", 6, "Accepted: 548 tokens", "Accepted: nan tokens")
    p = _edit(p, p, 6, "0.692, 0.554,", "0.692, NaN,")
    for cmd in ("logs", "accept"):
        line = assert_one_error(invoke(cmd, p), f"{p}:6", "nan at position 3 of 3", "Accepted: nan, Drafted: 780")
        assert "Traceback" not in line


GDN = DATA / "real_v2" / "sglang-hybrid-gdn-mamba-num-2026.log"


@pytest.mark.parametrize("token", [WIDE, HUGE])
def test_decode_line_with_a_token_count_no_float_holds_is_garbled(tmp_path, token):
    """Line 6's `#full token` as a 5000-digit number: an OverflowError traceback in the block reader (int() refused
    it, then int(float(...)) of an infinity); 400 digits (int() reads it, past MAX_VALUE) is the control. That line
    garbled, the rest read. Lines 2-5 at #running-req 8: line 2 (40 tok/s) right after the prefill
    is set aside; lines 3-5 at 320 tok/s give 8 / 320 = 25 ms each (line 6, 8 / 400 = 20 ms, is the one lost)."""
    p = _edit(GDN, tmp_path / "g.log", 6, "#full token: 925903", f"#full token: {token}")
    rep = _both_readers(p)
    assert rep["garbled"] == 1 and rep["tpot"]["samples"] == 3
    assert rep["tpot_ms"] == pytest.approx(8 / 320 * 1e3, rel=2e-3)  # (the runs' medians are 0.1 %-wide bins)


VLLM_WINDOWS = DATA / "real" / "vllm-v1-warning-then-running1-thinking-30599.log"


def test_vllm_window_with_a_running_count_past_int_is_garbled(tmp_path):
    """Line 8's `Running: 1 reqs` with 5000 digits: a ValueError traceback (int() of the column). That window
    garbled; of the others at Running 1, line 4's has prompt throughput (set aside), lines 5 and 7 give
    1000 / 181.0 = 5.525 and 1000 / 180.3 = 5.546 ms: median 5.536 ms."""
    p = _edit(VLLM_WINDOWS, tmp_path / "v.log", 8, "Running: 1 reqs", f"Running: {HUGE} reqs")
    rep = _both_readers(p)
    assert rep["garbled"] == 1
    assert rep["tpot_ms"] == pytest.approx((1000 / 181.0 + 1000 / 180.3) / 2, rel=2e-3)


SPEC_V1 = ("(APIServer pid=1) INFO 05-15 13:54:03 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 2.41, "
           "Accepted: 548 tokens, Drafted: 780 tokens, Per-position acceptance rate: 0.800, 0.605")


@pytest.mark.parametrize("line", [
    f'INFO args: {{"num_speculative_tokens": {HUGE}}}',
    f"spec_decode_accept_len_accept_len{{step={HUGE}}} 2.5",
    f"[2026-01-01 10:00:00] KV cache pool is full. Retract requests. #retracted_reqs: {HUGE}, #new_token_ratio: 0.5",
    f"[2026-01-01 10:00:00 DP0] Avg thr (in/out): 1.0 / 2.0 tokens/s, Server (completed/routed/waiting): 1 / 0 / 0, "
    f"Engine (running/waiting): {HUGE} / 0, KV cache: 1.0%",
])
def test_a_line_with_a_number_past_int_is_garbled(tmp_path, line):
    """Each was a ValueError traceback (int() of more than 4300 digits). The line is garbled; the spec line after it
    still reads: two positions, so 780 / 2 = 390 drafts, AL = 1 + 548 / 390 = 2.405 (the rates 0.800 + 0.605 and the
    printed 2.41 agree)."""
    p = tmp_path / "x.log"
    p.write_text(f"{line}\n{SPEC_V1}\n")
    rep = _both_readers(p)
    assert rep["garbled"] == 1
    r = invoke("accept", p, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["files"][0]["accept_length"] == pytest.approx(1 + 548 / 390)


def test_a_dp_rank_of_thousands_of_digits_reads_as_no_rank(tmp_path):
    """`[... DP<5000 digits> TP0]` before a decode line: a ValueError traceback in both readers' prefix parsers. A
    rank nobody runs reads as no rank; the four lines at #running-req 8 and 320 tok/s give 8 / 320 = 25 ms."""
    dec = ("[2026-03-03 11:39:2{i} DP{rank} TP0] Decode batch. #running-req: 8, #token: 9245, token usage: 0.15, "
           "cuda graph: True, gen throughput (token/s): 320.00, #queue-req: 0, ")
    p = tmp_path / "dp.log"
    p.write_text("\n".join(dec.format(i=i, rank=HUGE if i == 2 else 0) for i in range(1, 5)) + "\n")
    rep = _both_readers(p)
    assert rep["garbled"] == 0 and rep["tpot_ms"] == pytest.approx(25.0, rel=2e-3)


BENCH_LATENCY = DATA / "real" / "sglang-bench-latency-2024-seconds-printed-as-ms-564.log"


def test_bench_latency_step_with_a_latency_no_float_holds_is_garbled(tmp_path):
    """Line 15's latency `0.009` as 400 digits: an OverflowError (round(inf)). That step garbled; the other 7 steps
    (batch 1, one token a step: 1000 / throughput) are 331.1, 9.71, 9.30, 9.28, 9.24, 11.87, 9.21 ms: median
    1000 / 107.55 = 9.298 ms (the shipped file's 8 steps gave (9.28 + 9.30) / 2 = 9.29)."""
    p = _edit(BENCH_LATENCY, tmp_path / "b.log", 15, "latency:  0.009 ms", f"latency:  {WIDE} ms")
    rep = _both_readers(p)
    assert rep["garbled"] == 1 and rep["tpot"]["samples"] == 7
    assert rep["tpot_ms"] == pytest.approx(1000 / 107.55)


TGI = DATA / "real_v4" / "tgi-3x-prometheus-scrape-speculate-2.log"
TGI_AL = 1 + 5500 / (4000 - 40)  # skipped tokens sum / (observations - the 40 requests' prefill generations)


@pytest.mark.parametrize("old, new, got", [
    ("tgi_request_mean_time_per_token_duration_count 40", "tgi_request_mean_time_per_token_duration_count 1e-320",
     "no finite time"),  # 0.8 / 1e-320 overflows: `TPOT: inf ms` was printed
    ("tgi_request_mean_time_per_token_duration_sum 0.8", "tgi_request_mean_time_per_token_duration_sum 0",
     "gives 0 ms"),  # 0 / 40: `TPOT: 0.00 ms`
])
def test_tgi_tpot_of_corrupt_numbers_is_set_aside_and_said(tmp_path, old, new, got):
    """The shipped scrape: TPOT 0.8 s / 40 requests = 20 ms, AL 1 + 5500 / 3960 = 2.389. With the count 1e-320 or
    the sum 0, the quotient is no time per token: the TPOT is set aside with a note naming it; the AL still reads."""
    line = next(i for i, t in enumerate(TGI.read_text().split("\n"), 1) if t.startswith(old))
    p = _edit(TGI, tmp_path / "t.log", line, old, new)
    r = invoke("logs", p, "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)[0]
    assert rep["tpot_ms"] is None and rep["accept_length"] == pytest.approx(TGI_AL)
    said = [n for n in rep["notes"] if n.startswith("TPOT set aside")]
    assert len(said) == 1 and "tgi_request_mean_time_per_token_duration" in said[0] and got in said[0], rep["notes"]
    table = invoke("logs", p)
    assert table.exit_code == 0 and not re.search(r"\binf\b|\bnan\b", table.output, re.I), table.output
    control = json.loads(invoke("logs", TGI, "--json").stdout)[0]  # the control: the shipped file's 20 ms
    assert control["tpot_ms"] == pytest.approx(20.0)


def test_bench_summary_tpot_of_zero_is_set_aside(tmp_path):
    """A summary cut before its TPOT and ITL values derives TPOT as (Mean E2E - Mean TTFT) / (tokens per request - 1);
    `Successful requests: 1e-320` made tokens per request overflow, the TPOT 0.00 ms. With no other evidence in the
    file: one error saying what was set aside."""
    src = DATA / "real" / "sglang-bench-serving-oai-cut-before-tpot-value-12976.log"
    p = _edit(src, tmp_path / "s.log", 8, "Successful requests:                     128",
              "Successful requests:                     1e-320")
    assert_one_error(invoke("logs", p), "TPOT set aside", "gives 0 ms", "(Mean E2E - Mean TTFT)")
    ok = invoke("logs", src, "--json")  # the control: the same estimator over the file as shipped
    assert ok.exit_code == 0 and json.loads(ok.stdout)[0]["tpot_ms"] > 1, ok.output


VLLM_BENCH = DATA / "real" / "vllm-bench-serve-draft-model-mm-35714.log"


def test_bench_summary_mean_tpot_of_zero_says_so(tmp_path):
    """`Mean TPOT (ms): 0.00` (line 19; a bench whose requests each gave one token prints it) is no decode time per
    token: the summary's Mean ITL (line 23, 21.54 ms) is read, as before, but its estimator said '(no TPOT section)'
    of a file that has one. The control: as shipped, Mean TPOT 21.80 ms."""
    p = _edit(VLLM_BENCH, tmp_path / "b.log", 19, "21.80", "0.00")
    tpot = json.loads(invoke("logs", p, "--json").stdout)[0]["tpot"]
    assert tpot["value_ms"] == pytest.approx(21.54) and "its Mean TPOT 0, set aside" in tpot["estimator"], tpot
    assert json.loads(invoke("logs", VLLM_BENCH, "--json").stdout)[0]["tpot_ms"] == pytest.approx(21.80)


TRT_STATS = DATA / "real_v3" / "trtllm-serve-2026-metrics-iteration-stats-json-cut.json"


@pytest.mark.parametrize("old, new", [
    ('"avgNumDecodedTokensPerIter":0.0', '"avgNumDecodedTokensPerIter":1e-320'),
    ('"numGenRequests":4', '"numGenRequests":1e-320'),
])
def test_trt_iteration_record_of_impossible_counts_is_garbled(tmp_path, old, new):
    """`avgNumDecodedTokensPerIter` 1e-320 in one record (each request decodes at least one token an iteration; 0.0
    is the PyTorch executor's 'not filled'): the step time / 1e-320 overflowed the TPOT bins, an OverflowError;
    `numGenRequests` 1e-320 (a count that is no whole number) made 1 + accepted / requests infinite, the TPOT 0, a
    ValueError (log 0). Its records share one line, which is garbled: nothing else in the file, one error."""
    text = TRT_STATS.read_text()
    assert old in text
    p = tmp_path / "t.json"
    p.write_text(text.replace(old, new, 1))
    assert_one_error(invoke("logs", p), "1 lines read, 1 garbled")
    ok = json.loads(invoke("logs", TRT_STATS, "--json").stdout)[0]  # the control: 30 / 2.5, 12, 36 / 2.5, ... 12 ms
    assert ok["tpot_ms"] == pytest.approx(12.0, rel=2e-3)


POWERSHELL = DATA / "real_v4" / "sglang-powershell-utf16le-bom-crlf-2026.log"


def test_utf16_log_out_of_step_by_a_byte_is_one_error(tmp_path):
    """The PowerShell (UTF-16LE) log with each 0x0a byte made 0x0d 0x0a, as a byte-wise CRLF conversion does: from
    the end of line 1 the text decodes one byte out of step, every other line as byte-swapped ASCII (`[` as U+5B00),
    which no parser knows: read on, 3 of the 6 decode lines gave TPOT 22.49 ms (the file's is 20.00), saying only
    '4 skipped'. Now one error naming where the text went out of step."""
    p = tmp_path / "u.log"
    p.write_bytes(POWERSHELL.read_bytes().replace(b"\n", b"\r\n"))
    for cmd in ("logs", "accept"):
        assert_one_error(invoke(cmd, p), str(p), "UTF-16 text out of step at line 2")
    ok = json.loads(invoke("logs", POWERSHELL, "--json").stdout)[0]  # the control: 4 / 200 tok/s = 20 ms
    assert ok["tpot_ms"] == pytest.approx(20.0, rel=2e-3)


def _reading(r):
    """What `wmtp logs --json` read: (TPOT, AL) per file, or its error without the file's name."""
    if r.exit_code:
        return r.output.strip().split(": ", 2)[-1]
    return [(f["tpot_ms"], f["accept_length"]) for f in json.loads(r.stdout)]


def test_every_corpus_log_reads_the_same_as_utf16_and_utf32(tmp_path):
    """The control of the out-of-step check: every UTF-8 corpus file, saved as UTF-16 (either byte order) or UTF-32
    with a byte-order mark, gives the reading it gives as UTF-8 (box rules are U+2500, `0` out of step is U+3000:
    neither may count as text out of step)."""
    for src in CORPUS:
        raw = src.read_bytes()
        if raw.startswith((b"\xff\xfe", b"\x1f\x8b")):
            continue
        text = raw.decode("utf-8")
        want = _reading(invoke("logs", src, "--json"))
        for data in (text.encode("utf-16"), b"\xfe\xff" + text.encode("utf-16-be"), text.encode("utf-32")):
            p = tmp_path / ("w" + src.suffix)
            p.write_bytes(data)
            assert _reading(invoke("logs", p, "--json")) == want, src.name


def test_cjk_text_and_box_rules_in_utf16_are_text(tmp_path):
    """Lines of CJK text padded with U+3000, and box rules of U+2500 (what `0` and `%` read as, one byte out of step),
    then an SGLang decode line: the decode line reads (4 / 200 tok/s = 20 ms)."""
    lines = ["服务启动" + "\u3000" * 8 + "完成", "\u2500" * 60, "\u4e00\u4e8c\u4e09\u56db" * 8,
             "[2026-04-02 09:15:02] Decode batch, #running-req: 4, #token: 4280, token usage: 0.02, cuda graph: True, "
             "gen throughput (token/s): 200.00, #queue-req: 0, "]
    p = tmp_path / "cjk.log"
    p.write_bytes("\n".join(lines).encode("utf-16"))
    r = invoke("logs", p, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)[0]["tpot_ms"] == pytest.approx(20.0, rel=2e-3)


# --- 2. file outputs and engine presets: what the fuzz found -----------------------------------------------------
@pytest.mark.parametrize("out, fragment", [
    (".", "names a folder"), ("..", "names a folder"), ("sub/..", "names a folder"), ("", "path is empty"),
])
def test_output_naming_dot_or_dotdot_is_one_error(tmp_path, monkeypatch, out, fragment):
    """`engines --fit P --out .` was a ValueError traceback (Path('.').with_suffix('.md')); every file option reads
    '.', '..' and 'x/..' as the folder they name."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    before = sorted(os.listdir(tmp_path))
    assert_one_error(invoke("engines", "--fit", POINTS, "--out", out), "--out", fragment)
    assert_one_error(invoke("report", "--model", "q35", "--out", out), "--out", fragment)
    assert_one_error(invoke("sweep", "depth", "--model", "q35", "--csv", out), "--csv", fragment)
    assert sorted(os.listdir(tmp_path)) == before


def test_engine_fit_module_out_dot_is_one_error(tmp_path, capsys):
    from wmtp.calibrate.engine_fit import main

    assert main([str(POINTS), "--out", str(tmp_path / "x" / "..")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "names a folder" in err and len(err.splitlines()) == 1


V1_PRESET = json.loads((engines_dir() / "sglang-b200-paper-v1.json").read_text())


@pytest.mark.parametrize("value", [2.0876347411711596e-12, 0.5, 0.999, 0.0, -1.0])
def test_engine_attention_factor_below_one_is_refused_naming_it(tmp_path, value):
    """verify_attn_factor is the engine's verify attention over the measured kernel's, fitted as factor - 1 >= 0:
    at 2e-12 (a fuzzed preset) `verify.engine` was priced at -3.3 ms, (factor - 1) x the 3.3 ms attention."""
    doc = copy.deepcopy(V1_PRESET)
    doc["per_model"]["q35"]["verify_attn_factor"] = value
    p = tmp_path / "e.json"
    p.write_text(json.dumps(doc))
    assert_one_error(invoke("predict", "--model", "q35", "--framework", p), str(p), "per_model.q35",
                     "verify_attn_factor", ">= 1")
    doc["per_model"]["q35"]["verify_attn_factor"] = 1.0  # the control: 1 (the engine's kernel is the measured one)
    p.write_text(json.dumps(doc))
    assert invoke("predict", "--model", "q35", "--framework", p).exit_code == 0


@pytest.mark.parametrize("term, value, fragment", [
    ("step_ms", "x", "step_ms must be a finite number"),
    ("fwd_ms", 10**400, "fwd_ms must be a finite number"),
    ("step_ms", -1.0, "step_ms is a time and must be >= 0 ms"),
])
def test_engine_preset_bad_term_names_it(tmp_path, term, value, fragment):
    """Was 'is corrupt: missing, unknown or non-numeric terms', naming neither the term nor the row."""
    doc = copy.deepcopy(V1_PRESET)
    doc["per_model"]["q35"][term] = value
    p = tmp_path / "e.json"
    p.write_text(json.dumps(doc))
    assert_one_error(invoke("predict", "--model", "q35", "--framework", p), str(p), "per_model.q35", fragment)


@pytest.mark.parametrize("hw", ["h" * 5000, "h200\x1b[2J", "", "h 200"])
def test_profile_hardware_that_is_no_key_is_a_short_error(tmp_path, hw):
    """A profile's `hardware` of 5000 characters was written whole into the error line (5100 characters: the key is
    looked up to scale the profile); one with an escape sequence reached the table's header. A key is what
    `wmtp hardware` lists: letters, digits, `_.+-`, at most 40."""
    doc = json.loads((PROFILES_DIR / "h200.json").read_text())
    doc["hardware"] = hw
    p = tmp_path / "p.json"
    p.write_text(json.dumps(doc))
    line = assert_one_error(invoke("predict", "--model", "q35", "--profile", p), str(p), "hardware must be a hardware "
                            "key")
    assert len(line) < len(str(p)) + 150, line


