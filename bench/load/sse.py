"""Reading vLLM's streamed completions (server-sent events), one network read at a time.

Pure (no I/O, no clock of its own): the hot path (:mod:`bench.load.hotpath`) feeds the bytes
of each read with the instant it arrived.

Inter-token latency when reads coalesce: the tokens that arrived in a read share the gap since
the previous read that carried content, ``gap / tokens`` each, so the per-token intervals of a
request add up to the time between its first and its last token. Tokens in the first content
read have no interval before them and give no ITL sample.
"""

from __future__ import annotations

from typing import Any

import orjson

from endpoint.errors import error_line
from endpoint.limits import MAX_SSE_LINE_BYTES
from endpoint.redact import redact

__all__ = ["MAX_TOKENS_PER_CHUNK", "StreamParser", "StreamProtocolError", "StreamedError"]

MAX_TOKENS_PER_CHUNK = 4096
"""More tokens than this in one chunk is a broken or hostile count (speculative decoding brings
a handful): the request fails as ``protocol`` instead of the client allocating ITL samples."""


class StreamProtocolError(Exception):
    """A chunk that is not a JSON object."""


class StreamedError(Exception):
    """vLLM reported an error inside the stream (``data: {"error": {...}}``)."""

    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.status = status


class StreamParser:
    """Server-sent events of a streamed completion, fed one network read at a time.

    Pure (no I/O, no clock): :meth:`feed` takes the bytes of one read and the instant it
    arrived. See the module docstring for how ITL is derived.
    """

    __slots__ = (
        "_buffer",
        "chunks",
        "coalesced_tokens",
        "content_chunks",
        "done",
        "itls",
        "last_at",
        "output_tokens",
        "prompt_tokens",
        "reads",
        "seen",
        "start",
        "ttft",
    )

    def __init__(self, start: float) -> None:
        self.start = start
        self._buffer = b""
        self.ttft: float | None = None
        self.last_at = start
        self.itls: list[float] = []
        self.seen = 0
        self.output_tokens: int | None = None
        self.prompt_tokens: int | None = None
        self.chunks = 0
        self.reads = 0
        self.coalesced_tokens = 0
        self.content_chunks = 0
        self.done = False

    def feed(self, data: bytes, at: float) -> None:
        """One read's bytes, arrived at ``at``. Raises :class:`StreamProtocolError` or
        :class:`StreamedError`."""
        buffer = self._buffer + data if self._buffer else data
        cut = buffer.rfind(b"\n")
        if cut < 0:
            if len(buffer) > MAX_SSE_LINE_BYTES:
                raise StreamProtocolError(
                    f"an SSE line is longer than {MAX_SSE_LINE_BYTES} bytes; refused"
                )
            self._buffer = buffer
            return
        self._buffer = buffer[cut + 1 :]
        tokens = 0
        first_event_tokens = -1
        for line in buffer[:cut].split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                continue
            count = self._event(payload)
            if count:
                self.content_chunks += 1
                if first_event_tokens < 0:
                    first_event_tokens = count
                tokens += count
        if tokens == 0:
            return
        self.reads += 1
        self.coalesced_tokens += tokens - first_event_tokens
        if self.ttft is None:
            self.ttft = at - self.start
        else:
            gap = (at - self.last_at) / tokens
            self.itls.extend([gap] * tokens)
        self.last_at = at

    def _event(self, payload: bytes) -> int:
        """Parse one event; returns the tokens of generated text it carried."""
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise StreamProtocolError(f"chunk is not JSON: {redact(repr(payload[:80]))}") from exc
        if not isinstance(chunk, dict):
            raise StreamProtocolError("chunk is not a JSON object")
        self.chunks += 1
        error = chunk.get("error")
        if error is not None:
            detail: dict[str, Any] = error if isinstance(error, dict) else {"message": error}
            code = detail.get("code")
            raise StreamedError(
                f"error in stream: {error_line(str(detail.get('message')))}",
                code if isinstance(code, int) else None,
            )
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            if isinstance(usage.get("prompt_tokens"), int):
                self.prompt_tokens = usage["prompt_tokens"]
            if isinstance(usage.get("completion_tokens"), int):
                self.output_tokens = usage["completion_tokens"]
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            return 0
        choice = choices[0]
        text = choice.get("text")
        if text is None:
            delta = choice.get("delta") or {}
            text = delta.get("content") or delta.get("reasoning_content")
        if not text:
            return 0
        count = self.output_tokens - self.seen if self.output_tokens is not None else 1
        count = max(count, 1)
        if count > MAX_TOKENS_PER_CHUNK:
            raise StreamProtocolError(
                f"usage says {count} tokens arrived in one chunk (more than "
                f"{MAX_TOKENS_PER_CHUNK}); refused"
            )
        self.seen += count
        return count
