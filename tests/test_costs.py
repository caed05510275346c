"""A cost in its four figures (serving.capacity.costs): $/h, $/month at 730 h, $ per million
requests and per million output tokens; a rate nobody publishes is unknown (None), never 0."""

from __future__ import annotations

import pytest

from serving.capacity.costs import UNKNOWN, cost, instance_price, money, per_million
from serving.config.settings import load_settings
from tests.pulumi_harness import stack_config


def test_the_four_figures_follow_from_the_hourly_rate() -> None:
    c = cost(3.6, "estimate", requests_per_s=2.0, output_tokens_per_s=1000.0)
    assert c.usd_per_month == pytest.approx(3.6 * 730)
    assert c.usd_per_million_requests == pytest.approx(3.6 / (2.0 * 3600) * 1e6)
    assert c.usd_per_million_output_tokens == pytest.approx(1.0)
    assert c.as_dict()["price_status"] == "estimate"


@pytest.mark.parametrize("throughput", [None, 0.0, -1.0, float("inf"), float("nan")])
def test_no_throughput_leaves_the_per_million_figures_unknown(throughput: float | None) -> None:
    c = cost(1.0, "confirmed", throughput, throughput)
    assert c.usd_per_month == 730
    assert c.usd_per_million_requests is None and c.usd_per_million_output_tokens is None


def test_a_rate_with_no_figure_makes_every_figure_null_and_the_status_unknown() -> None:
    c = cost(None, "lower_bound", 1.0, 100.0)
    assert c.as_dict() == {
        "usd_per_hour": None,
        "usd_per_month": None,
        "usd_per_million_requests": None,
        "usd_per_million_output_tokens": None,
        "price_status": UNKNOWN,
    }
    assert per_million(None, 1.0) is None


@pytest.mark.parametrize(
    ("value", "status", "shown"),
    [
        (1234.5678, "estimate", "~$1,234.57/h"),
        (0.26, "confirmed", "$0.26/h"),
        (0.26, "lower_bound", ">=$0.26/h"),
        (None, "estimate", "unknown"),
        (0.0, UNKNOWN, "unknown"),
    ],
)
def test_money_prints_unknown_for_a_price_nobody_publishes(
    value: float | None, status: str, shown: str
) -> None:
    assert money(value, status, "/h") == shown


def test_the_gke_tpu_stack_on_spot_nodes_has_no_instance_price() -> None:
    assert instance_price(load_settings(stack_config("gke-tpu-v6e"))) == (None, UNKNOWN)
    usd, status = instance_price(load_settings(stack_config("l4")))
    assert usd is not None and usd > 0 and status == "estimate"
