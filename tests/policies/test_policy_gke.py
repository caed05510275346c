"""The policy pack on Kubernetes objects: vLLM servers read from Pod templates of every kind,
every vLLM policy applied to them, and the GKE-only policies (no-public-gateway,
accelerator-pool-match), on near variants of a GKE serving stack (tests/contracts/
gke_fixtures.py)."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from pulumi_policy import ResourceValidationPolicy
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policies._server import read_servers
from policies.accelerator_pool_match import NODE_POOL, accelerator_pool_match
from policies.inference_pool_wiring import inference_pool_wiring
from policies.l4_qat_checkpoint import l4_qat_checkpoint
from policies.max_model_len_cap import max_model_len_cap
from policies.model_volume_read_only import model_volume_read_only
from policies.no_plaintext_secrets import no_plaintext_secrets
from policies.no_public_gateway import no_public_gateway
from policies.pinned_image import pinned_image
from policies.registry import ALL
from policies.vllm_server_readable import vllm_server_readable
from tests.contracts import gke_fixtures as g
from tests.policies._fixtures import stack_violations, violations

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
HF_TOKEN = "hf_" + "a1B2c3D4" * 5


def resource_type(manifest: dict[str, Any]) -> str:
    api = manifest["apiVersion"]
    return f"kubernetes:{api if '/' in api else 'core/' + api}:{manifest['kind']}"


def vllm(kind: str = "l4") -> dict[str, Any]:
    return g.vllm_deployment(kind)


def pod_spec(d: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = d["spec"]["template"]["spec"]
    return spec


def container(d: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = pod_spec(d)["containers"][0]
    return first


def set_arg(d: dict[str, Any], name: str, value: str) -> dict[str, Any]:
    args = [a for a in container(d)["args"] if not a.startswith(f"--{name}=")]
    container(d)["args"] = [*args, f"--{name}={value}"]
    return d


def resource_verdicts(type_: str, props: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for policy in ALL:
        if isinstance(policy, ResourceValidationPolicy):
            found = violations(policy, type_, props)
            if found:
                out[policy.name] = found
    return out


@pytest.mark.parametrize("pool", sorted(g.POOLS))
def test_the_fixture_stacks_pass_every_policy(pool: str) -> None:
    manifests = g.stack(pool)
    for m in manifests:
        assert resource_verdicts(resource_type(m), m) == {}, m["kind"]
    resources = [(resource_type(m), m, m["metadata"]["name"]) for m in manifests]
    assert stack_violations(accelerator_pool_match, resources) == {}


# --- reading vLLM from every kind that runs Pods -----------------------------------------


def _as_kind(kind: str, d: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    template = d["spec"]["template"]
    if kind == "Pod":
        return "kubernetes:core/v1:Pod", {
            "metadata": template["metadata"],
            **{"spec": template["spec"]},
        }
    if kind == "Job":
        return "kubernetes:batch/v1:Job", {"spec": {"template": template}}
    if kind == "CronJob":
        return "kubernetes:batch/v1:CronJob", {
            "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}}
        }
    return f"kubernetes:apps/v1:{kind}", d


@pytest.mark.parametrize(
    "kind", ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod"]
)
def test_vllm_is_read_from_every_pod_running_kind(kind: str) -> None:
    type_, props = _as_kind(kind, set_arg(vllm(), "max-model-len", "131072"))
    (server,) = read_servers(type_, props).servers
    assert server.accelerator == "nvidia-l4" and server.hardware is not None
    (message,) = violations(max_model_len_cap, type_, props)
    assert "--max-model-len=131072" in message and "nvidia-l4" in message


def test_tpu_pod_reads_as_the_catalog_slice() -> None:
    (server,) = read_servers(DEPLOYMENT, vllm("tpu-v6e")).servers
    assert server.accelerator == "v6e-1"
    assert server.hardware is not None and server.hardware.key == "tpu-v6e-1"


def test_pod_on_l4_asking_131072_tokens_fails_the_mandatory_cap() -> None:
    verdicts = resource_verdicts(DEPLOYMENT, set_arg(vllm(), "max-model-len", "131072"))
    assert "max-model-len-cap" in verdicts


def test_non_qat_checkpoint_on_l4_pod_is_refused() -> None:
    d = vllm()
    args = container(d)["args"]
    args[0] = "/mnt/models/gemma-4-12B-it"
    container(d)["args"] = [a for a in args if not a.startswith("--quantization")]
    assert violations(l4_qat_checkpoint, DEPLOYMENT, d)


@pytest.mark.parametrize(
    "env",
    [
        {"name": "CONTEXT", "value": "131072"},
        {"name": "CONTEXT", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
        None,  # not declared: a Service variable or left as written
    ],
)
@pytest.mark.parametrize("value", ["$(CONTEXT)", "$$(CONTEXT)"])
def test_kubelet_expansion_in_the_arguments_is_refused(
    env: dict[str, Any] | None, value: str
) -> None:
    """The package renders no `$(NAME)`: whatever the kubelet would make of it, refused."""
    d = vllm()
    if env:
        container(d)["env"].append(env)
    set_arg(d, "max-model-len", value)
    (message,) = violations(vllm_server_readable, DEPLOYMENT, d)
    assert "container 'vllm'" in message and "`$(...)` in its command or arguments" in message


def test_args_unknown_at_preview_fail_closed() -> None:
    d = vllm()
    container(d)["args"] = UNKNOWN_ARRAY_VALUE
    (message,) = violations(vllm_server_readable, DEPLOYMENT, unknown_checking_proxy(d))
    assert "args are not known" in message


def test_init_container_running_vllm_is_read() -> None:
    d = vllm()
    sidecar = copy.deepcopy(container(d))
    sidecar["name"] = "vllm-sidecar"
    sidecar["restartPolicy"] = "Always"
    set_arg({"spec": {"template": {"spec": {"containers": [sidecar]}}}}, "max-model-len", "131072")
    pod_spec(d)["initContainers"] = [sidecar]
    assert "vllm-sidecar" in violations(max_model_len_cap, DEPLOYMENT, d)[0]


def test_custom_resource_that_runs_containers_fails_closed() -> None:
    template = vllm()["spec"]["template"]
    lws = {"spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": template}}}
    type_ = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
    (message,) = violations(vllm_server_readable, type_, lws)
    assert "LeaderWorkerSet" in message and "workerTemplate" in message


def test_helm_release_fails_closed_and_plain_custom_resources_pass() -> None:
    assert violations(vllm_server_readable, "kubernetes:helm.sh/v3:Release", {"chart": "x"})
    for m in g.stack():
        assert violations(vllm_server_readable, resource_type(m), m) == [], m["kind"]


# --- pinned images (the picker's included) -------------------------------------------------


@pytest.mark.parametrize("tag", ["main", "latest", "v0", "v0.10", "nightly-20260801"])
def test_floating_picker_image_is_refused(tag: str) -> None:
    picker = g.find(g.stack(), "Deployment", g.PICKER)
    pod_spec(picker)["containers"][0]["image"] = g.PICKER_IMAGE.rsplit(":", 1)[0] + f":{tag}"
    (message,) = violations(pinned_image, DEPLOYMENT, picker)
    assert "'epp'" in message and tag in message


def test_untagged_init_container_image_is_refused() -> None:
    d = vllm()
    pod_spec(d)["initContainers"] = [{"name": "warm", "image": "busybox"}]
    (message,) = violations(pinned_image, DEPLOYMENT, d)
    assert "'warm'" in message and "no tag" in message


# --- secrets ---------------------------------------------------------------------------------


def test_literal_token_in_pod_env_is_refused() -> None:
    d = vllm()
    container(d)["env"].append({"name": "HF_TOKEN", "value": "not-a-pattern-but-literal"})
    assert any("HF_TOKEN" in m for m in violations(no_plaintext_secrets, DEPLOYMENT, d))


@pytest.mark.parametrize("field", ["stringData", "data"])
def test_literal_token_in_a_kubernetes_secret_is_refused(field: str) -> None:
    value = HF_TOKEN if field == "stringData" else base64.b64encode(HF_TOKEN.encode()).decode()
    secret = {"metadata": {"name": "hf"}, field: {"token": value}}
    (message,) = violations(no_plaintext_secrets, "kubernetes:core/v1:Secret", secret)
    assert "Hugging Face token" in message and f"{field}.token" in message


# --- the model mount (GCS FUSE CSI) ----------------------------------------------------------


def test_model_mount_must_be_read_only_on_volume_and_mount() -> None:
    d = vllm()
    pod_spec(d)["volumes"][0]["csi"]["readOnly"] = False
    assert "not read-only" in violations(model_volume_read_only, DEPLOYMENT, d)[0]
    d = vllm()
    del container(d)["volumeMounts"][0]["readOnly"]
    assert "not read-only" in violations(model_volume_read_only, DEPLOYMENT, d)[0]


def test_model_mount_keeps_the_uid_gid_contract() -> None:
    d = vllm()
    pod_spec(d)["volumes"][0]["csi"]["volumeAttributes"]["mountOptions"] = "implicit-dirs"
    (message,) = violations(model_volume_read_only, DEPLOYMENT, d)
    assert "uid=1001 and gid=1001" in message


def with_file_cache(option: str, cache_volume: dict[str, Any] | None) -> dict[str, Any]:
    d = vllm("tpu-v6e")
    attributes = pod_spec(d)["volumes"][0]["csi"]["volumeAttributes"]
    attributes["mountOptions"] += f",{option},file-cache:enable-parallel-downloads:true"
    if cache_volume is not None:
        pod_spec(d)["volumes"].append({"name": "gke-gcsfuse-cache", **cache_volume})
    return d


def test_a_file_cache_needs_the_pods_own_cache_volume() -> None:
    """Without a `gke-gcsfuse-cache` volume the sidecar keeps the cache in its own small
    ephemeral storage: refused, whether the option or the volume attribute turns it on."""
    (message,) = violations(
        model_volume_read_only, DEPLOYMENT, with_file_cache("file-cache:max-size-mb:25178", None)
    )
    assert "declares no 'gke-gcsfuse-cache' volume" in message
    for capacity in ("30Gi", "30G", "-1"):
        d = vllm("tpu-v6e")
        pod_spec(d)["volumes"][0]["csi"]["volumeAttributes"]["fileCacheCapacity"] = capacity
        (message,) = violations(model_volume_read_only, DEPLOYMENT, d)
        assert "declares no 'gke-gcsfuse-cache' volume" in message


def test_what_leaves_the_file_cache_off_needs_no_cache_volume() -> None:
    """The driver gives gcsfuse a cache directory only for `file-cache:max-size-mb:N` other than
    0 (sidecar_mounter_config.go): the flag form alone, 0, or a zero capacity leave it off."""
    for option in ("file-cache-max-size-mb=25178", "file-cache:max-size-mb:0"):
        assert violations(model_volume_read_only, DEPLOYMENT, with_file_cache(option, None)) == []
    d = vllm("tpu-v6e")
    pod_spec(d)["volumes"][0]["csi"]["volumeAttributes"]["fileCacheCapacity"] = "0Gi"
    assert violations(model_volume_read_only, DEPLOYMENT, d) == []


def test_a_file_cache_fits_its_cache_volume() -> None:
    memory = {"emptyDir": {"medium": "Memory", "sizeLimit": "26Gi"}}
    fits = with_file_cache("file-cache:max-size-mb:25178", memory)
    assert violations(model_volume_read_only, DEPLOYMENT, fits) == []
    too_big = with_file_cache("file-cache:max-size-mb:30000", memory)
    (message,) = violations(model_volume_read_only, DEPLOYMENT, too_big)
    assert "larger than 'gke-gcsfuse-cache''s sizeLimit 26Gi" in message
    # -1 is the volume's whole capacity (GKE's volume attribute reference).
    whole = with_file_cache("file-cache:max-size-mb:-1", memory)
    assert violations(model_volume_read_only, DEPLOYMENT, whole) == []


@pytest.mark.parametrize(
    ("option", "limit", "fits"),
    [
        ("file-cache:max-size-mb:25178", "27000Mi", True),
        ("file-cache:max-size-mb:25178", "26G", False),  # 24,796 MiB: decimal gigabytes
        ("file-cache:max-size-mb:25178", "27917287424", True),  # 26Gi in bytes
        ("file-cache:max-size-mb:25178", "24Gi", False),
        # Duplicates: the largest is judged, whatever the order (the driver sorts the options).
        ("file-cache:max-size-mb:100,file-cache:max-size-mb:40000", "26Gi", False),
        ("file-cache:max-size-mb:40000,file-cache:max-size-mb:100", "26Gi", False),
        # The flag overrides the config option's size: judged too.
        ("file-cache:max-size-mb:-1,file-cache-max-size-mb=40000", "26Gi", False),
    ],
)
def test_every_size_is_judged_against_the_sizelimit_in_its_units(
    option: str, limit: str, fits: bool
) -> None:
    memory = {"emptyDir": {"medium": "Memory", "sizeLimit": limit}}
    found = violations(model_volume_read_only, DEPLOYMENT, with_file_cache(option, memory))
    assert (found == []) is fits, found
    if not fits:
        assert f"sizeLimit {limit}" in found[0]


def test_a_capacity_that_is_no_quantity_is_named() -> None:
    # The driver refuses the volume ("only accepts a valid Quantity value"): the Pod never starts.
    memory = {"emptyDir": {"medium": "Memory", "sizeLimit": "26Gi"}}
    d = with_file_cache("file-cache:max-size-mb:0", memory)
    pod_spec(d)["volumes"][0]["csi"]["volumeAttributes"]["fileCacheCapacity"] = "lots"
    (message,) = violations(model_volume_read_only, DEPLOYMENT, d)
    assert "fileCacheCapacity 'lots' is not a Kubernetes quantity" in message


def test_a_config_option_written_with_equals_is_named() -> None:
    """`file-cache:max-size-mb=N` has '=': the driver passes it to gcsfuse as a flag
    (sidecar_mounter_config.go), `--file-cache:max-size-mb=N`, which gcsfuse has not."""
    memory = {"emptyDir": {"medium": "Memory", "sizeLimit": "26Gi"}}
    d = with_file_cache("file-cache:max-size-mb=25178", memory)
    (message,) = violations(model_volume_read_only, DEPLOYMENT, d)
    assert "'file-cache:max-size-mb=25178' has a flag's '='" in message
    assert "Write file-cache:max-size-mb:25178." in message


def test_the_pods_file_caches_share_one_cache_volume() -> None:
    """The sidecar keeps each volume's cache in its own folder of `gke-gcsfuse-cache`: two
    caches of 20,000 MiB each fit a 26Gi volume alone, not together."""
    memory = {"emptyDir": {"medium": "Memory", "sizeLimit": "26Gi"}}
    d = with_file_cache("file-cache:max-size-mb:20000", memory)
    assert violations(model_volume_read_only, DEPLOYMENT, d) == []
    second = copy.deepcopy(pod_spec(d)["volumes"][0])
    second["name"] = "more-models"
    pod_spec(d)["volumes"].append(second)
    (message,) = violations(model_volume_read_only, DEPLOYMENT, d)
    assert "volumes 'models', 'more-models' turn on gcsfuse's file cache" in message
    assert "40000 MiB of file cache" in message


def test_a_capacity_attribute_is_sized_as_the_driver_converts_it() -> None:
    """`fileCacheCapacity` "30G" is 30,000 MB to the driver, over a 26Gi volume (26,624 MiB);
    "25Gi" is 25,600 MiB, under it."""
    memory = {"emptyDir": {"medium": "Memory", "sizeLimit": "26Gi"}}
    for capacity, fits in (("30G", False), ("25Gi", True)):
        d = with_file_cache("file-cache:max-size-mb:0", memory)
        pod_spec(d)["volumes"][0]["csi"]["volumeAttributes"]["fileCacheCapacity"] = capacity
        assert (violations(model_volume_read_only, DEPLOYMENT, d) == []) is fits


def test_a_memory_cache_volume_needs_a_readable_size_limit() -> None:
    """A memory-backed cache volume without a sizeLimit holds the cache only until the Pod is
    killed; a disk-backed one is bounded by the node's ephemeral storage."""
    bare = with_file_cache("file-cache:max-size-mb:-1", {"emptyDir": {"medium": "Memory"}})
    (message,) = violations(model_volume_read_only, DEPLOYMENT, bare)
    assert "medium Memory without a sizeLimit" in message
    disk = with_file_cache("file-cache:max-size-mb:-1", {"emptyDir": {}})
    assert violations(model_volume_read_only, DEPLOYMENT, disk) == []
    odd = {"emptyDir": {"medium": "Memory", "sizeLimit": "lots"}}
    (message,) = violations(
        model_volume_read_only, DEPLOYMENT, with_file_cache("file-cache:max-size-mb:1", odd)
    )
    assert "sizeLimit 'lots' is not a Kubernetes quantity" in message


# --- no public Gateway -------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls",
    ["gke-l7-global-external-managed", "gke-l7-regional-external-managed", "gke-l7-gxlb", "x-lb"],
)
def test_external_or_unknown_gateway_class_without_public_is_refused(cls: str) -> None:
    gw = g.find(g.stack(gateway_class=cls), "Gateway")
    (message,) = violations(no_public_gateway, GATEWAY, gw)
    assert cls in message and "public: true" in message


def test_external_gateway_marked_public_passes_and_unknown_class_fails_closed() -> None:
    gw = g.find(g.stack(gateway_class="gke-l7-regional-external-managed"), "Gateway")
    gw["metadata"]["annotations"] = {"gemma4.dev/public": "true"}
    assert violations(no_public_gateway, GATEWAY, gw) == []
    gw = g.find(g.stack(), "Gateway")
    gw["spec"]["gatewayClassName"] = UNKNOWN_STRING_VALUE
    (message,) = violations(no_public_gateway, GATEWAY, unknown_checking_proxy(gw))
    assert "not known at preview" in message


def test_public_load_balancer_service_and_ingress_are_refused() -> None:
    svc: dict[str, Any] = {"metadata": {"name": "vllm"}, "spec": {"type": "LoadBalancer"}}
    assert violations(no_public_gateway, "kubernetes:core/v1:Service", svc)
    svc["metadata"]["annotations"] = {"networking.gke.io/load-balancer-type": "Internal"}
    assert violations(no_public_gateway, "kubernetes:core/v1:Service", svc) == []
    ingress = {"metadata": {"name": "vllm"}, "spec": {}}
    assert violations(no_public_gateway, "kubernetes:networking.k8s.io/v1:Ingress", ingress)


# --- accelerator requests agree with the nodes ----------------------------------------------


def _stack_messages(*resources: tuple[str, dict[str, Any], str]) -> list[str]:
    return [m for ms in stack_violations(accelerator_pool_match, resources).values() for m in ms]


def test_tpu_request_on_gpu_nodes_is_refused_and_the_reverse() -> None:
    d = vllm()
    limits = container(d)["resources"]["limits"]
    limits["google.com/tpu"] = limits.pop("nvidia.com/gpu")
    message, missing_selectors = _stack_messages((DEPLOYMENT, d, "vllm"))
    assert "google.com/tpu" in message and "GPU nodes" in message
    assert "without the cloud.google.com/gke-tpu-accelerator" in missing_selectors
    d = vllm("tpu-v6e")
    limits = container(d)["resources"]["limits"]
    limits["nvidia.com/gpu"] = limits.pop("google.com/tpu")
    (message,) = _stack_messages((DEPLOYMENT, d, "vllm"))
    assert "nvidia.com/gpu" in message and "TPU nodes" in message


def test_tpu_chips_must_match_the_single_host_topology() -> None:
    d = vllm("tpu-v6e")
    container(d)["resources"]["limits"]["google.com/tpu"] = "4"
    (message,) = _stack_messages((DEPLOYMENT, d, "vllm"))
    assert "1x1" in message and "exactly 1" in message


def test_accelerator_request_without_selector_is_refused() -> None:
    d = vllm()
    del pod_spec(d)["nodeSelector"]
    (message,) = _stack_messages((DEPLOYMENT, d, "vllm"))
    assert "without a cloud.google.com/gke-accelerator node selector" in message


def _pool(name: str, machine: str, **extra: Any) -> tuple[str, dict[str, Any], str]:
    return NODE_POOL, {"name": name, "nodeConfig": {"machineType": machine}, **extra}, name


def test_pods_must_match_a_declared_node_pool() -> None:
    gpu_pool = _pool("l4-pool", "g2-standard-8")
    tpu_pool = _pool("v6e-pool", "ct6e-standard-1t", placementPolicy={"tpuTopology": "1x1"})
    assert _stack_messages((DEPLOYMENT, vllm(), "vllm"), gpu_pool, tpu_pool) == []
    assert _stack_messages((DEPLOYMENT, vllm("tpu-v6e"), "vllm"), gpu_pool, tpu_pool) == []
    (message,) = _stack_messages((DEPLOYMENT, vllm("tpu-v6e"), "vllm"), gpu_pool)
    assert "no node pool of the stack has it" in message and "l4-pool=nvidia-l4" in message


def test_tpu_pod_pinned_to_a_gpu_pool_is_refused() -> None:
    d = vllm("tpu-v6e")
    pod_spec(d)["nodeSelector"]["cloud.google.com/gke-nodepool"] = "l4-pool"
    gpu_pool = _pool("l4-pool", "g2-standard-8")
    tpu_pool = _pool("v6e-pool", "ct6e-standard-1t", placementPolicy={"tpuTopology": "1x1"})
    (message,) = _stack_messages((DEPLOYMENT, d, "vllm"), gpu_pool, tpu_pool)
    assert "pinned to node pool 'l4-pool'" in message


@pytest.mark.parametrize("key", ["containers", "nodeSelector"])
def test_pod_template_parts_unknown_at_preview_fail_closed(key: str) -> None:
    d = vllm()
    pod_spec(d)[key] = UNKNOWN_ARRAY_VALUE if key == "containers" else UNKNOWN_STRING_VALUE
    (message,) = violations(vllm_server_readable, DEPLOYMENT, unknown_checking_proxy(d))
    assert f"spec.template.spec.{key} is not known" in message


def test_config_map_key_named_containers_is_not_a_workload() -> None:
    config = {"metadata": {"name": "c"}, "data": {"containers": "vllm"}}
    assert violations(vllm_server_readable, "kubernetes:core/v1:ConfigMap", config) == []


def test_route_to_a_gateway_the_stack_does_not_declare_is_refused() -> None:
    found = g.stack()
    route = g.find(found, "HTTPRoute")
    gateway = g.find(found, "Gateway")
    stack = [(GATEWAY, gateway, "gw")]
    route_type = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
    assert violations(no_public_gateway, route_type, route, stack=stack) == []
    route["spec"]["parentRefs"] = [{"name": "shared-external", "namespace": "infra"}]
    (message,) = violations(no_public_gateway, route_type, route, stack=stack)
    assert "infra/shared-external" in message and "does not declare" in message


# --- the pool's references -------------------------------------------------------------------


def _wiring(manifests: list[dict[str, Any]]) -> list[str]:
    resources = [(resource_type(m), m, m["metadata"]["name"]) for m in manifests]
    return [m for ms in stack_violations(inference_pool_wiring, resources).values() for m in ms]


def test_pool_selector_matching_no_pod_fails_the_wiring_policy() -> None:
    found = g.stack()
    assert _wiring(found) == []
    g.find(found, "InferencePool")["spec"]["selector"]["matchLabels"]["gemma4.dev/pool"] = "x"
    messages = _wiring(found)
    assert any("matches no Pod template" in m for m in messages), messages


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda pool: pool.update(apiVersion="inference.networking.x-k8s.io/v1alpha2"),
            "apiVersion 'inference.networking.x-k8s.io/v1alpha2' is not served",
        ),
        (
            lambda pool: pool["spec"].update(
                targetPortNumber=pool["spec"].pop("targetPorts")[0]["number"]
            ),
            "spec.targetPortNumber is not a field of InferencePool v1 (v1alpha2's; v1 names it "
            "targetPorts)",
        ),
        (
            lambda pool: pool["spec"].update(extensionRef={"name": "gemma4-epp"}),
            "spec.extensionRef is not a field of InferencePool v1 (v1alpha2's",
        ),
        (
            lambda pool: pool["spec"].update(modelServerType="vllm"),
            "spec.modelServerType is not a field of InferencePool v1; allowed:",
        ),
    ],
)
def test_a_pool_of_the_removed_v1alpha2_api_fails_the_wiring_policy(
    change: Any, expected: str
) -> None:
    found = g.stack()
    change(g.find(found, "InferencePool"))
    messages = _wiring(found)
    assert any(expected in m for m in messages), messages


def test_the_pool_fields_the_policy_allows_are_the_crds() -> None:
    import yaml

    from policies._wiring import INFERENCE_POOL_API, POOL_SPEC_FIELDS
    from tests.support.k8s_schema import CRD_DIR  # the vendored upstream CRDs (sha256-pinned)

    crd = yaml.safe_load((CRD_DIR / "inference.networking.k8s.io_inferencepools.yaml").read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["served"]]
    assert f"{crd['spec']['group']}/{served['name']}" == INFERENCE_POOL_API
    spec = served["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert frozenset(spec) == POOL_SPEC_FIELDS


def test_wiring_values_unknown_at_preview_match_nothing() -> None:
    found = g.stack()
    service = g.find(found, "Service")
    service["spec"]["selector"] = UNKNOWN_STRING_VALUE
    resources = [
        (resource_type(m), unknown_checking_proxy(m), m["metadata"]["name"]) for m in found
    ]
    messages = [m for ms in stack_violations(inference_pool_wiring, resources).values() for m in ms]
    assert any("selector matches no Pod template" in m for m in messages), messages


def test_a_stack_without_a_pool_is_not_judged() -> None:
    found = [m for m in g.stack() if m["kind"] != "InferencePool"]
    g.find(found, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]["name"] = "other"
    assert _wiring(found) == []


def _public_stack() -> list[dict[str, Any]]:
    found = g.stack(gateway_class="gke-l7-regional-external-managed")
    g.find(found, "Gateway")["metadata"]["annotations"] = {"gemma4.dev/public": "true"}
    g.find(found, "GCPBackendPolicy")["spec"]["default"]["securityPolicy"] = "clients"
    return found


def _gateway_messages(found: list[dict[str, Any]]) -> list[str]:
    resources = [(resource_type(m), m, m["metadata"]["name"]) for m in found]
    return [m for ms in stack_violations(no_public_gateway, resources).values() for m in ms]


def test_public_gateway_with_client_ranges_and_api_key_passes() -> None:
    assert _gateway_messages(_public_stack()) == []


def test_public_gateway_needs_client_ranges_and_an_api_key() -> None:
    found = _public_stack()
    del g.find(found, "GCPBackendPolicy")["spec"]["default"]["securityPolicy"]
    (message,) = _gateway_messages(found)
    assert "Cloud Armor securityPolicy" in message
    found = _public_stack()
    c = container(g.find(found, "Deployment", "gemma4-vllm"))
    c["env"] = [e for e in c["env"] if e["name"] != "VLLM_API_KEY"]
    (message,) = _gateway_messages(found)
    assert "without an API key" in message


def test_tpu_pool_topology_follows_from_its_machine_type() -> None:
    d = vllm("tpu-v6e")
    pod_spec(d)["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = "2x2"
    container(d)["resources"]["limits"]["google.com/tpu"] = "4"
    container(d)["resources"]["requests"]["google.com/tpu"] = "4"
    one_chip = _pool("v6e-pool", "ct6e-standard-1t")
    (message,) = _stack_messages((DEPLOYMENT, d, "vllm"), one_chip)
    assert "topology 2x2" in message and "v6e-pool=tpu-v6e-slice 1x1" in message
    assert _stack_messages((DEPLOYMENT, d, "vllm"), _pool("v6e-4", "ct6e-standard-4t")) == []


@pytest.mark.parametrize(
    ("where", "hook"),
    [
        (("lifecycle", "postStart"), "lifecycle.postStart.exec"),
        (("lifecycle", "preStop"), "lifecycle.preStop.exec"),
        (("startupProbe",), "startupProbe.exec"),
        (("livenessProbe",), "livenessProbe.exec"),
        (("readinessProbe",), "readinessProbe.exec"),
    ],
)
def test_exec_hooks_and_probes_in_the_vllm_container_are_refused(
    where: tuple[str, ...], hook: str
) -> None:
    # The kubelet runs these inside the vLLM container: a second server, or files changed
    # under vLLM, that the command the policies read never shows.
    d = vllm()
    target = container(d)
    for key in where[:-1]:
        target = target.setdefault(key, {})
    target[where[-1]] = {
        "exec": {"command": ["sh", "-c", "vllm serve /mnt/models/x --port 9000 &"]}
    }
    (message,) = violations(vllm_server_readable, DEPLOYMENT, d)
    assert hook in message


def test_ephemeral_containers_are_refused() -> None:
    d = vllm()
    pod_spec(d)["ephemeralContainers"] = [
        {"name": "debug", "image": "busybox:1.36.1", "command": ["sh", "-c", "x"]}
    ]
    (message,) = violations(vllm_server_readable, DEPLOYMENT, d)
    assert "ephemeralContainers" in message


def test_a_volume_an_init_container_fills_is_not_mounted_into_vllm() -> None:
    # An init container writes a sitecustomize.py into an emptyDir that the vLLM container
    # mounts where Python imports from: code the command never shows.
    d = vllm()
    pod_spec(d)["volumes"].append({"name": "shared", "emptyDir": {}})
    container(d)["volumeMounts"].append(
        {"name": "shared", "mountPath": "/usr/local/lib/python3.12/dist-packages/extra"}
    )
    pod_spec(d)["initContainers"] = [
        {
            "name": "init",
            "image": "busybox:1.36.1",
            "command": ["sh", "-c", "echo 'import os' > /s/sitecustomize.py"],
            "volumeMounts": [{"name": "shared", "mountPath": "/s"}],
        }
    ]
    (message,) = violations(vllm_server_readable, DEPLOYMENT, d)
    assert "mounts volume 'shared'" in message


def test_shared_memory_may_be_mounted() -> None:
    d = vllm()
    pod_spec(d)["volumes"].append({"name": "dshm", "emptyDir": {"medium": "Memory"}})
    container(d)["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})
    assert violations(vllm_server_readable, DEPLOYMENT, d) == []


@pytest.mark.parametrize(
    "remap",
    [
        {"subPath": "other"},
        {"subPathExpr": "$(POD_NAME)"},
        {"volume": "implicit-dirs,uid=1001,gid=1001,only-dir=other"},
        {"volume": "only_dir=other"},
    ],
)
def test_a_model_mount_whose_root_is_another_folder_is_refused(remap: dict[str, str]) -> None:
    d = vllm()
    if "volume" in remap:
        pod_spec(d)["volumes"][0]["csi"]["volumeAttributes"]["mountOptions"] = remap["volume"]
    else:
        container(d)["volumeMounts"][0].update(remap)
    messages = violations(vllm_server_readable, DEPLOYMENT, d)
    assert any("subPath, subPathExpr or only-dir" in m for m in messages), messages


@pytest.mark.parametrize(
    ("type_", "props", "named"),
    [
        # KServe: the model runs in a serving runtime installed outside the stack (vLLM's
        # among them); no container list in the object itself.
        ("kubernetes:serving.kserve.io/v1beta1:InferenceService",
         {"spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"},
                                            "storageUri": "hf://google/gemma-4-12B-it",
                                            "args": ["--max-model-len=131072"]}}}},
         "predictor.model"),
        # Argo: one `container` (singular) or a `script` per template.
        ("kubernetes:argoproj.io/v1alpha1:Workflow",
         {"spec": {"templates": [{"name": "serve", "container": {
             "image": "vllm/vllm-openai:v0.27.1", "args": ["serve", "x"]}}]}},
         "container"),
        ("kubernetes:argoproj.io/v1alpha1:Workflow",
         {"spec": {"templates": [{"name": "s", "script": {"source": "vllm serve x"}}]}},
         "script"),
        # JobSet: a Job template holding a Pod template.
        ("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet",
         {"spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {
             "spec": {"containers": [{"name": "v", "image": "x:1"}]}}}}}]}},
         "replicatedJobs"),
        # Anything that asks for an accelerator.
        ("kubernetes:example.com/v1:Runner",
         {"spec": {"resources": {"limits": {"nvidia.com/gpu": 1}}}}, "nvidia.com/gpu"),
        ("kubernetes:example.com/v1:Runner",
         {"spec": {"podSpec": {"nodeName": "n"}}}, "podSpec"),
    ],
)  # fmt: skip
def test_custom_resources_that_run_code_or_accelerators_fail_closed(
    type_: str, props: dict[str, Any], named: str
) -> None:
    (message,) = violations(vllm_server_readable, type_, props)
    assert named in message and "cannot read" in message


def test_a_crd_schema_naming_containers_runs_nothing() -> None:
    crd = {"spec": {"versions": [{"schema": {"openAPIV3Schema": {"properties": {
        "containers": {"type": "array"}, "image": {"type": "string"}}}}}]}}  # fmt: skip
    type_ = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
    assert violations(vllm_server_readable, type_, crd) == []


def test_a_container_given_the_gpu_by_a_resource_claim_must_start_vllm() -> None:
    # Dynamic resource allocation hands a device through resources.claims, not a limit:
    # the side container holds the GPU and runs a server the policies cannot see.
    d = vllm()
    pod_spec(d)["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
    pod_spec(d)["containers"].append(
        {"name": "side", "image": "ghcr.io/x/server:1.0.0", "command": ["/app/server"],
         "resources": {"claims": [{"name": "gpu"}]}}
    )  # fmt: skip
    (message,) = violations(vllm_server_readable, DEPLOYMENT, d)
    assert "container 'side' holds the GPU" in message


def test_a_gpu_pod_whose_containers_declare_no_accelerator_is_refused() -> None:
    d = vllm()
    del container(d)["resources"]
    pod_spec(d)["containers"].append(
        {"name": "side", "image": "ghcr.io/x/server:1.0.0", "command": ["/app/server"]}
    )
    (message,) = violations(vllm_server_readable, DEPLOYMENT, d)
    assert "none declares the accelerator" in message


@pytest.mark.parametrize("value", ["all", "0", None])
def test_a_container_exposing_gpus_by_environment_holds_the_gpu(value: str | None) -> None:
    d = vllm()
    env: dict[str, Any] = {"name": "NVIDIA_VISIBLE_DEVICES"}
    env.update(
        {"value": value} if value else {"valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}
    )
    pod_spec(d)["containers"].append(
        {
            "name": "side",
            "image": "ghcr.io/x/server:1.0.0",
            "command": ["/app/server"],
            "env": [env],
        }
    )
    (message,) = violations(vllm_server_readable, DEPLOYMENT, d)
    assert "container 'side' holds the GPU" in message


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda d: pod_spec(d).update(shareProcessNamespace=True), "shareProcessNamespace"),
        (lambda d: pod_spec(d).update(hostPID=True), "hostPID"),
        (lambda d: container(d).update(securityContext={"privileged": True}), "privileged"),
        (lambda d: pod_spec(d)["containers"].append(
            {"name": "side", "image": "ghcr.io/x/dbg:1.0.0", "command": ["sleep", "inf"],
             "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}), "SYS_PTRACE"),
    ],
)  # fmt: skip
def test_what_reaches_into_the_vllm_process_is_refused(edit: Any, named: str) -> None:
    # A sidecar sharing the process namespace with SYS_PTRACE (or a privileged one) can
    # rewrite the running server's memory or files: code the command never shows.
    d = vllm()
    edit(d)
    messages = violations(vllm_server_readable, DEPLOYMENT, d)
    assert any(named in m for m in messages), messages
