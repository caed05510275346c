"""min-instances-cost (advisory): warm GPU instances bill all month."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting_int
from policies._props import get
from policies._resources import (
    SERVICE,
    WORKER_POOL,
    accelerator,
    as_int,
    find_hardware,
    is_gpu_service,
)
from serving.sizing.memory import monthly_cost

CONFIG = schema(
    {
        "maxMinInstances": {
            "type": "integer",
            "default": 0,
            "description": "Largest minimum instance count that is not flagged.",
        },
    }
)


#: What the monthly figure says first, by the price's status (confirmed: 'about').
_HOW_FAR = {"lower_bound": "at least", "estimate": "an estimated"}


def validate_min_instances_cost(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if args.resource_type not in (SERVICE, WORKER_POOL) or not is_gpu_service(
        args.resource_type, args.props
    ):
        return
    allowed = setting_int(args, CONFIG, "maxMinInstances")
    warm = max(
        as_int(get(args.props, "scaling", "minInstanceCount")) or 0,
        as_int(get(args.props, "scaling", "manualInstanceCount")) or 0,
        as_int(get(args.props, "template", "scaling", "minInstanceCount")) or 0,
    )
    if warm <= allowed:
        return
    hardware = find_hardware(accelerator(args.resource_type, args.props))
    cost = (
        f" {_HOW_FAR.get(hardware.price.status, 'about')} "
        f"${monthly_cost(hardware.price.usd_per_hour, warm):,.0f} a month "
        f"({warm} x ${hardware.price.usd_per_hour:.2f}/h x 730 h, {hardware.price.as_of} list "
        "price" + (f"; {hardware.price.note}" if hardware.price.note else "") + ")"
        if hardware
        else ""
    )
    report_violation(
        f"{args.name}: keeps {warm} GPU instance(s) warm, billed while idle:{cost}. Set "
        "minInstances to 0 to scale to zero (a cold start then loads the model), or accept "
        "the cost.",
        None,
    )


min_instances_cost = resource_policy(
    "min-instances-cost",
    "GPU services scale to zero unless warm instances are intended.",
    validate_min_instances_cost,
    advisory=True,
    config=CONFIG,
)
