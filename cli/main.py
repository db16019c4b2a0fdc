"""The `wmtp` command line: the app and its commands, registered from one module per area.

Commands live in `predict_cmds` (predict, models, hardware, engines), `analysis` (sweep, simulate),
`acceptance_cmds` (logs, accept, calibrate-logs), `report`, and `measure_cmds` (measure kernels,
calibrate, validate). Options and the error mapping they share are in `wmtp.cli.common`.
A usage error (a bad option value, a missing argument) is one `error:` line and exit code 1, like
every other bad input.
"""

from __future__ import annotations

import errno
import os
import signal
import sys

import typer
from typer.core import TyperGroup

try:  # typer >= 0.28 vendors click as typer._click; older typer uses click itself
    from typer import _click as click
except ImportError:  # pragma: no cover - depends on the installed typer
    import click

from wmtp.cli import interrupted_while_starting
from wmtp.units import printable
from wmtp.cli import acceptance_cmds, analysis, measure_cmds, predict_cmds, report

_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
_EXITS = tuple({typer.Exit, getattr(click.exceptions, "Exit", typer.Exit)})
_ABORTS = tuple({typer.Abort, getattr(click.exceptions, "Abort", typer.Abort)})


class StdoutError(OSError):
    """Standard output cannot take the result (closed, a full device, a closed pipe)."""


class _GuardedStdout:
    """sys.stdout whose write failures are a `StdoutError` the group reports in one line, not a traceback deep in
    click or rich; a closed stdout (`>&-`: sys.stdout is None) fails at the first write instead of printing nothing
    and exiting 0."""

    def __init__(self, stream):
        self._stream = stream

    def _call(self, name, *args):
        if self._stream is None:
            raise StdoutError(errno.EBADF, "standard output is closed")
        try:
            return getattr(self._stream, name)(*args)
        except OSError as e:
            raise StdoutError(e.errno, e.strerror or str(e)) from None

    def write(self, text):
        return self._call("write", text)

    def flush(self):
        return self._call("flush")

    def __getattr__(self, name):
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)


def _quiet_stdout() -> None:
    """After a stdout failure: point fd 1 at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
    except OSError:
        pass
    sys.stdout = open(os.devnull, "w")


MAX_TERMINAL = 10_000  # columns or lines: more than any terminal has


def _sane_terminal_env() -> None:
    """$COLUMNS / $LINES (rich) and $TERMINAL_WIDTH (typer's help) it cannot use are dropped, so the terminal's own
    size (else 80 x 25) counts: 0 printed nothing and exited 0, '²' or 5000 digits were a ValueError traceback,
    'abc' one in --help; a huge one is capped (rich pads help lines to it: 99999999 took minutes and gigabytes)."""
    for name in ("COLUMNS", "LINES", "TERMINAL_WIDTH"):
        text = os.environ.get(name)
        if text is None or (name != "TERMINAL_WIDTH" and not text.isdigit()):  # rich ignores what is not digits
            continue
        digits = text.strip().lstrip("0")
        if not (digits.isascii() and digits.isdigit()):  # 0, '²', 'abc', '-5'
            del os.environ[name]
        else:
            os.environ[name] = str(min(int(digits) if len(digits) <= 6 else MAX_TERMINAL, MAX_TERMINAL))


class _Group(TyperGroup):
    """Typer's group with click's usage errors reported as one `error:` line, exit code 1; an interrupt (Ctrl-C)
    is one `error: interrupted` line and exit code 130; a stdout that cannot take the result is one line and exit
    code 1 (a closed pipe, as in `wmtp ... | head -1`, exits 1 quietly)."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        _sane_terminal_env()
        if not isinstance(sys.stdout, _GuardedStdout):
            if hasattr(sys.stdout, "reconfigure"):  # a name an ASCII-only stdout cannot encode is escaped, not a crash
                sys.stdout.reconfigure(errors="backslashreplace")
            sys.stdout = _GuardedStdout(sys.stdout)
        try:
            rv = super().main(*args, **kwargs)
            sys.stdout.flush()
        except StdoutError as e:
            _quiet_stdout()
            if e.errno != errno.EPIPE:
                typer.echo(f"error: cannot write the result to standard output: {e.strerror}", err=True)
            sys.exit(1)
        except _EXITS as e:
            sys.exit(e.exit_code)
        except _ABORTS:
            typer.echo("error: interrupted", err=True)
            sys.exit(_INTERRUPTED)
        except KeyboardInterrupt:
            typer.echo("error: interrupted", err=True)
            sys.exit(_INTERRUPTED)
        except click.exceptions.ClickException as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # `wmtp` alone: the help, as before
                e.show()
                sys.exit(2)
            typer.echo(f"error: {printable(e.format_message())}", err=True)
            sys.exit(1)
        if rv == _INTERRUPTED:  # typer turns Ctrl-C into this exit code, silently (commands themselves return None)
            typer.echo("error: interrupted", err=True)
        sys.exit(rv if isinstance(rv, int) else 0)

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        _refuse_repeated_options(ctx, name, cmd, rest)
        return name, cmd, rest


def _refuse_repeated_options(ctx, name, cmd, args) -> None:
    """An option that takes one value, given twice (`--ctx 64K --ctx 1M`): click keeps the last one and drops the
    other silently; here it is one error. Options that take a list (--framework, --histogram) repeat freely."""
    if cmd is None:
        return
    sub = click.Context(cmd, parent=ctx, info_name=name)
    if hasattr(cmd, "commands"):  # a group (`measure`): the options of the command it runs
        if args and not args[0].startswith("-"):
            try:
                name, cmd, args = cmd.resolve_command(sub, list(args))
            except click.exceptions.ClickException:
                return  # the real parse reports it
            _refuse_repeated_options(sub, name, cmd, args)
        return
    try:
        _, _, order = cmd.make_parser(sub).parse_args(args=list(args))
    except click.exceptions.ClickException:
        return  # the real parse reports it
    seen: dict[str, int] = {}
    for param in order:
        if (getattr(param, "param_type_name", "") == "option" and not param.multiple and not getattr(param, "count", 0)
                and not param.is_eager):  # --help twice is still help
            seen[param.name] = seen.get(param.name, 0) + 1
            if seen[param.name] == 2:
                opts = "/".join(sorted(param.opts, key=len, reverse=True)[:1] + list(param.secondary_opts))
                raise click.exceptions.UsageError(f"{opts} is given more than once; give it once (only the last "
                                                  "value would count)")


app = typer.Typer(cls=_Group, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Windowed-MTP cost model: predict, measure and calibrate speculative decoding at long context.")
for module in (predict_cmds, measure_cmds, acceptance_cmds, analysis, report):
    module.register(app)
if signal.getsignal(signal.SIGINT) is interrupted_while_starting:  # imports done: Ctrl-C raises KeyboardInterrupt
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _terminated(signum, frame):
    """SIGTERM (`timeout`, a scheduler, `kill`): one line, then exit 143 through the finally blocks, so temporary files
    (a spooled pipe) are removed, as for Ctrl-C."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    print("error: terminated", file=sys.stderr)
    raise SystemExit(128 + signal.SIGTERM)


def main() -> None:  # console-script entry point
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
