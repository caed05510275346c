"""Every stack binds the post-deploy health check to its serving resource; the hook it builds
runs the checks and fails `pulumi up` with the reason."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from components.stack import post_deploy_binding
from endpoint.auth import AuthError, NoAuth, SecretManagerApiKeyAuth
from healthchecks.hook import HealthCheckFailedError
from serving.config.settings import load_settings
from tests.pulumi_harness import render, run_hook, stack_config
from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer

SERVING = {
    "l4": "gcp:cloudrunv2/service:Service",
    "rtx6000": "gcp:cloudrunv2/service:Service",
    "tpu-v6e1": "pulumi-python:dynamic/gemma4:TpuQueuedResource",
}


def reachable(stack: str) -> dict[str, Any]:
    """The stack's config, with a client range for the TPU (its port is closed otherwise)."""
    extra = {"sourceRanges": ["203.0.113.0/24"]} if stack.startswith("tpu") else {}
    return {**stack_config(stack), **extra}


@pytest.mark.parametrize("stack", sorted(SERVING))
def test_health_hook_is_bound_after_create_and_update(stack: str) -> None:
    rendered = render(reachable(stack), stack)
    hooks = [f"gemma-{stack}-health", f"gemma-{stack}-benchmark"]
    for resource in rendered.of_type(SERVING[stack]):
        # The benchmark runs only after the health check (hooks run in list order).
        assert resource.hooks == {"after_create": hooks, "after_update": hooks}
    others = [r for r in rendered.resources if r.type != SERVING[stack] and r.hooks]
    assert others == []


@pytest.mark.parametrize("stack", sorted(SERVING))
def test_health_hook_can_be_switched_off(stack: str) -> None:
    rendered = render({**reachable(stack), "healthCheck": False}, stack)
    for resource in rendered.of_type(SERVING[stack]):
        assert resource.hooks["after_create"] == [f"gemma-{stack}-benchmark"]
    both_off = {**reachable(stack), "healthCheck": False, "postDeployBenchmark": False}
    assert all(not r.hooks for r in render(both_off, stack).resources)


def call_stack_hook(stack: str, outputs: dict[str, Any], **config: Any) -> BaseException | None:
    """Build the stack's health hook as the program does and call it like the engine."""
    settings = load_settings({**stack_config(stack), "postDeployBenchmark": False, **config})
    url_key = "endpointUrl" if stack.startswith("tpu") else "uri"

    def make_hook() -> Any:
        binding = post_deploy_binding(settings, f"gemma-{stack}", NoAuth(), url_keys=(url_key,))
        assert binding is not None
        return (binding.after_create or [])[0]

    return run_hook(make_hook, outputs, stack=stack, type_=SERVING[stack])


@pytest.fixture
def server() -> Iterator[FakeVllmServer]:
    with FakeVllmServer(
        FakeVllmConfig(served_model_name="google/gemma-4-12B-it-qat-w4a16-ct", cold_start_503s=1)
    ) as fake:
        yield fake


def test_stack_hook_passes_when_the_model_serves(server: FakeVllmServer) -> None:
    assert call_stack_hook("l4", {"uri": server.url}, healthCheckDeadlineSeconds=30) is None
    assert "/v1/chat/completions" in [r.path for r in server.requests]


def test_stack_hook_fails_up_with_the_reason(server: FakeVllmServer) -> None:
    error = call_stack_hook(
        "rtx6000",
        {"uri": server.url},
        healthCheckDeadlineSeconds=30,
        servedModelName="another-model",
    )
    assert isinstance(error, HealthCheckFailedError)
    assert "does not exist" in str(error) and "models" in str(error)


def test_tpu_with_a_closed_port_binds_no_hook() -> None:
    rendered = render(stack_config("tpu-v6e1"), "tpu-v6e1")
    assert stack_config("tpu-v6e1")["sourceRanges"] == []
    assert all(not r.hooks for r in rendered.resources)


def test_tpu_hook_reads_the_endpoint_url_output() -> None:
    with FakeVllmServer(FakeVllmConfig(served_model_name="google/gemma-4-12B-it")) as fake:
        assert (
            call_stack_hook("tpu-v6e1", {"endpointUrl": fake.url}, healthCheckDeadlineSeconds=30)
            is None
        )


class _FakeSecretManager(BaseHTTPRequestHandler):
    secrets = {"vllm-api-key": "key-123"}

    def do_GET(self) -> None:
        name = self.path.split("/secrets/")[1].split("/")[0]
        if self.headers.get("Authorization") != "Bearer ya29.test" or name not in self.secrets:
            self.send_response(403 if name in self.secrets else 404)
            self.end_headers()
            return
        data = base64.b64encode(self.secrets[name].encode()).decode()
        body = json.dumps({"name": name, "payload": {"data": data}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def secret_manager() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FakeSecretManager)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_tpu_api_key_comes_from_secret_manager(secret_manager: str) -> None:
    auth = SecretManagerApiKeyAuth(
        "p", "vllm-api-key", access_token=lambda: "ya29.test", endpoint=secret_manager
    )
    assert auth.cached_headers() is None
    assert auth.headers() == {"Authorization": "Bearer key-123"}
    assert "key-123" not in auth.description


def test_missing_secret_is_a_clear_auth_error(secret_manager: str) -> None:
    auth = SecretManagerApiKeyAuth(
        "p", "nope", access_token=lambda: "ya29.test", endpoint=secret_manager
    )
    with pytest.raises(AuthError, match=r"HTTP 404.*roles/secretmanager.secretAccessor"):
        auth.headers()
