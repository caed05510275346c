"""The load generator's hot path: one streamed completion on aiohttp directly.

Everything the client does between sending a request and reading its last byte is paid for in
the figures it reports, so this path is kept short: aiohttp's own client (the httpx-over-aiohttp
transport cost about 30 ms of median TTFT at 512 streams on 2 cores), one session per cell
sized to its streams and warmed before the timed part, bodies serialised and headers resolved
before the cell, one clock reading per network read (not per event; coalesced reads:
:mod:`bench.load.sse`).

Each request asks for ``continuous_usage_stats``, so output tokens come from the server's usage,
never from the number of chunks. TTFT: send to the first chunk with text; TPOT: ``(e2e - ttft)
/ (output_tokens - 1)``; E2EL: send to ``data: [DONE]``. Errors are sorted into
:data:`~bench.results.record.ERROR_KINDS`; an error body is read up to a cap, redacted and cut.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from bench.load.sse import StreamedError, StreamParser, StreamProtocolError
from bench.results.record import ErrorKind, RequestResult
from endpoint.auth import AuthError, AuthStrategy
from endpoint.client import retry_after_seconds
from endpoint.errors import status_line
from endpoint.limits import MAX_ECHO_CHARS, MAX_ERROR_BODY_BYTES
from endpoint.redact import redact

__all__ = [
    "HotResult",
    "InFlight",
    "RequestSpec",
    "make_session",
    "send_one",
    "stream_completion",
    "warm_connections",
]

COMPLETIONS_PATH = "/v1/completions"

_BASE_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "text/event-stream",
    "Accept-Encoding": "identity",
}
"""No compression: the stream is read as sent (and no compressed bomb can be inflated)."""


@dataclass(frozen=True)
class RequestSpec:
    """What to send: a prompt and how many tokens to generate."""

    model: str
    prompt: str
    max_tokens: int
    ignore_eos: bool = True
    """vLLM's extension: generate exactly ``max_tokens`` (the cell's output length)."""

    @functools.cached_property
    def encoded_body(self) -> bytes:
        """The streamed ``/v1/completions`` body, serialised once (long prompts cost the client
        time to encode: the load encodes every spec before the timed part of a cell)."""
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": self.prompt,
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        if self.ignore_eos:
            body["ignore_eos"] = True
        return json.dumps(body).encode()


@dataclass
class HotResult(RequestResult):
    """A :class:`~bench.results.record.RequestResult` with the read pattern it was measured from."""

    reads: int = 0
    """Network reads that carried at least one content chunk."""
    coalesced_tokens: int = 0
    """Tokens in chunks that shared a read with an earlier content chunk."""
    content_chunks: int = 0
    """Streamed chunks that carried generated tokens: vLLM sends one per engine step, so the
    gaps between them are what its `vllm:inter_token_latency_seconds` observes (one sample per
    step, several tokens with speculative decoding)."""
    sent_at: float = 0.0
    """``time.monotonic()`` at send: one clock across this machine's processes (merging)."""


class InFlight:
    """Requests between the start of their send and the end of their reading."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


def make_session(connections: int, *, timeout_s: float = 120.0) -> aiohttp.ClientSession:
    """A session whose connector keeps ``connections`` connections open (no other cap).

    Per-request deadlines are the caller's (``asyncio.timeout``); the session's own timeout
    only bounds connection set-up.
    """
    if connections < 1:
        raise ValueError(f"connections must be at least 1, got {connections}")
    connector = aiohttp.TCPConnector(
        limit=connections, limit_per_host=0, ttl_dns_cache=None, enable_cleanup_closed=False
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout_s),
        auto_decompress=False,
        read_bufsize=2**16,
    )


async def warm_connections(
    session: aiohttp.ClientSession,
    base_url: str,
    connections: int,
    *,
    headers: Mapping[str, str] | None = None,
    path: str = "/health",
) -> int:
    """Open ``connections`` keep-alive connections (concurrent GETs); how many answered."""
    url = base_url.rstrip("/") + path

    async def one() -> bool:
        try:
            # Read to the end, so the connection goes back to the pool, but never more than a
            # cap: a server cannot make warm-up hold a large answer (past the cap the
            # connection is closed instead of kept).
            async with session.get(url, headers=headers) as response:
                left = MAX_ERROR_BODY_BYTES
                while left > 0 and (chunk := await response.content.read(left)):
                    left -= len(chunk)
                return response.status < 500
        except (TimeoutError, aiohttp.ClientError, OSError):
            return False

    answered = await asyncio.gather(*(one() for _ in range(max(1, connections))))
    return sum(answered)


def request_headers(auth_headers: Mapping[str, str] | None) -> dict[str, str]:
    """The headers of every completion request: SSE content negotiation plus credentials."""
    return {**_BASE_HEADERS, **(auth_headers or {})}


def _result(
    parser: StreamParser,
    sent_at: float,
    status: int | None,
    kind: ErrorKind | None,
    message: str | None,
    end: float | None = None,
) -> HotResult:
    """The result of a request from what its stream showed; ``kind`` None: it succeeded."""
    end = time.perf_counter() if end is None else end
    return HotResult(
        ok=kind is None,
        start_s=parser.start,
        e2e_s=end - parser.start,
        ttft_s=parser.ttft,
        itls_s=parser.itls if kind is None else [],
        output_tokens=parser.output_tokens,
        prompt_tokens=parser.prompt_tokens,
        chunks=parser.chunks,
        error_kind=kind,
        status=status,
        error=message,
        reads=parser.reads,
        coalesced_tokens=parser.coalesced_tokens,
        content_chunks=parser.content_chunks,
        sent_at=sent_at,
    )


async def stream_completion(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout_s: float,
    in_flight: InFlight | None = None,
) -> HotResult:
    """POST one streamed completion to ``url`` (the full completions URL) and time it.

    Never raises for a failed request: the result carries the error kind.
    """
    if in_flight is not None:
        in_flight.count += 1
    sent_at = time.monotonic()
    start = time.perf_counter()
    parser = StreamParser(start)
    status: int | None = None
    try:
        async with asyncio.timeout(timeout_s):
            async with session.post(url, data=body, headers=headers) as response:
                status = response.status
                if status >= 400:
                    raw = await response.content.read(MAX_ERROR_BODY_BYTES)
                    text = status_line(status, raw)
                    failed = _result(parser, sent_at, status, "http_status", text)
                    failed.retry_after_s = retry_after_seconds(response.headers)
                    return failed
                feed = parser.feed
                clock = time.perf_counter
                async for data in response.content.iter_any():
                    feed(data, clock())
    except StreamProtocolError as exc:
        return _result(parser, sent_at, status, "protocol", str(exc))
    except StreamedError as exc:
        return _result(parser, sent_at, exc.status or status, "http_status", str(exc))
    except TimeoutError:
        return _result(
            parser, sent_at, status, "timeout", f"no complete answer within {timeout_s:g} s"
        )
    except Exception as exc:  # every transport failure becomes a classified result
        message = redact(f"{type(exc).__name__}: {exc}", limit=MAX_ECHO_CHARS)
        kind: ErrorKind = "protocol" if isinstance(exc, UnicodeDecodeError) else "connection"
        return _result(parser, sent_at, status, kind, message)
    finally:
        if in_flight is not None:
            in_flight.count -= 1
    end = time.perf_counter()
    if not parser.done:
        return _result(parser, sent_at, status, "truncated", "stream ended without [DONE]", end)
    if parser.output_tokens is None:
        return _result(parser, sent_at, status, "protocol", "no usage in the stream", end)
    return _result(parser, sent_at, status, None, None, end)


def completions_url(base_url: str, path: str = COMPLETIONS_PATH) -> str:
    """The absolute completions URL of an endpoint."""
    return base_url.rstrip("/") + path


async def send_one(
    base_url: str, spec: RequestSpec, auth: AuthStrategy, *, timeout_s: float
) -> HotResult:
    """One streamed completion in a session of its own (the preflight, the probe); never
    raises for a failed request."""
    try:
        headers = await auth.headers_async()
    except AuthError as exc:
        message = redact(f"AuthError: {exc}", limit=MAX_ECHO_CHARS)
        return _result(StreamParser(time.perf_counter()), time.monotonic(), None, "auth", message)
    async with make_session(1, timeout_s=timeout_s) as session:
        return await stream_completion(
            session,
            completions_url(base_url),
            spec.encoded_body,
            request_headers(headers),
            timeout_s=timeout_s,
        )
