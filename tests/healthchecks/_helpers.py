"""Shared constants and helpers for the health-check tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tests.support.fake_vllm import FakeVllmServer, ServerFactory

MODEL = "google/gemma-4-12B-it"
FAST = ["--backoff-max-seconds", "0.05", "--timeout-seconds", "300"]
"""CLI flags that keep the tests fast: short backoff. The deadline is one no test waits for (a
test that needs one ends sooner passes its own): checks that take 0.1 s idle pass however loaded
the machine."""


async def arriving_at_once(
    server: FakeVllmServer, count: int, request: Callable[[], Awaitable[object]]
) -> int:
    """Start ``count`` ``request()`` at once against a server that holds them (it never
    answers) and wait until it has received them all: how many it received. The wait ends
    when they have arrived; its 60 s bound only turns a missing request into a failure."""
    tasks = [asyncio.ensure_future(request()) for _ in range(count)]
    try:

        async def arrived() -> None:
            while len(server.requests) < count:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(arrived(), 60)
        return len(server.requests)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["FAST", "MODEL", "ServerFactory", "arriving_at_once"]
