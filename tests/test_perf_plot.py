"""The performance model's pictures (serving/capacity/perf_plot.py, plot_style.py): the figures
they are drawn from, and what a picture says rather than draws."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from serving.capacity.perf import Workload
from serving.capacity.perf_plot import (
    measured_points,
    percentile_points,
    plot_cost,
    plot_stack,
    throughput_points,
)
from serving.capacity.perf_stack import model_for_settings
from serving.capacity.plan import load_stack_settings
from serving.capacity.plot_style import fit_to_data, limit_line, pyplot
from serving.capacity.simulate import Traffic
from serving.config.settings import load_settings
from tests.pulumi_harness import stack_config

W = Workload(512, 128)


def texts(svg: Path) -> list[str]:
    """The texts of a Matplotlib SVG (each is preceded by a comment holding it)."""
    return re.findall(r"<!-- (.+?) -->", svg.read_text())


def test_throughput_trades_each_users_speed_for_the_chips() -> None:
    """More requests in flight: fewer tokens/s for each user, more for each chip; per chip is
    the instance's figure over its chips, per USD the hour's tokens over its price."""
    model, _ = model_for_settings(load_stack_settings("l4"))
    points = throughput_points(model, W, 2, 0.5)
    users = [p["tokens_per_s_per_user"] for p in points]
    chips = [p["tokens_per_s_per_chip"] for p in points]
    assert len(points) > 2 and users == sorted(users, reverse=True) and chips == sorted(chips)
    for p in points:
        assert p["tokens_per_s_per_chip"] == pytest.approx(p["output_tokens_per_s"] / 2)
        assert p["million_tokens_per_usd"] == pytest.approx(p["output_tokens_per_s"] * 7200 / 1e6)
    assert all(p["million_tokens_per_usd"] is None for p in throughput_points(model, W, 1, None))


def test_the_percentiles_are_ordered_and_grow_with_the_load() -> None:
    model, _ = model_for_settings(load_stack_settings("l4"))
    points = percentile_points(model, "cloud-run", Traffic(1.0, W.prompt_tokens, 32))
    rates = [p["requests_per_s"] for p in points]
    assert rates == sorted(rates) and rates[-1] < model.capacity_rps(Workload(512, 32))
    for p in points:
        for metric in ("ttft_ms", "e2e_ms"):
            assert 0 < p[metric]["p50"] <= p[metric]["p95"] <= p[metric]["p99"]
    assert points[-1]["ttft_ms"]["p99"] > points[0]["ttft_ms"]["p99"]


def test_a_runs_cells_are_read_as_the_pictures_draw_them() -> None:
    cells: list[dict[str, Any]] = [
        {
            "status": "ok",
            "request_throughput": 2.0,
            "median_ttft_ms": 100,
            "p95_ttft_ms": 150.0,
            "p99_e2el_ms": 3000.0,
            "mean_itl_ms": 20.0,
            "output_throughput": 256.0,
        },
        {"status": "skipped", "request_throughput": 1.0},
        {"status": "ok", "request_throughput": None, "median_ttft_ms": 100},
        {"status": "ok", "request_throughput": 1.0, "p95_ttft_ms": float("nan")},
    ]
    assert measured_points(cells) == [
        {
            "requests_per_s": 2.0,
            "ttft_ms": {"p50": 100.0, "p95": 150.0},
            "e2e_ms": {"p99": 3000.0},
            "output_tokens_per_s": 256.0,
            "tokens_per_s_per_user": 50.0,
        },
        {
            "requests_per_s": 1.0,
            "ttft_ms": {},
            "e2e_ms": {},
            "output_tokens_per_s": None,
            "tokens_per_s_per_user": None,
        },
    ]
    # A picture of one request shape draws only the cells of that shape.
    shaped = [{**cells[0], "prompt_tokens": 512, "output_tokens": p} for p in (128, 64)]
    assert measured_points(shaped, W) == measured_points(shaped[:1]) != []


def test_an_slo_far_above_the_data_is_said_not_drawn() -> None:
    """The axis stays on the data (15 % headroom); an SLO within twice the data's top is drawn
    (the axis reaches it), one further up is a legend line, with no line drawn."""
    plt = pyplot()
    fig, ax = plt.subplots()
    top = fit_to_data(ax, [1.0, 2.0])
    assert top == pytest.approx(2.3) and ax.get_ylim() == pytest.approx((0, 2.3))
    limit_line(ax, 60.0, top, "SLO p95 E2E 60 s")
    assert ax.get_ylim() == pytest.approx((0, 2.3))
    (note,) = ax.get_lines()
    assert note.get_label() == "SLO p95 E2E 60 s: above the axis (\u2191), not drawn"
    assert len(note.get_xdata()) == 0
    limit_line(ax, 4.0, top, "SLO p95 TTFT 4 s")
    assert ax.get_ylim() == pytest.approx((0, 4.6))
    assert list(ax.get_lines()[-1].get_ydata()) == [4.0, 4.0]
    plt.close(fig)


def test_a_run_sits_on_the_predicted_axes(tmp_path: Path) -> None:
    """`plan --plot` and `bench compare --predict` draw a run's cells as markers in each
    percentile's colour on the prediction's axes, and the throughput panels beside them."""
    settings = load_stack_settings("l4")
    traffic = Traffic(1.0, W.prompt_tokens, W.output_tokens)
    cell = {
        "status": "ok",
        "request_throughput": 0.1,
        "median_ttft_ms": 300.0,
        "p95_ttft_ms": 400.0,
        "p99_ttft_ms": 500.0,
        "mean_itl_ms": 40.0,
        "output_throughput": 12.8,
    }
    path = tmp_path / "l4.svg"
    plot_stack(path, "l4", settings, traffic, measured=measured_points([cell]))
    shown = texts(path)
    for text in ("p50 measured", "p99 measured", "measured (one cell each)"):
        assert text in shown
    assert (
        "output tokens/s per chip (log)" in shown and "million output tokens per USD (log)" in shown
    )
    plot_stack(path, "l4", settings, traffic, throughput=False)
    shown = texts(path)
    assert "p50 measured" not in shown and "output tokens/s per chip (log)" not in shown


def test_a_stack_at_an_unknown_price_is_named_not_drawn_at_zero(tmp_path: Path) -> None:
    """A TPU v6e at spot: no source quotes the rate (tests/test_plan_billing.py)."""
    spot = load_settings({**stack_config("tpu-v6e1"), "provisioning": "spot"})
    path = tmp_path / "cost.svg"
    plot_cost(path, {"l4": load_stack_settings("l4"), "spot": spot})
    shown = texts(path)
    assert "spot: price unknown, not drawn" in shown
    assert any(t.startswith("l4 (") and t.endswith("/h, estimate)") for t in shown)
