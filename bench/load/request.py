"""One streamed completion request, timed as a user feels it.

The request asks vLLM for ``stream_options: {"include_usage": true, "continuous_usage_stats":
true}``: every chunk then carries the running ``usage``, so the client knows how many tokens
each chunk brought (several with speculative decoding), and the last chunk carries the final
count. Output tokens are taken from that final usage only, never from the number of chunks.

Timing, all from :func:`time.perf_counter` on the client, as each network read arrives:

- time to first token (TTFT): send to the first chunk with generated text;
- inter-token latency (ITL): the gap between two content chunks divided by the tokens the later
  chunk carried, once per token (a 30 ms gap bringing 3 tokens is three ITLs of 10 ms); a
  server that sends no per-chunk usage gets one token per chunk;
- time per output token (TPOT): ``(e2e - ttft) / (output_tokens - 1)``;
- end-to-end latency (E2EL): send to ``data: [DONE]``.

Errors are sorted into kinds (:data:`~bench.results.record.ERROR_KINDS`): ``timeout`` (the
per-request deadline or a transport timeout), ``http_status`` (an HTTP error status; the code
is kept), ``connection`` (refused, reset or closed mid-response), ``truncated`` (the response
ended cleanly but without ``data: [DONE]``), ``protocol`` (a chunk that is not JSON, or no
usage in the stream) and ``auth`` (credentials could not be obtained; nothing was sent). An
error vLLM reports inside the stream (``data: {"error": ...}``) counts as ``http_status`` with
the code it carries.

Bounded against any server: an error body is read up to
:data:`~endpoint.limits.MAX_ERROR_BODY_BYTES`, one SSE line may not exceed
:data:`~endpoint.limits.MAX_SSE_LINE_BYTES` (``protocol`` error), and every error text kept is
redacted (:func:`endpoint.redact`) and cut to :data:`~endpoint.limits.MAX_ECHO_CHARS`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx

from bench.load.sse import StreamedError, StreamParser, StreamProtocolError
from bench.results.record import ErrorKind, RequestResult
from endpoint.auth import AuthError
from endpoint.client import LimitExceeded, read_capped, retry_after_seconds
from endpoint.limits import MAX_ECHO_CHARS, MAX_ERROR_BODY_BYTES
from endpoint.redact import redact

__all__ = [
    "RequestSpec",
    "classify_exception",
    "completion_body",
    "send_request",
]

COMPLETIONS_PATH = "/v1/completions"
_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


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
        """The request body, serialised once (long prompts cost the client time to encode;
        the load drivers encode every spec before the timed part of a cell)."""
        return json.dumps(completion_body(self)).encode()


def completion_body(spec: RequestSpec) -> dict[str, Any]:
    """The JSON body of a streamed ``/v1/completions`` request for ``spec``."""
    body: dict[str, Any] = {
        "model": spec.model,
        "prompt": spec.prompt,
        "max_tokens": spec.max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if spec.ignore_eos:
        body["ignore_eos"] = True
    return body


def classify_exception(exc: BaseException) -> ErrorKind:
    """The error kind of an exception raised while sending or reading a request.

    The aiohttp transport maps aiohttp's errors onto httpx's loosely (a server disconnect
    becomes ``httpx.ConnectTimeout``), so the original aiohttp exception in the cause chain
    decides first.
    """
    if isinstance(exc, AuthError):
        return "auth"
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 10:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for item in chain:
        if isinstance(item, aiohttp.ServerTimeoutError | aiohttp.SocketTimeoutError):
            return "timeout"
        if isinstance(item, aiohttp.ClientError):
            return "connection"
    for item in chain:
        if isinstance(item, TimeoutError | httpx.TimeoutException):
            return "timeout"
        if isinstance(item, httpx.TransportError | OSError):
            return "connection"
        if isinstance(item, json.JSONDecodeError | UnicodeDecodeError):
            return "protocol"
    return "connection"


async def send_request(
    client: httpx.AsyncClient,
    spec: RequestSpec,
    *,
    timeout_s: float,
    path: str = COMPLETIONS_PATH,
) -> RequestResult:
    """Send one streamed completion and time it; never raises for a failed request."""
    body = spec.encoded_body
    start = time.perf_counter()
    state = StreamParser(start)
    status: int | None = None
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("POST", path, content=body, headers=_HEADERS) as response:
                status = response.status_code
                if status >= 400:
                    try:
                        raw = await read_capped(response, MAX_ERROR_BODY_BYTES)
                        text = raw.decode("utf-8", "replace")
                    except LimitExceeded as exc:
                        text = f"({exc})"
                    return RequestResult(
                        ok=False,
                        start_s=start,
                        e2e_s=time.perf_counter() - start,
                        error_kind="http_status",
                        status=status,
                        error=redact(f"HTTP {status}: {text}", limit=MAX_ECHO_CHARS),
                        retry_after_s=retry_after_seconds(response.headers),
                    )
                async for data in response.aiter_bytes():
                    state.feed(data, time.perf_counter())
    except StreamProtocolError as exc:
        return _failed(state, status, "protocol", str(exc))
    except StreamedError as exc:
        return _failed(state, exc.status or status, "http_status", str(exc))
    except TimeoutError:
        return _failed(state, status, "timeout", f"no complete answer within {timeout_s:g} s")
    except Exception as exc:  # every transport failure becomes a classified result
        return _failed(
            state,
            status,
            classify_exception(exc),
            redact(f"{type(exc).__name__}: {exc}", limit=MAX_ECHO_CHARS),
        )
    end = time.perf_counter()
    if not state.done:
        return _failed(state, status, "truncated", "stream ended without data: [DONE]", end)
    if state.output_tokens is None:
        return _failed(state, status, "protocol", "no usage in the stream", end)
    return RequestResult(
        ok=True,
        start_s=start,
        e2e_s=end - start,
        ttft_s=state.ttft,
        itls_s=state.itls,
        output_tokens=state.output_tokens,
        prompt_tokens=state.prompt_tokens,
        chunks=state.chunks,
        status=status,
    )


def _failed(
    state: StreamParser, status: int | None, kind: ErrorKind, message: str, end: float | None = None
) -> RequestResult:
    end = time.perf_counter() if end is None else end
    return RequestResult(
        ok=False,
        start_s=state.start,
        e2e_s=end - state.start,
        ttft_s=state.ttft,
        output_tokens=state.output_tokens,
        prompt_tokens=state.prompt_tokens,
        chunks=state.chunks,
        error_kind=kind,
        status=status,
        error=message,
    )
