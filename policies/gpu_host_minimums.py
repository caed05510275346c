"""gpu-host-minimums: a known GPU type, with at least the CPU and memory it requires."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy
from policies._props import get
from policies._resources import (
    CLOUD_RUN_WORKLOADS,
    accelerator,
    containers,
    cpu_quantity,
    find_hardware,
    is_gpu_service,
    memory_quantity_gib,
)
from serving.catalog.hardware import HARDWARE, Platform


def _known() -> str:
    return ", ".join(
        sorted(p.accelerator for p in HARDWARE.values() if p.platform is Platform.CLOUD_RUN)
    )


def validate_gpu_host_minimums(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if args.resource_type not in CLOUD_RUN_WORKLOADS or not is_gpu_service(
        args.resource_type, args.props
    ):
        return
    gpu = accelerator(args.resource_type, args.props)
    hardware = find_hardware(gpu)
    if hardware is None or hardware.platform is not Platform.CLOUD_RUN:
        report_violation(
            f"{args.name}: GPU type {gpu!r} (the node selector's accelerator) is not one "
            f"this project knows; allowed: {_known()}.",
            None,
        )
        return
    cpu_total = 0.0
    memory_total = 0.0
    for container in containers(args.resource_type, args.props):
        cpu_total += cpu_quantity(get(container, "resources", "limits", "cpu")) or 0.0
        memory_total += memory_quantity_gib(get(container, "resources", "limits", "memory")) or 0.0
    if cpu_total < hardware.min_cpu:
        report_violation(
            f"{args.name}: {cpu_total:g} vCPU is below the {hardware.accelerator} minimum of "
            f"{hardware.min_cpu}; set resources.limits.cpu to at least '{hardware.min_cpu}' "
            "(stack config key 'cpu').",
            None,
        )
    if memory_total < hardware.min_memory_gib:
        report_violation(
            f"{args.name}: {memory_total:g} GiB of memory is below the {hardware.accelerator} "
            f"minimum of {hardware.min_memory_gib} GiB; set resources.limits.memory to at "
            f"least '{hardware.min_memory_gib}Gi' (stack config key 'memoryGib').",
            None,
        )


gpu_host_minimums = resource_policy(
    "gpu-host-minimums",
    "Cloud Run GPU services use a known GPU type with at least its minimum CPU and memory.",
    validate_gpu_host_minimums,
)
