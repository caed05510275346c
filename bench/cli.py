"""``python -m bench``: run a sweep, compare runs, gate a run on the stack's SLOs.

Exit status: 0 success (``run``: every cell of the grid measured or skipped for length, each at
or above ``--min-success-rate`` with responses of the asked length; ``gate``: every SLO met on
a complete run), 1 failure (``run``: the preflight failed, a cell failed or was short, nothing
was measured; ``gate``: an SLO missed or the run incomplete), 2 usage error (bad arguments, a
run directory that cannot be used as asked, a damaged run, ``/tokenize`` answers prompts cannot
be built from), 130 interrupted (Ctrl-C; the finished cells are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.load.hotload import new_event_loop
from bench.load.prompts import PromptError
from bench.load.sweep import Grid, PreflightError, SweepOptions, run_sweep_async
from bench.load.window import ClientLimits
from bench.reports.compare import compare_runs
from bench.reports.predicted import Overlay, overlay
from bench.results.gate import (
    evaluate,
    settings_for_stack,
    slo_for_stack,
    stack_config,
    target_differences,
    target_identity,
)
from bench.results.stats import GoodputSlo
from bench.results.store import PREFLIGHT_FILE, PreflightFailedError, RunData, StoreError, load_run
from endpoint.auth import AuthStrategy
from endpoint.client import LimitExceeded
from endpoint.errors import error_line
from endpoint.limits import MAX_PROMPT_TOKENS
from endpoint.redact import redact
from endpoint.targets import TargetError
from gemma4.options import add_project_options, refuse_unknown_subcommand, say_read
from healthchecks.cli import SMALLEST, add_auth_options, number_type, targets_from_args
from serving.catalog.hardware import HARDWARE
from serving.config.checks import SettingsError
from serving.config.groups import SloSettings
from serving.config.inputs import INTEGER
from serving.config.project import ProjectError, named_stack_problem
from serving.config.project import stack_file as find_stack_file

__all__ = ["DEFAULT_GRID", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

UsageError = TargetError

DEFAULT_GRID = Grid(concurrency=(1, 8, 64), prompt_tokens=(128, 2048), output_tokens=(128,))
"""The grid ``bench run`` measures when no grid flag is given (and nothing is resumed)."""
_DEFAULT_OPTIONS = SweepOptions()
_MAX_CONCURRENCY = 4096
_MAX_OUTPUT_TOKENS = 1 << 20
_MAX_REQUESTS = 10_000_000


def _ints(low: int, high: int, what: str) -> Callable[[str], tuple[int, ...]]:
    def parse(text: str) -> tuple[int, ...]:
        parts = text.split(",")
        if any(not INTEGER.fullmatch(v) or len(v) > 18 for v in parts):
            raise argparse.ArgumentTypeError(
                f"expected comma-separated integers, got {text[:40]!r}"
            )
        values = tuple(int(v) for v in parts)
        if not values or any(not low <= v <= high for v in values):
            raise argparse.ArgumentTypeError(
                f"{what} must be integers from {low} to {high}, got {text!r}"
            )
        return values

    return parse


def _int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not INTEGER.fullmatch(text) or len(text) > 18:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text[:40]!r}")
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {low} to {high}, got {value}")
        return value

    return parse


def _rates(text: str) -> tuple[float, ...]:
    one = number_type(1e6)
    try:
        values = tuple(one(v) for v in text.split(",") if v.strip())
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated finite request rates at least {SMALLEST:g} and at most "
            f"1e+06, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected positive request rates, got {text!r}")
    return values


_SECONDS = number_type(7 * 24 * 3600.0)


class _Renamed(argparse.Action):
    """An old option name whose meaning another command uses: refused, naming the new one."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser.error(
            "--timeout-seconds is now --request-timeout-seconds (the per-request timeout; "
            "`--timeout-seconds` is `gemma4 health`'s overall deadline)"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gemma4 bench",
        description="Benchmark a vLLM endpoint: sweeps, comparisons and an SLO gate.",
        epilog="Exit status: 0 ok, 1 failed (run: a cell failed or was short; gate: an SLO "
        "missed or the run incomplete), 2 usage error.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run",
        help="run a sweep into a directory",
        epilog="With --resume, flags left out take the stored run's values and flags given "
        "must equal them: one run directory is one experiment.",
    )
    where = run.add_mutually_exclusive_group()
    where.add_argument("--url", help="base URL of the endpoint (the server root, no /v1)")
    where.add_argument("-s", "--stack", help="read URL, model and auth from this stack's outputs")
    run.add_argument("--model", help="served model name (default: the stack's output)")
    add_project_options(run, stack_file=False)
    add_auth_options(run)
    grid = DEFAULT_GRID
    run.add_argument(
        "--concurrency",
        type=_ints(1, _MAX_CONCURRENCY, "--concurrency"),
        metavar="N,...",
        help=f"default {','.join(map(str, grid.concurrency))}",
    )
    run.add_argument(
        "--prompt-tokens",
        type=_ints(2, MAX_PROMPT_TOKENS, "--prompt-tokens"),
        metavar="N,...",
        help=f"default {','.join(map(str, grid.prompt_tokens))} (at least 2: BOS and a word)",
    )
    run.add_argument(
        "--output-tokens",
        type=_ints(1, _MAX_OUTPUT_TOKENS, "--output-tokens"),
        metavar="N,...",
        help=f"default {','.join(map(str, grid.output_tokens))}",
    )
    run.add_argument(
        "--request-rate",
        type=_rates,
        default=None,
        metavar="R,...",
        help="open loop: Poisson arrivals at these rates (req/s); --concurrency caps in-flight",
    )
    run.add_argument(
        "--burstiness",
        type=number_type(100.0),
        metavar="F",
        help="with --request-rate: the gamma shape of the arrival gaps, as vLLM's bench serve "
        "(default 1: Poisson; under 1 burstier, over 1 more even; at most 100)",
    )
    run.add_argument(
        "--num-requests",
        type=_int(1, _MAX_REQUESTS),
        metavar="N",
        help="requests per cell (default 4 x conc., >=16)",
    )
    run.add_argument(
        "--warmup",
        type=_int(0, _MAX_REQUESTS),
        metavar="N",
        help=f"untimed requests per cell (default {_DEFAULT_OPTIONS.warmup})",
    )
    run.add_argument(
        "--request-timeout-seconds",
        dest="timeout_seconds",
        type=_SECONDS,
        metavar="S",
        help=f"per request ({_DEFAULT_OPTIONS.timeout_s:g})",
    )
    # One name, one meaning across commands: `--timeout-seconds` is `gemma4 health`'s overall
    # deadline, so the old name of this per-request timeout is refused with the new one.
    run.add_argument("--timeout-seconds", action=_Renamed, help=argparse.SUPPRESS)
    run.add_argument(
        "--ready-timeout-seconds",
        type=_SECONDS,
        metavar="S",
        help="how long to wait for /health to answer 200 before the preflight (a server still "
        f"loading; default {_DEFAULT_OPTIONS.ready_timeout_s:g})",
    )
    run.add_argument(
        "--max-cell-seconds",
        type=_SECONDS,
        metavar="S",
        help=f"cap per cell ({_DEFAULT_OPTIONS.max_cell_seconds:g})",
    )
    run.add_argument(
        "--max-model-len",
        type=_int(1, 1 << 24),
        metavar="N",
        help="skip cells over it (default: from /v1/models)",
    )
    run.add_argument(
        "--no-tokenize",
        action="store_const",
        const=True,
        default=None,
        help="estimate prompt sizes",
    )
    run.add_argument(
        "--min-success-rate",
        type=number_type(1.0, zero_ok=True),
        metavar="F",
        help="a cell under this success rate fails the run (0..1; default 1: any failed "
        "request fails its cell)",
    )
    run.add_argument(
        "--hardware",
        choices=sorted(HARDWARE),
        help="hardware catalog key, for cost in compare (default: the stack's)",
    )
    run.add_argument("--label", help="name of this run in reports and comparisons")
    run.add_argument(
        "--goodput-ttft-ms",
        type=number_type(1e9),
        metavar="MS",
        help="goodput SLO (default: stack SLO)",
    )
    run.add_argument(
        "--goodput-e2el-ms",
        type=number_type(1e9),
        metavar="MS",
        help="goodput SLO (default: stack SLO)",
    )
    run.add_argument(
        "--seed",
        type=_int(0, 2**31 - 1),
        help="seed of the prompt text and of open-loop arrivals (default 0; with --resume the "
        "stored run's), so two runs with one seed send the same requests",
    )
    run.add_argument(
        "--workers",
        type=_int(1, 256),
        metavar="N",
        help="client processes per cell (default: one per "
        f"{_DEFAULT_OPTIONS.streams_per_worker} streams, at most one per CPU, one CPU left to "
        "a server on this machine)",
    )
    run.add_argument(
        "--ramp-seconds",
        type=number_type(600.0, zero_ok=True),
        metavar="S",
        help="closed loop: spread of the streams' starts, not measured (default: one "
        "request's duration, from the warm-up)",
    )
    run.add_argument(
        "--client-share-limit",
        type=number_type(1.0, zero_ok=True),
        metavar="F",
        help="mark a cell client-limited when the client's share of mean TTFT or ITL "
        f"exceeds this (0..1; default {_DEFAULT_OPTIONS.client_limits.max_client_share:g}) and "
        "the difference exceeds --client-gap-limit-ms",
    )
    run.add_argument(
        "--client-gap-limit-ms",
        type=number_type(1e6, zero_ok=True),
        metavar="MS",
        help="the client's mean TTFT or ITL must also exceed the server's by more than this "
        "to mark a cell client-limited "
        f"(default {_DEFAULT_OPTIONS.client_limits.min_client_gap_ms:g})",
    )
    run.add_argument(
        "--max-loop-lag-ms",
        type=number_type(1e6),
        metavar="MS",
        help="mark a cell client-limited when the event loop's p99 lag exceeds this "
        f"(default {_DEFAULT_OPTIONS.client_limits.max_loop_lag_ms:g})",
    )
    run.add_argument("--out", required=True, metavar="DIR", help="run directory")
    run.add_argument("--resume", action="store_true", help="continue the run in --out")
    run.add_argument("--no-progress", action="store_true", help="no progress bar (for logs and CI)")
    run.add_argument("--no-charts", action="store_true", help="draw no charts/*.png (for CI gates)")

    cmp_ = sub.add_parser(
        "compare",
        help="compare runs (the first is the baseline); one run is enough with --predict",
    )
    cmp_.add_argument(
        "runs", nargs="+", metavar="DIR", help="run directories (`gemma4 bench run --out`)"
    )
    cmp_.add_argument("--out", metavar="DIR", help="write compare.md, compare.json and charts here")
    cmp_.add_argument(
        "--predict",
        metavar="STACK",
        help="overlay the performance model's prediction for STACK (Pulumi.STACK.yaml, found "
        "as `pulumi -s` finds it) on each run, cell by cell, and flag cells far off it",
    )
    cmp_.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="LABEL=USD",
        help="hourly price for a run label or hardware key (default: the hardware catalog)",
    )
    cmp_.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    add_project_options(cmp_, stack_file=False)

    gate = sub.add_parser("gate", help="check a run against the stack's SLOs")
    gate.add_argument("run", metavar="DIR", help="the run directory (`gemma4 bench run --out`)")
    gate.add_argument(
        "-s",
        "--stack",
        required=True,
        help="stack whose slo* keys to apply: Pulumi.<stack>.yaml of the Pulumi project in the "
        "current directory or its nearest parent, as `pulumi -s` finds it",
    )
    add_project_options(gate, stack_file=False)
    gate.add_argument("--json", action="store_true", help="print one JSON document")
    gate.add_argument(
        "--allow-other-target",
        action="store_true",
        help="judge a run made against another model or hardware than the stack's by the "
        "stack's SLOs anyway (the difference is still printed); without it such a run fails",
    )
    return parser


# ----- run ---------------------------------------------------------------------------------


def stack_identity(stack: str, project_dir: str | Path | None) -> dict[str, str] | None:
    """The image and checkpoint stack `stack`'s file declares (recorded with a run made with
    `-s`, checked by `bench gate`); None when the stack file cannot be read here."""
    try:
        return target_identity(settings_for_stack(stack, project_dir))
    except (OSError, ValueError, SettingsError):
        return None


def _target(args: argparse.Namespace) -> tuple[str, str, AuthStrategy, dict[str, Any]]:
    """URL, model, auth and extra run metadata from --url/--model or the stack."""
    extra: dict[str, Any] = {}
    if not args.url and args.stack is None:
        raise UsageError("pass --url URL --model NAME, or -s STACK")
    targets = targets_from_args(args, "gemma4 bench run")
    if args.stack is not None:
        extra["stack"] = args.stack
        identity = stack_identity(args.stack, args.project_dir)
        if identity is not None:
            extra["target"] = identity
        if len(targets) > 1:
            extra["endpoints"] = [redact(t.url) for t in targets]
            extra["note"] = "several endpoints; the benchmark ran against the first"
    t = targets[0]
    return t.url, t.served_model_name, t.auth, extra


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _fill_from_stored(args: argparse.Namespace, stored: dict[str, Any]) -> None:
    """Flags left out take the stored run's values (what RunStore then checks for equality)."""
    if not args.url and not args.stack:
        args.url = stored.get("url")
    args.model = args.model or stored.get("model")
    args.hardware = args.hardware or stored.get("hardware")
    args.label = args.label or stored.get("label")
    grid = _mapping(stored.get("grid"))
    for name in ("concurrency", "prompt_tokens", "output_tokens"):
        if getattr(args, name) is None and isinstance(grid.get(name), list):
            setattr(args, name, tuple(int(v) for v in grid[name]))
    rates = grid.get("request_rates")
    if args.request_rate is None and isinstance(rates, list) and rates != [None]:
        args.request_rate = tuple(float(r) for r in rates)
    options = _mapping(stored.get("options"))
    if args.burstiness is None and args.request_rate and options.get("burstiness") is not None:
        args.burstiness = options["burstiness"]
    for flag, name in (
        ("num_requests", "num_requests"),
        ("warmup", "warmup"),
        ("timeout_seconds", "timeout_s"),
        ("max_cell_seconds", "max_cell_seconds"),
        ("seed", "seed"),
        ("min_success_rate", "min_success_rate"),
        ("max_model_len", "max_model_len"),
    ):
        if getattr(args, flag) is None and options.get(name) is not None:
            setattr(args, flag, options[name])
    if args.no_tokenize is None and options.get("use_tokenize") is False:
        args.no_tokenize = True
    goodput = _mapping(options.get("goodput_slo"))
    if args.goodput_ttft_ms is None and goodput.get("ttft") is not None:
        args.goodput_ttft_ms = goodput["ttft"]
    if args.goodput_e2el_ms is None and goodput.get("e2el") is not None:
        args.goodput_e2el_ms = goodput["e2el"]


def _stack_slo(args: argparse.Namespace) -> tuple[SloSettings | None, str | None]:
    if not args.stack:
        return None, None
    try:
        hardware = stack_config(args.stack, args.project_dir).get("hardware")
    except (OSError, ValueError):
        return None, None
    hardware = hardware if isinstance(hardware, str) else None
    try:
        return slo_for_stack(args.stack, args.project_dir), hardware
    except (SettingsError, ValueError):
        return None, hardware


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value


def _share_line(cell: dict[str, Any]) -> str | None:
    """``cell: TTFT client ms (server ms, client share), ITL ...`` when the server's own
    histograms were read; None otherwise."""
    parts = []
    for key, name in (("ttft", "TTFT"), ("itl", "ITL")):
        client, server = cell.get(f"client_mean_{key}_ms"), cell.get(f"server_mean_{key}_ms")
        share = cell.get(f"client_share_{key}")
        if isinstance(client, int | float) and isinstance(server, int | float):
            text = f"mean {name} {client:.1f} ms (server {server:.1f} ms"
            text += f", client share {share:+.1%})" if isinstance(share, int | float) else ")"
            parts.append(text)
    return f"{cell['id']}: " + ", ".join(parts) if parts else None


def _verdict(run: RunData, err: Console) -> int:
    """Print what went wrong in the run, if anything; the exit status."""
    measured = run.measured()
    bad = [c for c in measured if c.get("status") != "ok"]
    skipped = len(run.cells) - len(measured)
    missing = run.missing_ids()
    print(
        f"{len(measured) - len(bad)} cells passed, {len(bad)} failed or short, "
        f"{skipped} skipped; report: {run.path / 'report.md'}"
    )
    for cell in measured:
        line = _share_line(cell)
        if line:
            err.print(f"[dim]{escape(line)}[/dim]")
    limited = [c for c in measured if c.get("client_limited")]
    if limited:
        err.print(
            f"[yellow]{len(limited)} cells client-limited[/yellow]: their figures are the "
            "client's, not the server's (see the report's client share table)"
        )
        for cell in limited[:10]:
            err.print(
                f"  [yellow]{escape(str(cell['id']))}:[/yellow] "
                + escape(redact("; ".join(cell.get("warnings") or [])))
            )
    for cell in bad[:10]:
        err.print(
            f"[red]cell {escape(str(cell['id']))} {escape(str(cell.get('status')))}:[/red] "
            + escape(redact("; ".join(cell.get("problems") or [])))
        )
        for sample in (cell.get("failure_samples") or [])[:3]:
            status, said = sample.get("status"), error_line(str(sample.get("error") or ""))
            if status is not None and not said.startswith(f"HTTP {status}"):
                said = f"HTTP {status}: {said}" if said else f"HTTP {status}"
            err.print(f"  {escape(str(sample.get('kind')))}: {escape(said)}")
    if missing:
        err.print(f"[red]{len(missing)} cells were not run[/red]")
        return EXIT_FAILED
    if not measured:
        err.print("[red]no cell was measured[/red] (every cell was skipped): nothing worked")
        return EXIT_FAILED
    return EXIT_FAILED if bad else EXIT_OK


def _run(args: argparse.Namespace, err: Console) -> int:
    try:
        stored = load_run(args.out).run if args.resume else None
    except StoreError as exc:
        raise UsageError(f"--resume: {exc}") from exc
    if stored is not None:
        try:
            _fill_from_stored(args, stored)
        except (TypeError, ValueError) as exc:
            raise UsageError(
                f"--resume: {args.out}/run.json has a damaged grid or options ({exc})"
            ) from None
    if args.burstiness is not None and not args.request_rate:
        raise UsageError("--burstiness shapes open-loop arrivals: it needs --request-rate R,...")
    url, model, auth, extra = _target(args)
    slo, stack_hardware = _stack_slo(args)
    slo = slo or SloSettings()
    goodput = GoodputSlo(
        ttft_ms=_pick(args.goodput_ttft_ms, slo.slo_p95_ttft_ms),
        e2el_ms=_pick(args.goodput_e2el_ms, slo.slo_p95_e2e_ms),
    )
    try:
        grid = Grid(
            tuple(_pick(args.concurrency, DEFAULT_GRID.concurrency)),
            tuple(_pick(args.prompt_tokens, DEFAULT_GRID.prompt_tokens)),
            tuple(_pick(args.output_tokens, DEFAULT_GRID.output_tokens)),
            tuple(args.request_rate) if args.request_rate else (None,),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    d = _DEFAULT_OPTIONS
    options = SweepOptions(
        num_requests=args.num_requests,
        warmup=_pick(args.warmup, d.warmup),
        timeout_s=_pick(args.timeout_seconds, d.timeout_s),
        ready_timeout_s=_pick(args.ready_timeout_seconds, d.ready_timeout_s),
        max_cell_seconds=_pick(args.max_cell_seconds, d.max_cell_seconds),
        max_model_len=args.max_model_len,
        goodput_slo=goodput,
        use_tokenize=not args.no_tokenize,
        seed=_pick(args.seed, d.seed),
        burstiness=_pick(args.burstiness, d.burstiness),
        hardware=args.hardware or stack_hardware,
        label=args.label,
        progress=not args.no_progress,
        charts=not args.no_charts,
        min_success_rate=_pick(args.min_success_rate, d.min_success_rate),
        workers=args.workers,
        ramp_s=args.ramp_seconds,
        client_limits=ClientLimits(
            max_client_share=_pick(args.client_share_limit, d.client_limits.max_client_share),
            min_client_gap_ms=_pick(args.client_gap_limit_ms, d.client_limits.min_client_gap_ms),
            max_loop_lag_ms=_pick(args.max_loop_lag_ms, d.client_limits.max_loop_lag_ms),
        ),
        extra=extra,
    )
    where = redact(f"benchmarking {model} at {url} ({auth.description})")
    err.print(f"[dim]{escape(where)}[/dim]")
    out = escape(args.out)
    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            run = runner.run(
                run_sweep_async(
                    url, model, grid, args.out, auth=auth, options=options, resume=args.resume
                )
            )
    except (StoreError, PromptError) as exc:
        raise UsageError(str(exc)) from exc
    except PreflightError as exc:
        err.print(f"[red]preflight failed:[/red] {escape(redact(exc))}")
        err.print(f"[dim]kept in {out}/{PREFLIGHT_FILE}[/dim]")
        return EXIT_FAILED
    except (OSError, httpx.HTTPError, LimitExceeded) as exc:
        if isinstance(exc, OSError) and exc.filename is not None:
            # The run folder (or a file in it) cannot be written: a read-only folder, a full
            # disk. Said as such, with what was kept, never as a server problem.
            what = f"cannot write {exc.filename}: {exc.strerror or exc}"
        else:
            # Preparing a cell needs the server (/v1/models, /tokenize, /metrics); requests
            # that fail during a cell are recorded, not raised.
            what = redact(f"{type(exc).__name__}: {exc}")
        err.print(f"[red]error:[/red] {escape(what)}; {_kept(args.out)}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.print(f"[red]interrupted[/red]: {_kept(args.out)}")
        raise  # exit 130, said once by the command line
    return _verdict(run, err)


def _kept(out: str) -> str:
    """What a run that stopped early left behind, as it is on disk: the finished cells and
    how to continue, or that nothing was kept."""
    try:
        cells = len(load_run(out).cells)
    except (StoreError, OSError, ValueError):
        try:
            started = (Path(out) / "run.json").is_file()
        except OSError:
            started = False
        if started:  # the run is recorded, no cell of it yet
            return f"no cell finished in {escape(out)}; run again with --resume to continue"
        return f"nothing was kept in {escape(out)}"
    return (
        f"{cells} finished cell(s) are kept in {escape(out)}; run again with --resume to continue"
    )


# ----- compare and gate ------------------------------------------------------------------------


def _compare(args: argparse.Namespace) -> int:
    prices: dict[str, float] = {}
    for item in args.price:
        key, sep, value = item.partition("=")
        try:
            prices[key] = float(value)
        except ValueError:
            raise UsageError(f"--price expects LABEL=USD, got {item!r}") from None
        if not sep or not key or not math.isfinite(prices[key]) or prices[key] < 0:
            raise UsageError(f"--price expects LABEL=USD, got {item!r}")
    if args.predict is not None:
        # A usage error before any run is read, as every command taking a stack answers it.
        problem = named_stack_problem(args.predict, "--predict", args.project_dir)
        if problem:
            raise UsageError(problem)
    try:
        runs = [load_run(path) for path in args.runs]
        overlays = _overlays(runs, args.predict, args.project_dir) if args.predict else []
        if len(runs) == 1 and overlays:
            return _predicted_only(overlays, args)
        comparison = compare_runs(runs, prices=prices)
    except (StoreError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    if args.out:
        comparison.write(args.out)
        for o in overlays:
            o.write_charts(Path(args.out) / "charts")
        if overlays:
            md = Path(args.out) / "compare.md"
            md.write_text(
                md.read_text(encoding="utf-8") + "\n".join(o.markdown() for o in overlays),
                encoding="utf-8",
            )
    if args.json:
        out = comparison.as_dict()
        if overlays:
            out["predicted"] = [o.as_dict() for o in overlays]
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(
            "\n".join([comparison.markdown(), *(o.markdown() for o in overlays)]) + "\n"
        )
    return EXIT_OK


def _predicted_only(overlays: list[Overlay], args: argparse.Namespace) -> int:
    """One run and --predict: the prediction beside it, nothing to compare with."""
    if args.out:
        overlays[0].write_charts(Path(args.out) / "charts")
        (Path(args.out) / "predicted.md").write_text(overlays[0].markdown(), encoding="utf-8")
    if args.json:
        sys.stdout.write(json.dumps({"predicted": [o.as_dict() for o in overlays]}, indent=2))
        sys.stdout.write("\n")
    else:
        sys.stdout.write(overlays[0].markdown() + "\n")
    return EXIT_OK


def _overlays(runs: list[RunData], stack: str, project_dir: Path | None) -> list[Overlay]:
    """The performance model of ``stack`` beside each run (bench.reports.predicted); the stack
    file found as `pulumi -s` finds it (or in --project-dir)."""
    from serving.capacity.perf_stack import model_for_settings
    from serving.capacity.plan import PlanError, load_stack_file_settings

    problem = named_stack_problem(stack, "--predict", project_dir)
    if problem:
        raise ValueError(problem)
    try:
        path = find_stack_file(stack, project_dir, offers_stack_file=False)
        settings = load_stack_file_settings(path)
    except (PlanError, ProjectError) as exc:
        raise ValueError(f"--predict: {exc}") from None
    say_read("gemma4 bench compare", path)
    model, _ = model_for_settings(settings)
    return [overlay(run, model, stack, settings) for run in runs]


def _fmt(value: float | None, slo: str) -> str:
    if value is None:
        return "none"
    return f"{value:.1%}" if slo == "sloMinSuccessRate" else f"{value:.2f}"


def _gate(args: argparse.Namespace) -> int:
    # A usage error, before the run is read; capitals offered only as a stack the project has.
    problem = named_stack_problem(args.stack, "-s", args.project_dir)
    if problem:
        raise UsageError(problem)
    try:
        run = load_run(args.run)
    except PreflightFailedError as exc:
        if args.json:
            doc = {"passed": False, "problems": [f"preflight failed: {exc}"]}
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            Console(highlight=False, width=120).print(
                f"SLO gate: [red]FAIL[/red]: preflight failed: {escape(redact(exc))}"
            )
        return EXIT_FAILED
    except StoreError as exc:
        raise UsageError(str(exc)) from exc
    try:
        path = find_stack_file(args.stack, args.project_dir, offers_stack_file=False)
        say_read("gemma4 bench gate", path)
        settings = settings_for_stack(args.stack, path.parent)
    except ProjectError as exc:
        raise UsageError(str(exc)) from exc
    except FileNotFoundError as exc:
        raise UsageError(f"no stack file for stack {args.stack!r}: {exc}") from exc
    except (SettingsError, ValueError) as exc:
        raise UsageError(f"stack {args.stack!r} config is invalid: {exc}") from exc
    result = evaluate(run, settings.slo)
    differences = target_differences(run, args.stack, settings)
    if differences and not args.allow_other_target:
        advice = "pass --allow-other-target to judge it by this stack's SLOs anyway"
        result = dataclasses.replace(
            result, problems=(*result.problems, *differences, f"another target: {advice}")
        )
    if args.json:
        doc = result.as_dict()
        doc["target_differences"] = differences
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return EXIT_OK if result.passed else EXIT_FAILED
    console = Console(highlight=False, width=120)
    verdict = "[green]PASS[/green]" if result.passed else "[red]FAIL[/red]"
    console.print(
        f"SLO gate for {escape(run.label)} against stack {escape(args.stack)}: {verdict} "
        f"({result.measured_cells} cells measured, {result.skipped_cells} skipped)"
    )
    for problem in result.problems:
        console.print(f"[red]{escape(redact(problem))}[/red]")
    if differences and args.allow_other_target:
        for difference in differences:
            console.print(f"[yellow]note (--allow-other-target): {escape(redact(difference))}[/]")
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
        words = list(sys.argv[1:] if argv is None else argv)
        refuse_unknown_subcommand(parser, words, ["run", "compare", "gate"])
        args = parser.parse_args(words)
    except SystemExit as exc:
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    # One line per message, however wide: a message is not a paragraph to fill (and logs are
    # greppable).
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        if args.command == "run":
            return _run(args, err)
        if args.command == "compare":
            return _compare(args)
        return _gate(args)
    except UsageError as exc:
        err.print(f"gemma4 bench {args.command}: [red]error:[/red] {escape(redact(exc))}")
        return EXIT_USAGE
    except Exception as exc:  # last resort: one line, never a traceback
        what = escape(redact(f"{type(exc).__name__}: {exc}"))
        err.print(f"gemma4 bench {args.command}: [red]unexpected error:[/red] {what}")
        return EXIT_FAILED
