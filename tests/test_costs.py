"""A cost in its four figures (serving.capacity.costs): $/h, $/month at 730 h, $ per million
requests and per million output tokens; a rate nobody publishes is unknown (None), never 0."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from gemma4 import plan_cli
from serving.capacity.costs import UNKNOWN, cost, instance_price, money, per_million
from serving.capacity.plan import report, stack_names
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


# Every output that shows a cost: `gemma4 plan` (tables, --json), the preview, the MCP tool ---

#: Stacks whose instance rate has no figure anywhere (gke-tpu-v6e's spot v6e node).
UNKNOWN_STACKS = {"gke-tpu-v6e"}


def _usd_figures(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """Every ``usd_*`` figure of a JSON document but the GKE fixed costs (known whatever the
    instance costs)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k != "fixed" and k != "fixed_usd_per_hour":
                yield from _usd_figures(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _usd_figures(v, key)
    elif key.startswith("usd_"):
        yield key, value


def _never_a_bound_nor_zero(text: str, unknown: bool) -> None:
    assert ">=$" not in text.replace(" ", "") and "at least $" not in text
    if unknown:
        # $0.00 as a figure (a rate such as "$0.008 / GiB" is another thing).
        assert not re.search(r"\$0\.00(?!\d)", text) and "unknown" in text


def _longest_cell(text: str) -> int:
    """The most lines one row of a table takes (continuation lines have an empty first cell)."""
    longest = run = 0
    for line in text.splitlines():
        cells = line.split("│")
        run = run + 1 if len(cells) > 2 and not cells[1].strip() else 0
        longest = max(longest, run + 1)
    return longest


@pytest.mark.parametrize("stack", stack_names())
def test_the_plan_fits_100_columns_and_prints_unknown_never_zero(
    stack: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    unknown = stack in UNKNOWN_STACKS
    monkeypatch.setenv("COLUMNS", "100")
    assert plan_cli.main(["-s", stack]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100
    # The price's provenance is a footnote under the table, not a cell.
    assert "\n[1] " in out and "https://cloud.google.com/" not in out.split("\n[1] ")[0]
    _never_a_bound_nor_zero(out, unknown)
    monkeypatch.setenv("COLUMNS", "80")
    assert plan_cli.main(["-s", stack]) == 0
    assert _longest_cell(capsys.readouterr().out) <= 8
    assert plan_cli.main(["-s", stack, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    figures = dict(_usd_figures(data))
    assert data["price_status"] == ("unknown" if unknown else "estimate")
    if unknown:
        assert set(figures.values()) == {None}, figures
        return
    assert None not in (data["usd_per_hour"], data["usd_per_month_always_on"])
    assert data["usd_per_month_always_on"] == pytest.approx(730 * data["usd_per_hour"])
    assert data["usd_per_month_at_rate"] == pytest.approx(730 * data["usd_per_hour_at_rate"])
    # Per concurrency: one instance's hour over what the model predicts it serves in an hour.
    for point in data["performance"]["curve"]:
        hour = data["usd_per_hour"] * 1e6 / 3600
        assert point["usd_per_million_output_tokens"] == pytest.approx(
            hour / point["output_tokens_per_s"]
        )
        assert point["usd_per_million_requests"] == pytest.approx(hour / point["requests_per_s"])


def test_a_tpu_node_on_spot_has_an_unknown_price_in_every_figure() -> None:
    """tpu-v6e1 provisioned on spot: no source quotes a v6e spot rate."""
    settings = load_settings({**stack_config("tpu-v6e1"), "provisioning": "spot"})
    data = report("tpu-v6e1", settings)
    assert data["price_status"] == data["replicas"]["price_status"] == "unknown"
    assert set(dict(_usd_figures(data)).values()) == {None}
    console = Console(width=100, record=True, file=io.StringIO())
    for table in (
        plan_cli.table(data),
        plan_cli.perf_table("tpu-v6e1", data["performance"]),
        plan_cli.replica_table("tpu-v6e1", data["replicas"]),
    ):
        console.print(table)
    _never_a_bound_nor_zero(console.export_text(), unknown=True)


def test_the_preview_prints_unknown_for_an_unknown_price(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gemma4 import preview

    assert preview.main(["-s", "gke-tpu-v6e", "--markdown"]) == 0
    markdown = capsys.readouterr().out
    _never_a_bound_nor_zero(markdown, unknown=True)
    assert "UNKNOWN: a rate of the instance has no figure anywhere" in markdown
    assert "per month: unknown per instance as billed" in markdown
