"""max-instances-cap (advisory): the instance ceiling stays within GPU quota and budget."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting_int
from policies._props import get
from policies._resources import CLOUD_RUN_WORKLOADS, as_int, is_gpu_service

CONFIG = schema(
    {
        "maxInstances": {
            "type": "integer",
            "default": 3,
            "description": "Largest max instance count not flagged (Cloud Run's default GPU "
            "quota is 3).",
        },
    }
)


def validate_max_instances_cap(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if args.resource_type not in CLOUD_RUN_WORKLOADS or not is_gpu_service(
        args.resource_type, args.props
    ):
        return
    cap = setting_int(args, CONFIG, "maxInstances")
    ceiling = max(
        as_int(get(args.props, "scaling", "maxInstanceCount")) or 0,
        as_int(get(args.props, "scaling", "manualInstanceCount")) or 0,
        as_int(get(args.props, "template", "parallelism")) or 0,
        as_int(get(args.props, "template", "scaling", "maxInstanceCount")) or 0,
    )
    if ceiling <= cap:
        return
    report_violation(
        f"{args.name}: allows up to {ceiling} GPU instances, above {cap}; Cloud Run refuses "
        "GPU settings beyond the project's GPU quota ('Max instances must be set to 3 or "
        "fewer in order to set GPU requirements') and each instance bills by the hour. Lower "
        "maxInstances, or request quota and raise this policy's 'maxInstances'.",
        None,
    )


max_instances_cap = resource_policy(
    "max-instances-cap",
    "GPU services cap their instance count within quota.",
    validate_max_instances_cap,
    advisory=True,
    config=CONFIG,
)
