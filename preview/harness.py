"""Run the project's Pulumi program under Pulumi's mocks and capture what it declares.

No Pulumi CLI, engine or cloud: `pulumi.runtime.set_mocks` stands in for the engine, the
stack config is handed over the way the CLI does (`PULUMI_CONFIG`, string values), and the
real `__main__.py` runs. The mocks receive resource inputs under the engine's camelCase
names, the same names a policy sees, so what is captured here can be fed to the policy pack
directly. Used by `gemma4 preview` and by the tests.

The Pulumi runtime is process-global (settings, `PULUMI_CONFIG`): render one stack at a time.
:func:`render` holds a lock so that threads of one process take turns.
"""

from __future__ import annotations

import asyncio
import json
import logging
import logging.handlers
import os
import runpy
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

#: The repository root: `__main__.py`, `Pulumi.yaml` and the stack files.
ROOT = Path(__file__).resolve().parent.parent
PROJECT = "gemma4-vllm"
#: The `gcp:project` handed to the program when the stack file sets none.
PLACEHOLDER_PROJECT = "test-project"

_RENDER_LOCK = threading.Lock()


@dataclass
class Declared:
    type: str
    name: str
    inputs: dict[str, Any]
    #: Resource hooks the engine would run: {"after_create": [...], ...}; empty when none.
    hooks: dict[str, list[str]] = field(default_factory=dict)
    #: The parent resource's name (None: the stack itself).
    parent: str | None = None
    #: A custom resource (a cloud object) rather than a component.
    custom: bool = True


@dataclass
class Rendered:
    resources: list[Declared] = field(default_factory=list)
    #: The stack outputs (`pulumi.export`), as the program resolved them under the mocks.
    outputs: dict[str, Any] = field(default_factory=dict)
    #: Warnings and errors the program logged (`pulumi.log.warn`, ...).
    messages: list[str] = field(default_factory=list)

    def of_type(self, type_: str) -> list[Declared]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str) -> Declared:
        found = self.of_type(type_)
        assert len(found) == 1, f"expected one {type_}, found {[r.name for r in found]}"
        return found[0]


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.declared: list[Declared] = []

    def new_resource(
        self, args: pulumi.runtime.MockResourceArgs
    ) -> tuple[str | None, dict[str, Any]]:
        self.declared.append(
            Declared(args.typ, args.name, dict(args.inputs), custom=bool(args.custom))
        )
        state = dict(args.inputs)
        if args.typ == "gcp:cloudrunv2/service:Service":
            state["uri"] = f"https://{args.name}-abc123-ue.a.run.app"
            state.setdefault("name", f"{args.name}-1234")
        elif args.typ == "gcp:serviceaccount/account:Account":
            state["email"] = f"{args.inputs['accountId']}@test-project.iam.gserviceaccount.com"
            # The provider's computed `name` (projects/{project}/serviceAccounts/{email}).
            state["name"] = f"projects/test-project/serviceAccounts/{state['email']}"
        elif args.typ == "gcp:storage/bucket:Bucket":
            state.setdefault("name", f"{args.name}-5678")
        elif args.typ == "gcp:container/cluster:Cluster":
            state.setdefault("name", f"{args.name}-9abc")
            state["endpoint"] = "203.0.113.10"
            state["masterAuth"] = {"clusterCaCertificate": "bW9jaw=="}
        elif args.typ == "gcp:compute/address:Address":
            state.setdefault("name", f"{args.name}-def0")
            # Internal: an address of the default subnet of us-east4 (10.150.0.0/20), as a VPC
            # gives one; external: a documentation range (RFC 5737), never a real address.
            internal = args.inputs.get("addressType") == "INTERNAL"
            state["address"] = "10.150.0.20" if internal else "198.51.100.20"
        elif args.typ == "gcp:secretmanager/secretVersion:SecretVersion":
            state["version"] = "1"
        elif args.typ == "docker:index/remoteImage:RemoteImage":
            upstream = args.inputs["name"].split("@")[0].rsplit(":", 1)[0]
            state["repoDigest"] = f"{upstream}@sha256:" + "1" * 64
        elif args.typ == "docker:index/image:Image":
            state["repoDigest"] = args.inputs["imageName"].split(":")[0] + "@sha256:" + "0" * 64
        return f"{args.name}_id", state

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        if args.token == "gcp:organizations/getClientConfig:getClientConfig":
            return {"accessToken": "ya29.mock", "project": "test-project", "id": "x"}, []
        return {}, []


def _name_of(urn: str) -> str | None:
    """The resource name in a URN; None for the stack itself."""
    if not urn or "::pulumi:pulumi:Stack::" in urn:
        return None
    return urn.rsplit("::", 1)[-1]


class HookRecordingMonitor(MockMonitor):
    """Pulumi's mock monitor, also recording each resource's hooks and parent."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.recording = mocks
        self.hooks: dict[str, dict[str, list[str]]] = {}
        self.parents: dict[str, str | None] = {}

    def RegisterResource(self, request: Any) -> Any:
        bound = request.hooks  # a ResourceHooksBinding: one list of hook names per phase
        self.hooks[request.name] = {
            field.name: list(getattr(bound, field.name))
            for field in bound.DESCRIPTOR.fields
            if getattr(bound, field.name)
        }
        self.parents[request.name] = _name_of(request.parent)
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        for declared in self.recording.declared:
            if declared.name in self.hooks:
                declared.hooks = self.hooks[declared.name]
            if declared.name in self.parents:
                declared.parent = self.parents[declared.name]
        return response


def stack_config(stack: str, root: Path = ROOT) -> dict[str, Any]:
    """The project keys of `Pulumi.<stack>.yaml`, without the project prefix."""
    from serving.config.stack_file import config_block

    prefix = f"{PROJECT}:"
    config = config_block(root / f"Pulumi.{stack}.yaml", PROJECT)
    return {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}


def as_pulumi_value(value: Any) -> str:
    """A config value as the CLI hands it to a program: a string, objects JSON-encoded."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def set_config(config: Mapping[str, Any], other: Mapping[str, Any] | None = None) -> None:
    """Hand config to the program the way the Pulumi CLI does (PULUMI_CONFIG, string values).

    `config` holds the project's keys without the prefix; `other` holds fully qualified keys of
    other namespaces (`gcp:project`, ...); a None value there removes that key. Without a
    `gcp:project` (and unless it is removed that way), a placeholder is set.
    """
    payload = {f"{PROJECT}:{k}": as_pulumi_value(v) for k, v in config.items()}
    removed = {k for k, v in (other or {}).items() if v is None}
    payload.update({k: as_pulumi_value(v) for k, v in (other or {}).items() if v is not None})
    if "gcp:project" not in removed:
        payload.setdefault("gcp:project", PLACEHOLDER_PROJECT)
    for key in removed:
        payload.pop(key, None)
    os.environ["PULUMI_CONFIG"] = json.dumps(payload)
    pulumi.runtime.config.set_all_config({})


def render(
    config: Mapping[str, Any],
    stack: str = "test",
    mocks: RecordingMocks | None = None,
    *,
    other_config: Mapping[str, Any] | None = None,
    root: Path = ROOT,
) -> Rendered:
    """Run the project's real `__main__.py` under mocks with `config` as the stack config.

    Exceptions the program raises (a refused setting, a bug) propagate to the caller.
    """
    with _RENDER_LOCK:
        set_config(config, other_config)
        # asyncio.run() elsewhere (health checks, benchmark) leaves no current loop behind;
        # Pulumi's mock runtime expects one.
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
            if loop.is_closed():
                raise RuntimeError("closed")
        except RuntimeError:
            asyncio.set_event_loop(asyncio.new_event_loop())
        mocks = mocks or RecordingMocks()
        monitor = HookRecordingMonitor(mocks)
        rendered = Rendered(resources=mocks.declared)
        logger = logging.getLogger(f"preview.harness.{stack}")
        logger.propagate = False
        handler = logging.handlers.BufferingHandler(capacity=1 << 20)  # never flushed
        handler.setLevel(logging.WARNING)
        logger.addHandler(handler)
        pulumi.runtime.set_mocks(
            mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor, logger=logger
        )

        @pulumi.runtime.test  # type: ignore[untyped-decorator]
        def program() -> Any:
            # The root stack resource outlives one set_mocks call: start with no exports.
            stack_resource = pulumi.runtime.get_root_resource()
            exports: dict[str, Any] = getattr(stack_resource, "outputs", {})
            exports.clear()
            runpy.run_path(str(root / "__main__.py"), run_name="__main__")
            return pulumi.Output.from_input(dict(exports)).apply(rendered.outputs.update)

        try:
            program()
        finally:
            logger.removeHandler(handler)
        rendered.messages += [record.getMessage() for record in handler.buffer]
        return rendered
