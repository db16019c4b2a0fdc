"""The docs against the code (session docs24).

- Every example command of README's Usage block runs on a machine without a GPU, in one folder that holds stand-ins
  for the files the commands name (`sglang.log`, `cal/profile.json`, ...: made here, or copied from the shipped data,
  as the README's earlier commands would make them), or fails there with the error the README documents ("`wmtp
  measure` on a machine without a GPU — gets one `error: ...` line and exit code 1"). On a machine with a GPU the
  GPU commands are skipped (they would run minutes of measurements; the lent-GPU runs are their test). Every command
  of the block has a row in `CASES`: a new example without one fails.
- Every command and option the README names exists with that spelling; the paths and modules it names exist.

The `--help` defaults, README's two commands and ARCHITECTURE.md are `test_docs24_help.py`'s.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from readme_checks import README, ROOT, all_commands, click_root, commands, decode_log, fenced, flat, run

DATA = ROOT / "wmtp_model" / "data"
NO_GPU = r"^error: .*(no CUDA GPU is visible|needs torch and triton)"


def cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


USAGE = commands(fenced("## Usage"))


# --- the example commands, run -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    how: str  # cli: in-process, must succeed; gpu: in-process, GPU only; module / module-gpu: `python -m`, a process
    expect: tuple[str, ...] = ()  # fragments of the output (whitespace folded) a success must show
    note: str = ""  # why a command is run otherwise than as written


RAW = "wmtp_model/data/profiles/h200.raw.csv.gz"
TP = "tp_bench starts one rank per GPU through torchrun; without a GPU each rank fails alike, so the module runs alone"
CASES = {
    "wmtp predict --model q122 --ctx 1M": Case("cli", ("| d 7 | W 4032 + sink 64 | B 1 |", "(h200)")),
    "wmtp predict --model q35 --ctx 256K --depth auto": Case("cli", ("best depth (d = 2..10",)),
    "wmtp predict --model q35 --ctx 1M --accept-length 4.2:4.4 --batch 4 --hw b200 --kv-dtype fp8":
        Case("cli", ("| B 4 |", "KV fp8", "4.20 flag", "4.40 flag")),
    "wmtp predict --config path/to/config.json --ctx 512K --json": Case("cli", ('"ctx": 524288',)),
    "wmtp predict --model q35 --speed-of-light": Case("cli", ("costs: speed-of-light",)),
    "wmtp predict --model q35 --ctx 1M --tp 2": Case("cli", ("all-reduce",)),
    "wmtp sweep batch --model q122 --tp 2": Case("cli", ("TP 2 (tok/s per GPU)", "Pareto-optimal")),
    "wmtp models": Case("cli", ("q122",)),
    "wmtp hardware": Case("cli", ("h200", "b200")),
    "wmtp predict --model q35 --task cwe": Case("cli", ("q35/cwe",)),
    "wmtp sweep ctx --model q35": Case("cli", ("break-even context: native's step is at least 5 % longer",)),
    "wmtp sweep depth --model q35 --csv out.csv": Case("cli", ("best depth (min TPOT)", "wrote out.csv")),
    "wmtp sweep window --model q35 --csv out.csv": Case("cli", ("TPOT-optimal window", "wrote out.csv")),
    "wmtp sweep batch --model q35 --csv out.csv": Case("cli", ("Pareto-optimal", "wrote out.csv")),
    "wmtp sweep window --model q122 --al-window 1K:3.9,4032:4.74": Case("cli", ("window: --al-window points",)),
    "wmtp simulate --model q35 --depth adaptive --phases 0.9:2000,0.4:2000":
        Case("cli", ("policy adaptive", "95 % CI")),
    "wmtp report --model q122 --ctx 1M --out report.html": Case("cli", ("wrote report.html",)),
    "wmtp logs sglang.log": Case("cli", ("TPOT: 35.16 ms",)),
    "kubectl logs sglang-0 | wmtp logs -": Case(
        "module", ("TPOT: 35.16 ms",), "sglang.log piped into `python -m wmtp.cli.main logs -`: '-' is read through "
                                       "/dev/stdin, which CliRunner's input does not reach"),
    "wmtp accept meta_info.jsonl": Case("cli", ("AL 2.465 at d=6", "alpha_j", "0.598-0.851", "AL by depth")),
    "wmtp accept native.json window.json --compare": Case("cli", ("native vs window, position by position",)),
    "wmtp calibrate --from-logs d3.log:3 --from-logs d5.log:5 --from-logs d7.log:7 --models q35 --ctx 1M --out fw/":
        Case("cli", ("over 3 runs", "wrote fw/framework.json")),
    "wmtp predict --model q35 --framework fw/framework.json": Case("cli", ("engine overhead: framework profile",)),
    "wmtp engines": Case("cli", ("sglang-b200-paper",)),
    "wmtp predict --model q122 --hw b200 --framework sglang-b200-paper":
        Case("cli", ("engine preset sglang-b200-paper",)),
    "wmtp sweep depth --model q35 --hw b200 --task cwe --framework sglang-b200-paper":
        Case("cli", ("engine overhead: engine preset sglang-b200-paper",)),
    "wmtp engines --fit my-steps.csv --hw h200 --out my-engine.json": Case("cli", ("(h200, over",)),
    "wmtp measure kernels --model q35 --ctx 64K,256K,1M --batch 1,4,16 --out results/": Case("gpu"),
    "wmtp calibrate --out cal/": Case("gpu"),
    "wmtp calibrate --backend flashinfer --out cal-fi/": Case("gpu"),
    "python3 -m wmtp.measure.scripts.backends_bench --out bench/": Case("module-gpu"),
    "python3 -m wmtp.measure.scripts.quant_bench --out qbench/": Case("module-gpu"),
    "wmtp calibrate --out cal/ --resume": Case("gpu"),
    "wmtp validate --profile cal/profile.json --out cal/": Case("gpu"),
    "wmtp validate --profile cal/profile.json --kv-dtype fp8 --out cal-fp8/": Case("gpu"),
    "wmtp predict --model q35 --profile cal/profile.json": Case("cli", ("measured profile h200 (cal/profile.json)",)),
    "wmtp calibrate --from-raw cal/raw.csv --out cal2/": Case("cli", ("wrote cal2/profile.json",)),
    f"wmtp calibrate --parts attention,loop --base-raw {RAW} --out cal3/": Case("gpu"),
    f"wmtp calibrate --parts kv-fp8 --base-raw {RAW} --out cal6/": Case("gpu"),
    "python -m wmtp.calibrate.splice rows h200.raw.csv.gz new_rows.csv.gz linear_state cal4/":
        Case("module", ("cal4/h200.raw.csv.gz: 10800 linear_state rows in place of 10800",)),
    "python -m wmtp.calibrate.splice carry h200.json cal5/profile.json out.json": Case("module", ("allreduce_tp2",)),
    "torchrun --nproc-per-node 2 -m wmtp.measure.tp_bench --out tp/ --models q35": Case("module-gpu", note=TP),
    "wmtp calibrate --add-tp tp/ --out cal/": Case("cli", ("added allreduce_tp2 to cal/profile.json",)),
}


MIMO_7B = {"architectures": ["MiMoForCausalLM"], "model_type": "mimo", "hidden_size": 4096, "intermediate_size": 11008,
           "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 151680,
           "num_nextn_predict_layers": 1, "tie_word_embeddings": False}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """The folder the examples run in, with the files they name as the README's other commands (or a user) make
    them: logs and histograms, a config.json, fw/ (`calibrate-logs`), cal/ (a finished `wmtp calibrate --out cal/`:
    the shipped H200 sweep, refitted), tp/ (tp_bench's files of the shipped TP2 run), the splice inputs."""
    w = tmp_path_factory.mktemp("readme")
    prof = DATA / "profiles"
    (w / "path/to").mkdir(parents=True)
    (w / "path/to/config.json").write_text(json.dumps(MIMO_7B))
    shutil.copy(ROOT / "tests/data/sglang_decode.log", w / "sglang.log")
    real = (ROOT / "tests/data/real/sglang-meta-info-dspark-histogram-33518.json").read_text().splitlines()[1:]
    (w / "meta_info.jsonl").write_text(flat(" ".join(real)) + "\n")  # a request's meta_info with its histogram
    (w / "native.json").write_text("[120, 90, 70, 55, 40, 30, 95]")  # H[n], n = 0..6 accepted: d = 7
    (w / "window.json").write_text("[125, 92, 71, 54, 40, 29, 89]")
    for d in (3, 5, 7):
        decode_log(w / f"d{d}.log", d)
    shutil.copy(DATA / "engines/sglang-b200-paper.points.csv", w / "my-steps.csv")
    (w / "wmtp_model/data/profiles").mkdir(parents=True)
    (w / RAW).symlink_to(prof / "h200.raw.csv.gz")
    for name in ("h200.raw.csv.gz", "h200.raw.meta.json", "h200.json", "h200.md"):
        shutil.copy(prof / name, w / name)
    shutil.copy(ROOT / "measure/results/h200-s15/run1/state_raw.csv.gz", w / "new_rows.csv.gz")
    (w / "cal").mkdir()
    (w / "cal/raw.csv").write_bytes(gzip.decompress((prof / "h200.raw.csv.gz").read_bytes()))
    meta = json.loads((prof / "h200.raw.meta.json").read_text())
    meta.update(command="wmtp calibrate", models=["q35", "q122", "nem"], backend="wmtp", moe_impl="wmtp",
                parts=["attention", "components", "loop"], status="complete")
    (w / "cal/raw.meta.json").write_text(json.dumps(meta))
    (w / "cal/raw.steps-done").write_text("ceilings\n")
    (w / "tp").mkdir()
    (w / "tp/tp_raw.csv").write_bytes(gzip.decompress((prof / "h200.tp2.raw.csv.gz").read_bytes()))
    shutil.copy(prof / "h200.tp2.raw.meta.json", w / "tp/tp.meta.json")
    fit = json.loads((prof / "h200.json").read_text())["components"]["allreduce_tp2"]
    (w / "tp/allreduce_tp2.json").write_text(json.dumps(fit))
    for args in (["calibrate", "--from-raw", w / "cal/raw.csv", "--out", w / "cal"],
                 ["calibrate-logs", *[f"{w}/d{d}.log:{d}" for d in (3, 5, 7)], "--model", "q35", "--out",
                  w / "fw/framework.json"]):
        r = run(args)
        assert r.exit_code == 0, r.output
    (w / "cal5").mkdir()
    for name in ("profile.json", "profile.md"):
        shutil.copy(w / "cal" / name, w / "cal5" / name)
    return w


def test_every_usage_command_has_a_case():
    assert set(USAGE) == set(CASES), (sorted(set(USAGE) - set(CASES)), sorted(set(CASES) - set(USAGE)))


# a user's shell: without the Triton interpreter conftest turns on where no GPU is (quant_bench runs its CPU smoke
# test under it, as its error says)
USER_ENV = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"COLUMNS": "100"}


def _module_argv(cmd: str) -> tuple[list[str], bytes | None]:
    if cmd.startswith("kubectl"):  # the producer is the log: the reader is `wmtp logs -`
        return [sys.executable, "-m", "wmtp.cli.main", *shlex.split(cmd.split(" | ")[1])[1:]], b"sglang.log"
    words = shlex.split(cmd)
    return [sys.executable, *words[words.index("-m"):]], None


@pytest.mark.parametrize("cmd", USAGE)
def test_usage_command_runs_or_fails_as_documented(cmd, workdir, monkeypatch):
    case = CASES[cmd]
    monkeypatch.chdir(workdir)
    if case.how in ("gpu", "module-gpu") and cuda():
        pytest.skip("a GPU is visible: the command would run its measurements (minutes); the lent-GPU runs test it")
    if case.how.startswith("module"):
        if case.how == "module-gpu":
            pytest.importorskip("torch")
        argv, stdin = _module_argv(cmd)
        p = subprocess.run(argv, input=(workdir / stdin.decode()).read_bytes() if stdin else None,
                           capture_output=True, timeout=600, env=USER_ENV)
        code, out = p.returncode, (p.stdout + p.stderr).decode()
    else:
        r = run(shlex.split(cmd)[1:])
        code, out = r.exit_code, r.output
    assert "Traceback" not in out, out
    if case.how in ("gpu", "module-gpu"):
        lines = [ln for ln in out.splitlines() if ln.strip()]
        assert code == 1 and len(lines) == 1 and re.match(NO_GPU, lines[0]), out
        return
    assert code == 0, out
    for fragment in case.expect:
        assert fragment in flat(out), (fragment, out)


# --- names the README uses -----------------------------------------------------------------------------------------

def _resolve(words: list[str]):
    """The click command `wmtp WORDS...` names, and the words after it."""
    cmd = click_root()
    while words and hasattr(cmd, "commands") and words[0] in cmd.commands:
        cmd, words = cmd.commands[words[0]], words[1:]
    return cmd, words


def _options(cmd) -> set[str]:
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}


def _spans() -> list[str]:
    """README's inline code spans (fenced blocks left out), whitespace folded."""
    body = re.sub(r"```.*?```", "", README, flags=re.S)
    return [flat(s) for s in re.findall(r"`([^`]+)`", body)]


COMMAND_NAMES = {"predict", "sweep", "simulate", "report", "calibrate", "validate", "logs", "accept", "engines",
                 "measure", "models", "hardware", "calibrate-logs"}
OTHER_TOOLS = {"--mamba-full-memory-ratio": "SGLang's server option, which the engine preset carries"}


def _readme_wmtp_commands() -> list[str]:
    inline = [s.removeprefix("wmtp ") for s in _spans()
              if s.startswith("wmtp ") or s.split(" ")[0] in COMMAND_NAMES and " --" in s]
    usage = [c.removeprefix("wmtp ") for c in USAGE if c.startswith("wmtp ")]
    return usage + inline


def test_readme_commands_and_their_options_exist():
    assert len(_readme_wmtp_commands()) > 40  # the extraction finds them
    for text in _readme_wmtp_commands():
        cmd, rest = _resolve(text.split())
        assert not hasattr(cmd, "commands") or not rest, f"`wmtp {text}`: no such command"
        unknown = [w for w in rest if w.startswith("--") and w.split("=")[0] not in _options(cmd)]
        assert not unknown, f"`wmtp {text}`: {unknown} are not options of `wmtp {cmd.name}`"


def test_readme_bare_options_are_options_of_a_command():
    every = set().union(*(_options(c) for c in all_commands()))
    bare = {s.split()[0] for s in _spans() if s.startswith("--")}
    assert "--accept-length" in bare and "--json" in bare
    assert bare - every <= set(OTHER_TOOLS), bare - every - set(OTHER_TOOLS)


def test_framework_is_an_option_where_the_readme_says():
    """README: '`--framework NAME|FILE` on predict, sweep, simulate and report'."""
    assert "(`--framework NAME|FILE` on predict, sweep, simulate and report;" in flat(README)
    for name in ("predict", "sweep", "simulate", "report"):
        assert "--framework" in _options(_resolve([name])[0]), name


def _path_like(s: str) -> bool:
    return "/" in s and re.fullmatch(r"[\w.\-]+(/[\w.\-]+)*/?", s) is not None and not s.startswith("..")


def test_readme_paths_exist():
    """Paths outside a command (`calibrate/validation/h200.md`); a folder table's cells are relative to the folder
    (`engines/sglang-facts.md` under calibrate/). `../shared/...` lies outside the repository."""
    paths = [s for s in _spans() if _path_like(s)]
    assert "calibrate/validation/h200.md" in paths
    folders = [ROOT] + [ROOT / d for d in ("wmtp_model", "measure", "calibrate", "reports", "cli")]
    missing = [p for p in paths if not any((f / p).exists() for f in folders)]
    assert not missing, missing


def test_readme_modules_exist():
    from importlib.util import find_spec

    mods = [s.removeprefix("python -m ") for s in _spans() if re.fullmatch(r"(python3? -m )?[a-z_]+(\.[a-z_0-9]+)+", s)
            and not re.search(r"\.(json|md|csv|toml)$", s)]
    mods += [c.split(" -m ")[1].split()[0] for c in USAGE if " -m " in c]
    assert "wmtp.reports.paper_check" in mods and "wmtp.calibrate.splice" in mods
    for m in mods:
        name = m if m.startswith("wmtp") else f"wmtp.{m}"
        assert find_spec(name) is not None, m
    for m in [s.removeprefix("python -m ") for s in _spans() if s.startswith("python -m ")] + \
             [c.split(" -m ")[1].split()[0] for c in USAGE if " -m " in c]:
        assert 'if __name__ == "__main__":' in Path(find_spec(m).origin).read_text(), f"{m} runs as nothing"


def test_readme_corpus_count_is_the_corpus():
    """README: 'a corpus of N real excerpts in `tests/data/real/`' (the rows not BUILT from a format string)."""
    rows = (ROOT / "tests/data/real/EXPECTED.tsv").read_text().splitlines()[1:]
    real = [r for r in rows if r.strip() and not r.split("\t")[5].startswith("BUILT")]
    assert f"a corpus of {len(real)} real excerpts in `tests/data/real/`" in flat(README)

