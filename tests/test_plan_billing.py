"""What a month costs is what is billed: a flex-start TPU node bills its run duration (it is
deleted after maxRunHours), anything else runs until deleted; every price cites Google's page."""

from __future__ import annotations

import json

import pytest

from gemma4.plan_cli import main
from serving.catalog.hardware import HARDWARE
from serving.config.settings import load_settings
from tests.pulumi_harness import stack_config

TPU = stack_config("tpu-v6e1")


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


@pytest.mark.parametrize(
    ("overrides", "hours"),
    [
        ({}, 4.0),  # the shipped stack: flex-start, maxRunHours 4
        ({"maxRunHours": 1.5}, 1.5),
        ({"maxRunHours": 168}, 168.0),
        ({"provisioning": "spot"}, 730.0),
        ({"provisioning": "on-demand"}, 730.0),
    ],
)
def test_tpu_billed_hours_follow_provisioning(overrides: dict[str, object], hours: float) -> None:
    settings = load_settings({**TPU, **overrides})
    assert settings.billed_hours_per_month == hours


@pytest.mark.parametrize("stack", ["l4", "rtx6000"])
def test_cloud_run_bills_all_month(stack: str) -> None:
    assert load_settings(stack_config(stack)).billed_hours_per_month == 730.0


def test_plan_prices_the_flex_start_stack_for_its_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-s", "tpu-v6e1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # The flex-start rate, not the on-demand one, for the 4 h run, not 730 h.
    flex = HARDWARE["tpu-v6e-1"].flex_start_price
    assert flex is not None and flex != HARDWARE["tpu-v6e-1"].price
    assert report["usd_per_hour"] == flex.usd_per_hour and "dws/pricing" in report["price_source"]
    assert report["billed_hours_per_month"] == 4.0
    assert report["usd_per_month_billed"] == pytest.approx(flex.usd_per_hour * 4)
    assert "flex-start" in report["billing"] and "then is deleted" in report["billing"]
    # The flex-start rate could not be read on Google's page: counted at the figure the
    # catalogue recorded earlier, an estimate that names who quotes it.
    assert report["price_status"] == "estimate"
    assert flex.usd_per_hour == 1.35
    assert any(
        n.startswith("ESTIMATE") and "flex-start" in n and "quoted by" in n
        for n in report["price_unconfirmed"]
    )
    assert main(["-s", "tpu-v6e1"]) == 0
    table = capsys.readouterr().out
    assert "billed a month" in table and f"~${flex.usd_per_hour * 4:,.2f}/month" in table
    assert "at least" not in table
    assert "always on" not in table


@pytest.mark.parametrize(
    ("provisioning", "rate"),
    [("flex-start", "flex-start"), ("spot", "spot"), ("on-demand", "on-demand")],
)
def test_a_tpu_stack_is_priced_at_its_provisioning_rate(provisioning: str, rate: str) -> None:
    price = load_settings({**TPU, "provisioning": provisioning}).price
    (part,) = price.parts
    assert part[0].what.endswith(rate) or f"{rate} (" in part[0].what
    # None of the three v6e rates is on the stored copies of Google's pages: each says so.
    # On-demand and flex-start are counted at a quoted figure (estimates); no source quotes
    # the spot rate, so a spot price is unknown.
    if rate == "spot":
        assert price.is_lower_bound and price.unconfirmed[0].startswith("UNKNOWN")
        assert price.usd_per_hour == 0.0
    else:
        assert price.is_estimate and price.unconfirmed[0].startswith("ESTIMATE")
        assert part[0].quoted_by in price.unconfirmed[0] and price.usd_per_hour > 0


@pytest.mark.parametrize(
    ("stack", "machine"), [("gke-l4", "g2-standard-8"), ("gke-tpu-v6e", "v6e")]
)
def test_a_gke_spot_pool_is_priced_at_the_spot_rate(stack: str, machine: str) -> None:
    base = stack_config(stack)
    spot = load_settings({**base, "nodeProvisioning": "spot"}).price
    demand = load_settings({**base, "nodeProvisioning": "on-demand"}).price
    assert spot != demand
    assert all("spot" in rate.what and machine in rate.what for rate, _ in spot.parts)
    assert all("on-demand" in rate.what for rate, _ in demand.parts)
    assert "spot-vms/pricing" in spot.source and "up to 91%" in spot.note


def test_gpu_zonal_redundancy_bills_the_other_gpu_rate() -> None:
    base = stack_config("l4")
    off = load_settings({**base, "gpuZonalRedundancy": False}).price
    on = load_settings({**base, "gpuZonalRedundancy": True}).price
    rates = HARDWARE["l4"].cloud_run_gpu
    assert rates is not None
    assert off.parts[0][0] == rates.without_zonal_redundancy
    assert on.parts[0][0] == rates.with_zonal_redundancy
    assert "with zonal redundancy" in on.source and "without zonal redundancy" in off.source
    # Neither L4 rate could be read on Google's page: both prices are estimates, each
    # counting its own rate at the figure a named source quotes for it.
    assert on.is_estimate and off.is_estimate
    assert any("with zonal redundancy" in n and "0.0002909" in n for n in on.unconfirmed)
    assert any("without zonal redundancy" in n and "0.0001867" in n for n in off.unconfirmed)
    assert on.usd_per_hour - off.usd_per_hour == pytest.approx(
        3600 * (0.0002909 - 0.0001867), abs=1e-4
    )


def test_the_host_cpu_and_memory_are_billed() -> None:
    base = stack_config("l4")
    small = load_settings(base).price
    big = load_settings({**base, "cpu": 8, "memoryGib": 32}).price
    # 4 more vCPU at the confirmed rate, 16 more GiB at the quoted memory rate.
    assert big.usd_per_hour == pytest.approx(
        small.usd_per_hour + (4 * 0.000018 + 16 * 0.000002) * 3600, abs=1e-4
    )
    assert [n for _, n in big.parts] == [1.0, 8.0, 32.0]


def test_an_unconfirmed_rate_makes_the_price_an_estimate_naming_its_source() -> None:
    rtx = load_settings(stack_config("rtx6000")).price
    # The GPU and memory at their quoted figures, the 20 vCPU the GPU requires at Google's.
    assert rtx.usd_per_hour == pytest.approx(
        3600 * (0.00036522 + 20 * 0.000018 + 80 * 0.000002), abs=1e-4
    )
    assert rtx.status == "estimate"
    for what in ("RTX PRO 6000", "memory"):
        (note,) = [n for n in rtx.unconfirmed if what in n]
        assert note.startswith("ESTIMATE") and "UNCONFIRMED (quoted by " in note


def test_plan_shows_an_estimate_and_a_bound(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-s", "rtx6000", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["price_status"] == "estimate"
    assert any(note.startswith("ESTIMATE") for note in result["price_unconfirmed"])
    assert main(["-s", "rtx6000"]) == 0
    table = capsys.readouterr().out
    assert f"~${result['usd_per_hour']:,.2f}/h" in table and "at least" not in table
    # The GKE TPU stack's spot nodes have no figure anywhere: the price is unknown, and so is
    # every figure built from it (null, "unknown"), never $0.
    assert main(["-s", "gke-tpu-v6e", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["price_status"] == result["price_status_at_rate"] == "unknown"
    for key in (
        "usd_per_hour",
        "usd_per_month_always_on",
        "usd_per_month_billed",
        "usd_per_hour_at_rate",
        "usd_per_month_at_rate",
        "usd_per_million_requests",
        "usd_per_million_output_tokens",
    ):
        assert result[key] is None, key
    assert main(["-s", "gke-tpu-v6e"]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if "price, one instance" in line)
    assert "unknown" in row and "$" not in row
