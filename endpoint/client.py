"""The HTTP client for a deployed endpoint, and reads that never take more than a cap.

:func:`make_client` uses the ``httpx-aiohttp`` transport with a pool sized from the caller's
concurrency: httpx's own pool costs grow steeply with connections in flight (55x a server's
latency at 512 concurrent requests on 2 cores, against about 3x) and its default 100
connections silently cap a load test. Bodies are capped *after* decompression, decoded here
with a bounded output, so a small gzip bomb costs at most the cap."""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import math
import zlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_aiohttp import AiohttpTransport

from .auth import AuthStrategy, NoAuth
from .limits import MAX_RESPONSE_BYTES, MAX_SSE_LINE_BYTES

_ACCEPT_ENCODING = "gzip, deflate"


class LimitExceeded(Exception):
    """A server sent more than a cap allows (see :mod:`endpoint.limits`); reading stopped."""


def make_client(
    base_url: str,
    *,
    auth: AuthStrategy | None = None,
    timeout_s: float = 60.0,
    max_concurrency: int = 4,
    headers: dict[str, str] | None = None,
) -> httpx.AsyncClient:
    """An async client for ``base_url``: ``auth`` on every request, ``timeout_s`` on each
    wait, ``max_concurrency`` connections (and keep-alive), no redirects."""
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


def _decompressor(encoding: str) -> zlib._Decompress | None:
    """A zlib decompressor for a ``Content-Encoding`` (None: identity)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise LimitExceeded(f"unsupported Content-Encoding {encoding[:40]!r}")


async def read_capped(response: httpx.Response, max_bytes: int, *, what: str = "body") -> bytes:
    """The body of a streamed ``response``, decoded, refusing more than ``max_bytes``: zlib
    gives at most one byte past the room left per call, so a small gzip bomb costs the cap."""
    z = _decompressor(response.headers.get("content-encoding", ""))
    body = bytearray()
    async for raw in response.aiter_raw():
        pending = raw
        while pending and len(body) <= max_bytes:
            if z is None:
                body += pending[: max_bytes - len(body) + 1]
                break
            try:
                body += z.decompress(pending, max_bytes - len(body) + 1)
            except zlib.error as exc:
                raise LimitExceeded(f"a compressed body that does not decode: {exc}") from None
            pending = z.unconsumed_tail
        if len(body) > max_bytes:
            raise LimitExceeded(f"{what} is larger than {max_bytes} bytes; refused")
    return bytes(body)


def loads_json(data: str | bytes) -> Any:
    """A server's JSON; raises ValueError when it is not JSON, or is nested past what Python's
    parser can follow (``[[[[...`` would raise RecursionError, which no caller expects)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


@dataclass(frozen=True)
class Reply:
    """A whole (capped) answer."""

    status: int
    headers: httpx.Headers
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON (:func:`loads_json`)."""
        return loads_json(self.body)


async def request_capped(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    *,
    max_bytes: int = MAX_RESPONSE_BYTES,
    json_body: Any = None,
    timeout: float | None = None,
    what: str | None = None,
) -> Reply:
    """Send one request and read its answer up to ``max_bytes`` (decoded)."""
    kwargs: dict[str, Any] = {"headers": {"Accept-Encoding": _ACCEPT_ENCODING}}
    if json_body is not None:
        kwargs["json"] = json_body
    if timeout is not None:
        kwargs["timeout"] = timeout
    async with client.stream(method, path, **kwargs) as response:
        body = await read_capped(response, max_bytes, what=what or f"the answer to {path}")
        return Reply(response.status_code, response.headers, body)


async def iter_lines_capped(
    response: httpx.Response, max_line_bytes: int = MAX_SSE_LINE_BYTES
) -> AsyncIterator[bytes]:
    """The lines of a streamed body (without line ends), refusing one over ``max_line_bytes``."""
    buffer = b""
    async for data in response.aiter_bytes():
        buffer += data
        start = 0
        while True:
            cut = buffer.find(b"\n", start)
            if cut < 0:
                break
            yield buffer[start:cut].rstrip(b"\r")
            start = cut + 1
        buffer = buffer[start:]
        if len(buffer) > max_line_bytes:
            raise LimitExceeded(f"a streamed line is longer than {max_line_bytes} bytes; refused")
    if buffer:
        yield buffer.rstrip(b"\r")


def retry_after_seconds(
    headers: Mapping[str, str], *, now: dt.datetime | None = None
) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date), or None when absent or
    unusable (negative, not finite, unparsable)."""
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()[:64]
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        seconds = (when - (now or dt.datetime.now(dt.UTC))).total_seconds()
        seconds = max(0.0, seconds)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds
