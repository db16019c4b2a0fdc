"""Hostile inputs of the twelfth adversarial sweep (after test_hostile_sweep11.py): a profile whose raw-data records
are not objects (`wmtp report` and `calibrate --add-tp` read them: AttributeError / TypeError tracebacks); per-step
accept lengths that are no whole token count (3.9 read as 3; 0, 5000, "4" and true dropped without a word), JSONL
lines that are not JSON and meta_info objects without a histogram (left out of the sum, unsaid); a raw sweep CSV whose
header names a column twice (pandas renamed the second `time_ms.1` and the fit read the first; an engine points table kept the
last); fp8 checkpoints that list their
unquantized modules under `ignored_layers` (vLLM's Fp8Config name: the MTP block was priced in fp8) or give a
`weight_block_size` other than 128 x 128 (priced as 128 x 128); a quantization kept under `compression_config`
(older compressed-tensors checkpoints: priced as bf16) or at a multimodal wrapper's top level beside a text_config
that names none (text_config's null won the merge: bf16); per-position acceptance rates above 1 or rising with
the position (clamped into a histogram: alpha = 1.000 shown where no chain of drafts gives it). Each bad input ends in exit code 1 and exactly one
`error:` line (no traceback) and writes nothing; each has a legal control beside it. Expected values are worked out
by hand in the comments or are properties (two spellings of one field load the same row), not taken from the code
under test."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from wmtp.errors import ConfigError, WmtpError
from wmtp.hf_config import load_config
from wmtp.profile import PROFILES_DIR
from cli_checks import assert_one_error, invoke  # noqa: E402
from test_hostile_sweep5 import DEEPSEEK_V3  # noqa: E402
from test_hostile_sweep6 import QWEN35_TEXT  # noqa: E402


def _profile(tmp_path: Path, **changes) -> Path:
    doc = json.loads((PROFILES_DIR / "h200.json").read_text())
    doc.update(changes)
    p = tmp_path / "cal" / "profile.json"
    p.parent.mkdir(exist_ok=True)
    p.write_text(json.dumps(doc))
    return p


# --- a profile's raw-data records ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [None, 5, "x", [], True])
def test_report_over_a_profile_whose_raw_data_is_no_object(tmp_path, value):
    """`wmtp report` shows raw_data.sha256: `.get` of an int, a list or null was an AttributeError traceback."""
    p, out = _profile(tmp_path, raw_data=value), tmp_path / "r.html"
    assert_one_error(invoke("report", "--model", "q35", "--profile", p, "--out", out), "raw_data must be an object")
    assert not out.exists()


def _tp_dir(tmp_path: Path) -> Path:
    """A tp_bench output folder: its raw rows and the shipped profile's TP2 all-reduce fit."""
    d = tmp_path / "tp"
    d.mkdir()
    (d / "tp_raw.csv").write_text("kernel,time_ms\nallreduce,0.01\n")
    fit = json.loads((PROFILES_DIR / "h200.json").read_text())["components"]["allreduce_tp2"]
    (d / "allreduce_tp2.json").write_text(json.dumps(fit))
    return d


@pytest.mark.parametrize("key, value", [
    ("tp_raw_data", "x"),  # setdefault(...)[k] = ...: a TypeError traceback
    ("tp_raw_data", [1]),
    ("tp_raw_data", {"allreduce_tp2": "x"}),
    ("weight_dtype_raw_data", {"gemm@int4": {"components": [{"a": 1}]}}),  # a dict as a name: unhashable
    ("kv_dtype_raw_data", {"fp8": {"components": "decode_attn@fp8"}}),
])
def test_add_tp_into_a_profile_whose_records_are_malformed(tmp_path, key, value):
    p = _profile(tmp_path, **{key: value})
    before = p.read_bytes()
    assert_one_error(invoke("calibrate", "--add-tp", _tp_dir(tmp_path), "--out", p.parent), key)
    assert p.read_bytes() == before


def test_add_tp_into_a_sound_profile_records_its_data(tmp_path):  # the control: the shipped profile's records
    p = _profile(tmp_path)
    r = invoke("calibrate", "--add-tp", _tp_dir(tmp_path), "--out", p.parent)
    assert r.exit_code == 0, r.output
    assert json.loads(p.read_text())["tp_raw_data"]["allreduce_tp2"]["file"] == "tp_raw.csv"


# --- per-step accept lengths and JSONL lines ------------------------------------------------------------------------

def _jsonl(tmp_path: Path, *lines: str, name: str = "steps.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("value", ["3.9", "0", "-1", "65", "5000", '"4"', "true", "1e308"])
def test_per_step_accept_length_that_is_no_token_count(tmp_path, value):
    """A verify step emits a whole number of tokens, 1..64 (d <= 64): 3.9 was read as 3; the others were dropped and
    the AL taken from the remaining lines."""
    p = _jsonl(tmp_path, '{"accept_length": 3}', f'{{"accept_length": {value}}}', '{"accept_length": 5}')
    assert_one_error(invoke("accept", p), "line 2", "accept_length")


def test_per_step_accept_lengths_written_as_whole_numbers_are_read(tmp_path):
    """The control: 3, 4.0 (a whole float) and 5 are three steps: AL = (3 + 4 + 5) / 3 = 4; a line without an
    accept_length (another record) is not a step."""
    p = _jsonl(tmp_path, '{"accept_length": 3}', '{"accept_length": 4.0}', '{"other": 1}', '{"accept_length": 5}')
    r = invoke("accept", p, "--json")
    assert r.exit_code == 0, r.output
    f = json.loads(r.output)["files"][0]
    assert f["steps"] == 3 and f["accept_length"] == pytest.approx(4.0) and "note" not in f


def test_a_jsonl_line_that_is_no_json_is_named(tmp_path):
    """Three requests' meta_info, the second cut short: its histogram was left out of the sum with no word. Summed,
    requests 1 and 3 give H = [2, 4, 6, 8]: AL = (1*2 + 2*4 + 3*6 + 4*8) / 20 = 60 / 20 = 3.0, and line 2 is named."""
    h = '{"meta_info": {"spec_accept_histogram": [1, 2, 3, 4]}}'
    p = _jsonl(tmp_path, h, h[:-1], h, name="meta.jsonl")
    r = invoke("accept", p, "--json")
    assert r.exit_code == 0, r.output
    f = json.loads(r.output)["files"][0]
    assert f["accept_length"] == pytest.approx(3.0) and "line 2" in f["note"]
    text = invoke("accept", p)
    assert "not JSON, skipped: line 2" in text.output


def test_a_jsonl_file_of_json_lines_has_no_note(tmp_path):  # the control
    h = '{"meta_info": {"spec_accept_histogram": [1, 2, 3, 4]}}'
    f = json.loads(invoke("accept", _jsonl(tmp_path, h, h, name="meta.jsonl"), "--json").output)["files"][0]
    assert f["accept_length"] == pytest.approx(3.0) and "note" not in f


def test_a_csv_histogram_names_its_estimator(tmp_path):
    """The CSV histogram's line read '[; whole file]': its estimator was blank."""
    p = tmp_path / "h.csv"
    p.write_text("0,5\n1,3\n2,2\n")
    r = invoke("accept", p)
    assert r.exit_code == 0 and "[histogram; whole file]" in r.output, r.output


# --- a raw sweep CSV naming a column twice ---------------------------------------------------------------------------

HEAD = "kernel,impl,model,ctx,batch,d,window,rep,time_ms,bytes,flops,status,config"
ROWS = [f"decode,wmtp,q35,{ctx},1,1,0,0,{t},{ctx * 1000},0,ok,c" for ctx, t in ((4096, 0.1), (8192, 0.2))]


@pytest.mark.parametrize("extra, value", [("time_ms", "9.9"), (" time_ms", "9.9"), ("ctx", "1")])
def test_raw_csv_with_a_column_named_twice(tmp_path, extra, value):
    """pandas reads the second `time_ms` as `time_ms.1`: the fit used the first of two columns, silently."""
    from wmtp.calibrate.raw_csv import read_raw

    p = tmp_path / "raw.csv"
    p.write_text("\n".join([f"{HEAD},{extra}"] + [f"{r},{value}" for r in ROWS]) + "\n")
    with pytest.raises(WmtpError, match=f"names column '{extra.strip()}' twice"):
        read_raw(p)
    out = tmp_path / "cal"
    assert_one_error(invoke("calibrate", "--from-raw", p, "--out", out), "twice")
    assert not out.exists()


@pytest.mark.parametrize("header, tail", [(f"{HEAD},time_ms_copy", ",9.9"), (f"{HEAD},,", ",,"),
                                          (f"\ufeff{HEAD}", "")])
def test_raw_csv_with_distinct_or_blank_extra_columns_is_read(tmp_path, header, tail):
    """The controls: another name, trailing blank (unnamed) columns of a spreadsheet export, a byte-order mark."""
    from wmtp.calibrate.raw_csv import read_raw

    p = tmp_path / "raw.csv"
    p.write_text("\n".join([header] + [r + tail for r in ROWS]) + "\n", encoding="utf-8")
    assert list(read_raw(p)["time_ms"]) == [0.1, 0.2]


ENGINES = PROFILES_DIR.parent / "engines"


def _engine_fit(tmp_path: Path, points: str):
    d = tmp_path / "fit"
    d.mkdir()
    (d / "mine.points.csv").write_text(points)
    shutil.copy(ENGINES / "sglang-b200-paper.structure.json", d / "mine.structure.json")
    out = d / "out.json"
    return invoke("engines", "--fit", d / "mine.points.csv", "--hw", "b200", "--out", out), out


def _with_column(name: str, value: str) -> str:
    """The shipped points with one more column, `value` in every row (quoted: some rows' last field holds commas)."""
    lines = (ENGINES / "sglang-b200-paper.points.csv").read_text().splitlines()
    return "\n".join([f"{lines[0]},{name}"] + [f"{ln},{value}" for ln in lines[1:]]) + "\n"


def test_engine_points_naming_a_column_twice(tmp_path):
    """csv.DictReader keeps the last of two `value_ms` columns: every step was fitted as 1 ms, silently."""
    r, out = _engine_fit(tmp_path, _with_column("value_ms", "1.0"))
    assert_one_error(r, "names column 'value_ms' twice")
    assert not out.exists()


def test_engine_points_with_another_extra_column_fit(tmp_path):  # the control: a column of another name
    r, out = _engine_fit(tmp_path, _with_column("note", "x"))
    assert r.exit_code == 0 and out.exists(), r.output


# --- fp8 checkpoints: ignored_layers, weight_block_size --------------------------------------------------------------

def _ds(tmp_path: Path, name: str, **quant) -> Path:
    p = tmp_path / name / "config.json"
    p.parent.mkdir()
    q = {"activation_scheme": "dynamic", "quant_method": "fp8", "weight_block_size": [128, 128], **quant}
    p.write_text(json.dumps({**DEEPSEEK_V3, "quantization_config": {k: v for k, v in q.items() if v != "-"}}))
    return p


def test_fp8_ignored_layers_are_left_unquantized(tmp_path):
    """vLLM's Fp8Config reads `ignored_layers` (then modules_to_not_convert): DeepSeek-V3's MTP block is decoder
    layer 61 (of 61: 0..60), so listing it keeps the MTP block bf16. It was priced in fp8."""
    skip = ["lm_head", "model.layers.61.eh_proj"]
    as_ignored = load_config(_ds(tmp_path, "a", ignored_layers=skip))
    as_modules = load_config(_ds(tmp_path, "b", modules_to_not_convert=skip))
    plain = load_config(_ds(tmp_path, "c"))
    assert (as_ignored.weight_dtype, as_ignored.mtp_bf16, plain.mtp_bf16) == ("fp8", True, False)
    assert as_ignored == replace(as_modules, key=as_ignored.key)  # the folders differ, nothing else


def test_fp8_ignored_layers_must_be_names(tmp_path):
    assert_one_error(invoke("predict", "--config", _ds(tmp_path, "m", ignored_layers="lm_head")),
                     "ignored_layers must be a list of module names")


@pytest.mark.parametrize("blocks, fragment", [
    ([64, 64], "128 x 128 scale blocks only"),
    ([1, 128], "128 x 128 scale blocks only"),
    ([128], "must be [rows, columns]"),
    ([128, 128, 1], "must be [rows, columns]"),
    ("128x128", "must be [rows, columns]"),
    ([128.0, 128.0], "must be [rows, columns]"),
    ([True, True], "must be [rows, columns]"),
    ([0, 128], "must be [rows, columns]"),
])
def test_fp8_scale_blocks_wmtp_does_not_price(tmp_path, blocks, fragment):
    """Block scales of another size (or no size at all) were priced as 128 x 128: at [1, 128] a 4-byte scale per 128
    weights is 1/32 more bytes than the 1/4096 priced."""
    p = _ds(tmp_path, "m", weight_block_size=blocks)
    with pytest.raises(ConfigError, match="weight_block_size"):
        load_config(p)
    assert_one_error(invoke("predict", "--config", p), "weight_block_size", fragment)


@pytest.mark.parametrize("blocks", [[128, 128], None, "-"])
def test_fp8_default_scale_blocks_load(tmp_path, blocks):  # the controls: as published, null, left out (HF: 128)
    assert load_config(_ds(tmp_path, "m", weight_block_size=blocks)).weight_dtype == "fp8"


# --- where a config.json keeps its quantization ----------------------------------------------------------------------

NVFP4 = {"quant_method": "compressed-tensors", "ignore": ["lm_head"],
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "group_size": 16}}}}
FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


def _write(tmp_path: Path, name: str, doc: dict) -> Path:
    p = tmp_path / name / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(doc))
    return p


def test_compression_config_is_read_as_the_quantization(tmp_path):
    """Older compressed-tensors checkpoints keep it under `compression_config` (vLLM and SGLang read it where
    quantization_config is absent): an NVFP4 checkpoint was priced as bf16, four times its weight bytes."""
    spec = load_config(_write(tmp_path, "a", {**DEEPSEEK_V3, "quantization_config": None, "compression_config": NVFP4}))
    same = load_config(_write(tmp_path, "b", {**DEEPSEEK_V3, "quantization_config": NVFP4}))
    assert spec.weight_dtype == "nvfp4" and spec == replace(same, key=spec.key)


def test_compression_config_is_checked_like_the_other(tmp_path):
    bad = {**NVFP4, "ignore": "lm_head"}
    p = _write(tmp_path, "m", {**DEEPSEEK_V3, "quantization_config": None, "compression_config": bad})
    assert_one_error(invoke("predict", "--config", p), "compression_config.ignore must be a list of module names")



@pytest.mark.parametrize("text_quant", [None, FP8])
def test_a_wrappers_own_quantization_wins_over_its_text_configs(tmp_path, text_quant):
    """vLLM and SGLang read the top level's quantization_config, text_config's only where the top level has none: a
    null (or another method) under text_config replaced the wrapper's NVFP4, and the checkpoint was priced as bf16."""
    text = {**QWEN35_TEXT, "quantization_config": text_quant}
    spec = load_config(_write(tmp_path, "m", {"model_type": "qwen3_5_moe", "quantization_config": NVFP4,
                                              "text_config": text}))
    assert spec.weight_dtype == "nvfp4"


def test_a_quantization_only_under_text_config_is_read(tmp_path):  # the control: where the top level has none
    text = {**QWEN35_TEXT, "quantization_config": FP8}
    assert load_config(_write(tmp_path, "m", {"model_type": "qwen3_5_moe", "text_config": text})).weight_dtype == "fp8"


# --- per-position rates no chain of drafts gives ----------------------------------------------------------------------

def _v1_spec(rates: str) -> str:
    """A vLLM V1 SpecDecoding line: 300 draft tokens at k = 3 (100 drafts), 130 accepted (AL = 1 + 130 / 100 = 2.3)."""
    return ("INFO 08-05 12:25:03 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.30, Accepted "
            "throughput: 0.72 tokens/s, Drafted throughput: 2.64 tokens/s, Accepted: 130 tokens, Drafted: 300 tokens, "
            f"Per-position acceptance rate: {rates}, Avg Draft acceptance rate: 43.3%")


@pytest.mark.parametrize("rates", ["1.800, 0.400, 0.100",  # accepted at position 1 / drafts: at most 1
                                   "0.400, 0.800, 0.100"])  # a draft accepted at 2 was accepted at 1: never rising
def test_per_position_rates_no_chain_gives(tmp_path, rates):
    """Unconditional rates (accepted at position i / drafts) lie in [0, 1] and never rise. They were clamped: 1.8 was
    shown as alpha_1 = 1.000 with a 95 % interval of 0.979-1.000, and the rising pair as alpha_2 = 1.000."""
    p = tmp_path / "v.log"
    p.write_text(_v1_spec(rates) + "\n")
    assert_one_error(invoke("accept", p), "per-position", "rates")


def test_per_position_rates_of_a_chain_are_read(tmp_path):
    """The control: 0.8, 0.4, 0.1 of 100 drafts: alpha = 0.8, 0.4 / 0.8 = 0.5, 0.1 / 0.4 = 0.25; AL at d = 4 is
    1 + 0.8 + 0.4 + 0.1 = 2.3, the line's own."""
    p = tmp_path / "v.log"
    p.write_text(_v1_spec("0.800, 0.400, 0.100") + "\n")
    r = invoke("accept", p, "--json")
    assert r.exit_code == 0, r.output
    f = json.loads(r.output)["files"][0]
    assert [a["alpha"] for a in f["alphas"]] == pytest.approx([0.8, 0.5, 0.25])
    assert f["al_by_depth"]["4"]["al"] == pytest.approx(2.3)


@pytest.mark.parametrize("name, text, first", [
    ("m.json", '[{"meta_info": {"spec_accept_histogram": [1, 2, 3, 4]}}, {"meta_info": {"completion_tokens": 100, '
               '"spec_verify_ct": 10}}, "oops"]', "object 2"),
    ("m.jsonl", '{"meta_info": {"spec_accept_histogram": [1, 2, 3, 4]}}\n\n{"meta_info": {"completion_tokens": 9}}\n',
     "line 3"),
])
def test_meta_info_objects_without_a_histogram_are_named(tmp_path, name, text, first):
    """Only the objects with a histogram are summed: AL (1*1 + 2*2 + 3*3 + 4*4) / 10 = 3.0 of one request, which was
    reported as `requests` = every object of the file, the others left out without a word."""
    p = tmp_path / name
    p.write_text(text)
    f = json.loads(invoke("accept", p, "--json").output)["files"][0]
    assert f["accept_length"] == pytest.approx(3.0) and f["requests"] == 1
    assert "hold no acceptance histogram" in f["note"] and f"the first: {first}" in f["note"]


def test_meta_info_objects_all_with_histograms_say_their_count(tmp_path):  # the control
    h = '{"meta_info": {"spec_accept_histogram": [1, 2, 3, 4]}}'
    p = tmp_path / "m.json"
    p.write_text(f"[{h}, {h}]")
    f = json.loads(invoke("accept", p, "--json").output)["files"][0]
    assert f["requests"] == 2 and "note" not in f and f["accept_length"] == pytest.approx(3.0)
