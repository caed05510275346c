"""tpu-run-duration-limit (advisory): a TPU has a run-duration or valid-until limit."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting_strings
from policies._props import walk

CONFIG = schema(
    {
        "limitKeys": {
            "type": "array",
            "items": {"type": "string"},
            "default": [
                "maxRunDuration",
                "maxRunDurationSeconds",
                "runDuration",
                "validUntilDuration",
                "validUntilSeconds",
                "validUntilTime",
                "terminationTime",
            ],
            "description": "Input names that bound how long a TPU runs or waits.",
        },
        "resourceTypePrefixes": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["gcp:tpu/", "pulumi-python:dynamic/gemma4:Tpu"],
            "description": "Resource types treated as TPUs.",
        },
    }
)


def validate_tpu_run_duration_limit(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    prefixes = setting_strings(args, CONFIG, "resourceTypePrefixes")
    if not any(args.resource_type.startswith(p) for p in prefixes):
        return
    keys = set(setting_strings(args, CONFIG, "limitKeys"))
    if any(k in keys and v not in (None, "", 0) for _, k, v, _ in walk(args.props)):
        return
    report_violation(
        f"{args.name}: this TPU has no run-duration or valid-until limit, so a forgotten "
        "instance bills until someone deletes it; set a max run duration (flex-start, e.g. "
        "4h) and a valid-until duration on the queued resource.",
        None,
    )


tpu_run_duration_limit = resource_policy(
    "tpu-run-duration-limit",
    "TPU resources carry a run-duration or valid-until limit (a cost guard).",
    validate_tpu_run_duration_limit,
    advisory=True,
    config=CONFIG,
)
