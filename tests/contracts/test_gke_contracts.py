"""The GKE stacks as declared under Pulumi's mocks, against every outside contract offline.

- every Kubernetes object against Kubernetes 1.34's schemas or its CRD's own schema
  (tests/support/k8s_schema.py);
- the cluster and node pools against pulumi-gcp's input types and Google's container.v1
  discovery document (tests/support/gke_api.py renames the provider's inputs into the body);
- the cross-object references (tests/support/gke_invariants.py);
- every policy of the pack;

and near variants of the declared objects, each refused by one of those.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pulumi_policy import ResourceValidationPolicy, StackValidationPolicy

from policies.registry import ALL
from tests.contracts.sdk_types import input_errors
from tests.contracts.variants import GKE_VARIANTS, rendered
from tests.policies._fixtures import stack_violations, violations
from tests.support import discovery, gke_api, k8s_schema
from tests.support.gke_invariants import check, manifest_from_engine

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
#: A CEL rule cel-python cannot evaluate on these objects: PodMonitoring's `port` is
#: int-or-string and the rule compares it with 0; Kubernetes' CEL (heterogeneous equality)
#: evaluates `"http" != 0` to true, cel-python raises. Reported, not passed silently.
KNOWN_UNCHECKED = "spec.endpoints[0].port: not evaluated offline (CELEvalError): self != 0"


def kubernetes_objects(variant: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (d.type, d.name, manifest_from_engine(d.type, d.inputs))
        for d in rendered(variant).resources
        if d.custom and d.type.startswith("kubernetes:")
    ]


def manifests(variant: str) -> list[dict[str, Any]]:
    return copy.deepcopy([m for _, _, m in kubernetes_objects(variant)])


def node_pools(variant: str) -> list[dict[str, Any]]:
    return copy.deepcopy([d.inputs for d in rendered(variant).of_type(NODE_POOL)])


def find(found: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (one,) = [m for m in found if m["kind"] == kind and name in (None, m["metadata"]["name"])]
    return one


def vllm_deployment(found: list[dict[str, Any]]) -> dict[str, Any]:
    (one,) = [
        m
        for m in found
        if m["kind"] == "Deployment"
        and any(c["name"] == "vllm" for c in m["spec"]["template"]["spec"]["containers"])
    ]
    return one


@pytest.mark.parametrize("variant", sorted(GKE_VARIANTS))
def test_every_kubernetes_object_passes_its_schema(variant: str) -> None:
    objects = kubernetes_objects(variant)
    kinds = {m["kind"] for _, _, m in objects}
    assert {"Deployment", "InferencePool", "HTTPRoute", "Gateway", "PodMonitoring"} <= kinds
    for type_, name, manifest in objects:
        report = k8s_schema.validate(manifest)
        assert report.errors == [], f"{type_} {name}"
        assert set(report.unchecked) <= {KNOWN_UNCHECKED}, f"{type_} {name}"


@pytest.mark.parametrize("variant", sorted(GKE_VARIANTS))
def test_cluster_and_node_pools_match_pulumi_gcp_and_container_v1(variant: str) -> None:
    doc = discovery.load("container", "v1")
    r = rendered(variant)
    assert r.of_type(CLUSTER) and r.of_type(NODE_POOL)
    for d in r.resources:
        if d.type.startswith("gcp:"):
            assert input_errors(d.type, d.inputs) == [], f"{d.type} {d.name}"
    for d in r.of_type(CLUSTER):
        assert discovery.schema_errors(doc, "Cluster", gke_api.cluster_body(doc, d.inputs)) == []
    for d in r.of_type(NODE_POOL):
        body = gke_api.node_pool_body(doc, d.inputs)
        assert discovery.schema_errors(doc, "NodePool", body) == [], d.name


@pytest.mark.parametrize("variant", sorted(GKE_VARIANTS))
def test_cross_object_references_hold(variant: str) -> None:
    assert check(manifests(variant), node_pools(variant)) == []


@pytest.mark.parametrize("variant", ["gke-l4", "gke-tpu-v6e", "gke-l4-public-spot"])
def test_every_policy_passes_on_the_shipped_stacks(variant: str) -> None:
    resources = [(d.type, d.inputs, d.name) for d in rendered(variant).resources if d.custom]
    for policy in ALL:
        if isinstance(policy, StackValidationPolicy):
            assert stack_violations(policy, resources) == {}, policy.name
            continue
        assert isinstance(policy, ResourceValidationPolicy)
        for type_, props, name in resources:
            assert violations(policy, type_, props, name=name) == [], (policy.name, name)


def test_the_public_gateway_needs_the_public_mark() -> None:
    gateway = find(manifests("gke-l4-public-spot"), "Gateway")
    from policies.no_public_gateway import PUBLIC_ANNOTATION, no_public_gateway

    type_ = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
    assert gateway["spec"]["gatewayClassName"] == "gke-l7-regional-external-managed"
    marked = copy.deepcopy(gateway)
    marked["metadata"].setdefault("annotations", {})[PUBLIC_ANNOTATION] = "true"
    assert violations(no_public_gateway, type_, marked) == []
    assert k8s_schema.validate(marked).errors == []


def test_the_public_listener_is_what_the_gateway_crd_and_gke_take() -> None:
    """The public Gateway's one listener against the Gateway API v1.5.1 CRD (its CEL rules:
    HTTPS needs tls with mode Terminate, and Terminate needs certificateRefs or options) and
    GKE's regional-Gateway way to name a Certificate Manager certificate (a listener option,
    `networking.gke.io/cert-manager-certs`; certificate maps are for global Gateways)."""
    gateway = find(manifests("gke-l4-public-spot"), "Gateway")
    report = k8s_schema.validate(gateway)
    assert report.errors == [] and report.unchecked == []
    (listener,) = gateway["spec"]["listeners"]
    assert (listener["protocol"], listener["port"], listener["hostname"]) == (
        "HTTPS",
        443,
        "llm.example.com",
    )
    assert set(listener["tls"]["options"]) == {"networking.gke.io/cert-manager-certs"}
    assert "networking.gke.io/certmap" not in gateway["metadata"].get("annotations", {})
    # HTTPS without a tls block passes the v1.5.1 CRD (no rule requires it there); GKE needs a
    # certificate, and the public-gateway-https-only policy refuses it.
    no_tls = copy.deepcopy(gateway)
    del no_tls["spec"]["listeners"][0]["tls"]
    assert k8s_schema.validate(no_tls).errors == []
    from policies.public_gateway_https_only import public_gateway_https_only

    gateway_type = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
    (refused,) = stack_violations(
        public_gateway_https_only, [(gateway_type, no_tls, "gw")]
    ).values()
    assert "without TLS termination" in refused[0]
    no_certificate = copy.deepcopy(gateway)
    no_certificate["spec"]["listeners"][0]["tls"].update(options={}, certificateRefs=[])
    assert any(
        "certificateRefs or options" in e for e in k8s_schema.validate(no_certificate).errors
    )
    passthrough = copy.deepcopy(gateway)
    passthrough["spec"]["listeners"][0]["tls"]["mode"] = "Passthrough"
    assert any("Terminate" in e for e in k8s_schema.validate(passthrough).errors)


# --- near variants of what the stacks declare -----------------------------------------------


def test_pool_selector_that_matches_no_pod_is_refused() -> None:
    found = manifests("gke-l4")
    find(found, "InferencePool")["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] = (
        "vllm-gpu"
    )
    problems = check(found, node_pools("gke-l4"))
    assert any("matches no Pod template" in p for p in problems), problems


def test_route_to_another_pool_and_picker_mismatch_are_refused() -> None:
    found = manifests("gke-l4")
    route = find(found, "HTTPRoute")
    route["spec"]["rules"][0]["backendRefs"][0]["name"] = "vllm-old"
    pool = find(found, "InferencePool")
    pool["spec"]["endpointPickerRef"]["name"] = "epp"
    problems = check(found)
    assert any("backend pool 'vllm-old' not declared" in p for p in problems), problems
    assert any("names Service 'epp', not declared" in p for p in problems), problems


def test_picker_port_and_pool_port_mismatch_are_refused() -> None:
    found = manifests("gke-tpu-v6e")
    pool = find(found, "InferencePool")
    pool["spec"]["endpointPickerRef"]["port"]["number"] = 9003
    pool["spec"]["targetPorts"] = [{"number": 8080}]
    problems = check(found)
    assert any("has no port 9003" in p for p in problems), problems
    assert any("target port 8080 is not a container port" in p for p in problems), problems


def test_hpa_of_another_deployment_is_refused() -> None:
    found = manifests("gke-l4")
    find(found, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]["name"] = "vllm-l4"
    assert any("scaleTargetRef" in p for p in check(found))


def test_tpu_request_on_the_gpu_pool_is_refused() -> None:
    found = manifests("gke-l4")
    container = vllm_deployment(found)["spec"]["template"]["spec"]["containers"][0]
    for part in ("limits", "requests"):
        container["resources"][part]["google.com/tpu"] = container["resources"][part].pop(
            "nvidia.com/gpu"
        )
    problems = check(found, node_pools("gke-l4"))
    assert any("asks for google.com/tpu on GPU nodes" in p for p in problems), problems


def test_machine_type_and_accelerator_must_agree() -> None:
    pools = node_pools("gke-l4")
    gpu_pool = next(p for p in pools if p["nodeConfig"].get("guestAccelerators"))
    gpu_pool["nodeConfig"]["machineType"] = "g4-standard-48"
    problems = check(manifests("gke-l4"), pools)
    assert any("carries nvidia-rtx-pro-6000, not nvidia-l4" in p for p in problems), problems
    tpu_pools = node_pools("gke-tpu-v6e")
    for p in tpu_pools:
        if p["nodeConfig"]["machineType"] == "ct6e-standard-1t":
            p["nodeConfig"]["machineType"] = "ct6e-standard-4t"
    problems = check(manifests("gke-tpu-v6e"), tpu_pools)
    assert any("no node pool is a tpu-v6e-slice 1x1 slice" in p for p in problems), problems


def test_removed_v1alpha2_pool_fields_on_the_declared_pool_are_refused() -> None:
    pool = find(manifests("gke-l4"), "InferencePool")
    pool["spec"]["targetPortNumber"] = pool["spec"].pop("targetPorts")[0]["number"]
    errors = k8s_schema.validate(pool).errors
    assert any("'targetPortNumber' was unexpected" in e for e in errors), errors
    assert any("'targetPorts' is a required property" in e for e in errors), errors


def test_floating_picker_image_on_the_declared_picker_is_refused() -> None:
    from policies.pinned_image import pinned_image

    for type_, name, manifest in kubernetes_objects("gke-l4"):
        containers = manifest.get("spec", {}).get("template", {}).get("spec", {}).get("containers")
        if type_ == "kubernetes:apps/v1:Deployment" and "epp" in containers[0]["name"]:
            picker = copy.deepcopy(manifest)
            picker["spec"]["template"]["spec"]["containers"][0]["image"] = (
                "ghcr.io/llm-d/llm-d-router-endpoint-picker:main"
            )
            (message,) = violations(pinned_image, type_, picker, name=name)
            assert "floating tag 'main'" in message
            return
    raise AssertionError("no picker Deployment declared")


def test_declared_l4_pod_asking_131072_tokens_fails_the_cap() -> None:
    from policies.max_model_len_cap import max_model_len_cap

    deployment = vllm_deployment(manifests("gke-l4"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [a for a in container["args"] if not a.startswith("--max-model-len")] + [
        "--max-model-len=131072"
    ]
    (message,) = violations(max_model_len_cap, "kubernetes:apps/v1:Deployment", deployment)
    assert "131072" in message and "nvidia-l4" in message


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("nodeConfig", "guestAccelerators", 0, "gpuDriverVersion"), "NEWEST", "NEWEST"),
        (("autoscaling", "locationPolicy"), "RANDOM", "RANDOM"),
        (("nodeConfig", "reservationAffinity", "consumeReservationType"), "ANY", "ANY"),
        (("nodeConfig", "acceleratorCount"), 1, "unknown field 'acceleratorCount'"),
    ],
)
def test_container_v1_refuses_node_pool_near_variants(
    path: tuple[str | int, ...], value: Any, expected: str
) -> None:
    doc = discovery.load("container", "v1")
    pool = next(p for p in node_pools("gke-l4-public-spot") if p["nodeConfig"].get("spot"))
    if path[-1] == "gpuDriverVersion":
        pool["nodeConfig"]["guestAccelerators"][0]["gpuDriverInstallationConfig"][path[-1]] = value
    else:
        target: Any = pool
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
    errors = discovery.schema_errors(doc, "NodePool", gke_api.node_pool_body(doc, pool))
    assert any(expected in e for e in errors), errors


def test_container_v1_refuses_a_cluster_gateway_channel_typo() -> None:
    doc = discovery.load("container", "v1")
    (cluster,) = copy.deepcopy([d.inputs for d in rendered("gke-l4").of_type(CLUSTER)])
    cluster["gatewayApiConfig"]["channel"] = "STANDARD"
    errors = discovery.schema_errors(doc, "Cluster", gke_api.cluster_body(doc, cluster))
    assert any("networkConfig.gatewayApiConfig.channel" in e and "STANDARD" in e for e in errors)


def test_hpa_of_the_picker_is_refused() -> None:
    found = manifests("gke-l4")
    find(found, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]["name"] = "vllm-epp"
    assert any("no InferencePool serves" in p for p in check(found))


def test_vllm_port_probe_port_and_pool_port_must_agree() -> None:
    found = manifests("gke-tpu-v6e")
    container = vllm_deployment(found)["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [a for a in container["args"] if not a.startswith("--port")] + [
        "--port=8080"
    ]
    container["readinessProbe"]["httpGet"]["port"] = 8081
    problems = check(found)
    assert any("listens on --port=8080" in p for p in problems), problems
    assert any("readinessProbe port 8081" in p for p in problems), problems
