"""What a GKE stack costs besides its replicas: the cluster fee, the system node and the
Gateway's forwarding rule, as hourly rates of Google's price pages (each with its region, URL
and the date it was read); a rate not read there counts at the figure a named public source
quotes (an estimate), and one with no figure anywhere is shown unpriced (a lower bound)."""

from __future__ import annotations

from typing import Final, NamedTuple

from serving.capacity.costs import UNKNOWN, instance_price
from serving.catalog.hardware import CONFIRMED, LOWER_BOUND, RATES, SYSTEM_NODE, Rate, weakest
from serving.config.settings import Settings

#: serving/data/prices.json holds the figures, each with its page and when it was read.
CLUSTER_FEE: Final = RATES["gke-cluster-fee"]
FORWARDING_RULE: Final = RATES["forwarding-rule"]


def _fixed_rates(settings: Settings) -> list[tuple[str, Rate | None]]:
    machine = settings.gke.system_machine_type
    return [
        ("GKE cluster management fee", CLUSTER_FEE),
        (f"system node ({machine}, 1 of 1-3)", SYSTEM_NODE.get(machine)),
        ("Gateway forwarding rule", FORWARDING_RULE),
    ]


class FixedCost(NamedTuple):
    """One thing a GKE stack bills at any replica count."""

    item: str
    #: None: not priced (no figure anywhere).
    usd_per_hour: float | None
    source: str
    #: The rate's status: confirmed, estimate (a named source's quote) or lower_bound.
    status: str


def fixed_costs(settings: Settings) -> list[FixedCost]:
    """What runs at any replica count, priced as the module text says (one system node: the
    autoscaler may add two more)."""
    out: list[FixedCost] = []
    for item, rate in _fixed_rates(settings):
        if rate is None:
            machine = settings.gke.system_machine_type
            out.append(FixedCost(item, None, f"{machine}: no rate in this catalogue", LOWER_BOUND))
            continue
        usd = rate.usd_per_hour if rate.counted is not None else None
        note = "" if rate.confirmed else f" [NOT CONFIRMED on the page: {rate.note}]"
        out.append(FixedCost(item, usd, f"{rate.citation}, {rate.read}{note}", rate.status))
    return out


def fixed_status(settings: Settings) -> str:
    """The weakest status of a GKE stack's fixed rates (confirmed on other platforms)."""
    if settings.deploy_platform != "gke":
        return CONFIRMED
    return weakest(
        *(LOWER_BOUND if rate is None else rate.status for _, rate in _fixed_rates(settings))
    )


def stack_price_status(settings: Settings) -> str:
    """What a stack's cost is: unknown when its instance price is (no figure: no total either),
    else confirmed, estimate or lower_bound, the weakest of that price and (on GKE) its fixed
    costs."""
    _, own = instance_price(settings)
    return own if own == UNKNOWN else weakest(own, fixed_status(settings))
