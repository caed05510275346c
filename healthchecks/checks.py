"""The individual checks: readiness, ``/v1/models``, a streamed chat completion, ``/metrics``.
Each returns a :class:`CheckResult`; none raises for a server problem. 401/403 and missing
credentials end a check at once; every answer is read up to a cap and every server text in a
result is redacted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from endpoint.auth import AuthError
from endpoint.client import (
    LimitExceeded,
    Reply,
    iter_lines_capped,
    loads_json,
    read_capped,
    request_capped,
)
from endpoint.client import retry_after_seconds as _retry_after
from endpoint.errors import TRANSPORT_ERRORS, classify_connection_error, error_line, status_line
from endpoint.limits import (
    MAX_ECHO_CHARS,
    MAX_ERROR_BODY_BYTES,
    MAX_METRICS_BYTES,
    MAX_MODEL_IDS_SHOWN,
    MAX_SSE_LINE_BYTES,
)
from endpoint.metrics import MetricsParseError, parse_metrics, spec_decode_acceptance
from endpoint.redact import redact

ProgressCallback = Callable[[str], None]
"""Receives one human-readable line per readiness attempt."""

DEFAULT_PROMPT = "Reply with one short sentence: is the model working?"

#: Speculative decoding accepting under this share of its draft tokens is warned about: a
#: drafter that does not match the model (a matching MTP drafter accepts most of them).
MIN_USEFUL_ACCEPTANCE = 0.05
_WAIT_STATUSES = frozenset({429, 502, 503, 504})
#: How much of a server's body a readiness attempt still waited for echoes.
_WAIT_ECHO_CHARS = 100


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
    warnings: tuple[str, ...] = ()
    """What passed but needs a look (e.g. speculative decoding that accepts nothing)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "duration_s": round(self.duration_s, 4),
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class Backoff:
    """Readiness polling: waits start at ``initial_s`` and grow by ``factor`` up to ``max_s``."""

    initial_s: float = 1.0
    max_s: float = 15.0
    factor: float = 2.0

    def delays(self) -> Iterator[float]:
        """The successive waits, forever."""
        delay = self.initial_s
        while True:
            yield delay
            delay = min(self.max_s, delay * self.factor)


def _echo(text: object) -> str:
    return redact(text, limit=MAX_ECHO_CHARS)


def _auth_failure(name: str, started: float, reply: Reply, auth: str | None) -> CheckResult:
    used = f" using {auth}" if auth else ""
    return CheckResult(
        name,
        False,
        f"credentials rejected (HTTP {reply.status}){used}: "
        f"{error_line(reply.text) or 'the body says nothing'}",
        time.perf_counter() - started,
        {"status": reply.status},
    )


def _no_credentials(name: str, started: float, exc: AuthError) -> CheckResult:
    return CheckResult(
        name,
        False,
        f"no credentials, request not sent: {_echo(exc)}",
        time.perf_counter() - started,
    )


def _auth_description(client: Any) -> str | None:
    description = getattr(getattr(client, "auth", None), "description", None)
    return description if isinstance(description, str) and description != "none" else None


async def check_ready(
    client: httpx.AsyncClient,
    *,
    deadline: float,
    backoff: Backoff | None = None,
    poll_timeout_s: float = 10.0,
    progress: ProgressCallback | None = None,
    refused_grace_s: float | None = None,
) -> CheckResult:
    """Poll ``/health`` until 200 or ``deadline`` (a ``time.monotonic()`` value).

    A refused or reset connection is a server still loading (vLLM keeps its port closed while it
    loads): retried up to the deadline, or ``refused_grace_s`` from the first in a row. DNS and
    TLS failures fail at once. A ``Retry-After`` that ends past the deadline fails at once."""
    name = "readiness"
    started = time.perf_counter()
    attempts = 0
    last = "no attempt"
    refused_since: float | None = None
    url = str(client.base_url)
    for delay in (backoff or Backoff()).delays():
        attempts += 1
        remaining = deadline - time.monotonic()
        wait_for: float | None = None
        try:
            reply = await request_capped(
                client,
                "GET",
                "/health",
                max_bytes=MAX_ERROR_BODY_BYTES,
                timeout=max(0.1, min(poll_timeout_s, remaining)),
            )
        except AuthError as exc:
            return _no_credentials(name, started, exc)
        except LimitExceeded as exc:
            return CheckResult(name, False, str(exc), time.perf_counter() - started)
        except TRANSPORT_ERRORS as exc:
            problem = classify_connection_error(exc, url)
            last = problem.detail
            # A name that does not resolve or a failed TLS handshake fail at once: no server
            # is loading there. Refused (vLLM keeps its port closed while it loads) and reset
            # at once are waited for, up to the deadline or the refused-connection grace.
            if problem.kind in ("dns", "tls"):
                elapsed = time.perf_counter() - started
                return CheckResult(
                    name,
                    False,
                    f"not listening: {problem.message()} ({attempts} attempt(s) in "
                    f"{elapsed:.1f} s)",
                    elapsed,
                    {"attempts": attempts, "problem": problem.kind},
                )
            if problem.not_listening or problem.kind == "dropped":
                now = time.monotonic()
                refused_since = now if refused_since is None else refused_since
                if refused_grace_s is not None and now - refused_since >= refused_grace_s:
                    elapsed = time.perf_counter() - started
                    return CheckResult(
                        name,
                        False,
                        f"not listening: {problem.message()} (refused for "
                        f"{now - refused_since:.1f} s, the refused-connection grace; "
                        f"{attempts} attempt(s) in {elapsed:.1f} s)",
                        elapsed,
                        {"attempts": attempts, "problem": problem.kind},
                    )
                last = f"loading? port closed ({problem.detail}; vLLM opens it once loaded)"
            else:
                refused_since = None
        else:
            refused_since = None
            status = reply.status
            if status == 200:
                elapsed = time.perf_counter() - started
                return CheckResult(
                    name,
                    True,
                    f"/health answered 200 after {attempts} attempt(s) in {elapsed:.1f} s",
                    elapsed,
                    {"attempts": attempts},
                )
            if status in (401, 403):
                return _auth_failure(name, started, reply, _auth_description(client))
            if status not in _WAIT_STATUSES and status < 500:
                return CheckResult(
                    name,
                    False,
                    f"/health answered {status_line(status, reply.text)}",
                    time.perf_counter() - started,
                    {"attempts": attempts, "status": status},
                )
            # The status and what the body says (a front end's page title, vLLM's message):
            # redacted, short enough for the progress line each attempt prints.
            body = error_line(reply.text, limit=_WAIT_ECHO_CHARS)
            said = f"HTTP {status}: {body}" if body else f"HTTP {status}"
            last = f"loading ({said})" if status in (502, 503, 504) else said
            if status in (429, 503):
                wait_for = _retry_after(reply.headers)
                if wait_for is not None:
                    last += f", Retry-After {wait_for:g} s"
                    if wait_for > deadline - time.monotonic():
                        elapsed = time.perf_counter() - started
                        return CheckResult(
                            name,
                            False,
                            f"/health answered HTTP {status} asking to retry after "
                            f"{wait_for:g} s, past the deadline ({attempts} attempt(s) in "
                            f"{elapsed:.1f} s)",
                            elapsed,
                            {"attempts": attempts, "status": status, "retry_after_s": wait_for},
                        )
        elapsed = time.perf_counter() - started
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        # Retry-After is the least wait the server asks for; backoff still grows (a server
        # answering "Retry-After: 0" forever is not polled in a tight loop).
        wait = min(max(wait_for, delay) if wait_for is not None else delay, remaining)
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


def _busy(reply: Reply) -> dict[str, Any]:
    """For a 429 or 503 with ``Retry-After``: the status and the wait the server asks for, which
    the runner honours within the deadline (and check again); else nothing."""
    if reply.status in (429, 503):
        wait_for = _retry_after(reply.headers)
        if wait_for is not None:
            return {"status": reply.status, "retry_after_s": wait_for}
    return {}


async def _get_ok(
    client: httpx.AsyncClient,
    name: str,
    path: str,
    started: float,
    max_bytes: int | None = None,
) -> Reply | CheckResult:
    """GET ``path`` (capped): the 200 answer, or the failed check (no credentials, transport
    error, a cap exceeded, credentials rejected, another status) that ends check ``name``."""
    try:
        if max_bytes is None:
            reply = await request_capped(client, "GET", path)
        else:
            reply = await request_capped(client, "GET", path, max_bytes=max_bytes, what=path)
    except AuthError as exc:
        return _no_credentials(name, started, exc)
    except LimitExceeded as exc:
        return CheckResult(name, False, f"{path}: {exc}", time.perf_counter() - started)
    except TRANSPORT_ERRORS as exc:
        return CheckResult(
            name,
            False,
            classify_connection_error(exc, str(client.base_url)).message(),
            time.perf_counter() - started,
        )
    if reply.status in (401, 403):
        return _auth_failure(name, started, reply, _auth_description(client))
    if reply.status != 200:
        return CheckResult(
            name,
            False,
            f"{path} answered {status_line(reply.status, reply.text)}",
            time.perf_counter() - started,
            _busy(reply),
        )
    return reply


def shown_ids(ids: list[str]) -> list[str]:
    """Model ids as they may be shown: redacted, cut, at most a few."""
    shown = [_echo(i)[:120] for i in ids[:MAX_MODEL_IDS_SHOWN]]
    if len(ids) > MAX_MODEL_IDS_SHOWN:
        shown.append(f"... {len(ids) - MAX_MODEL_IDS_SHOWN} more")
    return shown


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
    except (ValueError, KeyError, TypeError, AttributeError):
        return CheckResult(name, False, "/v1/models returned an unexpected body", elapsed)
    if served_model_name not in ids:
        return CheckResult(
            name,
            False,
            f"served model {_echo(served_model_name)!r} not listed; the server lists "
            f"{shown_ids(ids)}",
            elapsed,
            {"models": shown_ids(ids)},
        )
    return CheckResult(
        name, True, f"{_echo(served_model_name)} is served", elapsed, {"models": shown_ids(ids)}
    )


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
                reply = Reply(
                    response.status_code,
                    response.headers,
                    await read_capped(response, MAX_ERROR_BODY_BYTES, what="an error body"),
                )
                if reply.status in (401, 403):
                    return _auth_failure(name, started, reply, _auth_description(client))
                return CheckResult(
                    name,
                    False,
                    f"chat completion answered {status_line(reply.status, reply.text)}",
                    time.perf_counter() - started,
                    {"chunks": chunks, **_busy(reply)},
                )
            try:
                async for raw in iter_lines_capped(response, MAX_SSE_LINE_BYTES):
                    line = raw.decode("utf-8", "replace")
                    if not line.startswith("data:"):
                        continue
                    payload = line[len("data:") :].strip()
                    if payload == "[DONE]":
                        done = True
                        break
                    chunks += 1
                    try:
                        chunk = loads_json(payload)
                    except ValueError:
                        return failed(
                            f"malformed stream chunk {chunks}: {redact(payload, limit=100)!r}"
                        )
                    if not isinstance(chunk, dict):
                        return failed(f"malformed stream chunk {chunks}: not an object")
                    if "error" in chunk:
                        error = chunk["error"]
                        message = error.get("message") if isinstance(error, dict) else error
                        return failed(f"server error mid-stream: {_echo(message)}")
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
            except TRANSPORT_ERRORS as exc:
                return failed(
                    f"connection dropped mid-stream after {chunks} chunk(s): "
                    f"{classify_connection_error(exc, str(client.base_url)).message()}"
                )
    except AuthError as exc:
        return _no_credentials(name, started, exc)
    except LimitExceeded as exc:
        return failed(f"chat completion: {exc}")
    except TRANSPORT_ERRORS as exc:
        return failed(classify_connection_error(exc, str(client.base_url)).message())
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
        "content": redact(text, limit=200),
    }
    ttft_text = f", TTFT {ttft * 1000:.0f} ms" if ttft is not None else ""
    shown = redact(text.strip(), limit=60)
    detail = f"{completion_tokens} tokens in {latency:.2f} s{ttft_text}: {shown!r}"
    return CheckResult(name, True, detail, latency, data)


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


async def check_metrics(
    client: httpx.AsyncClient, *, served_model_name: str | None = None
) -> CheckResult:
    """``/metrics`` parses and carries vLLM's figures; its summary is the result's ``data``."""
    name = "metrics"
    started = time.perf_counter()
    reply = await _get_ok(client, name, "/metrics", started, max_bytes=MAX_METRICS_BYTES)
    if isinstance(reply, CheckResult):
        return reply
    try:
        snapshot = parse_metrics(reply.text, model_name=served_model_name)
    except MetricsParseError as exc:
        return CheckResult(name, False, f"malformed /metrics: {exc}", time.perf_counter() - started)
    elapsed = time.perf_counter() - started
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
    warnings: list[str] = []
    if acceptance is not None:
        positions = ", ".join(f"{p:.2f}" for p in acceptance.acceptance_by_position)
        parts.append(
            f"spec decode acceptance {acceptance.acceptance_rate * 100:.1f}%, "
            f"mean length {acceptance.mean_acceptance_length:.2f}, by position [{positions}]"
        )
        if acceptance.acceptance_rate < MIN_USEFUL_ACCEPTANCE:
            accepted = (
                "none"
                if acceptance.num_accepted_tokens <= 0
                else f"{acceptance.acceptance_rate:.1%}"
            )
            warnings.append(
                f"speculative decoding accepted {accepted} of "
                f"{acceptance.num_draft_tokens:.0f} draft tokens: every step pays for the "
                "drafter and gains (almost) nothing; check that the --speculative-config model "
                "is the drafter made for the served model (and its tokenizer), or turn "
                "speculative decoding off"
            )
    elif snapshot.spec_decode is not None:
        parts.append("spec decode on, no drafts yet")
    detail = "; ".join(parts + [f"WARNING: {w}" for w in warnings])
    return CheckResult(name, True, detail, elapsed, summary, tuple(warnings))
