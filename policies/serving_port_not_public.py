"""serving-port-not-public: no firewall opens a model-serving port to the internet.

A stack policy: the ports judged are the configured `servingPorts` and the `--port` of every
vLLM server of the stack (vLLM's default 8000 where none is given). Firewalls are read by
`policies._reach`; source ranges are judged by the rule stack settings use
(`serving.config.netrange`).
"""

from __future__ import annotations

from pulumi_policy import ReportViolation, StackValidationArgs

from policies._config import schema, setting_int, setting_strings, stack_policy
from policies._reach import firewall_exposure
from policies._resources import as_int
from policies._server import read_servers
from serving.config.platforms import TpuSettings
from serving.launch.vllm_args import DEFAULT_PORT
from serving.render.vllm import CLOUD_RUN_PORT

_TPU = TpuSettings.model_fields

CONFIG = schema(
    {
        "servingPorts": {
            "type": "array",
            "items": {"type": "integer"},
            "default": [_TPU["serving_port"].default, CLOUD_RUN_PORT],
            "description": "Ports judged besides the --port of every vLLM server the stack "
            "starts (the TPU VM's is 8000).",
        },
        "minPublicPrefixV4": {
            "type": "integer",
            "default": _TPU["source_range_min_prefix_v4"].default,
            "description": "Widest public IPv4 source range allowed, as a prefix length "
            "(stack key sourceRangeMinPrefixV4 applies the same rule).",
        },
        "minPublicPrefixV6": {
            "type": "integer",
            "default": _TPU["source_range_min_prefix_v6"].default,
            "description": "Widest public IPv6 source range allowed, as a prefix length.",
        },
    }
)


def stack_serving_ports(args: StackValidationArgs) -> list[int]:
    """The configured ports and the `--port` of every vLLM server a resource starts."""
    ports = {p for p in (as_int(v) for v in setting_strings(args, CONFIG, "servingPorts")) if p}
    for resource in args.resources:
        for server in read_servers(resource.resource_type, resource.props).servers:
            port = as_int(server.args["port"]) if "port" in server.args else DEFAULT_PORT
            if port:
                ports.add(port)
    return sorted(ports)


def validate_serving_port_not_public(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    ports = stack_serving_ports(args)
    for resource in args.resources:
        exposure = firewall_exposure(
            resource.resource_type,
            resource.props,
            ports,
            min_prefix_v4=setting_int(args, CONFIG, "minPublicPrefixV4"),
            min_prefix_v6=setting_int(args, CONFIG, "minPublicPrefixV6"),
        )
        if exposure is None:
            continue
        for what in exposure.unreadable:
            report_violation(
                f"{resource.name}: cannot tell who this firewall lets in: {what}; the serving "
                f"ports {', '.join(map(str, ports))} may be open to the internet.",
                resource.urn,
            )
        if exposure.ports and exposure.problems:
            report_violation(
                f"{resource.name}: allows TCP port(s) {', '.join(map(str, exposure.ports))} from "
                f"{', '.join(exposure.sources) or 'everywhere'}: "
                f"{'; '.join(exposure.problems)}. The vLLM endpoint has no authentication "
                "of its own. Restrict sourceRanges (or the rule's source ranges) to your "
                "clients or a load balancer/IAP range, or serve through Cloud Run or an "
                "authenticated proxy.",
                resource.urn,
            )


serving_port_not_public = stack_policy(
    "serving-port-not-public",
    "No firewall rule opens a vLLM serving port (configured, or the --port of a "
    "vLLM server in the stack) to the internet (wide public ranges, or ranges that together "
    "cover it).",
    validate_serving_port_not_public,
    config=CONFIG,
)
