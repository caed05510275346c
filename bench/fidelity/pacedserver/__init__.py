"""A paced completions server that times every request from the moment it received it.

For ``python -m bench.fidelity``: a streaming ``POST /v1/completions`` whose time to first token
and interval between tokens are known, cheap enough to pace 1024 streams at 20 ms a token from
one core, and honest about its own lateness: a request's clock starts when its first bytes
arrive (never from a stamp the client sets); its own TTFT and E2E are logged (``GET /timings``,
``?clear=1`` empties it) and exported as vLLM does in ``GET /metrics``. A bare
:class:`asyncio.Protocol` (keep-alive, chunked events pre-encoded, one timer per token).

``python -m bench.fidelity.pacedserver --ttft-ms 100 --itl-ms 20 --output-tokens 16 --cpu 1``
prints ``listening on http://127.0.0.1:PORT``.

**Step-model mode** (``--step-model``): the pacing follows :class:`serving.capacity.perf.StepModel`
with known coefficients, so a calibration fitted on a sweep against it can be checked against
the truth: a request arriving with ``B - 1`` others in flight gets the model's TTFT and step at
concurrency ``B``. The statistics record the times the model gave each token, as vLLM records
its engine's, so a late timer delays what the client reads but never the record.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any, cast

import orjson
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from serving.capacity.perf import Coefficients, Device, KvLayer, Shape, StepModel

__all__ = [
    "SYNTHETIC_DEVICE",
    "SYNTHETIC_OUTPUT_TOKENS",
    "SYNTHETIC_SHAPE",
    "SYNTHETIC_TRUTH",
    "PacedServer",
    "serve",
    "serving_in_thread",
    "synthetic_model",
]

#: A made-up checkpoint for step-model mode: 1 GB of weights, 1 B parameters, one full-attention
#: layer of 400 kB per token (so a few sequences of a few hundred tokens read as much as the
#: weights, and the two reads can be told apart).
SYNTHETIC_SHAPE = Shape(
    name="synthetic", weight_bytes=1e9, params=1e9, kv_layers=(KvLayer(1, 400_000.0, None),)
)
#: A made-up device: 100 GB/s (10 ms for the weights at full efficiency), 4 TFLOP/s (a decode
#: step's compute grows by 1 ms per sequence at full efficiency: a slope across the sweep's
#: batches well above a loaded machine's scheduling delay, so the fit can tell it apart).
SYNTHETIC_DEVICE = Device("synthetic", memory_bandwidth_bytes_per_s=100e9, dense_flops=4e12)

#: The coefficients the synthetic-calibration test and script give the step-model server, which
#: a fit on a sweep against it must recover.
SYNTHETIC_TRUTH = Coefficients(
    bandwidth_efficiency=0.8,
    decode_compute_efficiency=0.4,
    step_overhead_s=0.008,
    prefill_compute_efficiency=0.6,
    prefill_overhead_s=0.04,
)


#: Output tokens per request in the synthetic sweep: the client's step time is its first to
#: last token over the steps between, so a token delivered a few milliseconds late on a loaded
#: machine is spread over 15 steps (over 7 with 8 tokens, it moved a fitted coefficient by 5 %).
SYNTHETIC_OUTPUT_TOKENS = 16


def synthetic_model(coefficients: Coefficients, max_num_seqs: int = 64) -> StepModel:
    """The step model the fake server paces by (and a calibration must recover)."""
    return StepModel(
        SYNTHETIC_SHAPE,
        SYNTHETIC_DEVICE,
        coefficients,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=8192,
        basis="synthetic truth",
    )


TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
"""vLLM's ``vllm:time_to_first_token_seconds`` buckets."""
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
MODEL = "google/gemma-4-12B-it"
_CHOICE = {
    "index": 0,
    "text": "tok ",
    "logprobs": None,
    "stop_reason": None,
    "prompt_token_ids": None,
    "token_ids": None,
}
"""A token's choice as vLLM streams it (the chunks weigh what vLLM's do)."""


def _chunked(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class PacedServer:
    """The server's state: pacing, the per-request log, the histograms."""

    def __init__(
        self,
        ttft_s: float,
        itl_s: float,
        output_tokens: int,
        model: str = MODEL,
        step_model: StepModel | None = None,
    ):
        self.ttft_s = ttft_s
        self.itl_s = itl_s
        self.step_model = step_model
        #: Requests being answered now (the batch a step-model request joins).
        self.active = 0
        self.output_tokens = output_tokens
        self.model = model
        self.log: list[tuple[float, float]] = []
        """(ttft_s, e2e_s) per finished request, measured by this server."""
        registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        self.registry = registry
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            labels, buckets=TTFT_BUCKETS, registry=registry,
        ).labels(model, "0")  # fmt: skip
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
            labels, buckets=ITL_BUCKETS, registry=registry,
        ).labels(model, "0")  # fmt: skip
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
            labels, buckets=E2E_BUCKETS, registry=registry,
        ).labels(model, "0")  # fmt: skip
        self._chunks: dict[tuple[int, int], list[bytes]] = {}

    def chunks(self, prompt_tokens: int, n: int) -> list[bytes]:
        """The chunked-encoded events of one stream: n tokens, usage, [DONE], the end."""
        key = (prompt_tokens, n)
        cached = self._chunks.get(key)
        if cached is not None:
            return cached

        def event(choices: list[dict[str, Any]], completion_tokens: int) -> bytes:
            usage = {
                "prompt_tokens": prompt_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "completion_tokens": completion_tokens,
            }
            body = {"id": "cmpl-paced", "object": "text_completion", "created": 0}
            body |= {"model": self.model, "choices": choices, "usage": usage}
            if not choices:
                body["system_fingerprint"] = "vllm-0.27.1-paced"
            return _chunked(b"data: " + orjson.dumps(body) + b"\n\n")

        out = [
            event([{**_CHOICE, "finish_reason": "length" if i == n - 1 else None}], i + 1)
            for i in range(n)
        ]
        tail = event([], n)
        tail += _chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        out.append(tail)
        self._chunks[key] = out
        return out


_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)


def _response(status: str, body: bytes, content_type: str = "application/json") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
    ).encode() + body


class _Connection(asyncio.Protocol):
    def __init__(self, server: PacedServer) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.received_at: float | None = None
        self.busy = False
        self.timers: list[asyncio.TimerHandle] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in self.timers:
            timer.cancel()
        if self.timers and self.busy:
            self.server.active -= 1
        self.timers = []
        self.transport = None

    def data_received(self, data: bytes) -> None:
        if self.received_at is None:
            self.received_at = time.perf_counter()
        self.buffer += data
        if not self.busy:
            self._next_request()

    def _next_request(self) -> None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buffer[:end].decode("latin-1")
        lines = head.split("\r\n")
        method, target, *_ = [*lines[0].split(" "), "", ""]
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip() or 0)
        if len(self.buffer) < end + 4 + length:
            return
        body = self.buffer[end + 4 : end + 4 + length]
        self.buffer = self.buffer[end + 4 + length :]
        received = self.received_at if self.received_at is not None else time.perf_counter()
        self.received_at = time.perf_counter() if self.buffer else None
        self._handle(method, target, body, received)

    def _send(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def _done(self) -> None:
        self.busy = False
        self.timers = []
        if self.buffer:
            self._next_request()

    def _handle(self, method: str, target: str, body: bytes, received: float) -> None:
        path, _, query = target.partition("?")
        server = self.server
        if method == "GET" and path == "/health":
            self._send(_response("200 OK", b""))
        elif method == "GET" and path == "/v1/models":
            card = {"id": server.model, "object": "model", "max_model_len": 32768}
            self._send(_response("200 OK", orjson.dumps({"object": "list", "data": [card]})))
        elif method == "GET" and path == "/metrics":
            self._send(
                _response("200 OK", generate_latest(server.registry), "text/plain; version=0.0.4")
            )
        elif method == "GET" and path == "/timings":
            log = [{"ttft_s": t, "e2e_s": e} for t, e in server.log]
            if "clear=1" in query:
                server.log.clear()
            self._send(_response("200 OK", orjson.dumps({"timings": log})))
        elif method == "POST" and path == "/v1/completions":
            self._stream(body, received)
            return
        else:
            self._send(_response("404 Not Found", b'{"detail":"Not Found"}'))
        self._done()

    def _stream(self, body: bytes, received: float) -> None:
        server = self.server
        try:
            request: Any = orjson.loads(body)
            prompt = str(request.get("prompt", ""))
            max_tokens = int(request.get("max_tokens", server.output_tokens))
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
            self._send(_response("400 Bad Request", b'{"error":{"message":"bad body"}}'))
            self._done()
            return
        n = max(1, min(server.output_tokens, max_tokens))
        prompt_tokens = len(prompt.split()) + 1
        chunks = server.chunks(prompt_tokens, n)
        ttft_s, itl_s = server.ttft_s, server.itl_s
        server.active += 1
        if server.step_model is not None:
            from serving.capacity.perf import Workload

            # The model's steady state with this many in flight: its TTFT and mean step.
            point = server.step_model.at_concurrency(
                float(server.active), Workload(prompt_tokens, n)
            )
            ttft_s, itl_s = point.engine_ttft_s, point.step_s
        self.busy = True
        self._send(_STREAM_HEAD)
        written: list[float] = []
        loop = self.loop
        # perf_counter and the loop's clock are both CLOCK_MONOTONIC on Linux.
        offset = loop.time() - time.perf_counter()

        engine_time = server.step_model is not None

        def token(i: int) -> None:
            self._send(chunks[i])
            # Step-model mode stands in for an engine: a token is produced when the model says
            # (received + ttft + i x itl), and that is what its statistics record, as vLLM
            # records its engine's timestamps. A timer this loop fires late on a loaded machine
            # delays the write the client sees, never the record: the record stays the truth a
            # calibration is checked against. Fixed pacing records the write itself (the
            # fidelity script measures the server's own lateness).
            now = received + ttft_s + i * itl_s if engine_time else time.perf_counter()
            if written:
                server.itl.observe(now - written[-1])
            written.append(now)
            if i == n - 1:
                server.active -= 1
                server.ttft.observe(written[0] - received)
                server.e2e.observe(now - received)
                server.log.append((written[0] - received, now - received))
                self._send(chunks[n])
                self._done()

        self.timers = [
            loop.call_at(received + offset + ttft_s + i * itl_s, token, i) for i in range(n)
        ]


async def serve(server: PacedServer, host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: _Connection(server), host, port, backlog=4096)
    sockets = srv.sockets or ()
    print(f"listening on http://{host}:{sockets[0].getsockname()[1]}", flush=True)
    async with srv:
        await srv.serve_forever()


@contextlib.contextmanager
def serving_in_thread(server: PacedServer) -> Iterator[str]:
    """Serve ``server`` on 127.0.0.1 from an event loop in a daemon thread; yields its base URL
    and, on exit, closes the listener, lets closed connections finish and stops the loop."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    listeners: list[asyncio.Server] = []
    connections: weakref.WeakSet[_Connection] = weakref.WeakSet()

    def connection() -> _Connection:
        made = _Connection(server)
        connections.add(made)
        return made

    def run() -> None:
        asyncio.set_event_loop(loop)

        async def start() -> None:
            listeners.append(await loop.create_server(connection, "127.0.0.1", 0))
            started.set()

        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not started.wait(5):
        raise RuntimeError("the paced server did not start within 5 s")

    async def close() -> None:
        listeners[0].close()
        await listeners[0].wait_closed()
        # Every connection still open is closed here, and its connection_lost has run before
        # the loop stops (a fixed pause let a slow machine close the loop over live sockets).
        for live in list(connections):
            if live.transport is not None:
                live.transport.abort()
        deadline = loop.time() + 5
        while any(c.transport is not None for c in connections) and loop.time() < deadline:
            await asyncio.sleep(0)

    try:
        yield f"http://127.0.0.1:{listeners[0].sockets[0].getsockname()[1]}"
    finally:
        asyncio.run_coroutine_threadsafe(close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
