"""no-public-invoker: nobody outside the configured members may invoke the service."""

from __future__ import annotations

import json

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from policies._config import schema, setting_bool
from policies._resources import (
    IAM_BINDING,
    IAM_MEMBER,
    IAM_POLICY,
    SERVICE,
    as_bool,
    get,
    strings,
)

PUBLIC = ("allUsers", "allAuthenticatedUsers")

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


def _policy_members(policy_data: object) -> list[str]:
    if not isinstance(policy_data, str):
        return []
    try:
        data = json.loads(policy_data)
    except json.JSONDecodeError:
        return []
    members: list[str] = []
    for binding in data.get("bindings", []) if isinstance(data, dict) else []:
        if isinstance(binding, dict):
            members += [m for m in binding.get("members", []) if isinstance(m, str)]
    return members


def validate_no_public_invoker(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if setting_bool(args, CONFIG, "allowPublic"):
        return
    props = args.props
    if args.resource_type == SERVICE:
        if as_bool(get(props, "invokerIamDisabled")) is True:
            report_violation(
                f"{args.name}: invokerIamDisabled is true, so anyone on the internet can call "
                f"the model; set invoker_iam_disabled=False and {_FIX}.",
                None,
            )
        return
    if args.resource_type == IAM_MEMBER:
        member = get(props, "member")
        members = [member] if isinstance(member, str) else []
    elif args.resource_type == IAM_BINDING:
        members = strings(get(props, "members"))
    elif args.resource_type == IAM_POLICY:
        members = _policy_members(get(props, "policyData"))
    else:
        return
    for member in members:
        if member in PUBLIC:
            report_violation(
                f"{args.name}: grants {get(props, 'role') or 'a role'} to {member!r}, which "
                f"makes the vLLM service public; {_FIX}.",
                None,
            )


no_public_invoker = ResourceValidationPolicy(
    name="no-public-invoker",
    description="Cloud Run services are not invokable by allUsers or allAuthenticatedUsers "
    "unless configured.",
    validate=validate_no_public_invoker,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=CONFIG,
)
