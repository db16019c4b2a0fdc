"""The `wmtp` command line: the app and its commands, registered from one module per area.

Commands live in `predict_cmds` (predict, models, hardware, engines), `analysis` (sweep, simulate),
`acceptance_cmds` (logs, accept, calibrate-logs), `report`, and `measure_cmds` (measure kernels,
calibrate, validate). Options and the error mapping they share are in `wmtp.cli.common`.
A usage error (a bad option value, a missing argument) is one `error:` line and exit code 1, like
every other bad input.
"""

from __future__ import annotations

import sys

import typer
from typer.core import TyperGroup

try:  # typer >= 0.28 vendors click as typer._click; older typer uses click itself
    from typer import _click as click
except ImportError:  # pragma: no cover - depends on the installed typer
    import click

from wmtp.cli import acceptance_cmds, analysis, measure_cmds, predict_cmds, report

_EXITS = tuple({typer.Exit, getattr(click.exceptions, "Exit", typer.Exit)})
_ABORTS = tuple({typer.Abort, getattr(click.exceptions, "Abort", typer.Abort)})


class _Group(TyperGroup):
    """Typer's group with click's usage errors reported as one `error:` line, exit code 1."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except _EXITS as e:
            sys.exit(e.exit_code)
        except _ABORTS:
            typer.echo("error: interrupted", err=True)
            sys.exit(1)
        except click.exceptions.ClickException as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # `wmtp` alone: the help, as before
                e.show()
                sys.exit(2)
            typer.echo(f"error: {e.format_message()}", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(cls=_Group, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Windowed-MTP cost model: predict, measure and calibrate speculative decoding at long context.")
for module in (predict_cmds, measure_cmds, acceptance_cmds, analysis, report):
    module.register(app)


def main() -> None:  # console-script entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
