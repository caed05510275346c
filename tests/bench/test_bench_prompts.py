"""Prompts sized through /tokenize, and the documented estimate without it."""

from __future__ import annotations

import asyncio

import pytest

from bench.load.prompts import PromptError, PromptSet, build_prompts, estimate_words
from endpoint.client import make_client
from tests.bench.conftest import MODEL, ServerFactory


def _build(url: str, target: int, count: int, **kw: object) -> PromptSet:
    async def go() -> PromptSet:
        async with make_client(url, max_concurrency=8) as c:
            return await build_prompts(c, MODEL, target, count, **kw)  # type: ignore[arg-type]

    return asyncio.run(go())


@pytest.mark.parametrize("target", [2, 17, 128, 1000])
def test_exact_token_counts_via_tokenize(fake_vllm: ServerFactory, target: int) -> None:
    server = fake_vllm()
    prompts = _build(server.url, target, 3)
    assert prompts.method == "tokenize"
    assert prompts.exact
    assert prompts.token_counts == (target,) * 3
    assert len(set(prompts.prompts)) == 3  # distinct prompts (no shared prefix to cache)
    for prompt in prompts.prompts:  # the fake counts BOS + one per word
        assert len(prompt.split()) + 1 == target


def test_fallback_estimate_without_tokenize(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(missing_paths=("/tokenize",))
    prompts = _build(server.url, 64, 2)
    assert prompts.method == "estimate"
    assert not prompts.exact
    assert all(len(p.split()) == estimate_words(64) == 63 for p in prompts.prompts)


def test_prompt_too_short_is_rejected(fake_vllm: ServerFactory) -> None:
    server = fake_vllm()
    with pytest.raises(ValueError, match="at least 2"):
        _build(server.url, 1, 1)


@pytest.mark.parametrize("piece_chars", [2, 3, 4])
@pytest.mark.parametrize("target", [17, 128, 600, 2048])
def test_token_counts_within_tolerance_for_several_tokens_per_word(
    fake_vllm: ServerFactory, target: int, piece_chars: int
) -> None:
    """A tokenizer of two or more tokens a word (a small vocabulary) still gets the asked
    length, not a prompt stuck at a few dozen tokens."""
    server = fake_vllm(piece_chars=piece_chars)
    prompts = _build(server.url, target, 3)
    assert prompts.method == "tokenize"
    for count in prompts.token_counts:
        assert abs(count - target) <= 0.02 * target, (target, count)
    calls = sum(1 for r in server.requests if r.path == "/tokenize")
    assert calls <= 3 * 40


def test_a_length_no_prompt_reaches_is_refused_naming_the_nearest(
    fake_vllm: ServerFactory,
) -> None:
    """A tokenizer that counts 50 tokens for any text: 10 tokens cannot be built; the error
    names the nearest length instead of sending it labelled as 10."""
    server = fake_vllm(tokenize_count=50)
    with pytest.raises(PromptError, match=r"cannot build a prompt of 10 tokens.* 50 tokens"):
        _build(server.url, 10, 1)
