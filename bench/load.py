"""Load drivers: closed loop at a fixed concurrency, open loop at a Poisson request rate.

Both take a list of :class:`~bench.request.RequestSpec` (one per request, in order) and return
every :class:`~bench.request.RequestResult` with the cell's duration, measured from the first
send to the last answer (what throughput is divided by).

- Closed loop: ``concurrency`` workers each send a request, wait for its answer and send the
  next, so exactly ``concurrency`` requests are in flight until the list runs out.
- Open loop: arrivals follow a Poisson process of rate ``request_rate`` (exponential gaps from a
  seeded generator), each request sent at its arrival time whatever the state of earlier ones,
  with at most ``max_concurrency`` in flight (``vllm bench serve --max-concurrency``); a request
  that finds no free slot waits, and the achieved rate records that.

``max_duration_s`` bounds a cell: no request is started after it (those in flight finish or
time out), and the requests never sent are not counted.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from endpoint.client import LimitExceeded, request_capped
from endpoint.limits import MAX_ERROR_BODY_BYTES

from .request import RequestResult, RequestSpec, send_request

__all__ = ["LoadResult", "closed_loop", "open_loop", "warm_pool"]

OnDone = Callable[[RequestResult], None]


@dataclass
class LoadResult:
    """What one cell's load produced."""

    results: list[RequestResult]
    duration_s: float
    offered_rate: float | None = None
    """Requests/s asked for (open loop), else None."""
    send_times_s: list[float] | None = None
    """Open loop: when each request was sent, seconds after the cell started."""

    @property
    def achieved_rate(self) -> float | None:
        """Open loop: the rate requests were actually sent at, (n - 1) / (last - first send);
        below ``offered_rate`` when the client (or the concurrency cap) could not keep up.
        Closed loop: requests answered per second of the cell."""
        if self.send_times_s is not None:
            span = self.send_times_s[-1] - self.send_times_s[0] if self.send_times_s else 0.0
            return (len(self.send_times_s) - 1) / span if span > 0 else None
        return len(self.results) / self.duration_s if self.duration_s > 0 else None


def _encode(specs: Sequence[RequestSpec]) -> None:
    """Serialise every request body before the clock starts (each distinct spec once)."""
    for spec in specs:
        _ = spec.encoded_body


async def warm_pool(client: httpx.AsyncClient, connections: int, path: str = "/health") -> int:
    """Open ``connections`` keep-alive connections (concurrent GETs); returns how many answered.

    Connection set-up then happens before the timed cell, not inside its first requests.
    """

    async def one() -> bool:
        try:
            # Read to the end (so the connection goes back to the pool), but never more than a
            # cap: a server cannot make warm-up hold a large answer.
            reply = await request_capped(client, "GET", path, max_bytes=MAX_ERROR_BODY_BYTES)
            return reply.status < 500
        except (httpx.HTTPError, LimitExceeded):
            return False

    answered = await asyncio.gather(*(one() for _ in range(max(1, connections))))
    return sum(answered)


async def closed_loop(
    client: httpx.AsyncClient,
    specs: Sequence[RequestSpec],
    concurrency: int,
    *,
    timeout_s: float,
    max_duration_s: float | None = None,
    on_done: OnDone | None = None,
) -> LoadResult:
    """Send ``specs`` with ``concurrency`` requests in flight (see the module docstring)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    _encode(specs)
    results: list[RequestResult] = []
    next_index = 0
    start = time.perf_counter()
    stop_at = start + max_duration_s if max_duration_s is not None else None

    async def worker() -> None:
        nonlocal next_index
        while next_index < len(specs):
            if stop_at is not None and time.perf_counter() >= stop_at:
                return
            spec = specs[next_index]
            next_index += 1
            result = await send_request(client, spec, timeout_s=timeout_s)
            results.append(result)
            if on_done is not None:
                on_done(result)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(specs)))))
    return LoadResult(results, time.perf_counter() - start)


async def open_loop(
    client: httpx.AsyncClient,
    specs: Sequence[RequestSpec],
    request_rate: float,
    *,
    max_concurrency: int,
    timeout_s: float,
    seed: int = 0,
    max_duration_s: float | None = None,
    on_done: OnDone | None = None,
) -> LoadResult:
    """Send ``specs`` at Poisson arrivals of ``request_rate``/s (see the module docstring)."""
    if request_rate <= 0:
        raise ValueError(f"request_rate must be positive, got {request_rate}")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    _encode(specs)
    rng = random.Random(seed)
    slots = asyncio.Semaphore(max_concurrency)
    results: list[RequestResult] = []
    tasks: list[asyncio.Task[None]] = []
    sent: list[float] = []

    async def one(spec: RequestSpec) -> None:
        try:
            result = await send_request(client, spec, timeout_s=timeout_s)
        finally:
            slots.release()
        results.append(result)
        if on_done is not None:
            on_done(result)

    start = time.perf_counter()
    due = start
    stop_at = start + max_duration_s if max_duration_s is not None else None
    for spec in specs:
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if stop_at is not None and time.perf_counter() >= stop_at:
            break
        await slots.acquire()
        sent.append(time.perf_counter() - start)
        tasks.append(asyncio.create_task(one(spec)))
        due += rng.expovariate(request_rate)
    if tasks:
        await asyncio.gather(*tasks)
    duration = time.perf_counter() - start
    return LoadResult(results, duration, offered_rate=request_rate, send_times_s=sent)
