"""Percentiles and summaries on fixed numbers, checked against hand-computed values."""

from __future__ import annotations

import statistics

import pytest

from bench.results.record import RequestResult
from bench.results.stats import GoodputSlo, percentile, summarize


def test_percentile_interpolates_between_closest_ranks() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    # h = 19 * 0.95 = 18.05 -> x[18] + 0.05 * (x[19] - x[18]) = 19 + 0.05 = 19.05
    assert percentile(values, 95) == pytest.approx(19.05)
    # h = 19 * 0.99 = 18.81 -> 19 + 0.81 = 19.81
    assert percentile(values, 99) == pytest.approx(19.81)
    # h = 19 * 0.9 = 17.1 -> 18 + 0.1 = 18.1
    assert percentile(values, 90) == pytest.approx(18.1)
    assert percentile(values, 50) == pytest.approx(10.5)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 20.0


def test_percentile_unsorted_input_and_small_lists() -> None:
    assert percentile([30.0, 10.0, 20.0, 40.0], 95) == pytest.approx(38.5)  # h=2.85
    assert percentile([7.0], 95) == 7.0
    assert percentile([1.0, 2.0], 50) == pytest.approx(1.5)


def test_percentile_matches_statistics_inclusive_method() -> None:
    values = [0.3, 9.1, 2.2, 5.5, 1.0, 7.7, 4.4, 3.3, 8.8, 6.6, 2.9]
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    for p in (90, 95, 99):
        assert percentile(values, p) == pytest.approx(cuts[p - 1])


def test_percentile_rejects_empty_and_out_of_range() -> None:
    with pytest.raises(ValueError, match="empty"):
        percentile([], 50)
    with pytest.raises(ValueError, match="within"):
        percentile([1.0], 101)


def _ok(ttft: float, e2e: float, tokens: int, itls: list[float], prompt: int = 10) -> RequestResult:
    return RequestResult(
        ok=True,
        start_s=0.0,
        e2e_s=e2e,
        ttft_s=ttft,
        itls_s=itls,
        output_tokens=tokens,
        prompt_tokens=prompt,
    )


def test_summarize_throughput_latency_and_errors() -> None:
    results = [
        _ok(0.1, 1.1, 11, [0.1] * 10),
        _ok(0.3, 2.3, 21, [0.1] * 20),
        RequestResult(ok=False, start_s=0.0, e2e_s=5.0, error_kind="timeout"),
        RequestResult(ok=False, start_s=0.0, e2e_s=0.1, error_kind="http_status", status=503),
    ]
    s = summarize(results, duration_s=4.0, goodput_slo=GoodputSlo(ttft_ms=200.0))
    assert s["completed"] == 2
    assert s["failed"] == 2
    assert s["success_rate"] == 0.5
    assert s["errors"]["timeout"] == 1
    assert s["errors"]["http_status"] == 1
    assert s["errors"]["connection"] == 0
    assert s["request_throughput"] == pytest.approx(0.5)
    assert s["total_output_tokens"] == 32
    assert s["output_throughput"] == pytest.approx(8.0)
    assert s["total_token_throughput"] == pytest.approx((20 + 32) / 4.0)
    assert s["mean_ttft_ms"] == pytest.approx(200.0)
    assert s["median_ttft_ms"] == pytest.approx(200.0)
    assert s["p95_ttft_ms"] == pytest.approx(100.0 + 0.95 * 200.0)
    assert s["mean_tpot_ms"] == pytest.approx(100.0)  # (1.1-0.1)/10 and (2.3-0.3)/20
    assert s["median_itl_ms"] == pytest.approx(100.0)
    assert s["p99_e2el_ms"] == pytest.approx(1100.0 + 0.99 * 1200.0)
    assert s["request_goodput"] == pytest.approx(1 / 4.0)  # only the 100 ms TTFT one
    assert s["goodput_slo"] == {"ttft": 200.0}


def test_summarize_no_success_gives_no_latency() -> None:
    s = summarize([RequestResult(ok=False, start_s=0, e2e_s=1, error_kind="connection")], 1.0)
    assert s["completed"] == 0
    assert s["success_rate"] == 0.0
    assert s["p95_ttft_ms"] is None
    assert s["request_throughput"] == 0.0
