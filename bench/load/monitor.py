"""How far the client itself falls behind during a cell: event-loop lag and requests in flight.

A load generator on one event loop that cannot keep up does not fail: it sends late, reads
late, and reports its own delays as the server's latency. :class:`LoopMonitor` runs beside the
load on the same loop and wakes every ``interval_s``; how late each wake-up is (the lag) is
the time any ready callback, a response's first bytes among them, would have waited. At each
wake-up it also samples the client's count of requests in flight.

The samples are kept raw (lag in seconds, in-flight counts) so that several worker processes'
monitors merge exactly (:func:`merge_monitor_stats`).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.results.stats import percentile

__all__ = ["LoopMonitor", "MonitorStats", "merge_monitor_stats"]


@dataclass
class MonitorStats:
    """Raw samples of one monitor (one process), or of several merged."""

    interval_s: float
    lag_s: list[float] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)
    """Sampled per process; merged monitors sum the processes' samples slot by slot."""
    duration_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        """JSON-ready figures: lag mean/p50/p99/max in ms, in-flight mean/min/max, samples."""
        lag = [x * 1000.0 for x in self.lag_s]
        flight = self.in_flight
        return {
            "loop_lag_samples": len(lag),
            "loop_lag_interval_ms": self.interval_s * 1000.0,
            "mean_loop_lag_ms": statistics.fmean(lag) if lag else None,
            "median_loop_lag_ms": percentile(lag, 50) if lag else None,
            "p99_loop_lag_ms": percentile(lag, 99) if lag else None,
            "max_loop_lag_ms": max(lag, default=None),
            "mean_in_flight": statistics.fmean(flight) if flight else None,
            "min_in_flight": min(flight, default=None),
            "max_in_flight": max(flight, default=None),
        }


class LoopMonitor:
    """Samples loop lag and ``in_flight()`` every ``interval_s`` between :meth:`start` and
    :meth:`stop` (both called from the loop being watched)."""

    def __init__(self, in_flight: Callable[[], int], *, interval_s: float = 0.005) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self._in_flight = in_flight
        self.stats = MonitorStats(interval_s)
        self._task: asyncio.Task[None] | None = None
        self._started = 0.0
        self.stats_frozen = False
        """Set when the last request has been sent: lag is still sampled, in-flight no longer
        (the drain at the end of a cell is not a shortfall)."""

    def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("monitor already started")
        self._started = time.perf_counter()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        interval = self.stats.interval_s
        lag = self.stats.lag_s
        in_flight = self.stats.in_flight
        clock = time.perf_counter
        due = clock() + interval
        while True:
            await asyncio.sleep(max(0.0, due - clock()))
            now = clock()
            lag.append(max(0.0, now - due))
            if not self.stats_frozen:
                in_flight.append(self._in_flight())
            # The next wake-up is one interval after this one (not after the missed due
            # time): a long stall is one large sample, not a burst of catch-up samples.
            due = now + interval

    async def stop(self) -> MonitorStats:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.stats.duration_s = time.perf_counter() - self._started
        return self.stats


def merge_monitor_stats(parts: Sequence[MonitorStats]) -> MonitorStats:
    """Merge the monitors of worker processes that ran the same cell side by side.

    Lag samples are pooled (each process's loop is a client that can delay its own requests);
    in-flight counts are summed slot by slot (the processes started together and sample at the
    same interval), over the slots every process reached.
    """
    if not parts:
        raise ValueError("nothing to merge")
    intervals = {p.interval_s for p in parts}
    if len(intervals) != 1:
        raise ValueError(f"monitors sampled at different intervals: {sorted(intervals)}")
    lag = [x for p in parts for x in p.lag_s]
    slots = min(len(p.in_flight) for p in parts)
    in_flight = [sum(p.in_flight[i] for p in parts) for i in range(slots)]
    return MonitorStats(parts[0].interval_s, lag, in_flight, max(p.duration_s for p in parts))
