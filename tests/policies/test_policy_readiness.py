"""vllm-readiness-health: ready only when vLLM's own /health answers, at vLLM's port."""

from __future__ import annotations

from typing import Any

import pytest

from policies.vllm_readiness_health import vllm_readiness_health
from tests.contracts import gke_fixtures as g
from tests.policies._fixtures import violations

DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def with_probe(probe: dict[str, Any] | None) -> dict[str, Any]:
    d = g.vllm_deployment("l4")
    c = d["spec"]["template"]["spec"]["containers"][0]
    if probe is None:
        del c["readinessProbe"]
    else:
        c["readinessProbe"] = probe
    return d


def test_the_fixture_and_shipped_pods_pass() -> None:
    assert violations(vllm_readiness_health, DEPLOYMENT, g.vllm_deployment("l4")) == []
    assert violations(vllm_readiness_health, DEPLOYMENT, g.vllm_deployment("tpu-v6e")) == []


@pytest.mark.parametrize(
    ("probe", "words"),
    [
        (None, "no readinessProbe"),
        ({"httpGet": {"path": "/metrics", "port": 8000}}, "'/metrics'"),
        ({"httpGet": {"path": "/health/", "port": 8000}}, "'/health/'"),
        ({"httpGet": {"path": "/v1/models", "port": 8000}}, "'/v1/models'"),
        ({"httpGet": {"port": 8000}}, "None"),
        ({"httpGet": {"path": "/health", "port": 9090}}, "port 9090"),
        ({"httpGet": {"path": "/health", "port": "metrics"}}, "port 'metrics'"),
        ({"httpGet": {"path": "/health", "port": 8000, "scheme": "HTTPS"}}, "scheme 'HTTPS'"),
        ({"httpGet": {"path": "/health", "port": 8000, "host": "10.0.0.9"}}, "host '10.0.0.9'"),
        ({"tcpSocket": {"port": 8000}}, "tcpSocket"),
        ({"grpc": {"port": 8000}}, "grpc"),
    ],
)
def test_anything_but_health_at_vllms_port_is_refused(
    probe: dict[str, Any] | None, words: str
) -> None:
    (message,) = violations(vllm_readiness_health, DEPLOYMENT, with_probe(probe))
    assert words in message and "runs vLLM" in message


@pytest.mark.parametrize("port", [8000, "8000", "http"])
def test_health_by_number_string_or_named_port_passes(port: Any) -> None:
    probe = {"httpGet": {"path": "/health", "port": port, "scheme": "HTTP"}}
    assert violations(vllm_readiness_health, DEPLOYMENT, with_probe(probe)) == []


def test_the_port_is_vllms_own_port() -> None:
    d = with_probe({"httpGet": {"path": "/health", "port": 8000}})
    c = d["spec"]["template"]["spec"]["containers"][0]
    c["args"] = [a for a in c["args"] if not a.startswith("--port")] + ["--port=8080"]
    c["ports"] = [{"name": "http", "containerPort": 8080}]
    (message,) = violations(vllm_readiness_health, DEPLOYMENT, d)
    assert "not vLLM's port 8080" in message
