"""vllm-port-probed: Cloud Run probes and serves the port vLLM listens on, on every interface."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UNKNOWN_OBJECT_VALUE, unknown_checking_proxy

from policies._resources import V1_SERVICE, WORKER_POOL
from policies.vllm_port_probed import DEFAULT_CONTAINER_PORT, vllm_port_probed
from policies.vllm_server_readable import vllm_server_readable
from serving.launch.vllm_args import DEFAULT_PORT
from tests.policies._fixtures import (
    JOB,
    SERVICE,
    STACKS,
    TPU_DYNAMIC,
    container,
    edit_args,
    rendered,
    service,
    violations,
)


@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_listen_where_cloud_run_probes(stack: str) -> None:
    assert violations(vllm_port_probed, SERVICE, service(stack)) == []


@pytest.mark.parametrize("port", ["9000", "8000", "8081"])
def test_another_port_is_refused(port: str) -> None:
    props = edit_args(service("l4"), set_={"port": port})
    found = violations(vllm_port_probed, SERVICE, props)
    assert any(f"listens on --port={port}" in m and "container port 8080" in m for m in found)
    # both probes name 8080 and miss the server
    assert sum("startupProbe.httpGet reaches port 8080" in m for m in found) == 1
    assert sum("livenessProbe.httpGet reaches port 8080" in m for m in found) == 1


def test_a_left_out_port_is_vllms_default_not_cloud_runs() -> None:
    assert DEFAULT_PORT == 8000
    props = edit_args(service("l4"), drop=("port",))
    found = violations(vllm_port_probed, SERVICE, props)
    assert any("vLLM's default port 8000" in m for m in found)


def test_the_container_port_and_probes_may_move_together() -> None:
    props = edit_args(service("l4"), set_={"port": "9000"})
    c = container(props)
    c["ports"] = {"containerPort": 9000, "name": "http1"}
    for probe in ("startupProbe", "livenessProbe"):
        del c[probe]["httpGet"]["port"]  # an omitted probe port is the container port
    assert violations(vllm_port_probed, SERVICE, props) == []


def test_without_a_container_port_cloud_run_uses_8080() -> None:
    assert DEFAULT_CONTAINER_PORT == 8080
    props = service("l4")
    del container(props)["ports"]
    assert violations(vllm_port_probed, SERVICE, props) == []
    props = edit_args(props, set_={"port": "9000"})
    assert any(
        "Cloud Run's default container port 8080" in m
        for m in violations(vllm_port_probed, SERVICE, props)
    )


@pytest.mark.parametrize("action", ["tcpSocket", "grpc"])
def test_every_probe_kind_is_compared(action: str) -> None:
    props = service("l4")
    c = container(props)
    c["startupProbe"] = {action: {"port": 8000}}
    (message,) = violations(vllm_port_probed, SERVICE, props)
    assert f"startupProbe.{action} reaches port 8000" in message


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "10.0.0.5", "127.0.0.2"])
def test_a_host_that_is_not_every_interface_is_refused(host: str) -> None:
    props = edit_args(service("l4"), set_={"host": host})
    (message,) = violations(vllm_port_probed, SERVICE, props)
    assert f"--host={host}, not on every interface" in message


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_every_interface_is_accepted(host: str) -> None:
    props = edit_args(service("l4"), set_={"host": host})
    assert violations(vllm_port_probed, SERVICE, props) == []
    props = edit_args(service("l4"), drop=("host",))
    assert violations(vllm_port_probed, SERVICE, props) == []


def _job(props: dict[str, Any]) -> dict[str, Any]:
    template = dict(props["template"])
    return {"template": {"template": template}}


def test_jobs_and_worker_pools_are_held_to_their_probes() -> None:
    props = edit_args(service("l4"), set_={"port": "9000"})
    job = _job(props)
    assert any("reaches port 8080" in m for m in violations(vllm_port_probed, JOB, job))
    found = violations(vllm_port_probed, WORKER_POOL, props)
    assert found and all("reaches port 8080" in m for m in found)
    for probe in ("startupProbe", "livenessProbe"):
        del container(props)[probe]
    # no probe and no traffic: nothing reaches the port
    assert violations(vllm_port_probed, WORKER_POOL, props) == []


def test_v1_services_are_refused_by_name() -> None:
    c = dict(container(service("l4")))
    c["command"] = c.pop("commands", None)
    v1 = {"template": {"spec": {"containers": [c]}}}
    (message,) = violations(vllm_server_readable, V1_SERVICE, v1)
    assert "a Cloud Run v1 service, which the package never renders" in message


def _tpu_node(script_edit: tuple[str, str] = ("", ""), **props: Any) -> dict[str, Any]:
    node = dict(rendered("tpu-v6e1").one(TPU_DYNAMIC).inputs)
    launch = node["metadata"]["vllm-launch"]
    node["metadata"] = {
        **node["metadata"],
        "vllm-launch": launch.replace(*script_edit) if script_edit[0] else launch,
    }
    node.update(props)
    return node


def test_the_tpu_node_serves_on_its_serving_port() -> None:
    assert violations(vllm_port_probed, TPU_DYNAMIC, _tpu_node()) == []


@pytest.mark.parametrize(
    ("edit", "props", "expected"),
    [
        (("--port=8000", "--port=9000"), {}, "listens on --port=9000"),
        (("", ""), {"servingPort": 8080}, "servingPort (the port of its endpoint URL"),
        ((',\n  "--port=8000"', ""), {"servingPort": 8080}, "vLLM's default port 8000"),
        (("--host=0.0.0.0", "--host=127.0.0.1"), {}, "--host=127.0.0.1, not on every interface"),
        (("--host=0.0.0.0", "--host=localhost"), {}, "--host=localhost, not on every interface"),
    ],
)
def test_the_tpu_node_port_and_host_are_compared(
    edit: tuple[str, str], props: dict[str, Any], expected: str
) -> None:
    (message,) = violations(vllm_port_probed, TPU_DYNAMIC, _tpu_node(edit, **props))
    assert expected in message


def test_a_container_port_unknown_at_preview_fails_closed() -> None:
    props = service("l4")
    container(props)["ports"] = {"containerPort": UNKNOWN_NUMBER_VALUE, "name": "http1"}
    (message,) = violations(vllm_port_probed, SERVICE, unknown_checking_proxy(props))
    assert "container port is not known at preview" in message


@pytest.mark.parametrize("where", ["port", "probe"])
def test_a_probe_unknown_at_preview_fails_closed(where: str) -> None:
    props = service("l4")
    if where == "port":
        container(props)["startupProbe"]["httpGet"]["port"] = UNKNOWN_NUMBER_VALUE
    else:
        container(props)["startupProbe"] = UNKNOWN_OBJECT_VALUE
    (message,) = violations(vllm_port_probed, SERVICE, unknown_checking_proxy(props))
    assert "startupProbe" in message and "reaches port (unknown at preview)" in message


def test_containers_sharing_a_name_fail_closed() -> None:
    props = service("l4")
    twin = dict(container(props))
    twin["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    props["template"]["containers"].append(twin)
    found = violations(vllm_port_probed, SERVICE, props)
    assert found and all("cannot be told apart" in m for m in found)


# --- GKE: the Pod's probes name their own port (a number or one of the container's names) --


def _gke(kind: str = "l4") -> tuple[str, dict[str, Any]]:
    from tests.policies.test_policy_gke import resource_type, vllm

    deployment = vllm(kind)
    return resource_type(deployment), deployment


@pytest.mark.parametrize("kind", ["l4", "tpu-v6e"])
def test_gke_pods_are_probed_where_vllm_listens(kind: str) -> None:
    type_, deployment = _gke(kind)
    assert violations(vllm_port_probed, type_, deployment) == []


@pytest.mark.parametrize(
    ("port", "probe_port", "expected"),
    [
        ("9000", 8000, "reaches port 8000, but vLLM listens on --port=9000"),
        (None, 9000, "reaches port 9000, but vLLM listens on vLLM's default port 8000"),
        ("8000", "metrics", "reaches port 'metrics' (a name none of its ports has)"),
    ],
)
def test_gke_probe_ports_are_compared(port: str | None, probe_port: Any, expected: str) -> None:
    from tests.policies.test_policy_gke import container as pod_container

    type_, deployment = _gke()
    c = pod_container(deployment)
    c["args"] = [a for a in c["args"] if not a.startswith("--port=")]
    if port is not None:
        c["args"].append(f"--port={port}")
    c["startupProbe"]["httpGet"]["port"] = probe_port
    found = violations(vllm_port_probed, type_, deployment)
    assert any(expected in m and "startupProbe.httpGet" in m for m in found), found


def test_gke_named_probe_port_resolves_through_the_container() -> None:
    from tests.policies.test_policy_gke import container as pod_container

    type_, deployment = _gke()
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        pod_container(deployment)[probe]["httpGet"]["port"] = "http"
    assert violations(vllm_port_probed, type_, deployment) == []


def test_gke_loopback_host_is_refused() -> None:
    from tests.policies.test_policy_gke import set_arg

    type_, deployment = _gke()
    set_arg(deployment, "host", "127.0.0.1")
    (message,) = violations(vllm_port_probed, type_, deployment)
    assert "--host=127.0.0.1, not on every interface" in message


@pytest.mark.parametrize("port", ["08080", "+8080", "80_80", " 8080"])
def test_the_port_is_read_as_vllms_int_reads_it(port: str) -> None:
    """vLLM's --port is argparse `type=int`: Python's int() reads these as 8080."""
    assert int(port) == 8080
    props = edit_args(service("l4"), set_={"port": port})
    assert violations(vllm_port_probed, SERVICE, props) == []


@pytest.mark.parametrize("port", ["8080.0", "0x1f90", "0", "65536", "-8080"])
def test_a_port_vllm_cannot_listen_on_is_refused(port: str) -> None:
    props = edit_args(service("l4"), set_={"port": port})
    (message,) = violations(vllm_port_probed, SERVICE, props)
    assert "is not a port number; set --port to 8080" in message


@pytest.mark.parametrize("host", ["0:0:0:0:0:0:0:0", "::0", "", "None"])
def test_every_spelling_of_every_interface_is_accepted(host: str) -> None:
    props = edit_args(service("l4"), set_={"host": host})
    assert violations(vllm_port_probed, SERVICE, props) == []


@pytest.mark.parametrize("host", ["0.0.0.0 ", "[::]", "0", "::ffff:0.0.0.0", "*"])
def test_a_host_vllm_would_not_bind_to_every_interface_is_refused(host: str) -> None:
    props = edit_args(service("l4"), set_={"host": host})
    (message,) = violations(vllm_port_probed, SERVICE, props)
    assert "not on every interface" in message


def _behind_a_proxy(props: dict[str, Any], probe_port: int | None) -> dict[str, Any]:
    """vLLM on 8000 as a sidecar (no ports) behind an ingress container that declares 8080."""
    props = edit_args(props, set_={"port": "8000"})
    c = container(props)
    del c["ports"]
    for probe in ("startupProbe", "livenessProbe"):
        if probe_port is None:
            c[probe]["httpGet"].pop("port", None)
        else:
            c[probe]["httpGet"]["port"] = probe_port
    ingress = {
        "name": "proxy",
        "image": "us-docker.pkg.dev/p/r/proxy@sha256:" + "a" * 64,
        "ports": {"name": "http1", "containerPort": 8080},
    }
    props["template"]["containers"].insert(0, ingress)
    return props


def test_a_sidecar_behind_an_ingress_container_is_held_to_its_probes_only() -> None:
    # Cloud Run sends requests to the container that declares ports; vLLM beside it gets none.
    assert violations(vllm_port_probed, SERVICE, _behind_a_proxy(service("l4"), 8000)) == []
    # Its probes must still reach vLLM's port, and must name one (no container port to omit).
    wrong = violations(vllm_port_probed, SERVICE, _behind_a_proxy(service("l4"), 8080))
    assert wrong and all("reaches port 8080" in m for m in wrong)
    unnamed = violations(vllm_port_probed, SERVICE, _behind_a_proxy(service("l4"), None))
    assert unnamed and all("a sidecar's probe must name one" in m for m in unnamed)
    # The only container still serves the requests, ports or not (Cloud Run's 8080).
    alone = edit_args(service("l4"), set_={"port": "8000"})
    del container(alone)["ports"]
    assert any("8080" in m for m in violations(vllm_port_probed, SERVICE, alone))


def test_a_sidecar_is_told_from_the_ingress_only_when_the_ports_are_known() -> None:
    # `ports: []` declares no port, as an absent list does.
    props = _behind_a_proxy(service("l4"), 8000)
    (vllm,) = [c for c in props["template"]["containers"] if c["name"] == "vllm"]
    vllm["ports"] = []
    assert violations(vllm_port_probed, SERVICE, props) == []
    # Another container's ports unknown at preview: which one is the ingress cannot be told.
    props = _behind_a_proxy(service("l4"), 8000)
    props["template"]["containers"][0]["ports"] = UNKNOWN_OBJECT_VALUE
    found = violations(vllm_port_probed, SERVICE, unknown_checking_proxy(props))
    assert any("which container receives Cloud Run's requests cannot be told" in m for m in found)
