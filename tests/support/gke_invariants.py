"""The cross-object references of a GKE stack, for the contract tests: the references the
`inference-pool-wiring` policy follows (`policies._wiring.check`), and the accelerators of
the rendered node pools against the Pods' requests and node selectors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies import _wiring
from policies._k8s import GPU_LABEL, TPU_LABEL
from policies._k8s import TPU_TOPOLOGY_LABEL as TPU_TOPOLOGY
from policies._resources import as_int
from policies._wiring import POD_TEMPLATE_KINDS, Manifest, manifest_from_engine, selects

__all__ = ["check", "manifest_from_engine", "node_pool_accelerator", "selects"]

#: Compute Engine accelerator-optimized machine families and the GPU each carries.
GPU_FAMILIES = {"g2": "nvidia-l4", "g4": "nvidia-rtx-pro-6000"}
#: TPU v6e machine types: chips per VM and the single-host topology (GKE's "TPUs in GKE").
TPU_MACHINES = {
    "ct6e-standard-1t": ("tpu-v6e-slice", 1, "1x1"),
    "ct6e-standard-4t": ("tpu-v6e-slice", 4, "2x2"),
    "ct6e-standard-8t": ("tpu-v6e-slice", 8, "2x4"),
}


def check(manifests: Sequence[Manifest], node_pools: Sequence[Mapping[str, Any]] = ()) -> list[str]:
    return _wiring.check(manifests) + accelerator_problems(manifests, node_pools)


def _pod_spec(m: Manifest) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = (((m.get("spec") or {}).get("template") or {}).get("spec")) or {}
    return spec


def _containers(m: Manifest) -> list[Mapping[str, Any]]:
    spec = _pod_spec(m)
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def node_pool_accelerator(pool: Mapping[str, Any]) -> tuple[str, int, str | None] | None:
    """(node label value, accelerators per node, TPU topology) of a pulumi-gcp NodePool."""
    config = pool.get("nodeConfig") or {}
    machine = str(config.get("machineType") or "")
    declared = config.get("guestAccelerators") or []
    family = machine.split("-", 1)[0]
    if machine in TPU_MACHINES:
        accel, chips, topology = TPU_MACHINES[machine]
        given = (pool.get("placementPolicy") or {}).get("tpuTopology")
        return accel, chips, str(given or topology)
    if declared:
        return str(declared[0].get("type")), as_int(declared[0].get("count")) or 0, None
    if family in GPU_FAMILIES:
        return GPU_FAMILIES[family], 0, None
    return None


def _limit(container: Mapping[str, Any], resource: str) -> int:
    return as_int(((container.get("resources") or {}).get("limits") or {}).get(resource)) or 0


def accelerator_problems(
    manifests: Sequence[Manifest], node_pools: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Machine type = accelerator = resource request = node selectors, per Pod template."""
    problems: list[str] = []
    for pool in node_pools:
        config = pool.get("nodeConfig") or {}
        machine = str(config.get("machineType") or "")
        family = machine.split("-", 1)[0]
        for accel in config.get("guestAccelerators") or []:
            expected = GPU_FAMILIES.get(family)
            if expected and accel.get("type") != expected:
                problems.append(
                    f"node pool {pool.get('name')}: machine type {machine} carries {expected}, "
                    f"not {accel.get('type')}"
                )
    accelerators = [a for a in (node_pool_accelerator(p) for p in node_pools) if a]
    for w in manifests:
        if w.get("kind") not in POD_TEMPLATE_KINDS:
            continue
        selector = _pod_spec(w).get("nodeSelector") or {}
        gpus = sum(_limit(c, "nvidia.com/gpu") for c in _containers(w))
        tpus = sum(_limit(c, "google.com/tpu") for c in _containers(w))
        where = f"{w['kind']} {w['metadata']['name']}"
        if selector.get(GPU_LABEL):
            if tpus:
                problems.append(
                    f"{where}: asks for google.com/tpu on GPU nodes ({selector[GPU_LABEL]})"
                )
            if not gpus:
                problems.append(
                    f"{where}: selects {selector[GPU_LABEL]} nodes without asking for "
                    "nvidia.com/gpu"
                )
            matching = [a for a in accelerators if a[0] == selector[GPU_LABEL]]
            if node_pools and not matching:
                problems.append(f"{where}: no node pool carries {selector[GPU_LABEL]}")
            for _accel, count, _ in matching:
                if count and gpus > count:
                    problems.append(f"{where}: asks for {gpus} GPUs, a node has {count}")
        elif selector.get(TPU_LABEL):
            if gpus:
                problems.append(
                    f"{where}: asks for nvidia.com/gpu on TPU nodes ({selector[TPU_LABEL]})"
                )
            topology = selector.get(TPU_TOPOLOGY)
            matching = [a for a in accelerators if a[0] == selector[TPU_LABEL] and a[2] == topology]
            if node_pools and not matching:
                problems.append(
                    f"{where}: no node pool is a {selector[TPU_LABEL]} {topology} slice"
                )
            for _, chips, _ in matching:
                if tpus != chips:
                    problems.append(f"{where}: asks for {tpus} TPU chips, a node has {chips}")
        elif gpus or tpus:
            problems.append(
                f"{where}: asks for an accelerator without an accelerator node selector"
            )
    return problems
