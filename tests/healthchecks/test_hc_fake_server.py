"""The fake vLLM server speaks vLLM's wire format and honours its knobs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from endpoint.client import make_client
from endpoint.metrics import parse_metrics
from healthchecks.checks import CheckResult, check_metrics
from tests.healthchecks._helpers import MODEL, ServerFactory, arriving_at_once

ROOT = Path(__file__).resolve().parents[2]


def _sse(server_url: str, body: dict[str, object]) -> list[str]:
    with httpx.stream("POST", server_url + "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return [line for line in response.iter_lines() if line]


def test_models_shape(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(max_model_len=4096)
    body = httpx.get(server.url + "/v1/models").json()
    assert body["object"] == "list"
    (card,) = body["data"]
    assert card["id"] == MODEL and card["root"] == MODEL
    assert card["object"] == "model" and card["owned_by"] == "vllm"
    assert card["parent"] is None and card["max_model_len"] == 4096


def test_stream_wire_format_with_usage(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(output_tokens=8)
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hello there"}],
        "stream": True,
        "max_tokens": 3,
        "stream_options": {"include_usage": True},
    }
    lines = _sse(server.url, body)
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    contents = [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]]
    assert len(contents) == 3  # max_tokens honoured
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 3
    assert "usage" not in chunks[1]


def test_continuous_usage_stats(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(output_tokens=4)
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    chunks = [json.loads(line[6:]) for line in _sse(server.url, body)[:-1]]
    counts = [c["usage"]["completion_tokens"] for c in chunks]
    assert counts == [0, 1, 2, 3, 4, 4]


def test_non_streaming_and_completions(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(output_tokens=5)
    chat = httpx.post(
        server.url + "/v1/chat/completions",
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": "hi"}],
            "max_completion_tokens": 2,
        },
    ).json()
    assert chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"]["content"] == "tok tok "
    assert chat["usage"]["completion_tokens"] == 2
    completion = httpx.post(server.url + "/v1/completions", json={"model": MODEL, "prompt": "a b"})
    assert completion.json()["choices"][0]["text"] == "tok " * 5
    assert completion.json()["usage"]["prompt_tokens"] == 3  # BOS + 2 words


def test_unknown_model_error_shape(fake_vllm: ServerFactory) -> None:
    server = fake_vllm()
    response = httpx.post(server.url + "/v1/completions", json={"model": "other", "prompt": "a"})
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["message"] == "The model `other` does not exist."
    assert set(error) == {"message", "type", "param", "code"}


def test_tokenize_and_detokenize(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(max_model_len=1024)
    tok = httpx.post(
        server.url + "/tokenize", json={"model": MODEL, "prompt": "one two one"}
    ).json()
    assert tok["count"] == 4 and tok["max_model_len"] == 1024
    assert tok["tokens"][1] == tok["tokens"][3]
    text = httpx.post(server.url + "/detokenize", json={"tokens": tok["tokens"][1:]}).json()
    assert text["prompt"] == "one two one"


def test_metrics_use_vllm_names_and_count_requests(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(output_tokens=4, num_speculative_tokens=2, spec_acceptance=(0.5, 0.5))
    httpx.post(server.url + "/v1/completions", json={"model": MODEL, "prompt": "a b c"})
    text = httpx.get(server.url + "/metrics").text
    assert f'vllm:num_requests_running{{engine="0",model_name="{MODEL}"}}' in text
    assert 'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0"' in text
    snap = parse_metrics(text)
    assert snap.prompt_tokens_total == 4 and snap.generation_tokens_total == 4
    assert snap.ttft_count == 1
    assert snap.spec_decode is not None
    assert snap.spec_decode.num_drafts == 2 and snap.spec_decode.accepted_per_position == (1, 1)


def test_cold_start_then_ready(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(cold_start_503s=2)
    codes = [httpx.get(server.url + "/health").status_code for _ in range(3)]
    assert codes == [503, 503, 200]


def test_pacing_is_honoured_under_concurrency(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(ttft_s=0.2, itl_s=0.02, output_tokens=5)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True}

    async def one(client: httpx.AsyncClient) -> None:
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            async for _ in response.aiter_lines():
                pass

    async def run() -> None:
        async with make_client(server.url, max_concurrency=200) as client:
            await asyncio.gather(*(one(client) for _ in range(150)))

    asyncio.run(run())
    assert len(server.timings) == 150
    # Lower bounds are the pacing (slept by the server, whatever the load); the upper bounds
    # only say seconds, not milliseconds (that would be 200 and 280).
    for ttft, e2e in server.timings:
        assert 0.2 <= ttft < 30
        assert 0.28 <= e2e < 30
    # Streams overlap at the server (its pacing sleeps, never blocks): served one after another
    # there would never be two at once.
    assert server.peak_in_flight >= 2


def test_150_streams_are_at_the_server_at_once(fake_vllm: ServerFactory) -> None:
    """More than httpx's default 100 connections: the server holds every request it gets (it
    never answers), so all 150 are there together."""
    server = fake_vllm(hang_paths=("/v1/chat/completions",))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True}

    async def one(client: httpx.AsyncClient) -> None:
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            async for _ in response.aiter_lines():
                pass

    async def run() -> int:
        async with make_client(server.url, max_concurrency=200) as client:
            return await arriving_at_once(server, 150, lambda: one(client))

    assert asyncio.run(run()) == 150


def test_runs_as_a_process() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fake_vllm", "--port", "0", "--output-tokens", "2"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:")
        url = line.removeprefix("listening on ")
        assert httpx.get(url + "/health").status_code == 200
        response = httpx.post(url + "/v1/completions", json={"prompt": "x"})
        assert response.json()["usage"]["completion_tokens"] == 2
    finally:
        process.terminate()
        process.wait(10)
        assert process.stdout is not None
        process.stdout.close()


def test_nothing_is_streamed_before_the_time_to_first_token(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(ttft_s=0.15, output_tokens=1)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True}
    started = time.perf_counter()
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body) as response:
        lines = response.iter_lines()
        first = next(line for line in lines if line)
        first_at = time.perf_counter() - started
        assert '"role": "assistant"' in first
        assert [line for line in lines if line][-1] == "data: [DONE]"
    assert first_at >= 0.15
    (ttft, e2e) = server.timings[0]
    assert 0.15 <= ttft <= e2e < 30  # seconds (not milliseconds: that would be 150)


def test_health_warns_when_speculative_decoding_accepts_nothing(
    fake_vllm: ServerFactory,
) -> None:
    """0 % acceptance still serves (the check passes) but is said, in the detail and the
    result's warnings; a drafter that accepts some says nothing."""

    async def metrics(url: str) -> CheckResult:
        async with make_client(url) as client:
            httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": "a b c"})
            return await check_metrics(client, served_model_name=MODEL)

    server = fake_vllm(output_tokens=8, num_speculative_tokens=2, spec_acceptance=(0.0, 0.0))
    result = asyncio.run(metrics(server.url))
    assert result.ok
    assert result.warnings and "accepted none of" in result.warnings[0]
    assert "WARNING: speculative decoding accepted none" in result.detail
    good = fake_vllm(output_tokens=8, num_speculative_tokens=2, spec_acceptance=(0.5, 0.5))
    assert asyncio.run(metrics(good.url)).warnings == ()
    poor = fake_vllm(output_tokens=64, num_speculative_tokens=1, spec_acceptance=(0.04,))
    result = asyncio.run(metrics(poor.url))
    assert result.warnings and "accepted 3.1% of 32 draft tokens" in result.warnings[0]
