"""Every size cap on what a server sends or what is asked of it, in one place.

A breach of any of them is a clear error (:class:`endpoint.client.LimitExceeded`), never an
unbounded allocation: a hostile or broken server cannot exhaust the client's memory or time.
"""

from __future__ import annotations

MAX_RESPONSE_BYTES = 1 << 20
"""A JSON answer (``/v1/models``, ``/tokenize``, a non-streamed body), after decompression."""
MAX_ERROR_BODY_BYTES = 64 << 10
"""The part of an error answer that is read (the rest is discarded unread)."""
MAX_METRICS_BYTES = 16 << 20
"""``/metrics`` text after decompression (vLLM's is tens of KiB; a gzip bomb is refused)."""
MAX_SSE_LINE_BYTES = 1 << 20
"""One server-sent-events line (vLLM's chunks are a few hundred bytes)."""
MAX_ECHO_CHARS = 300
"""Anything a server sent that is shown or stored (error bodies, model ids), after redaction."""
READY_DEADLINE_S = 600.0
"""How long a caller waits by default for an endpoint to become ready (a cold start: the health
checks, the benchmark's readiness wait); stacks pass their hardware's own cold-start budget."""
MAX_MODEL_IDS_SHOWN = 10
"""Served model ids listed in a message."""
MAX_PROMPT_TOKENS = 1 << 20
"""The longest prompt the benchmark builds and asks ``/tokenize`` about (tokens)."""
