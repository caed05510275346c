"""The one HTTP client factory, shared by the health checks and the benchmark.

It builds an :class:`httpx.AsyncClient` on the ``httpx-aiohttp`` transport with its connection
pool sized from the caller's concurrency. httpx's own pool costs grow steeply with connections in
flight (on a 2-core machine a plain httpx loop reported 55x a server's real latency at 512
concurrent requests, the aiohttp transport about 3x) and its default limits (100 connections)
silently cap a load test's concurrency. `python -m bench.fidelity` measures what remains.
"""

from __future__ import annotations

import httpx
from httpx_aiohttp import AiohttpTransport

from .auth import AuthStrategy, NoAuth

__all__ = ["make_client"]


def make_client(
    base_url: str,
    *,
    auth: AuthStrategy | None = None,
    timeout_s: float = 60.0,
    max_concurrency: int = 4,
    headers: dict[str, str] | None = None,
) -> httpx.AsyncClient:
    """An async client for ``base_url``.

    ``auth`` adds credentials to every request (raising :class:`~healthchecks.auth.AuthError`
    before sending when it cannot); ``timeout_s`` bounds connect, read, write and pool waits of
    each request; ``max_concurrency`` sets both the connection limit and the keep-alive pool, so
    that many requests can be in flight at once without queueing in the client.
    """
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    limits = httpx.Limits(
        max_connections=max_concurrency, max_keepalive_connections=max_concurrency
    )
    return httpx.AsyncClient(
        base_url=base_url.rstrip("/"),
        auth=auth if auth is not None else NoAuth(),
        timeout=httpx.Timeout(timeout_s),
        limits=limits,
        headers=headers,
        transport=AiohttpTransport(limits=limits),
        follow_redirects=False,
    )
