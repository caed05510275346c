"""Build policy arguments the way pulumi-policy's own tests do, from mock-rendered stacks."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from serving.render.tpu_startup import (
    BUCKET_KEY,
    FromBucket,
    StartupSecrets,
    node_cache_key,
    render_metadata,
)
from serving.render.vllm import VllmCommand
from tests.pulumi_harness import Rendered, render, stack_config

SERVICE = "gcp:cloudrunv2/service:Service"
JOB = "gcp:cloudrunv2/job:Job"
IAM_MEMBER = "gcp:cloudrunv2/serviceIamMember:ServiceIamMember"
IAM_BINDING = "gcp:cloudrunv2/serviceIamBinding:ServiceIamBinding"
IAM_POLICY = "gcp:cloudrunv2/serviceIamPolicy:ServiceIamPolicy"
FIREWALL = "gcp:compute/firewall:Firewall"
TPU_QUEUED = "gcp:tpu/v2QueuedResource:V2QueuedResource"
TPU_VM = "gcp:tpu/v2Vm:V2Vm"
INSTANCE = "gcp:compute/instance:Instance"
#: The arguments of a plain TPU launch (the Hub id, as TPU nodes download at boot).
TPU_ARGS = ("/mnt/models/gemma-4-12B-it", "--max-model-len=4096", "--port=8000")
#: Shipped Cloud Run GPU stacks, and every shipped stack.
STACKS = ("l4", "rtx6000")
ALL_STACKS = ("l4", "rtx6000", "tpu-v6e1")
TPU_DYNAMIC = "pulumi-python:dynamic/gemma4:TpuQueuedResource"


def options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def resource_args(
    type_: str,
    props: Mapping[str, Any],
    name: str = "svc",
    config: Mapping[str, Any] | None = None,
) -> ResourceValidationArgs:
    return ResourceValidationArgs(
        type_,
        props,
        f"urn:pulumi:test::gemma4-vllm::{type_}::{name}",
        name,
        options(),
        None,
        config,
    )


def policy_resource(type_: str, props: Mapping[str, Any], name: str) -> PolicyResource:
    urn = f"urn:pulumi:test::gemma4-vllm::{type_}::{name}"
    return PolicyResource(type_, props, urn, name, options(), None, None, [], {})


def violations(
    policy: ResourceValidationPolicy | StackValidationPolicy,
    type_: str,
    props: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    name: str = "svc",
    *,
    stack: Sequence[tuple[str, Mapping[str, Any], str]] = (),
) -> list[str]:
    """Messages `policy` reports for one resource (a collecting report callback). A stack
    policy sees that resource and the other resources in `stack` (type, props, name)."""
    found: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        found.append(message)

    if isinstance(policy, StackValidationPolicy):
        resources = [policy_resource(type_, props, name)]
        resources += [policy_resource(t, p, n) for t, p, n in stack]
        result = policy.validate(StackValidationArgs(resources, config), report)
    else:
        assert not stack
        result = policy.validate(resource_args(type_, props, name, config), report)
    assert result is None  # every validator here is synchronous
    return found


def stack_violations(
    policy: StackValidationPolicy, resources: Sequence[tuple[str, Mapping[str, Any], str]]
) -> dict[str, list[str]]:
    """Messages a stack policy reports over whole resources, by the URN it names."""
    found: dict[str, list[str]] = {}

    def report(message: str, urn: str | None = None) -> None:
        found.setdefault(str(urn), []).append(message)

    args = StackValidationArgs([policy_resource(t, p, n) for t, p, n in resources], None)
    assert policy.validate(args, report) is None
    return found


@cache
def _rendered(stack: str) -> Rendered:
    return render(stack_config(stack), stack)


def rendered(stack: str) -> Rendered:
    """A deep copy of a shipped stack rendered under mocks (rendered once per session)."""
    return copy.deepcopy(_rendered(stack))


def service(stack: str = "l4") -> dict[str, Any]:
    """The Cloud Run service's inputs (engine camelCase) for a shipped stack."""
    return rendered(stack).one(SERVICE).inputs


def container(props: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = props["template"]["containers"][0]
    return first


def edit_args(
    props: dict[str, Any],
    *,
    set_: Mapping[str, str | None] | None = None,
    drop: tuple[str, ...] = (),
    add: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Change the vLLM argument list: `set_` replaces `--name=value` (None: bare flag)."""
    c = container(props)
    args: list[str] = []
    replaced = {n.removeprefix("no-") for n in set_ or {}}  # `--x` and `--no-x`: one option
    for item in c["args"]:
        name = item[2:].split("=", 1)[0] if item.startswith("--") else None
        if name in drop or (name is not None and name.removeprefix("no-") in replaced):
            continue
        args.append(item)
    for name, value in (set_ or {}).items():
        args.insert(-2, f"--{name}" if value is None else f"--{name}={value}")
    args[-2:-2] = list(add)
    c["args"] = args
    return props


def with_mtp(props: dict[str, Any], tokens: int = 3) -> dict[str, Any]:
    spec = {
        "method": "mtp",
        "model": "/mnt/models/gemma-4-12B-it-assistant",
        "num_speculative_tokens": tokens,
    }
    return edit_args(props, set_={"speculative-config": json.dumps(spec)})


def tpu_vm(*args: str, accelerator: str = "v6e-1") -> dict[str, Any]:
    """A TPU VM running the package's launcher with these vLLM arguments (TPU_ARGS if none)."""
    command = VllmCommand(command=("vllm", "serve"), args=tuple(args or TPU_ARGS))
    image = "vllm/vllm-tpu:v0.27.0"
    weights = FromBucket(("gemma-4-12B-it",), node_cache_key(command, image, accelerator, 1))
    metadata = render_metadata(
        command, image, StartupSecrets("my-project", "vllm-api-key"), weights
    )
    return {"acceleratorType": accelerator, "metadata": {**metadata, BUCKET_KEY: "models-5678"}}
