"""Prompts of an exact token count.

With the server's ``POST /tokenize``: a prompt is a run of common English words from a seeded
random sequence (each prompt starts differently, so prefix caching cannot share blocks); its
word count is adjusted (scaled by the tokens per word seen so far, then bisected) until the
server counts exactly the target, BOS included, as ``/v1/completions`` counts it. A count it
cannot hit ends within :data:`TOLERANCE` of the target with ``exact`` false; nothing that near
is a :class:`PromptError` naming the nearest length.

Without ``/tokenize`` (a 404 or 405, e.g. a proxy that only forwards ``/v1``): one token per
word plus BOS, flagged ``exact=False``; the server's own count is still recorded per request.

Bounded against any server: a target over :data:`~endpoint.limits.MAX_PROMPT_TOKENS` is
refused, a prompt never grows past ``2 x target + 16`` words, and an answer that is not JSON,
too large, or implausible for the words sent is a :class:`PromptError`.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Literal

import httpx

from endpoint.client import LimitExceeded, request_capped
from endpoint.errors import status_line
from endpoint.limits import MAX_PROMPT_TOKENS
from endpoint.redact import redact

__all__ = ["PromptError", "PromptSet", "TokenizeUnavailable", "build_prompts", "count_tokens"]

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
_MAX_TOKENS_PER_WORD = 64
#: How far a prompt's token count may be from the asked count: 2 %.
TOLERANCE = 0.02
#: Short words added after the last word that fits when the asked count falls inside a word of
#: several tokens (one token each in most tokenizers), repeated while the count stays under.
_FILLERS = ("a", "I", "of", "to", "in", "is", "it", "on")


class TokenizeUnavailable(Exception):
    """The server has no ``/tokenize`` endpoint."""


class PromptError(ValueError):
    """Prompts of the asked size cannot be built (bad target, or ``/tokenize`` answers that
    cannot be used); the message says why."""


def max_words(target_tokens: int) -> int:
    """The most words a prompt of ``target_tokens`` may have (a bound on memory and time)."""
    return 2 * target_tokens + 16


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
    try:
        reply = await request_capped(
            client, "POST", "/tokenize", json_body={"model": model, "prompt": text}
        )
    except LimitExceeded as exc:
        raise PromptError(f"/tokenize: {exc}") from None
    if reply.status in (404, 405):
        raise TokenizeUnavailable(f"/tokenize answered {reply.status}")
    if reply.status != 200:
        raise PromptError(f"/tokenize answered {status_line(reply.status, reply.text)}")
    try:
        data = reply.json()
    except (ValueError, UnicodeDecodeError):
        raise PromptError(
            f"/tokenize answered something that is not JSON: "
            f"{redact(reply.text, limit=80)!r}; is this a vLLM server? (--no-tokenize estimates "
            "prompt sizes instead)"
        ) from None
    if not isinstance(data, dict):
        raise PromptError("/tokenize answered JSON that is not an object")
    count = data.get("count")
    if not isinstance(count, int) or isinstance(count, bool):
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise TokenizeUnavailable("/tokenize answered without a count")
        count = len(tokens)
    words = len(text.split())
    if count < 0 or count > _MAX_TOKENS_PER_WORD * words + 16:
        raise PromptError(
            f"/tokenize counted {str(count)[:30]} tokens for {words} words: not a plausible "
            "count; is this a vLLM server? (--no-tokenize estimates prompt sizes instead)"
        )
    return count


def _words(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def estimate_words(target_tokens: int) -> int:
    """Words for ``target_tokens`` under the documented estimate (one per word, plus BOS)."""
    return max(1, round((target_tokens - _BOS_TOKENS) / _ESTIMATE_TOKENS_PER_WORD))


def within_tolerance(count: int, target: int) -> bool:
    """``count`` is within :data:`TOLERANCE` of ``target`` (exact for targets under 50)."""
    return abs(count - target) <= TOLERANCE * target


def _next_guess(n: int, c: int, target: int, lo: int, hi: int | None, ceiling: int) -> int:
    """The next word count to try: scaled by the tokens per word seen so far (any tokenizer,
    one token a word or several), kept strictly inside ``(lo, hi)``."""
    per_word = max(c - _BOS_TOKENS, 1) / max(n, 1)
    guess = n + round((target - c) / per_word)
    upper = min(hi - 1 if hi is not None else ceiling, ceiling)
    return min(max(guess, lo + 1), upper)


async def _exact_prompt(
    client: httpx.AsyncClient, model: str, target: int, seed: int
) -> tuple[str, int]:
    cache: dict[str, int] = {}
    calls = 0

    async def count(text: str) -> int:
        nonlocal calls
        if text not in cache:
            calls += 1
            cache[text] = await count_tokens(client, model, text)
        return cache[text]

    ceiling = max_words(target)
    n = min(estimate_words(target), ceiling)
    lo, hi = 0, None  # word counts with count(lo) < target < count(hi)
    counts: dict[int, int] = {0: 0}
    while calls < _MAX_TOKENIZE_CALLS:
        c = await count(_words(seed, n))
        counts[n] = c
        if c == target:
            return _words(seed, n), c
        if c < target:
            lo = n
        else:
            hi = n
        if hi is not None and hi - lo <= 1:
            break
        if hi is None and n >= ceiling:
            raise PromptError(
                f"/tokenize counts only {c} tokens for {n} words; a prompt of {target} tokens "
                f"would need more than {ceiling} words (--no-tokenize estimates prompt sizes)"
            )
        guess = _next_guess(n, c, target, lo, hi, ceiling)
        if guess in counts:  # the scaled step repeats itself: bisect the bracket
            guess = (lo + (hi if hi is not None else ceiling) + 1) // 2
        n = guess
    # The target falls inside one word (a word of several tokens at the boundary): short
    # words (one token in most tokenizers) fill the gap after the last word that fits.
    filled: list[tuple[str, int]] = []
    if lo > 0 and hi is not None and hi - lo <= 1:
        text, c = _words(seed, lo), counts[lo]
        fillers = iter(_FILLERS)
        filler = next(fillers, None)
        while filler is not None and c < target and calls < _MAX_TOKENIZE_CALLS:
            longer = f"{text} {filler}"
            grown = await count(longer)
            if grown == target:
                return longer, grown
            if grown < target:
                text, c = longer, grown  # keep it, add another
            else:
                filler = next(fillers, None)  # too long: a shorter-counting filler
        filled.append((text, c))
    # The nearest count either side of the target.
    candidates = [(_words(seed, n_), c_) for n_, c_ in counts.items() if n_ > 0]
    candidates += filled
    best_text, best_c = min(candidates, key=lambda tc: (abs(tc[1] - target), tc[1] > target))
    if not within_tolerance(best_c, target):
        raise PromptError(
            f"cannot build a prompt of {target} tokens with this tokenizer: the nearest that "
            f"/tokenize counted is {best_c} tokens ({len(best_text.split())} words), more than "
            f"{TOLERANCE:.0%} off"
        )
    return best_text, best_c


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
        raise PromptError(
            f"a prompt needs at least 2 tokens (BOS and one word), got {target_tokens}"
        )
    if target_tokens > MAX_PROMPT_TOKENS:
        raise PromptError(f"prompts are limited to {MAX_PROMPT_TOKENS} tokens, got {target_tokens}")
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
