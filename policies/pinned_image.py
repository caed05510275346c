"""pinned-image: containers run a fixed image version, never a floating tag."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from policies._resources import CLOUD_RUN_WORKLOADS, containers, get
from policies._server import vllm_servers
from serving.settings import check_pinned_image


def validate_pinned_image(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    for server in vllm_servers(args.resource_type, args.props):
        if not server.where.startswith("startup script") or server.image is None:
            continue  # containers are checked below
        try:
            check_pinned_image(server.image)
        except ValueError as exc:
            report_violation(
                f"{args.name}: {server.where} runs vLLM in `docker run` {exc}, so a reboot "
                "cannot silently change vLLM (stack config key 'image').",
                None,
            )
    if args.resource_type not in CLOUD_RUN_WORKLOADS:
        return
    for index, container in enumerate(containers(args.resource_type, args.props)):
        image = get(container, "image")
        if not isinstance(image, str):
            continue
        try:
            check_pinned_image(image)
        except ValueError as exc:
            name = get(container, "name") or f"#{index}"
            report_violation(
                f"{args.name}: container {name!r}: {exc} (stack config key 'image'), so a "
                "redeploy cannot silently change vLLM.",
                None,
            )


pinned_image = ResourceValidationPolicy(
    name="pinned-image",
    description="Cloud Run containers and the vLLM containers of startup scripts use a pinned "
    "image (version tag or sha256 digest).",
    validate=validate_pinned_image,
    enforcement_level=EnforcementLevel.MANDATORY,
)
