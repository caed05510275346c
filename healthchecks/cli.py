"""``python -m healthchecks``: check a deployed model from the command line.

Exit status: 0 when every check of every target passed, 1 when a check failed, 2 for a usage
error (bad arguments, missing pulumi CLI, stack outputs that name no endpoint).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from rich.console import Console
from rich.markup import escape

from .auth import ApiKeyAuth, AuthStrategy, GoogleIdTokenAuth, NoAuth
from .checks import Backoff
from .report import print_table, reports_to_json
from .runner import HealthReport, run_health_checks

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "Target", "UsageError", "auth_for", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad arguments or an unusable environment (exit status 2)."""


@dataclass(frozen=True)
class Target:
    """One endpoint to check."""

    url: str
    served_model_name: str
    auth: AuthStrategy


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m healthchecks",
        description="Check that a deployed vLLM endpoint is ready and serving the model.",
        epilog="Exit status: 0 all checks passed, 1 a check failed, 2 usage error.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="base URL of the endpoint, e.g. https://svc-abc.a.run.app")
    where.add_argument("-s", "--stack", help="read the endpoint from this Pulumi stack's outputs")
    parser.add_argument("--model", help="served model name (default: the stack's output)")
    parser.add_argument(
        "--cwd", help="Pulumi project directory for --stack (default: current directory)"
    )
    parser.add_argument(
        "--auth",
        choices=["auto", "id-token", "api-key", "none"],
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
    parser.add_argument(
        "--timeout-seconds",
        type=float,
        default=600.0,
        metavar="N",
        help="deadline for all checks of one target, cold start included (default 600)",
    )
    parser.add_argument(
        "--request-timeout-seconds", type=float, default=120.0, metavar="N", help=argparse.SUPPRESS
    )
    parser.add_argument("--backoff-max-seconds", type=float, default=15.0, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print one JSON document (for CI)")
    return parser


def auth_for(url: str, args: argparse.Namespace, default: str) -> AuthStrategy:
    mode = args.auth
    if mode == "auto":
        if args.api_key_env:
            mode = "api-key"
        elif default == "id-token" or (urlsplit(url).hostname or "").endswith(".run.app"):
            mode = "id-token"
        else:
            mode = "none"
    if mode == "api-key":
        if not args.api_key_env:
            raise UsageError("--auth api-key needs --api-key-env VAR")
        return ApiKeyAuth(args.api_key_env)
    if mode == "id-token":
        return GoogleIdTokenAuth(url, impersonate_service_account=args.impersonate_service_account)
    return NoAuth()


def read_stack_outputs(stack: str, cwd: str | None = None) -> dict[str, Any]:
    """``pulumi stack output --json --show-secrets=false -s STACK`` as a dict."""
    if shutil.which("pulumi") is None:
        raise UsageError(
            "the pulumi CLI was not found on PATH; install it "
            "(https://www.pulumi.com/docs/install/) or pass --url and --model instead of -s"
        )
    command = ["pulumi", "stack", "output", "--json", "--show-secrets=false", "-s", stack]
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"could not run {' '.join(command)}: {exc}") from exc
    if done.returncode != 0:
        raise UsageError(f"pulumi stack output failed for stack {stack!r}: {done.stderr.strip()}")
    try:
        outputs = json.loads(done.stdout or "{}")
    except ValueError as exc:
        raise UsageError(f"pulumi stack output printed no JSON: {exc}") from exc
    if not isinstance(outputs, dict):
        raise UsageError("pulumi stack output printed JSON that is not an object")
    return outputs


def targets_from_outputs(
    outputs: dict[str, Any], args: argparse.Namespace, stack: str
) -> list[Target]:
    """Targets from a stack's outputs: ``service_url`` (Cloud Run) or ``endpoint_urls`` (TPU)."""
    model = args.model or outputs.get("served_model_name")
    if not isinstance(model, str) or not model:
        raise UsageError(f"stack {stack!r} has no served_model_name output; pass --model NAME")
    service_url = outputs.get("service_url")
    if isinstance(service_url, str) and service_url:
        return [Target(service_url, model, auth_for(service_url, args, default="id-token"))]
    endpoints = outputs.get("endpoint_urls")
    if isinstance(endpoints, list) and endpoints and all(isinstance(u, str) for u in endpoints):
        if args.auth in ("auto", "api-key") and not args.api_key_env:
            secret = outputs.get("api_key_secret", "<api_key_secret output>")
            raise UsageError(
                f"stack {stack!r} serves on TPU endpoints protected by a vLLM API key kept in "
                f"Secret Manager secret {secret!r}; export it into a variable, e.g. "
                f"VLLM_API_KEY=$(gcloud secrets versions access latest --secret={secret}), "
                "and pass --api-key-env VLLM_API_KEY"
            )
        return [Target(url, model, auth_for(url, args, default="api-key")) for url in endpoints]
    raise UsageError(
        f"stack {stack!r} has neither a service_url nor an endpoint_urls output; "
        "has it been deployed? (or pass --url and --model)"
    )


def _targets(args: argparse.Namespace) -> list[Target]:
    if args.timeout_seconds <= 0:
        raise UsageError("--timeout-seconds must be positive")
    if args.stack:
        return targets_from_outputs(read_stack_outputs(args.stack, args.cwd), args, args.stack)
    if not args.model:
        raise UsageError("--url needs --model NAME (the served model name)")
    if urlsplit(args.url).scheme not in ("http", "https") or not urlsplit(args.url).hostname:
        raise UsageError(f"--url must be an http(s) URL, got {args.url!r}")
    return [Target(args.url, args.model, auth_for(args.url, args, default="none"))]


async def _run(targets: Sequence[Target], args: argparse.Namespace) -> list[HealthReport]:
    progress_console = Console(stderr=True, highlight=False)

    def progress(line: str) -> None:
        progress_console.print(f"[dim]{escape(line)}[/dim]")

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
            )
        )
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the checks, print the results; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its message
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    error_console = Console(stderr=True, highlight=False)
    try:
        targets = _targets(args)
    except UsageError as exc:
        error_console.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_USAGE
    try:
        reports = asyncio.run(_run(targets, args))
    except KeyboardInterrupt:
        error_console.print("[red]interrupted[/red]")
        return EXIT_FAILED
    if args.json:
        sys.stdout.write(reports_to_json(reports) + "\n")
    else:
        console = Console(highlight=False, width=max(100, _terminal_width()))
        for report in reports:
            print_table(report, console)
    return EXIT_OK if all(r.ok for r in reports) else EXIT_FAILED


def _terminal_width() -> int:
    try:
        return int(os.environ.get("COLUMNS", "0")) or shutil.get_terminal_size().columns
    except ValueError:
        return shutil.get_terminal_size().columns
