"""`gemma4`: one command for everything a user runs. Each subcommand hands its arguments to a
module's ``main(argv) -> int``; :data:`COMMANDS` is the whole table."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import difflib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from gemma4.guard import EXIT_INTERRUPTED, run_guarded, shown


@dataclass(frozen=True)
class Command:
    name: str
    #: Module with ``main(argv: Sequence[str] | None) -> int``.
    module: str
    summary: str

    @property
    def legacy(self) -> str:
        """The equivalent ``python -m`` form (shown in the help)."""
        return f"python -m {self.module.removesuffix('.cli')}"


COMMANDS: tuple[Command, ...] = (
    Command(
        "preview",
        "gemma4.preview",
        "what `pulumi up -s STACK` would declare, offline: resources, vllm command line, "
        "policy verdicts, capacity plan, cost (exit 1 blocks a deploy)",
    ),
    Command(
        "plan",
        "gemma4.plan_cli",
        "a stack's vLLM memory budget, KV cache, cost and predicted latency/throughput; "
        "search (cheapest stack for an SLO), calibrate (fit the model to a run)",
    ),
    Command(
        "health",
        "healthchecks.cli",
        "check a deployed endpoint: readiness, models, chat, metrics",
    ),
    Command(
        "bench",
        "bench.cli",
        "benchmark an endpoint (run), compare runs (compare), gate a run on SLOs (gate)",
    ),
    Command(
        "promote",
        "gemma4.promote_cli",
        "carry what one stack verified (image digest, revisions) to the next",
    ),
    Command(
        "mcp",
        "mcp_server.cli",
        "an MCP server (stdio or streamable HTTP) for operating the deployments from an agent CLI",
    ),
)

BY_NAME: dict[str, Command] = {c.name: c for c in COMMANDS}


def version() -> str:
    """The installed package's version (its metadata, so it is the one pip installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version("gemma4-vllm-gcp")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed; run scripts/setup)"


def subcommand_parser(command: Command) -> argparse.ArgumentParser:
    """The parser of one subcommand (its module's ``build_parser()``), for help and tests."""
    module = importlib.import_module(command.module)
    return cast(argparse.ArgumentParser, module.build_parser())


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser (for help and for tests); subcommands parse their own options."""
    parser = argparse.ArgumentParser(
        prog="gemma4",
        description="Serve Gemma 4 12B with vLLM on Google Cloud: preview, plan, check, "
        "benchmark and promote stacks. `gemma4 COMMAND --help` shows a command's options.",
        epilog="Each command is also available as its `python -m` form: "
        + "; ".join(f"{c.name}: {c.legacy}" for c in COMMANDS)
        + ".",
    )
    parser.add_argument(
        "--version", action="version", version=f"gemma4 {version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub.add_parser(command.name, help=command.summary, add_help=False)
    return parser


def run(command: Command, argv: Sequence[str]) -> int:
    """Call the command's ``main(argv)``; argparse's exits become the return value."""
    module = importlib.import_module(command.module)
    entry = cast(Callable[[list[str]], int | None], module.main)
    try:
        code = entry(list(argv))
    except SystemExit as exc:  # --help, a usage error
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    return int(code or 0)


def dispatch(args: list[str]) -> int:
    """Run the command ``args`` names (``args[0]``) with the rest; the exit status."""
    parser = build_parser()
    if args[:1] == ["--version"]:
        print(f"gemma4 {version()}")
        return 0
    if not args or args[0] in ("-h", "--help"):
        (parser.print_help if args else parser.print_usage)(sys.stdout if args else sys.stderr)
        if not args:
            print("gemma4: error: a command is required: " + ", ".join(BY_NAME), file=sys.stderr)
        return 0 if args else 2
    command = BY_NAME.get(args[0])
    if command is None:
        # Capitals or blanks (`PREVIEW`, `' plan'`) are slips as a misspelling is.
        typed = args[0].strip().lower()
        close = [typed] if typed in BY_NAME else []
        close = close or difflib.get_close_matches(typed, list(BY_NAME), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        parser.print_usage(sys.stderr)
        print(
            f"gemma4: error: unknown command {shown(args[0])}{hint} "
            f"(commands: {', '.join(BY_NAME)})",
            file=sys.stderr,
        )
        return 2
    meant = _stack_as_operand(command.name, args[1:])
    if meant:
        print(f"gemma4 {command.name}: error: unexpected {shown(args[1])}{meant}", file=sys.stderr)
        return 2
    return run(command, args[1:])


#: The commands that take a stack as ``-s STACK`` and no operand: a bare word first is a slip.
_STACK_ONLY = ("preview", "health", "mcp")


def _stack_as_operand(name: str, rest: list[str]) -> str:
    """``; did you mean -s STACK?`` when ``rest`` starts with a bare word that names one of the
    project's stacks (in any case, `_` for `-`) and the command takes no operand; else ''."""
    if name not in _STACK_ONLY or not rest or rest[0].startswith("-") or len(rest[0]) > 100:
        return ""
    from serving.config.project import missing_stack_file_meant  # only on this path

    return missing_stack_file_meant(Path(rest[0]))


def process_main(args: list[str]) -> int:
    """The `gemma4` process: :func:`dispatch` inside :func:`gemma4.guard.run_guarded`, the one
    place that handles unwritable output, Ctrl-C, undecodable input and bounded messages for
    every command (the ``python -m`` forms come through here too)."""
    prog = f"gemma4 {args[0]}" if args and args[0] in BY_NAME else "gemma4"
    code = run_guarded(prog, lambda: dispatch(args), args)
    if code == EXIT_INTERRUPTED:
        # CPython remembers a KeyboardInterrupt that crossed some C code (an extension module
        # being initialised) and then ends the process by SIGINT whatever the exit status:
        # exit 130 as said, the exit handlers run first.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        with contextlib.suppress(Exception):
            atexit._run_exitfuncs()
        os._exit(EXIT_INTERRUPTED)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """The console script (``argv`` None: this process, guarded), or one command run in this
    process with ``argv`` (tests): Ctrl-C is 130 there too."""
    if argv is None:
        return process_main(sys.argv[1:])
    args = list(argv)
    try:
        return dispatch(args)
    except KeyboardInterrupt:  # Ctrl-C wherever it lands (preflight, compare, a preview)
        print(f"gemma4 {args[0]}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
