"""The individual checks. Each returns a :class:`CheckResult`; none raises for a server problem.

- :func:`check_ready`: ``GET /health`` until 200, with capped exponential backoff; 502/503/504,
  refused connections and timeouts mean "still loading, keep waiting".
- :func:`check_models`: ``GET /v1/models`` lists the served model name.
- :func:`check_chat`: a streamed chat completion returns non-empty content and a usage chunk.
- :func:`check_metrics`: ``GET /metrics`` parses and carries vLLM's metrics.

401/403 answers and credentials that cannot be obtained end a check at once ("credentials
rejected" / "no credentials"): nothing is retried, and no request goes out without credentials.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx

from .auth import AuthError
from .metrics import MetricsParseError, parse_metrics, spec_decode_acceptance

__all__ = [
    "Backoff",
    "CheckResult",
    "ProgressCallback",
    "check_chat",
    "check_metrics",
    "check_models",
    "check_ready",
]

ProgressCallback = Callable[[str], None]
"""Receives one human-readable line per readiness attempt."""

DEFAULT_PROMPT = "Reply with one short sentence: is the model working?"

# Transport-level failures as they surface through httpx on the aiohttp transport.
_TRANSPORT_ERRORS = (httpx.TransportError, aiohttp.ClientError, OSError, asyncio.TimeoutError)
_WAIT_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check."""

    name: str
    ok: bool
    detail: str
    """Why it passed or failed, in one line."""
    duration_s: float
    data: dict[str, Any] = field(default_factory=dict)
    """Measured figures (latency, tokens, metrics), JSON-ready."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "detail": self.detail,
            "duration_s": round(self.duration_s, 4),
            "data": self.data,
        }


@dataclass(frozen=True)
class Backoff:
    """Readiness polling: waits start at ``initial_s`` and grow by ``factor`` up to ``max_s``."""

    initial_s: float = 1.0
    max_s: float = 15.0
    factor: float = 2.0

    def __post_init__(self) -> None:
        if self.initial_s <= 0 or self.max_s < self.initial_s or self.factor < 1:
            raise ValueError("Backoff needs 0 < initial_s <= max_s and factor >= 1")

    def delays(self) -> Iterator[float]:
        """The successive waits, forever."""
        delay = self.initial_s
        while True:
            yield delay
            delay = min(self.max_s, delay * self.factor)


def describe_transport_error(exc: BaseException) -> str:
    """One line for a network-level failure.

    The aiohttp transport maps some aiohttp errors to misleading httpx types (a refused
    connection surfaces as ``ConnectTimeout``), so the original aiohttp error decides.
    """
    cause: BaseException = exc
    while isinstance(cause, httpx.TransportError) and cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, aiohttp.ClientConnectorError | ConnectionRefusedError):
        kind = "connection failed"
    elif isinstance(cause, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        kind = "connection dropped"
    elif isinstance(
        cause, aiohttp.ServerTimeoutError | asyncio.TimeoutError | httpx.TimeoutException
    ):
        kind = "timed out"
    elif isinstance(cause, httpx.ConnectError):
        kind = "connection failed"
    else:
        kind = "connection error"
    message = str(exc).strip()
    return f"{kind} ({type(cause).__name__}{': ' + message if message else ''})"


def _error_message(response: httpx.Response) -> str:
    """The server's error text: OpenAI/vLLM ``{"error": {"message": ...}}`` or the body."""
    text = response.text.strip()
    try:
        body = json.loads(text)
    except ValueError:
        return text[:200] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body.get("message"))
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
    return text[:200]


def _auth_failure(name: str, started: float, response: httpx.Response) -> CheckResult:
    return CheckResult(
        name,
        False,
        f"credentials rejected (HTTP {response.status_code}): {_error_message(response)}",
        time.perf_counter() - started,
        {"status": response.status_code},
    )


def _no_credentials(name: str, started: float, exc: AuthError) -> CheckResult:
    return CheckResult(
        name, False, f"no credentials, request not sent: {exc}", time.perf_counter() - started
    )


async def check_ready(
    client: httpx.AsyncClient,
    *,
    deadline: float,
    backoff: Backoff | None = None,
    poll_timeout_s: float = 10.0,
    progress: ProgressCallback | None = None,
) -> CheckResult:
    """Poll ``/health`` until 200 or ``deadline`` (a ``time.monotonic()`` value)."""
    name = "readiness"
    started = time.perf_counter()
    attempts = 0
    last = "no attempt"
    for delay in (backoff or Backoff()).delays():
        attempts += 1
        remaining = deadline - time.monotonic()
        try:
            response = await client.get("/health", timeout=max(0.1, min(poll_timeout_s, remaining)))
        except AuthError as exc:
            return _no_credentials(name, started, exc)
        except _TRANSPORT_ERRORS as exc:
            last = describe_transport_error(exc)
        else:
            if response.status_code == 200:
                elapsed = time.perf_counter() - started
                return CheckResult(
                    name,
                    True,
                    f"/health answered 200 after {attempts} attempt(s) in {elapsed:.1f} s",
                    elapsed,
                    {"attempts": attempts},
                )
            if response.status_code in (401, 403):
                return _auth_failure(name, started, response)
            if response.status_code not in _WAIT_STATUSES and response.status_code < 500:
                return CheckResult(
                    name,
                    False,
                    f"/health answered HTTP {response.status_code}: {_error_message(response)}",
                    time.perf_counter() - started,
                    {"attempts": attempts, "status": response.status_code},
                )
            last = f"HTTP {response.status_code}"
        elapsed = time.perf_counter() - started
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        wait = min(delay, remaining)
        if progress is not None:
            progress(
                f"waiting for /health: {last} (attempt {attempts}, {elapsed:.0f} s elapsed, "
                f"next try in {wait:.1f} s)"
            )
        await asyncio.sleep(wait)
    elapsed = time.perf_counter() - started
    return CheckResult(
        name,
        False,
        f"not ready after {elapsed:.1f} s ({attempts} attempts; last: {last})",
        elapsed,
        {"attempts": attempts, "last": last},
    )


async def _get_ok(
    client: httpx.AsyncClient, name: str, path: str, started: float
) -> httpx.Response | CheckResult:
    """GET ``path``: the 200 response, or the failed check (no credentials, transport error,
    credentials rejected, another status) that ends check ``name``."""
    try:
        response = await client.get(path)
    except AuthError as exc:
        return _no_credentials(name, started, exc)
    except _TRANSPORT_ERRORS as exc:
        return CheckResult(
            name, False, describe_transport_error(exc), time.perf_counter() - started
        )
    if response.status_code in (401, 403):
        return _auth_failure(name, started, response)
    if response.status_code != 200:
        return CheckResult(
            name,
            False,
            f"{path} answered HTTP {response.status_code}: {_error_message(response)}",
            time.perf_counter() - started,
        )
    return response


async def check_models(client: httpx.AsyncClient, served_model_name: str) -> CheckResult:
    """``/v1/models`` must list ``served_model_name``."""
    name = "models"
    started = time.perf_counter()
    response = await _get_ok(client, name, "/v1/models", started)
    if isinstance(response, CheckResult):
        return response
    elapsed = time.perf_counter() - started
    try:
        ids = [str(card["id"]) for card in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        return CheckResult(name, False, "/v1/models returned an unexpected body", elapsed)
    if served_model_name not in ids:
        return CheckResult(
            name,
            False,
            f"served model {served_model_name!r} not listed; the server lists {ids}",
            elapsed,
            {"models": ids},
        )
    return CheckResult(name, True, f"{served_model_name} is served", elapsed, {"models": ids})


async def check_chat(
    client: httpx.AsyncClient,
    served_model_name: str,
    *,
    prompt: str = DEFAULT_PROMPT,
    max_tokens: int = 32,
) -> CheckResult:
    """A streamed chat completion: non-empty content, ``[DONE]``, and a usage chunk."""
    name = "chat"
    started = time.perf_counter()
    body = {
        "model": served_model_name,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    content: list[str] = []
    usage: dict[str, Any] | None = None
    ttft: float | None = None
    finish_reason: str | None = None
    chunks = 0
    done = False

    def failed(detail: str) -> CheckResult:
        return CheckResult(name, False, detail, time.perf_counter() - started, {"chunks": chunks})

    try:
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                if response.status_code in (401, 403):
                    return _auth_failure(name, started, response)
                return failed(
                    f"chat completion answered HTTP {response.status_code}: "
                    f"{_error_message(response)}"
                )
            try:
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[len("data:") :].strip()
                    if payload == "[DONE]":
                        done = True
                        break
                    chunks += 1
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        return failed(f"malformed stream chunk {chunks}: {payload[:100]!r}")
                    if not isinstance(chunk, dict):
                        return failed(f"malformed stream chunk {chunks}: not an object")
                    if "error" in chunk:
                        error = chunk["error"]
                        message = error.get("message") if isinstance(error, dict) else error
                        return failed(f"server error mid-stream: {message}")
                    if isinstance(chunk.get("usage"), dict):
                        usage = chunk["usage"]
                    for choice in chunk.get("choices") or []:
                        delta = choice.get("delta") or {}
                        piece = delta.get("content")
                        if piece:
                            if ttft is None:
                                ttft = time.perf_counter() - started
                            content.append(str(piece))
                        if choice.get("finish_reason"):
                            finish_reason = str(choice["finish_reason"])
            except _TRANSPORT_ERRORS as exc:
                return failed(
                    f"connection dropped mid-stream after {chunks} chunk(s): "
                    f"{describe_transport_error(exc)}"
                )
    except AuthError as exc:
        return _no_credentials(name, started, exc)
    except _TRANSPORT_ERRORS as exc:
        return failed(describe_transport_error(exc))
    latency = time.perf_counter() - started
    if not done:
        return failed(f"stream ended without data: [DONE] after {chunks} chunk(s)")
    text = "".join(content)
    if not text.strip():
        return failed(f"empty completion (finish_reason={finish_reason}, {chunks} chunk(s))")
    if usage is None:
        return failed("no usage chunk in the stream (stream_options.include_usage ignored)")
    completion_tokens = int(usage.get("completion_tokens") or 0)
    data = {
        "latency_s": round(latency, 4),
        "ttft_s": round(ttft, 4) if ttft is not None else None,
        "prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "completion_tokens": completion_tokens,
        "finish_reason": finish_reason,
        "chunks": chunks,
        "content": text[:200],
    }
    ttft_text = f", TTFT {ttft * 1000:.0f} ms" if ttft is not None else ""
    detail = f"{completion_tokens} tokens in {latency:.2f} s{ttft_text}: {text.strip()[:60]!r}"
    return CheckResult(name, True, detail, latency, data)


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


async def check_metrics(
    client: httpx.AsyncClient, *, served_model_name: str | None = None
) -> CheckResult:
    """``/metrics`` parses and carries vLLM's figures; its summary is the result's ``data``."""
    name = "metrics"
    started = time.perf_counter()
    response = await _get_ok(client, name, "/metrics", started)
    if isinstance(response, CheckResult):
        return response
    elapsed = time.perf_counter() - started
    try:
        snapshot = parse_metrics(response.text, model_name=served_model_name)
    except MetricsParseError as exc:
        return CheckResult(name, False, f"malformed /metrics: {exc}", elapsed)
    summary = snapshot.summary()
    kv = snapshot.kv_cache_usage
    parts = [
        f"running {_fmt(snapshot.num_requests_running, '.0f')}",
        f"waiting {_fmt(snapshot.num_requests_waiting, '.0f')}",
        f"KV cache {_fmt(None if kv is None else kv * 100, '.1f', '%')}",
        f"prompt tokens {_fmt(snapshot.prompt_tokens_total, '.0f')}",
        f"generation tokens {_fmt(snapshot.generation_tokens_total, '.0f')}",
        f"mean TTFT {_fmt(None if snapshot.mean_ttft_s is None else snapshot.mean_ttft_s * 1000, '.0f', ' ms')}",  # noqa: E501
    ]
    acceptance = spec_decode_acceptance(None, snapshot)
    if acceptance is not None:
        positions = ", ".join(f"{p:.2f}" for p in acceptance.acceptance_by_position)
        parts.append(
            f"spec decode acceptance {acceptance.acceptance_rate * 100:.1f}%, "
            f"mean length {acceptance.mean_acceptance_length:.2f}, by position [{positions}]"
        )
    elif snapshot.spec_decode is not None:
        parts.append("spec decode on, no drafts yet")
    return CheckResult(name, True, "; ".join(parts), elapsed, summary)
