"""vllm-server-readable: every vLLM server a resource starts is in the one shape the package
renders (docs/accepted-shapes.md), or the change is refused (fail closed): a policy cannot
judge options it cannot see."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy
from policies._server import read_servers


def validate_vllm_server_readable(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    for problem in read_servers(args.resource_type, args.props).problems:
        report_violation(
            f"{args.name} ({args.resource_type}): cannot read the vLLM server it starts: "
            f"{problem}. The vLLM policies cannot check what they cannot read.",
            None,
        )


vllm_server_readable = resource_policy(
    "vllm-server-readable",
    "Every vLLM server a resource starts can be read with certainty (fail closed).",
    validate_vllm_server_readable,
)
