"""The offline Kubernetes validator refuses what the API server refuses.

Each near variant changes one field of a valid GKE serving stack (tests/contracts/
gke_fixtures.py) the way a typo, an old guide or a removed API version would, and the test
names the API server's reason. The oracle is the schema the server uses: Kubernetes 1.34's
OpenAPI (kubernetes-validate) and each CRD's own openAPIV3Schema from its pinned release.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from tests.contracts import gke_fixtures as g
from tests.support import k8s_schema as k


def errors(manifest: dict[str, Any]) -> list[str]:
    return k.validate(manifest).errors


def one(errs: list[str], *fragments: str) -> None:
    assert any(all(f in e for f in fragments) for e in errs), errs


@pytest.mark.parametrize("pool", sorted(g.POOLS))
def test_the_fixture_stacks_pass_every_schema(pool: str) -> None:
    for name, report in k.validate_all(g.stack(pool)).items():
        assert report.errors == [], name
        assert report.unchecked == [], name


def test_vendored_crds_match_their_recorded_sha256() -> None:
    for entry in k.provenance():
        data = (k.CRD_DIR / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["file"]
        assert entry["repo"].startswith("https://github.com/") and entry["commit"]


def test_every_kind_the_stack_declares_has_a_schema() -> None:
    kinds = {(m["apiVersion"], m["kind"]) for m in g.stack()}
    known = set(k.crds()) | k.builtin_kinds()
    assert kinds <= known, kinds - known


# --- built-in kinds (Kubernetes 1.34 OpenAPI) ----------------------------------------------


def test_unknown_container_field_is_refused() -> None:
    d = g.vllm_deployment()
    d["spec"]["template"]["spec"]["containers"][0]["gpu"] = 1
    one(errors(d), "containers[0]", "'gpu' was unexpected")


def test_wrong_type_is_refused() -> None:
    d = g.vllm_deployment()
    d["spec"]["replicas"] = "two"
    one(errors(d), "spec.replicas", "'two'")


def test_missing_required_container_name_is_refused() -> None:
    d = g.vllm_deployment()
    del d["spec"]["template"]["spec"]["containers"][0]["name"]
    one(errors(d), "containers[0]", "'name' is a required property")


def test_invalid_quantity_is_refused() -> None:
    d = g.vllm_deployment()
    d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = "24GB"
    one(errors(d), "resources.limits.memory", "not a quantity")


def test_invalid_label_value_and_name_are_refused() -> None:
    d = g.vllm_deployment()
    d["metadata"]["name"] = "Gemma4_vLLM"
    d["spec"]["template"]["metadata"]["labels"]["version"] = "v0.27.1+cu128"
    errs = errors(d)
    one(errs, "metadata.name", "DNS-1123")
    one(errs, "labels", "not a valid label value")


def test_service_name_must_be_a_dns_1035_label() -> None:
    s = g.find(g.stack(), "Service")
    s["metadata"]["name"] = "9-epp"
    one(errors(s), "metadata.name", "DNS-1035")


def test_removed_builtin_version_is_refused() -> None:
    hpa = g.find(g.stack(), "HorizontalPodAutoscaler")
    hpa["apiVersion"] = "autoscaling/v2beta2"  # removed in Kubernetes 1.26
    one(errors(hpa), "autoscaling/v2beta2 HorizontalPodAutoscaler", "autoscaling/v2")


def test_hpa_metric_target_type_enum_and_structure() -> None:
    hpa = g.find(g.stack(), "HorizontalPodAutoscaler")
    hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"] = "five"
    one(errors(hpa), "averageValue", "not a quantity")


# --- custom resources (vendored CRDs) ------------------------------------------------------


def test_v1alpha2_pool_api_version_is_refused() -> None:
    pool = g.find(g.stack(), "InferencePool")
    pool["apiVersion"] = "inference.networking.x-k8s.io/v1alpha2"
    one(errors(pool), "no such kind", "inference.networking.k8s.io/v1")


@pytest.mark.parametrize(
    ("field", "value"),
    [("targetPortNumber", 8000), ("extensionRef", {"name": g.PICKER})],
)
def test_v1alpha2_pool_fields_are_refused_on_v1(field: str, value: Any) -> None:
    pool = g.find(g.stack(), "InferencePool")
    pool["spec"][field] = value
    one(errors(pool), "spec", f"'{field}' was unexpected")


def test_pool_defaults_are_applied_before_validation() -> None:
    pool = g.find(g.stack(), "InferencePool")
    del pool["spec"]["endpointPickerRef"]["failureMode"]
    report = k.validate(pool)
    assert report.ok
    ref = report.defaulted["spec"]["endpointPickerRef"]
    # The CRD's defaults: fail closed, a core Service (so its port is then required).
    assert ref["failureMode"] == "FailClose" and ref["kind"] == "Service"


def test_pool_picker_without_port_fails_the_crd_cel_rule_after_defaulting() -> None:
    pool = g.find(g.stack(), "InferencePool")
    del pool["spec"]["endpointPickerRef"]["port"]
    one(errors(pool), "spec.endpointPickerRef", "port is required")


def test_pool_duplicate_target_ports_fail_the_crd_cel_rule() -> None:
    pool = g.find(g.stack(), "InferencePool")
    pool["spec"]["targetPorts"] = [{"number": 8000}, {"number": 8000}]
    one(errors(pool), "spec.targetPorts", "unique")


def test_pool_port_bounds_and_required_selector() -> None:
    pool = g.find(g.stack(), "InferencePool")
    pool["spec"]["targetPorts"] = [{"number": 70000}]
    del pool["spec"]["selector"]
    errs = errors(pool)
    one(errs, "targetPorts[0].number", "70000")
    one(errs, "'selector' is a required property")


def test_pool_failure_mode_enum() -> None:
    pool = g.find(g.stack(), "InferencePool")
    pool["spec"]["endpointPickerRef"]["failureMode"] = "FailOpenIfDown"
    one(errors(pool), "failureMode", "FailOpen")


def test_httproute_backend_without_name_and_unknown_field_are_refused() -> None:
    route = g.find(g.stack(), "HTTPRoute")
    backend = route["spec"]["rules"][0]["backendRefs"][0]
    del backend["name"]
    backend["pool"] = g.POOL
    errs = errors(route)
    one(errs, "backendRefs[0]", "'name' is a required property")
    one(errs, "backendRefs[0]", "'pool' was unexpected")


def test_gateway_listener_protocol_and_port_are_checked() -> None:
    gw = g.find(g.stack(), "Gateway")
    gw["spec"]["listeners"][0]["port"] = 0
    one(errors(gw), "listeners[0].port")


def test_health_check_policy_enum_and_cel_rule() -> None:
    hc = g.find(g.stack(), "HealthCheckPolicy")
    hc["spec"]["default"]["config"]["type"] = "HTTP3"
    one(errors(hc), "config.type", "'HTTP3'")
    hc = g.find(g.stack(), "HealthCheckPolicy")
    hc["spec"]["default"].update({"checkIntervalSec": 5, "timeoutSec": 10})
    one(errors(hc), "spec.default", "checkIntervalSec >= self.timeoutSec")


def test_backend_policy_timeout_bounds() -> None:
    bp = g.find(g.stack(), "GCPBackendPolicy")
    bp["spec"]["default"]["timeoutSec"] = 0
    one(errors(bp), "timeoutSec", "minimum of 1")


def test_custom_resource_metadata_is_checked_against_object_meta() -> None:
    bp = g.find(g.stack(), "GCPBackendPolicy")
    bp["metadata"]["labels"] = {"team": ["serving"]}
    one(errors(bp), "metadata")


def test_pod_monitoring_cel_rule_and_kubernetes_extension_reported_unchecked() -> None:
    pm = g.find(g.stack(), "PodMonitoring")
    pm["spec"]["endpoints"][0]["timeout"] = "30s"
    pm["spec"]["endpoints"][0]["interval"] = "15s"
    one(errors(pm), "endpoints[0]", "timeout")
    pm = g.find(g.stack(), "PodMonitoring")
    pm["spec"]["endpoints"][0]["proxyUrl"] = "http://proxy.internal:3128"
    report = k.validate(pm)
    # isURL is a Kubernetes CEL extension cel-python does not have: reported, not passed.
    one(report.unchecked, "proxyUrl", "not evaluated offline", "isURL")


def test_unknown_custom_kind_is_refused() -> None:
    refused = {
        "apiVersion": "llm-d.ai/v1alpha2",
        "kind": "InferenceObjective",
        "metadata": {"name": "x"},
        "spec": {},
    }
    one(errors(refused), "no such kind")


@pytest.mark.parametrize(
    ("requests", "limits", "expected"),
    [
        ({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"}, "must be equal to nvidia.com/gpu limit"),
        ({"google.com/tpu": "1"}, {}, "Limit must be set for non overcommitable resources"),
        ({}, {"nvidia.com/gpu": "0.5"}, "must be an integer"),
        ({"cpu": "8"}, {"cpu": "6000m"}, "must be less than or equal to cpu limit"),
        ({"memory": "25Gi"}, {"memory": "24Gi"}, "must be less than or equal to memory limit"),
    ],
)
def test_resource_requirements_are_checked_as_the_api_server_does(
    requests: dict[str, str], limits: dict[str, str], expected: str
) -> None:
    d = g.vllm_deployment()
    d["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": requests,
        "limits": limits,
    }
    one(errors(d), "containers[0].resources", expected)


def test_quantities_parse_like_kubernetes() -> None:
    assert k.quantity("6000m") == 6 and k.quantity("24Gi") == 24 * 2**30
    assert k.quantity("1e3") == 1000 and k.quantity(2.0) == 2 and k.quantity("16GB") is None


@pytest.mark.parametrize("name", ["grpc-ext-proc-port", "HTTP", "8000", "http--x"])
def test_container_port_names_follow_iana_svc_name(name: str) -> None:
    d = g.vllm_deployment()
    d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["name"] = name
    one(errors(d), "ports[0].name", "not a port name")


def test_fields_are_those_of_the_clusters_minor_version() -> None:
    d = g.vllm_deployment()
    # PodSpec.schedulingGroup exists in Kubernetes 1.37's API, not in 1.34's.
    d["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": "g"}
    one(errors(d), "template.spec", "'schedulingGroup' was unexpected")
    assert not [e for e in k.validate(d, "1.37").errors if "schedulingGroup" in e]
    with pytest.raises(ValueError, match=r"no schemas for 1\.20"):
        k.validate(d, "1.20")
