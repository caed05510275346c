"""The hot path: SSE parsing per read, honest ITL when reads coalesce, errors, real HTTP."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
import time

import pytest

import bench.load.hotpath
from bench.load.hotpath import (
    HotResult,
    RequestSpec,
    make_session,
    request_headers,
    stream_completion,
)
from bench.load.sse import StreamedError, StreamParser, StreamProtocolError
from tests.bench._reads import record_reads
from tests.bench.conftest import MODEL, ServerFactory


def _event(completion_tokens: int, text: str = "tok ", prompt_tokens: int = 4) -> bytes:
    chunk = {
        "id": "cmpl-1",
        "object": "text_completion",
        "choices": [{"index": 0, "text": text, "finish_reason": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


FINAL = (
    b'data: {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 5, '
    b'"total_tokens": 9}}\n\ndata: [DONE]\n\n'
)


def test_one_chunk_per_read_gives_one_gap_per_token() -> None:
    p = StreamParser(start=0.0)
    for i in range(5):
        p.feed(_event(i + 1), 0.1 + 0.02 * i)
    p.feed(FINAL, 0.2)
    assert p.ttft == pytest.approx(0.1)
    assert p.itls == pytest.approx([0.02] * 4)
    assert (p.coalesced_tokens, p.reads, p.output_tokens, p.done) == (0, 5, 5, True)


def test_chunks_coalesced_in_one_read_share_the_gap_never_zero() -> None:
    # The loop fell behind: chunks 2, 3 and 4 arrive in one read 60 ms after chunk 1.
    p = StreamParser(start=0.0)
    p.feed(_event(1), 0.1)
    p.feed(_event(2) + _event(3) + _event(4), 0.16)
    p.feed(_event(5) + FINAL, 0.18)
    assert p.itls == pytest.approx([0.02, 0.02, 0.02, 0.02])
    assert min(p.itls) > 0
    assert p.coalesced_tokens == 2  # chunks 3 and 4 shared a read with chunk 2
    assert p.reads == 3


def test_tokens_of_one_chunk_are_not_coalescing() -> None:
    # Speculative decoding: one chunk brings 3 tokens (the server sent them at once).
    p = StreamParser(start=0.0)
    p.feed(_event(1), 0.1)
    p.feed(_event(4), 0.16)
    assert p.itls == pytest.approx([0.02, 0.02, 0.02])
    assert p.coalesced_tokens == 0


def test_first_read_with_several_chunks_gives_ttft_and_no_invented_gaps() -> None:
    p = StreamParser(start=0.0)
    p.feed(_event(1) + _event(2), 0.12)
    p.feed(_event(3), 0.14)
    assert p.ttft == pytest.approx(0.12)
    assert p.itls == pytest.approx([0.02])  # token 2 has no observed interval before it
    assert p.coalesced_tokens == 1


def test_itls_add_up_to_first_to_last_token_whatever_the_read_pattern() -> None:
    stream = b"".join(_event(i + 1) for i in range(40)) + FINAL
    rng = random.Random(7)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 60)))
        pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        p = StreamParser(start=0.0)
        at = 0.0
        first_at = last_at = None
        for piece in pieces:
            at += rng.uniform(0.0, 0.05)
            before = p.seen
            p.feed(piece, at)
            if p.seen > before:
                first_at = at if first_at is None else first_at
                last_at = at
        assert p.output_tokens == 5 and p.done  # final usage chunk
        assert p.seen == 40
        assert all(x >= 0 for x in p.itls)
        assert first_at is not None and last_at is not None
        assert sum(p.itls) == pytest.approx(last_at - first_at)


def test_an_absurd_usage_count_is_refused_not_allocated() -> None:
    p = StreamParser(start=0.0)
    p.feed(_event(1), 0.1)
    with pytest.raises(StreamProtocolError, match="tokens arrived in one chunk"):
        p.feed(_event(10**9), 0.2)
    assert len(p.itls) == 0


def test_errors_inside_the_stream_and_bad_chunks_raise() -> None:
    p = StreamParser(start=0.0)
    with pytest.raises(StreamedError) as caught:
        p.feed(b'data: {"error": {"message": "boom", "code": 500}}\n\n', 0.1)
    assert caught.value.status == 500
    # A message over several lines (a traceback) is shown as its first line.
    with pytest.raises(StreamedError, match=r"^error in stream: Engine died\.$"):
        StreamParser(0.0).feed(b'data: {"error": {"message": "Engine died.\\nTraceback"}}\n', 0.1)
    with pytest.raises(StreamProtocolError):
        StreamParser(0.0).feed(b"data: {not json\n\n", 0.1)
    with pytest.raises(StreamProtocolError):
        StreamParser(0.0).feed(b"data: [1, 2]\n\n", 0.1)


def _complete(url: str, spec: RequestSpec, timeout_s: float = 10.0) -> HotResult:
    async def go() -> HotResult:
        async with make_session(2) as session:
            return await stream_completion(
                session, url + "/v1/completions", spec.encoded_body, request_headers(None),
                timeout_s=timeout_s,
            )  # fmt: skip

    return asyncio.run(go())


def test_real_server_pacing_and_token_counts(
    fake_vllm: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsers = record_reads(monkeypatch, bench.load.hotpath)
    server = fake_vllm(ttft_s=0.05, itl_s=0.01, output_tokens=12)
    r = _complete(server.url, RequestSpec(MODEL, "hello there world", 12))
    assert r.ok, r.error
    assert (r.output_tokens, r.prompt_tokens) == (12, 4)
    assert r.ttft_s is not None and r.ttft_s >= 0.045
    (reads,) = parsers
    # One gap per token after the first read: 11 when the first token came alone, fewer when
    # a late read found more tokens waiting with it (they share no gap before them).
    assert len(r.itls_s) == 12 - reads.first_read_tokens
    assert (r.reads, r.coalesced_tokens) == (len(reads.content_reads), 12 - r.reads)
    # The gaps from the first token to the last: the server sends them 10 ms apart, so
    # together they span 110 ms, less only what the client read the first token late by
    # (ttft_s beyond the server's 50 ms: a loaded machine), and within the stream's span
    # after the first token (the end of the stream, read after the last token, may come late
    # on a loaded machine: no ceiling on that).
    first_late = r.ttft_s - 0.05
    assert 11 * 0.01 - first_late - 0.001 <= sum(r.itls_s) <= r.e2e_s - r.ttft_s + 1e-9


@pytest.mark.parametrize(
    ("config", "kind", "status"),
    [
        ({"fail_every": 1, "fail_status": 503}, "http_status", 503),
        ({"omit_done": True}, "truncated", 200),
        ({"stream_error_after": 1}, "http_status", 500),
        ({"drop_after_chunks": 2}, "connection", 200),
    ],
)
def test_failures_are_classified(
    fake_vllm: ServerFactory, config: dict[str, object], kind: str, status: int
) -> None:
    server = fake_vllm(output_tokens=4, **config)
    r = _complete(server.url, RequestSpec(MODEL, "hi", 4))
    assert not r.ok
    assert (r.error_kind, r.status) == (kind, status)


def test_timeout_is_classified(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(hang_paths=("/v1/completions",))
    r = _complete(server.url, RequestSpec(MODEL, "hi", 4), timeout_s=0.2)
    assert (r.ok, r.error_kind) == (False, "timeout")


def test_refused_connection_is_classified(closed_port: int) -> None:
    r = _complete(f"http://127.0.0.1:{closed_port}", RequestSpec(MODEL, "hi", 4))
    assert (r.ok, r.error_kind) == (False, "connection")


def test_a_server_that_sends_every_chunk_in_one_write_gets_no_zero_gaps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over real TCP: a server writes chunk 1, waits, then writes chunks 2-5 at once."""
    parsers = record_reads(monkeypatch, bench.load.hotpath)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    first_written: list[float] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(
                next(
                    line.split(b":")[1]
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
            )
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                + _event(1)
            )
            first_written.append(time.perf_counter())
            time.sleep(0.08)  # never shorter: the pause the reads are checked against
            conn.sendall(b"".join(_event(i) for i in range(2, 6)) + FINAL)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        r = _complete(f"http://127.0.0.1:{port}", RequestSpec(MODEL, "hi", 5))
    finally:
        thread.join(5)
        listener.close()
    assert r.ok, r.error
    (reads,) = parsers
    # Idle, two reads: chunk 1, then chunks 2-5 (3 of them coalesced) sharing the 80 ms gap
    # as 4 x 20 ms. A client that reads late may find chunk 1 with the rest; whatever the
    # reads, each read's tokens share its gap (never a gap and three zeros) ...
    assert (r.reads, r.coalesced_tokens) == (len(reads.content_reads), 5 - r.reads)
    assert len(r.itls_s) == 5 - reads.first_read_tokens
    assert r.itls_s == pytest.approx(reads.shared_gaps())
    assert all(x > 0 for x in r.itls_s)
    # ... and together they span the server's 80 ms pause, less what the client read chunk 1
    # late by (its first read's instant, on the same clock as the server's write).
    assert r.ttft_s is not None
    first_late = r.start_s + r.ttft_s - first_written[0]
    assert sum(r.itls_s) >= 0.08 - first_late - 0.001


def test_warm_up_keeps_connections_for_a_small_health_body_and_caps_a_large_one() -> None:
    from aiohttp import web

    from bench.load.hotpath import warm_connections

    async def go() -> tuple[int, int, int]:
        async def small(_: web.Request) -> web.Response:
            return web.Response(body=b"x" * 1000)

        async def huge(_: web.Request) -> web.Response:
            return web.Response(body=b"x" * (8 << 20))

        app = web.Application()
        app.router.add_get("/health", small)
        app.router.add_get("/huge", huge)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with make_session(4) as session:
                answered = await warm_connections(session, f"http://127.0.0.1:{port}", 4)
                connector = session.connector
                assert connector is not None
                idle = sum(len(v) for v in connector._conns.values())
                capped = await warm_connections(
                    session, f"http://127.0.0.1:{port}", 2, path="/huge"
                )
            return answered, idle, capped
        finally:
            await runner.cleanup()

    answered, idle, capped = asyncio.run(go())
    assert (answered, idle) == (4, 4)  # read to the end: every connection back in the pool
    assert capped == 2  # answered, without reading 8 MiB
