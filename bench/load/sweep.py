"""A sweep: every cell of a grid against one endpoint, written cell by cell.

Each cell is skipped (recorded ``skipped``, never a 0 % cell) when prompt + output exceed the
model's context; else its prompts are built untimed, its load runs on the hot path
(:mod:`bench.load.hotload`) and its record (``ok``, ``failed`` under ``min_success_rate``,
``short`` when responses were shorter than asked) is appended to ``cells.jsonl`` before the
next cell starts. Before the first cell, :func:`preflight` sends one short request so that a
wrong model, rejected credentials, a URL that is not the server's root or nothing listening
fail the sweep there (:class:`PreflightError`), before anything is written.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.load.hotload import (
    LoadPlan,
    WindowLoad,
    run_load,
    run_load_in_workers,
    split_plan,
    start_workers,
)
from bench.load.hotpath import HotResult, RequestSpec, completions_url, send_one
from bench.load.monitor import MonitorStats
from bench.load.prompts import TOLERANCE, PromptSet, build_prompts, within_tolerance
from bench.load.window import ClientLimits, window_figures
from bench.load.workers import DEFAULT_STREAMS_PER_WORKER, choose_workers
from bench.results.record import RequestResult
from bench.results.stats import GoodputSlo, summarize
from bench.results.store import CellKey, RunData, RunStore
from endpoint.auth import AuthError, AuthStrategy, NoAuth
from endpoint.client import LimitExceeded, make_client, request_capped
from endpoint.errors import TRANSPORT_ERRORS, classify_connection_error
from endpoint.limits import MAX_ECHO_CHARS, MAX_MODEL_IDS_SHOWN, READY_DEADLINE_S
from endpoint.metrics import (
    MetricsParseError,
    MetricsSnapshot,
    SpecDecodeAcceptance,
    parse_metrics,
    spec_decode_acceptance,
)
from endpoint.redact import redact
from healthchecks.checks import Backoff, check_ready

__all__ = [
    "FAILURE_SAMPLES",
    "Grid",
    "PreflightError",
    "SweepOptions",
    "detect_max_model_len",
    "preflight",
    "probe",
    "run_cell",
    "run_sweep",
    "run_sweep_async",
]

TOOL = "gemma4-vllm-gcp bench"
FAILURE_SAMPLES = 20
"""Failed requests kept per cell (kind, HTTP status, redacted body)."""


_READ_ERRORS: tuple[type[BaseException], ...] = (
    *TRANSPORT_ERRORS,
    LimitExceeded,
    ValueError,
    AttributeError,
    AuthError,
)


_PREFLIGHT_ATTEMPTS = 5
"""Tries of the preflight while the server answers 429/503 with ``Retry-After``."""


class PreflightError(Exception):
    """The readiness wait or the one-request check before the first cell failed; the message
    says why, ``status`` and ``body`` keep the server's answer (redacted, cut) when it gave
    one."""

    def __init__(self, message: str, *, status: int | None = None, body: str | None = None):
        super().__init__(message)
        self.status = status
        self.body = body


_READY_BACKOFF = Backoff(initial_s=0.5, max_s=10.0)
"""Polling of ``/health`` before the preflight (Retry-After is honoured on top)."""


@dataclass(frozen=True)
class Grid:
    """The cells of a sweep: the cross product of the four lists."""

    concurrency: tuple[int, ...]
    prompt_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    request_rates: tuple[float | None, ...] = (None,)
    """None: closed loop; a number: open loop at that rate, ``concurrency`` as the cap."""

    def __post_init__(self) -> None:
        for name in ("concurrency", "prompt_tokens", "output_tokens"):
            values = getattr(self, name)
            if not values or any(int(v) < 1 for v in values):
                raise ValueError(f"grid {name} needs positive integers, got {values!r}")
        if any(r is not None and r <= 0 for r in self.request_rates):
            raise ValueError(f"request rates must be positive, got {self.request_rates!r}")

    def cells(self) -> list[CellKey]:
        return [
            CellKey(c, p, o, r)
            for r, o, p, c in itertools.product(
                self.request_rates, self.output_tokens, self.prompt_tokens, self.concurrency
            )
        ]

    def as_dict(self) -> dict[str, Any]:
        return {k: list(v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class SweepOptions:
    """How each cell is run."""

    num_requests: int | None = None
    """Requests per cell; None: ``max(min_requests, requests_per_slot x concurrency)``."""
    min_requests: int = 16
    requests_per_slot: int = 4
    warmup: int = 1
    """Untimed requests per cell after the pool is warm (0 for none)."""
    timeout_s: float = 120.0
    """Per request, send to [DONE]."""
    max_cell_seconds: float | None = 600.0
    """No request starts after this long into a cell."""
    max_model_len: int | None = None
    """Skip cells whose prompt + output exceed it; None: ask ``/v1/models``."""
    goodput_slo: GoodputSlo | None = None
    use_tokenize: bool = True
    distinct_prompts: int = 256
    """Prompts sized per cell (requests cycle through them)."""
    seed: int = 0
    burstiness: float = 1.0
    """Open-loop cells: the gamma shape of the arrival gaps (1 Poisson, under 1 burstier;
    :func:`bench.load.hotload.arrival_gap`)."""
    hardware: str | None = None
    label: str | None = None
    progress: bool = True
    charts: bool = True
    """Draw ``charts/*.png`` at the end of the run (records, CSV and report are always written)."""
    min_success_rate: float = 1.0
    """A cell whose success rate is under this is ``failed`` (default: any failure fails it)."""
    preflight: bool = True
    """Wait for ``/health`` then send one short request before the first cell; stop on a
    failure of either."""
    ready_timeout_s: float = READY_DEADLINE_S
    """How long the preflight waits for ``/health`` to answer 200 (a server still loading)."""
    workers: int | None = None
    """Client processes per cell; None: :func:`bench.load.workers.choose_workers`."""
    streams_per_worker: int = DEFAULT_STREAMS_PER_WORKER
    """With ``workers`` None: streams one process takes before another is added."""
    ramp_s: float | None = None
    """Closed loop: spread of the streams' starts (untimed); None: one request's duration."""
    client_limits: ClientLimits = field(default_factory=ClientLimits)
    """When a cell is marked client-limited (:mod:`bench.load.window`)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form metadata stored in run.json (e.g. the stack name, MTP on/off)."""

    def requests_for(self, key: CellKey) -> int:
        if self.num_requests is not None:
            return self.num_requests
        return max(self.min_requests, self.requests_per_slot * key.concurrency)


async def _model_cards(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    """The cards of ``/v1/models`` (capped read); none when it does not answer 200."""
    reply = await request_capped(client, "GET", "/v1/models")
    data = reply.json() if reply.status == 200 else None
    cards = data.get("data") if isinstance(data, dict) else None
    return [c for c in cards if isinstance(c, dict)] if isinstance(cards, list) else []


async def detect_max_model_len(client: httpx.AsyncClient, model: str) -> int | None:
    """``max_model_len`` of ``model`` from ``/v1/models`` (vLLM reports it), else None."""
    try:
        cards = await _model_cards(client)
    except _READ_ERRORS:
        return None
    for card in cards:
        if card.get("id") == model and isinstance(card.get("max_model_len"), int):
            return int(card["max_model_len"])
    return None


#: What a served version may look like ("0.27.1", "0.27.1+cpu", "0.28.0rc1.dev12+g1a2b3c"):
#: anything else from ``/version`` is not recorded, so a run never carries a claim it cannot
#: back.
_ENGINE_VERSION = re.compile(r"[0-9][0-9A-Za-z.+_-]{0,63}")


async def detect_engine_version(client: httpx.AsyncClient) -> str | None:
    """The engine's release from vLLM's ``GET /version`` (``{"version": "0.27.1"}``), else
    None (another server, an error, or a value that is not a version)."""
    try:
        reply = await request_capped(client, "GET", "/version")
        if reply.status != 200:
            return None
        data = reply.json()
    except _READ_ERRORS:
        return None
    version = data.get("version") if isinstance(data, dict) else None
    if isinstance(version, str) and _ENGINE_VERSION.fullmatch(version):
        return version
    return None


def _ids_text(ids: list[str]) -> str:
    shown = [redact(i, limit=120) for i in ids[:MAX_MODEL_IDS_SHOWN]]
    more = f" and {len(ids) - MAX_MODEL_IDS_SHOWN} more" if len(ids) > MAX_MODEL_IDS_SHOWN else ""
    return (", ".join(repr(i) for i in shown) or "none") + more


async def preflight(
    client: httpx.AsyncClient,
    model: str,
    *,
    auth: AuthStrategy,
    timeout_s: float = 60.0,
) -> RequestResult:
    """One short streamed request; its result when it worked, else :class:`PreflightError`
    saying why (the served models when the name is wrong, the credential used when it is
    rejected, what to check when nothing listens). A 429 or 503 with ``Retry-After`` is
    retried after the time asked when that ends within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    for attempt in range(_PREFLIGHT_ATTEMPTS):
        spec = RequestSpec(model, "Hello", 4)
        result = await send_one(str(client.base_url), spec, auth, timeout_s=timeout_s)
        if result.ok or result.status not in (429, 503) or result.retry_after_s is None:
            break
        wait = max(result.retry_after_s, 0.1 * 2**attempt)
        if attempt + 1 == _PREFLIGHT_ATTEMPTS or time.monotonic() + wait > deadline:
            break  # the server asks for longer than the preflight may wait: report it
        await asyncio.sleep(wait)
    if result.ok:
        return result
    error = redact(result.error or "no detail", limit=MAX_ECHO_CHARS)
    why = await _preflight_problem(client, model, result, error, auth.description)
    raise PreflightError(why, status=result.status, body=error)


async def _preflight_problem(
    client: httpx.AsyncClient, model: str, result: RequestResult, error: str, auth: str
) -> str:
    url = redact(str(client.base_url))
    if result.status in (401, 403):
        return (
            f"{url} rejected the credentials (HTTP {result.status}) sent as {auth}; "
            f"check the key or the caller's roles/run.invoker: {error}"
        )
    if result.status == 404:
        try:
            ids = [str(card.get("id")) for card in await _model_cards(client)]
        except _READ_ERRORS:
            ids = []
        if ids and model not in ids:
            return (
                f"model {redact(model, limit=120)!r} is not served at {url}; it serves "
                f"{_ids_text(ids)} (pass --model with one of them): {error}"
            )
        return (
            f"{url} answered HTTP 404 to /v1/completions: is the URL the server's root (no /v1, "
            f"no path)? {error}"
        )
    if result.error_kind == "auth":
        return f"no credentials ({auth}): {error}"
    if result.error_kind in ("connection", "timeout") and result.status is None:
        return f"cannot reach {url}: {await _connection_hint(client) or error}"
    status_told = result.status is None or error.startswith(f"HTTP {result.status}")
    status = "" if status_told else f", HTTP {result.status}"
    return f"the first request to {url} failed ({result.error_kind}{status}): {error}"


async def wait_ready(client: httpx.AsyncClient, timeout_s: float, *, progress: bool) -> None:
    """Poll ``/health`` until it answers 200 (:func:`healthchecks.checks.check_ready`: a
    loading server is waited for, its port closed or answering 503, Retry-After honoured, a
    name that does not resolve fails at once); :class:`PreflightError` when it is not ready
    within ``timeout_s``."""
    show = (lambda line: print(line, file=sys.stderr, flush=True)) if progress else None
    result = await check_ready(
        client,
        deadline=time.monotonic() + timeout_s,
        backoff=_READY_BACKOFF,
        progress=show,
    )
    if not result.ok:
        status = result.data.get("status")
        raise PreflightError(
            f"{redact(str(client.base_url))} is not ready: {result.detail}",
            status=status if isinstance(status, int) else None,
            body=redact(result.detail, limit=MAX_ECHO_CHARS),
        )


async def _connection_hint(client: httpx.AsyncClient) -> str | None:
    """What to check when the server cannot be reached at all (None when it answers)."""
    try:
        await request_capped(client, "GET", "/health", timeout=10.0)
    except TRANSPORT_ERRORS as exc:
        return classify_connection_error(exc, str(client.base_url)).message()
    except (LimitExceeded, AuthError):
        return None
    return None


def _uvloop_running() -> bool:
    try:
        return "uvloop" in type(asyncio.get_running_loop()).__module__
    except RuntimeError:
        return False


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _auth_failed(n: int, exc: AuthError) -> WindowLoad:
    now = time.monotonic()
    message = redact(f"AuthError: {exc}", limit=MAX_ECHO_CHARS)
    results = [
        HotResult(ok=False, start_s=0.0, e2e_s=0.0, error_kind="auth", error=message, sent_at=now)
        for _ in range(n)
    ]
    return WindowLoad(results, now, now, MonitorStats(0.005), 0.0, 0)


def _spec_decode(
    load: WindowLoad, model: str
) -> tuple[SpecDecodeAcceptance | None, dict[str, Any] | None]:
    """The window's acceptance and vLLM's raw spec-decode counters at its edges (None, None
    without both scrapes or without speculative decoding): calibration derives the figures
    again from the counters and refuses a cell whose counters went backwards."""
    if load.metrics_before is None or load.metrics_after is None:
        return None, None
    try:
        before = parse_metrics(load.metrics_before[1], model_name=model)
        after = parse_metrics(load.metrics_after[1], model_name=model)
    except MetricsParseError:
        return None, None
    if before.spec_decode is None and after.spec_decode is None:
        return None, None

    def counters(snapshot: MetricsSnapshot) -> dict[str, Any] | None:
        c = snapshot.spec_decode
        return (
            None
            if c is None
            else {**asdict(c), "accepted_per_position": list(c.accepted_per_position)}
        )

    raw = {"before": counters(before), "after": counters(after)}
    return spec_decode_acceptance(before, after), raw


async def run_cell(
    url: str,
    model: str,
    key: CellKey,
    prompts: PromptSet,
    *,
    auth: AuthStrategy,
    options: SweepOptions,
) -> tuple[dict[str, Any], list[RequestResult]]:
    """Run one cell on the hot path (:mod:`bench.load.hotload`: connections warmed, warm-up
    requests, staggered start, measured window with the loop monitor and ``/metrics`` read
    at its edges), in this process or in worker processes; its record and its measured
    requests."""
    n = options.requests_for(key)
    distinct = [RequestSpec(model, prompt, key.output_tokens) for prompt in prompts.prompts]
    bodies = tuple(spec.encoded_body for spec in distinct[: max(1, min(n, len(distinct)))])
    started_at = _now()
    workers = options.workers or choose_workers(
        key.concurrency, url, streams_per_worker=options.streams_per_worker
    )
    load: WindowLoad
    try:
        headers = await auth.headers_async()
    except AuthError as exc:
        load = _auth_failed(n, exc)
    else:
        base = url.rstrip("/")
        plan = LoadPlan(
            completions_url(base),
            bodies,
            n,
            key.concurrency,
            request_rate=key.request_rate,
            burstiness=options.burstiness,
            headers=tuple(headers.items()),
            timeout_s=options.timeout_s,
            max_duration_s=options.max_cell_seconds,
            warmup=options.warmup,
            ramp_s=options.ramp_s,
            seed=options.seed,
            metrics_url=base + "/metrics",
            health_url=base,
        )
        if workers > 1:
            # Ctrl-C cancels this task; the event stops the thread and its worker processes
            # at once (else the interpreter waits for the thread to finish the cell).
            stop = threading.Event()
            started = start_workers(len(split_plan(plan, workers)))
            try:
                load = await asyncio.to_thread(
                    run_load_in_workers, plan, workers, stop=stop, started=started
                )
            finally:
                stop.set()
        else:
            load = await run_load(plan)
    results: list[RequestResult] = list(load.results)
    record: dict[str, Any] = {"id": key.id, "status": "ok", "skip_reason": None, **key.as_dict()}
    record.update(summarize(results, load.duration_s, goodput_slo=options.goodput_slo))
    judge(record, results, key, options.min_success_rate)
    record["achieved_request_rate"] = (
        load.achieved_rate
        if key.request_rate is not None
        else (len(results) / load.duration_s if load.duration_s > 0 else None)
    )
    record.update(
        window_figures(
            load, concurrency=key.concurrency, model_name=model, limits=options.client_limits
        )
    )
    acceptance, counters = _spec_decode(load, model)
    return record | {
        "spec_decode_acceptance_rate": acceptance.acceptance_rate if acceptance else None,
        "spec_decode_acceptance_length": acceptance.mean_acceptance_length if acceptance else None,
        "spec_decode": acceptance.as_dict() if acceptance else None,
        "spec_decode_counters": counters,
        "prompt_tokens_method": prompts.method,
        "prompt_tokens_exact": prompts.exact,
        "started_at": started_at,
        "finished_at": _now(),
    }, results


def judge(
    record: dict[str, Any],
    results: list[RequestResult],
    key: CellKey,
    min_success_rate: float,
) -> None:
    """Set ``status``, ``problems``, ``failure_samples``, ``short_requests`` and
    ``mean_output_tokens`` of a cell record from its requests."""
    problems: list[str] = []
    ok = [r for r in results if r.ok]
    outputs = [r.output_tokens or 0 for r in ok]
    short = sum(1 for n in outputs if n < key.output_tokens)
    record["short_requests"] = short
    record["mean_output_tokens"] = sum(outputs) / len(outputs) if outputs else None
    failed = [r for r in results if not r.ok]
    record["failure_samples"] = [
        {
            "kind": r.error_kind,
            "status": r.status,
            "error": redact(r.error or "", limit=MAX_ECHO_CHARS),
        }
        for r in failed[:FAILURE_SAMPLES]
    ]
    statuses: dict[str, int] = {}
    for r in failed:
        label = str(r.status) if r.status is not None else str(r.error_kind)
        statuses[label] = statuses.get(label, 0) + 1
    record["failure_statuses"] = statuses
    rate = record.get("success_rate")
    status = "ok"
    if not results:
        problems.append("no request was sent")
        status = "failed"
    elif rate is None or rate < min_success_rate:
        problems.append(
            f"success rate {0.0 if rate is None else rate:.1%} is under {min_success_rate:.1%} "
            f"({len(failed)} of {len(results)} failed: "
            + ", ".join(f"{k} x{v}" for k, v in sorted(statuses.items()))
            + ")"
        )
        status = "failed"
    if short:
        mean = record["mean_output_tokens"]
        problems.append(
            f"{short} of {len(ok)} responses were shorter than {key.output_tokens} output tokens "
            f"(mean {mean:.1f}): figures are not for output length {key.output_tokens}"
        )
        status = "failed" if status == "failed" else "short"
    counted = sorted(r.prompt_tokens for r in ok if r.prompt_tokens is not None)
    record["median_prompt_tokens"] = counted[len(counted) // 2] if counted else None
    off = [n for n in counted if not within_tolerance(n, key.prompt_tokens)]
    if off:
        problems.append(
            f"{len(off)} of {len(counted)} prompts were not {key.prompt_tokens} tokens as the "
            f"server counted them (e.g. {off[0]}; more than {TOLERANCE:.0%} off): figures are "
            f"not for prompt length {key.prompt_tokens}"
        )
        status = "failed"
    record["status"] = status
    record["problems"] = problems


def _skipped(key: CellKey, reason: str) -> dict[str, Any]:
    return {
        "id": key.id,
        "status": "skipped",
        "skip_reason": reason,
        **key.as_dict(),
        "finished_at": _now(),
    }


def _progress_bar(enabled: bool) -> Any:
    """A rich progress bar over the sweep's requests (stderr; draws nothing unless
    ``enabled``). Redrawn between cells only (no refresh thread): nothing competes with the
    load for the CPU."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        auto_refresh=False,
        disable=not enabled,
    )


_RECORDED_OPTIONS = (
    "num_requests",
    "min_requests",
    "requests_per_slot",
    "warmup",
    "timeout_s",
    "max_cell_seconds",
    "distinct_prompts",
    "seed",
    "burstiness",
    "min_success_rate",
    "use_tokenize",
    "max_model_len",
)
"""The options stored in ``run.json``: those a resumed run must repeat (one experiment)."""


async def run_sweep_async(
    url: str,
    model: str,
    grid: Grid,
    out_dir: str | Path,
    *,
    auth: AuthStrategy | None = None,
    options: SweepOptions | None = None,
    resume: bool = False,
    on_cell: Callable[[dict[str, Any]], None] | None = None,
) -> RunData:
    """Run ``grid`` against ``url`` into ``out_dir`` (locked for the whole sweep); returns the
    run. ``resume`` continues the same experiment there, running only the cells not finished; a
    failed preflight raises :class:`PreflightError` having written only ``preflight.json``.
    ``on_cell`` gets each record once written (an exception from it stops the sweep)."""
    auth = auth or NoAuth()
    options = options or SweepOptions()
    meta: dict[str, Any] = {
        "tool": TOOL,
        "created_at": _now(),
        "url": redact(url),
        "model": model,
        "hardware": options.hardware,
        "label": options.label,
        "grid": grid.as_dict(),
        "auth": auth.description,
        "endpoint": "/v1/completions (stream, include_usage, continuous_usage_stats)",
        "options": {
            **{name: getattr(options, name) for name in _RECORDED_OPTIONS},
            "goodput_slo": options.goodput_slo.as_dict() if options.goodput_slo else None,
        },
        "client": {
            "hot_path": "aiohttp" + (" + uvloop" if _uvloop_running() else ""),
            "workers": options.workers,
            "streams_per_worker": options.streams_per_worker,
            "ramp_s": options.ramp_s,
            "client_limits": options.client_limits.as_dict(),
        },
        **options.extra,
    }
    store = RunStore.open(out_dir, meta, resume=resume, write=False)
    try:
        return await _sweep(url, model, grid, store, auth, options, on_cell)
    finally:
        store.close()


async def _sweep(
    url: str,
    model: str,
    grid: Grid,
    store: RunStore,
    auth: AuthStrategy,
    options: SweepOptions,
    on_cell: Callable[[dict[str, Any]], None] | None,
) -> RunData:
    from bench.reports.charts import write_charts
    from bench.reports.tables import write_tables

    async with make_client(url, auth=auth, timeout_s=options.timeout_s, max_concurrency=8) as c:
        if options.preflight:
            try:
                await wait_ready(c, options.ready_timeout_s, progress=options.progress)
                await preflight(c, model, auth=auth, timeout_s=min(options.timeout_s, 60.0))
            except PreflightError as exc:
                store.write_preflight_failure(
                    {
                        "tool": TOOL,
                        "at": _now(),
                        "url": redact(url),
                        "model": redact(model, limit=MAX_ECHO_CHARS),
                        "reason": redact(exc, limit=2 * MAX_ECHO_CHARS),
                        "status": exc.status,
                        "body": exc.body,
                    }
                )
                raise
            store.clear_preflight_failure()
        max_len = options.max_model_len or await detect_max_model_len(c, model)
        store.run["max_model_len"] = max_len
        # The release that served the run: `gemma4 plan calibrate` applies a calibration only to
        # the engine it was measured on, and refuses a run that does not say.
        store.run["engine_version"] = await detect_engine_version(c)
        store.write_run()
        done = store.finished_ids()
        todo = [k for k in grid.cells() if k.id not in done]
        progress = _progress_bar(options.progress)
        bar = progress.add_task("sweep", total=sum(options.requests_for(k) for k in todo))
        progress.start()
        prompt_cache: dict[int, PromptSet] = {}
        results: list[RequestResult]
        try:
            for key in todo:
                progress.update(bar, description=f"cell {key.id}", refresh=True)
                if max_len is not None and key.prompt_tokens + key.output_tokens > max_len:
                    reason = (
                        f"prompt {key.prompt_tokens} + output {key.output_tokens} tokens exceed "
                        f"max_model_len {max_len}"
                    )
                    record, results = _skipped(key, reason), []
                else:
                    prompts = prompt_cache.get(key.prompt_tokens)
                    if prompts is None:
                        count = min(
                            options.distinct_prompts,
                            max(
                                options.requests_for(k)
                                for k in todo
                                if k.prompt_tokens == key.prompt_tokens
                            ),
                        )
                        prompts = await build_prompts(
                            c,
                            model,
                            key.prompt_tokens,
                            count,
                            seed=options.seed + key.prompt_tokens,
                            use_tokenize=options.use_tokenize,
                        )
                        prompt_cache[key.prompt_tokens] = prompts
                    record, results = await run_cell(
                        url, model, key, prompts, auth=auth, options=options
                    )
                progress.update(bar, advance=options.requests_for(key), refresh=True)
                store.write_requests(record["id"], results)  # before the cell counts as done
                store.append_cell(record)
                write_tables(store.data())
                if on_cell is not None:
                    on_cell(record)
            store.run["finished_at"] = _now()
        finally:
            progress.stop()
            store.write_run()
            write_tables(store.data())
            if options.charts:
                write_charts(store.data())
    return store.data()


def run_sweep(
    url: str,
    model: str,
    grid: Grid,
    out_dir: str | Path,
    *,
    auth: AuthStrategy | None = None,
    options: SweepOptions | None = None,
    resume: bool = False,
    on_cell: Callable[[dict[str, Any]], None] | None = None,
) -> RunData:
    """:func:`run_sweep_async` in a fresh event loop (for scripts and the Pulumi hook)."""
    return asyncio.run(
        run_sweep_async(
            url, model, grid, out_dir, auth=auth, options=options, resume=resume, on_cell=on_cell
        )
    )


async def probe(url: str, model: str, *, auth: AuthStrategy | None = None) -> RequestResult:
    """One short streamed request (a smoke test before a sweep); never raises for a failed
    request: the result says what went wrong."""
    return await send_one(url, RequestSpec(model, "Hello", 8), auth or NoAuth(), timeout_s=60.0)
