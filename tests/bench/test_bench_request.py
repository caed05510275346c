"""One streamed request on its own (the preflight's and the probe's) against a real server on
127.0.0.1: token counts from usage, error statuses, Retry-After and credentials."""

from __future__ import annotations

import asyncio

import pytest

import bench.load.hotpath
from bench.load.hotpath import HotResult, RequestSpec, send_one
from endpoint.auth import ApiKeyAuth, AuthStrategy, NoAuth
from tests.bench._reads import record_reads
from tests.bench.conftest import MODEL, ServerFactory


def _send(url: str, spec: RequestSpec, auth: AuthStrategy | None = None) -> HotResult:
    return asyncio.run(send_one(url, spec, auth or NoAuth(), timeout_s=10.0))


def _spec(tokens: int = 20, model: str = MODEL) -> RequestSpec:
    return RequestSpec(model, "hello there world", tokens)


def test_output_tokens_from_usage_not_chunks(
    fake_vllm: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsers = record_reads(monkeypatch, bench.load.hotpath)
    # Four tokens per chunk, as with speculative decoding: 5 content chunks for 20 tokens.
    server = fake_vllm(ttft_s=0.02, itl_s=0.01, output_tokens=20, tokens_per_chunk=4)
    r = _send(server.url, _spec(20))
    assert r.ok, r.error
    assert r.output_tokens == 20
    assert r.chunks == 5 + 1  # content chunks plus the final usage chunk
    (reads,) = parsers
    # Per-token ITL: the tokens of each read after the first share its gap, 4 per chunk.
    assert reads.first_read_tokens % 4 == 0
    assert len(r.itls_s) == 20 - reads.first_read_tokens
    assert r.itls_s == pytest.approx(reads.shared_gaps())
    assert r.ttft_s is not None
    assert 0.02 + 4 * 0.04 - 0.001 <= r.ttft_s + sum(r.itls_s) <= r.e2e_s + 1e-9
    assert r.tpot_s == pytest.approx((r.e2e_s - r.ttft_s) / 19)


def test_http_errors_keep_their_status_body_and_retry_after(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(fail_every=1, fail_status=503)
    r = _send(server.url, _spec())
    assert (r.ok, r.error_kind, r.status) == (False, "http_status", 503)
    assert "injected failure" in (r.error or "")
    throttled = fake_vllm(completions_throttle=1, retry_after="7")
    r = _send(throttled.url, _spec())
    assert (r.status, r.retry_after_s) == (429, 7.0)
    r = _send(fake_vllm().url, _spec(model="no-such-model"))
    assert (r.ok, r.error_kind, r.status) == (False, "http_status", 404)


def test_missing_credentials_are_classified_as_auth(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(api_key="sekret")
    r = _send(server.url, _spec(), ApiKeyAuth("BENCH_TEST_KEY", environ={}))
    assert (r.ok, r.error_kind) == (False, "auth")
    assert not [q for q in server.requests if q.path == "/v1/completions"]


def test_api_key_is_sent(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(api_key="sekret", output_tokens=3)
    auth = ApiKeyAuth("BENCH_TEST_KEY", environ={"BENCH_TEST_KEY": "sekret"})
    r = _send(server.url, _spec(3), auth)
    assert r.ok, r.error
