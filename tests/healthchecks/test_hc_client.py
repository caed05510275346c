"""The shared client factory: aiohttp transport, pool limits from the caller's concurrency."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from httpx_aiohttp import AiohttpTransport

from endpoint.auth import ApiKeyAuth
from endpoint.client import make_client
from tests.healthchecks._helpers import ServerFactory


def test_transport_and_limits() -> None:
    client = make_client("http://127.0.0.1:1/", max_concurrency=512, timeout_s=7)
    transport = client._transport
    assert isinstance(transport, AiohttpTransport)
    assert transport.limits.max_connections == 512
    assert transport.limits.max_keepalive_connections == 512
    assert client.timeout == httpx.Timeout(7)
    assert str(client.base_url) == "http://127.0.0.1:1"
    asyncio.run(client.aclose())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"max_concurrency": 0}, "max_concurrency"), ({"timeout_s": 0}, "timeout_s")],
)
def test_rejects_bad_settings(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_client("http://h", **kwargs)  # type: ignore[arg-type]


def test_connection_limit_is_enforced(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(ttft_s=0.2, output_tokens=1)
    body = {"prompt": "x"}

    async def run(concurrency: int) -> float:
        async with make_client(server.url, max_concurrency=concurrency) as client:
            loop = asyncio.get_running_loop()
            started = loop.time()
            await asyncio.gather(*(client.post("/v1/completions", json=body) for _ in range(4)))
            return loop.time() - started

    assert asyncio.run(run(4)) < 0.35  # all four at once
    assert asyncio.run(run(2)) >= 0.4  # two rounds of two


def test_auth_header_added(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(api_key="abc")

    async def run() -> int:
        auth = ApiKeyAuth("K", environ={"K": "abc"})
        async with make_client(server.url, auth=auth) as client:
            return (await client.get("/v1/models")).status_code

    assert asyncio.run(run()) == 200
    assert server.requests[0].authorization == "Bearer abc"
