"""One streamed request against a real server on 127.0.0.1: timings, token counts, errors."""

from __future__ import annotations

import asyncio

import pytest

import bench.load.request
from bench.load.request import RequestSpec, send_request
from bench.results.record import RequestResult
from endpoint.auth import ApiKeyAuth
from endpoint.client import make_client
from tests.bench._reads import record_reads
from tests.bench.conftest import MODEL, ServerFactory


def _send(url: str, spec: RequestSpec, timeout_s: float = 10.0, **client: object) -> RequestResult:
    async def go() -> RequestResult:
        async with make_client(url, **client) as c:  # type: ignore[arg-type]
            return await send_request(c, spec, timeout_s=timeout_s)

    return asyncio.run(go())


def _spec(tokens: int = 20, model: str = MODEL) -> RequestSpec:
    return RequestSpec(model, "hello there world", tokens)


def test_known_pacing_gives_ttft_itl_tpot_e2e(
    fake_vllm: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsers = record_reads(monkeypatch, bench.load.request)
    server = fake_vllm(ttft_s=0.05, itl_s=0.01, output_tokens=20)
    r = _send(server.url, _spec(20))
    assert r.ok, r.error
    assert r.output_tokens == 20
    assert r.prompt_tokens == 4  # BOS + three words
    (reads,) = parsers
    # Never before the server's pacing (less than 1 ms of clock skew allowed); how much later
    # is the machine's (the first request also opens its connection), so no ceiling.
    assert r.ttft_s is not None and r.ttft_s >= 0.049
    # One ITL per token after the first read: 19 when the first token was read alone, fewer
    # when the client read late and found more tokens waiting with it.
    assert len(r.itls_s) == 20 - reads.first_read_tokens
    assert r.itls_s == pytest.approx(reads.shared_gaps())
    # The last token is sent no earlier than 50 + 19 x 10 ms after the request arrived, so
    # TTFT and the gaps (send to the first read, then to the last) add up to at least that,
    # however late any read was; and to no more than E2E (the end of the stream comes after
    # the last token): a wrong unit or a gap counted twice would break one or the other.
    assert 0.05 + 19 * 0.01 - 0.001 <= r.ttft_s + sum(r.itls_s) <= r.e2e_s + 1e-9
    assert r.tpot_s is not None and r.tpot_s == pytest.approx((r.e2e_s - r.ttft_s) / 19)
    assert r.tpot_s * 19 >= sum(r.itls_s) - 1e-9


def test_output_tokens_from_usage_not_chunks(
    fake_vllm: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsers = record_reads(monkeypatch, bench.load.request)
    # Four tokens per chunk, as with speculative decoding: 5 content chunks for 20 tokens.
    server = fake_vllm(ttft_s=0.02, itl_s=0.01, output_tokens=20, tokens_per_chunk=4)
    r = _send(server.url, _spec(20))
    assert r.ok, r.error
    assert r.output_tokens == 20
    assert r.chunks == 5 + 1  # content chunks plus the final usage chunk
    (reads,) = parsers
    # Per-token ITL: the tokens of each read after the first share its gap, 4 per chunk: 16
    # ITLs when the first chunk was read alone (not 4, one per chunk).
    assert reads.first_read_tokens % 4 == 0
    assert len(r.itls_s) == 20 - reads.first_read_tokens
    assert r.itls_s == pytest.approx(reads.shared_gaps())
    # The last chunk is due 20 + 4 x 40 ms after arrival; each 40 ms gap is shared by its 4
    # tokens (a whole 40 ms per token would add up to four times the stream's span).
    assert r.ttft_s is not None
    assert 0.02 + 4 * 0.04 - 0.001 <= r.ttft_s + sum(r.itls_s) <= r.e2e_s + 1e-9
    assert r.tpot_s == pytest.approx((r.e2e_s - r.ttft_s) / 19)


def test_timeout_is_classified(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(hang_paths=("/v1/completions",))
    r = _send(server.url, _spec(), timeout_s=0.3)
    assert not r.ok
    assert r.error_kind == "timeout"
    assert 0.29 <= r.e2e_s < 5.0  # the timeout, not the hang (which lasts until teardown)


@pytest.mark.parametrize("status", [500, 503])
def test_http_5xx_is_classified_with_its_status(fake_vllm: ServerFactory, status: int) -> None:
    server = fake_vllm(fail_every=1, fail_status=status)
    r = _send(server.url, _spec())
    assert (r.ok, r.error_kind, r.status) == (False, "http_status", status)
    assert "injected failure" in (r.error or "")


def test_http_4xx_is_classified(fake_vllm: ServerFactory) -> None:
    server = fake_vllm()
    r = _send(server.url, _spec(model="no-such-model"))
    assert (r.ok, r.error_kind, r.status) == (False, "http_status", 404)


def test_connection_refused_is_classified(closed_port: int) -> None:
    r = _send(f"http://127.0.0.1:{closed_port}", _spec())
    assert (r.ok, r.error_kind) == (False, "connection")


def test_connection_dropped_mid_stream_is_classified(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(ttft_s=0.01, output_tokens=20, drop_after_chunks=3)
    r = _send(server.url, _spec())
    assert (r.ok, r.error_kind) == (False, "connection")
    assert r.ttft_s is not None  # it had started streaming


def test_stream_without_done_is_truncated(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(output_tokens=5, omit_done=True)
    r = _send(server.url, _spec(5))
    assert (r.ok, r.error_kind) == (False, "truncated")
    assert r.output_tokens == 5


def test_missing_credentials_are_classified_as_auth(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(api_key="sekret")
    r = _send(server.url, _spec(), auth=ApiKeyAuth("BENCH_TEST_KEY", environ={}))
    assert (r.ok, r.error_kind) == (False, "auth")
    assert not [q for q in server.requests if q.path == "/v1/completions"]


def test_api_key_is_sent(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(api_key="sekret", output_tokens=3)
    auth = ApiKeyAuth("BENCH_TEST_KEY", environ={"BENCH_TEST_KEY": "sekret"})
    r = _send(server.url, _spec(3), auth=auth)
    assert r.ok, r.error


def test_error_inside_the_stream_is_an_http_status_error(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(output_tokens=8, stream_error_after=2)
    r = _send(server.url, _spec(8))
    assert (r.ok, r.error_kind, r.status) == (False, "http_status", 500)
    assert "injected engine error" in (r.error or "")
