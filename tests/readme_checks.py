"""README and --help helpers the docs tests share (`test_docs24*.py`): the README's text and fenced blocks, its
commands, `wmtp` run in-process, and the click commands behind the typer app."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from wmtp.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def run(args, columns: int = 100):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)})


def flat(text: str) -> str:
    return " ".join(text.split())


def fenced(heading: str) -> str:
    """The first ```bash block after `heading`."""
    start = README.index("```bash\n", README.index(heading)) + len("```bash\n")
    return README[start:README.index("```", start)]


def commands(block: str) -> list[str]:
    """The command lines of a block, comments cut; `sweep depth|window|batch` is three commands."""
    out = []
    for line in block.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cmd = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
        alt = next((t for t in cmd.split() if "|" in t and t != "|"), None)
        out += [cmd.replace(alt, a) for a in alt.split("|")] if alt else [cmd]
    return out


def click_root():
    import typer

    return typer.main.get_command(app)


def all_commands() -> list:
    """Every leaf command of `wmtp` (the `measure` group's too)."""
    out, todo = [], [click_root()]
    while todo:
        c = todo.pop()
        if hasattr(c, "commands"):
            todo += list(c.commands.values())
        else:
            out.append(c)
    return out


def decode_log(path: Path, d: int) -> None:
    """A run at depth d: 40 SGLang decode lines at batch 1, AL 3, step 2.5 ms x gamma + 30 ms."""
    thr = 3.0 / ((2.5 * (d - 1) + 30.0) / 1e3)
    path.write_text("".join(f"[2026-01-01 10:00:{i:02d}] Decode batch. #running-req: 1, #token: 10, token usage: 0.1, "
                            f"accept len: 3.00, cuda graph: True, gen throughput (token/s): {thr:.3f}, "
                            "#queue-req: 0\n" for i in range(40)))
