"""The shared client factory: aiohttp transport, pool limits from the caller's concurrency."""

from __future__ import annotations

import asyncio

import httpx
from httpx_aiohttp import AiohttpTransport

from endpoint.auth import ApiKeyAuth
from endpoint.client import make_client
from tests.healthchecks._helpers import ServerFactory, arriving_at_once


def test_transport_and_limits() -> None:
    client = make_client("http://127.0.0.1:1/", max_concurrency=512, timeout_s=7)
    transport = client._transport
    assert isinstance(transport, AiohttpTransport)
    assert transport.limits.max_connections == 512
    assert transport.limits.max_keepalive_connections == 512
    assert client.timeout == httpx.Timeout(7)
    assert str(client.base_url) == "http://127.0.0.1:1"
    asyncio.run(client.aclose())


def test_connection_limit_is_enforced(fake_vllm: ServerFactory) -> None:
    """Seen by the server, not by a stopwatch: with two allowed, never more than two requests
    are generated at once; with four allowed, four are at the server at the same time."""
    body = {"prompt": "x"}
    paced = fake_vllm(ttft_s=0.2, output_tokens=1)

    async def limited() -> float:
        async with make_client(paced.url, max_concurrency=2) as client:
            loop = asyncio.get_running_loop()
            started = loop.time()
            replies = await asyncio.gather(
                *(client.post("/v1/completions", json=body) for _ in range(4))
            )
            assert [r.status_code for r in replies] == [200] * 4
            return loop.time() - started

    took = asyncio.run(limited())
    assert len(paced.timings) == 4
    assert paced.peak_in_flight == 2  # never more than the limit at once
    assert took >= 0.4  # two rounds of two, each paced by the server's 0.2 s

    # A server that never answers holds every request it gets: all four reach it at once.
    held = fake_vllm(hang_paths=("/v1/completions",))

    async def at_once() -> int:
        async with make_client(held.url, max_concurrency=4) as client:
            return await arriving_at_once(
                held, 4, lambda: client.post("/v1/completions", json=body)
            )

    assert asyncio.run(at_once()) == 4


def test_auth_header_added(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(api_key="abc")

    async def run() -> int:
        auth = ApiKeyAuth("K", environ={"K": "abc"})
        async with make_client(server.url, auth=auth) as client:
            return (await client.get("/v1/models")).status_code

    assert asyncio.run(run()) == 200
    assert server.requests[0].authorization == "Bearer abc"
