"""vllm-only-through-pool: no Service, route or filter reaches vLLM around the pool."""

from __future__ import annotations

from typing import Any

import pytest

from policies.vllm_only_through_pool import vllm_only_through_pool
from serving.render import gke
from tests.policies._gke_stack import add, find, messages, resources


def service(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "vllm-direct", "namespace": "gemma4"},
        "spec": {
            "selector": dict(gke.POOL_LABELS),
            "ports": [{"port": 80, "targetPort": "http"}],
            **spec,
        },
    }


@pytest.mark.parametrize("variant", ["gke-l4", "gke-tpu-v6e", "gke-l4-public-spot"])
def test_the_shipped_stacks_pass(variant: str) -> None:
    assert messages(vllm_only_through_pool, resources(variant)) == []


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"type": "NodePort"}, "NodePort"),
        ({}, "ClusterIP"),
        ({"type": "ClusterIP", "externalIPs": ["203.0.113.9"]}, "externalIPs"),
        ({"type": "LoadBalancer"}, "LoadBalancer"),
        ({"clusterIP": "None"}, "ClusterIP"),  # headless
        (
            {"selector": {"app.kubernetes.io/name": "vllm"}},
            "selects the vLLM",
        ),  # a subset of labels
    ],
)
def test_a_service_selecting_vllm_is_refused(spec: dict[str, Any], words: str) -> None:
    found = messages(vllm_only_through_pool, add(resources(), service(**spec)))
    assert any(words in m and "around the" in m for m in found), found


def test_a_service_of_other_pods_passes() -> None:
    other = service(selector={"app": "something-else"}, type="NodePort")
    assert messages(vllm_only_through_pool, add(resources(), other)) == []


def test_manual_endpoints_beside_vllm_are_refused() -> None:
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "x", "namespace": "gemma4"},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.8.0.5"]}],
    }
    assert any(
        "manual endpoints" in m for m in messages(vllm_only_through_pool, add(resources(), slice_))
    )


def route_rule(found: list[Any]) -> dict[str, Any]:
    rule: dict[str, Any] = find(found, "HTTPRoute")["spec"]["rules"][0]
    return rule


def test_a_route_to_a_service_of_vllm_is_refused() -> None:
    found = add(resources(), service())
    route_rule(found)["backendRefs"] = [
        {"name": "vllm-direct", "port": 80}
    ]  # kind defaults to Service
    assert any("selects the vLLM Pods" in m for m in messages(vllm_only_through_pool, found))


@pytest.mark.parametrize("level", ["rule", "backend"])
def test_a_mirror_filter_is_refused(level: str) -> None:
    found = resources()
    mirror = {
        "type": "RequestMirror",
        "requestMirror": {"backendRef": {"name": "collector", "port": 80}},
    }
    rule = route_rule(found)
    if level == "rule":
        rule["filters"] = [mirror]
    else:
        rule["backendRefs"][0]["filters"] = [mirror]
    assert any(
        "RequestMirror" in m and "Authorization" in m
        for m in messages(vllm_only_through_pool, found)
    )


def test_an_extension_filter_is_refused() -> None:
    found = resources()
    route_rule(found)["filters"] = [
        {"type": "ExtensionRef", "extensionRef": {"group": "x", "kind": "Y", "name": "z"}}
    ]
    assert any("ExtensionRef" in m for m in messages(vllm_only_through_pool, found))


@pytest.mark.parametrize("kind", ["GRPCRoute", "TCPRoute", "TLSRoute"])
def test_a_non_http_route_to_the_pool_or_vllm_is_refused(kind: str) -> None:
    found = add(resources(), service())
    api = (
        "gateway.networking.k8s.io/v1"
        if kind == "GRPCRoute"
        else "gateway.networking.k8s.io/v1alpha2"
    )
    add(
        found,
        {
            "apiVersion": api,
            "kind": kind,
            "metadata": {"name": "side", "namespace": "gemma4"},
            "spec": {
                "parentRefs": [{"name": gke.GATEWAY_NAME}],
                "rules": [
                    {"backendRefs": [{"name": "vllm-direct", "port": 80}]},
                    {
                        "backendRefs": [
                            {
                                "group": "inference.networking.k8s.io",
                                "kind": "InferencePool",
                                "name": gke.POOL_NAME,
                            }
                        ]
                    },
                ],
            },
        },
    )
    found_messages = messages(vllm_only_through_pool, found)
    assert any(kind in m and "selects the vLLM Pods" in m for m in found_messages)
    assert any(kind in m and "outside HTTP" in m for m in found_messages)
