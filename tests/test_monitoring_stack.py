"""Monitoring in the shipped stacks, rendered by the real program under Pulumi's mocks.

The captured inputs (engine camelCase) are checked against Google's discovery documents:
the collector container against Cloud Run v2 (`run.v2`, `GoogleCloudRunV2Container`), the
alert policies against `monitoring.v3` `AlertPolicy`, the dashboard JSON against
`monitoring.v1` `Dashboard`; and against pulumi-gcp's own input types.
"""

from __future__ import annotations

import inspect
import json
import logging
from typing import Any

import pulumi
import pytest
import yaml
from pulumi_gcp import monitoring

from serving.config.settings import Settings, load_settings
from serving.render import monitoring as spec
from tests.pulumi_harness import RecordingMocks, Rendered, render, stack_config
from tests.support.discovery import load, schema_errors

SERVICE = "gcp:cloudrunv2/service:Service"
SECRET = "gcp:secretmanager/secret:Secret"
SECRET_VERSION = "gcp:secretmanager/secretVersion:SecretVersion"
SECRET_IAM = "gcp:secretmanager/secretIamMember:SecretIamMember"
PROJECT_IAM = "gcp:projects/iAMMember:IAMMember"
API = "gcp:projects/service:Service"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
ALERT = "gcp:monitoring/alertPolicy:AlertPolicy"
QUEUED = "pulumi-python:dynamic/gemma4:TpuQueuedResource"
CHANNELS = ["projects/test-project/notificationChannels/42"]
#: Pulumi's plural list names that differ from the Cloud Run v2 API's.
PULUMI_TO_API = {"dependsOns": "dependsOn", "envs": "env", "commands": "command"}


@pytest.fixture(scope="module")
def l4() -> Rendered:
    # With a channel: without one no alert policy is declared (tested below).
    return render({**stack_config("l4"), "monitoringNotificationChannels": CHANNELS}, "l4")


@pytest.fixture(scope="module")
def rtx6000() -> Rendered:
    return render(stack_config("rtx6000"), "rtx6000")


def containers(rendered: Rendered) -> dict[str, dict[str, Any]]:
    found = rendered.one(SERVICE).inputs["template"]["containers"]
    return {c["name"]: c for c in found}


def as_api(value: Any) -> Any:
    if isinstance(value, dict):
        return {PULUMI_TO_API.get(k, k): as_api(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_api(v) for v in value]
    return value


# --- the collector sidecar (Cloud Run) --------------------------------------------------


def test_collector_runs_beside_vllm_without_touching_its_start(l4: Rendered) -> None:
    found = containers(l4)
    assert list(found) == ["vllm", "collector"]
    vllm, collector = found["vllm"], found["collector"]
    # vLLM stays the ingress container, with its probes, and waits for nothing.
    assert "ports" in vllm and "ports" not in collector
    assert "dependsOns" not in vllm
    assert vllm["startupProbe"]["httpGet"] == {"path": "/health", "port": 8080}
    # The collector starts only after vLLM's startup probe passed, and has no probe that
    # could restart the instance.
    assert collector["dependsOns"] == ["vllm"]
    assert not {"startupProbe", "livenessProbe", "readinessProbe"} & set(collector)
    assert collector["resources"] == {
        "limits": {"cpu": "1", "memory": "512Mi"},
        "cpuIdle": False,
        "startupCpuBoost": False,
    }
    assert collector["image"] == (
        "us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/"
        "cloud-run-gmp-sidecar:1.2.0"
    )


def test_collector_fits_the_cloud_run_v2_contract(l4: Rendered) -> None:
    run = load("run", "v2")
    template = l4.one(SERVICE).inputs["template"]
    collector = containers(l4)["collector"]
    assert schema_errors(run, "GoogleCloudRunV2Container", as_api(collector)) == []
    (volume,) = [v for v in template["volumes"] if v["name"] == "collector-config"]
    assert schema_errors(run, "GoogleCloudRunV2Volume", as_api(volume)) == []
    # The checker does refuse a misspelt field.
    assert schema_errors(run, "GoogleCloudRunV2Container", {**collector, "dependOn": ["vllm"]})
    # Every container it depends on exists.
    assert set(collector["dependsOns"]) <= set(containers(l4))


def test_collector_reads_its_config_from_the_declared_secret(l4: Rendered) -> None:
    template = l4.one(SERVICE).inputs["template"]
    collector = containers(l4)["collector"]
    (mount,) = collector["volumeMounts"]
    assert mount == {"name": "collector-config", "mountPath": "/etc/rungmp"}
    (volume,) = [v for v in template["volumes"] if v["name"] == mount["name"]]
    secret = l4.one(SECRET).inputs
    assert volume["secret"]["secret"] == secret["secretId"]
    # The sidecar reads /etc/rungmp/config.yaml; the item pins the declared version.
    assert volume["secret"]["items"] == [{"path": "config.yaml", "version": "1"}]
    # pulumi-gcp marks secret_data as a Pulumi secret (the sig key wraps the value).
    wrapped = l4.one(SECRET_VERSION).inputs["secretData"]
    data = yaml.safe_load(wrapped["value"] if isinstance(wrapped, dict) else wrapped)
    assert data["kind"] == "RunMonitoring"
    (endpoint,) = data["spec"]["endpoints"]
    port = containers(l4)["vllm"]["ports"]["containerPort"]
    assert endpoint["port"] == str(int(port)) and endpoint["path"] == "/metrics"


def test_identity_gets_metric_writer_and_only_its_config_secret(l4: Rendered) -> None:
    account = l4.one(SERVICE).inputs["template"]["serviceAccount"]
    member = f"serviceAccount:{account}"
    project_roles = [(r.inputs["role"], r.inputs["member"]) for r in l4.of_type(PROJECT_IAM)]
    assert project_roles == [("roles/monitoring.metricWriter", member)]
    secret_grants = [
        (g.inputs["secretId"], g.inputs["role"])
        for g in l4.of_type(SECRET_IAM)
        if g.inputs["member"] == member
    ]
    assert secret_grants == [
        (l4.one(SECRET).inputs["secretId"], "roles/secretmanager.secretAccessor")
    ]


def test_service_waits_for_its_config_and_grants(l4: Rendered) -> None:
    order = [r.type for r in l4.resources]
    for needed in (SECRET_VERSION, SECRET_IAM, PROJECT_IAM):
        assert order.index(needed) < order.index(SERVICE)
    assert "monitoring.googleapis.com" in [r.inputs["service"] for r in l4.of_type(API)]


# --- dashboard and alerts ---------------------------------------------------------------


def test_dashboard_is_declared_and_selects_this_service(rtx6000: Rendered) -> None:
    body = json.loads(rtx6000.one(DASHBOARD).inputs["dashboardJson"])
    assert schema_errors(load("monitoring", "v1"), "Dashboard", body) == []
    assert rtx6000.one(DASHBOARD).inputs["project"] == "test-project"
    service_name = "gemma-rtx6000-vllm-service-1234"  # the mock's name for the service
    text = json.dumps(body)
    assert f'service_name=\\"{service_name}\\"' in text
    assert "Speculative decoding: acceptance rate" in text  # MTP is on in this stack


def test_alert_policies_are_api_shaped_pulumi_inputs(l4: Rendered) -> None:
    v3 = load("monitoring", "v3")
    policies = l4.of_type(ALERT)
    assert {p.name.rsplit("-alert-", 1)[1] for p in policies} == {
        "ttft-p95",
        "e2e-p95",
        "success-rate",
        "waiting",
        "kv-cache",
    }
    expected = spec.alert_policies(
        spec.cloud_run_target("l4", "l4", "gemma-l4-vllm-service-1234", mtp=False),
        _settings("l4").monitoring,
        _settings("l4").slo,
    )
    for policy in policies:
        inputs = {k: v for k, v in policy.inputs.items() if k != "project"}
        assert policy.inputs["project"] == "test-project"
        assert schema_errors(v3, "AlertPolicy", inputs) == []
        assert inputs == expected[policy.name.rsplit("-alert-", 1)[1]]


def test_alert_inputs_are_pulumi_gcp_input_types(l4: Rendered) -> None:
    def names(cls: type) -> set[str]:
        return {_camel(p) for p in inspect.signature(cls).parameters}

    for policy in l4.of_type(ALERT):
        assert set(policy.inputs) <= names(monitoring.AlertPolicyArgs)
        (condition,) = policy.inputs["conditions"]
        assert set(condition) <= names(monitoring.AlertPolicyConditionArgs)
        promql = condition["conditionPrometheusQueryLanguage"]
        required = {
            _camel(name)
            for name, p in inspect.signature(
                monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs
            ).parameters.items()
            if p.default is inspect.Parameter.empty
        }
        assert required <= set(promql)
        assert set(promql) <= names(
            monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs
        )
        assert set(policy.inputs["documentation"]) <= names(monitoring.AlertPolicyDocumentationArgs)


def test_no_channel_declares_no_alert_and_warns_and_channels_reach_every_policy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        silent = render(stack_config("l4"), "l4")
    assert "monitoringNotificationChannels is empty: no alert policy is declared" in caplog.text
    assert silent.of_type(ALERT) == [] and len(silent.of_type(DASHBOARD)) == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        rendered = render({**stack_config("l4"), "monitoringNotificationChannels": CHANNELS}, "l4")
    assert "monitoringNotificationChannels" not in caplog.text
    assert [p.inputs["notificationChannels"] for p in rendered.of_type(ALERT)] == [CHANNELS] * 5


# --- switched off -----------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["l4", "rtx6000"])
def test_monitoring_false_declares_none_of_it(stack: str) -> None:
    rendered = render({**stack_config(stack), "monitoring": False}, stack)
    assert list(containers(rendered)) == ["vllm"]
    template = rendered.one(SERVICE).inputs["template"]
    assert [v["name"] for v in template["volumes"]] == ["models", "compile-cache"]
    for type_ in (SECRET, SECRET_VERSION, PROJECT_IAM, DASHBOARD, ALERT):
        assert rendered.of_type(type_) == [], type_
    assert "monitoring.googleapis.com" not in [r.inputs["service"] for r in rendered.of_type(API)]
    assert not [r for r in rendered.resources if "VllmMonitoring" in r.type]


def test_bad_monitoring_config_declares_nothing() -> None:
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError, match="monitoringNotificationChannels"):
        render(
            {**stack_config("l4"), "monitoringNotificationChannels": ["alerts@example.com"]},
            mocks=mocks,
        )
    with pytest.raises(pulumi.RunError, match="monitoringSidecarImage"):
        render(
            {**stack_config("l4"), "monitoringSidecarImage": "gcr.io/x/collector:latest"},
            mocks=mocks,
        )
    assert mocks.declared == []


# --- TPU: the Ops Agent on every node ---------------------------------------------------


@pytest.fixture(scope="module")
def tpu() -> Rendered:
    return render(
        {
            **stack_config("tpu-v6e1"),
            "sourceRanges": ["203.0.113.0/24"],
            "monitoringNotificationChannels": CHANNELS,
        },
        "tpu-v6e1",
    )


def test_tpu_nodes_install_the_pinned_ops_agent(tpu: Rendered) -> None:
    metadata = tpu.one(QUEUED).inputs["metadata"]
    agent = json.loads(metadata["vllm-launch"])["opsAgent"]
    assert agent["version"] == "2.70.0" and spec.OPS_AGENT_REPO_SCRIPT in metadata["startup-script"]
    job = spec.scrape_job("gemma-tpu-v6e1")
    assert f"job_name: {job}" in agent["config"] and "localhost:8000" in agent["config"]
    # Installed after vLLM has started, so it never delays serving.
    script = metadata["startup-script"]
    assert script.index('"docker", "run"') < script.index("ops_agent(launch")


def test_tpu_node_identity_gets_only_metric_writer(tpu: Rendered) -> None:
    email = tpu.one(QUEUED).inputs["serviceAccountEmail"]
    assert [(r.inputs["role"], r.inputs["member"]) for r in tpu.of_type(PROJECT_IAM)] == [
        ("roles/monitoring.metricWriter", f"serviceAccount:{email}")
    ]


def test_tpu_dashboard_and_alerts_select_the_scrape_job(tpu: Rendered) -> None:
    body = json.loads(tpu.one(DASHBOARD).inputs["dashboardJson"])
    assert schema_errors(load("monitoring", "v1"), "Dashboard", body) == []
    text = json.dumps(body)
    assert 'job=\\"gemma-tpu-v6e1-vllm\\"' in text and "Cloud Run" not in text
    for policy in tpu.of_type(ALERT):
        query = policy.inputs["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
        assert 'job="gemma-tpu-v6e1-vllm"' in query


def test_tpu_without_monitoring_has_no_agent_nor_role() -> None:
    rendered = render(
        {**stack_config("tpu-v6e1"), "sourceRanges": ["203.0.113.0/24"], "monitoring": False},
        "tpu-v6e1",
    )
    assert json.loads(rendered.one(QUEUED).inputs["metadata"]["vllm-launch"])["opsAgent"] is None
    assert rendered.of_type(PROJECT_IAM) == [] and rendered.of_type(DASHBOARD) == []


# --- helpers ----------------------------------------------------------------------------


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.title() for part in rest)


def _settings(stack: str) -> Settings:
    """The stack's settings as the fixtures render them (with a notification channel)."""
    return load_settings({**stack_config(stack), "monitoringNotificationChannels": CHANNELS})
