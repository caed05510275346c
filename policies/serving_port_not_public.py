"""serving-port-not-public: no firewall opens a model-serving port to the whole internet."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from policies._config import schema, setting_strings
from policies._resources import FIREWALL, as_bool, as_int, get, items, strings
from serving.settings import TpuSettings
from serving.vllm import CLOUD_RUN_PORT

WORLD = ("0.0.0.0/0", "::/0")

CONFIG = schema(
    {
        "servingPorts": {
            "type": "array",
            "items": {"type": "integer"},
            "default": [TpuSettings.model_fields["serving_port"].default, CLOUD_RUN_PORT],
            "description": "Ports vLLM serves on (the TPU VM's is 8000).",
        },
    }
)


def _covers(spec: str, port: int) -> bool:
    low, _, high = spec.partition("-")
    start, end = as_int(low), as_int(high or low)
    return start is not None and end is not None and start <= port <= end


def validate_serving_port_not_public(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if args.resource_type != FIREWALL:
        return
    props = args.props
    if str(get(props, "direction") or "INGRESS").upper() != "INGRESS":
        return
    if as_bool(get(props, "disabled")) is True:
        return
    open_to = [r for r in strings(get(props, "sourceRanges")) if r in WORLD]
    if not open_to:
        return
    ports = [p for p in (as_int(v) for v in setting_strings(args, CONFIG, "servingPorts")) if p]
    for rule in items(get(props, "allows")):
        protocol = str(get(rule, "protocol") or "").lower()
        if protocol not in ("tcp", "all"):
            continue
        specs = [str(s) for s in items(get(rule, "ports"))]
        exposed = [p for p in ports if not specs or any(_covers(s, p) for s in specs)]
        if exposed:
            report_violation(
                f"{args.name}: allows {protocol} port(s) {', '.join(map(str, exposed))} from "
                f"{', '.join(open_to)}: the vLLM endpoint has no authentication of its own. "
                "Restrict sourceRanges to your clients or a load balancer/IAP range, or serve "
                "through Cloud Run or an authenticated proxy.",
                None,
            )


serving_port_not_public = ResourceValidationPolicy(
    name="serving-port-not-public",
    description="No firewall rule opens a vLLM serving port (TPU VMs) to 0.0.0.0/0.",
    validate=validate_serving_port_not_public,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=CONFIG,
)
