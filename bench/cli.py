"""``python -m bench``: run a sweep, compare runs, gate a run on the stack's SLOs.

Exit status: 0 success (``gate``: every SLO met), 1 failure (``gate``: an SLO missed; ``run``:
interrupted or failed), 2 usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from healthchecks.auth import AuthStrategy
from healthchecks.cli import UsageError, read_stack_outputs, targets_from_outputs
from healthchecks.cli import auth_for as auth_for_url
from serving.hardware import HARDWARE
from serving.settings import SettingsError, SloSettings

from .compare import compare_runs
from .gate import evaluate, slo_for_stack, stack_config
from .stats import GoodputSlo
from .store import StoreError, load_run
from .sweep import Grid, SweepOptions, run_sweep_async

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _rates(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive request rates, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark a vLLM endpoint: sweeps, comparisons and an SLO gate.",
        epilog="Exit status: 0 ok, 1 failed (gate: an SLO missed), 2 usage error.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a sweep into a directory")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--url", help="base URL of the endpoint")
    where.add_argument("-s", "--stack", help="read URL, model and auth from this stack's outputs")
    run.add_argument("--model", help="served model name (default: the stack's output)")
    run.add_argument("--cwd", metavar="DIR", help="Pulumi project directory for --stack")
    run.add_argument("--auth", choices=["auto", "id-token", "api-key", "none"], default="auto")
    run.add_argument("--api-key-env", metavar="VAR", help="env var holding the vLLM API key")
    run.add_argument("--impersonate-service-account", metavar="SA")
    run.add_argument(
        "--concurrency", type=_ints, default=(1, 8, 64), metavar="N,...", help="default 1,8,64"
    )
    run.add_argument(
        "--prompt-tokens", type=_ints, default=(128, 2048), metavar="N,...", help="default 128,2048"
    )
    run.add_argument(
        "--output-tokens", type=_ints, default=(128,), metavar="N,...", help="default 128"
    )
    run.add_argument(
        "--request-rate",
        type=_rates,
        default=None,
        metavar="R,...",
        help="open loop: Poisson arrivals at these rates (req/s); --concurrency caps in-flight",
    )
    run.add_argument(
        "--num-requests", type=int, metavar="N", help="requests per cell (default 4 x conc., >=16)"
    )
    run.add_argument(
        "--warmup", type=int, default=1, metavar="N", help="untimed requests per cell (default 1)"
    )
    run.add_argument(
        "--timeout-seconds", type=float, default=120.0, metavar="S", help="per request (120)"
    )
    run.add_argument(
        "--max-cell-seconds", type=float, default=600.0, metavar="S", help="cap per cell (600)"
    )
    run.add_argument(
        "--max-model-len",
        type=int,
        metavar="N",
        help="skip cells over it (default: from /v1/models)",
    )
    run.add_argument("--no-tokenize", action="store_true", help="estimate prompt sizes")
    run.add_argument(
        "--hardware",
        choices=sorted(HARDWARE),
        help="hardware catalog key, for cost in compare (default: the stack's)",
    )
    run.add_argument("--label", help="name of this run in reports and comparisons")
    run.add_argument(
        "--goodput-ttft-ms", type=float, metavar="MS", help="goodput SLO (default: stack SLO)"
    )
    run.add_argument(
        "--goodput-e2el-ms", type=float, metavar="MS", help="goodput SLO (default: stack SLO)"
    )
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", required=True, metavar="DIR", help="run directory")
    run.add_argument("--resume", action="store_true", help="continue the run in --out")
    run.add_argument("--no-progress", action="store_true")

    cmp_ = sub.add_parser("compare", help="compare runs (the first is the baseline)")
    cmp_.add_argument("runs", nargs="+", metavar="DIR")
    cmp_.add_argument("--out", help="write compare.md, compare.json and charts here")
    cmp_.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="LABEL=USD",
        help="hourly price for a run label or hardware key (default: the hardware catalog)",
    )
    cmp_.add_argument("--json", action="store_true", help="print JSON instead of markdown")

    gate = sub.add_parser("gate", help="check a run against the stack's SLOs")
    gate.add_argument("run", metavar="DIR")
    gate.add_argument("-s", "--stack", required=True, help="stack whose SLO keys to apply")
    gate.add_argument("--cwd", help="directory holding Pulumi.<stack>.yaml (default: .)")
    gate.add_argument("--json", action="store_true", help="print one JSON document")
    return parser


# ----- run ---------------------------------------------------------------------------------


def _hc_args(args: argparse.Namespace) -> argparse.Namespace:
    """The namespace the health checks' target functions read."""
    return argparse.Namespace(
        model=args.model,
        auth=args.auth,
        api_key_env=args.api_key_env,
        impersonate_service_account=args.impersonate_service_account,
    )


def _target(args: argparse.Namespace) -> tuple[str, str, AuthStrategy, dict[str, Any]]:
    """URL, model, auth and extra run metadata from --url/--model or the stack."""
    extra: dict[str, Any] = {}
    if args.stack:
        outputs = read_stack_outputs(args.stack, args.cwd)
        targets = targets_from_outputs(outputs, _hc_args(args), args.stack)
        extra["stack"] = args.stack
        if len(targets) > 1:
            extra["endpoints"] = [t.url for t in targets]
            extra["note"] = "several endpoints; the benchmark ran against the first"
        t = targets[0]
        return t.url, t.served_model_name, t.auth, extra
    if not args.url:
        raise UsageError("pass --url URL --model NAME, or -s STACK")
    if not args.model:
        raise UsageError("--url needs --model NAME (the served model name)")
    if urlsplit(args.url).scheme not in ("http", "https") or not urlsplit(args.url).hostname:
        raise UsageError(f"--url must be an http(s) URL, got {args.url!r}")
    return args.url, args.model, auth_for_url(args.url, _hc_args(args), "none"), extra


def _fill_from_previous(args: argparse.Namespace) -> None:
    """With --resume and no target, take URL and model from the run being resumed."""
    if not args.resume or args.url or args.stack:
        return
    try:
        previous = load_run(args.out).run
    except StoreError:
        return
    args.url = previous.get("url")
    args.model = args.model or previous.get("model")
    args.hardware = args.hardware or previous.get("hardware")
    args.label = args.label or previous.get("label")


def _stack_slo(args: argparse.Namespace) -> tuple[SloSettings | None, str | None]:
    if not args.stack:
        return None, None
    try:
        config = stack_config(args.stack, args.cwd)
    except (OSError, ValueError):
        return None, None
    hardware = config.get("hardware")
    try:
        return slo_for_stack(args.stack, args.cwd), hardware if isinstance(hardware, str) else None
    except (SettingsError, ValueError):
        return None, hardware if isinstance(hardware, str) else None


def _run(args: argparse.Namespace, err: Console) -> int:
    _fill_from_previous(args)
    for name in ("num_requests", "max_model_len"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0 or args.timeout_seconds <= 0 or args.max_cell_seconds <= 0:
        raise UsageError("--warmup must be >= 0; --timeout-seconds, --max-cell-seconds > 0")
    url, model, auth, extra = _target(args)
    slo, stack_hardware = _stack_slo(args)
    slo = slo or SloSettings()
    goodput = GoodputSlo(
        ttft_ms=args.goodput_ttft_ms or slo.slo_p95_ttft_ms,
        e2el_ms=args.goodput_e2el_ms or slo.slo_p95_e2e_ms,
    )
    grid = Grid(
        tuple(args.concurrency),
        tuple(args.prompt_tokens),
        tuple(args.output_tokens),
        tuple(args.request_rate) if args.request_rate else (None,),
    )
    options = SweepOptions(
        num_requests=args.num_requests,
        warmup=args.warmup,
        timeout_s=args.timeout_seconds,
        max_cell_seconds=args.max_cell_seconds,
        max_model_len=args.max_model_len,
        goodput_slo=goodput,
        use_tokenize=not args.no_tokenize,
        seed=args.seed,
        hardware=args.hardware or stack_hardware,
        label=args.label,
        progress=not args.no_progress,
        extra=extra,
    )
    err.print(f"[dim]{escape(f'benchmarking {model} at {url} ({auth.description})')}[/dim]")
    try:
        run = asyncio.run(
            run_sweep_async(
                url, model, grid, args.out, auth=auth, options=options, resume=args.resume
            )
        )
    except StoreError as exc:
        raise UsageError(str(exc)) from exc
    except (httpx.HTTPError, OSError) as exc:
        # Preparing a cell needs the server (/v1/models, /tokenize, /metrics); requests that
        # fail during a cell are recorded, not raised.
        err.print(
            f"[red]error:[/red] {escape(f'{type(exc).__name__}: {exc}')}; finished cells are "
            f"kept in {escape(args.out)} (--resume continues)"
        )
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.print(
            f"[red]interrupted[/red]: finished cells are kept in {escape(args.out)}; "
            "run again with --resume to continue"
        )
        return EXIT_FAILED
    measured = len(run.measured())
    skipped = len(run.cells) - measured
    print(f"{measured} cells measured, {skipped} skipped; report: {run.path / 'report.md'}")
    return EXIT_OK


# ----- compare and gate ------------------------------------------------------------------------


def _compare(args: argparse.Namespace) -> int:
    prices: dict[str, float] = {}
    for item in args.price:
        key, sep, value = item.partition("=")
        try:
            prices[key] = float(value)
        except ValueError:
            raise UsageError(f"--price expects LABEL=USD, got {item!r}") from None
        if not sep or not key:
            raise UsageError(f"--price expects LABEL=USD, got {item!r}")
    try:
        runs = [load_run(path) for path in args.runs]
        comparison = compare_runs(runs, prices=prices)
    except (StoreError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    if args.out:
        comparison.write(args.out)
    if args.json:
        sys.stdout.write(json.dumps(comparison.as_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(comparison.markdown() + "\n")
    return EXIT_OK


def _fmt(value: float | None, slo: str) -> str:
    if value is None:
        return "none"
    return f"{value:.1%}" if slo == "sloMinSuccessRate" else f"{value:.2f}"


def _gate(args: argparse.Namespace) -> int:
    try:
        run = load_run(args.run)
    except StoreError as exc:
        raise UsageError(str(exc)) from exc
    try:
        slo = slo_for_stack(args.stack, args.cwd)
    except FileNotFoundError as exc:
        raise UsageError(f"no stack file for stack {args.stack!r}: {exc}") from exc
    except (SettingsError, ValueError) as exc:
        raise UsageError(f"stack {args.stack!r} config is invalid: {exc}") from exc
    result = evaluate(run, slo)
    if args.json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2) + "\n")
        return EXIT_OK if result.passed else EXIT_FAILED
    console = Console(highlight=False, width=120)
    verdict = "[green]PASS[/green]" if result.passed else "[red]FAIL[/red]"
    console.print(
        f"SLO gate for {escape(run.label)} against stack {escape(args.stack)}: {verdict} "
        f"({result.measured_cells} cells measured, {result.skipped_cells} skipped)"
    )
    if result.measured_cells == 0:
        console.print("[red]no measured cell[/red]: nothing to judge")
    if result.failures:
        table = Table("cell", "SLO", "metric", "value", "required")
        for check in result.failures:
            table.add_row(
                check.cell,
                check.slo,
                check.metric,
                _fmt(check.value, check.slo),
                f"{check.comparison} {_fmt(check.threshold, check.slo)}",
            )
        console.print(table)
    return EXIT_OK if result.passed else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the subcommand; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    err = Console(stderr=True, highlight=False)
    try:
        if args.command == "run":
            return _run(args, err)
        if args.command == "compare":
            return _compare(args)
        return _gate(args)
    except UsageError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_USAGE
