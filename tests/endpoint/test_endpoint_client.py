"""Caps, Retry-After and connection-failure classification, against real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import datetime as dt
import http.server
import threading
import tracemalloc
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import httpx
import pytest

from endpoint.client import (
    LimitExceeded,
    iter_lines_capped,
    make_client,
    request_capped,
    retry_after_seconds,
)
from endpoint.errors import classify_connection_error
from endpoint.limits import MAX_METRICS_BYTES
from endpoint.metrics import MetricsParseError, fetch_metrics
from tests.support.fake_vllm import ServerFactory


@pytest.fixture
def plain_http() -> Iterator[int]:
    """A plain-HTTP server (the standard library's), for https:// against it."""

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


async def _failure(url: str) -> BaseException:
    # A timeout far past any refusal, handshake or resolver answer: the failure classified is
    # the real one, however slowly a loaded machine or a slow resolver gives it (a timeout
    # would be its own kind, "timeout", and fail the assertions on the kind).
    async with make_client(url, timeout_s=600.0) as client:
        try:
            await client.get("/health")
        except Exception as exc:
            return exc
    raise AssertionError("the request succeeded")


def _classify(url: str) -> tuple[str, str, bool]:
    problem = classify_connection_error(asyncio.run(_failure(url)), url)
    return problem.kind, problem.message(), problem.not_listening


def test_closed_port_is_refused_and_not_listening(closed_port: int) -> None:
    port = closed_port
    kind, message, not_listening = _classify(f"http://127.0.0.1:{port}")
    assert (kind, not_listening) == ("refused", True)
    assert f"127.0.0.1:{port}" in message and "check the port" in message


def test_https_against_plain_http_is_a_tls_failure(plain_http: int) -> None:
    kind, message, not_listening = _classify(f"https://127.0.0.1:{plain_http}")
    assert (kind, not_listening) == ("tls", True)
    assert "use http://" in message


def test_unresolvable_host_is_a_dns_failure() -> None:
    kind, message, not_listening = _classify("http://no-such-host.invalid:8000")
    assert (kind, not_listening) == ("dns", True)
    assert "'no-such-host.invalid' does not resolve" in message


def peak_bytes(work: Callable[[], Coroutine[Any, Any, None]], refusal: str) -> int:
    """The most memory Python held while ``work`` ran and was refused with ``refusal``."""
    tracemalloc.start()
    try:
        with pytest.raises(LimitExceeded, match=refusal):
            asyncio.run(work())
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_gzip_bomb_on_metrics_is_refused_in_bounded_memory(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(metrics_gzip_bomb=4 * MAX_METRICS_BYTES)

    async def scrape() -> None:
        async with make_client(server.url) as client:
            await fetch_metrics(client)

    peak = peak_bytes(scrape, "/metrics is larger than")
    assert peak < 3 * MAX_METRICS_BYTES  # not the 64 MiB it inflates to


def test_metrics_under_the_cap_parse(fake_vllm: ServerFactory) -> None:
    server = fake_vllm()

    async def scrape() -> float | None:
        async with make_client(server.url) as client:
            return (await fetch_metrics(client)).num_requests_running

    assert asyncio.run(scrape()) == 0.0
    bad = fake_vllm(malformed_metrics=True)

    async def scrape_bad() -> None:
        async with make_client(bad.url) as client:
            await fetch_metrics(client)

    with pytest.raises(MetricsParseError):
        asyncio.run(scrape_bad())


def test_a_body_over_the_cap_is_refused(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(served_model_name="m" * 200_000)

    async def models() -> None:
        async with make_client(server.url) as client:
            await request_capped(client, "GET", "/v1/models", max_bytes=10_000)

    with pytest.raises(LimitExceeded, match="larger than 10000 bytes"):
        asyncio.run(models())


def test_a_huge_stream_line_is_refused(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(huge_sse_line=8 << 20)

    async def read() -> None:
        body = {"model": "google/gemma-4-12B-it", "prompt": "hi", "max_tokens": 2, "stream": True}
        async with (
            make_client(server.url) as client,
            client.stream("POST", "/v1/completions", json=body) as response,
        ):
            async for _ in iter_lines_capped(response, 1 << 20):
                pass

    peak = peak_bytes(read, "longer than 1048576 bytes")
    # Refused near the 1 MiB cap (about 2.5 MiB at the peak, what the cap and one read hold),
    # never holding the 8 MiB line (16 MiB at the peak when the length is checked at its end).
    assert peak < 6 << 20


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        ("0", 0.0),
        ("2.5", 2.5),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # in the past: now
        ("-3", None),
        ("inf", None),
        ("nan", None),
        ("soon", None),
    ],
)
def test_retry_after(value: str, expected: float | None) -> None:
    now = dt.datetime(2015, 10, 21, 7, 28, 0, tzinfo=dt.UTC)
    assert retry_after_seconds(httpx.Headers({"Retry-After": value}), now=now) == expected
    assert retry_after_seconds(httpx.Headers({})) is None


def test_json_nested_past_the_parsers_depth_is_a_value_error() -> None:
    """Callers catch ValueError for a body that is not JSON; a body nested past Python's parser
    depth is one of those, not a RecursionError that escapes them."""
    from endpoint.client import Reply

    reply = Reply(200, httpx.Headers(), b"[" * 200_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        reply.json()
