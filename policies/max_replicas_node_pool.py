"""max-replicas-node-pool: the autoscaler of vLLM asks for no more replicas than nodes hold.

Each vLLM Pod takes the accelerators of one node (or a share); the node pool's autoscaler adds
nodes up to its bounds, no further. A `maxReplicas` above what the matching node pools hold
(with the rolling update's `maxSurge`) creates Pods that stay Pending for ever. A stack that
declares no node pool for the Pods (a cluster made elsewhere) is not judged; a bound unknown at
preview is refused. The rules in full: docs/policies.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from policies._config import stack_policy
from policies._gke import Manifest, manifests, vllm_workloads
from policies._k8s import GPU_LABEL, TPU_LABEL, TPU_TOPOLOGY_LABEL
from policies._resources import as_int
from policies._wiring import UNKNOWN, name, namespace, plain
from policies.accelerator_pool_match import NODE_POOL, POOL_LABEL, pool_accelerator


def _selector(workload: Manifest) -> dict[str, Any]:
    spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    return dict(selector) if isinstance(selector, Mapping) else {}


def _pod_accelerators(workload: Manifest) -> int:
    spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    total = 0
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        limits = ((c.get("resources") or {}).get("limits")) or {}
        for resource in ("nvidia.com/gpu", "google.com/tpu"):
            total += as_int(limits.get(resource)) or 0
    return total


def _nodes(pool: Mapping[str, Any]) -> int | None:
    """Most nodes a pool runs; None when a bound is unknown at preview."""
    autoscaling = pool.get("autoscaling")
    zones = pool.get("nodeLocations")
    zone_count = len(zones) if isinstance(zones, list) and zones else 1
    if isinstance(autoscaling, Mapping):
        total = autoscaling.get("totalMaxNodeCount")
        if total is not None:
            return as_int(total)
        per_zone = autoscaling.get("maxNodeCount")
        if per_zone is not None:
            count = as_int(per_zone)
            return None if count is None else count * zone_count
    if autoscaling == UNKNOWN:
        return None
    fixed = pool.get("nodeCount", pool.get("initialNodeCount"))
    count = as_int(fixed)
    return None if count is None else count * zone_count


def _matches(pool: Mapping[str, Any], selector: Mapping[str, Any]) -> bool:
    pinned = selector.get(POOL_LABEL)
    if pinned is not None:
        return bool(pinned == pool.get("name"))
    accelerator = pool_accelerator(pool, str(pool.get("name")))
    if accelerator is None:
        return False
    if selector.get(GPU_LABEL):
        return bool(accelerator.accelerator == selector[GPU_LABEL])
    if selector.get(TPU_LABEL):
        return (accelerator.accelerator, accelerator.topology) == (
            selector[TPU_LABEL],
            selector.get(TPU_TOPOLOGY_LABEL),
        )
    return False


def _surge(workload: Manifest, replicas: int) -> int:
    strategy = (workload.get("spec") or {}).get("strategy") or {}
    if strategy.get("type") == "Recreate" or workload.get("kind") != "Deployment":
        return 0
    raw = (strategy.get("rollingUpdate") or {}).get("maxSurge", "25%")
    if isinstance(raw, str) and raw.endswith("%"):
        percent = as_int(raw[:-1])
        return math.ceil(replicas * (percent or 0) / 100)
    return as_int(raw) or 0


def validate_max_replicas_node_pool(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    pools = [
        plain(r.props) | {"name": plain(r.props).get("name") or r.name}
        for r in args.resources
        if r.resource_type == NODE_POOL
    ]
    if not pools:
        return
    found = manifests(args)
    vllm = {id(w.manifest): w for w in vllm_workloads(found)}
    for hpa in found:
        if hpa.get("kind") != "HorizontalPodAutoscaler":
            continue
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        target = next(
            (
                m
                for m in found
                if id(m) in vllm
                and m.get("kind") == ref.get("kind")
                and name(m) == ref.get("name")
                and namespace(m) == namespace(hpa)
            ),
            None,
        )
        if target is None:
            continue
        where = f"HorizontalPodAutoscaler {namespace(hpa)}/{name(hpa)}"
        high = as_int(spec.get("maxReplicas"))
        if high is None:
            report_violation(f"{where}: maxReplicas is not known at preview.", None)
            continue
        selector = _selector(target)
        matching = [p for p in pools if _matches(p, selector)]
        if not matching:
            continue  # accelerator-pool-match names a Pod no pool can run
        per_pod = _pod_accelerators(target)
        capacity = 0
        for pool in matching:
            nodes = _nodes(pool)
            if nodes is None:
                report_violation(
                    f"{where}: node pool {pool.get('name')}'s size is not known at preview, "
                    "so whether it holds maxReplicas cannot be told.",
                    None,
                )
                capacity = -1
                break
            accelerator = pool_accelerator(pool, str(pool.get("name")))
            per_node = (accelerator.count or 0) if accelerator else 0
            pods_per_node = max(1, per_node // per_pod) if per_pod and per_node else 1
            capacity += nodes * pods_per_node
        if capacity < 0:
            continue
        surge = _surge(target, high)
        if high + surge > capacity:
            names = ", ".join(str(p.get("name")) for p in matching)
            report_violation(
                f"{where}: maxReplicas {high} (+{surge} during a rolling update) is more than "
                f"the {capacity} vLLM Pods its node pools ({names}) can hold at their maximum "
                f"size, so the extra replicas stay Pending; lower maxReplicas to "
                f"{max(capacity - surge, 0)} or raise the pools' totalMaxNodeCount.",
                None,
            )


max_replicas_node_pool = stack_policy(
    "max-replicas-node-pool",
    "An autoscaler of vLLM asks for at most the replicas (plus the rolling "
    "update's surge) its matching node pools can hold at their maximum size.",
    validate_max_replicas_node_pool,
)
