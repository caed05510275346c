"""A small, exact stand-in for vLLM's OpenAI-compatible HTTP server, for tests and benchmarks.

It speaks vLLM's wire format: OpenAI JSON bodies, server-sent events (``data: {json}\\n\\n``
lines ending in ``data: [DONE]\\n\\n``, a final chunk with empty ``choices`` and ``usage`` when
``stream_options.include_usage`` is true, per-chunk ``usage`` with
``stream_options.continuous_usage_stats``), vLLM's error JSON
(``{"error": {"message", "type", "param", "code"}}``) and ``/metrics`` in Prometheus text format
with vLLM's metric names and labels (``model_name``, ``engine``), written by prometheus-client as
vLLM itself does.

Endpoints: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions``,
``POST /v1/completions`` (streaming and not), ``POST /tokenize``, ``POST /detokenize``,
``GET /metrics``.

Knobs (:class:`FakeVllmConfig`; command-line flags in brackets):

- ``served_model_name`` [``--model``]: the model id; other names get vLLM's 404
  "The model `X` does not exist.".
- ``max_model_len`` [``--max-model-len``]: reported by ``/v1/models`` and ``/tokenize``;
  longer prompts get a 400.
- ``api_key`` [``--api-key``]: a required bearer token. ``auth_all_paths`` [``--auth-v1-only``
  turns it off]: True behaves like a private Cloud Run service (every path needs the token, 401
  otherwise); False like ``vllm serve --api-key`` (only ``/v1/*``).
- ``cold_start_503s`` [``--cold-start-503s``]: the first N requests to ``/health`` answer 503
  (model loading); every other endpoint answers 503 until ``/health`` has answered 200 once.
- ``ttft_s`` [``--ttft-ms``] and ``itl_s`` [``--itl-ms``]: time to first token and the interval
  between tokens. Deadlines are absolute (request arrival + ttft + i x itl) and slept with
  ``asyncio.sleep``, so pacing does not drift under hundreds of concurrent streams.
- ``output_tokens`` [``--output-tokens``]: tokens generated per request, capped by the request's
  ``max_tokens`` / ``max_completion_tokens``. Each token is one word, ``"tok "``.
- ``empty_completion``: every completion returns no content (``finish_reason`` "stop").
- ``drop_after_chunks``: streaming responses close the connection after K ``data:`` chunks
  (non-streaming responses close it before the body).
- ``malformed_metrics``: ``/metrics`` returns text that no Prometheus parser accepts.
- ``hang_paths`` [``--hang PATH``]: requests to these paths never get an answer ("*" for all).
- ``num_speculative_tokens`` [``--spec-tokens``] and ``spec_acceptance``: when > 0,
  ``/metrics`` carries ``vllm:spec_decode_*`` counters with ``position`` labels; each completed
  request adds ``max(1, n // 2)`` drafts and ``round(drafts x p_i)`` accepted tokens at
  position i.
- ``legacy_cache_metric``: expose ``vllm:gpu_cache_usage_perc`` instead of
  ``vllm:kv_cache_usage_perc`` (older vLLM).
- ``tokens_per_chunk`` [``--tokens-per-chunk``]: streamed content chunks carry up to K tokens
  each (as with speculative decoding); chunk j is due at ttft + j x K x itl, and continuous
  usage rises by the tokens the chunk carried.
- ``omit_done``: streams end cleanly (end of body) without ``data: [DONE]``.
- ``fail_every`` and ``fail_status`` [``--fail-every``, ``--fail-status``]: every N-th
  completion request (1-based count) answers HTTP ``fail_status`` with vLLM's error JSON, or
  with ``fail_page`` (an HTML page, as a front end answers) when one is given.

- ``stream_error_after``: streams send this many content chunks, then vLLM's in-stream error
  ``data: {"error": {"message", "type", "param", "code": 500}}`` and ``data: [DONE]``.
- ``missing_paths``: these paths answer 404 ``{"detail": "Not Found"}`` as FastAPI does for a
  route that does not exist (e.g. ``/tokenize`` behind a proxy that forwards only ``/v1``).
- Pacing always counts from the request's arrival at the server, never from a timestamp the
  client sets (a client slow to send would hide its own delay); ``python -m bench.fidelity``
  uses its own paced server (``bench/fidelity/pacedserver.py``).

Hostile or broken servers and proxies (knobs for the client's robustness tests):

- ``reflect_authorization``: every error answer (401, 404, injected failures) carries the
  request's ``Authorization`` header in its message, as a misconfigured proxy may.
- ``metrics_gzip_bomb``: ``/metrics`` answers ``Content-Encoding: gzip`` whose body inflates to
  this many bytes (a few KiB on the wire).
- ``huge_sse_line``: streamed completions send one ``data:`` line of this many bytes (no line
  end until it is all sent) before anything else.
- ``piece_chars``: when > 0, a word is ``ceil(len / piece_chars)`` tokens (sub-word pieces, as
  a small vocabulary splits words: about two tokens a word at 3); 0: one token a word.
- ``tokenize_count``: ``/tokenize`` reports this count whatever the prompt;
  ``tokenize_not_json``: it answers an HTML page with status 200.
- ``health_throttle`` and ``health_throttle_status`` and ``retry_after``: the first N
  ``/health`` requests answer that status (429 by default) with ``Retry-After: retry_after``
  when set; ``completions_throttle``: the first N completion requests answer 429 with vLLM's
  error JSON and that ``Retry-After``; ``models_throttle`` and ``metrics_throttle``: the same for
  the first N ``/v1/models`` and ``/metrics`` requests.

Error bodies follow vLLM 0.27.1 (``vllm/entrypoints/openai/engine/protocol.py``: ``ErrorInfo``
``message``, ``type``, ``param``, ``code`` as an int; a wrong model is
``The model `X` does not exist.``, ``NotFoundError``, ``param`` ``"model"``, 404; the
``--api-key`` middleware in ``vllm/entrypoints/serve/utils/server_utils.py`` answers
``{"error": "Unauthorized"}`` with 401 on ``/v1`` paths).

``GET /fake/timings`` (not part of vLLM) returns ``server.timings`` as JSON,
``{"timings": [{"ttft_s": ..., "e2e_s": ...}, ...]}``, and with ``?clear=1`` empties it: how a
benchmark in another process reads the server's own view.

Records, readable from the test thread: ``server.requests`` (method, path, Authorization header
of every request received) and ``server.timings`` (one ``(ttft_s, e2e_s)`` per completed
generation, measured by the server from request arrival to the first content chunk written and to
the last chunk written), so a client's measurements can be compared with the server's view;
``server.in_flight`` and ``server.peak_in_flight``: the completion requests being generated now
and the most at once so far (a client's concurrency, seen by the server).

Use in tests::

    with FakeVllmServer(FakeVllmConfig(cold_start_503s=2)) as server:
        httpx.get(server.url + "/health")

As a process::

    python -m tests.support.fake_vllm --port 8000 --ttft-ms 100 --itl-ms 10 --output-tokens 64

It prints ``listening on http://127.0.0.1:PORT`` once it accepts connections (``--port 0``
picks a free port).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["FakeVllmConfig", "FakeVllmServer", "RecordedRequest", "main"]

_TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
_ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip
_BOS_ID = 2
_TOKEN_TEXT = "tok "
#: The ``system_fingerprint`` vLLM 0.27.1 sends (its version and a hash), here a fixed text.
SYSTEM_FINGERPRINT = "vllm-0.27.1-fake"
MALFORMED_METRICS = 'vllm:num_requests_running{model_name="m" 1\nthis is not prometheus text\n'


@dataclass
class FakeVllmConfig:
    """Behaviour of a :class:`FakeVllmServer`; see the module docstring for each knob."""

    served_model_name: str = "google/gemma-4-12B-it"
    #: What GET /version answers (vLLM's own release string).
    engine_version: str = "0.27.1"
    max_model_len: int = 32768
    api_key: str | None = None
    auth_all_paths: bool = True
    cold_start_503s: int = 0
    ttft_s: float = 0.0
    itl_s: float = 0.0
    output_tokens: int = 16
    empty_completion: bool = False
    drop_after_chunks: int | None = None
    malformed_metrics: bool = False
    hang_paths: tuple[str, ...] = ()
    num_speculative_tokens: int = 0
    spec_acceptance: tuple[float, ...] = (0.6, 0.35, 0.2, 0.1)
    legacy_cache_metric: bool = False
    tokens_per_chunk: int = 1
    omit_done: bool = False
    fail_every: int = 0
    fail_status: int = 500
    fail_page: str | None = None
    missing_paths: tuple[str, ...] = ()
    stream_error_after: int | None = None
    reflect_authorization: bool = False
    metrics_gzip_bomb: int = 0
    huge_sse_line: int = 0
    tokenize_count: int | None = None
    tokenize_not_json: bool = False
    health_throttle: int = 0
    health_throttle_status: int = 429
    retry_after: str | None = None
    completions_throttle: int = 0
    models_throttle: int = 0
    metrics_throttle: int = 0
    piece_chars: int = 0


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    authorization: str | None


def _gzip_zeros(size: int) -> bytes:
    """A gzip stream that inflates to ``size`` zero digits, built without holding them."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"0" * (1 << 20)
    parts = []
    left = size
    while left > 0:
        parts.append(z.compress(block[: min(left, len(block))]))
        left -= len(block)
    parts.append(z.flush())
    return b"".join(parts)


class _ModelNotFoundError(Exception):
    pass


class _Metrics:
    """vLLM's Prometheus metrics, in their own registry (names and labels as vLLM writes them)."""

    def __init__(self, config: FakeVllmConfig) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        self.values = {"model_name": config.served_model_name, "engine": "0"}
        r = self.registry
        self.running = Gauge("vllm:num_requests_running", "Running requests.", labels, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Waiting requests.", labels, registry=r)
        cache_name = (
            "vllm:gpu_cache_usage_perc"
            if config.legacy_cache_metric
            else "vllm:kv_cache_usage_perc"
        )
        self.kv_cache = Gauge(
            cache_name, "KV-cache usage. 1 means 100 percent usage.", labels, registry=r
        )
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prefill tokens.", labels, registry=r)
        self.generation_tokens = Counter(
            "vllm:generation_tokens", "Generated tokens.", labels, registry=r
        )
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Time to first token.",
            labels,
            buckets=_TTFT_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds",
            "Inter-token latency.",
            labels,
            buckets=_ITL_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds",
            "End-to-end latency.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.spec_positions = config.num_speculative_tokens
        if self.spec_positions > 0:
            self.drafts = Counter("vllm:spec_decode_num_drafts", "Drafts.", labels, registry=r)
            self.draft_tokens = Counter(
                "vllm:spec_decode_num_draft_tokens", "Draft tokens.", labels, registry=r
            )
            self.accepted = Counter(
                "vllm:spec_decode_num_accepted_tokens", "Accepted tokens.", labels, registry=r
            )
            self.accepted_per_pos = Counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                [*labels, "position"],
                registry=r,
            )
            for pos in range(self.spec_positions):
                self.accepted_per_pos.labels(**self.values, position=str(pos))
        for gauge in (self.running, self.waiting, self.kv_cache):
            gauge.labels(**self.values)
        for counter in (self.prompt_tokens, self.generation_tokens):
            counter.labels(**self.values)
        for histogram in (self.ttft, self.itl, self.e2e):
            histogram.labels(**self.values)


class FakeVllmServer:
    """The fake server, run in a background thread with its own event loop (a context manager)."""

    def __init__(
        self,
        config: FakeVllmConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        sock: socket.socket | None = None,
    ) -> None:
        """``sock``: a socket the caller bound (and kept from other processes) to serve on,
        so a port chosen before the server starts cannot be taken in between."""
        self.config = config or FakeVllmConfig()
        self.host = host
        self.port = int(sock.getsockname()[1]) if sock is not None else port
        self._sock = sock
        self.requests: list[RecordedRequest] = []
        self.timings: list[tuple[float, float]] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self._health_calls = 0
        self._generate_calls = 0
        self._ready = self.config.cold_start_503s == 0
        self._metrics = _Metrics(self.config)
        self._vocab: dict[str, int] = {}
        self._words: dict[int, str] = {}
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._path_calls: dict[str, int] = {}

    # ----- lifecycle -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:43127``."""
        return f"http://{self.host}:{self.port}"

    def make_app(self) -> web.Application:
        """The aiohttp application (usable on its own with ``web.run_app``)."""
        app = web.Application(middlewares=[self._middleware])
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/version", self._version)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/tokenize", self._tokenize)
        app.router.add_post("/detokenize", self._detokenize)
        app.router.add_get("/metrics", self._metrics_handler)
        app.router.add_get("/fake/timings", self._timings_handler)
        return app

    async def start_async(self, port: int = 0) -> None:
        """Start serving on the current event loop."""
        self._stop = asyncio.Event()
        self._runner = web.AppRunner(self.make_app(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site: web.BaseSite
        if self._sock is not None:
            site = web.SockSite(self._runner, self._sock, backlog=4096)
        else:
            site = web.TCPSite(self._runner, self.host, port, backlog=4096)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1])

    async def stop_async(self) -> None:
        """Stop serving; hanging requests are released first."""
        if self._stop is not None:
            self._stop.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> None:
        """Start in a background thread; returns once the port accepts connections."""
        self._thread = threading.Thread(target=self._thread_main, name="fake-vllm", daemon=True)
        self._thread.start()
        self._started.wait(10)
        if self._start_error is not None:
            raise RuntimeError("fake vLLM server failed to start") from self._start_error

    def stop(self) -> None:
        """Stop the background thread's server and join the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if loop.is_closed():  # the start failed: nothing is serving, and no loop to stop it on
            thread.join(10)
            self._thread = None
            return
        future = asyncio.run_coroutine_threadsafe(self.stop_async(), loop)
        future.result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._thread = None

    def __enter__(self) -> FakeVllmServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self.start_async(self.port))
        except BaseException as exc:
            self._start_error = exc
            loop.close()  # before start() returns, so stop() sees a closed loop
            self._started.set()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    # ----- helpers -------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append(
            RecordedRequest(request.method, request.path, request.headers.get("Authorization"))
        )
        if request.path in self.config.missing_paths:
            return web.json_response({"detail": "Not Found"}, status=404)
        if "*" in self.config.hang_paths or request.path in self.config.hang_paths:
            assert self._stop is not None
            await self._stop.wait()
            raise web.HTTPServiceUnavailable(text="shutting down")
        key = self.config.api_key
        needs_key = self.config.auth_all_paths or request.path.startswith("/v1/")
        if (
            key is not None
            and needs_key
            and request.headers.get("Authorization") != f"Bearer {key}"
        ):
            echo = self._echo(request)
            if self.config.auth_all_paths:
                # What a private Cloud Run service answers (an HTML page in reality).
                return web.Response(
                    status=401, text=f"Unauthorized: missing or invalid token{echo}"
                )
            return web.json_response({"error": f"Unauthorized{echo}"}, status=401)  # --api-key
        if request.path != "/health" and not self._ready:
            return web.Response(status=503, text="Service Unavailable")
        self._current = request
        result: web.StreamResponse = await handler(request)
        return result

    def _echo(self, request: web.Request | None) -> str:
        if not self.config.reflect_authorization or request is None:
            return ""
        return f" (received Authorization: {request.headers.get('Authorization')})"

    def _error(
        self, message: str, status: int, err_type: str, param: str | None = None
    ) -> web.Response:
        message += self._echo(getattr(self, "_current", None))
        body = {"error": {"message": message, "type": err_type, "param": param, "code": status}}
        return web.json_response(body, status=status)

    def _check_model(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        if model is not None and model != self.config.served_model_name:
            raise _ModelNotFoundError(str(model))

    def _token_ids(self, text: str) -> list[int]:
        ids = [_BOS_ID]
        size = self.config.piece_chars
        for word in text.split():
            pieces = [word[i : i + size] for i in range(0, len(word), size)] if size else [word]
            for piece in pieces:
                if piece not in self._vocab:
                    new_id = 1000 + len(self._vocab)
                    self._vocab[piece] = new_id
                    self._words[new_id] = piece
                ids.append(self._vocab[piece])
        return ids

    @staticmethod
    def _chat_prompt(messages: Sequence[dict[str, Any]], add_generation_prompt: bool) -> str:
        parts = []
        for message in messages:
            content = message.get("content") or ""
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            parts.append(f"<start_of_turn>{message.get('role', 'user')} {content} <end_of_turn>")
        if add_generation_prompt:
            parts.append("<start_of_turn>model")
        return " ".join(parts)

    def _output_count(self, body: dict[str, Any]) -> int:
        if self.config.empty_completion:
            return 0
        count = self.config.output_tokens
        for key in ("max_completion_tokens", "max_tokens"):
            value = body.get(key)
            if isinstance(value, int) and value >= 0:
                count = min(count, value)
                break
        return count

    def _finish(self, prompt_tokens: int, n_out: int, ttft: float, e2e: float) -> None:
        m, labels = self._metrics, self._metrics.values
        m.prompt_tokens.labels(**labels).inc(prompt_tokens)
        m.generation_tokens.labels(**labels).inc(n_out)
        m.ttft.labels(**labels).observe(ttft)
        m.e2e.labels(**labels).observe(e2e)
        # As vLLM 0.27.1 (vllm/v1/metrics/stats.py): one ITL sample per engine step after the
        # first, i.e. per streamed chunk, however many tokens that chunk carries.
        steps = -(-n_out // max(1, self.config.tokens_per_chunk))
        for _ in range(steps - 1):
            m.itl.labels(**labels).observe((e2e - ttft) / (steps - 1))
        if m.spec_positions > 0 and n_out > 0:
            drafts = max(1, n_out // 2)
            m.drafts.labels(**labels).inc(drafts)
            m.draft_tokens.labels(**labels).inc(drafts * m.spec_positions)
            for pos in range(m.spec_positions):
                p = (
                    self.config.spec_acceptance[pos]
                    if pos < len(self.config.spec_acceptance)
                    else 0
                )
                accepted = round(drafts * p)
                m.accepted.labels(**labels).inc(accepted)
                m.accepted_per_pos.labels(**labels, position=str(pos)).inc(accepted)
        self.timings.append((ttft, e2e))

    # ----- handlers ------------------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        self._health_calls += 1
        if self._health_calls <= self.config.health_throttle:
            headers = {"Retry-After": self.config.retry_after} if self.config.retry_after else {}
            return web.Response(
                status=self.config.health_throttle_status, text="Too Many Requests", headers=headers
            )
        if self._health_calls <= self.config.cold_start_503s:
            return web.Response(status=503, text="Service Unavailable")
        self._ready = True
        return web.Response(status=200)

    def _throttled_429(self, path: str, first: int) -> web.Response | None:
        """429 with vLLM's error JSON (and the Retry-After) for the first ``first`` calls."""
        calls = self._path_calls.get(path, 0) + 1
        self._path_calls[path] = calls
        if calls > first:
            return None
        response = self._error("rate limited", 429, "RateLimitError")
        if self.config.retry_after:
            response.headers["Retry-After"] = self.config.retry_after
        return response

    async def _version(self, request: web.Request) -> web.Response:
        # vLLM's GET /version: {"version": vllm.__version__}.
        return web.json_response({"version": self.config.engine_version})

    async def _models(self, request: web.Request) -> web.Response:
        throttled = self._throttled_429("/v1/models", self.config.models_throttle)
        if throttled is not None:
            return throttled
        name = self.config.served_model_name
        card = {
            "id": name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": name,
            "parent": None,
            "max_model_len": self.config.max_model_len,
            "permission": [],
        }
        return web.json_response({"object": "list", "data": [card]})

    async def _read_json(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._error("Invalid JSON body", 400, "BadRequestError")
        if not isinstance(body, dict):
            return self._error("Request body must be a JSON object", 400, "BadRequestError")
        return body

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        arrived = time.perf_counter()
        body = await self._read_json(request)
        if isinstance(body, web.Response):
            return body
        try:
            self._check_model(body)
        except _ModelNotFoundError as exc:
            return self._error(f"The model `{exc}` does not exist.", 404, "NotFoundError", "model")
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return self._error("messages must be a non-empty list", 400, "BadRequestError")
            prompt_text = self._chat_prompt(messages, add_generation_prompt=True)
        else:
            prompt_text = str(body.get("prompt", ""))
        prompt_tokens = len(self._token_ids(prompt_text))
        if prompt_tokens > self.config.max_model_len:
            msg = (
                f"This model's maximum context length is {self.config.max_model_len} tokens. "
                f"However, your request has {prompt_tokens} input tokens."
            )
            return self._error(msg, 400, "BadRequestError", "input_tokens")
        self._throttled = getattr(self, "_throttled", 0) + 1
        if self._throttled <= self.config.completions_throttle:
            response = self._error("rate limited", 429, "RateLimitError")
            if self.config.retry_after:
                response.headers["Retry-After"] = self.config.retry_after
            return response
        self._generate_calls += 1
        every = self.config.fail_every
        if every > 0 and self._generate_calls % every == 0:
            status = self.config.fail_status
            if self.config.fail_page is not None:
                return web.Response(
                    text=self.config.fail_page, status=status, content_type="text/html"
                )
            return self._error(f"injected failure (HTTP {status})", status, "InternalServerError")
        n_out = self._output_count(body)
        m, labels = self._metrics, self._metrics.values
        m.running.labels(**labels).inc()
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if body.get("stream"):
                return await self._stream(request, body, chat, arrived, prompt_tokens, n_out)
            return await self._complete(request, body, chat, arrived, prompt_tokens, n_out)
        finally:
            m.running.labels(**labels).dec()
            self.in_flight -= 1

    def _sleep_until(self, arrived: float, index: int) -> float:
        """Seconds to wait before content token ``index`` (0-based) is due."""
        due = arrived + self.config.ttft_s + index * self.config.itl_s
        return max(0.0, due - time.perf_counter())

    def _usage(self, prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
        return {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
        }

    async def _complete(
        self,
        request: web.Request,
        body: dict[str, Any],
        chat: bool,
        arrived: float,
        prompt_tokens: int,
        n_out: int,
    ) -> web.StreamResponse:
        await asyncio.sleep(self._sleep_until(arrived, max(0, n_out - 1)))
        if self.config.drop_after_chunks is not None:
            self._drop(request)
            return web.Response(status=500)
        text = _TOKEN_TEXT * n_out
        finish = "length" if n_out < self.config.output_tokens else "stop"
        choice: dict[str, Any]
        if chat:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": text,
                "reasoning_content": None,
                "tool_calls": [],
            }
            choice = {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
            }
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "token_ids": None,
                "prompt_logprobs": None,
                "prompt_token_ids": None,
                "routed_experts": None,
            }
        payload: dict[str, Any] = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.config.served_model_name,
            "choices": [choice],
            "usage": self._usage(prompt_tokens, n_out),
        }
        if chat:
            payload["prompt_logprobs"] = None
        else:  # as vLLM 0.27.1 answers (compared with it by scripts/engine-check)
            payload["usage"]["prompt_tokens_details"] = None
            payload.update(
                service_tier=None,
                system_fingerprint=SYSTEM_FINGERPRINT,
                kv_transfer_params=None,
                ec_transfer_params=None,
                metrics=None,
            )
        response = web.json_response(payload)
        e2e = time.perf_counter() - arrived
        ttft = min(e2e, self.config.ttft_s) if n_out else e2e
        self._finish(prompt_tokens, n_out, ttft, e2e)
        return response

    @staticmethod
    def _drop(request: web.Request) -> None:
        transport = request.transport
        if transport is not None:
            transport.abort()

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        chat: bool,
        arrived: float,
        prompt_tokens: int,
        n_out: int,
    ) -> web.StreamResponse:
        options = body.get("stream_options") or {}
        include_usage = bool(options.get("include_usage"))
        continuous = include_usage and bool(options.get("continuous_usage_stats"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await response.prepare(request)
        ident = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        created = int(time.time())
        sent = 0
        if self.config.huge_sse_line > 0:
            block = b"x" * 65536
            await response.write(b"data: ")
            left = self.config.huge_sse_line
            try:
                while left > 0:
                    await response.write(block[: min(left, len(block))])
                    left -= len(block)
                await response.write(b"\n\n")
            except (ConnectionResetError, RuntimeError):
                return response
        drop_after = self.config.drop_after_chunks

        async def send(
            choices: list[dict[str, Any]], usage: dict[str, int] | None, **extra: Any
        ) -> bool:
            nonlocal sent
            if drop_after is not None and sent >= drop_after:
                self._drop(request)
                return False
            chunk: dict[str, Any] = {
                "id": ident,
                "object": "chat.completion.chunk" if chat else "text_completion",
                "created": created,
                "model": self.config.served_model_name,
                "choices": choices,
            }
            if usage is not None:
                chunk["usage"] = usage
            chunk.update(extra)
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            sent += 1
            return True

        def choice(content: str | None, finish: str | None, role: bool = False) -> dict[str, Any]:
            if chat:
                delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
                if content is not None:
                    delta["content"] = content
                out: dict[str, Any] = {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": finish,
                }
                if not role:  # vLLM 0.27.1's role chunk has no token_ids
                    out["token_ids"] = None
                if finish is not None:
                    out["stop_reason"] = None
                return out
            return {
                "index": 0,
                "text": content or "",
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "prompt_token_ids": None,
                "token_ids": None,
            }

        # As in vLLM, nothing is sent before the first engine output (time to first token):
        # then the role chunk (chat) and the first content chunk go out together.
        await asyncio.sleep(self._sleep_until(arrived, 0))
        if chat and not await send(
            [choice(None, None, role=True)],
            self._usage(prompt_tokens, 0) if continuous else None,
            prompt_token_ids=None,
            prompt_text=None,
        ):
            return response
        first_at = time.perf_counter()
        finish = "length" if 0 < n_out < self.config.output_tokens else "stop"
        per_chunk = max(1, self.config.tokens_per_chunk)
        for index in range(0, n_out, per_chunk):
            error_after = self.config.stream_error_after
            if error_after is not None and index // per_chunk >= error_after:
                error = {"message": "injected engine error", "type": "InternalServerError",
                         "param": None, "code": 500}  # fmt: skip
                await response.write(f"data: {json.dumps({'error': error})}\n\n".encode())
                await response.write(b"data: [DONE]\n\n")
                await response.write_eof()
                return response
            count = min(per_chunk, n_out - index)
            await asyncio.sleep(self._sleep_until(arrived, index))
            last = index + count >= n_out
            usage = self._usage(prompt_tokens, index + count) if continuous else None
            if not await send([choice(_TOKEN_TEXT * count, finish if last else None)], usage):
                return response
            if index == 0:
                first_at = time.perf_counter()
        if n_out == 0:
            empty_usage = self._usage(prompt_tokens, 0) if continuous else None
            if not await send([choice("", "stop")], empty_usage):
                return response
            first_at = time.perf_counter()
        # As in vLLM, the request's statistics are recorded when the engine finishes it, before
        # the usage chunk and `[DONE]` go out: a client that has read `[DONE]` can count on
        # `timings` and `/metrics` holding its request (recording after the end of the body
        # raced with a client that reads `[DONE]` and looks at once).
        done_at = time.perf_counter()
        self._finish(prompt_tokens, n_out, first_at - arrived, done_at - arrived)
        if include_usage and not await send(
            [], self._usage(prompt_tokens, n_out), system_fingerprint=SYSTEM_FINGERPRINT
        ):
            return response
        if not self.config.omit_done:
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _tokenize(self, request: web.Request) -> web.Response:
        if self.config.tokenize_not_json:
            return web.Response(
                text="<html><body>Bad gateway</body></html>", content_type="text/html"
            )
        body = await self._read_json(request)
        if isinstance(body, web.Response):
            return body
        try:
            self._check_model(body)
        except _ModelNotFoundError as exc:
            return self._error(f"The model `{exc}` does not exist.", 404, "NotFoundError", "model")
        if "messages" in body:
            text = self._chat_prompt(
                body["messages"], bool(body.get("add_generation_prompt", True))
            )
        else:
            text = str(body.get("prompt", ""))
        tokens = self._token_ids(text)
        if body.get("add_special_tokens") is False:
            tokens = tokens[1:]
        count = len(tokens) if self.config.tokenize_count is None else self.config.tokenize_count
        return web.json_response(
            {
                "count": count,
                "max_model_len": self.config.max_model_len,
                "tokens": tokens,
                "token_strs": None,
            }
        )

    async def _detokenize(self, request: web.Request) -> web.Response:
        body = await self._read_json(request)
        if isinstance(body, web.Response):
            return body
        tokens = body.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return self._error("tokens must be a list of integers", 400, "BadRequestError")
        words = [self._words.get(t, "<bos>" if t == _BOS_ID else "<unk>") for t in tokens]
        return web.json_response({"prompt": " ".join(words)})

    async def _metrics_handler(self, request: web.Request) -> web.Response:
        throttled = self._throttled_429("/metrics", self.config.metrics_throttle)
        if throttled is not None:
            return throttled
        if self.config.malformed_metrics:
            return web.Response(text=MALFORMED_METRICS, content_type="text/plain")
        if self.config.metrics_gzip_bomb > 0:
            bomb = _gzip_zeros(self.config.metrics_gzip_bomb)
            return web.Response(
                body=bomb, headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"}
            )
        return web.Response(
            body=generate_latest(self._metrics.registry),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def _timings_handler(self, request: web.Request) -> web.Response:
        timings = [{"ttft_s": ttft, "e2e_s": e2e} for ttft, e2e in self.timings]
        if request.query.get("clear") in ("1", "true"):
            self.timings.clear()
        return web.json_response({"timings": timings})


def _parse_args(argv: Sequence[str] | None) -> tuple[str, int, FakeVllmConfig]:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.fake_vllm",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default=FakeVllmConfig.served_model_name)
    parser.add_argument("--max-model-len", type=int, default=FakeVllmConfig.max_model_len)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--auth-v1-only", action="store_true")
    parser.add_argument("--cold-start-503s", type=int, default=0)
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--output-tokens", type=int, default=FakeVllmConfig.output_tokens)
    parser.add_argument("--spec-tokens", type=int, default=0)
    parser.add_argument("--hang", action="append", default=[])
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--fail-every", type=int, default=0)
    parser.add_argument("--fail-status", type=int, default=500)
    ns = parser.parse_args(argv)
    config = FakeVllmConfig(
        served_model_name=ns.model,
        max_model_len=ns.max_model_len,
        api_key=ns.api_key,
        auth_all_paths=not ns.auth_v1_only,
        cold_start_503s=ns.cold_start_503s,
        ttft_s=ns.ttft_ms / 1000,
        itl_s=ns.itl_ms / 1000,
        output_tokens=ns.output_tokens,
        num_speculative_tokens=ns.spec_tokens,
        hang_paths=tuple(ns.hang),
        tokens_per_chunk=ns.tokens_per_chunk,
        fail_every=ns.fail_every,
        fail_status=ns.fail_status,
    )
    return ns.host, ns.port, config


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fake server in the foreground until interrupted."""
    host, port, config = _parse_args(argv)
    server = FakeVllmServer(config, host=host)

    async def serve() -> None:
        await server.start_async(port)
        print(f"listening on {server.url}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop_async()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


ServerFactory = Callable[..., FakeVllmServer]
"""The ``fake_vllm`` fixture: ``fake_vllm(**FakeVllmConfig fields)`` returns a started server."""
