"""The event-loop lag monitor and in-flight sampling, and how worker monitors merge."""

from __future__ import annotations

import asyncio
import time

import pytest

from bench.load.monitor import LoopMonitor, MonitorStats, merge_monitor_stats


def test_a_blocked_loop_shows_as_lag_and_in_flight_is_sampled() -> None:
    count = {"n": 3}

    async def go() -> MonitorStats:
        monitor = LoopMonitor(lambda: count["n"], interval_s=0.002)
        monitor.start()
        await asyncio.sleep(0.02)
        time.sleep(0.06)  # the loop is blocked: every callback waits
        await asyncio.sleep(0.01)
        count["n"] = 5
        await asyncio.sleep(0.01)
        monitor.stats_frozen = True
        samples = len(monitor.stats.in_flight)
        await asyncio.sleep(0.01)
        stats = await monitor.stop()
        assert len(stats.in_flight) == samples  # frozen: the drain is not sampled
        return stats

    stats = asyncio.run(go())
    summary = stats.summary()
    # The monitor was due at most 2 ms into the 60 ms block: at least 58 ms late.
    assert summary["max_loop_lag_ms"] >= 55.0
    assert set(stats.in_flight) == {3, 5}
    assert summary["min_in_flight"] == 3 and summary["max_in_flight"] == 5
    # One stall is one large sample, not a burst of catch-up samples: each wake-up is due one
    # interval after the previous one, so the samples' intervals and lags add up to no more
    # than the time the monitor ran, however often a loaded machine stalled it. Catching up
    # on the missed due times instead would add every catch-up sample's lag on top (some
    # fifteen samples of 30 ms on average after a 60 ms stall: far more than it ran). The
    # 1e-6 allows for the event loop running a timer up to its clock's resolution (1 ns) early.
    assert len(stats.lag_s) * 0.002 + sum(stats.lag_s) <= stats.duration_s + 1e-6


def test_merge_pools_lag_and_adds_in_flight_slot_by_slot() -> None:
    a = MonitorStats(0.005, [0.001, 0.002], [10, 12, 11], 1.0)
    b = MonitorStats(0.005, [0.030], [5, 6], 1.2)
    merged = merge_monitor_stats([a, b])
    assert sorted(merged.lag_s) == [0.001, 0.002, 0.030]
    assert merged.in_flight == [15, 18]
    assert merged.duration_s == 1.2
    assert merged.summary()["max_loop_lag_ms"] == pytest.approx(30.0)


def test_merge_refuses_mixed_intervals_and_nothing() -> None:
    with pytest.raises(ValueError, match="intervals"):
        merge_monitor_stats([MonitorStats(0.005), MonitorStats(0.01)])
    with pytest.raises(ValueError):
        merge_monitor_stats([])


def test_empty_summary_has_no_figures() -> None:
    summary = MonitorStats(0.005).summary()
    assert summary["max_loop_lag_ms"] is None and summary["mean_in_flight"] is None
