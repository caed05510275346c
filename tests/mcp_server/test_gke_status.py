"""service_status on a GKE stack: the vLLM replicas and their state, read from the Kubernetes
Engine API (the fake checks each request against container.v1's discovery document and each
Cluster it answers against the document's schema) and from the cluster's Kubernetes API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_server import _deployments as d
from mcp_server.google_apis import ApiUrls, GoogleApiError, GoogleApis
from mcp_server.tools import ToolFailure, Tools
from serving.render import gke
from tests.support.fake_google import FakeGoogle

PROJECT = "my-project"
TOKEN = "ya29.fake-gke-token"
CLUSTER = "gemma-gke-l4-gke-cluster-1234"
NS = "/namespaces/gemma4"


def pod(name: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": dict(gke.POOL_LABELS)},
        "spec": {"nodeName": status.pop("node", None)},
        "status": status,
    }


@pytest.fixture
def fake() -> Iterator[FakeGoogle]:
    google = FakeGoogle(access_token=TOKEN).start()
    google.clusters[f"projects/{PROJECT}/locations/us-east4/clusters/{CLUSTER}"] = {
        "name": CLUSTER,
        "status": "RUNNING",
        "endpoint": "203.0.113.10",
        "masterAuth": {"clusterCaCertificate": "bW9jaw=="},
    }
    google.kubernetes.update(
        {
            f"/apis/apps/v1{NS}/deployments/vllm": {
                "spec": {"replicas": 2},
                "status": {"readyReplicas": 1, "updatedReplicas": 2},
            },
            f"/apis/autoscaling/v2{NS}/horizontalpodautoscalers/vllm": {
                "spec": {"minReplicas": 1, "maxReplicas": 4},
                "status": {"desiredReplicas": 2},
            },
            f"/api/v1{NS}/pods/vllm-a": pod(
                "vllm-a",
                node="gke-node-1",
                phase="Running",
                conditions=[{"type": "Ready", "status": "True"}],
                containerStatuses=[{"restartCount": 1, "state": {"running": {}}}],
            ),
            f"/api/v1{NS}/pods/vllm-b": pod(
                "vllm-b",
                phase="Pending",
                conditions=[
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
                    }
                ],
            ),
            f"/api/v1{NS}/pods/other": {
                "metadata": {"name": "other", "labels": {"app": "else"}},
                "status": {},
            },
        }
    )
    yield google
    google.stop()


def tools(fake: FakeGoogle, tmp_path: Path, outputs: dict[str, Any]) -> Tools:
    (tmp_path / "gke-l4.json").write_text(json.dumps(outputs))
    deployments = d.Deployments(("gke-l4",), outputs_dir=tmp_path, project=PROJECT)
    apis = GoogleApis(
        lambda: lambda: TOKEN,
        ApiUrls(container=fake.url, kubernetes=f"{fake.url}/k8s"),
    )
    return Tools(deployments, apis)


def test_replicas_and_their_state(fake: FakeGoogle, tmp_path: Path) -> None:
    result = asyncio.run(
        tools(fake, tmp_path, {"cluster_name": CLUSTER, "namespace": "gemma4"}).status("gke-l4")
    )
    assert result.platform == "gke" and result.gke is not None
    status = result.gke
    assert (status.cluster, status.location, status.cluster_status) == (
        CLUSTER,
        "us-east4",
        "RUNNING",
    )
    assert (status.desired_replicas, status.ready_replicas, status.updated_replicas) == (2, 1, 2)
    assert (status.autoscaler_min, status.autoscaler_max, status.autoscaler_desired) == (1, 4, 2)
    by_name = {r.pod: r for r in status.replicas}
    assert set(by_name) == {"vllm-a", "vllm-b"}  # the pool's Pods only
    assert by_name["vllm-a"].ready and by_name["vllm-a"].restarts == 1
    assert by_name["vllm-a"].node == "gke-node-1" and by_name["vllm-a"].detail is None
    assert not by_name["vllm-b"].ready
    assert by_name["vllm-b"].detail == (
        "Unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    )
    # Every Google request passed container.v1's discovery document; only GETs were made.
    google = [r for r in fake.requests if r.method_id != "kubernetes"]
    assert [r.method_id for r in google] == ["container.projects.locations.clusters.get"]
    assert all(r.errors == [] for r in fake.requests)


def test_not_deployed_and_refused_calls_name_the_cause(fake: FakeGoogle, tmp_path: Path) -> None:
    with pytest.raises(ToolFailure, match="no cluster_name output"):
        asyncio.run(tools(fake, tmp_path, {}).status("gke-l4"))
    with pytest.raises(GoogleApiError, match="404"):
        asyncio.run(tools(fake, tmp_path, {"cluster_name": "gone"}).status("gke-l4"))
    fake.kubernetes.pop(f"/apis/apps/v1{NS}/deployments/vllm")
    with pytest.raises(GoogleApiError, match="deployments/vllm from the cluster: HTTP 404"):
        asyncio.run(tools(fake, tmp_path, {"cluster_name": CLUSTER}).status("gke-l4"))


def test_a_cluster_without_endpoint_is_not_called(fake: FakeGoogle, tmp_path: Path) -> None:
    apis = GoogleApis(lambda: lambda: TOKEN, ApiUrls(container=fake.url))
    with pytest.raises(Exception, match="no endpoint or CA certificate"):
        asyncio.run(apis.kubernetes_get({"status": "PROVISIONING"}, "/api/v1/pods"))
