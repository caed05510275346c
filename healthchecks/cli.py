"""``gemma4 health``: check a deployed model from the command line. Exit 0 every check
passed, 1 a check failed, 2 a usage error, 130 interrupted."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from endpoint.limits import READY_DEADLINE_S
from endpoint.redact import redact
from endpoint.targets import (
    AUTH_MODES,
    AuthOptions,
    Target,
    TargetError,
    read_stack_outputs,
    target_from_url,
    targets_from_outputs,
)
from gemma4.options import add_project_options, say_outputs
from serving.config.inputs import MAX_DEADLINE_S, NUMBER
from serving.config.project import named_stack_problem

from .checks import Backoff
from .runner import HealthReport, run_health_checks

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


SMALLEST = 0.001
"""The smallest positive value an option bounded open at zero takes (a millisecond, a request
per 1000 s): below it a number is no setting anyone means, and its reciprocal may overflow."""


def number_type(high: float, *, zero_ok: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number from :data:`SMALLEST` (0 with ``zero_ok``) to ``high``."""
    low = 0.0 if zero_ok else SMALLEST

    def parse(text: str) -> float:
        value = float(text) if NUMBER.fullmatch(text) else math.nan
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(
                f"expected a finite number at least {low:g} and at most {high:g}, got {text!r}"
            )
        return value

    return parse


positive_seconds = number_type(MAX_DEADLINE_S)


def non_negative_seconds(text: str) -> float:
    """Seconds, zero allowed (no grace), else as :data:`positive_seconds`."""
    return 0.0 if text.strip() in ("0", "0.0") else positive_seconds(text)


def add_auth_options(parser: argparse.ArgumentParser) -> None:
    """The ``--auth``, ``--api-key-env`` and ``--impersonate-service-account`` flags."""
    parser.add_argument(
        "--auth",
        choices=list(AUTH_MODES),
        default="auto",
        help="auto: api-key with --api-key-env, a Google ID token for *.run.app URLs and Cloud Run "
        "stacks, none otherwise",
    )
    parser.add_argument("--api-key-env", metavar="VAR", help="env var holding the vLLM API key")
    parser.add_argument(
        "--impersonate-service-account",
        metavar="SA",
        help="mint the ID token by impersonating this service account",
    )


def targets_from_args(args: argparse.Namespace, command: str) -> list[Target]:
    """The targets of ``-s STACK`` (its outputs, read in ``--project-dir``; ``command`` says
    where) or ``--url``, with the flags of :func:`add_auth_options`."""
    options = AuthOptions(args.auth, args.api_key_env, args.impersonate_service_account)
    if args.stack is not None:
        # Before the pulumi CLI is asked anything; a slip in capitals offered only as a stack
        # the project has.
        problem = named_stack_problem(args.stack, "-s", args.project_dir)
        if problem:
            raise TargetError(problem)
        say_outputs(command, args.stack, args.project_dir)
        outputs = read_stack_outputs(args.stack, args.project_dir and str(args.project_dir))
        return targets_from_outputs(outputs, args.stack, options, args.model)
    return [target_from_url(args.url, args.model, options)]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gemma4 health",
        description="Check that a deployed vLLM endpoint is ready and serving the model.",
        epilog="Exit status: 0 all checks passed, 1 a check failed, 2 usage error.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="base URL of the endpoint, e.g. https://svc-abc.a.run.app")
    where.add_argument("-s", "--stack", help="read the endpoint from this Pulumi stack's outputs")
    parser.add_argument("--model", help="served model name (default: the stack's output)")
    add_project_options(parser, stack_file=False)
    add_auth_options(parser)
    parser.add_argument(
        "--deadline-seconds",
        dest="timeout_seconds",
        type=positive_seconds,
        default=READY_DEADLINE_S,
        metavar="S",
        help="deadline for all checks of one target, cold start included (default "
        "%(default)g; the MCP server's deadline_seconds)",
    )
    # Its old name, still accepted (the same meaning), not shown.
    parser.add_argument(
        "--timeout-seconds", dest="timeout_seconds", type=positive_seconds, help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--refused-grace-seconds",
        type=non_negative_seconds,
        default=None,
        metavar="S",
        help="how long refused connections are retried before the check fails (default: the "
        "whole --deadline-seconds, as vLLM keeps its port closed while it loads; lower it to "
        "fail fast on a wrong port)",
    )
    parser.add_argument(
        "--request-timeout-seconds",
        type=positive_seconds,
        default=120.0,
        metavar="S",
        help=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--backoff-max-seconds", type=positive_seconds, default=15.0, help=argparse.SUPPRESS
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document (for CI)")
    return parser


async def _run(targets: Sequence[Target], args: argparse.Namespace) -> list[HealthReport]:
    progress_console = Console(stderr=True, highlight=False)

    def progress(line: str) -> None:
        progress_console.print(f"[dim]{escape(redact(line))}[/dim]")

    backoff = Backoff(initial_s=min(1.0, args.backoff_max_seconds), max_s=args.backoff_max_seconds)
    reports = []
    for target in targets:
        reports.append(
            await run_health_checks(
                target.url,
                target.served_model_name,
                auth=target.auth,
                deadline_s=args.timeout_seconds,
                request_timeout_s=args.request_timeout_seconds,
                backoff=backoff,
                progress=progress,
                refused_grace_s=args.refused_grace_seconds,
            )
        )
    return reports


def print_table(report: HealthReport, console: Console) -> None:
    """One row per check: name, PASS/FAIL, time, detail."""
    verdict = "[green]healthy[/green]" if report.ok else "[red]NOT healthy[/red]"
    table = Table(
        title=(
            f"{escape(report.url)} ({escape(report.served_model_name)}, "
            f"auth: {escape(report.auth)}): {verdict}"
        ),
        title_justify="left",
        expand=False,
    )
    table.add_column("check")
    table.add_column("result")
    table.add_column("time", justify="right")
    table.add_column("detail", overflow="fold")
    for result in report.results:
        if not result.ok:
            mark = "[red]FAIL[/red]"
        else:
            mark = "[yellow]WARN[/yellow]" if result.warnings else "[green]PASS[/green]"
        table.add_row(Text(result.name), mark, f"{result.duration_s:.2f} s", Text(result.detail))
    console.print(table)


def reports_to_json(reports: Sequence[HealthReport]) -> str:
    """``{"ok": all passed, "targets": [report, ...]}`` as indented JSON."""
    document: dict[str, Any] = {
        "ok": bool(reports) and all(r.ok for r in reports),
        "targets": [r.as_dict() for r in reports],
    }
    return json.dumps(document, indent=2)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the checks, print the results; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its message
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    error_console = Console(stderr=True, highlight=False)
    try:
        targets = targets_from_args(args, "gemma4 health")
    except TargetError as exc:
        error_console.print(
            f"gemma4 health: [red]error:[/red] {escape(redact(exc))}", soft_wrap=True
        )
        return EXIT_USAGE
    # Ctrl-C propagates: the command line ends every command with exit 130 and one line.
    reports = asyncio.run(_run(targets, args))
    if args.json:
        sys.stdout.write(reports_to_json(reports) + "\n")
    else:
        console = Console(highlight=False, width=max(100, shutil.get_terminal_size().columns))
        for report in reports:
            print_table(report, console)
    return EXIT_OK if all(r.ok for r in reports) else EXIT_FAILED
