"""The `wmtp` command line (`wmtp.cli.main`).

Ctrl-C while the command line is still importing (the first few tenths of a second) would print a
KeyboardInterrupt traceback from deep inside an import; until `wmtp.cli.main` has finished importing, it is
one `error: interrupted` line and exit code 130 instead (nothing has been written yet). `wmtp.cli.main` puts
Python's own handler back once its imports are done.
"""

import os
import signal
import sys


def interrupted_while_starting(signum, frame):  # noqa: ARG001 - a signal handler's signature
    sys.stderr.write("error: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # only where Ctrl-C would raise; main thread
    signal.signal(signal.SIGINT, interrupted_while_starting)
