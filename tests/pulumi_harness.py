"""Render a stack's Pulumi program under Pulumi's mocks and capture what it declares.

The mocks receive resource inputs under the engine's camelCase names, the same names a
policy sees, so what is captured here can be fed to the policy pack directly.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime.mocks import MockMonitor

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "gemma4-vllm"


@dataclass
class Declared:
    type: str
    name: str
    inputs: dict[str, Any]
    #: Resource hooks the engine would run: {"after_create": [...], ...}; empty when none.
    hooks: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Rendered:
    resources: list[Declared] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)

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
        self.declared.append(Declared(args.typ, args.name, dict(args.inputs)))
        state = dict(args.inputs)
        if args.typ == "gcp:cloudrunv2/service:Service":
            state["uri"] = f"https://{args.name}-abc123-ue.a.run.app"
            state.setdefault("name", f"{args.name}-1234")
        elif args.typ == "gcp:serviceaccount/account:Account":
            state["email"] = f"{args.inputs['accountId']}@test-project.iam.gserviceaccount.com"
        elif args.typ == "gcp:storage/bucket:Bucket":
            state.setdefault("name", f"{args.name}-5678")
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


class HookRecordingMonitor(MockMonitor):
    """Pulumi's mock monitor, also recording the hooks bound to each registered resource."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.recording = mocks
        self.hooks: dict[str, dict[str, list[str]]] = {}

    def RegisterResource(self, request: Any) -> Any:
        bound = request.hooks
        self.hooks[request.name] = {
            phase: list(getattr(bound, phase))
            for phase in (
                "before_create",
                "after_create",
                "before_update",
                "after_update",
                "before_delete",
                "after_delete",
            )
            if list(getattr(bound, phase))
        }
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        for declared in self.recording.declared:
            if declared.name in self.hooks:
                declared.hooks = self.hooks[declared.name]
        return response


def stack_config(stack: str) -> dict[str, Any]:
    """The project keys of `Pulumi.<stack>.yaml`, without the project prefix."""
    data = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    prefix = f"{PROJECT}:"
    return {k[len(prefix) :]: v for k, v in data["config"].items() if k.startswith(prefix)}


def _as_pulumi_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def set_config(config: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
    """Hand config to the program the way the Pulumi CLI does (PULUMI_CONFIG, string values).

    `extra`: full `namespace:key` entries added (a None value removes the key)."""
    payload = {f"{PROJECT}:{k}": _as_pulumi_value(v) for k, v in config.items()}
    payload["gcp:project"] = "test-project"
    for key, value in (extra or {}).items():
        if value is None:
            payload.pop(key, None)
        else:
            payload[key] = _as_pulumi_value(value)
    os.environ["PULUMI_CONFIG"] = json.dumps(payload)
    pulumi.runtime.config.set_all_config({})


def render(
    config: dict[str, Any],
    stack: str = "test",
    mocks: RecordingMocks | None = None,
    extra: dict[str, Any] | None = None,
) -> Rendered:
    """Run the project's real `__main__.py` under mocks with `config` as the stack config."""
    set_config(config, extra)
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
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
    rendered = Rendered(resources=mocks.declared)

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> None:
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")

    program()
    return rendered


def run_hook(
    make_hook: Callable[[], Any],
    outputs: dict[str, Any],
    *,
    stack: str = "test",
    name: str = "serving",
    type_: str = "gcp:cloudrunv2/service:Service",
) -> BaseException | None:
    """Create a resource hook under mocks (hooks register themselves), call it as the engine
    does after a create, and return what it raised (None when it passed)."""
    caught: list[BaseException | None] = []
    pulumi.runtime.set_mocks(RecordingMocks(), project=PROJECT, stack=stack)

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def run() -> Any:
        hook = make_hook()
        args = pulumi.ResourceHookArgs(
            urn=f"urn:pulumi:{stack}::{PROJECT}::{type_}::{name}",
            id=f"{name}-id",
            name=name,
            type=type_,
            new_inputs={},
            new_outputs=outputs,
        )

        async def call() -> None:
            try:
                await hook(args)
                caught.append(None)
            except Exception as exc:
                caught.append(exc)

        return asyncio.ensure_future(call())

    run()
    return caught[0]
