"""The `--help` texts, README's stated defaults, its two commands and ARCHITECTURE.md against the code (session docs24;
the README's example commands are `test_docs24.py`'s).

- A `[default: X]` a help shows is the command's default, and the shared options' defaults (--window, --sink,
  --depth, --task) are `wmtp.defaults`' in every command that has them (a literal 7 stood in three).
- A default a help states in words ("(default: the model row's)", "(default h200)") is checked against what the
  command does when the option is left out; a help stating one that no check here covers fails (`PROSE`).
- The depth range every help states, "(2..64)", is the one the commands accept.
- README's two commands: exactly two, the first installs and runs `wmtp predict --model q122 --ctx 1M`, the second
  is `.ci/run`'s, verbatim.
- ARCHITECTURE.md: every module of the five folders named in its folder's row (or a folder above it named), and
  every name a row gives in backticks is a module of that folder or a name its code defines.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from wmtp import defaults
from cli_checks import assert_one_error
from readme_checks import README, ROOT, click_root, commands, decode_log, fenced, flat, run


def _named_commands() -> dict:
    """'predict', 'measure kernels', ... -> the click command (one tree: each build of it is new objects)."""
    out, todo = {}, [([], click_root())]
    while todo:
        words, c = todo.pop()
        if hasattr(c, "commands"):
            todo += [([*words, n], cc) for n, cc in c.commands.items()]
        else:
            out[" ".join(words)] = c
    return out


COMMANDS = _named_commands()


def _help_rows(words: list[str]) -> dict[str, str]:
    """`wmtp WORDS --help` at 400 columns: option -> its row's text (continuation lines joined)."""
    r = run([*words, "--help"], columns=400)
    assert r.exit_code == 0, r.output
    rows, key = {}, None
    for line in r.output.splitlines():
        cells = line.strip("│ ").split()
        if cells and cells[0].startswith("--"):
            key = cells[0].split(",")[0]
            rows[key] = line
        elif key and line.startswith("│") and cells:
            rows[key] += " " + line
    return {k: flat(v.replace("│", " ")) for k, v in rows.items()}


def _shown(default) -> str:
    return str(default)


SHARED = {"--window": str(defaults.WINDOW), "--sink": str(defaults.SINK), "--depth": str(defaults.DEPTH),
          "--task": defaults.TASK}
OTHER_MEANING = {("accept", "--depth"): "the depth of the file's run, None when it gives its own"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_defaults_are_the_code_defaults(name):
    cmd = COMMANDS[name]
    rows = _help_rows(name.split())
    for p in cmd.params:
        opt = max(p.opts, key=len)
        if not opt.startswith("--") or p.is_flag or getattr(p, "is_bool_flag", False):
            continue
        shown = re.search(r"\[default: ([^\]]+)\]", rows[opt])
        assert (shown is None) == (p.default is None), (name, opt, rows[opt], p.default)
        if shown:
            assert shown.group(1) == _shown(p.default), (name, opt, rows[opt])
        if opt in SHARED and (name, opt) not in OTHER_MEANING:
            assert _shown(p.default) == SHARED[opt], (name, opt, p.default)


def test_shared_options_are_in_the_commands_that_price():
    for name in ("predict", "sweep", "simulate", "report", "calibrate-logs"):
        have = {max(p.opts, key=len) for p in COMMANDS[name].params}
        assert {"--window", "--sink"} <= have, name


# --- defaults stated in words ---------------------------------------------------------------------------------------

def _json(*args) -> dict:
    r = run([*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _model_row_dtypes():
    from wmtp.models import get_model

    for key in ("q35", "q122", "dsv3"):
        doc, row = _json("predict", "--model", key, "--ctx", "64K"), get_model(key)
        assert (doc["weight_dtype"], doc["kv_dtype"]) == (row.weight_dtype, row.kv_dtype), key


def _profile_for_hw():
    assert _json("predict", "--model", "q35")["cost_model"] == "measured profile h200 (shipped)"
    b200 = _json("predict", "--model", "q35", "--hw", "b200")  # no shipped b200 profile: the H200's, scaled
    assert b200["cost_model"] == "measured profile h200 (shipped), scaled to b200 by bandwidth and flop ratios"
    parts = b200["methods"]["native"]["source"].split(": ", 1)[1].split(" + ")  # 'mixed: a + b + ...'
    assert all(s.startswith("scaled from h200") for s in parts), parts


def _kernels_only():
    assert _json("predict", "--model", "q35")["engine_overhead"] == "none (kernels only)"


def _calibrate_hw(tmp_path):
    """--from-raw of a sweep without its sidecar, and --from-logs, without --hw: the GPU is h200."""
    import gzip

    from wmtp.cli.measure_cmds import DEFAULT_HW
    from wmtp.profile import PROFILES_DIR

    assert DEFAULT_HW == "h200"
    raw = tmp_path / "bare" / "raw.csv"
    raw.parent.mkdir()
    raw.write_bytes(gzip.decompress((PROFILES_DIR / "h200.raw.csv.gz").read_bytes()))
    assert run(["calibrate", "--from-raw", raw, "--out", tmp_path / "cal"]).exit_code == 0
    prof = json.loads((tmp_path / "cal/profile.json").read_text())
    assert prof["hardware"] == "h200" and "taken to be measured on h200" in prof["provenance"]["note"]
    for d in (3, 5):
        decode_log(tmp_path / f"d{d}.log", d)
    r = run(["calibrate", "--from-logs", f"{tmp_path}/d3.log:3", "--from-logs", f"{tmp_path}/d5.log:5",
             "--models", "q35", "--out", tmp_path / "fw"])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "fw/framework.json").read_text())["hardware"] == "h200"


def _validate_backends():
    from wmtp.calibrate.validate import moe_backend_for, profile_backend, profile_moe_backend
    from wmtp.profile import PROFILES_DIR, load_profile

    own, fi = load_profile(PROFILES_DIR / "h200.json"), load_profile(PROFILES_DIR / "h200-flashinfer.json")
    assert (profile_backend(own), profile_backend(fi)) == ("wmtp", "flashinfer")
    assert moe_backend_for(own) == "wmtp" and profile_moe_backend(fi) == fi["moe_backend"] == "sglang"


def _engines_profile(tmp_path):
    """engines --fit without --profile: the structure file's kernel profile where one lies beside the points, else
    the shipped one for --hw."""
    import shutil

    from wmtp.engine import engines_dir

    for name in ("sglang-b200-paper.points.csv", "sglang-b200-paper.structure.json"):
        shutil.copy(engines_dir() / name, tmp_path / name)
    shutil.copy(engines_dir() / "sglang-b200-paper.points.csv", tmp_path / "mine.csv")
    with_structure = _json("engines", "--fit", tmp_path / "sglang-b200-paper.points.csv", "--out", tmp_path / "a.json")
    structure = json.loads((tmp_path / "sglang-b200-paper.structure.json").read_text())
    assert with_structure[0]["kernel_profile"] == structure["kernel_profile"] == "h200-flashinfer"
    bare = _json("engines", "--fit", tmp_path / "mine.csv", "--hw", "h200", "--out", tmp_path / "b.json")
    assert bare[0]["kernel_profile"] is None and bare[0]["cost_model"] == "measured profile h200 (shipped)"


def _phases_preset():
    assert _json("simulate", "--model", "q35", "--tokens", "200")["acceptance_source"].startswith("preset q35/")


def _kv_fp8_not_default():
    from wmtp.measure import EXTRA_PARTS, PARTS

    assert "kv-fp8" in EXTRA_PARTS and "kv-fp8" not in PARTS


# (command or '*', option) -> the check of what leaving the option out does
PROSE = {("*", "--kv-dtype"): _model_row_dtypes, ("*", "--weight-dtype"): _model_row_dtypes,
         ("*", "--profile"): _profile_for_hw, ("engines", "--profile"): _engines_profile,
         ("*", "--framework"): _kernels_only,
         ("calibrate", "--hw"): _calibrate_hw, ("validate", "--backend"): _validate_backends,
         ("validate", "--moe-backend"): _validate_backends, ("simulate", "--phases"): _phases_preset,
         ("calibrate", "--parts"): _kv_fp8_not_default}


def _shared_help() -> dict[str, str]:
    """The help of each option `wmtp.cli.common` defines once for every command (PROSE's '*' rows are theirs)."""
    from typing import get_args

    from wmtp.cli import common

    out = {}
    for v in vars(common).values():
        info = get_args(v)[1] if len(get_args(v)) > 1 else None
        if hasattr(info, "param_decls"):  # typer.Option("--x", ...): the first name lands in `default`
            names = [info.default, *info.param_decls] if isinstance(info.default, str) else list(info.param_decls)
            out[max(names, key=len)] = info.help
    return out


def _prose_defaults() -> set[tuple[str, str]]:
    out = set()
    for name, cmd in COMMANDS.items():
        for p in cmd.params:
            if re.search(r"\bdefault\b", getattr(p, "help", None) or "", re.I):
                out.add((name, max(p.opts, key=len)))
    return out


def test_every_default_stated_in_words_has_a_check():
    found = _prose_defaults()
    assert ("predict", "--kv-dtype") in found and ("calibrate", "--hw") in found
    shared = _shared_help()
    assert "--profile" in shared and "--kv-dtype" in shared

    def helps(name, opt):
        return next(p.help for p in COMMANDS[name].params if opt in p.opts)

    unchecked = [k for k in found if k not in PROSE and not (("*", k[1]) in PROSE and helps(*k) == shared.get(k[1]))]
    assert not unchecked, f"a --help states a default no test checks: {unchecked}"
    own = [k for k in PROSE if k[0] != "*"]  # a command's own words: still there, and not the shared option's
    assert all(k in found and helps(*k) != shared.get(k[1]) for k in own), own
    for name, opt in found:
        p = next(p for p in COMMANDS[name].params if opt in p.opts)
        if (name, opt) != ("calibrate", "--parts"):  # its 'default sweep' is the sweep's parts, not the option's
            assert p.default is None, (name, opt, p.default)  # the words say what None becomes


@pytest.mark.parametrize("check", sorted(set(PROSE.values()), key=lambda f: f.__name__), ids=lambda f: f.__name__)
def test_default_stated_in_words_is_what_the_command_does(check, tmp_path):
    check(*([tmp_path] if check in (_calibrate_hw, _engines_profile) else []))


# --- the depth range the helps state -------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [("predict", "--ctx", "4K"), ("sweep", "ctx"), ("simulate", "--tokens", "100",
                                                                                   "--ctx", "4K")])
def test_depth_range_in_help_is_what_commands_accept(args):
    from wmtp.acceptance import MAX_DEPTH

    assert f"(2..{MAX_DEPTH})" in _help_rows([args[0]])["--depth"]
    assert run([*args, "--model", "q35", "--depth", MAX_DEPTH]).exit_code == 0
    assert_one_error(run([*args, "--model", "q35", "--depth", MAX_DEPTH + 1]), f"2..{MAX_DEPTH}")


def test_report_depth_range_in_help_is_what_it_accepts(tmp_path):
    from wmtp.acceptance import MAX_DEPTH

    assert f"(2..{MAX_DEPTH})" in _help_rows(["report"])["--depth"]
    line = assert_one_error(run(["report", "--model", "q35", "--depth", MAX_DEPTH + 1, "--out", tmp_path / "r.html"]))
    assert f"2..{MAX_DEPTH}" in line and not (tmp_path / "r.html").exists()


# --- defaults the README states ------------------------------------------------------------------------------------

def test_readme_predict_defaults_are_the_code_defaults():
    line = next(c for c in fenced("## Usage").splitlines() if c.startswith("wmtp predict --model q122 --ctx 1M "))
    want = (f"# dense / native / window at d={defaults.DEPTH}, W={defaults.WINDOW}, sink={defaults.SINK}, B=1, "
            "on the H200")
    assert line.endswith(want), line
    params = {p.name: p.default for p in COMMANDS["predict"].params}
    assert (params["depth"], params["window"], params["sink"], params["batch"], params["hw"]) == (
        str(defaults.DEPTH), str(defaults.WINDOW), defaults.SINK, 1, "h200")


def test_readme_depth_grid_threshold_and_memory_budget_are_the_code_defaults():
    from wmtp.memory import DEFAULT_MEM_FRACTION, DEFAULT_WORKSPACE_BYTES

    grid = f"d = {defaults.DEPTH_GRID[0]}..{defaults.DEPTH_GRID[-1]}"
    text = flat(README)
    assert f"each method at its own best depth ({grid})" in text and f"over {grid} (min TPOT)" in text
    threshold = next(p.default for p in COMMANDS["sweep"].params if p.name == "threshold")
    assert f"break-even context ({threshold * 100:g} % cost gain)" in text
    assert f"`{DEFAULT_MEM_FRACTION:g} * HBM - weights - {DEFAULT_WORKSPACE_BYTES / 2**30:g} GiB workspace`" in text


# --- the two commands ----------------------------------------------------------------------------------------------

def test_readme_gives_two_commands_and_ci_runs_the_second_verbatim():
    two = commands(fenced("## Two commands"))
    assert len(two) == 2, two
    install, tests = two
    assert re.fullmatch(r"python3 -m venv \.venv && \.venv/bin/pip install -q \. && "
                        r"\.venv/bin/wmtp predict --model q122 --ctx 1M", install), install
    assert tests.startswith("python3 -m venv .venv && .venv/bin/pip install ") and tests.endswith(
        " && .venv/bin/python -m pytest -q"), tests
    ci = (ROOT / ".ci/run").read_text()
    head = "# --- the README's second command, verbatim ---\n"
    verbatim = ci[ci.index(head) + len(head):ci.index("\n# ---\n", ci.index(head))]
    assert verbatim == tests
    assert "`.ci/run` runs the second command verbatim" in flat(README)


# --- ARCHITECTURE.md ----------------------------------------------------------------------------------------------

ARCH = (ROOT / "ARCHITECTURE.md").read_text()


def _rows() -> dict[str, str]:
    """folder -> the 'owns' cell of its row in the table."""
    out = {}
    for line in ARCH.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`[a-z_]+/`", cells[0]):
            out[cells[0].strip("`")] = cells[2]
    return out


def _modules(folder: str) -> list[Path]:
    return [p for p in (ROOT / folder).rglob("*.py") if "results" not in p.parts and p.name != "__init__.py"]


def test_architecture_names_every_module():
    rows = _rows()
    assert set(rows) == {"wmtp_model/", "measure/", "calibrate/", "reports/", "cli/"}
    for folder, text in rows.items():
        named = set(re.findall(r"`([^`]+)`", text))
        for p in _modules(folder):
            above = [f"{q.name}/" for q in p.relative_to(ROOT / folder).parents if q.name]
            assert p.stem in named or any(a in named for a in above), f"ARCHITECTURE.md's {folder} row: no {p.stem}"


def test_what_architecture_names_exists():
    for folder, text in _rows().items():
        stems = {p.stem for p in _modules(folder)}
        code = "\n".join(p.read_text() for p in _modules(folder))
        for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", text):
            assert name in stems or re.search(rf"\b{name}\b", code), f"ARCHITECTURE.md's {folder} row: {name}?"
        for sub in re.findall(r"`([a-z_]+)/`", text):  # a folder of the row's (`profiles/`: of its data/)
            assert any(d.is_dir() for d in (ROOT / folder).rglob(sub)), f"ARCHITECTURE.md's {folder} row: {sub}/?"
