"""The network reads a streamed request was measured from, for tests over real HTTP.

How many tokens a read brings is up to the machine, not the server: a client that reads late
(a loaded machine) finds several chunks waiting and reads them at once. Tokens in the first
content read give no ITL sample (:mod:`bench.load.sse`), so a test counts ITL samples from
the reads the client really made, never from the pacing alone.
"""

from __future__ import annotations

from itertools import pairwise
from types import ModuleType

import pytest

from bench.load.sse import StreamParser

__all__ = ["RecordedReads", "record_reads"]


class RecordedReads(StreamParser):
    """A :class:`~bench.load.sse.StreamParser` that also keeps its content reads."""

    def __init__(self, start: float) -> None:
        super().__init__(start)
        self.content_reads: list[tuple[float, int]] = []
        """``(instant, tokens)`` of each read that completed at least one content chunk."""

    def feed(self, data: bytes, at: float) -> None:
        before = self.seen
        super().feed(data, at)
        if self.seen > before:
            self.content_reads.append((at, self.seen - before))

    @property
    def first_read_tokens(self) -> int:
        """Tokens the first content read brought (1 when the first token came alone)."""
        return self.content_reads[0][1] if self.content_reads else 0

    def shared_gaps(self) -> list[float]:
        """The ITL samples these reads give: each read after the first shares the gap since
        the previous one among its tokens."""
        gaps: list[float] = []
        for (before, _), (at, tokens) in pairwise(self.content_reads):
            gaps += [(at - before) / tokens] * tokens
        return gaps


def record_reads(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[RecordedReads]:
    """Every parser ``module`` creates from now on (one per request), recording its reads."""
    made: list[RecordedReads] = []

    class Recording(RecordedReads):
        def __init__(self, start: float) -> None:
            super().__init__(start)
            made.append(self)

    monkeypatch.setattr(module, "StreamParser", Recording)
    return made
