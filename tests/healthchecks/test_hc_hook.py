"""The Pulumi post-deploy hook: calling it runs the checks."""

from __future__ import annotations

import asyncio
from typing import Any

import pulumi
import pytest
from pulumi.runtime.mocks import MockMonitor

from endpoint.auth import GoogleIdTokenAuth, NoAuth
from healthchecks.checks import Backoff
from healthchecks.hook import HealthCheckFailedError, health_hook
from tests.healthchecks._helpers import MODEL, ServerFactory

SERVICE_TYPE = "gcp:cloudrunv2/service:Service"


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", {**args.inputs, "uri": "https://svc-abc.a.run.app"}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


class _HookMonitor(MockMonitor):
    """Records the hook names each registered resource is bound to."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.hooks: dict[str, Any] = {}

    def RegisterResource(self, request: Any) -> Any:
        if request.type != "pulumi:pulumi:Stack":
            self.hooks[request.name] = request.hooks
        return super().RegisterResource(request)  # type: ignore[no-untyped-call]


@pytest.fixture
def monitor() -> _HookMonitor:
    mocks = _Mocks()
    monitor = _HookMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="hc", stack="test", preview=False, monitor=monitor)
    return monitor


def _args(outputs: dict[str, Any]) -> pulumi.ResourceHookArgs:
    return pulumi.ResourceHookArgs(
        urn="urn:pulumi:test::hc::gcp:cloudrunv2/service:Service::svc",
        id="svc-id",
        name="svc",
        type=SERVICE_TYPE,
        new_inputs={},
        new_outputs=outputs,
    )


def _call_hook(outputs: dict[str, Any], **hook_kwargs: Any) -> BaseException | None:
    """Create the hook under the mocks (it registers itself) and call it as the engine would."""
    caught: list[BaseException | None] = []

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def run() -> Any:
        hook = health_hook("svc-health", served_model_name=MODEL, **hook_kwargs)

        async def call() -> None:
            try:
                result = hook(_args(outputs))
                assert asyncio.iscoroutine(result)
                await result
                caught.append(None)
            except Exception as exc:
                caught.append(exc)

        return asyncio.ensure_future(call())

    run()
    return caught[0]


FAST = {"deadline_s": 300.0, "auth": NoAuth(), "backoff": Backoff(initial_s=0.02, max_s=0.05)}
"""Short backoff; a deadline no test waits for (each ends at a verdict well before it)."""


def test_hook_passes_for_a_healthy_server(monitor: _HookMonitor, fake_vllm: ServerFactory) -> None:
    server = fake_vllm(cold_start_503s=2)
    assert _call_hook({"uri": server.url}, **FAST) is None
    assert [r.path for r in server.requests][:3] == ["/health"] * 3


def test_hook_accepts_url_output_and_auth_factory(
    monitor: _HookMonitor, fake_vllm: ServerFactory
) -> None:
    server = fake_vllm()
    seen: list[str] = []

    def factory(url: str) -> NoAuth:
        seen.append(url)
        return NoAuth()

    kwargs = {**FAST, "auth": factory}
    assert _call_hook({"url": server.url, "uri": "not a url"}, **kwargs) is None
    assert seen == [server.url]


def test_hook_fails_with_the_reason(monitor: _HookMonitor, fake_vllm: ServerFactory) -> None:
    server = fake_vllm(empty_completion=True)
    error = _call_hook({"uri": server.url}, **FAST)
    assert isinstance(error, HealthCheckFailedError)
    assert str(error).startswith(f"post-deploy health check of svc ({server.url}) failed: chat:")
    assert "empty completion" in str(error)
    assert error.report is not None and not error.report.ok


def test_hook_fails_on_missing_credentials(monitor: _HookMonitor, fake_vllm: ServerFactory) -> None:
    server = fake_vllm(api_key="t")

    def provider(audience: str) -> str:
        raise RuntimeError("no ADC")

    kwargs = {**FAST, "auth": lambda url: GoogleIdTokenAuth(url, token_provider=provider)}
    error = _call_hook({"uri": server.url}, **kwargs)
    assert isinstance(error, HealthCheckFailedError)
    assert "readiness: no credentials, request not sent: could not get an ID token: no ADC" in str(
        error
    )
    assert server.requests == []


def test_hook_fails_without_a_url(monitor: _HookMonitor) -> None:
    error = _call_hook({"name": "svc"}, **FAST)
    assert isinstance(error, HealthCheckFailedError)
    assert (
        str(error)
        == "health check of svc: no endpoint URL in the resource's outputs (looked for uri, url)"
    )


def test_hook_never_logs_a_reflected_token(
    monitor: _HookMonitor, fake_vllm: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "eyJhbGciOiJub25lIn0.eyJhdWQiOiJzdmMifQ.hook-reflected-sig-7781"
    server = fake_vllm(api_key="the-right-one", reflect_authorization=True)
    logged: list[str] = []
    monkeypatch.setattr(pulumi.log, "info", lambda msg, *a, **k: logged.append(str(msg)))
    kwargs = {
        **FAST,
        "auth": lambda url: GoogleIdTokenAuth(url, token_provider=lambda audience: token),
    }
    error = _call_hook({"uri": server.url}, **kwargs)
    assert isinstance(error, HealthCheckFailedError)
    assert "credentials rejected (HTTP 401)" in str(error)
    text = str(error) + "\n".join(logged) + error.report.failure_summary()  # type: ignore[union-attr]
    assert "hook-reflected-sig" not in text and "eyJhbGciOiJub25lIn0" not in text
