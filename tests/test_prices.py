"""Every price the planner and the preview show is built from rates of Google's own price pages:
each rate with its figure, unit, region, URL and the date it was read; the hourly price is the
arithmetic of those rates over the units the instance holds (a Cloud Run GPU instance at least the
host Google requires with its GPU). A rate not confirmed on Google's page counts at the figure a
named public source quotes (UNCONFIRMED, with who quotes it) and the price is an ESTIMATE; a rate
with no figure anywhere makes the price UNKNOWN, never counted as 0. A price's status is its
weakest rate's."""

from __future__ import annotations

import re
from typing import Any

import pytest

from serving.capacity.gke_costs import (
    CLUSTER_FEE,
    FORWARDING_RULE,
    fixed_costs,
    fixed_status,
    stack_price_status,
)
from serving.catalog.hardware import (
    CLOUD_RUN_CPU,
    CLOUD_RUN_MEMORY,
    CONFIRMED,
    ESTIMATE,
    GKE_SHAPES,
    HARDWARE,
    LOWER_BOUND,
    STATUSES,
    SYSTEM_NODE,
    Price,
    Rate,
    cloud_run_price,
    price_of,
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
        # Google's figure, else the quoted one, else 0.
        figure = rate.usd if rate.usd is not None else (rate.quoted or 0.0)
        expected += figure * per_hour * units
    assert price.usd_per_hour == pytest.approx(expected, abs=5e-5)
    unconfirmed = [rate for rate, _ in price.parts if not rate.confirmed]
    assert len(price.unconfirmed) == len(unconfirmed)
    for rate, note in zip(unconfirmed, price.unconfirmed, strict=True):
        assert rate.what in note and rate.note in note
        if rate.quoted is not None:
            # An estimate never appears without its figure and who quotes it.
            assert note.startswith("ESTIMATE") and rate.quoted_by in note
            assert f"${rate.quoted:.8f}".rstrip("0").rstrip(".") in note
        else:
            assert note.startswith("UNKNOWN") and "no figure anywhere" in note


@pytest.mark.parametrize(("name", "price"), PRICES, ids=[name for name, _ in PRICES])
def test_a_prices_status_is_its_weakest_rates(name: str, price: Price) -> None:
    statuses = {rate.status for rate, _ in price.parts}
    weakest = LOWER_BOUND if LOWER_BOUND in statuses else ESTIMATE if ESTIMATE in statuses else None
    assert price.status == (weakest or CONFIRMED)
    assert price.is_lower_bound == (price.status == LOWER_BOUND)
    assert price.is_estimate == (price.status == ESTIMATE)
    if price.status == ESTIMATE:  # every rate that is not Google's has a quoting source
        assert all(rate.confirmed or rate.quoted_by for rate, _ in price.parts)


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
    assert rate.status in STATUSES
    if rate.confirmed:
        assert rate.usd and rate.usd > 0 and rate.figure.startswith("$")
        assert rate.quoted is None and not rate.quoted_by
    elif rate.quoted is not None:
        # UNCONFIRMED, counted at the quoted figure, and it says who quotes it.
        assert rate.status == ESTIMATE and rate.note and rate.quoted > 0
        assert rate.quoted_by.strip() and rate.figure.startswith("~$")
        assert "UNCONFIRMED" in rate.figure and rate.quoted_by in rate.figure
        assert rate.usd_per_hour > 0
    else:
        assert rate.status == LOWER_BOUND and rate.note and rate.usd_per_hour == 0.0
        assert rate.figure.startswith("NO FIGURE")


#: What the catalogue counts for each rate not confirmed on Google's page, and who quotes it
#: (read there, not written here from memory): Cloud Run GPU and memory rates as a public Cloud
#: Run cost analysis lists them for Tier-1 regions; the g4 node as dstack's PR lists it; the
#: rest the catalogue's earlier figures.
QUOTED = {
    "Cloud Run memory (instance-based billing)": (0.000002, "mikgra91/spotyvibe"),
    "Cloud Run NVIDIA L4 GPU, without zonal redundancy": (0.0001867, "mikgra91/spotyvibe"),
    "Cloud Run NVIDIA L4 GPU, with zonal redundancy": (0.0002909, "mikgra91/spotyvibe"),
    "Cloud Run NVIDIA RTX PRO 6000 GPU, without zonal redundancy": (
        0.00036522,
        "mikgra91/spotyvibe",
    ),
    "Cloud Run NVIDIA RTX PRO 6000 GPU, with zonal redundancy": (
        0.00056913,
        "mikgra91/spotyvibe",
    ),
    "TPU v6e chip, on-demand": (2.70, "hardware catalogue"),
    "TPU v6e chip, flex-start (Dynamic Workload Scheduler)": (1.35, "hardware catalogue"),
    "g2-standard-8 node (8 vCPU, 32 GB, one L4), on-demand": (0.85, "hardware catalogue"),
    "g4-standard-48 node (48 vCPU, 180 GB, one RTX PRO 6000), on-demand": (
        4.5001,
        "dstackai/dstack PR #3213",
    ),
    "e2-standard-2 node, on-demand": (0.067, "hardware catalogue"),
    "e2-standard-4 node, on-demand": (0.134, "hardware catalogue"),
}


def test_each_quoted_rate_counts_at_its_sources_figure() -> None:
    by_what = {rate.what: rate for rate in RATES}
    assert set(QUOTED) <= set(by_what)
    for what, (figure, source) in QUOTED.items():
        rate = by_what[what]
        assert (rate.usd, rate.quoted, rate.status) == (None, figure, ESTIMATE)
        assert source in rate.quoted_by
    # Every other rate not confirmed has no figure anywhere: spot rates (the Spot VMs page
    # gives only a discount range) and the GPU nodes' flex-start rates.
    for rate in RATES:
        if not rate.confirmed and rate.what not in QUOTED:
            assert rate.status == LOWER_BOUND
            assert "spot" in rate.what or "flex-start" in rate.what


#: The status every shipped stack's price has (its default settings): estimates, but the GKE TPU
#: stack provisions spot nodes, and no source quotes a v6e spot rate (a bound, $0 per node).
SHIPPED = {
    "l4": ESTIMATE,
    "rtx6000": ESTIMATE,
    "tpu-v6e1": ESTIMATE,
    "gke-l4": ESTIMATE,
    "gke-tpu-v6e": LOWER_BOUND,
}


@pytest.mark.parametrize("stack", sorted(SHIPPED))
def test_a_shipped_stack_is_priced_unless_a_rate_has_no_figure(stack: str) -> None:
    settings = load_settings(stack_config(stack))
    price = settings.price
    assert price.status == SHIPPED[stack]
    assert (price.usd_per_hour > 0) == (price.status != LOWER_BOUND)
    # A stack whose instance has no figure costs an unknown amount, not a bound.
    unknown = price.status == LOWER_BOUND
    assert stack_price_status(settings) == ("unknown" if unknown else SHIPPED[stack])


def test_the_l4_instance_counts_its_quoted_gpu_and_memory_rates() -> None:
    price = HARDWARE["l4"].price
    assert price.usd_per_hour == pytest.approx(
        3600 * (0.0001867 + 4 * 0.000018 + 16 * 0.000002), abs=5e-5
    )
    assert price.status == ESTIMATE and "~$0.0001867 / GPU-second UNCONFIRMED" in price.source


def test_a_rate_with_no_figure_makes_a_lower_bound_whatever_else_is_confirmed() -> None:
    spot = HARDWARE["tpu-v6e-1"].spot_price
    assert spot is not None and spot.status == LOWER_BOUND and spot.usd_per_hour == 0.0
    whole = price_of("x", ((CLOUD_RUN_CPU, 4.0), (spot.parts[0][0], 1.0)))
    assert whole.status == LOWER_BOUND and whole.usd_per_hour > 0
    guessed = price_of("x", ((CLOUD_RUN_CPU, 4.0), (CLOUD_RUN_MEMORY, 16.0)))
    assert guessed.status == ESTIMATE
    assert price_of("x", ((CLOUD_RUN_CPU, 4.0),)).status == CONFIRMED


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
            rate.usd_per_hour + 3600 * (cpu * 0.000018 + memory * (CLOUD_RUN_MEMORY.quoted or 0)),
            abs=5e-5,
        )


def test_a_gke_clusters_fixed_costs_count_a_quoted_rate_and_say_so() -> None:
    settings = load_settings(stack_config("gke-l4"))
    items = {f.item.split(" (")[0]: (f.usd_per_hour, f.source) for f in fixed_costs(settings)}
    assert items["GKE cluster management fee"][0] == CLUSTER_FEE.usd_per_hour == 0.10
    assert items["Gateway forwarding rule"][0] == FORWARDING_RULE.usd_per_hour == 0.025
    node = SYSTEM_NODE[settings.gke.system_machine_type]
    usd, source = items["system node"]
    assert usd == node.quoted and node.quoted is not None
    assert "UNCONFIRMED" in source and node.quoted_by in source
    assert fixed_status(settings) == ESTIMATE
    # Each item carries its rate's status: what the preview marks with ~, not a text match.
    status = {f.item.split(" (")[0]: f.status for f in fixed_costs(settings)}
    assert status == {
        "GKE cluster management fee": CLUSTER_FEE.status,
        "Gateway forwarding rule": FORWARDING_RULE.status,
        "system node": ESTIMATE,
    }
    assert CLUSTER_FEE.status == FORWARDING_RULE.status == "confirmed"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"usd": 0.1, "url": "https://example.com/pricing"}, "Google's own page"),
        ({"usd": None}, "says why"),
        ({"usd": 0.0}, "positive"),
        ({"usd": 0.1, "unit": "GiB-month"}, "per second or per hour"),
        # An estimate never without who quotes it; a quote is for a rate not confirmed.
        ({"usd": None, "note": "n", "quoted": 1.0}, "names who quotes it"),
        ({"usd": None, "note": "n", "quoted": 1.0, "quoted_by": "  "}, "names who quotes it"),
        ({"usd": 0.1, "quoted": 1.0, "quoted_by": "x"}, "needs no quoted figure"),
        ({"usd": None, "note": "n", "quoted": 0.0, "quoted_by": "x"}, "positive"),
        ({"usd": None, "note": "n", "quoted_by": "x"}, "without a quoted figure"),
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


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"label": "x", "parts": [["no-such-rate", 1]]}, "unknown rates ['no-such-rate']"),
        ({"label": "x", "parts": [], "usd": 1.0}, "got keys ['label', 'parts', 'usd']"),
    ],
)
def test_a_price_of_the_data_files_names_rates_of_prices_json(
    entry: dict[str, Any], said: str
) -> None:
    from serving.catalog.hardware import _price

    with pytest.raises(ValueError, match=re.escape(said)):
        _price("profile 'l4' price", entry)


def test_an_entry_with_a_field_the_catalogue_does_not_have_is_refused_by_name() -> None:
    from serving.catalog.hardware import _build

    with pytest.raises(
        ValueError, match=r"prices.json rate 'r': .*unexpected keyword argument 'usdd'"
    ):
        _build(Rate, "prices.json rate 'r'", {"usdd": 1})
