"""The record of one request, as the client saw it (:class:`RequestResult`), and the kinds
of error it may end in (:data:`ERROR_KINDS`). The load (:mod:`bench.load.hotpath`) writes these
records; the statistics (:mod:`bench.results.stats`) read them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

__all__ = ["ERROR_KINDS", "ErrorKind", "RequestResult"]

ErrorKind = Literal["timeout", "http_status", "connection", "truncated", "protocol", "auth"]
ERROR_KINDS: tuple[ErrorKind, ...] = get_args(ErrorKind)


@dataclass
class RequestResult:
    """The client's view of one request. Times in seconds."""

    ok: bool
    start_s: float
    """perf_counter at send (relative to nothing; compare within one process)."""
    e2e_s: float
    ttft_s: float | None = None
    itls_s: list[float] = field(default_factory=list)
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    chunks: int = 0
    error_kind: ErrorKind | None = None
    status: int | None = None
    error: str | None = None
    retry_after_s: float | None = None
    """``Retry-After`` of an error answer, in seconds, when it carried one."""

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (e2e - ttft) / (output tokens - 1)."""
        if self.ttft_s is None or self.output_tokens is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
