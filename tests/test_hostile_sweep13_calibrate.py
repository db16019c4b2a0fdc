"""Hostile inputs of the thirteenth adversarial sweep, calibration and profile side (the rest in
test_hostile_sweep13.py): `python -m wmtp.calibrate.engine_fit` (the entry ARCHITECTURE names for new presets) with an
--out naming its own points CSV or structure file (the points were replaced by the preset JSON: the one copy of the
published figures lost) or a --name that is a path (a ValueError traceback); a profile measured with an attention
backend this wmtp does not know (its attention was priced with wmtp's first kernels' tiling, silently); a raw sweep's
GPU matched to a registry row by a substring of its name (an H100 PCIe sweep became an h100-sxm profile, a GH200 one
an h200 profile: scaled to other GPUs with another part's bandwidth); a raw sweep without the rows of a kind the draft
forward needs (the refit said 'NaN at draft_loop_check.0.predicted_ms', not what was missing); `python -m
wmtp.calibrate.splice` (the README's one-kind re-measurement) on a missing, binary or headerless raw file, a profile
that is no profile (tracebacks: FileNotFoundError, UnicodeDecodeError, ValueError, KeyError, TypeError), an OUTDIR that
is a file, or the base's own folder as OUTDIR (the splice was written over the base); engine points of a dense step at
a draft depth (priced at d = 1 whatever the row said: the fit moved q35's host_step_ms from 4.24 to 6.19 ms) or of a
speculative step at d = 1 (an error without the file or line); `calibrate --add-tp` of a TP run on another GPU (its
all-reduce fit merged into the H200 profile priced the H200's links with the B200's, tagged measured).
Each bad input ends in exit code 1 and exactly one `error:` line (no traceback) and writes nothing; each has a legal
control beside it. Expected values are worked out by hand in the comments or are properties, not taken from the code
under test."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from wmtp.engine import engines_dir
from wmtp.profile import PROFILES_DIR
from cli_checks import assert_one_error, invoke  # noqa: E402


# --- python -m wmtp.calibrate.engine_fit ----------------------------------------------------------------------------

def _engine_inputs(tmp_path: Path) -> Path:
    """A copy of the shipped points and structure (NAME.points.csv beside NAME.structure.json)."""
    for suffix in (".points.csv", ".structure.json"):
        shutil.copy(engines_dir() / f"sglang-b200-paper{suffix}", tmp_path / f"e{suffix}")
    return tmp_path / "e.points.csv"


def _one_error(capsys) -> str:
    captured = capsys.readouterr()
    lines = [ln for ln in (captured.out + captured.err).splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("target", ["e.points.csv", "e.structure.json"])
def test_engine_fit_module_out_over_its_own_input(tmp_path, capsys, target):
    """`wmtp engines --fit` refused these; the module's own entry wrote the preset over them."""
    from wmtp.calibrate.engine_fit import main

    points = _engine_inputs(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main([str(points), "--out", str(tmp_path / target)]) == 1
    assert "destroy" in _one_error(capsys)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written, nothing replaced


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "x\ny"])
def test_engine_fit_module_name_that_is_no_file_name(tmp_path, capsys, name):
    from wmtp.calibrate.engine_fit import main

    points = _engine_inputs(tmp_path)
    assert main([str(points), "--name", name]) == 1
    assert "--name" in _one_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.points.csv", "e.structure.json"]
    assert not (tmp_path.parent / "x.json").exists()


def test_engine_fit_module_writes_beside_its_points(tmp_path, capsys):
    """The control: a plain --name and a new --out fit and write NAME.json / NAME.md, the inputs untouched."""
    from wmtp.calibrate.engine_fit import main

    points = _engine_inputs(tmp_path)
    before = points.read_bytes()
    assert main([str(points), "--name", "mine", "--out", str(tmp_path / "out.json")]) == 0, capsys.readouterr()
    assert (tmp_path / "out.json").is_file() and (tmp_path / "out.md").is_file()
    assert points.read_bytes() == before


# --- a profile's attention backend ------------------------------------------------------------------------------------

def _profile(tmp_path: Path, base: str = "h200", **changes) -> Path:
    doc = json.loads((PROFILES_DIR / f"{base}.json").read_text())
    for key, value in changes.items():
        if key == "provenance_backend":
            doc["provenance"]["backend"] = value
        else:
            doc[key] = value
    p = tmp_path / "profile.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("backend", ["xyz", "engine-index", "FlashInfer"])
def test_profile_of_an_attention_backend_wmtp_does_not_know(tmp_path, backend):
    """The attention features follow the measured backend's tiling (wmtp's kernel sets, FlashInfer's FA2 plan); any
    other name fell through to wmtp's v1 tiling: q35's native verify at 1M was 10.078 ms against the shipped 9.378,
    with no word. engine-index runs index builds only, no attention."""
    p = _profile(tmp_path, backend=backend, provenance_backend=backend)
    for cmd in (("predict", "--model", "q35"), ("sweep", "ctx", "--model", "q35")):
        assert_one_error(invoke(*cmd, "--profile", p), "attention backend", backend)


def test_profile_backend_only_in_its_provenance_is_checked_too(tmp_path):
    """An older profile names its backend only in provenance: the cost model reads it there."""
    doc = json.loads((PROFILES_DIR / "h200.json").read_text())
    del doc["backend"]
    doc["provenance"]["backend"] = "xyz"
    p = tmp_path / "profile.json"
    p.write_text(json.dumps(doc))
    assert_one_error(invoke("predict", "--model", "q35", "--profile", p), "'xyz'")


@pytest.mark.parametrize("base", ["h200", "h200-flashinfer"])
def test_profiles_of_the_known_backends_price(tmp_path, base):
    """The controls: a copy of each shipped profile prices as the shipped one does."""
    p = _profile(tmp_path, base)
    copy = invoke("predict", "--model", "q35", "--profile", p, "--json")
    shipped = invoke("predict", "--model", "q35", "--profile", PROFILES_DIR / f"{base}.json", "--json")
    assert copy.exit_code == 0 and shipped.exit_code == 0, copy.output
    steps = [{m: v["step_ms"] for m, v in json.loads(r.output)["methods"].items()} for r in (copy, shipped)]
    assert steps[0] == steps[1]


# --- the GPU a raw sweep names ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("gpu_name", [
    "NVIDIA H100 PCIe",  # 2.0 TB/s (PCIe card), not the SXM row's 3.35
    "NVIDIA H100 NVL",  # 3.9 TB/s, 94 GB
    "NVIDIA GH200 480GB",  # an H100-class GPU with 96 GB HBM3 at 4.0 TB/s, not the H200's 141 GB at 4.8
    "NVIDIA H200 NVL",  # the PCIe card: lower clocks and power than the SXM row's datasheet
])
def test_a_gpu_the_registry_has_no_row_for_is_not_another_row(gpu_name):
    from wmtp.calibrate.fitting import hardware_key
    from wmtp.hardware import HARDWARE

    assert hardware_key({"gpu_name": gpu_name}) not in HARDWARE


@pytest.mark.parametrize("gpu_name, key", [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100-SXM5-80GB", "h100-sxm"),
    ("NVIDIA B200", "b200"), ("NVIDIA GB200", "gb200"), ("AMD Instinct MI300X", "mi300x"),
])
def test_the_registry_gpus_keep_their_rows(gpu_name, key):
    """The controls: the names torch reports for the registry's parts (the H100 SXM as '80GB HBM3')."""
    from wmtp.calibrate.fitting import hardware_key

    assert hardware_key({"gpu_name": gpu_name}) == key


def test_a_refit_of_an_h100_pcie_sweep_is_not_scaled_as_an_sxm(tmp_path):
    """From the shipped raw sweep with its sidecar naming an H100 PCIe: the profile was keyed h100-sxm, and
    `predict` (--hw h200) scaled it by 4.8 / 3.35 where the card's bandwidth gives 4.8 / 2.0; a GPU without a row
    cannot be scaled, and says so."""
    shutil.copy(PROFILES_DIR / "h200.raw.csv.gz", tmp_path / "raw.csv.gz")
    meta = json.loads((PROFILES_DIR / "h200.raw.meta.json").read_text())
    (tmp_path / "raw.meta.json").write_text(json.dumps({**meta, "gpu_name": "NVIDIA H100 PCIe"}))
    r = invoke("calibrate", "--from-raw", tmp_path / "raw.csv.gz", "--out", tmp_path / "cal")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "cal" / "profile.json").read_text())["hardware"] == "nvidia-h100-pcie"
    assert_one_error(invoke("predict", "--model", "q35", "--profile", tmp_path / "cal" / "profile.json"),
                     "cannot be scaled")


# --- a raw sweep missing a kind ---------------------------------------------------------------------------------------

def _raw_without(tmp_path: Path, kind: str | None) -> Path:
    """The shipped raw sweep and its sidecar, without the rows of `kind` (None: all rows)."""
    with gzip.open(PROFILES_DIR / "h200.raw.csv.gz", "rt") as f:
        lines = f.read().splitlines()
    kept = [lines[0]] + [ln for ln in lines[1:] if ln.split(",", 1)[0] != kind]
    (tmp_path / "raw.csv").write_text("\n".join(kept) + "\n")
    shutil.copy(PROFILES_DIR / "h200.raw.meta.json", tmp_path / "raw.meta.json")
    return tmp_path / "raw.csv"


@pytest.mark.parametrize("kind", ["lm_head", "moe", "decode_attn"])
def test_refit_of_a_sweep_without_a_draft_forward_kind_names_it(tmp_path, kind):
    raw = _raw_without(tmp_path, kind)
    line = assert_one_error(invoke("calibrate", "--from-raw", raw, "--out", tmp_path / "cal"), kind, "draft forward")
    assert "nan" not in line.lower()
    assert not (tmp_path / "cal" / "profile.json").exists()


def test_refit_of_the_whole_sweep_writes_its_profile(tmp_path):
    """The control: every row kept, the refit writes a profile whose draft-loop check is all finite numbers."""
    raw = _raw_without(tmp_path, None)
    r = invoke("calibrate", "--from-raw", raw, "--out", tmp_path / "cal")
    assert r.exit_code == 0, r.output
    loop = json.loads((tmp_path / "cal" / "profile.json").read_text())["draft_loop_check"]
    assert loop and all(isinstance(x["predicted_ms"], float) and x["predicted_ms"] > 0 for x in loop)


# --- python -m wmtp.calibrate.splice ----------------------------------------------------------------------------------

HEAD = "kernel,impl,model,ctx,batch,d,window,sink,q_heads,kv_heads,head_dim,dtype,rep,time_ms,bytes,flops,status,config,timer"


def _row(kind: str, t: str) -> str:
    return f"{kind},wmtp,q35,,1.0,1.0,,,16.0,2.0,256.0,bf16,0,{t},4194304.0,3145728.0,ok,cfg,timer"


def _splice_inputs(tmp_path: Path) -> tuple[Path, Path]:
    base = tmp_path / "x.raw.csv.gz"
    base.write_bytes(gzip.compress(f"{HEAD}\n{_row('gemm', '0.5')}\n{_row('linear_state', '0.1')}\n".encode()))
    (tmp_path / "x.raw.meta.json").write_text(json.dumps({"gpu_name": "NVIDIA H200"}))
    new = tmp_path / "new.csv"
    new.write_text(f"{HEAD}\n{_row('linear_state', '0.3')}\n")
    return base, new


def _splice(*args) -> int:
    from wmtp.calibrate.splice import main

    return main([str(a) for a in args])


@pytest.mark.parametrize("case", ["missing base", "missing new", "binary new", "no header", "outdir a file",
                                  "short row"])
def test_splice_rows_of_bad_inputs(tmp_path, capsys, case):
    base, new = _splice_inputs(tmp_path)
    out = tmp_path / "out"
    if case == "missing base":
        base = tmp_path / "none.csv"
    elif case == "missing new":
        new = tmp_path / "none.csv"
    elif case == "binary new":
        new.write_bytes(b"\x00\x01\xff")
    elif case == "no header":
        base.write_text("{}\n")
        new.write_text("{}\n")
    elif case == "outdir a file":
        out.write_text("x")
    else:  # a row cut short: IndexError at its kernel column
        new.write_text(f"{HEAD}\n{_row('linear_state', '0.3')}\nlinear_state,wmtp\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert _splice("rows", base, new, "linear_state", out) == 1
    _one_error(capsys)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_splice_rows_into_the_base_folder_is_refused(tmp_path, capsys):
    """OUTDIR/<base's name> is the base itself: its linear_state row was replaced in place, the original lost."""
    base, new = _splice_inputs(tmp_path)
    before = base.read_bytes()
    assert _splice("rows", base, new, "linear_state", tmp_path) == 1
    assert "destroy" in _one_error(capsys)
    assert base.read_bytes() == before


def test_splice_rows_into_another_folder_writes_the_splice(tmp_path, capsys):
    """The control: the base's gemm row kept, its linear_state row replaced by the new one."""
    base, new = _splice_inputs(tmp_path)
    assert _splice("rows", base, new, "linear_state", tmp_path / "out") == 0
    text = gzip.decompress((tmp_path / "out" / "x.raw.csv.gz").read_bytes()).decode()
    assert text.splitlines() == [HEAD, _row("gemm", "0.5"), _row("linear_state", "0.3")]


@pytest.mark.parametrize("doc", [{}, [1], {"components": 5}])
def test_splice_carry_of_a_profile_that_is_no_profile(tmp_path, capsys, doc):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    for shipped, refit in ((bad, PROFILES_DIR / "h200.json"), (PROFILES_DIR / "h200.json", bad)):
        assert _splice("carry", shipped, refit, tmp_path / "out.json") == 1
        _one_error(capsys)
    assert not (tmp_path / "out.json").exists()


def test_splice_carry_of_two_profiles_writes_one(tmp_path, capsys):
    """The control: the shipped profile carried into itself carries nothing and reads back."""
    from wmtp.profile import load_profile

    assert _splice("carry", PROFILES_DIR / "h200.json", PROFILES_DIR / "h200.json", tmp_path / "o.json") == 0
    assert "carried nothing" in capsys.readouterr().out
    assert load_profile(tmp_path / "o.json")["components"].keys() == load_profile(PROFILES_DIR / "h200.json")[
        "components"].keys()


# --- engine points at depths their method does not run -----------------------------------------------------------------

FIRST_POINT = "q35,native,1040000,7,7,step"  # line 2 of the shipped points


@pytest.mark.parametrize("row, what", [
    ("q35,dense,1040000,7,7,step", "dense"),  # dense decoding drafts nothing: its step is at d = 1
    ("q35,dense,1040000,1,3,slope", "dense"),  # and has no slope over d
    ("q35,native,1040000,1,1,step", "d >= 2"),  # a speculative step drafts at least one token
])
def test_engine_points_at_a_depth_their_method_does_not_run(tmp_path, row, what):
    points = _engine_inputs(tmp_path)
    text = points.read_text()
    assert FIRST_POINT in text.splitlines()[1]
    points.write_text(text.replace(FIRST_POINT, row, 1))
    out = tmp_path / "o.json"
    assert_one_error(invoke("engines", "--fit", points, "--out", out), "line 2", what)
    assert not out.exists()


def test_engine_points_of_the_shipped_depths_fit(tmp_path):
    """The control: the shipped points (their dense step at d = 1) fit."""
    points = _engine_inputs(tmp_path)
    r = invoke("engines", "--fit", points, "--out", tmp_path / "o.json")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "o.json").read_text())["per_model"]["q35"]["host_step_ms"] > 0


# --- an all-reduce fit from another GPU -------------------------------------------------------------------------------

def _tp_run(tmp_path: Path, gpu_name: str) -> tuple[Path, Path]:
    """A copy of the shipped H200 profile in cal/, and a tp_bench output folder of a run on `gpu_name`."""
    cal, tp = tmp_path / "cal", tmp_path / "tp"
    cal.mkdir()
    tp.mkdir()
    shutil.copy(PROFILES_DIR / "h200.json", cal / "profile.json")
    (tp / "tp_raw.csv").write_text("kernel,time_ms\nallreduce,0.01\n")
    fit = json.loads((PROFILES_DIR / "h200.json").read_text())["components"]["allreduce_tp2"]
    (tp / "allreduce_tp2.json").write_text(json.dumps(fit))
    (tp / "tp.meta.json").write_text(json.dumps({"gpu_name": gpu_name, "tp": 2}))
    return cal, tp


def test_add_tp_of_a_run_on_another_gpu_is_refused(tmp_path):
    cal, tp = _tp_run(tmp_path, "NVIDIA B200")
    before = (cal / "profile.json").read_bytes()
    assert_one_error(invoke("calibrate", "--add-tp", tp, "--out", cal), "B200", "h200")
    assert (cal / "profile.json").read_bytes() == before


def test_add_tp_of_a_run_on_the_profiles_gpu_merges(tmp_path):
    """The control: a run on the profile's own GPU merges, its provenance kept with the raw data's record."""
    cal, tp = _tp_run(tmp_path, "NVIDIA H200")
    r = invoke("calibrate", "--add-tp", tp, "--out", cal)
    assert r.exit_code == 0, r.output
    rec = json.loads((cal / "profile.json").read_text())["tp_raw_data"]["allreduce_tp2"]
    assert rec["meta"]["gpu_name"] == "NVIDIA H200"
