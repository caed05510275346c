"""Prompts of an exact token count.

With the server's ``POST /tokenize`` (vLLM has it): a prompt is a run of common English words
drawn from a seeded random sequence (each prompt of a cell starts differently, so prefix caching
cannot share blocks between them); its length in words is adjusted until the server's tokenizer
counts exactly the requested number of tokens, special tokens (BOS) included, as
``/v1/completions`` counts them. The adjustment is a bounded bisection on the number of words,
then single-word steps; a count it cannot hit exactly (a word that is two tokens at the
boundary) ends at the nearest count below, and the result says so.

Without ``/tokenize`` (a 404 or 405, e.g. a proxy that only forwards ``/v1``): the estimate is
one token per word plus one for BOS (the words are short and frequent, one token each in
Gemma's 262k vocabulary and in most others), and every prompt is flagged ``exact=False``;
the server's own count is still recorded per request from the usage it returns.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Literal

import httpx

__all__ = ["PromptSet", "TokenizeUnavailable", "build_prompts", "count_tokens"]

_WORD_TEXT = (
    "time year people way day man thing woman life child world school state family student "
    "group country problem hand part place case week company system program question work "
    "government number night point home water room mother area money story fact month lot "
    "right study book eye job word business issue side kind head house service friend father "
    "power hour game line end member law car city community name president team minute idea "
    "kid body information back parent face others level office door health person art war "
    "history party result change morning reason research girl guy moment air teacher force "
    "education foot boy age policy music market sense nation plan college interest death "
    "experience effect class control care field development role effort rate heart drug show "
    "leader light voice wife police mind price report decision son view relationship town "
    "road river garden window paper table field tree stone bird fish horse apple bread music "
    "green blue red small large early late open close strong happy simple clear quick slow "
    "warm cold"
)
_WORDS = tuple(_WORD_TEXT.split())

_ESTIMATE_TOKENS_PER_WORD = 1.0
_BOS_TOKENS = 1
_MAX_TOKENIZE_CALLS = 40


class TokenizeUnavailable(Exception):
    """The server has no ``/tokenize`` endpoint."""


@dataclass(frozen=True)
class PromptSet:
    """The prompts for one prompt length."""

    target_tokens: int
    prompts: tuple[str, ...]
    token_counts: tuple[int, ...]
    """Tokens per prompt as the server counted them (estimated without /tokenize)."""
    method: Literal["tokenize", "estimate"]

    @property
    def exact(self) -> bool:
        """Every prompt has exactly the target count, measured by the server's tokenizer."""
        return self.method == "tokenize" and all(c == self.target_tokens for c in self.token_counts)


async def count_tokens(client: httpx.AsyncClient, model: str, text: str) -> int:
    """Tokens in ``text`` by the server's ``/tokenize`` (special tokens included)."""
    response = await client.post("/tokenize", json={"model": model, "prompt": text})
    if response.status_code in (404, 405):
        raise TokenizeUnavailable(f"/tokenize answered {response.status_code}")
    response.raise_for_status()
    data = response.json()
    count = data.get("count")
    if not isinstance(count, int):
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise TokenizeUnavailable("/tokenize answered without a count")
        count = len(tokens)
    return count


def _words(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def estimate_words(target_tokens: int) -> int:
    """Words for ``target_tokens`` under the documented estimate (one per word, plus BOS)."""
    return max(1, round((target_tokens - _BOS_TOKENS) / _ESTIMATE_TOKENS_PER_WORD))


async def _exact_prompt(
    client: httpx.AsyncClient, model: str, target: int, seed: int
) -> tuple[str, int]:
    cache: dict[int, int] = {}

    async def count(n: int) -> int:
        if n not in cache:
            cache[n] = await count_tokens(client, model, _words(seed, n))
        return cache[n]

    n = estimate_words(target)
    lo, hi = 0, None  # word counts with count(lo) < target < count(hi)
    for _ in range(_MAX_TOKENIZE_CALLS):
        c = await count(n)
        if c == target:
            return _words(seed, n), c
        if c < target:
            lo = n
        else:
            hi = n
        if hi is not None and hi - lo <= 1:
            break
        # A step of one word per missing token, kept strictly inside (lo, hi); bisect when
        # that guess was already tried.
        upper = hi - 1 if hi is not None else n + abs(target - c) + 1
        guess = min(max(n + (target - c), lo + 1), upper)
        if guess in cache:
            guess = (lo + upper + 1) // 2
        n = guess
    best = max(lo, 1)
    return _words(seed, best), await count(best)


async def build_prompts(
    client: httpx.AsyncClient,
    model: str,
    target_tokens: int,
    count: int,
    *,
    seed: int = 0,
    use_tokenize: bool = True,
    parallel: int = 8,
) -> PromptSet:
    """``count`` distinct prompts of ``target_tokens`` tokens each (see the module docstring).

    Falls back to the estimate when ``use_tokenize`` is False or the server has no
    ``/tokenize``.
    """
    if target_tokens < 2:
        raise ValueError(
            f"a prompt needs at least 2 tokens (BOS and one word), got {target_tokens}"
        )
    seeds = [seed * 1_000_003 + i for i in range(count)]
    if use_tokenize:
        try:
            first = await _exact_prompt(client, model, target_tokens, seeds[0])
            gate = asyncio.Semaphore(parallel)

            async def one(s: int) -> tuple[str, int]:
                async with gate:
                    return await _exact_prompt(client, model, target_tokens, s)

            rest = await asyncio.gather(*(one(s) for s in seeds[1:]))
            made = [first, *rest]
            return PromptSet(
                target_tokens,
                tuple(p for p, _ in made),
                tuple(c for _, c in made),
                "tokenize",
            )
        except TokenizeUnavailable:
            pass
    n = estimate_words(target_tokens)
    prompts = tuple(_words(s, n) for s in seeds)
    return PromptSet(target_tokens, prompts, (n + _BOS_TOKENS,) * count, "estimate")
