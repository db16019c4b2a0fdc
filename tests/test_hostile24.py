"""Hostile inputs of sweep 24: seeded mutation fuzzing of the log readers (`wmtp logs`, `wmtp accept`), of `--profile`
and `--framework` files (predict / sweep / report), and of the output paths of every command that writes a file
without a GPU.

What the fuzz found, each pinned below by a regression test whose expected value is worked out by hand:
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
- `engines --fit P --out .` (and `python -m wmtp.calibrate.engine_fit P --out .`): a ValueError traceback;
- a profile whose `hardware` is 5000 characters: a 5100-character error line;
- an engine preset with `verify_attn_factor` 2e-12 (or any factor below 1, which the fit never gives): a negative
  `verify.engine` component time priced and printed; a preset term of the wrong type or range was refused as
  'missing, unknown or non-numeric terms', naming no field.

The fuzz itself is pinned as parametrized tests over fixed seeds: a mutated input either gives a sane result
(AL in [1, d], TPOT a time per token, every number finite, estimator and source named, no `nan` / `inf` printed) or
exactly one `error:` line, and an output that cannot be written leaves nothing behind."""

from __future__ import annotations

import copy
import functools
import gzip
import json
import math
import os
import random
import re
from pathlib import Path

import pytest

from wmtp.engine import engines_dir
from wmtp.errors import WmtpError
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


def test_every_corpus_log_reads_the_same_as_utf16_and_utf32(tmp_path):
    """The control of the out-of-step check: every UTF-8 corpus file, saved as UTF-16 (either byte order) or UTF-32
    with a byte-order mark, gives the reading it gives as UTF-8 (box rules are U+2500, `0` out of step is U+3000:
    neither may count as text out of step)."""
    for src in CORPUS:
        raw = src.read_bytes()
        if raw.startswith((b"\xff\xfe", b"\x1f\x8b")):
            continue
        text = raw.decode("utf-8")
        want = _reading("logs", invoke("logs", src, "--json"))
        for data in (text.encode("utf-16"), b"\xfe\xff" + text.encode("utf-16-be"), text.encode("utf-32")):
            p = tmp_path / ("w" + src.suffix)
            p.write_bytes(data)
            assert _reading("logs", invoke("logs", p, "--json")) == want, src.name


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


# --- the fuzz, pinned: mutators ---------------------------------------------------------------------------------
_NUM = re.compile(rb"\d+(?:\.\d+)?")
_KINDS = ["flip", "flipmany", "trunc", "dup", "dupblock", "shuffle", "delline", "huge", "nan", "inf", "neg", "zero",
          "swapnum", "bigint", "tiny", "utf16", "utf16bom", "latin1", "bom", "crlf", "cr", "nul", "gzgarbage",
          "gztrunc", "gzip", "trailing", "empty"]
_NUMBER_FOR = {"huge": lambda r, m, ns: b"1e400", "nan": lambda r, m, ns: r.choice([b"nan", b"NaN"]),
               "inf": lambda r, m, ns: r.choice([b"inf", b"Infinity"]), "neg": lambda r, m, ns: b"-" + m.group(),
               "zero": lambda r, m, ns: b"0", "swapnum": lambda r, m, ns: r.choice(ns).group(),
               "bigint": lambda r, m, ns: b"9" * r.choice([20, 400, 5000]), "tiny": lambda r, m, ns: b"1e-320"}


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One seeded mutation of a file's bytes: bits flipped, cut at a random offset, lines duplicated / shuffled /
    dropped, numbers made huge / NaN / inf / negative / 0 / 1e-320 / 20-5000 digits, re-encoded (UTF-16 with and
    without a mark, Latin-1, a UTF-8 mark, CRLF, CR), NUL bytes, gzip (of garbage, cut, whole), emptied."""
    kind = rng.choice(_KINDS)
    b, ls = bytearray(data), data.split(b"\n")
    if kind in ("flip", "flipmany") and b:
        for _ in range(rng.randint(1, 4) if kind == "flip" else rng.randint(5, 50)):
            i = rng.randrange(len(b))
            b[i] = b[i] ^ (1 << rng.randrange(8)) if kind == "flip" else rng.randrange(256)
        return bytes(b), kind
    if kind == "trunc":
        return data[:rng.randrange(len(data) + 1)], kind
    if kind == "dup":
        for _ in range(rng.randint(1, 5)):
            ls.insert(rng.randrange(len(ls) + 1), ls[rng.randrange(len(ls))])
    elif kind == "dupblock":
        i = rng.randrange(len(ls))
        j = rng.randrange(i, len(ls)) + 1
        ls = ls[:j] + ls[i:j] + ls[j:]
    elif kind == "shuffle":
        rng.shuffle(ls)
    elif kind == "delline" and len(ls) > 1:
        del ls[rng.randrange(len(ls))]
    if kind in ("dup", "dupblock", "shuffle", "delline"):
        return b"\n".join(ls), kind
    if kind in _NUMBER_FOR:
        nums = list(_NUM.finditer(data))
        out = data
        for m in sorted(rng.sample(nums, min(len(nums), rng.randint(1, 3))), key=lambda m: -m.start()):
            out = out[:m.start()] + _NUMBER_FOR[kind](rng, m, nums) + out[m.end():]
        return out, kind
    text = data.decode("utf-8", "replace")
    return {"utf16": lambda: text.encode("utf-16-le"), "utf16bom": lambda: text.encode("utf-16"),
            "latin1": lambda: text.encode("latin-1", "replace") + b"\xe9\xff", "bom": lambda: b"\xef\xbb\xbf" + data,
            "crlf": lambda: data.replace(b"\n", b"\r\n"), "cr": lambda: data.replace(b"\n", b"\r"),
            "nul": lambda: (lambda i: data[:i] + b"\0" * rng.randint(1, 3) + data[i:])(rng.randrange(len(data) + 1)),
            "gzgarbage": lambda: b"\x1f\x8b" + bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))),
            "gztrunc": lambda: (lambda z: z[:rng.randrange(len(z) + 1)])(gzip.compress(data)),
            "gzip": lambda: gzip.compress(data),
            "trailing": lambda: data.rstrip(b"\n") + rng.choice([b"", b"\n\n\n", b"   \n", b"\t"]),
            "empty": lambda: b""}[kind](), kind


# mutations that change no content: the reading must be the original's
_SAME_READING = {"crlf", "gzip", "trailing", "bom"}
_PRINTED_NONFINITE = re.compile(r"(?<![A-Za-z])(nan|inf|infinity)(?![A-Za-z])", re.I)


def _numbers(doc, path=""):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield path, doc


def _sane_or_one_error(r) -> bool:
    """True for a result (exit 0, no traceback, nothing non-finite printed); one `error:` line, else a failure."""
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    if r.exit_code != 0:
        line = assert_one_error(r)
        assert len(line) < 2000, line
        return False
    assert "Traceback" not in r.output
    return True


def _check_logs(doc: list) -> None:
    for f in doc:
        for path, x in _numbers(f):
            assert math.isfinite(x), (path, x)
        if f["accept_length"] is not None:
            assert 1 <= f["accept_length"] <= 64 and f["al"]["estimator"], f["al"]
        if f["tpot_ms"] is not None:
            assert 1e-3 <= f["tpot_ms"] <= 1e12 and f["tpot"]["estimator"] and f["tpot"]["source"], f["tpot"]


def _check_accept(doc: dict) -> None:
    for f in doc["files"]:
        for path, x in _numbers(f):
            assert math.isfinite(x) and (x >= 0 or path.endswith("delta")), (path, x)
        d = f.get("measured_depth") or 64
        assert 1 <= f["accept_length"] <= d * (1 + 1e-9) and f["kind"] and f["estimator"] and f["source"], f
        assert all(a["alpha"] is None or 0 <= a["alpha"] <= 1 for a in f.get("alphas") or [])
        for k, v in (f.get("al_by_depth") or {}).items():
            assert 1 <= v["al"] <= int(k) * (1 + 1e-9), (k, v)


def _reading(cmd: str, r):
    if r.exit_code:  # (its counts aside: blank lines added at the end are lines read)
        return re.sub(r"\d+", "N", r.output.strip().split(": ", 2)[-1])
    doc = json.loads(r.stdout)
    if cmd == "logs":
        return [(f["tpot_ms"], f["accept_length"], (f["tpot"] or {}).get("estimator")) for f in doc]
    return [(f["accept_length"], f["kind"], f["estimator"]) for f in doc["files"]]


@functools.lru_cache(maxsize=None)
def _original(cmd: str, src: Path):
    return _reading(cmd, invoke(cmd, src, "--json"))


@pytest.mark.parametrize("seed", range(400))
def test_fuzzed_log_reads_sanely_or_is_one_error(tmp_path, seed):
    """A corpus file (tests/data), mutated: `wmtp logs` and `wmtp accept` (JSON and tables) give a sane reading or
    one error line; a mutation that keeps the content (CRLF, gzip, a UTF-8 mark, trailing blank lines) the same
    reading as the file's own."""
    rng = random.Random(seed)
    src = rng.choice(CORPUS)
    data, kind = mutate(src.read_bytes(), rng)
    p = tmp_path / (f"m{src.suffix}" + (".gz" if kind == "gzip" else ""))
    p.write_bytes(data)
    for cmd, check in (("logs", _check_logs), ("accept", _check_accept)):
        extra = ["-d", str(rng.randint(2, 9))] if cmd == "accept" and rng.random() < 0.2 else []
        r = invoke(cmd, p, "--json", *extra)
        if _sane_or_one_error(r):
            check(json.loads(r.stdout))
        if kind in _SAME_READING and not extra and not src.read_bytes().startswith(b"\xff\xfe"):  # (bytes of UTF-8)
            assert _reading(cmd, r) == _original(cmd, src), (kind, src.name)
        table = invoke(cmd, p, *extra)
        if _sane_or_one_error(table):
            m = _PRINTED_NONFINITE.search(table.output)
            assert m is None, table.output[max(0, m.start() - 200):m.end() + 50]


@pytest.mark.parametrize("case", range(80))
def test_huge_number_in_a_log_reads_sanely_or_is_one_error(tmp_path, case):
    """One number of a corpus file replaced by 5000 or 400 digits, 1e400, 1e-320 or 4294967297, read by both
    readers: the same answer, sane, or the same one error."""
    rng = random.Random(1000 + case)
    src = rng.choice([f for f in CORPUS if f.suffix == ".log"])
    data = src.read_bytes()
    m = rng.choice(list(_NUM.finditer(data)))
    rep = rng.choice([HUGE.encode(), WIDE.encode(), b"1e400", b"1e-320", b"4294967297"])
    p = tmp_path / "n.log"
    p.write_bytes(data[:m.start()] + rep + data[m.end():])
    got = []
    for reference in (False, True):
        try:
            a = analyse(p, reference=reference)
            got.append((a["tpot_ms"], a["accept_length"], a["garbled"]))
        except WmtpError as e:
            got.append(str(e))
    assert got[0] == got[1]
    r = invoke("logs", p, "--json")
    if _sane_or_one_error(r):
        _check_logs(json.loads(r.stdout))


# --- the fuzz, pinned: profiles and engine presets ----------------------------------------------------------------
_VALUES = [None, True, 0, -1, -0.5, 1.5, 1e308, 10**30, 2**63, 10**400, float("nan"), float("inf"), "", "x", [],
           {}, [1, 2], {"a": 1}, [None], 1e-300]


def _paths(doc, rng, path=()):
    if path:
        yield path
    if isinstance(doc, dict):
        items = list(doc.items())
    elif isinstance(doc, list):
        items = list(enumerate(doc)) if len(doc) <= 8 else [(i, doc[i]) for i in rng.sample(range(len(doc)), 6)]
    else:
        items = []
    for k, v in items:
        yield from _paths(v, rng, path + (k,))


def _mutated_doc(doc: dict, rng: random.Random) -> dict:
    """`doc` with 1-3 fields dropped, negated, scaled by 1e12 or 1e-12, or replaced (null, a string for a number, a
    list for an object, NaN, infinity, 10**400)."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(list(_paths(doc, random.Random(rng.random()))))
        parent = functools.reduce(lambda d, k: d[k], path[:-1], doc)
        old = parent[path[-1]]
        if rng.random() < 0.15 and isinstance(parent, dict):
            del parent[path[-1]]
        elif rng.random() < 0.3 and isinstance(old, (int, float)) and not isinstance(old, bool):
            parent[path[-1]] = rng.choice([-old, old * 1e12, old * 1e-12, -1e-9])
        else:
            parent[path[-1]] = rng.choice(_VALUES + [str(old)[:50], [old], {"a": old}])
    return doc


_SOURCES = {"profile": PROFILES_DIR / "h200.json", "flashinfer": PROFILES_DIR / "h200-flashinfer.json",
            "preset": engines_dir() / "sglang-b200-paper.json",
            "preset-v1": engines_dir() / "sglang-b200-paper-v1.json"}
_DOCS = {k: json.loads(p.read_text()) for k, p in _SOURCES.items()}


@pytest.mark.parametrize("which, seed", [(w, s) for w, n in (("profile", 64), ("flashinfer", 20), ("preset", 32),
                                                              ("preset-v1", 24)) for s in range(n)])
def test_fuzzed_profile_or_preset_prices_sanely_or_is_one_error(tmp_path, which, seed):
    """A shipped profile or engine preset, mutated field-wise (70 %) or byte-wise: predict (JSON and table), and for
    some seeds sweep and report, give an answer with every time finite and non-negative, or one error line."""
    rng = random.Random(seed)
    if rng.random() < 0.7:
        data = json.dumps(_mutated_doc(_DOCS[which], rng)).encode()
    else:
        data = mutate(_SOURCES[which].read_bytes(), rng)[0]
    p = tmp_path / "p.json"
    p.write_bytes(data)
    opt = ["--framework", p] if which.startswith("preset") else ["--profile", p]
    extra = rng.choice([[], ["--batch", "16"], ["--ctx", "4K"], ["--kv-dtype", "fp8"], ["--weight-dtype", "bf16"],
                        ["--tp", "2"], ["--depth", "3"]])
    r = invoke("predict", "-m", "q35", "--ctx", "1M", *opt, *extra, "--json")
    if _sane_or_one_error(r):
        for path, x in _numbers(json.loads(r.stdout)):
            assert math.isfinite(x) and (x >= 0 or not path.endswith(("ms", "_s"))), (path, x)
    table = invoke("predict", "-m", "q35", "--ctx", "1M", *opt, *extra)
    if _sane_or_one_error(table):
        assert not _PRINTED_NONFINITE.search(table.output), table.output
    if seed % 4 == 0:
        sw = invoke("sweep", rng.choice(["ctx", "depth", "window", "batch"]), "-m", "q35", *opt, "--json")
        if _sane_or_one_error(sw):
            assert all(math.isfinite(x) for _, x in _numbers(json.loads(sw.stdout)))
    if seed % 8 == 0:
        out = tmp_path / "r.html"
        if not _sane_or_one_error(invoke("report", "-m", "q35", *opt, "--out", out)):
            assert not out.exists() and sorted(os.listdir(tmp_path)) == ["p.json"]


# --- the fuzz, pinned: outputs that cannot be written ---------------------------------------------------------------
def _decode_log(path: Path, step_ms: float) -> Path:
    """An SGLang decode log at batch 1 whose every line gives T_iter = accept len / gen throughput = step_ms."""
    path.write_text("\n".join(f"[2026-01-01 10:00:{i:02d}] Decode batch. #running-req: 1, #token: 10, token usage: "
                              f"0.1, accept len: 3.00, cuda graph: True, gen throughput (token/s): "
                              f"{3 / (step_ms / 1e3):.3f}, #queue-req: 0" for i in range(40)))
    return path


_WRITERS = {
    "report": lambda t, o: ["report", "-m", "q35", "--out", o],
    "sweep --csv": lambda t, o: ["sweep", "depth", "-m", "q35", "--csv", o],
    "engines --fit": lambda t, o: ["engines", "--fit", POINTS, "--out", o],
    "calibrate-logs": lambda t, o: ["calibrate-logs", f"{_decode_log(t / 'a.log', 35.0)}:3",
                                    f"{_decode_log(t / 'b.log', 40.0)}:5", "--model", "q35", "--out", o],
}


def _read_only_folder(t: Path) -> Path | None:
    """A folder this process cannot write into: a 0555 folder, or for root (who writes there) /sys where the system
    refuses it; None where there is none."""
    ro = t / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    for folder in (ro, Path("/sys")):
        try:
            (folder / ".wmtp-probe").open("x").close()
        except OSError:
            return folder
        (folder / ".wmtp-probe").unlink()
    return None


def _target(t: Path, kind: str) -> Path:
    (t / "afile").write_text("x")
    (t / "adir").mkdir()
    (t / "todir").symlink_to(t / "adir")
    ro = _read_only_folder(t)
    if ro is None and "read-only" in kind:
        pytest.skip("no folder this user cannot write into")
    ro = ro or t
    return {"a folder": t / "adir", "a link to a folder": t / "todir", "through a file": t / "afile" / "o.x",
            "a device": Path("/dev/full"), "a read-only folder": ro / "o.x",
            "under a read-only folder": ro / "s" / "o.x",
            "a folder with a trailing /.": t / "adir" / "."}[kind]


@pytest.mark.parametrize("kind", ["a folder", "a link to a folder", "through a file", "a device", "a read-only folder",
                                  "under a read-only folder", "a folder with a trailing /."])
@pytest.mark.parametrize("writer", sorted(_WRITERS))
def test_unwritable_output_is_one_error_and_leaves_nothing(tmp_path, writer, kind):
    target = _target(tmp_path, kind)
    args = _WRITERS[writer](tmp_path, target)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    assert_one_error(invoke(*args))
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # no partial file, no temporary file
    assert not target.exists() or target.is_dir() or target == Path("/dev/full")


@pytest.mark.parametrize("writer", sorted(_WRITERS))
def test_output_in_a_missing_folder_is_written_whole(tmp_path, writer):
    """The control (and the documented behaviour: `wmtp.fileio` creates an output's missing folders): the file is
    written whole, no temporary file beside it."""
    out = tmp_path / "new" / "deeper" / "o.out"
    r = invoke(*_WRITERS[writer](tmp_path, out))
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 0 and not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]
