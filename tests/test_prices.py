"""Every price the planner and the preview show is built from rates of Google's own price pages:
each rate with its figure (or NOT CONFIRMED), unit, region, URL and the date it was read; the
hourly price is the arithmetic of those rates over the units the instance holds (a Cloud Run GPU
instance at least the host Google requires with its GPU); a rate not confirmed counts 0 and the
price says it is a lower bound."""

from __future__ import annotations

import re

import pytest

from serving.capacity.gke_costs import CLUSTER_FEE, FORWARDING_RULE, SYSTEM_NODE, fixed_costs
from serving.catalog.hardware import (
    CLOUD_RUN_CPU,
    CLOUD_RUN_MEMORY,
    GKE_SHAPES,
    HARDWARE,
    Price,
    Rate,
    cloud_run_price,
)
from serving.config.settings import load_settings
from tests.pulumi_harness import stack_config

#: What Google's Cloud Run GPU page requires of the host (cloud.google.com/run/docs/configuring/
#: services/gpu, read 2026-11-26 in stored copies): "For L4 GPUs, you must use a minimum of 4 CPU
#: and 16 GiB of memory"; "For NVIDIA RTX PRO 6000 Blackwell GPU, you must use a minimum of 20
#: CPU and 80 GiB of memory".
HOST_MINIMUMS = {"l4": (4, 16), "rtx-pro-6000": (20, 80)}
#: Settings that change which rate a stack bills, per stack.
VARIANTS: dict[str, list[dict[str, object]]] = {
    "l4": [
        {"gpuZonalRedundancy": False},
        {"gpuZonalRedundancy": True},
        {"cpu": 8, "memoryGib": 32},
    ],
    "rtx6000": [{"gpuZonalRedundancy": False}, {"gpuZonalRedundancy": True}],
    "tpu-v6e1": [{"provisioning": p} for p in ("flex-start", "spot", "on-demand")],
    "gke-l4": [{"nodeProvisioning": p} for p in ("on-demand", "spot", "flex-start")],
    "gke-tpu-v6e": [{"nodeProvisioning": p} for p in ("on-demand", "spot", "flex-start")],
}


def _every_price() -> list[tuple[str, Price]]:
    out: list[tuple[str, Price]] = []
    for key, hw in sorted(HARDWARE.items()):
        out.append((f"{key}.price", hw.price))
        if hw.flex_start_price:
            out.append((f"{key}.flex_start_price", hw.flex_start_price))
        if hw.spot_price:
            out.append((f"{key}.spot_price", hw.spot_price))
    for key, shape in sorted(GKE_SHAPES.items()):
        out += [
            (f"gke {key}.price", shape.price),
            (f"gke {key}.spot_price", shape.spot_price),
            (f"gke {key}.flex_start_price", shape.flex_start_price),
        ]
    for stack, variants in VARIANTS.items():
        for overrides in variants:
            price = load_settings({**stack_config(stack), **overrides}).price
            out.append((f"{stack} {overrides}", price))
    return out


PRICES = _every_price()
RATES = {
    id(rate): rate
    for rate in (
        *(rate for _, price in PRICES for rate, _ in price.parts),
        CLUSTER_FEE,
        FORWARDING_RULE,
        *SYSTEM_NODE.values(),
    )
}.values()


@pytest.mark.parametrize(("name", "price"), PRICES, ids=[name for name, _ in PRICES])
def test_an_hourly_price_is_the_arithmetic_of_its_rates(name: str, price: Price) -> None:
    assert price.parts, f"{name}: built from no rate"
    expected = 0.0
    for rate, units in price.parts:
        per_hour = 3600 if rate.unit.endswith("-second") else 1
        expected += (rate.usd or 0.0) * per_hour * units
    assert price.usd_per_hour == pytest.approx(expected, abs=5e-5)
    missing = [rate for rate, _ in price.parts if not rate.confirmed]
    # A rate not confirmed counts 0 and is named as such; the price says it is a lower bound.
    assert price.is_lower_bound == bool(missing)
    assert len(price.unconfirmed) == len(missing)
    for rate, note in zip(missing, price.unconfirmed, strict=True):
        assert note.startswith("LOWER BOUND") and rate.what in note and rate.note in note


@pytest.mark.parametrize(("name", "price"), PRICES, ids=[name for name, _ in PRICES])
def test_every_price_carries_url_region_and_date(name: str, price: Price) -> None:
    for rate, _ in price.parts:
        assert rate.url.startswith("https://cloud.google.com/") and "pricing" in rate.url
        assert rate.url in price.source and rate.region in price.source
        assert rate.read in price.as_of and re.search(r"\b20\d\d-\d\d-\d\d\b", rate.read)


@pytest.mark.parametrize("rate", list(RATES), ids=lambda rate: rate.what[:40])
def test_every_rate_carries_its_figure_or_why_not(rate: Rate) -> None:
    assert rate.region and rate.unit.endswith(("-second", "-hour"))
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", rate.read)
    if rate.confirmed:
        assert rate.usd and rate.usd > 0 and rate.figure.startswith("$")
    else:
        assert rate.note and rate.figure == "NOT CONFIRMED" and rate.usd_per_hour == 0.0


@pytest.mark.parametrize("key", sorted(HOST_MINIMUMS))
def test_a_cloud_run_gpu_price_holds_the_host_google_requires(key: str) -> None:
    hw = HARDWARE[key]
    cpu, memory = HOST_MINIMUMS[key]
    assert (hw.min_cpu, hw.min_memory_gib) == (cpu, memory)
    gpu = hw.cloud_run_gpu
    assert gpu is not None
    assert hw.price.parts == (
        (gpu.without_zonal_redundancy, 1.0),
        (CLOUD_RUN_CPU, float(cpu)),
        (CLOUD_RUN_MEMORY, float(memory)),
    )
    # What the confirmed vCPU rate ($0.000018 / vCPU-second, Tier 1) alone bills for that host.
    assert hw.price.usd_per_hour >= 3600 * cpu * 0.000018 - 5e-5
    for zonal, rate in ((False, gpu.without_zonal_redundancy), (True, gpu.with_zonal_redundancy)):
        price = cloud_run_price(gpu, zonal, cpu, memory)
        assert price.parts[0] == (rate, 1.0)
        assert price.usd_per_hour == pytest.approx(
            3600
            * ((rate.usd_per_second or 0) + cpu * 0.000018 + memory * (CLOUD_RUN_MEMORY.usd or 0)),
            abs=5e-5,
        )


def test_a_gke_clusters_fixed_costs_are_priced_only_where_confirmed() -> None:
    settings = load_settings(stack_config("gke-l4"))
    items = {item.split(" (")[0]: (usd, source) for item, usd, source in fixed_costs(settings)}
    assert items["GKE cluster management fee"][0] == CLUSTER_FEE.usd_per_hour == 0.10
    assert items["Gateway forwarding rule"][0] == FORWARDING_RULE.usd_per_hour == 0.025
    usd, source = items["system node"]
    assert usd is None and "NOT CONFIRMED" in source


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"usd": 0.1, "url": "https://example.com/pricing"}, "Google's own page"),
        ({"usd": None}, "says why"),
        ({"usd": 0.0}, "positive"),
        ({"usd": 0.1, "unit": "GiB-month"}, "per second or per hour"),
    ],
)
def test_a_rate_refuses_what_it_cannot_stand_behind(kwargs: dict[str, object], field: str) -> None:
    base: dict[str, object] = {
        "what": "x",
        "usd": 0.1,
        "unit": "node-hour",
        "region": "us-east4",
        "url": "https://cloud.google.com/compute/vm-instance-pricing",
        "read": "2026-11-26",
    }
    with pytest.raises(ValueError, match=field):
        Rate(**{**base, **kwargs})  # type: ignore[arg-type]
