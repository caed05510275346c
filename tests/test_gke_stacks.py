"""The GKE stacks (gke-tpu-v6e, gke-l4), rendered by the real program under Pulumi's mocks:
the cluster and node pools, the Kubernetes objects, and what they share with the other stacks."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from components.stack import post_deploy_binding
from endpoint.auth import NoAuth
from endpoint.targets import url_from_outputs
from gemma4 import preview as pv
from serving.capacity.perf_stack import scale_up_waiting_requests
from serving.config.checks import SettingsError
from serving.config.settings import load_settings
from serving.render import gke
from serving.render.vllm import parse_args
from tests.pulumi_harness import ROOT, RecordingMocks, Rendered, render, run_hook, stack_config
from tests.support.fake_vllm import FakeVllmConfig, FakeVllmServer

GKE_STACKS = ("gke-tpu-v6e", "gke-l4")
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
ARMOR = "gcp:compute/regionSecurityPolicy:RegionSecurityPolicy"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SERVICE = "kubernetes:core/v1:Service"
POOL = "kubernetes:inference.networking.k8s.io/v1:InferencePool"
GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
ROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
BACKEND_POLICY = "kubernetes:networking.gke.io/v1:GCPBackendPolicy"
HEALTH_POLICY = "kubernetes:networking.gke.io/v1:HealthCheckPolicy"
POD_MONITORING = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
RUN_SERVICE = "gcp:cloudrunv2/service:Service"
CERTIFICATE = "gcp:certificatemanager/certificate:Certificate"
DNS_AUTHORIZATION = "gcp:certificatemanager/dnsAuthorization:DnsAuthorization"
SERVICE_API = "gcp:projects/service:Service"
DOMAIN = "llm.example.com"
PUBLIC = {"public": True, "sourceRanges": ["203.0.113.0/24"], "gatewayDomain": DOMAIN}


@pytest.fixture(scope="module", params=GKE_STACKS)
def stack(request: pytest.FixtureRequest) -> tuple[str, Rendered]:
    return request.param, render(stack_config(request.param), request.param)


def named(rendered: Rendered, type_: str, name: str) -> dict[str, Any]:
    (found,) = [r for r in rendered.of_type(type_) if r.inputs["metadata"]["name"] == name]
    return found.inputs


def vllm(rendered: Rendered) -> dict[str, Any]:
    return named(rendered, DEPLOYMENT, gke.VLLM_NAME)


def test_cluster_installs_what_the_inference_gateway_needs(stack: tuple[str, Rendered]) -> None:
    name, rendered = stack
    config = stack_config(name)
    cluster = rendered.one(CLUSTER).inputs
    assert cluster["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}
    assert cluster["monitoringConfig"]["managedPrometheus"]["enabled"] is True
    assert cluster["workloadIdentityConfig"]["workloadPool"] == "test-project.svc.id.goog"
    assert cluster["addonsConfig"]["gcsFuseCsiDriverConfig"]["enabled"] is True
    assert cluster["minMasterVersion"] == config["clusterVersion"]
    assert cluster["releaseChannel"]["channel"] == config["releaseChannel"]
    region = config["zone"].rsplit("-", 1)[0]
    assert cluster["location"] == region
    assert cluster["nodeLocations"] == [config["zone"]]
    subnet = rendered.one(SUBNET).inputs
    assert subnet["purpose"] == "REGIONAL_MANAGED_PROXY" and subnet["role"] == "ACTIVE"
    assert subnet["region"] == region


def test_accelerator_pool_matches_the_pods(stack: tuple[str, Rendered]) -> None:
    name, rendered = stack
    config = stack_config(name)
    settings = load_settings(config)
    (pool,) = [p.inputs for p in rendered.of_type(NODE_POOL) if "accelerators" in p.name]
    spec = vllm(rendered)["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    machine = pool["nodeConfig"]["machineType"]
    assert machine == {"gke-tpu-v6e": "ct6e-standard-1t", "gke-l4": "g2-standard-8"}[name]
    # One node more than maxReplicas, for a rolling update's surge; none when idle.
    assert pool["autoscaling"]["totalMaxNodeCount"] == int(config["maxReplicas"]) + 1
    assert pool["autoscaling"]["totalMinNodeCount"] == 0
    requests = container["resources"]["requests"]
    if name == "gke-tpu-v6e":
        assert "guestAccelerators" not in pool["nodeConfig"]
        assert pod["nodeSelector"] == {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "1x1",
            "cloud.google.com/gke-spot": "true",
        }
        assert pool["nodeConfig"]["spot"] is True
        assert requests["google.com/tpu"] == "1" and "nvidia.com/gpu" not in requests
    else:
        (accelerator,) = pool["nodeConfig"]["guestAccelerators"]
        assert accelerator["type"] == "nvidia-l4" and accelerator["count"] == 1
        assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": accelerator["type"]}
        assert requests["nvidia.com/gpu"] == "1" and "google.com/tpu" not in requests
    # The autoscaler owns the count: an apply never resets it (and it starts at minReplicas).
    assert "replicas" not in spec
    assert rendered.one(HPA).inputs["spec"]["minReplicas"] == settings.gke.min_replicas


def test_vllm_command_line_is_the_cloud_run_one() -> None:
    """gke-l4 and the Cloud Run l4 stack share model and engine settings: one renderer gives
    both the same arguments, apart from the port."""
    gke_args = vllm(render(stack_config("gke-l4"), "gke-l4"))["spec"]["template"]["spec"]
    cloud_run = render(stack_config("l4"), "l4").one(RUN_SERVICE).inputs
    (run_vllm,) = [c for c in cloud_run["template"]["containers"] if c["name"] == "vllm"]
    (gke_vllm,) = gke_args["containers"]
    ours, theirs = parse_args(gke_vllm["args"]), parse_args(run_vllm["args"])
    assert ours.pop("port") == "8000" and theirs.pop("port") == "8080"
    assert ours == theirs
    assert gke_vllm["command"] == run_vllm["commands"]
    # The model bucket: the same mount contract, read-only, through the GCS FUSE CSI driver.
    (models,) = [v for v in gke_args["volumes"] if v["name"] == "models"]
    (run_models,) = [v for v in cloud_run["template"]["volumes"] if v["name"] == "models"]
    assert models["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
    assert models["csi"]["readOnly"] is True
    attributes = models["csi"]["volumeAttributes"]
    assert attributes["mountOptions"].split(",") == run_models["gcs"]["mountOptions"]
    assert attributes["bucketName"].startswith("gemma-gke-l4-models-bucket")
    (mount,) = [m for m in gke_vllm["volumeMounts"] if m["name"] == "models"]
    assert mount["readOnly"] is True


def test_hugging_face_token_only_in_the_download_job(stack: tuple[str, Rendered]) -> None:
    name, rendered = stack
    secret = load_settings(stack_config(name)).weights.hf_token_secret
    holders = {
        r.type
        for r in rendered.resources
        if secret in json.dumps(r.inputs) or "HF_TOKEN" in json.dumps(r.inputs)
    }
    assert holders == {
        "gcp:cloudrunv2/job:Job",
        "gcp:secretmanager/secretIamMember:SecretIamMember",
    }
    env = vllm(rendered)["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in env
    (key,) = [e for e in env if e["name"] == "VLLM_API_KEY"]
    assert "value" not in key and key["valueFrom"]["secretKeyRef"]["name"] == "vllm-api-key"


def test_tpu_probes_allow_minutes_of_compilation() -> None:
    rendered = render(stack_config("gke-tpu-v6e"), "gke-tpu-v6e")
    container = vllm(rendered)["spec"]["template"]["spec"]["containers"][0]
    probe = container["startupProbe"]
    # tpu-inference's CI waits up to 1800 s for Gemma 4 to start (its PR #2722): the probe
    # derived from the cold start prediction must outlast it.
    assert probe["periodSeconds"] * probe["failureThreshold"] >= 1800
    assert probe["httpGet"] == {"path": "/health", "port": 8000}


def test_route_pool_and_picker_are_wired(stack: tuple[str, Rendered]) -> None:
    name, rendered = stack
    settings = load_settings(stack_config(name))
    pool = rendered.one(POOL).inputs
    deployment = vllm(rendered)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pool["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    assert "targetPortNumber" not in pool["spec"] and "extensionRef" not in pool["spec"]
    ref = pool["spec"]["endpointPickerRef"]
    picker_service = named(rendered, SERVICE, ref["name"])
    assert ref["port"]["number"] in [p["port"] for p in picker_service["spec"]["ports"]]
    assert ref["failureMode"] == settings.gke.picker_failure_mode == "FailOpen"
    picker = named(rendered, DEPLOYMENT, ref["name"])
    assert picker["spec"]["replicas"] == 2
    assert picker_service["spec"]["selector"].items() <= (
        picker["spec"]["template"]["metadata"]["labels"].items()
    )
    (epp,) = picker["spec"]["template"]["spec"]["containers"]
    assert epp["image"] == "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"
    assert "--ha-enable-leader-election" in epp["args"]
    pool_name = pool["metadata"]["name"]
    assert epp["args"][epp["args"].index("--pool-name") + 1] == pool_name
    route = rendered.one(ROUTE).inputs
    (rule,) = route["spec"]["rules"]
    assert rule["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": pool_name}
    ]
    gateway = rendered.one(GATEWAY).inputs
    assert route["spec"]["parentRefs"] == [{"name": gateway["metadata"]["name"]}]
    assert gateway["spec"]["gatewayClassName"] == "gke-l7-rilb"
    assert "annotations" not in gateway["metadata"]
    for policy in (rendered.one(HEALTH_POLICY).inputs, rendered.one(BACKEND_POLICY).inputs):
        assert policy["spec"]["targetRef"]["name"] == pool_name
    backend = rendered.one(BACKEND_POLICY).inputs["spec"]["default"]
    assert backend["timeoutSec"] == 3600 > 300
    assert "securityPolicy" not in backend
    assert rendered.of_type(ARMOR) == []


def test_autoscaler_follows_vllms_queue(stack: tuple[str, Rendered]) -> None:
    name, rendered = stack
    config = stack_config(name)
    hpa = rendered.one(HPA).inputs["spec"]
    assert hpa["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": vllm(rendered)["metadata"]["name"],
    }
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (
        int(config["minReplicas"]),
        int(config["maxReplicas"]),
    )
    (metric,) = hpa["metrics"]
    # The target: the model's queue per replica within the TTFT SLO (tests/test_plan_replicas.py).
    target = scale_up_waiting_requests(load_settings(config))
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": str(target)}
    _, family, kind = metric["pods"]["metric"]["name"].split("|")
    # The metric name comes from the pinned vLLM's own snapshot, and it is a gauge there.
    image = load_settings(config).image
    snapshot_name = {
        "vllm/vllm-tpu:v0.27.0": "vllm-tpu-0.27.0",
        "vllm/vllm-openai:v0.27.1": "vllm-0.27.1",
    }[image]
    snapshot = (ROOT / "serving" / "data" / f"{snapshot_name}.json").read_text()
    assert f'"{family}"' in snapshot and kind == "gauge"
    monitored = {m.inputs["metadata"]["name"] for m in rendered.of_type(POD_MONITORING)}
    assert monitored == {gke.VLLM_NAME, gke.PICKER_NAME}


def test_internal_gateway_skips_the_post_deploy_checks(stack: tuple[str, Rendered]) -> None:
    _, rendered = stack
    assert all(not r.hooks for r in rendered.resources)
    assert any("Gateway is internal" in m for m in rendered.messages)
    # The internal Gateway's plain HTTP is a choice the preview names, with what it costs.
    assert any("plain HTTP on port 80 inside the VPC" in m for m in rendered.messages)
    assert rendered.outputs["endpoint_url"] == "http://10.150.0.20"


def test_public_gateway_enforces_source_ranges_and_runs_the_checks() -> None:
    rendered = render({**stack_config("gke-l4"), **PUBLIC}, "gke-l4")
    gateway = rendered.one(GATEWAY).inputs
    assert gateway["spec"]["gatewayClassName"] == "gke-l7-regional-external-managed"
    assert gateway["metadata"]["annotations"] == {"gemma4.dev/public": "true"}
    armor = rendered.one(ARMOR).inputs
    allow = [r for r in armor["rules"] if r["action"] == "allow"]
    assert [r["match"]["config"]["srcIpRanges"] for r in allow] == [PUBLIC["sourceRanges"]]
    default = [r for r in armor["rules"] if r["priority"] == 2147483647]
    assert default[0]["action"] == "deny(403)"
    backend = rendered.one(BACKEND_POLICY).inputs["spec"]["default"]
    assert backend["securityPolicy"] == armor["name"] == "gemma-gke-l4-serving-clients"
    (endpoint,) = [
        r for r in rendered.of_type(CONFIG_MAP) if r.inputs["metadata"]["name"] == "gemma4-endpoint"
    ]
    assert set(endpoint.hooks["after_create"]) == {
        "gemma-gke-l4-health",
        "gemma-gke-l4-benchmark",
    }
    # The hooks read the URL the way the engine hands the ConfigMap's outputs over: the
    # Gateway's HTTPS name, never its plain-HTTP address.
    assert url_from_outputs(endpoint.inputs, ("data.endpointUrl",)) == f"https://{DOMAIN}"
    assert rendered.outputs["endpoint_url"] == f"https://{DOMAIN}"


def test_public_gateway_serves_https_only_with_a_managed_certificate() -> None:
    rendered = render({**stack_config("gke-l4"), **PUBLIC}, "gke-l4")
    (listener,) = rendered.one(GATEWAY).inputs["spec"]["listeners"]
    certificate = rendered.one(CERTIFICATE).inputs
    authorization = rendered.one(DNS_AUTHORIZATION).inputs
    assert listener["protocol"] == "HTTPS" and listener["port"] == 443
    assert listener["hostname"] == DOMAIN
    assert listener["tls"] == {
        "mode": "Terminate",
        "options": {"networking.gke.io/cert-manager-certs": certificate["name"]},
    }
    # Regional: the Gateway is regional, and so are its certificate and authorization.
    assert certificate["location"] == authorization["location"] == "us-east4"
    assert certificate["managed"]["domains"] == [DOMAIN]
    assert authorization["domain"] == DOMAIN and authorization["type"] == "PER_PROJECT_RECORD"
    apis = {r.inputs["service"] for r in rendered.of_type(SERVICE_API)}
    assert "certificatemanager.googleapis.com" in apis
    (a_record, *_) = rendered.outputs["dns_records"]
    assert a_record == {"name": f"{DOMAIN}.", "type": "A", "data": "198.51.100.20"}


def test_a_certificate_of_the_users_is_used_as_given() -> None:
    config = {**stack_config("gke-l4"), **PUBLIC, "gatewayCertificate": "my-llm-cert"}
    rendered = render(config, "gke-l4")
    (listener,) = rendered.one(GATEWAY).inputs["spec"]["listeners"]
    assert listener["tls"]["options"] == {"networking.gke.io/cert-manager-certs": "my-llm-cert"}
    assert not rendered.of_type(CERTIFICATE) and not rendered.of_type(DNS_AUTHORIZATION)


def test_internal_gateway_stays_http_inside_the_vpc(stack: tuple[str, Rendered]) -> None:
    _, rendered = stack
    (listener,) = rendered.one(GATEWAY).inputs["spec"]["listeners"]
    assert (listener["protocol"], listener["port"]) == ("HTTP", 80)
    assert not rendered.of_type(CERTIFICATE) and rendered.outputs["dns_records"] == []


def test_armor_rules_hold_at_most_ten_ranges_each() -> None:
    ranges = [f"203.0.{i}.0/24" for i in range(23)]
    rendered = render({**stack_config("gke-l4"), **PUBLIC, "sourceRanges": ranges}, "gke-l4")
    allow = [r for r in rendered.one(ARMOR).inputs["rules"] if r["action"] == "allow"]
    assert [len(r["match"]["config"]["srcIpRanges"]) for r in allow] == [10, 10, 3]
    assert sorted(x for r in allow for x in r["match"]["config"]["srcIpRanges"]) == sorted(ranges)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"platform": "cloud-run"}, ("'platform'", "allowed for tpu-v6e-1: tpu-vm, gke")),
        ({"platform": "kubernetes"}, ("'kubernetes' is not a platform", "tpu-vm, gke")),
        ({"maxInstances": 3}, ("'maxInstances' is a cloud-run setting", "runs on gke")),
        ({"replicas": 2}, ("'replicas' is a tpu-vm setting", "set platform: tpu-vm")),
        ({"provisioning": "spot"}, ("'provisioning' is a tpu-vm setting",)),
        ({"minReplicas": 5}, ("'minReplicas' (5)", "'maxReplicas' (4)")),
        ({"maxReplicas": 0}, ("maxReplicas",)),
        ({"pickerImage": "ghcr.io/llm-d/llm-d-router-endpoint-picker:main"}, ("floating",)),
        ({"pickerImage": "ghcr.io/llm-d/llm-d-router-endpoint-picker"}, ("no tag",)),
        ({"clusterVersion": "1.34.0-gke.1625999"}, ("'clusterVersion'", "1.34.0-gke.1626000")),
        ({"clusterVersion": "1.34"}, ("'clusterVersion'", "MAJOR.MINOR.PATCH-gke.N")),
        ({"public": True}, ("'sourceRanges'", "public: true")),
        ({"public": True, "sourceRanges": ["0.0.0.0/0"]}, ("'sourceRanges'", "internet")),
        (
            {"public": True, "sourceRanges": ["203.0.113.0/24"]},
            ("'gatewayDomain' is required", "HTTPS only", "'gatewayCertificate'"),
        ),
        (
            {"public": True, "sourceRanges": ["203.0.113.0/24"], "gatewayCertificate": "c1"},
            ("'gatewayDomain' is required",),
        ),
        ({"gatewayDomain": "llm.example.com"}, ("'gatewayDomain'", "public Gateway only")),
        ({"gatewayCertificate": "c1"}, ("'gatewayCertificate'", "public Gateway only")),
        ({"gatewayDomain": "*.example.com"}, ("'gatewayDomain'", "no wildcard")),
        ({"gatewayDomain": "203.0.113.7"}, ("'gatewayDomain'",)),
        ({"gatewayDomain": "localhost"}, ("'gatewayDomain'", "at least two labels")),
        ({"gatewayDomain": "LLM.example.com"}, ("'gatewayDomain'", "lowercase")),
        ({"gatewayDomain": "llm.example.com."}, ("'gatewayDomain'", "no trailing dot")),
        ({"gatewayCertificate": "My_Cert"}, ("'gatewayCertificate'",)),
        (
            {"apiKeySecret": "9f86d081884c7d659a2feaa0c55ad015"},
            ("'apiKeySecret'", "reads as a key"),
        ),
        ({"zone": "us-east5"}, ("'zone' is required for platform gke", "got 'us-east5'")),
        ({"zone": "us-east5-c"}, ("'zone'", "does not offer v6e-1")),
        ({"zone": None}, ("'zone' is required for platform gke",)),
        ({"region": "us-east5"}, ("remove 'region'", "its zone's")),
        ({"nodeProvisioning": "reservation"}, ("'reservationName'",)),
        ({"reservationName": "r1"}, ("'reservationName'",)),
        ({"proxySubnetRange": "10.129.0.0/27"}, ("/26 or larger",)),
        ({"proxySubnetRange": "8.8.8.0/23"}, ("private",)),
        ({"proxySubnetRange": "10.129.0.0/23"}, ("10.128.0.0/9", "auto-mode")),
        ({"proxySubnetRange": "subnet"}, ("'proxySubnetRange'", "IPv4 CIDR")),
        ({"namespace": "kube-system"}, ("'namespace'", "of your own")),
        ({"namespace": "custom-metrics"}, ("'namespace'", "custom-metrics")),
        ({"namespace": "Gemma"}, ("'namespace'",)),
        ({"pickerFailureMode": "failopen"}, ("'FailOpen'", "'FailClose'")),
        ({"image": "vllm/vllm-openai:v0.27.1"}, ("CUDA", "vllm/vllm-tpu")),
    ],
)
def test_nonsense_gke_settings_are_refused(change: dict[str, Any], words: tuple[str, ...]) -> None:
    config = {**stack_config("gke-tpu-v6e"), **change}
    config = {k: v for k, v in config.items() if v is not None}
    with pytest.raises(SettingsError) as info:
        load_settings(config)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize("key", ["minReplicas", "maxReplicas", "pickerImage", "namespace"])
def test_gke_keys_are_refused_on_other_platforms(key: str) -> None:
    value = {"pickerImage": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"}.get(key, 2)
    value = "serving" if key == "namespace" else value
    for stack in ("l4", "tpu-v6e1"):
        with pytest.raises(SettingsError) as info:
            load_settings({**stack_config(stack), key: value})
        assert f"config key {key!r} is a gke setting; this stack runs on" in str(info.value)


def test_program_refuses_before_any_resource() -> None:
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError) as info:
        render({**stack_config("gke-l4"), "maxInstances": 2}, "gke-l4", mocks)
    assert "'maxInstances'" in str(info.value)
    assert mocks.declared == []


@pytest.mark.parametrize("stack_name", GKE_STACKS)
def test_preview_exits_0_and_shows_everything(
    stack_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """How long it takes is a figure of scripts/command-speed, not a window of this test."""
    code = pv.main(["-s", stack_name])
    text = capsys.readouterr().out
    assert code == 0, text
    for part in (
        "gcp:container/cluster:Cluster",
        "kubernetes:inference.networking.k8s.io/v1:InferencePool",
        "kubernetes:apps/v1:Deployment",
        "vllm serve /mnt/models/",
        "Policies",
        "Capacity plan:",
        "per replica",
        "plus GKE cluster management fee: $0.10/h",
        "plus Gateway forwarding rule",
        "Predicted performance (PREDICTED means, not measured",
        "replicas for the SLO (TTFT p95 <= 2000 ms, E2E p95 <= 60000 ms)",
        "Verdict: OK",
    ):
        assert part in text, part
    code = pv.main(["-s", stack_name, "--json"])
    data = json.loads(capsys.readouterr().out)
    # Every verdict of the pack is shown, each with its level.
    assert len(data["policies"]) >= 20
    for verdict in data["policies"]:
        line = f"[{verdict['verdict']}] {verdict['policy']} ({verdict['enforcement_level']})"
        assert line in text, line
    config = stack_config(stack_name)
    cost = data["cost"]
    settings = load_settings(config)
    # One node a replica, at the node pool's own rate (on-demand, spot or flex-start).
    provisioning = settings.gke.node_provisioning
    node_price = {"spot": settings.gke_shape.spot_price}.get(provisioning, settings.gke_shape.price)
    unknown = node_price.is_lower_bound  # a rate with no figure anywhere: no price at all
    if provisioning in ("on-demand", "spot"):
        assert cost["usd_per_hour"] == (None if unknown else node_price.usd_per_hour)
    replicas = data["plan"]["replicas"]
    assert replicas["stack_max_replicas"] == int(config["maxReplicas"])
    for end, month in (("max", "usd_per_month_max"), ("min", "usd_per_month_idle")):
        assert replicas[f"usd_per_month_at_{end}"] == pytest.approx(cost[month])
        assert replicas[f"usd_per_month_at_{end}"] == (
            None if unknown else pytest.approx(replicas[f"usd_per_hour_at_{end}"] * 730)
        )
    assert (cost["instances_min"], cost["instances_max"]) == (
        int(config["minReplicas"]),
        int(config["maxReplicas"]),
    )
    # The system node's rate is not confirmed on Google's page: counted at the figure the
    # catalogue recorded earlier, its source says so. The node's own rate decides the rest:
    # gke-l4's on-demand g2 node is quoted (an estimate); gke-tpu-v6e's spot v6e has no figure
    # anywhere (its price unknown, every figure from it null), and the text says which.
    (node,) = [item for item in cost["fixed"] if item["item"].startswith("system node")]
    assert node["usd_per_hour"] and "UNCONFIRMED (quoted by " in node["source"]
    assert node["status"] == "estimate"
    # The text marks the quoted node's figure, never the confirmed fee's.
    assert f"plus {node['item']}: ~${node['usd_per_hour']:,.2f}/h" in text
    assert "plus GKE cluster management fee: ~" not in text
    assert all(item["usd_per_hour"] is not None for item in cost["fixed"])
    expected = "unknown" if stack_name == "gke-tpu-v6e" else "estimate"
    assert cost["price_status"] == expected and unknown == (expected == "unknown")
    assert ("UNKNOWN, no figure anywhere" in cost["price_source"]) == unknown
    assert "ESTIMATE" in cost["price_source"] or unknown
    assert ("UNKNOWN" in text) == unknown and "LOWER BOUNDS" not in text
    assert ">=$" not in text.replace(" ", "") and "at least $" not in text
    assert ("~ ESTIMATES" in text) == (expected == "estimate")
    if unknown:
        assert cost["usd_per_month_idle"] is cost["usd_per_month_max"] is None
        assert cost["usd_per_million_output_tokens"] is None and "cost unknown" in text
        return
    fixed = sum(item["usd_per_hour"] or 0.0 for item in cost["fixed"])
    hours = 730
    assert cost["usd_per_month_idle"] == pytest.approx(
        hours * (fixed + int(config["minReplicas"]) * cost["usd_per_hour"])
    )
    assert cost["usd_per_month_max"] == pytest.approx(
        hours * (fixed + int(config["maxReplicas"]) * cost["usd_per_hour"])
    )


def test_the_hooks_call_the_stacks_own_gateway_whatever_the_config_map_says() -> None:
    """The program binds the hooks to `https://<gatewayDomain>`; a ConfigMap pointed at the
    metadata server changes nothing about where the key goes."""
    settings = load_settings({**stack_config("gke-l4"), **PUBLIC, "postDeployBenchmark": False})
    assert gke.endpoint_url(settings, "") == f"https://{DOMAIN}"
    with FakeVllmServer(FakeVllmConfig(served_model_name=settings.model.served_name)) as fake:

        def make_hook() -> Any:
            binding = post_deploy_binding(
                settings, "gemma-gke-l4", NoAuth(), url_keys=("data.endpointUrl",), url=fake.url
            )
            assert binding is not None
            return (binding.after_create or [])[0]

        outputs = {"data": {"endpointUrl": "http://169.254.169.254"}}
        assert run_hook(make_hook, outputs, stack="gke-l4", type_=CONFIG_MAP) is None
        assert "/v1/chat/completions" in [r.path for r in fake.requests]


def test_post_deploy_health_check_reads_the_gateway_url_from_the_endpoint_config_map() -> None:
    """The hook as the program binds it, called like the engine with the ConfigMap's outputs,
    against a fake vLLM standing in for the Gateway."""
    settings = load_settings({**stack_config("gke-l4"), **PUBLIC, "postDeployBenchmark": False})

    def make_hook() -> Any:
        binding = post_deploy_binding(
            settings, "gemma-gke-l4", NoAuth(), url_keys=("data.endpointUrl",)
        )
        assert binding is not None
        return (binding.after_create or [])[0]

    with FakeVllmServer(
        FakeVllmConfig(served_model_name=settings.model.served_name, cold_start_503s=1)
    ) as fake:
        outputs = {"data": {"endpointUrl": fake.url}, "metadata": {"name": "gemma4-endpoint"}}
        assert run_hook(make_hook, outputs, stack="gke-l4", type_=CONFIG_MAP) is None
        assert "/v1/chat/completions" in [r.path for r in fake.requests]
    missing = run_hook(make_hook, {"data": {}}, stack="gke-l4", type_=CONFIG_MAP)
    assert missing is not None and "data.endpointUrl" in str(missing)


@pytest.mark.parametrize(("stack_name", "machine"), [("gke-l4", "g2-standard-8"), ("l4", None)])
def test_planner_prices_the_platforms_instance(stack_name: str, machine: str | None) -> None:
    """`gemma4 plan` prices a GKE replica's node, not the Cloud Run instance of the same GPU."""
    from serving.capacity.plan import report
    from serving.catalog.hardware import GKE_SHAPES, HARDWARE

    settings = load_settings(stack_config(stack_name))
    figures = report(stack_name, settings, 1.0)
    expected = GKE_SHAPES["l4"].price if machine else HARDWARE["l4"].price
    assert figures["usd_per_hour"] == expected.usd_per_hour
    assert (machine or "run/pricing") in figures["price_source"]


def test_autoscaler_input_survives_monitoring_off_and_an_existing_proxy_subnet() -> None:
    rendered = render(
        {**stack_config("gke-l4"), "monitoring": False, "proxySubnetRange": "existing"}, "gke-l4"
    )
    monitored = {m.inputs["metadata"]["name"] for m in rendered.of_type(POD_MONITORING)}
    assert monitored == {gke.VLLM_NAME}  # the HorizontalPodAutoscaler's metric source
    assert rendered.of_type(SUBNET) == []
    assert rendered.of_type("gcp:monitoring/dashboard:Dashboard") == []


def test_a_changed_deployment_runs_the_post_deploy_checks_again() -> None:
    """The hooks are bound to the endpoint ConfigMap: it changes whenever the replicas do."""
    base = load_settings(stack_config("gke-l4"))
    revision = gke.serving_revision(base)
    for change in (
        {"image": "vllm/vllm-openai@sha256:" + "a" * 64},
        {"maxNumSeqs": 4},
        {"pickerImage": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0"},
        {"maxReplicas": 3},
    ):
        changed = load_settings({**stack_config("gke-l4"), **change})
        assert gke.serving_revision(changed) != revision, change
    assert gke.serving_revision(load_settings(stack_config("gke-l4"))) == revision


@pytest.mark.parametrize(
    ("base", "changes", "code", "words"),
    [
        (
            "gke-l4",
            {"pickerImage": "ghcr.io/llm-d/llm-d-router-endpoint-picker:main"},
            2,
            ("config key 'pickerImage'", "floating tag 'main'"),
        ),
        (
            "gke-tpu-v6e",
            {"pickerImage": "ghcr.io/llm-d/llm-d-router-endpoint-picker:latest"},
            2,
            ("config key 'pickerImage'", "floating tag 'latest'"),
        ),
        ("gke-l4", {"public": True}, 2, ("config key 'sourceRanges' is required",)),
        (
            "gke-l4",
            {"public": True, "sourceRanges": ["203.0.113.0/24"]},
            2,
            ("config key 'gatewayDomain' is required", "HTTPS only"),
        ),
        (
            "gke-tpu-v6e",
            # `openssl rand -hex 32` pasted where the secret's name belongs.
            {"apiKeySecret": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
            2,
            ("config key 'apiKeySecret' reads as a key",),
        ),
        (
            "gke-l4",
            {"maxModelLen": 131072},
            1,
            ("[FAIL] max-model-len-cap (mandatory)", "Verdict: BLOCKED, 1 mandatory"),
        ),
        ("gke-l4", {"minReplicas": 5}, 2, ("'minReplicas' (5) must not exceed 'maxReplicas'",)),
    ],
)
def test_near_variants_of_a_gke_stack_file_are_refused_or_blocked(
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    base: str,
    changes: dict[str, Any],
    code: int,
    words: tuple[str, ...],
) -> None:
    """What a user's edited stack file can say: `gemma4 preview --stack-file` refuses it
    (exit 2, the key named) or shows the mandatory policy it fails (exit 1)."""
    import yaml

    data = yaml.safe_load((ROOT / f"Pulumi.{base}.yaml").read_text())
    for key, value in changes.items():
        data["config"][f"gemma4-vllm:{key}"] = value
    path = tmp_path / f"Pulumi.{base}.yaml"
    path.write_text(yaml.safe_dump(data))
    assert pv.main(["--stack-file", str(path), "-s", base]) == code
    captured = capsys.readouterr()
    text = captured.out + captured.err
    for word in words:
        assert word in text, (word, text[-2000:])
    assert "Traceback" not in text


@pytest.mark.parametrize("extra", [{}, PUBLIC], ids=["internal", "public"])
@pytest.mark.parametrize("stack_name", GKE_STACKS)
def test_each_kubernetes_service_account_acts_as_its_workload_identity_account(
    stack_name: str, extra: dict[str, Any]
) -> None:
    """Each Kubernetes ServiceAccount acts as exactly the Google account whose Workload
    Identity binding names it (the email comes from the account's Output)."""
    rendered = render({**stack_config(stack_name), **extra}, stack_name)
    emails = {
        r.inputs["accountId"]: f"{r.inputs['accountId']}@test-project.iam.gserviceaccount.com"
        for r in rendered.of_type("gcp:serviceaccount/account:Account")
    }
    members = [
        r.inputs
        for r in rendered.of_type("gcp:serviceaccount/iAMMember:IAMMember")
        if r.inputs["role"] == "roles/iam.workloadIdentityUser"
    ]
    ksas = [
        r.inputs
        for r in rendered.of_type("kubernetes:core/v1:ServiceAccount")
        if "iam.gke.io/gcp-service-account" in (r.inputs["metadata"].get("annotations") or {})
    ]
    assert len(ksas) >= 2  # vLLM's (bucket reader) and the metrics adapter's
    for ksa in ksas:
        meta = ksa["metadata"]
        email = meta["annotations"]["iam.gke.io/gcp-service-account"]
        assert email in emails.values(), email
        subject = f"[{meta['namespace']}/{meta['name']}]"
        granted = [m for m in members if m["member"].endswith(subject)]
        assert len(granted) == 1, subject
        assert granted[0]["serviceAccountId"].endswith(f"/serviceAccounts/{email}")
