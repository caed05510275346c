"""Render the project's program under Pulumi's mocks and judge it with the mandatory policies.

What promotion runs before it writes a stack file: the program itself (`__main__.py`, every
settings check and `pulumi.RunError` refusal included) declares its resources against mocks,
and every mandatory policy of the pack judges each one, as `pulumi preview --policy-pack`
would. No cloud call, no Pulumi CLI.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from policies.registry import ALL, PACK_ENFORCEMENT_LEVEL

ROOT = Path(__file__).resolve().parent.parent
#: The project id the program sees when the stack file sets none (CI sets it per run).
PLACEHOLDER_PROJECT = "promotion-check"


@dataclass(frozen=True)
class Declared:
    type: str
    name: str
    inputs: dict[str, Any]


class _Recording(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.declared: list[Declared] = []

    def new_resource(
        self, args: pulumi.runtime.MockResourceArgs
    ) -> tuple[str | None, dict[str, Any]]:
        self.declared.append(Declared(args.typ, args.name, dict(args.inputs)))
        state = dict(args.inputs)
        if args.typ == "gcp:cloudrunv2/service:Service":
            state["uri"] = f"https://{args.name}.a.run.app"
        elif args.typ == "docker:index/remoteImage:RemoteImage":
            state["repoDigest"] = str(args.inputs.get("name", "")).split("@")[0] + (
                "@sha256:" + "0" * 64
            )
        elif args.typ == "docker:index/image:Image":
            name = str(args.inputs.get("imageName", "")).split(":")[0]
            state["repoDigest"] = name + "@sha256:" + "0" * 64
        elif args.typ == "gcp:serviceaccount/account:Account":
            state["email"] = f"{args.inputs.get('accountId')}@{PLACEHOLDER_PROJECT}.iam"
        return f"{args.name}_id", state

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        return {}, []


def _as_config_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def render(project: str, stack: str, config: Mapping[str, Any]) -> list[Declared]:
    """Run `__main__.py` under mocks with `config` (full `namespace:key` names).

    Raises pulumi.RunError (the program's refusals) or what the program raised."""
    payload = {str(k): _as_config_value(v) for k, v in config.items()}
    payload.setdefault("gcp:project", PLACEHOLDER_PROJECT)
    saved = os.environ.get("PULUMI_CONFIG")
    os.environ["PULUMI_CONFIG"] = json.dumps(payload)
    pulumi.runtime.config.set_all_config({})
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
        if loop.is_closed():
            raise RuntimeError("closed")
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())
    mocks = _Recording()
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=True)

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> None:
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")

    try:
        program()
    finally:
        if saved is None:
            os.environ.pop("PULUMI_CONFIG", None)
        else:
            os.environ["PULUMI_CONFIG"] = saved
    return mocks.declared


def _options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def mandatory_violations(resources: list[Declared], project: str, stack: str) -> list[str]:
    """Every message a mandatory policy of the pack reports for these resources."""
    found: list[str] = []
    for policy in ALL:
        level = policy.enforcement_level or PACK_ENFORCEMENT_LEVEL
        if level is not EnforcementLevel.MANDATORY or not isinstance(
            policy, ResourceValidationPolicy
        ):
            continue
        for resource in resources:
            args = ResourceValidationArgs(
                resource.type,
                resource.inputs,
                f"urn:pulumi:{stack}::{project}::{resource.type}::{resource.name}",
                resource.name,
                _options(),
                None,
                None,
            )

            def report(message: str, urn: str | None = None, name: str = policy.name) -> None:
                found.append(f"[{name}] {message}")

            policy.validate(args, report)
    return found


def check_stack(project: str, stack: str, config: Mapping[str, Any]) -> list[str]:
    """Why this stack config would be refused (program refusal or mandatory policy); []."""
    try:
        resources = render(project, stack, config)
    except pulumi.RunError as exc:
        return [str(exc)]
    except Exception as exc:  # the program itself failed: that refuses the result too
        return [f"the program fails under Pulumi's mocks: {type(exc).__name__}: {exc}"]
    return mandatory_violations(resources, project, stack)
