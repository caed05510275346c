"""no-host-network on every kind that holds a Pod spec, and its near variants."""

from __future__ import annotations

from typing import Any

import pytest

from policies.no_host_network import no_host_network
from policies.vllm_server_readable import vllm_server_readable
from tests.contracts import gke_fixtures as g
from tests.policies._fixtures import violations

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"


def vllm(kind: str = "l4") -> dict[str, Any]:
    return g.vllm_deployment(kind)


def spec(d: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = d["spec"]["template"]["spec"]
    return found


def as_kind(kind: str, d: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    template = d["spec"]["template"]
    if kind == "Pod":
        return "kubernetes:core/v1:Pod", dict(template)
    if kind == "CronJob":
        return "kubernetes:batch/v1:CronJob", {
            "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}}
        }
    if kind == "PodTemplate":
        return "kubernetes:core/v1:PodTemplate", {"template": template}
    if kind == "Job":
        return "kubernetes:batch/v1:Job", {"spec": {"template": template}}
    return f"kubernetes:apps/v1:{kind}", d


def test_the_fixture_pods_pass() -> None:
    for kind in ("l4", "tpu-v6e"):
        assert violations(no_host_network, DEPLOYMENT, vllm(kind)) == []


@pytest.mark.parametrize(
    "kind",
    [
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "Job",
        "CronJob",
        "Pod",
        "PodTemplate",
    ],
)
@pytest.mark.parametrize("value", [True, "true", "True", 1, "yes"])
def test_host_network_is_refused_in_every_pod_running_kind(kind: str, value: Any) -> None:
    d = vllm()
    spec(d)["hostNetwork"] = value
    type_, props = as_kind(kind, d)
    (message,) = violations(no_host_network, type_, props)
    assert "hostNetwork" in message and "node's network" in message


@pytest.mark.parametrize("value", [False, "false", None])
def test_host_network_off_passes(value: Any) -> None:
    d = vllm()
    spec(d)["hostNetwork"] = value
    assert violations(no_host_network, DEPLOYMENT, d) == []


@pytest.mark.parametrize("where", ["containers", "initContainers"])
@pytest.mark.parametrize(
    "port",
    [
        {"containerPort": 8000, "hostPort": 8000},
        {"name": "http", "containerPort": 8000, "hostPort": "80"},
    ],
)
def test_a_host_port_on_any_container_is_refused(where: str, port: dict[str, Any]) -> None:
    d = vllm("tpu-v6e")
    sidecar = {"name": "side", "image": "busybox:1.36", "ports": [port]}
    if where == "containers":
        spec(d)["containers"][0]["ports"] = [port]
    else:
        spec(d)["initContainers"] = [sidecar]
    (message,) = violations(no_host_network, DEPLOYMENT, d)
    assert "hostPort" in message


def test_a_pod_without_accelerators_or_vllm_is_not_judged() -> None:
    picker = g.picker()[0]
    picker["spec"]["template"]["spec"]["hostNetwork"] = True
    assert violations(no_host_network, DEPLOYMENT, picker) == []


def test_a_leader_worker_set_with_host_network_is_refused() -> None:
    template = vllm()["spec"]["template"]
    template["spec"]["hostNetwork"] = True
    lws = {
        "metadata": {"name": "vllm", "namespace": g.NAMESPACE},
        "spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": template}},
    }
    (message,) = violations(no_host_network, LWS, lws)
    assert "spec.leaderWorkerTemplate.workerTemplate.spec.hostNetwork" in message
    # And the vLLM reader refuses the kind itself, whatever it holds.
    assert violations(vllm_server_readable, LWS, lws)
