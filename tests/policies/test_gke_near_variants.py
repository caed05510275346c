"""Near variants of the rendered GKE stacks, each refused by the policy the threat model
(docs/threat-model.md, surface B) assigns it, through the whole pack: pulumi-kubernetes
`<Kind>Patch` resources read as the objects they change, the autoscaler's shapes that stop it
scaling, the hooks' endpoint, capabilities, credentials inside ConfigMap documents."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from pulumi_policy import ResourceValidationPolicy, StackValidationPolicy

from policies.registry import ALL
from tests.policies._fixtures import stack_violations, violations
from tests.policies._gke_stack import Resource, find, resources, vllm

KEY = "0123456789abcdef" * 4  # `openssl rand -hex 32`, the documented way to make the key
SECRETS, READABLE, SCALER = (
    "no-plaintext-secrets",
    "vllm-server-readable",
    "autoscaler-vllm-metrics",
)


def verdicts(found: list[Resource]) -> dict[str, list[str]]:
    """Every policy of the pack that refuses the stack, with its messages."""
    out: dict[str, list[str]] = {}
    for policy in ALL:
        if isinstance(policy, StackValidationPolicy):
            messages = [m for ms in stack_violations(policy, found).values() for m in ms]
        elif isinstance(policy, ResourceValidationPolicy):
            messages = [m for t, p, n in found for m in violations(policy, t, p, name=n)]
        else:
            raise AssertionError(f"a policy of neither kind: {policy.name}")
        if messages:
            out[policy.name] = messages
    return out


def added(found: list[Resource], token: str, props: dict[str, Any]) -> list[Resource]:
    return [*found, (token, props, f"extra-{len(found)}")]


def container(found: list[Resource]) -> dict[str, Any]:
    first: dict[str, Any] = vllm(found)["spec"]["template"]["spec"]["containers"][0]
    return first


def gateway_patch(f: list[Resource]) -> list[Resource]:
    gateway = find(f, "Gateway")  # no class: a patch sets only what it changes
    listeners = [{"name": "http", "protocol": "HTTP", "port": 80}]
    patch = {"metadata": copy.deepcopy(gateway["metadata"]), "spec": {"listeners": listeners}}
    return added(f, "kubernetes:gateway.networking.k8s.io/v1:GatewayPatch", patch)


def service_patch(f: list[Resource]) -> list[Resource]:
    d = vllm(f)
    spec = {
        "type": "LoadBalancer",
        "selector": d["spec"]["template"]["metadata"]["labels"],
        "ports": [{"port": 8000, "targetPort": 8000}],
    }
    meta = {"name": "vllm-lb", "namespace": d["metadata"]["namespace"]}
    return added(f, "kubernetes:core/v1:ServicePatch", {"metadata": meta, "spec": spec})


def autoscaler_patch(f: list[Resource]) -> list[Resource]:
    cpu = {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}
    patch = {
        "metadata": copy.deepcopy(find(f, "HorizontalPodAutoscaler")["metadata"]),
        "spec": {"metrics": [{"type": "Resource", "resource": cpu}]},
    }
    return added(f, "kubernetes:autoscaling/v2:HorizontalPodAutoscalerPatch", patch)


def endpoint_patch(f: list[Resource]) -> list[Resource]:
    meta = copy.deepcopy(find(f, "ConfigMap", "gemma4-endpoint")["metadata"])
    patch = {"metadata": meta, "data": {"endpointUrl": "http://203.0.113.99"}}
    return added(f, "kubernetes:core/v1:ConfigMapPatch", patch)


def endpoint_edited(url: str) -> Callable[[list[Resource]], list[Resource]]:
    def edit(f: list[Resource]) -> list[Resource]:
        find(f, "ConfigMap", "gemma4-endpoint")["data"]["endpointUrl"] = url
        return f

    return edit


def unset_key(f: list[Resource]) -> list[Resource]:
    container(f)["command"] = ["env", "-u", "VLLM_API_KEY", *container(f)["command"]]
    return f


def config_map(name: str, value: str) -> Callable[[list[Resource]], list[Resource]]:
    def edit(f: list[Resource]) -> list[Resource]:
        props = {"metadata": {"name": "client", "namespace": "gemma4"}, "data": {name: value}}
        return added(f, "kubernetes:core/v1:ConfigMap", props)

    return edit


def metric_selector(f: list[Resource]) -> list[Resource]:
    for metric in find(f, "HorizontalPodAutoscaler")["spec"]["metrics"]:
        metric["pods"]["metric"]["selector"] = {"matchLabels": {"nobody": "has-this"}}
    return f


def scale_up(policy: str) -> Callable[[list[Resource]], list[Resource]]:
    def edit(f: list[Resource]) -> list[Resource]:
        behavior = find(f, "HorizontalPodAutoscaler")["spec"]["behavior"]
        behavior["scaleUp"]["selectPolicy"] = policy
        return f

    return edit


def capabilities(*names: str) -> Callable[[list[Resource]], list[Resource]]:
    def edit(f: list[Resource]) -> list[Resource]:
        container(f)["securityContext"] = {"capabilities": {"add": list(names)}}
        return f

    return edit


def replicas(f: list[Resource]) -> list[Resource]:
    vllm(f)["spec"]["replicas"] = 100
    return f


@pytest.mark.parametrize(
    ("stack", "edit", "policy", "named"),
    [
        ("gke-l4-public-spot", gateway_patch, "public-gateway-https-only", "plain HTTP"),
        ("gke-l4", service_patch, "vllm-only-through-pool", "vllm-lb"),
        ("gke-l4", autoscaler_patch, "autoscaler-vllm-metrics", "Resource 'cpu'"),
        ("gke-l4", endpoint_patch, "hooks-endpoint-own-gateway", "203.0.113.99"),
        ("gke-l4", endpoint_edited("http://203.0.113.99"), "hooks-endpoint-own-gateway", "1918"),
        ("gke-l4", endpoint_edited("http://100.64.0.9"), "hooks-endpoint-own-gateway", "1918"),
        ("gke-l4", endpoint_edited("http://192.0.2.20"), "hooks-endpoint-own-gateway", "1918"),
        ("gke-l4", unset_key, "vllm-server-readable", "env"),
        ("gke-l4", config_map("config.json", json.dumps({"api_key": KEY})), SECRETS, "config.json"),
        ("gke-l4", config_map("client.yaml", f"api_key: {KEY}\n"), SECRETS, "client.yaml"),
        ("gke-l4", config_map("c.yaml", f"c:\n  auth:\n    token: '{KEY}'\n"), SECRETS, "c.yaml"),
        ("gke-l4", metric_selector, "autoscaler-vllm-metrics", "label selector"),
        ("gke-l4", scale_up("Disabled"), "autoscaler-vllm-metrics", "selectPolicy"),
        ("gke-l4", capabilities("NET_ADMIN", "NET_RAW"), READABLE, "NET_ADMIN, NET_RAW"),
        ("gke-l4", capabilities("CAP_NET_BIND_SERVICE"), READABLE, "NET_BIND_SERVICE"),
        ("gke-l4", replicas, "autoscaler-vllm-metrics", "spec.replicas (100)"),
    ],
)  # fmt: skip
def test_a_near_variant_is_refused_by_its_policy(
    stack: str, edit: Callable[[list[Resource]], list[Resource]], policy: str, named: str
) -> None:
    found = verdicts(edit(resources(stack)))
    assert policy in found, found
    assert any(named in m for m in found[policy]), found[policy]


@pytest.mark.parametrize("stack", ["gke-l4", "gke-l4-public-spot", "gke-tpu-v6e"])
def test_the_rendered_stacks_pass_the_whole_pack(stack: str) -> None:
    assert verdicts(resources(stack)) == {}


def test_what_the_package_renders_in_a_config_map_document_passes() -> None:
    # The endpoint picker's plugin YAML is a document of settings, not of credentials; a
    # reference to a Secret is not a literal.
    edit = config_map("client.yaml", "api_key_from: {secretKeyRef: {name: vllm-api-key}}\n")
    assert "no-plaintext-secrets" not in verdicts(edit(resources("gke-l4")))


def test_a_patch_of_an_object_outside_the_stack_is_judged_on_its_own() -> None:
    # A Gateway the stack does not declare: its class is not known, so it counts as public.
    found = gateway_patch(resources("gke-l4"))
    found[-1][1]["metadata"]["name"] = "someone-elses"
    assert "public-gateway-https-only" in verdicts(found)
    found[-1][1]["metadata"]["name"] = "inference-gateway"  # the stack's internal Gateway
    assert "public-gateway-https-only" not in verdicts(found)
