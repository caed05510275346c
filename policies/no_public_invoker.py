"""no-public-invoker: nobody outside the configured members may invoke the service."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting_bool
from policies._props import get
from policies._reach import iam_grants
from policies._resources import SERVICE, V1_SERVICE, as_bool

CONFIG = schema(
    {
        "allowPublic": {
            "type": "boolean",
            "default": False,
            "description": "Allow allUsers/allAuthenticatedUsers invokers (a deliberately "
            "public endpoint).",
        },
    }
)

_FIX = (
    "grant roles/run.invoker to named members (stack config key 'invokers'); if a public "
    "endpoint is intended, set this policy's 'allowPublic' to true"
)


def validate_no_public_invoker(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if setting_bool(args, CONFIG, "allowPublic"):
        return
    props = args.props
    if args.resource_type == V1_SERVICE:
        annotation = "run.googleapis.com/invoker-iam-disabled"
        if as_bool(get(props, "metadata", "annotations", annotation)) is True:
            report_violation(
                f"{args.name}: the {annotation} annotation is true, so anyone on the internet "
                f"can call the model; remove it and {_FIX}.",
                None,
            )
        return
    if args.resource_type == SERVICE:
        if as_bool(get(props, "invokerIamDisabled")) is True:
            report_violation(
                f"{args.name}: invokerIamDisabled is true, so anyone on the internet can call "
                f"the model; set invoker_iam_disabled=False and {_FIX}.",
                None,
            )
        return
    grants = iam_grants(args.resource_type, props)
    if grants is None:
        return
    for what in grants.unreadable:
        report_violation(
            f"{args.name} ({args.resource_type}): cannot tell who this grants access to: "
            f"{what}; it may make the vLLM service public.",
            None,
        )
    for role, member in grants.public():
        report_violation(
            f"{args.name}: grants {role} to {member!r}, which makes the vLLM service public; "
            f"{_FIX}.",
            None,
        )


no_public_invoker = resource_policy(
    "no-public-invoker",
    "Cloud Run v1/v2 services, jobs and worker pools grant nothing to allUsers or "
    "allAuthenticatedUsers unless configured.",
    validate_no_public_invoker,
    config=CONFIG,
)
