"""What a month costs is what is billed: a flex-start TPU node bills its run duration (it is
deleted after maxRunHours), anything else runs until deleted; every price cites Google's page."""

from __future__ import annotations

import json

import pytest

from gemma4.plan_cli import main
from serving.catalog.hardware import HARDWARE, Price
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
    price = HARDWARE["tpu-v6e-1"].flex_start_price.usd_per_hour  # type: ignore[union-attr]
    assert price < HARDWARE["tpu-v6e-1"].price.usd_per_hour
    assert report["usd_per_hour"] == price and "dws/pricing" in report["price_source"]
    assert report["billed_hours_per_month"] == 4.0
    assert report["usd_per_month_billed"] == pytest.approx(price * 4)
    assert "flex-start" in report["billing"] and "then is deleted" in report["billing"]
    assert main(["-s", "tpu-v6e1"]) == 0
    table = capsys.readouterr().out
    assert "billed a month" in table and f"${price * 4:,.0f}/month" in table
    assert "always on" not in table


def test_a_tpu_stack_is_priced_at_its_provisioning_rate() -> None:
    flex = load_settings({**TPU, "provisioning": "flex-start"}).price
    assert flex == HARDWARE["tpu-v6e-1"].flex_start_price
    # No spot rate could be confirmed: the on-demand one is shown as an upper bound, said so.
    spot = load_settings({**TPU, "provisioning": "spot"}).price
    assert spot.usd_per_hour == HARDWARE["tpu-v6e-1"].price.usd_per_hour
    assert spot.unconfirmed and "UPPER BOUND" in spot.unconfirmed[0]


@pytest.mark.parametrize(
    "price",
    [
        *(HARDWARE[key].price for key in sorted(HARDWARE)),
        *(HARDWARE[k].flex_start_price for k in sorted(HARDWARE) if HARDWARE[k].flex_start_price),
    ],
)
def test_every_price_cites_googles_page_and_a_region(price: Price) -> None:
    assert "seed article" not in price.source
    assert "https://cloud.google.com/" in price.source and "pricing" in price.source
    assert any(region in price.source for region in ("us-east4", "us-central1", "us-east5"))
    assert price.as_of[:4].isdigit()


def test_gpu_zonal_redundancy_bills_the_higher_gpu_rate() -> None:
    from serving.catalog.hardware import CLOUD_RUN_CPU, CLOUD_RUN_MEMORY

    base = stack_config("l4")
    off = load_settings({**base, "gpuZonalRedundancy": False}).price
    on = load_settings({**base, "gpuZonalRedundancy": True}).price
    rates = HARDWARE["l4"].cloud_run_gpu
    assert rates is not None
    host = 3600 * (
        4 * (CLOUD_RUN_CPU.usd_per_second or 0) + 16 * (CLOUD_RUN_MEMORY.usd_per_second or 0)
    )
    assert off.usd_per_hour == pytest.approx(
        3600 * (rates.without_zonal_redundancy.usd_per_second or 0) + host, abs=1e-3
    )
    assert on.usd_per_hour > off.usd_per_hour
    assert "with zonal redundancy" in on.source and not on.unconfirmed


def test_the_host_cpu_and_memory_are_billed() -> None:
    base = stack_config("l4")
    small = load_settings(base).price.usd_per_hour
    big = load_settings({**base, "cpu": 8, "memoryGib": 32}).price.usd_per_hour
    assert big == pytest.approx(small + 3600 * (4 * 0.000018 + 16 * 0.000002), abs=1e-3)


def test_an_unconfirmed_rate_makes_the_price_a_stated_bound() -> None:
    rtx = load_settings(stack_config("rtx6000")).price
    # At least the 20 vCPU and 80 GiB the GPU requires, and it says the GPU is not priced.
    assert rtx.usd_per_hour >= 3600 * (20 * 0.000018 + 80 * 0.000002) - 1e-6
    assert any("LOWER BOUND" in note for note in rtx.unconfirmed)
    spot = load_settings({**TPU, "provisioning": "spot"}).price
    assert any("UPPER BOUND" in note for note in spot.unconfirmed)
    gke = load_settings(stack_config("gke-tpu-v6e")).price
    assert any("spot" in note for note in gke.unconfirmed)


def test_plan_shows_what_is_not_priced(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-s", "rtx6000", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert any("LOWER BOUND" in note for note in result["price_unconfirmed"])
