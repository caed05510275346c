"""What a GKE stack costs besides its replicas: the cluster fee, the system node and the
Gateway's forwarding rule, as hourly rates of Google's price pages (each with its region, URL
and the date it was read); a rate not read there counts at the figure a named public source
quotes (an estimate), and one with no figure anywhere is shown unpriced (a lower bound)."""

from __future__ import annotations

from typing import Final, NamedTuple

from serving.catalog.hardware import CONFIRMED, LOWER_BOUND, STORED_COPY, Rate, weakest
from serving.config.settings import Settings

CLUSTER_FEE: Final = Rate(
    "GKE cluster management fee (the free tier's credit covers zonal and Autopilot clusters "
    "only; this cluster is regional)",
    0.10,
    "cluster-hour",
    "every region (a flat fee per cluster)",
    "https://cloud.google.com/kubernetes-engine/pricing",
    STORED_COPY,
)
FORWARDING_RULE: Final = Rate(
    "Cloud Load Balancing forwarding rule, first 5 (data processed, $0.008 / GiB in and out, "
    "and proxy instances not included)",
    0.025,
    "rule-hour",
    "global forwarding rules (no region)",
    "https://cloud.google.com/load-balancing/pricing",
    STORED_COPY,
)
_E2_NOTE = "not in the stored copies of the page (they end in its introduction)"
#: System node rates by machine type; another machine type is shown unpriced.
SYSTEM_NODE: Final = {
    machine: Rate(
        f"{machine} node, on-demand",
        None,
        "node-hour",
        "the stack's region",
        "https://cloud.google.com/compute/vm-instance-pricing",
        STORED_COPY,
        _E2_NOTE,
        quoted=recorded,
        quoted_by="this project's hardware catalogue before 2026-11-26 (us-central1, recorded "
        "without a page read)",
    )
    for machine, recorded in (("e2-standard-2", 0.067), ("e2-standard-4", 0.134))
}


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
    """What runs at any replica count: the cluster fee, one system node (the autoscaler may
    add two more), the Gateway's forwarding rule. A rate not confirmed on Google's page counts
    at the figure a named source quotes (status estimate; its source says UNCONFIRMED and who
    quotes it); with no figure anywhere it is None (not priced, status lower_bound), said so."""
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
    """What a stack's cost is: confirmed, estimate or lower_bound, the weakest of its instance
    price and (on GKE) its fixed costs."""
    return weakest(settings.price.status, fixed_status(settings))
