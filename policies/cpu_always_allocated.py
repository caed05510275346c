"""cpu-always-allocated: Cloud Run GPU services run with CPU always allocated."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy
from policies._props import get
from policies._resources import SERVICE, as_bool, containers, is_gpu_service


def validate_cpu_always_allocated(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if not is_gpu_service(args.resource_type, args.props):
        return
    if args.resource_type != SERVICE:
        return  # jobs and worker pools have no request-based CPU throttling
    for index, container in enumerate(containers(args.resource_type, args.props)):
        name = get(container, "name") or f"#{index}"
        cpu_idle = as_bool(get(container, "resources", "cpuIdle"))
        if cpu_idle is False:
            continue
        state = "is true" if cpu_idle else "is not set"
        report_violation(
            f"{args.name}: container {name!r} resources.cpuIdle {state}; GPU services need "
            "CPU always allocated (instance-based billing), or Cloud Run throttles the CPU "
            "that feeds the GPU. Set resources.cpu_idle=False.",
            None,
        )


cpu_always_allocated = resource_policy(
    "cpu-always-allocated",
    "Cloud Run GPU services keep CPU always allocated (cpuIdle false).",
    validate_cpu_always_allocated,
)
