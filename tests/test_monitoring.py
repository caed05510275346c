"""The monitoring bodies, checked against documents nobody here wrote.

- Dashboards against the Cloud Monitoring API's discovery document `monitoring.v1` (schema
  `Dashboard`), alert policies against `monitoring.v3` (schema `AlertPolicy`), both as shipped
  in google-api-python-client.
- Every PromQL query through a real PromQL parser (`promql-parser`, Rust bindings), and every
  metric it names against the names vLLM exports at the pinned versions: the vLLM snapshots
  `serving/data/vllm-0.27.1.json` (GPU image) and `serving/data/vllm-tpu-0.27.0.json` (TPU
  image), read from vLLM's own source; the labels each family carries come from a second,
  independent extraction (`tests/data/vllm-0.27.1-metrics.json`, written by
  `scripts/vllm_metric_names.py` from `vllm/v1/metrics/loggers.py` and
  `vllm/v1/spec_decode/metrics.py`), which must agree with the snapshot on names and kinds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from serving.config.checks import SettingsError
from serving.config.groups import MonitoringSettings, SloSettings
from serving.config.settings import Settings, load_settings
from serving.render import monitoring as m
from tests.pulumi_harness import stack_config
from tests.support.discovery import load, schema_errors

ROOT = Path(__file__).resolve().parent.parent
VLLM = json.loads((ROOT / "tests/data/vllm-0.27.1-metrics.json").read_text())
FAMILIES: dict[str, dict[str, Any]] = VLLM["families"]
SNAPSHOTS = {
    name: json.loads((ROOT / "serving/data" / name).read_text())
    for name in ("vllm-0.27.1.json", "vllm-tpu-0.27.0.json")
}


def every_query(target: m.Target, settings: MonitoringSettings, slo: SloSettings) -> list[str]:
    """Every PromQL query the dashboard and the alerts run."""
    found = [
        data_set["timeSeriesQuery"]["prometheusQuery"]
        for tile in m.dashboard(target, settings, slo)["mosaicLayout"]["tiles"]
        for data_set in tile["widget"].get("xyChart", {}).get("dataSets", [])
        if "prometheusQuery" in data_set["timeSeriesQuery"]
    ]
    found += [a.query for a in m.alerts(target, settings, slo)]
    return found


def exposed(snapshot: str) -> set[str]:
    """Every series name a vLLM snapshot says its Prometheus logger exposes."""
    return {name for m in SNAPSHOTS[snapshot]["metrics"] for name in m["exposed"]}


#: The images each platform runs: Cloud Run the GPU image, TPU nodes vllm-tpu (0.27.0 is the
#: published TPU release; 0.27.1 also checked).
IMAGES = {"cloud_run": ("vllm-0.27.1.json",), "tpu": ("vllm-0.27.1.json", "vllm-tpu-0.27.0.json")}
#: Cloud Run metric types the queries may name (Cloud Run's metrics list), in PromQL form.
CLOUD_RUN_TYPES = (m.RUN_REQUEST_COUNT, m.RUN_INSTANCE_COUNT, m.RUN_GPU_UTILIZATIONS)
#: Labels the collectors add: the sidecar's RunMonitoring target labels, Prometheus' `job`,
#: Cloud Monitoring's `monitored_resource`, and the Cloud Run metric labels used.
COLLECTOR_LABELS = {
    "service_name",
    "revision_name",
    "configuration_name",
    "instanceId",
    "job",
    "monitored_resource",
    "response_code_class",
}


def settings(stack: str, **overrides: Any) -> Settings:
    return load_settings({**stack_config(stack), **overrides})


def targets(s: Settings) -> list[m.Target]:
    mtp = s.model.drafter_card is not None
    return [
        m.cloud_run_target("l4", s.hardware, "gemma-l4-vllm-service-1234", mtp=mtp),
        m.tpu_target("tpu-v6e1", s.hardware, "gemma-tpu-v6e1-vllm", mtp=mtp),
    ]


CASES = [
    (stack, target)
    for stack in ("l4", "rtx6000", "tpu-v6e1")
    for target in targets(settings(stack))
]


# --- the discovery checker itself refuses what the API refuses --------------------------


def test_checker_refuses_unknown_fields_wrong_types_and_enums() -> None:
    v3 = load("monitoring", "v3")
    good = {"displayName": "x", "combiner": "OR", "conditions": []}
    assert schema_errors(v3, "AlertPolicy", good) == []
    assert schema_errors(v3, "AlertPolicy", {**good, "combiner": "XOR"})
    assert schema_errors(v3, "AlertPolicy", {**good, "conditions": [{"promql": {}}]})
    assert schema_errors(v3, "AlertPolicy", {**good, "enabled": "yes"})
    v1 = load("monitoring", "v1")
    tile = {"widget": {"xyChart": {"dataSets": [{"plotType": "PIE"}]}}}
    assert schema_errors(v1, "Dashboard", {"mosaicLayout": {"tiles": [tile]}})


# --- dashboard --------------------------------------------------------------------------


@pytest.mark.parametrize(("stack", "target"), CASES)
def test_dashboard_fits_the_monitoring_v1_dashboard_schema(stack: str, target: m.Target) -> None:
    s = settings(stack)
    body = m.dashboard(target, s.monitoring, s.slo)
    assert schema_errors(load("monitoring", "v1"), "Dashboard", body) == []
    # Round-trips through JSON as the Pulumi resource sends it.
    assert json.loads(json.dumps(body)) == body


def test_dashboard_covers_what_an_sre_looks_at() -> None:
    s = settings("rtx6000")
    cloud_run, tpu = targets(s)
    titles = [
        t["widget"]["title"]
        for t in m.dashboard(cloud_run, s.monitoring, s.slo)["mosaicLayout"]["tiles"]
    ]
    for wanted in (
        "Time to first token",
        "Inter-token latency",
        "End-to-end request latency",
        "Finished requests per second",
        "Tokens per second",
        "Requests running and waiting",
        "KV cache usage",
        "Finished requests by reason",
        "Speculative decoding: acceptance rate",
        "Speculative decoding: tokens per draft",
        "Cloud Run responses by status class",
        "Cloud Run instances",
        "GPU utilization (Cloud Run)",
    ):
        assert wanted in titles
    tpu_titles = [
        t["widget"]["title"] for t in m.dashboard(tpu, s.monitoring, s.slo)["mosaicLayout"]["tiles"]
    ]
    assert not [t for t in tpu_titles if "Cloud Run" in t]


def test_speculative_panels_only_with_mtp() -> None:
    s = settings("l4")
    assert s.model.drafter_card is None
    (cloud_run, _) = targets(s)
    titles = json.dumps(m.dashboard(cloud_run, s.monitoring, s.slo))
    assert "Speculative" not in titles and "spec_decode" not in titles


def test_tiles_do_not_overlap() -> None:
    s = settings("rtx6000")
    tiles = m.dashboard(targets(s)[0], s.monitoring, s.slo)["mosaicLayout"]["tiles"]
    cells = set()
    for t in tiles:
        assert t["xPos"] + t["width"] <= 48
        for x in range(t["xPos"], t["xPos"] + t["width"]):
            for y in range(t["yPos"], t["yPos"] + t["height"]):
                assert (x, y) not in cells
                cells.add((x, y))


def test_cloud_run_panels_use_cloud_run_metric_types_and_the_service() -> None:
    s = settings("l4")
    cloud_run = targets(s)[0]
    filters = [
        d["timeSeriesQuery"]["timeSeriesFilter"]["filter"]
        for t in m.dashboard(cloud_run, s.monitoring, s.slo)["mosaicLayout"]["tiles"]
        for d in t["widget"].get("xyChart", {}).get("dataSets", [])
        if "timeSeriesFilter" in d["timeSeriesQuery"]
    ]
    assert {re.search(r'metric.type="([^"]+)"', f)[1] for f in filters} == set(CLOUD_RUN_TYPES)  # type: ignore[index]
    assert all('resource.type="cloud_run_revision"' in f for f in filters)
    assert all('resource.label."service_name"="gemma-l4-vllm-service-1234"' in f for f in filters)


# --- alert policies ---------------------------------------------------------------------


@pytest.mark.parametrize(("stack", "target"), CASES)
def test_alert_policies_fit_the_monitoring_v3_schema(stack: str, target: m.Target) -> None:
    s = settings(stack)
    v3 = load("monitoring", "v3")
    policies = m.alert_policies(target, s.monitoring, s.slo)
    expected = {"ttft-p95", "e2e-p95", "success-rate", "waiting", "kv-cache"}
    # TPU nodes are always on: their absence is an outage (on Cloud Run it is scale to zero).
    assert set(policies) == (expected | {"absent"} if target.platform == "tpu" else expected)
    for policy in policies.values():
        assert schema_errors(v3, "AlertPolicy", policy) == []
        # Rules the v3 document states in its descriptions.
        assert 1 <= len(policy["conditions"]) <= 6
        promql = policy["conditions"][0]["conditionPrometheusQueryLanguage"]
        assert promql["query"]
        evaluation = int(promql["evaluationInterval"].removesuffix("s"))
        assert evaluation > 0 and evaluation % 30 == 0
        assert int(promql["duration"].removesuffix("s")) >= 0
        assert re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", promql["alertRule"])
        assert len(policy["userLabels"]) <= 64
        for key, value in policy["userLabels"].items():
            assert re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key)
            assert re.fullmatch(r"[a-z0-9_-]{0,63}", value)
        assert "notificationChannels" not in policy  # none configured


def test_thresholds_come_from_the_slo_keys() -> None:
    s = settings("l4", sloP95TtftMs=750, sloP95E2EMs=12000, sloMinSuccessRate=0.995)
    policies = m.alert_policies(targets(s)[0], s.monitoring, s.slo)

    def query(key: str) -> str:
        q: str = policies[key]["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
        return q

    assert query("ttft-p95").endswith("> 0.75")
    assert "vllm:time_to_first_token_seconds_bucket" in query("ttft-p95")
    assert query("e2e-p95").endswith("> 12")
    assert query("success-rate").endswith("> 0.005")
    assert "750 ms" in policies["ttft-p95"]["displayName"]


def test_saturation_thresholds_and_duration_come_from_settings() -> None:
    s = settings(
        "tpu-v6e1",
        monitoringMaxWaitingRequests=3,
        monitoringMaxKvCacheUsage=0.8,
        monitoringAlertMinutes=10,
    )
    policies = m.alert_policies(targets(s)[1], s.monitoring, s.slo)
    waiting = policies["waiting"]["conditions"][0]["conditionPrometheusQueryLanguage"]
    assert waiting["query"] == 'max (vllm:num_requests_waiting{job="gemma-tpu-v6e1-vllm"}) > 3'
    assert waiting["duration"] == "600s"
    kv = policies["kv-cache"]["conditions"][0]["conditionPrometheusQueryLanguage"]
    assert kv["query"].endswith("> 0.8") and "vllm:kv_cache_usage_perc" in kv["query"]


def test_unset_slos_have_no_alert() -> None:
    s = settings("l4", sloP95TtftMs=None, sloMinSuccessRate=0)
    keys = set(m.alert_policies(targets(s)[0], s.monitoring, s.slo))
    assert keys == {"e2e-p95", "waiting", "kv-cache"}
    assert set(m.alert_keys("cloud_run", s.monitoring, s.slo)) == keys


def test_alert_keys_match_the_policies_for_both_platforms() -> None:
    s = settings("rtx6000")
    for target in targets(s):
        assert m.alert_keys(target.platform, s.monitoring, s.slo) == list(
            m.alert_policies(target, s.monitoring, s.slo)
        )


def test_channels_are_attached_to_every_policy() -> None:
    channels = [
        "projects/my-proj-1/notificationChannels/123",
        "projects/my-proj-1/notificationChannels/456",
    ]
    s = settings("l4", monitoringNotificationChannels=channels)
    for policy in m.alert_policies(targets(s)[0], s.monitoring, s.slo).values():
        assert policy["notificationChannels"] == channels


def test_success_rate_reads_cloud_run_5xx_on_cloud_run_and_vllm_errors_on_tpu() -> None:
    s = settings("l4")
    cloud_run, tpu = targets(s)
    run_query = m.alerts(cloud_run, s.monitoring, s.slo)[2].query
    assert 'run_googleapis_com:request_count{monitored_resource="cloud_run_revision"' in run_query
    assert 'response_code_class="5xx"' in run_query
    tpu_query = m.alerts(tpu, s.monitoring, s.slo)[2].query
    assert 'finished_reason="error"' in tpu_query and "run_googleapis_com" not in tpu_query


# --- every PromQL query parses and names what vLLM 0.27.1 exports -----------------------


def selectors(node: Any) -> list[Any]:
    """Every vector selector in a parsed PromQL expression."""
    found = []
    if isinstance(node, promql_parser.VectorSelector):
        return [node]
    for attribute in ("expr", "lhs", "rhs", "vector_selector", "param"):
        child = getattr(node, attribute, None)
        if child is not None:
            found += selectors(child)
    for child in getattr(node, "args", None) or []:
        found += selectors(child)
    return found


def grouping_labels(node: Any) -> list[str]:
    labels = []
    modifier = getattr(node, "modifier", None)
    if modifier is not None:
        labels += list(getattr(modifier, "labels", []) or [])
    for attribute in ("expr", "lhs", "rhs", "param"):
        child = getattr(node, attribute, None)
        if child is not None:
            labels += grouping_labels(child)
    for child in getattr(node, "args", None) or []:
        labels += grouping_labels(child)
    return labels


def known_metric(name: str, snapshots: tuple[str, ...] = ("vllm-0.27.1.json",)) -> bool:
    """A series every snapshot's vLLM exposes, or a Cloud Run metric."""
    if name in {m.promql_metric_name(t) for t in CLOUD_RUN_TYPES}:
        return True
    return all(name in exposed(snapshot) for snapshot in snapshots)


def vllm_labels(name: str) -> set[str]:
    family = re.sub(r"(_total|_bucket|_sum|_count)$", "", name)
    labels = set(VLLM["common_labels"]) | set(FAMILIES.get(family, {}).get("labels", []))
    if name.endswith("_bucket"):
        labels.add("le")
    return labels


def check_query(query: str, snapshots: tuple[str, ...] = ("vllm-0.27.1.json",)) -> list[str]:
    """Problems with one query: it must parse, and name only known metrics and labels."""
    try:
        tree = promql_parser.parse(query)
    except ValueError as exc:
        return [f"does not parse: {exc}"]
    problems = []
    found = selectors(tree)
    if not found:
        problems.append("names no metric")
    for selector in found:
        name = selector.name
        if not known_metric(name, snapshots):
            problems.append(f"{name} is not exported by {snapshots} (nor a Cloud Run metric)")
            continue
        matchers = [mt.name for mt in selector.matchers.matchers]
        allowed = COLLECTOR_LABELS | vllm_labels(name)
        problems += [f"{name}: unknown label {label}" for label in matchers if label not in allowed]
    every_label = set().union(*(vllm_labels(s.name) for s in found)) | COLLECTOR_LABELS
    problems += [
        f"groups by unknown label {label}"
        for label in grouping_labels(tree)
        if label not in every_label
    ]
    return problems


def test_the_query_check_can_fail() -> None:
    assert check_query("sum(rate(vllm:num_requests_running_total[5m]))")  # a gauge, not a counter
    assert check_query("sum(rate(vllm:request_success[5m]))")  # a counter without _total
    assert check_query("vllm:gpu_cache_usage_perc")  # gone from vLLM 0.27.1
    assert check_query("sum by (reason) (rate(vllm:request_success_total[5m]))")
    assert check_query('vllm:num_requests_waiting{finished_reason="stop"}')
    assert check_query("sum(rate(vllm:prompt_tokens_total[5m])")  # unbalanced
    assert check_query("sum by (finished_reason) (rate(vllm:request_success_total[5m]))") == []


@pytest.mark.parametrize(("stack", "target"), CASES)
def test_every_query_parses_and_names_vllm_0_27_1_metrics(stack: str, target: m.Target) -> None:
    s = settings(stack, speculativeMethod="mtp", drafter="google/gemma-4-12B-it-assistant")
    mtp_target = m.Target(
        target.stack,
        target.hardware,
        target.platform,
        target.matchers,
        target.cloud_run_service,
        True,
    )
    queries = every_query(mtp_target, s.monitoring, s.slo)
    assert len(queries) >= 20
    for query in queries:
        assert check_query(query, IMAGES[target.platform]) == [], query


def test_the_pinned_data_is_vllm_0_27_1() -> None:
    assert VLLM["vllm_version"] == "0.27.1"
    assert VLLM["sources"] == ["vllm/v1/metrics/loggers.py", "vllm/v1/spec_decode/metrics.py"]
    assert FAMILIES["vllm:request_success"]["labels"] == ["finished_reason"]
    snapshot = SNAPSHOTS["vllm-0.27.1.json"]
    assert (snapshot["package"], snapshot["version"]) == ("vllm", "0.27.1")
    assert (SNAPSHOTS["vllm-tpu-0.27.0.json"]["version"]) == "0.27.0"


def test_two_extractions_of_vllms_source_agree() -> None:
    kinds = {m["name"]: m["type"] for m in SNAPSHOTS["vllm-0.27.1.json"]["metrics"]}
    ours = {name: info["kind"] for name, info in FAMILIES.items()}
    # The snapshot also lists the info gauge vLLM builds outside the three metric classes.
    assert set(kinds) - set(ours) == {"vllm:cache_config_info"}
    assert {name: kinds[name] for name in ours} == ours


def test_label_values_are_escaped() -> None:
    target = m.tpu_target("x", "y", 'a"b\\c', mtp=False)
    s = settings("tpu-v6e1")
    for query in every_query(target, s.monitoring, s.slo):
        tree = promql_parser.parse(query)
        values = {mt.value for sel in selectors(tree) for mt in sel.matchers.matchers}
        assert 'a"b\\c' in values


@pytest.mark.parametrize(
    ("metric_type", "promql"),
    [
        # Google's examples ("Mapping Cloud Monitoring metrics to PromQL").
        ("kubernetes.io/container/cpu/limit_cores", "kubernetes_io:container_cpu_limit_cores"),
        (
            "compute.googleapis.com/instance/cpu/utilization",
            "compute_googleapis_com:instance_cpu_utilization",
        ),
        ("logging.googleapis.com/log_entry_count", "logging_googleapis_com:log_entry_count"),
        (
            "custom.googleapis.com/opencensus/opencensus.io/http/server/request_count_by_method",
            "custom_googleapis_com:opencensus_opencensus_io_http_server_request_count_by_method",
        ),
        ("agent.googleapis.com/disk/io_time", "agent_googleapis_com:disk_io_time"),
    ],
)
def test_cloud_monitoring_names_map_to_promql_as_documented(metric_type: str, promql: str) -> None:
    assert m.promql_metric_name(metric_type) == promql


def test_rate_window_covers_several_scrapes() -> None:
    slow = settings("l4", monitoringScrapeIntervalSeconds=120)
    q = m.queries(targets(slow)[0], slow.monitoring)
    assert q.window == "8m"
    assert m.queries(targets(settings("l4"))[0], settings("l4").monitoring).window == "5m"


# --- collector configs ------------------------------------------------------------------


def test_run_monitoring_config_is_what_the_sidecar_reads() -> None:
    s = settings("l4", monitoringScrapeIntervalSeconds=15)
    document = yaml.safe_load(m.run_monitoring_config(8080, s.monitoring))
    # The collector refuses any other apiVersion/kind and unknown fields (strict YAML).
    assert document["apiVersion"] == "monitoring.googleapis.com/v1beta"
    assert document["kind"] == "RunMonitoring"
    assert set(document) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(document["spec"]) == {"endpoints", "targetLabels"}
    (endpoint,) = document["spec"]["endpoints"]
    assert endpoint == {"port": "8080", "path": "/metrics", "interval": "15s"}
    assert document["spec"]["targetLabels"]["metadata"] == [
        "instance",
        "revision",
        "service",
        "configuration",
    ]


def test_ops_agent_config_scrapes_vllm_on_localhost() -> None:
    s = settings("tpu-v6e1")
    document = yaml.safe_load(m.ops_agent_config(8000, "gemma-tpu-v6e1-vllm", s.monitoring))
    receiver = document["metrics"]["receivers"]["vllm"]
    assert receiver["type"] == "prometheus"
    (job,) = receiver["config"]["scrape_configs"]
    assert job["job_name"] == "gemma-tpu-v6e1-vllm"
    assert job["static_configs"] == [{"targets": ["localhost:8000"]}]
    assert job["metrics_path"] == "/metrics" and job["scrape_interval"] == "30s"
    assert document["metrics"]["service"]["pipelines"]["vllm"]["receivers"] == ["vllm"]
    # No logs shipped: the node's identity needs no logging role.
    assert document["logging"]["service"]["pipelines"]["default_pipeline"]["receivers"] == []


def test_legends_name_only_labels_the_query_keeps() -> None:
    s = settings("rtx6000")
    for target in targets(s):
        for tile in m.dashboard(target, s.monitoring, s.slo)["mosaicLayout"]["tiles"]:
            for data_set in tile["widget"].get("xyChart", {}).get("dataSets", []):
                query = data_set["timeSeriesQuery"].get("prometheusQuery")
                if query is None:
                    continue
                wanted = set(re.findall(r"\$\{([^}]+)\}", data_set["legendTemplate"]))
                assert wanted <= set(grouping_labels(promql_parser.parse(query))), query


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ({"monitoringNotificationChannels": ["projects/p/notificationChannels/1"]}, "not a"),
        (
            {"monitoringNotificationChannels": ["projects/my-proj/notificationChannels/1"] * 2},
            "more than once",
        ),
        ({"monitoringNotificationChannels": "projects/my-proj/notificationChannels/1"}, "list"),
        ({"monitoringSidecarImage": "collector"}, "no tag"),
        ({"monitoringOpsAgentVersion": "latest"}, "monitoringOpsAgentVersion"),
        ({"monitoringMaxKvCacheUsage": 0}, "monitoringMaxKvCacheUsage"),
        ({"monitoringScrapeIntervalSeconds": 5}, "monitoringScrapeIntervalSeconds"),
        ({"monitoring": "sometimes"}, "config key 'monitoring'"),
    ],
)
def test_bad_monitoring_settings_name_the_key(override: dict[str, Any], needle: str) -> None:
    with pytest.raises(SettingsError) as info:
        settings("l4", **override)
    assert needle in str(info.value)
