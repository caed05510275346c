"""A Pulumi resource hook that ends `pulumi up` with a short benchmark of what it deployed: a few
cells through the sweep of ``python -m bench run``, a summary in the `pulumi up` output, the
full run in ``<results>/<stack>/<timestamp>-<resource>``, then the stack's SLOs: a miss is a
warning unless ``benchmarkFailOnSlo``. An unreachable endpoint fails the hook; the hook never
runs past its budget.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi

from bench.load.sweep import Grid, SweepOptions, probe, run_sweep_async
from bench.results.gate import GateResult, evaluate
from bench.results.store import RunData
from endpoint.auth import AuthStrategy
from endpoint.redact import redact
from endpoint.targets import AuthFactory, resolve_auth, url_from_outputs
from serving.config.groups import SloSettings

__all__ = ["BenchmarkFailedError", "BenchmarkHookConfig", "benchmark_hook", "summary_lines"]

Log = Callable[[str], None]
#: Given when the first token came (None: not timed), the run record's ``start`` block and the
#: hook's line about it (docs/benchmark-reference.md, "Measured starts").
StartRecord = Callable[[dt.datetime | None], tuple[dict[str, Any], str]]
#: A :data:`StartRecord` for the resource a hook runs after.
StartRecorder = Callable[[pulumi.ResourceHookArgs, dt.datetime | None], tuple[dict[str, Any], str]]


class BenchmarkFailedError(Exception):
    """The post-deploy benchmark could not run, or missed an SLO the stack enforces."""


@dataclass(frozen=True)
class BenchmarkHookConfig:
    stack: str
    served_model_name: str
    hardware: str
    grid: Grid
    budget_s: float
    slo: SloSettings
    fail_on_slo: bool = False
    results_dir: Path = Path("bench-results")
    #: Requests per cell: enough for a p95 in about a minute on the stack's hardware.
    requests_per_slot: int = 2
    min_requests: int = 8
    extra: Mapping[str, Any] = field(default_factory=dict)


def _fmt(value: Any, spec: str, unit: str = "") -> str:
    return f"{value:{spec}}{unit}" if isinstance(value, int | float) else "-"


def summary_lines(run: RunData) -> list[str]:
    """One line per cell: TTFT p50/p95, tokens/s, requests/s, success, MTP acceptance."""
    lines = []
    for cell in run.cells:
        head = f"c={cell['concurrency']} prompt={cell['prompt_tokens']} out={cell['output_tokens']}"
        if cell.get("status") == "skipped":
            lines.append(f"{head}: skipped ({cell.get('skip_reason')})")
            continue
        if cell.get("status") != "ok":
            problems = "; ".join(cell.get("problems") or [])
            lines.append(redact(f"{head}: {cell.get('status')}: {problems}"))
            continue
        text = (
            f"{head}: TTFT p50 {_fmt(cell.get('median_ttft_ms'), '.0f', ' ms')}"
            f" p95 {_fmt(cell.get('p95_ttft_ms'), '.0f', ' ms')},"
            f" {_fmt(cell.get('output_throughput'), '.1f')} tok/s,"
            f" {_fmt(cell.get('request_throughput'), '.2f')} req/s,"
            f" success {_fmt(cell.get('success_rate'), '.1%')}"
        )
        if cell.get("spec_decode_acceptance_rate") is not None:
            text += (
                f", MTP acceptance {_fmt(cell['spec_decode_acceptance_rate'], '.1%')}"
                f" (mean length {_fmt(cell.get('spec_decode_acceptance_length'), '.2f')})"
            )
        share = cell.get("client_share_ttft")
        if share is not None:
            text += f", client share of TTFT {_fmt(share, '.1%')}"
        if cell.get("client_limited"):
            text += " (client-limited: " + redact("; ".join(cell.get("warnings") or [])) + ")"
        lines.append(text)
    return lines


def _gate_lines(result: GateResult) -> list[str]:
    return [
        f"{c.cell}: {c.slo} {c.metric}={_fmt(c.value, '.3g')} "
        f"(needs {c.comparison} {c.threshold:g})"
        for c in result.failures
    ] + [redact(p) for p in result.problems]


async def run_post_deploy_benchmark(
    url: str,
    auth: AuthStrategy,
    config: BenchmarkHookConfig,
    log: Log,
    warn: Log,
    resource: str = "serving",
    start: StartRecord | None = None,
) -> tuple[RunData, GateResult]:
    """Probe, sweep and gate within ``config.budget_s``; raise BenchmarkFailedError on failure.
    ``start``: the instance's start, given the probe's first token, goes into the run record."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + config.budget_s
    sent = dt.datetime.now(dt.UTC)
    try:
        first = await asyncio.wait_for(
            probe(url, config.served_model_name, auth=auth), timeout=min(60.0, config.budget_s)
        )
    except TimeoutError:
        raise BenchmarkFailedError(
            redact(f"{url} did not answer a first request in time")
        ) from None
    if not first.ok:
        raise BenchmarkFailedError(
            redact(f"cannot benchmark {url}: {first.error_kind}: {first.error or 'no detail'}")
        )
    extra = {"stack": config.stack, "trigger": "pulumi up", **config.extra}
    if start is not None:
        ttft = first.ttft_s
        block, line = start(None if ttft is None else sent + dt.timedelta(seconds=ttft))
        log(redact(line))
        if block:
            extra["start"] = block
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = config.results_dir / config.stack / f"{stamp}-{resource}"
    cells = len(config.grid.cells())
    remaining = max(1.0, deadline - loop.time())
    options = SweepOptions(
        min_requests=config.min_requests,
        requests_per_slot=config.requests_per_slot,
        warmup=1,
        timeout_s=min(120.0, remaining),
        max_cell_seconds=remaining / cells,
        hardware=config.hardware,
        label=f"{config.stack} post-deploy",
        progress=False,
        preflight=False,  # the probe above was the preflight
        extra=extra,
    )
    try:
        run = await asyncio.wait_for(
            run_sweep_async(
                url,
                config.served_model_name,
                config.grid,
                out_dir,
                auth=auth,
                options=options,
                on_cell=lambda record: log(f"benchmark cell {record['id']} done"),
            ),
            timeout=remaining + 5.0,
        )
    except TimeoutError:
        raise BenchmarkFailedError(
            redact(
                f"benchmark of {url} did not finish within {config.budget_s:.0f} s "
                f"(benchmarkBudgetSeconds); finished cells are in {out_dir}"
            )
        ) from None
    for line in summary_lines(run):
        log(line)
    log(f"full run: {out_dir} (report.md, results.csv, cells.jsonl, charts/)")
    result = evaluate(run, config.slo)
    if not result.passed:
        message = redact(
            f"{config.stack} misses its SLOs: " + "; ".join(_gate_lines(result)), limit=4000
        )
        if config.fail_on_slo:
            raise BenchmarkFailedError(message)
        warn(message + " (warning only; set benchmarkFailOnSlo to fail `pulumi up`)")
    else:
        log(f"{config.stack} meets its SLOs in every measured cell")
    return run, result


def benchmark_hook(
    name: str,
    config: BenchmarkHookConfig,
    *,
    auth: AuthStrategy | AuthFactory | None = None,
    url_keys: Sequence[str] = ("uri", "url"),
    log: Log | None = None,
    warn: Log | None = None,
    fixed_url: str | None = None,
    start: StartRecorder | None = None,
) -> pulumi.ResourceHook:
    """A named :class:`pulumi.ResourceHook` running the post-deploy benchmark; `fixed_url`:
    the endpoint, whatever the resource's outputs say (the stack knows where it serves);
    `start`: the resource's start, recorded in the run."""

    async def post_deploy_benchmark(args: pulumi.ResourceHookArgs) -> None:
        url = fixed_url or url_from_outputs(args.new_outputs, url_keys)
        if url is None:
            raise BenchmarkFailedError(
                f"benchmark of {args.name}: no endpoint URL in the outputs "
                f"(looked for {', '.join(url_keys)})"
            )
        await run_post_deploy_benchmark(
            url,
            resolve_auth(auth, url),
            config,
            log or (lambda m: pulumi.log.info(f"{args.name}: {m}")),
            warn or (lambda m: pulumi.log.warn(f"{args.name}: {m}")),
            # Each TPU replica runs this hook: one folder per resource.
            resource=args.name,
            start=None if start is None else lambda first: start(args, first),
        )

    return pulumi.ResourceHook(name, post_deploy_benchmark)
