"""A window's figures: the server's means beside the client's, the share, the warnings."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from bench.load.hotload import WindowLoad
from bench.load.hotpath import HotResult
from bench.load.monitor import MonitorStats
from bench.load.window import ClientLimits, window_figures


def _exposition(observations: list[tuple[float, list[float]]]) -> str:
    registry = CollectorRegistry()
    labels = ["model_name", "engine"]
    ttft = Histogram("vllm:time_to_first_token_seconds", "d", labels, registry=registry)
    itl = Histogram("vllm:inter_token_latency_seconds", "d", labels, registry=registry)
    e2e = Histogram("vllm:e2e_request_latency_seconds", "d", labels, registry=registry)
    for h in (ttft, itl, e2e):
        h.labels("m", "0")
    for first, gaps in observations:
        ttft.labels("m", "0").observe(first)
        for g in gaps:
            itl.labels("m", "0").observe(g)
        e2e.labels("m", "0").observe(first + sum(gaps))
    return generate_latest(registry).decode()


def _load(
    client_ttft: float, *, lag: float = 0.001, in_flight: int = 2, coalesced: int = 0
) -> WindowLoad:
    results = [
        HotResult(
            ok=True,
            start_s=0.0,
            e2e_s=client_ttft + 0.04,
            ttft_s=client_ttft,
            itls_s=[0.02, 0.02],
            output_tokens=3,
            sent_at=10.0 + i,
            coalesced_tokens=coalesced,
        )
        for i in range(2)
    ]
    server = [(0.1, [0.02, 0.02]), (0.1, [0.02, 0.02])]
    return WindowLoad(
        results=results,
        first_send=10.0,
        last_end=11.0 + client_ttft + 0.04,
        monitor=MonitorStats(0.005, [lag] * 10, [in_flight] * 10, 1.0),
        ramp_s=0.1,
        untimed=1,
        metrics_before=(10.0, _exposition([])),
        metrics_after=(10.28, _exposition(server)),
        cpu_s=0.003,
    )


def test_client_close_to_server_is_not_client_limited() -> None:
    out = window_figures(_load(0.102), concurrency=2, model_name="m")
    assert out["server_mean_ttft_ms"] == pytest.approx(100.0)
    assert out["client_mean_ttft_ms"] == pytest.approx(102.0)
    assert out["client_share_ttft"] == pytest.approx(2 / 102)
    assert out["server_mean_itl_ms"] == pytest.approx(20.0)
    assert out["client_share_itl"] == pytest.approx(0.0, abs=1e-9)
    assert out["server_in_flight"] == pytest.approx(0.28 / 0.28)
    assert out["client_cpu_ms_per_request"] == pytest.approx(1.0)
    assert out["coalesced_tokens"] == 0 and out["coalesced_share"] == 0
    # Little's law says the server held 1 request on average, but the client kept the 2 asked
    # for in flight: the server's figure misses requests unfinished at the window's end.
    assert out["client_limited"] is False
    assert out["warnings"] == []


def test_the_client_count_decides_and_is_shown_with_two_decimals() -> None:
    load = _load(0.101, in_flight=1)
    load.monitor = MonitorStats(0.005, [0.001] * 9, [1] * 8 + [0], 1.0)
    out = window_figures(load, concurrency=1, model_name="m")
    assert out["mean_in_flight"] == pytest.approx(8 / 9)
    assert out["client_limited"] is True
    assert out["warnings"] == [
        "the client kept 0.89 requests in flight on average, not the 1 asked for "
        "(the server's Little's-law figure: 1.00)"
    ]


def test_a_large_client_share_marks_the_cell() -> None:
    out = window_figures(_load(0.150, in_flight=2), concurrency=1, model_name="m")
    assert out["client_share_ttft"] == pytest.approx(50 / 150)
    assert out["client_limited"] is True
    assert any("share of mean TTFT is 33%" in w for w in out["warnings"])


def test_lag_over_the_limit_warns() -> None:
    out = window_figures(_load(0.101, lag=0.05), concurrency=1, model_name="m")
    assert any("lagged 50.0 ms" in w for w in out["warnings"])
    relaxed = ClientLimits(max_loop_lag_ms=100.0)
    assert (
        window_figures(_load(0.101, lag=0.05), concurrency=1, model_name="m", limits=relaxed)[
            "warnings"
        ]
        == []
    )


def test_without_server_metrics_the_client_count_decides() -> None:
    load = _load(0.101, in_flight=1)
    load.metrics_before = None
    out = window_figures(load, concurrency=2, model_name="m")
    assert out["server_mean_ttft_ms"] is None and out["client_share_ttft"] is None
    assert out["server_in_flight"] is None
    assert out["warnings"] == [
        "the client kept 1.00 requests in flight on average, not the 2 asked for"
    ]


def test_coalesced_share() -> None:
    out = window_figures(_load(0.1, coalesced=1), concurrency=1, model_name="m")
    assert out["coalesced_tokens"] == 2 and out["coalesced_share"] == pytest.approx(2 / 6)


def test_a_large_share_of_a_few_milliseconds_does_not_mark_the_cell() -> None:
    """A fast server (TTFT 100 ms here, a few ms on a small model): 30 % of the client's figure
    made of 8 ms is not what limits the cell; 30 % made of 45 ms is."""
    fast = _load(0.108, in_flight=2)
    limits = ClientLimits(max_client_share=0.05)
    out = window_figures(fast, concurrency=1, model_name="m", limits=limits)
    assert out["client_share_ttft"] == pytest.approx(8 / 108)
    assert out["client_limited"] is False and out["warnings"] == []
    out = window_figures(_load(0.145, in_flight=2), concurrency=1, model_name="m", limits=limits)
    assert out["client_limited"] is True
    assert any("45.0 ms" in w and "10 ms" in w for w in out["warnings"])
    strict = ClientLimits(max_client_share=0.05, min_client_gap_ms=5.0)
    assert window_figures(fast, concurrency=1, model_name="m", limits=strict)["client_limited"]


def test_client_share_is_never_negative() -> None:
    """A server figure above the client's (the server saw 100 ms, the client 7 ms: a -1310 %
    share before) is a share of 0, and marks nothing."""
    out = window_figures(_load(0.007, in_flight=2), concurrency=1, model_name="m")
    assert out["client_share_ttft"] == 0.0
    assert out["client_limited"] is False


@pytest.mark.parametrize(
    ("client", "server", "share"),
    [(10.0, 141.0, 0.0), (10.0, 10.0, 0.0), (10.0, 5.0, 0.5), (10.0, -5.0, 1.0)],
)
def test_client_share_bounds(client: float, server: float, share: float) -> None:
    from bench.load.server_metrics import client_share

    assert client_share(client, server) == pytest.approx(share)
