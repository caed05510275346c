"""The GKE dashboard and alerts: the monitoring.v1/v3 schemas, a real PromQL parser, vLLM's
metric names from the pinned snapshots, and the endpoint picker's from llm-d-router v0.10.0's
source (`tests/data/llm-d-router-v0.10.0-metrics.json`, every family its
`pkg/epp/metrics/llm_d_router_metrics.go` registers under the `llm_d_epp` subsystem)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import promql_parser
import pytest

from serving.config.settings import load_settings
from serving.render import monitoring as m
from tests import test_monitoring
from tests.pulumi_harness import stack_config
from tests.support.discovery import load, schema_errors
from tests.test_monitoring import check_query, every_query, grouping_labels, selectors

ROOT = Path(__file__).resolve().parent.parent
PICKER = json.loads((ROOT / "tests/data/llm-d-router-v0.10.0-metrics.json").read_text())
#: The load balancer metric types the Gateway panel reads (Cloud Monitoring's metric list for
#: regional Application Load Balancers; not checkable offline against a document here).
LB_TYPES = {metric for metric, _ in m.GATEWAY_LB_METRICS.values()}
#: Labels Managed Service for Prometheus adds to scraped series, and the LB metric labels used.
TARGET_LABELS = {"namespace", "job", "monitored_resource", "url_map_name", "response_code_class"}
SNAPSHOTS = {"gke-tpu-v6e": ("vllm-tpu-0.27.0.json",), "gke-l4": ("vllm-0.27.1.json",)}


def target(stack: str, public: bool = False) -> m.Target:
    s = load_settings(stack_config(stack))
    return m.gke_target(
        stack,
        s.hardware,
        s.gke.namespace,
        mtp=False,
        gateway_class="gke-l7-regional-external-managed" if public else "gke-l7-rilb",
    )


def picker_problem(name: str) -> str | None:
    """None when `name` is a series the picker exports (counters as-is with their _total,
    histograms as _bucket/_sum/_count, gauges as-is)."""
    families = PICKER["families"]
    if families.get(name) in ("counter", "gauge"):
        return None
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    if base != name and families.get(base) == "histogram":
        return None
    return f"{name} is not exported by llm-d-router {PICKER['release']}"


@pytest.mark.parametrize("stack", sorted(SNAPSHOTS))
@pytest.mark.parametrize("public", [False, True])
def test_gke_dashboard_fits_the_schema_and_shows_gateway_and_picker(
    stack: str, public: bool
) -> None:
    s = load_settings(stack_config(stack))
    body = m.dashboard(target(stack, public), s.monitoring, s.slo)
    assert schema_errors(load("monitoring", "v1"), "Dashboard", body) == []
    titles = [t["widget"]["title"] for t in body["mosaicLayout"]["tiles"]]
    for wanted in (
        "Gateway responses by status class",
        "Endpoint picker: ready replicas",
        "Endpoint picker: pool queue and KV cache",
        "Endpoint picker: requests and errors",
        "Endpoint picker: scheduling latency",
        "vLLM replicas reporting",
        "Requests running and waiting",
    ):
        assert wanted in titles
    assert not [t for t in titles if "Cloud Run" in t]


@pytest.mark.parametrize("stack", sorted(SNAPSHOTS))
def test_every_gke_query_parses_and_names_exported_metrics(
    stack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Managed Service for Prometheus labels every scraped series with its namespace (and job).
    monkeypatch.setattr(
        test_monitoring, "COLLECTOR_LABELS", test_monitoring.COLLECTOR_LABELS | {"namespace"}
    )
    s = load_settings(stack_config(stack))
    for gateway_class in m.GATEWAY_LB_METRICS:
        t = m.gke_target(stack, s.hardware, "gemma4", mtp=False, gateway_class=gateway_class)
        for query in every_query(t, s.monitoring, s.slo):
            tree = promql_parser.parse(query)
            names = {sel.name for sel in selectors(tree)}
            lb = {n for n in names if n in {m.promql_metric_name(x) for x in LB_TYPES}}
            picker = {n for n in names if n.startswith("llm_d_epp_")}
            if not (lb or picker):
                # vLLM's own series: names, kinds and labels of the pinned vLLM.
                assert check_query(query, SNAPSHOTS[stack]) == [], query
                continue
            assert names == lb | picker, query  # a Gateway or picker panel names no vLLM
            for name in picker:
                assert picker_problem(name) is None, query
            for sel in selectors(tree):
                labels = {mt.name for mt in sel.matchers.matchers}
                assert labels <= TARGET_LABELS, query
            assert set(grouping_labels(tree)) <= TARGET_LABELS | {"le"}, query


def test_picker_check_can_fail() -> None:
    assert picker_problem("llm_d_epp_ready_pods")  # the old GAIE name
    assert picker_problem("llm_d_epp_request_total_total")
    assert picker_problem("llm_d_epp_average_queue_size_bucket")  # a gauge, no buckets
    assert picker_problem("llm_d_epp_scheduler_e2e_duration_seconds_bucket") is None


def test_gke_queries_select_the_stacks_namespace_and_podmonitoring() -> None:
    s = load_settings(stack_config("gke-l4"))
    t = m.gke_target("gke-l4", s.hardware, "team-a", mtp=False)
    for query in every_query(t, s.monitoring, s.slo):
        for sel in selectors(promql_parser.parse(query)):
            matchers = {mt.name: mt.value for mt in sel.matchers.matchers}
            if sel.name.startswith("vllm:"):
                assert matchers.items() >= {"namespace": "team-a", "job": "vllm"}.items(), query
            elif sel.name.startswith("llm_d_epp_"):
                assert matchers == {"namespace": "team-a", "job": "vllm-epp"}, query
            else:
                assert "team-a-inference-gateway" in matchers["url_map_name"], query


def test_gke_alerts_fit_the_schema_and_name_gke_in_the_absent_alert() -> None:
    s = load_settings(stack_config("gke-tpu-v6e"))
    channels = ["projects/my-project/notificationChannels/1"]
    t = target("gke-tpu-v6e")
    policies = m.alert_policies(
        t, s.monitoring.model_copy(update={"monitoring_notification_channels": channels}), s.slo
    )
    assert list(policies) == m.alert_keys("gke", s.monitoring, s.slo)
    for body in policies.values():
        assert schema_errors(load("monitoring", "v3"), "AlertPolicy", body) == []
    absent = policies["absent"]["documentation"]["content"]
    assert "kubectl get pods" in absent and "queued resources" not in absent
