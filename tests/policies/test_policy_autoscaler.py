"""autoscaler-vllm-metrics and max-replicas-node-pool on near variants of the shipped GKE
stacks (rendered under mocks)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.autoscaler_vllm_metrics import autoscaler_vllm_metrics
from policies.max_replicas_node_pool import max_replicas_node_pool
from tests.policies._gke_stack import find, messages, resources

NODE_POOL = "gcp:container/nodePool:NodePool"


def pods_metric(name: str) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": "4"}},
    }


def with_metrics(variant: str, metrics: list[dict[str, Any]] | None) -> list[Any]:
    found = resources(variant)
    spec = find(found, "HorizontalPodAutoscaler")["spec"]
    if metrics is None:
        spec.pop("metrics")
    else:
        spec["metrics"] = metrics
    return found


@pytest.mark.parametrize("variant", ["gke-l4", "gke-tpu-v6e", "gke-l4-public-spot"])
def test_the_shipped_autoscalers_pass(variant: str) -> None:
    assert messages(autoscaler_vllm_metrics, resources(variant)) == []
    assert messages(max_replicas_node_pool, resources(variant)) == []


@pytest.mark.parametrize("variant", ["gke-l4", "gke-tpu-v6e"])
@pytest.mark.parametrize(
    ("metric", "words"),
    [
        (
            pods_metric("prometheus.googleapis.com|vllm:num_requests_waiting_total|gauge"),
            "not a metric",
        ),
        (pods_metric("prometheus.googleapis.com|vllm:gpu_cache_usage_perc|gauge"), "not a metric"),
        (pods_metric("vllm:gpu_cache_usage_perc"), "not a metric"),
        (
            pods_metric("prometheus.googleapis.com|vllm:num_requests_waiting|counter"),
            "as a counter",
        ),
        (pods_metric("prometheus.googleapis.com|vllm:request_success_total|counter"), "a counter"),
        (
            pods_metric("prometheus.googleapis.com|vllm:e2e_request_latency_seconds|histogram"),
            "a histogram",
        ),
        (
            {
                "type": "External",
                "external": {
                    "metric": {"name": "prometheus.googleapis.com|vllm:num_requests_waitin|gauge"},
                    "target": {"type": "Value", "value": "4"},
                },
            },
            "not a metric",
        ),
        (
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 60},
                },
            },
            "Resource 'cpu'",
        ),
        (
            {
                "type": "ContainerResource",
                "containerResource": {
                    "name": "memory",
                    "container": "vllm",
                    "target": {"type": "Utilization", "averageUtilization": 60},
                },
            },
            "ContainerResource 'memory'",
        ),
    ],
)
def test_a_metric_vllm_does_not_export_as_a_gauge_is_refused(
    variant: str, metric: dict[str, Any], words: str
) -> None:
    found = messages(autoscaler_vllm_metrics, with_metrics(variant, [metric]))
    assert len(found) == 1 and words in found[0], found


@pytest.mark.parametrize(
    "name",
    [
        "prometheus.googleapis.com|vllm:num_requests_running|gauge",
        "prometheus.googleapis.com|vllm:kv_cache_usage_perc|gauge",
        "vllm:num_requests_waiting",
    ],
)
def test_vllm_gauges_pass(name: str) -> None:
    assert messages(autoscaler_vllm_metrics, with_metrics("gke-l4", [pods_metric(name)])) == []


def test_no_metrics_means_cpu_and_is_refused() -> None:
    (message,) = messages(autoscaler_vllm_metrics, with_metrics("gke-l4", None))
    assert "80% CPU" in message


def test_the_autoscaler_of_another_workload_is_not_judged() -> None:
    found = with_metrics("gke-l4", [pods_metric("nonsense")])
    find(found, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]["name"] = "vllm-epp"
    assert messages(autoscaler_vllm_metrics, found) == []


# --- maxReplicas within the node pool ------------------------------------------------------


def accelerator_pool(found: list[Any]) -> dict[str, Any]:
    (props,) = [p for t, p, n in found if t == NODE_POOL and n.endswith("accelerators")]
    pool: dict[str, Any] = props
    return pool


@pytest.mark.parametrize("variant", ["gke-l4", "gke-tpu-v6e"])
def test_max_replicas_above_the_pool_is_refused(variant: str) -> None:
    found = resources(variant)
    find(found, "HorizontalPodAutoscaler")["spec"]["maxReplicas"] = 40
    (message,) = messages(max_replicas_node_pool, found)
    assert "maxReplicas 40 (+1 during a rolling update)" in message
    assert "5 vLLM Pods" in message and "totalMaxNodeCount" in message


def test_the_surge_counts() -> None:
    found = resources("gke-l4")
    find(found, "HorizontalPodAutoscaler")["spec"]["maxReplicas"] = 5  # + 1 surge > 5 nodes
    assert messages(max_replicas_node_pool, found)


@pytest.mark.parametrize(
    ("autoscaling", "locations", "fits"),
    [
        ({"maxNodeCount": 2}, ["us-east4-a"], False),  # 2 nodes
        ({"maxNodeCount": 3}, ["us-east4-a", "us-east4-b"], True),  # 6 nodes
        (None, ["us-east4-a"], False),  # no autoscaling: initialNodeCount/nodeCount
    ],
)
def test_per_zone_and_fixed_pool_sizes(
    autoscaling: dict[str, Any] | None, locations: list[str], fits: bool
) -> None:
    found = resources("gke-l4")
    pool = accelerator_pool(found)
    pool.pop("autoscaling")
    if autoscaling is not None:
        pool["autoscaling"] = autoscaling
    else:
        pool["nodeCount"] = 1
    pool["nodeLocations"] = locations
    assert (messages(max_replicas_node_pool, found) == []) == fits
