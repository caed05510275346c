"""One streamed request against a real server on 127.0.0.1: timings, token counts, errors."""

from __future__ import annotations

import asyncio

import pytest

from bench.load.request import RequestSpec, send_request
from bench.results.record import RequestResult
from endpoint.auth import ApiKeyAuth
from endpoint.client import make_client
from tests.bench.conftest import MODEL, ServerFactory


def _send(url: str, spec: RequestSpec, timeout_s: float = 10.0, **client: object) -> RequestResult:
    async def go() -> RequestResult:
        async with make_client(url, **client) as c:  # type: ignore[arg-type]
            return await send_request(c, spec, timeout_s=timeout_s)

    return asyncio.run(go())


def _spec(tokens: int = 20, model: str = MODEL) -> RequestSpec:
    return RequestSpec(model, "hello there world", tokens)


def test_known_pacing_gives_ttft_itl_tpot_e2e(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(ttft_s=0.05, itl_s=0.01, output_tokens=20)
    r = _send(server.url, _spec(20))
    assert r.ok, r.error
    assert r.output_tokens == 20
    assert r.prompt_tokens == 4  # BOS + three words
    # Never before the server's pacing; the upper bound only catches a gross error (the first
    # request also opens its connection, and a loaded machine delays it).
    assert r.ttft_s is not None and 0.049 <= r.ttft_s < 0.5
    assert len(r.itls_s) == 19
    # The server's pacing is a floor (less than 1 ms of clock skew allowed); the ceilings only
    # rule out a wrong unit or a stream read one token per request.
    assert 0.009 <= sorted(r.itls_s)[9] < 0.05
    assert r.tpot_s is not None and 0.0095 <= r.tpot_s < 0.05
    assert r.tpot_s == pytest.approx((r.e2e_s - r.ttft_s) / 19)
    assert 0.05 + 19 * 0.01 - 0.001 <= r.e2e_s < 0.05 + 19 * 0.01 + 0.5


def test_output_tokens_from_usage_not_chunks(fake_vllm: ServerFactory) -> None:
    # Four tokens per chunk, as with speculative decoding: 5 content chunks for 20 tokens.
    server = fake_vllm(ttft_s=0.02, itl_s=0.01, output_tokens=20, tokens_per_chunk=4)
    r = _send(server.url, _spec(20))
    assert r.ok, r.error
    assert r.output_tokens == 20
    assert r.chunks == 5 + 1  # content chunks plus the final usage chunk
    # Per-token ITL: each 40 ms gap carried 4 tokens -> 16 ITLs of ~10 ms (not 4 of 40 ms).
    assert len(r.itls_s) == 16
    assert 0.009 <= sorted(r.itls_s)[8] < 0.03  # a 40 ms gap shared by 4 tokens, not 40 ms
    assert r.tpot_s == pytest.approx((r.e2e_s - (r.ttft_s or 0)) / 19)


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
