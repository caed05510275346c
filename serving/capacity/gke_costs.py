"""What a GKE stack costs besides its replicas: the cluster fee, the system node and the
Gateway's forwarding rule, as hourly rates of Google's price pages (each with its region, URL
and the date it was read); a rate that could not be read there is shown unpriced."""

from __future__ import annotations

from typing import Final

from serving.catalog.hardware import STORED_COPY, Rate
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
_E2_NOTE = (
    "not in the stored copies of the page (they end in its introduction); ${} / node-hour "
    "(us-central1) was recorded here without a page read"
)
#: System node rates by machine type; another machine type is shown unpriced.
SYSTEM_NODE: Final = {
    machine: Rate(
        f"{machine} node, on-demand",
        None,
        "node-hour",
        "the stack's region",
        "https://cloud.google.com/compute/vm-instance-pricing",
        STORED_COPY,
        _E2_NOTE.format(recorded),
    )
    for machine, recorded in (("e2-standard-2", "0.067"), ("e2-standard-4", "0.134"))
}


def fixed_costs(settings: Settings) -> list[tuple[str, float | None, str]]:
    """(item, USD per hour or None when not priced, source) of what runs at any replica
    count: the cluster fee, one system node (the autoscaler may add two more), the Gateway's
    forwarding rule. A rate not confirmed on Google's page is None (not priced), said so."""
    machine = settings.gke.system_machine_type
    node = SYSTEM_NODE.get(machine)
    items = [
        ("GKE cluster management fee", CLUSTER_FEE),
        (f"system node ({machine}, 1 of 1-3)", node),
        ("Gateway forwarding rule", FORWARDING_RULE),
    ]
    out: list[tuple[str, float | None, str]] = []
    for item, rate in items:
        if rate is None:
            out.append((item, None, f"{machine}: no rate in this catalogue"))
            continue
        usd = rate.usd_per_hour if rate.confirmed else None
        note = "" if rate.confirmed else f" [NOT CONFIRMED: {rate.note}]"
        out.append((item, usd, f"{rate.citation}, {rate.read}{note}"))
    return out
