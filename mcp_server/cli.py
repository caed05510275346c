"""``gemma4 mcp`` and ``python -m mcp_server``: the MCP server's options. Exit status: 0 after
a clean shutdown, 2 for a usage error."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from components.tpu_api import adc_token_source
from gemma4.options import add_project_options, bounded_int
from serving.capacity.plan import ROOT
from serving.config.project import ProjectError, find_project_file, named_stack_problem, stack_names

from . import _deployments as d
from ._redaction import redact, register_environment_secrets
from .google_apis import ApiUrls, GoogleApis
from .server import ACTIONS, MAX_STDIN_MESSAGE_BYTES, BoundedLines, build_server, serve_stdio
from .tools import Tools

EXIT_OK = 0
EXIT_USAGE = 2

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gemma4 mcp",
        description="MCP server for operating the Gemma 4 vLLM deployments from an agent CLI.",
        epilog="Exit status: 0 clean shutdown, 2 usage error.",
    )
    parser.add_argument(
        "-s",
        "--stack",
        action="append",
        default=[],
        help="serve this stack (repeatable; default: every Pulumi.<stack>.yaml)",
    )
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (what MCP clients start) or streamable HTTP on --host:--port/mcp",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="HTTP bind address, loopback only (127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=bounded_int("--port", 1, 65535), default=8765, help="HTTP port (8765)"
    )
    parser.add_argument(
        "--enable-action",
        action="append",
        default=[],
        choices=sorted(ACTIONS),
        metavar="NAME",
        help="register an action tool: " + "; ".join(f"{k}: {v}" for k, v in ACTIONS.items()),
    )
    add_project_options(parser, stack_file=False)
    parser.add_argument(
        "--outputs-dir",
        type=Path,
        help="read stack outputs from DIR/<stack>.json (saved `pulumi stack output --json`) "
        "instead of running the pulumi CLI",
    )
    parser.add_argument(
        "--runs-dir",
        action="append",
        metavar="DIR",
        help="also list benchmark runs in the folders of DIR, relative to the project folder "
        "(repeatable; default: runs, where `gemma4 bench run --out runs/NAME` writes)",
    )
    parser.add_argument("--project", help="Google Cloud project (default: the stack's gcp:project)")
    parser.add_argument(
        "--endpoint-auth",
        choices=["auto", "none"],
        default="auto",
        help="auto: each endpoint gets its own kind of credential, a Google ID token for a "
        "Cloud Run service (audience: its URL), the vLLM API key for a TPU node; none: no "
        "credential (a local server)",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="env var holding the vLLM API key, sent to TPU endpoints only (default: the "
        "stack's Secret Manager secret); Cloud Run endpoints always get an ID token",
    )
    parser.add_argument(
        "--impersonate-service-account",
        metavar="SA",
        help="mint Cloud Run ID tokens by impersonating this service account",
    )
    for api in ("run", "tpu", "logging"):
        parser.add_argument(
            f"--{api}-api-url", default=getattr(ApiUrls, api), help=argparse.SUPPRESS
        )
    parser.add_argument(
        "--secretmanager-api-url",
        default="https://secretmanager.googleapis.com",
        help=argparse.SUPPRESS,
    )
    # Tests shorten every tool's deadline to this many seconds (the descriptions still state
    # the real ones).
    parser.add_argument("--tool-deadline-s", type=float, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, serve until the client disconnects; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its message
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    if args.host not in _LOOPBACK:
        print(
            f"gemma4 mcp: error: --host must be a loopback address ({', '.join(_LOOPBACK)}), got "
            f"{args.host!r}: the HTTP transport has no authentication of its own",
            file=sys.stderr,
        )
        return EXIT_USAGE
    for stack in args.stack:
        problem = named_stack_problem(stack, "-s", args.project_dir)
        if problem:
            print(f"gemma4 mcp: error: {redact(problem)}", file=sys.stderr)
            return EXIT_USAGE
    register_environment_secrets()
    urls = ApiUrls(run=args.run_api_url, tpu=args.tpu_api_url, logging=args.logging_api_url)
    if args.project_dir is None:  # as `pulumi -s`: here or the nearest parent with a Pulumi.yaml
        try:
            found = find_project_file()
        except ProjectError as exc:
            print(f"gemma4 mcp: error: {redact(str(exc))}", file=sys.stderr)
            return EXIT_USAGE
        args.project_dir = ROOT if found is None else found.parent
        if found is None:
            print(
                f"gemma4 mcp: no Pulumi project here or above; using the installed project "
                f"{ROOT} (pass --project-dir DIR)",
                file=sys.stderr,
            )
    names = stack_names(Path(args.project_dir))
    print(
        f"gemma4 mcp: reading stack files in {Path(args.project_dir).resolve()} "
        f"({', '.join(f'Pulumi.{n}.yaml' for n in names) or 'none'})",
        file=sys.stderr,
    )
    apis = GoogleApis(adc_token_source, urls)
    try:
        deployments = d.Deployments(
            args.stack,
            root=args.project_dir,
            outputs_dir=args.outputs_dir,
            project=args.project,
            runs_dirs=args.runs_dir or ("runs",),
            token_source=lambda: apis.token_source()(),
            endpoint=d.EndpointOptions(
                auth=args.endpoint_auth,
                api_key_env=args.api_key_env,
                impersonate_service_account=args.impersonate_service_account,
                secretmanager_url=args.secretmanager_api_url,
            ),
        )
    except d.DeploymentError as exc:
        print(f"gemma4 mcp: error: {redact(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    if not deployments.stacks:
        print(
            f"gemma4 mcp: error: no Pulumi.<stack>.yaml in {args.project_dir}; pass --project-dir",
            file=sys.stderr,
        )
        return EXIT_USAGE
    server = build_server(
        Tools(deployments, apis),
        actions=args.enable_action,
        host=args.host,
        port=args.port,
        deadline_cap_s=args.tool_deadline_s,
    )
    if args.transport == "http":
        server.run("streamable-http")
        return EXIT_OK
    stdin = BoundedLines(sys.stdin.buffer)
    anyio.run(serve_stdio, server, stdin)
    if stdin.overflow:
        print(
            f"gemma4 mcp: error: a message on stdin is longer than {MAX_STDIN_MESSAGE_BYTES} "
            "bytes (or never ends its line); stopped",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return EXIT_OK
