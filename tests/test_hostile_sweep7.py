"""Hostile inputs found by the seventh adversarial sweep (after test_hostile_sweep6.py): an engine preset whose terms
table is empty or incomplete (accepted, and priced as the bare kernels), a raw sweep CSV holding a measurement twice
(fitted with double weight), `--out -` (a file literally named '-'), and a negative KV budget in `--json` where the
weights do not fit on the GPU. Each bad input ends in exit code 1 and exactly one `error:` line; each family has a
legal control beside it, so the cases can fail. Expected values come from hand arithmetic (DESIGN 3's budget
formula), from the test's own reading of the files, or from a property (a term moved between the engine-wide and
per-model tables prices the same), not from the code under test."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

import pytest

from wmtp.errors import WmtpError
from wmtp.hardware import get_hardware
from wmtp.profile import PROFILES_DIR
from cli_checks import assert_one_error, invoke  # noqa: E402

ENGINES = Path(__file__).resolve().parents[1] / "wmtp_model" / "data" / "engines"
PRESET = json.loads((ENGINES / "sglang-b200-paper.json").read_text())
GIB = 2**30


def _json(*args) -> dict:
    r = invoke(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# ------------------------------------------------------------------------- 1. an engine preset's terms table
def _preset(tmp_path: Path, change) -> Path:
    doc = json.loads(json.dumps(PRESET))
    change(doc)
    p = tmp_path / "mine.json"
    p.write_text(json.dumps(doc))
    return p


def _drop(*terms):
    def change(doc):
        for t in terms:
            doc["terms"].pop(t)
    return change


@pytest.mark.parametrize("change, named, not_named", [
    # "terms": {} was accepted: the speculative step priced with no engine bookkeeping, no draft-forward host time
    (lambda doc: doc.update(terms={}), ["step_ms", "fwd_ms", "verify_attn_factor"], []),
    (_drop("fwd_ms"), ["fwd_ms"], ["step_ms"]),
    (_drop("step_ms", "verify_attn_factor"), ["step_ms", "verify_attn_factor"], ["fwd_ms"]),
])
def test_engine_preset_missing_required_terms(tmp_path, change, named, not_named):
    p = _preset(tmp_path, change)
    line = assert_one_error(invoke("predict", "--model", "q122", "--hw", "b200", "--framework", p), "mine.json",
                            "incomplete", *named)
    missing = line.split("incomplete: no ")[1].split(" in terms")[0]
    assert all(t not in missing for t in not_named), line
    with pytest.raises(WmtpError, match="incomplete"):  # the library, not only the CLI
        from wmtp.engine import load_preset
        load_preset(p)


@pytest.mark.parametrize("model", ["q122", "dsv3"])  # a fitted model, and one that gets the models' mean
def test_engine_preset_per_model_rows_naming_other_terms(tmp_path, model):
    """One model's row without host_step_ms: dsv3 (no row: the rows' mean) was a KeyError traceback."""
    p = _preset(tmp_path, lambda doc: doc["per_model"]["q35"].pop("host_step_ms"))
    assert_one_error(invoke("predict", "--model", model, "--hw", "b200", "--framework", p), "mine.json",
                     "per_model.q35", "host_step_ms")


def test_a_required_term_given_per_model_prices_the_same(tmp_path):
    """The control: step_ms moved from the engine-wide table into every model's row (the v1 presets' layout) is still
    named, and a term applies the same wherever it is written."""
    def move(doc):
        v = doc["terms"].pop("step_ms")
        for per in doc["per_model"].values():
            per["step_ms"] = v
    shipped = _json("predict", "--model", "q122", "--hw", "b200", "--framework", "sglang-b200-paper")
    moved = _json("predict", "--model", "q122", "--hw", "b200", "--framework", _preset(tmp_path, move))
    for m in ("dense", "native", "window"):
        assert moved["methods"][m]["step_ms"] == pytest.approx(shipped["methods"][m]["step_ms"], rel=1e-12)
    assert moved["methods"]["native"]["step_ms"] > moved["methods"]["dense"]["step_ms"] > 0


@pytest.mark.parametrize("name", ["sglang-b200-paper", "sglang-b200-paper-v1"])
def test_shipped_presets_still_load(name):  # the control: both generations name every required term
    out = _json("predict", "--model", "q122", "--hw", "b200", "--framework", name)
    assert out["engine_overhead"] == f"engine preset {name}"
    assert out["methods"]["native"]["tpot_ms"] > 0


def test_engine_structure_fitting_no_required_term(tmp_path):
    """A structure that fits no step_ms would write a preset that then fails to load: refused before the fit."""
    from wmtp.calibrate.engine_inputs import read_structure

    doc = json.loads((ENGINES / "sglang-b200-paper.structure.json").read_text())
    assert read_structure(ENGINES / "sglang-b200-paper.structure.json")["shared"] == doc["shared"]  # the control
    doc["shared"].remove("step_ms")
    (tmp_path / "x.structure.json").write_text(json.dumps(doc))
    with pytest.raises(WmtpError, match="fits no step_ms"):
        read_structure(tmp_path / "x.structure.json")


# ------------------------------------------------------------------------- 2. a measurement twice in a raw CSV
def _shipped_lines() -> list[str]:
    return gzip.decompress((PROFILES_DIR / "h200.raw.csv.gz").read_bytes()).decode().splitlines()


def _first_block(lines: list[str]) -> list[str]:
    """The first measurement: data rows from rep 0 while rep rises (the harness writes a shape's replays together)."""
    rep = lines[0].split(",").index("rep")
    block = [lines[1]]
    for ln in lines[2:]:
        if int(ln.split(",")[rep]) != int(block[-1].split(",")[rep]) + 1:
            break
        block.append(ln)
    return block


def _write(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "raw.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_raw_csv_with_a_measurement_pasted_again(tmp_path):
    """The first measurement's rows appended again (a concatenation, a paste): each of its replays was fitted twice."""
    lines = _shipped_lines()
    block = _first_block(lines)
    assert len(block) >= 10 and block[0].split(",")[0] == "gemm"
    n = len(lines) - 1  # data rows before the copy; the copy starts at data row n + 1
    r = invoke("calibrate", "--from-raw", _write(tmp_path, lines + block), "--out", tmp_path / "cal")
    assert_one_error(r, f"data row {n + 1} repeats data row 1", f"({len(block)} row(s)", "twice")
    assert not (tmp_path / "cal" / "profile.json").exists()


def test_raw_csv_with_a_row_pasted_after_itself(tmp_path):
    lines = _shipped_lines()
    r = invoke("calibrate", "--from-raw", _write(tmp_path, lines[:6] + [lines[5]] + lines[6:]), "--out", tmp_path / "c")
    assert_one_error(r, "data row 6 repeats data row 5")


def test_raw_csv_with_a_shape_measured_again_refits(tmp_path):
    """The control: the same shape measured again (another call site, a --resume) has its own times: kept. One time
    changed in the appended copy makes it a second measurement."""
    lines = _shipped_lines()
    block = _first_block(lines)
    col = lines[0].split(",").index("time_ms")
    again = [ln.split(",") for ln in block]
    again[3][col] = repr(float(again[3][col]) * 1.01)
    raw = _write(tmp_path, lines + [",".join(c) for c in again])
    r = invoke("calibrate", "--from-raw", raw, "--out", tmp_path / "c")
    assert r.exit_code == 0, r.output
    prof = json.loads((tmp_path / "c" / "profile.json").read_text())
    assert prof["components"] and prof["raw_data"]["sha256"] == hashlib.sha256(raw.read_bytes()).hexdigest()


def test_single_rows_tied_by_the_timer_are_kept():
    """The control: a coarse timer makes single rows of one shape equal in every column, rep and time included (the
    shipped sweep has such pairs): distinct replays, not a copy."""
    from wmtp.calibrate.raw_csv import read_raw

    data = _shipped_lines()[1:]
    assert len(set(data)) < len(data)  # the shipped file does hold equal rows
    assert len(read_raw(PROFILES_DIR / "h200.raw.csv.gz")) == len(data)


HEAD = "kernel,impl,model,ctx,batch,d,window,rep,time_ms,bytes,flops,status,config"


def _rows(*blocks, rep: bool = True) -> str:
    """A tiny raw CSV: each block (shape, [times], status) as rows rep 0, 1, ... (no rep column: `rep` False)."""
    out = [HEAD if rep else HEAD.replace(",rep,", ",")]
    for ctx, times, status in blocks:
        out += [f"decode,wmtp,q35,{ctx},1,1,0,{f'{i},' if rep else ''}{t},{ctx * 1000},0,{status},c"
                for i, t in enumerate(times)]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("text, fragment", [
    (_rows((4096, [0.1, 0.2, 0.3, 0.25], "ok"), (8192, [0.4, 0.5], "ok"), (4096, [0.1, 0.2, 0.3, 0.25], "ok")),
     "data row 7 repeats data row 1 (4 row(s)"),
    # without a rep column a block is the run of one shape's rows
    (_rows((4096, [0.1, 0.2, 0.3, 0.4], "ok"), (8192, [0.4], "ok"), (4096, [0.1, 0.2, 0.3, 0.4], "ok"), rep=False),
     "data row 6 repeats data row 1 (4 row(s)"),
])
def test_read_raw_finds_the_copy(tmp_path, text, fragment):
    from wmtp.calibrate.raw_csv import read_raw

    (tmp_path / "raw.csv").write_text(text)
    with pytest.raises(WmtpError, match=re.escape(fragment)):
        read_raw(tmp_path / "raw.csv")


@pytest.mark.parametrize("text", [
    _rows((4096, [0.1, 0.2, 0.3], "ok"), (4096, [0.1, 0.2, 0.31], "ok")),  # measured again: one time differs
    _rows((4096, [0.1], "ok"), (8192, ["nan"], "oom"), (8192, ["nan"], "oom")),  # a failure recorded on each try
    _rows((4096, [0.1, 0.1, 0.1], "ok")),  # one measurement whose replays tie
    # the same shape timed at two call sites by a timer without spread (a stable short kernel on coarse ticks; a
    # test's stand-in timer): no fingerprint to call a copy (CI found the stand-in case in test_bench_harness)
    _rows((4096, [0.003, 0.003, 0.003, 0.003], "ok"), (4096, [0.003, 0.003, 0.003, 0.003], "ok")),
    _rows((4096, [0.5, 0.25], "ok"), (4096, [0.5, 0.25], "ok")),
])
def test_read_raw_keeps_what_is_not_a_copy(tmp_path, text):  # the controls
    from wmtp.calibrate.raw_csv import read_raw

    (tmp_path / "raw.csv").write_text(text)
    assert len(read_raw(tmp_path / "raw.csv")) == text.count("\n") - 1


# ------------------------------------------------------------------------- 3. --out -
@pytest.mark.parametrize("args, what", [
    (["report", "--model", "q35", "--out", "-"], "report"),  # wrote a 5 MB file named '-'
    (["sweep", "ctx", "--model", "q35", "--csv", "-"], "CSV file"),
    (["engines", "--fit", ENGINES / "sglang-b200-paper-v1.points.csv", "--out", "-"], "engine preset"),
])
def test_dash_as_an_output_is_refused(tmp_path, monkeypatch, args, what):
    monkeypatch.chdir(tmp_path)
    assert_one_error(invoke(*args), f"{what} path '-'", "not to stdout")
    assert list(tmp_path.iterdir()) == []


def test_a_file_named_dash_by_its_path_is_written(tmp_path):  # the control: a path that names such a file
    from wmtp.fileio import WriteError, atomic_write_text, check_output_path

    with pytest.raises(WriteError, match="not to stdout"):
        check_output_path("-")
    atomic_write_text(tmp_path / "-", "x\n")
    assert (tmp_path / "-").read_text() == "x\n"
    r = invoke("report", "--model", "q35", "--out", tmp_path / "r.html")
    assert r.exit_code == 0 and (tmp_path / "r.html").read_text().lstrip().lower().startswith("<!doctype html"), r.output


# ------------------------------------------------------------------------- 4. weights that do not fit
def _budget(hw: str, weights: float) -> float:
    """DESIGN 3: KV budget = mem_fraction * HBM - weights - workspace (0.85, 4 GiB: the analytical defaults)."""
    return 0.85 * get_hardware(hw).hbm_bytes - weights - 4 * GIB


@pytest.mark.parametrize("args, hw", [
    (["--model", "dsv3"], "h200"),  # 627 GiB of fp8 weights on a 140 GiB GPU: kv_budget_bytes was -5.5e11
    (["--model", "q122", "--weight-dtype", "bf16"], "h100-sxm"),  # 227 GiB on 80 GiB
])
def test_weights_that_do_not_fit_leave_no_budget(args, hw):
    out = _json("predict", *args, "--hw", hw)
    mem = out["memory"]
    for m in ("dense", "native", "window"):
        assert _budget(hw, mem["weights_bytes"][m]) < 0  # the case is what it claims to be
        assert mem["kv_budget_bytes"][m] == 0 and mem["weights_fit"][m] is False and mem["max_batch"][m] == 0
    assert any("weights do not fit" in w and "kv_budget_bytes 0" in w for w in out["warnings"])
    text = invoke("predict", *args, "--hw", hw)
    assert text.exit_code == 0 and "weights do not fit" in " ".join(text.output.split())


@pytest.mark.parametrize("args, hw", [
    (["--model", "q122"], "h200"),
    (["--model", "q122", "--weight-dtype", "bf16", "--tp", "4"], "h100-sxm"),  # a quarter per GPU fits
])
def test_weights_that_fit_keep_the_budget(args, hw):  # the controls: the budget is DESIGN 3's, by hand
    out = _json("predict", *args, "--hw", hw)
    mem = out["memory"]
    for m in ("dense", "native", "window"):
        assert mem["kv_budget_bytes"][m] == pytest.approx(_budget(hw, mem["weights_bytes"][m]), rel=1e-12)
        assert mem["kv_budget_bytes"][m] > 0 and mem["weights_fit"][m] is True
    assert not any("weights do not fit" in w for w in out["warnings"])


def test_weights_fit_in_an_engines_accounting():
    """With an engine preset the budget is the engine's KV pool (never negative); weights_fit says the same thing."""
    big = _json("predict", "--model", "dsv3", "--hw", "h200", "--framework", "sglang-b200-paper")["memory"]
    fits = _json("predict", "--model", "q122", "--hw", "b200", "--framework", "sglang-b200-paper")["memory"]
    for m in ("dense", "native", "window"):
        assert big["kv_budget_bytes"][m] == 0 and big["weights_fit"][m] is False
        assert not big["engine"][m]["fits"] and "weights" in big["engine"][m]["why_not"]
        assert fits["weights_fit"][m] is True and fits["kv_budget_bytes"][m] > 0
