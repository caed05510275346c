"""What a GKE stack costs besides its replicas: the cluster fee, the system node and the
Gateway's forwarding rule, as hourly list prices with their sources."""

from __future__ import annotations

from typing import Final

from serving.config.settings import Settings

#: Hourly list prices of what a GKE stack runs whatever its replica count (USD, checked
#: 2026-11-24 in the stored copies of Google's pricing pages named in each source).
CLUSTER_FEE_USD_PER_HOUR: Final = 0.10
CLUSTER_FEE_SOURCE: Final = (
    "https://cloud.google.com/kubernetes-engine/pricing: $0.10 per cluster per hour (the free "
    "tier's credit covers zonal and Autopilot clusters only; this cluster is regional)"
)
FORWARDING_RULE_USD_PER_HOUR: Final = 0.025
FORWARDING_RULE_SOURCE: Final = (
    "https://cloud.google.com/load-balancing/pricing: first 5 forwarding rules $0.025/h; "
    "data processed ($0.008/GiB in and out) and regional proxy instances are not included"
)
#: System node prices (e2, us-central1); another machine type is shown unpriced.
SYSTEM_NODE_USD_PER_HOUR: Final = {"e2-standard-2": 0.067, "e2-standard-4": 0.134}
SYSTEM_NODE_SOURCE: Final = (
    "https://cloud.google.com/compute/vm-instance-pricing (E2, us-central1; the figure was "
    "not in the stored copy of the page: check it)"
)


def fixed_costs(settings: Settings) -> list[tuple[str, float | None, str]]:
    """(item, USD per hour or None when not priced, source) of what runs at any replica
    count: the cluster fee, one system node (the autoscaler may add two more), the Gateway's
    forwarding rule."""
    machine = settings.gke.system_machine_type
    return [
        ("GKE cluster management fee", CLUSTER_FEE_USD_PER_HOUR, CLUSTER_FEE_SOURCE),
        (
            f"system node ({machine}, 1 of 1-3)",
            SYSTEM_NODE_USD_PER_HOUR.get(machine),
            SYSTEM_NODE_SOURCE,
        ),
        ("Gateway forwarding rule", FORWARDING_RULE_USD_PER_HOUR, FORWARDING_RULE_SOURCE),
    ]
