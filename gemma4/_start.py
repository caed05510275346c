"""The `gemma4` process's first code: Ctrl-C while the command line's modules load (before
:func:`gemma4.guard.run_guarded` takes over) is exit 130 with one line, as it is later, never a
traceback from the middle of an import."""

from __future__ import annotations

import os

# The public module (a few milliseconds: its enums) before the handler is in place; a Ctrl-C
# within those first milliseconds is Python's own KeyboardInterrupt.
import signal


def _interrupted(signum: int, frame: object) -> None:
    os.write(2, b"gemma4: interrupted\n")
    os._exit(130)


def main() -> int:
    """The console script and ``python -m gemma4``: :func:`gemma4.cli.main`, imported with
    Ctrl-C handled (unless SIGINT is ignored, as in a background job: it stays ignored)."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        from gemma4.cli import main as cli_main
    else:
        signal.signal(signal.SIGINT, _interrupted)
        try:
            from gemma4.cli import main as cli_main
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    return cli_main()
