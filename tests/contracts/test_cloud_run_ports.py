"""Which port Cloud Run probes and serves, in Google's words (the run discovery documents).

`vllm-port-probed` encodes two defaults: a probe without a port reaches the container port,
and a container without a port is served on 8080. Both are quoted from the discovery
documents google-api-python-client bundles; if a new document changes the sentence, this
test fails and the rule must be re-read.
"""

from __future__ import annotations

import pytest

from policies.vllm_port_probed import DEFAULT_CONTAINER_PORT, PROBE_ACTIONS, container_port
from tests.support import discovery

RUN_V2 = discovery.load("run", "v2")["schemas"]
RUN_V1 = discovery.load("run", "v1")["schemas"]

PROBE_DEFAULT = (
    "If not specified, defaults to the exposed port of the container, which is the value of "
    "container.ports[0].containerPort."
)
ACTION_SCHEMAS = {
    "httpGet": "GoogleCloudRunV2HTTPGetAction",
    "tcpSocket": "GoogleCloudRunV2TCPSocketAction",
    "grpc": "GoogleCloudRunV2GRPCAction",
}


@pytest.mark.parametrize("action", PROBE_ACTIONS)
def test_a_probe_without_a_port_reaches_the_container_port(action: str) -> None:
    schema = ACTION_SCHEMAS[action]
    assert set(RUN_V2["GoogleCloudRunV2Probe"]["properties"]) >= set(PROBE_ACTIONS)
    assert PROBE_DEFAULT in RUN_V2[schema]["properties"]["port"]["description"]


def test_a_container_without_a_port_is_served_on_8080() -> None:
    text = RUN_V1["ContainerPort"]["properties"]["containerPort"]["description"]
    assert "If not present, it will default to port 8080." in text
    assert DEFAULT_CONTAINER_PORT == 8080
    assert container_port({})[0] == DEFAULT_CONTAINER_PORT
    assert container_port({"ports": {"containerPort": 9000}})[0] == 9000
    assert container_port({"ports": [{"containerPort": 9000}]})[0] == 9000


def test_the_server_must_listen_on_every_interface() -> None:
    text = RUN_V2["GoogleCloudRunV2Container"]["properties"]["ports"]["description"]
    assert "must be listening on all interfaces (0.0.0.0) within the container" in text
