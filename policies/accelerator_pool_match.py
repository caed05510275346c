"""accelerator-pool-match: a Pod asks for the accelerator of the nodes it is scheduled on.

GKE schedules a Pod on the nodes its `cloud.google.com/gke-accelerator` (or TPU accelerator
and topology) selector names, and the container asks for `nvidia.com/gpu` or `google.com/tpu`
(GKE's "GPUs" and "TPUs in GKE" how-tos). A mismatch never schedules: refusing it here saves
a deployment that waits for ever. The rules in full: docs/policies.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from policies._config import stack_policy
from policies._k8s import (
    GPU_LABEL,
    GPU_RESOURCE,
    POD_TEMPLATES,
    TPU_LABEL,
    TPU_RESOURCE,
    TPU_TOPOLOGY_LABEL,
    containers,
    node_selector,
    tpu_chips,
)
from policies._props import get, items
from policies._resources import as_int

NODE_POOL = "gcp:container/nodePool:NodePool"
POOL_LABEL = "cloud.google.com/gke-nodepool"
#: Machine families whose machine types carry one kind of GPU (Compute Engine's GPU
#: machine types: g2 = L4, g4 = RTX PRO 6000).
GPU_MACHINE_FAMILIES = {"g2": "nvidia-l4", "g4": "nvidia-rtx-pro-6000"}
_TPU_MACHINE = re.compile(r"ct(\d+[a-z]*)-(?:standard|hightpu)-(\d+)t")
#: Single-host TPU v6e topologies and their chips per node (TPU v6e docs).
SINGLE_HOST_MAX_CHIPS = 8
SINGLE_HOST_TOPOLOGIES = {1: "1x1", 4: "2x2", 8: "2x4"}


@dataclass(frozen=True)
class PoolAccelerator:
    """What one node of a pool carries: ("gpu", type, count) or ("tpu", version, chips)."""

    name: str
    kind: str
    accelerator: str
    count: int | None
    topology: str | None = None


def pool_accelerator(props: Mapping[str, Any], name: str) -> PoolAccelerator | None:
    """The accelerator of a node pool's nodes (None: a CPU pool or not known at preview)."""
    pool_name = get(props, "name")
    shown = pool_name if isinstance(pool_name, str) else name
    machine = get(props, "nodeConfig", "machineType")
    for accel in items(get(props, "nodeConfig", "guestAccelerators")):
        kind = get(accel, "type")
        if isinstance(kind, str):
            return PoolAccelerator(shown, "gpu", kind, as_int(get(accel, "count")))
    if isinstance(machine, str):
        tpu = _TPU_MACHINE.fullmatch(machine)
        if tpu:
            topology = get(props, "placementPolicy", "tpuTopology")
            chips = int(tpu.group(2))
            if not isinstance(topology, str):
                # A single-host slice's topology follows from its chips (TPU v6e: 1t 1x1,
                # 4t 2x2, 8t 2x4); None where the machine type does not say.
                topology = SINGLE_HOST_TOPOLOGIES.get(chips)
            return PoolAccelerator(shown, "tpu", f"tpu-v{tpu.group(1)}-slice", chips, topology)
        family = machine.split("-", 1)[0]
        if family in GPU_MACHINE_FAMILIES:
            return PoolAccelerator(shown, "gpu", GPU_MACHINE_FAMILIES[family], None)
    return None


def _requests(container: Mapping[str, Any], resource: str) -> int | None:
    value = get(container, "resources", "limits", resource)
    if value is None:
        value = get(container, "resources", "requests", resource)
    return None if value is None else as_int(value)


def pod_problems(
    resource_type: str, props: Mapping[str, Any], pools: list[PoolAccelerator]
) -> list[str]:
    selector = node_selector(resource_type, props)
    gpu, tpu = selector.get(GPU_LABEL), selector.get(TPU_LABEL)
    topology = selector.get(TPU_TOPOLOGY_LABEL)
    problems: list[str] = []
    gpus = tpus = 0
    for index, container in enumerate(containers(resource_type, props)):
        name = get(container, "name") or f"#{index}"
        gpu_count, tpu_count = (
            _requests(container, GPU_RESOURCE),
            _requests(container, TPU_RESOURCE),
        )
        gpus += gpu_count or 0
        tpus += tpu_count or 0
        if tpu_count and gpu:
            problems.append(
                f"container {name!r} asks for {tpu_count} {TPU_RESOURCE} but the Pod is "
                f"scheduled on GPU nodes ({GPU_LABEL}: {gpu}); a TPU request never schedules "
                f"there: select TPU nodes ({TPU_LABEL}, {TPU_TOPOLOGY_LABEL}) or ask for "
                f"{GPU_RESOURCE}"
            )
        if gpu_count and tpu:
            problems.append(
                f"container {name!r} asks for {gpu_count} {GPU_RESOURCE} but the Pod is "
                f"scheduled on TPU nodes ({TPU_LABEL}: {tpu}); select GPU nodes ({GPU_LABEL}) "
                f"or ask for {TPU_RESOURCE}"
            )
    if gpus and not gpu and not tpu:
        problems.append(
            f"the Pod asks for {GPU_RESOURCE} without a {GPU_LABEL} node selector, so neither "
            "GKE's scheduling nor the vLLM policies know which GPU it gets; add the selector"
        )
    if tpus and not tpu:
        problems.append(
            f"the Pod asks for {TPU_RESOURCE} without the {TPU_LABEL} and "
            f"{TPU_TOPOLOGY_LABEL} node selectors GKE needs to place a TPU Pod; add them"
        )
    if tpus and tpu and topology is None:
        problems.append(f"the Pod selects TPU nodes ({tpu}) without {TPU_TOPOLOGY_LABEL}")
    chips = tpu_chips(topology) if topology else None
    if tpus and chips is not None and chips <= SINGLE_HOST_MAX_CHIPS and tpus != chips:
        problems.append(
            f"the Pod asks for {tpus} {TPU_RESOURCE} on the single-host topology {topology}, "
            f"whose node has {chips} chip(s); ask for exactly {chips}"
        )
    if not pools:
        return problems
    by_name = {p.name: p for p in pools}
    pinned = selector.get(POOL_LABEL)
    if pinned is not None and pinned in by_name:
        pool = by_name[pinned]
        if (tpus and pool.kind != "tpu") or (gpus and pool.kind != "gpu"):
            asked = TPU_RESOURCE if tpus else GPU_RESOURCE
            problems.append(
                f"the Pod is pinned to node pool {pinned!r} ({pool.accelerator}) but asks for "
                f"{asked}; pin it to a pool of that accelerator"
            )
    if gpu and not any(p.kind == "gpu" and p.accelerator == gpu for p in pools):
        problems.append(
            f"the Pod selects {GPU_LABEL}: {gpu} but no node pool of the stack has that GPU "
            f"(pools: {', '.join(f'{p.name}={p.accelerator}' for p in pools)})"
        )
    if tpu and not any(
        p.kind == "tpu" and p.accelerator == tpu and (p.topology in (None, topology)) for p in pools
    ):
        shown = ", ".join(f"{p.name}={p.accelerator} {p.topology or ''}".strip() for p in pools)
        problems.append(
            f"the Pod selects {TPU_LABEL}: {tpu} topology {topology} but no node pool of the "
            f"stack has it (pools: {shown})"
        )
    for pool in pools:
        if pool.kind == "gpu" and pool.accelerator == gpu and pool.count and gpus > pool.count:
            problems.append(
                f"the Pod asks for {gpus} {GPU_RESOURCE} but a node of pool {pool.name!r} has "
                f"{pool.count}"
            )
    return problems


def validate_accelerator_pool_match(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    pools = [
        pool
        for r in args.resources
        if r.resource_type == NODE_POOL
        for pool in [pool_accelerator(r.props, r.name)]
        if pool is not None
    ]
    for resource in args.resources:
        if resource.resource_type not in POD_TEMPLATES:
            continue
        for problem in pod_problems(resource.resource_type, resource.props, pools):
            report_violation(f"{resource.name}: {problem}.", resource.urn)


accelerator_pool_match = stack_policy(
    "accelerator-pool-match",
    "Kubernetes Pods ask for the accelerator (nvidia.com/gpu or google.com/tpu, "
    "and how many) of the nodes their selectors name, and of a node pool the stack declares.",
    validate_accelerator_pool_match,
)
