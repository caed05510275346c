"""The mock harness lives in the package (`preview.harness`, used by `gemma4 preview`); the
tests import it from here, with :func:`run_hook`, which only the tests need."""

import asyncio
from collections.abc import Callable
from typing import Any

import pulumi

from preview.harness import PROJECT, ROOT, RecordingMocks, Rendered, render, stack_config

__all__ = ["ROOT", "RecordingMocks", "Rendered", "render", "run_hook", "stack_config"]


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
