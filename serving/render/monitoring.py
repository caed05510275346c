"""vLLM's metrics in Cloud Monitoring (docs/monitoring.md): collector configs, PromQL,
dashboard and alert bodies, rendered from typed settings into what the Cloud Monitoring API
and the collectors take (tests check them against Google's discovery documents and a PromQL
parser). The metric families are vLLM 0.27.1's and llm-d-router v0.10.0's; Managed Service for
Prometheus keeps Prometheus' names (a counter is `<name>_total`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Literal

import yaml

from serving.config.groups import MonitoringSettings, SloSettings

Platform = Literal["cloud_run", "tpu", "gke"]


class Vllm:
    """vLLM 0.27.1 metric families, under the names PromQL sees them."""

    RUNNING = "vllm:num_requests_running"
    WAITING = "vllm:num_requests_waiting"
    KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
    PROMPT_TOKENS = "vllm:prompt_tokens_total"
    GENERATION_TOKENS = "vllm:generation_tokens_total"
    REQUEST_SUCCESS = "vllm:request_success_total"
    TTFT = "vllm:time_to_first_token_seconds"
    ITL = "vllm:inter_token_latency_seconds"
    E2E = "vllm:e2e_request_latency_seconds"
    SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
    SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
    SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
    SPEC_ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


#: Cloud Run system metrics (Cloud Monitoring metric types).
RUN_REQUEST_COUNT = "run.googleapis.com/request_count"
RUN_INSTANCE_COUNT = "run.googleapis.com/container/instance_count"
RUN_GPU_UTILIZATIONS = "run.googleapis.com/container/gpu/utilizations"
RUN_RESOURCE = "cloud_run_revision"

#: The Managed Service for Prometheus sidecar: where it reads its RunMonitoring config.
SIDECAR_NAME = "collector"
SIDECAR_CONFIG_DIR = "/etc/rungmp"
SIDECAR_CONFIG_FILE = "config.yaml"
#: The sidecar's own resources: CPU stays allocated like vLLM's (GPU services require it).
SIDECAR_CPU = "1"
SIDECAR_MEMORY = "512Mi"
RUN_MONITORING_API = "monitoring.googleapis.com/v1beta"
RUN_TARGET_METADATA = ("instance", "revision", "service", "configuration")

#: Ops Agent on the TPU VM.
OPS_AGENT_CONFIG = "/etc/google-cloud-ops-agent/config.yaml"
OPS_AGENT_REPO_SCRIPT = "https://dl.google.com/cloudagents/add-google-cloud-ops-agent-repo.sh"

#: Alerts are evaluated every minute; a query's rate window covers at least 5 minutes and four
#: scrapes.
EVALUATION_INTERVAL_SECONDS = 60
AUTO_CLOSE_SECONDS = 1800


@dataclass(frozen=True)
class Target:
    """Which vLLM series one stack's queries select, and what its platform reports."""

    stack: str
    hardware: str
    platform: Platform
    #: PromQL label matchers that select this stack's vLLM series.
    matchers: tuple[tuple[str, str], ...]
    #: The Cloud Run service (Cloud Run stacks only).
    cloud_run_service: str | None = None
    #: Speculative decoding (MTP) is on: its acceptance panels are shown.
    mtp: bool = False
    #: GKE: the namespace of the serving objects and the Gateway's class.
    gke_namespace: str | None = None
    gateway_class: str | None = None


def cloud_run_target(stack: str, hardware: str, service: str, *, mtp: bool) -> Target:
    """A Cloud Run service's series: the sidecar labels them with `service_name`."""
    return Target(stack, hardware, "cloud_run", (("service_name", service),), service, mtp)


def tpu_target(stack: str, hardware: str, job: str, *, mtp: bool) -> Target:
    """TPU nodes' series: the Ops Agent labels them with the scrape job's name."""
    return Target(stack, hardware, "tpu", (("job", job),), None, mtp)


class Picker:
    """llm-d-router v0.10.0 endpoint picker metric families (`llm_d_epp` subsystem)."""

    READY_ENDPOINTS = "llm_d_epp_ready_endpoints"
    AVERAGE_QUEUE = "llm_d_epp_average_queue_size"
    AVERAGE_KV_CACHE = "llm_d_epp_average_kv_cache_utilization"
    REQUESTS = "llm_d_epp_request_total"
    REQUEST_ERRORS = "llm_d_epp_request_error_total"
    SCHEDULER_E2E = "llm_d_epp_scheduler_e2e_duration_seconds"


#: The Gateway's load balancer: request counts by class, per Gateway class.
GATEWAY_LB_METRICS: dict[str, tuple[str, str]] = {
    # gateway class -> (request_count metric type, monitored resource type)
    "gke-l7-rilb": (
        "loadbalancing.googleapis.com/https/internal/request_count",
        "internal_http_lb_rule",
    ),
    "gke-l7-regional-external-managed": (
        "loadbalancing.googleapis.com/https/external/regional/request_count",
        "http_external_regional_lb_rule",
    ),
}


def gke_target(
    stack: str, hardware: str, namespace: str, *, mtp: bool, gateway_class: str = "gke-l7-rilb"
) -> Target:
    """GKE Pods' series: Managed Prometheus labels them with namespace and PodMonitoring."""
    return Target(
        stack,
        hardware,
        "gke",
        (("namespace", namespace), ("job", "vllm")),
        None,
        mtp,
        gke_namespace=namespace,
        gateway_class=gateway_class,
    )


def scrape_job(prefix: str) -> str:
    """The Ops Agent scrape job of a stack: unique per stack, a valid label value."""
    return f"{prefix}-vllm"


# --- PromQL ---------------------------------------------------------------------------------


def promql_metric_name(metric_type: str) -> str:
    """A Cloud Monitoring metric type under its PromQL name (Google's documented mapping)."""
    domain, sep, path = metric_type.partition("/")
    if not sep:
        raise ValueError(f"{metric_type!r} is not a Cloud Monitoring metric type")
    return re.sub(r"[^a-zA-Z0-9_]", "_", domain) + ":" + re.sub(r"[^a-zA-Z0-9_]", "_", path)


def _quote(value: str) -> str:
    # PromQL string literals take Go's escapes; JSON's are a subset for these values.
    return json.dumps(value, ensure_ascii=True)


def _selector(matchers: tuple[tuple[str, str], ...], **extra: str) -> str:
    pairs = [*matchers, *extra.items()]
    return "{" + ",".join(f"{label}={_quote(value)}" for label, value in pairs) + "}"


def _number(value: float) -> str:
    return f"{value:.6g}"


@dataclass(frozen=True)
class Queries:
    """The PromQL of one stack's dashboard and alerts."""

    target: Target
    window: str

    def sel(self, **extra: str) -> str:
        return _selector(self.target.matchers, **extra)

    def quantile(self, q: float, histogram: str) -> str:
        return (
            f"histogram_quantile({_number(q)}, sum by (le) "
            f"(rate({histogram}_bucket{self.sel()}[{self.window}])))"
        )

    def rate(self, counter: str, by: tuple[str, ...] = (), **extra: str) -> str:
        grouping = f" by ({', '.join(by)})" if by else ""
        return f"sum{grouping} (rate({counter}{self.sel(**extra)}[{self.window}]))"

    def gauge(self, gauge: str, how: str = "sum") -> str:
        return f"{how} ({gauge}{self.sel()})"

    def requests_per_second(self) -> str:
        return self.rate(Vllm.REQUEST_SUCCESS)

    def acceptance_rate(self) -> str:
        return f"{self.rate(Vllm.SPEC_ACCEPTED)} / {self.rate(Vllm.SPEC_DRAFT_TOKENS)}"

    def acceptance_length(self) -> str:
        # Tokens emitted per draft: the bonus token plus the accepted ones.
        return f"1 + {self.rate(Vllm.SPEC_ACCEPTED)} / {self.rate(Vllm.SPEC_DRAFTS)}"

    def acceptance_by_position(self) -> str:
        return (
            f"{self.rate(Vllm.SPEC_ACCEPTED_PER_POS, by=('position',))} "
            f"/ scalar({self.rate(Vllm.SPEC_DRAFTS)})"
        )

    def error_share(self) -> str:
        """Share of failed requests: Cloud Run's 5xx responses, or vLLM's errored requests."""
        if self.target.cloud_run_service is not None:
            service = (
                ("monitored_resource", RUN_RESOURCE),
                ("service_name", self.target.cloud_run_service),
            )
            run = Queries(replace(self.target, matchers=service), self.window)
            name = promql_metric_name(RUN_REQUEST_COUNT)
            return f"{run.rate(name, response_code_class='5xx')} / {run.rate(name)}"
        return (
            f"{self.rate(Vllm.REQUEST_SUCCESS, finished_reason='error')} "
            f"/ {self.rate(Vllm.REQUEST_SUCCESS)}"
        )


def queries(target: Target, settings: MonitoringSettings) -> Queries:
    window_s = max(300, 4 * settings.monitoring_scrape_interval_seconds)
    window = f"{window_s // 60}m" if window_s % 60 == 0 else f"{window_s}s"
    return Queries(target, window)


# --- Dashboard (monitoring.v1 Dashboard) ----------------------------------------------------

_COLUMNS = 48
_WIDTH = 24
_HEIGHT = 16


def _promql_set(query: str, legend: str, unit: str) -> dict[str, Any]:
    return {
        "timeSeriesQuery": {"prometheusQuery": query, "unitOverride": unit},
        "plotType": "LINE",
        "legendTemplate": legend,
        "targetAxis": "Y1",
    }


def _filter_set(
    metric_type: str,
    service: str,
    aligner: str,
    reducer: str,
    legend: str,
    group_by: tuple[str, ...] = (),
) -> dict[str, Any]:
    aggregation: dict[str, Any] = {
        "alignmentPeriod": "60s",
        "perSeriesAligner": aligner,
        "crossSeriesReducer": reducer,
    }
    if group_by:
        aggregation["groupByFields"] = list(group_by)
    return {
        "timeSeriesQuery": {
            "timeSeriesFilter": {
                "filter": (
                    f"metric.type={_quote(metric_type)} "
                    f"resource.type={_quote(RUN_RESOURCE)} "
                    f'resource.label."service_name"={_quote(service)}'
                ),
                "aggregation": aggregation,
            }
        },
        "plotType": "LINE",
        "legendTemplate": legend,
        "targetAxis": "Y1",
    }


def _chart(
    title: str,
    y_label: str,
    *data_sets: dict[str, Any],
    thresholds: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    chart: dict[str, Any] = {
        "dataSets": list(data_sets),
        "yAxis": {"label": y_label, "scale": "LINEAR"},
        "chartOptions": {"mode": "COLOR"},
    }
    if thresholds:
        chart["thresholds"] = thresholds
    return {"title": title, "xyChart": chart}


def _threshold(value: float, label: str) -> dict[str, Any]:
    return {"value": value, "label": label, "direction": "ABOVE", "targetAxis": "Y1"}


def _percentiles(q: Queries, title: str, histogram: str, slo_ms: float | None) -> dict[str, Any]:
    """p50 and p95 of a latency histogram, with the stack's p95 SLO as a line when set."""
    data_sets = [_promql_set(q.quantile(p, histogram), f"p{p * 100:g}", "s") for p in (0.5, 0.95)]
    line = [_threshold(slo_ms / 1000, "SLO p95")] if slo_ms else None
    return _chart(title, "seconds", *data_sets, thresholds=line)


def dashboard(target: Target, settings: MonitoringSettings, slo: SloSettings) -> dict[str, Any]:
    """The stack's dashboard, as the Cloud Monitoring API's Dashboard body."""
    q = queries(target, settings)
    widgets: list[dict[str, Any]] = [
        {
            "title": "About",
            "text": {"content": _about(target, settings, slo), "format": "MARKDOWN"},
        },
        _percentiles(q, "Time to first token", Vllm.TTFT, slo.slo_p95_ttft_ms),
        _percentiles(q, "Inter-token latency", Vllm.ITL, None),
        _percentiles(q, "End-to-end request latency", Vllm.E2E, slo.slo_p95_e2e_ms),
        _chart(
            "Finished requests per second",
            "requests/s",
            _promql_set(q.requests_per_second(), "requests/s", "1/s"),
        ),
        _chart(
            "Tokens per second",
            "tokens/s",
            _promql_set(q.rate(Vllm.PROMPT_TOKENS), "prompt", "1/s"),
            _promql_set(q.rate(Vllm.GENERATION_TOKENS), "generated", "1/s"),
        ),
        _chart(
            "Requests running and waiting",
            "requests",
            _promql_set(q.gauge(Vllm.RUNNING), "running", "1"),
            _promql_set(q.gauge(Vllm.WAITING), "waiting", "1"),
            thresholds=[_threshold(settings.monitoring_max_waiting_requests, "waiting alert")],
        ),
        _chart(
            "KV cache usage",
            "percent",
            _promql_set(f"100 * {q.gauge(Vllm.KV_CACHE_USAGE, 'max')}", "busiest engine", "%"),
            thresholds=[_threshold(100 * settings.monitoring_max_kv_cache_usage, "alert")],
        ),
        _chart(
            "Finished requests by reason",
            "requests/s",
            _promql_set(
                q.rate(Vllm.REQUEST_SUCCESS, by=("finished_reason",)), "${finished_reason}", "1/s"
            ),
        ),
    ]
    if target.mtp:
        widgets += [
            _chart(
                "Speculative decoding: acceptance rate",
                "fraction",
                _promql_set(q.acceptance_rate(), "accepted / drafted tokens", "1"),
            ),
            _chart(
                "Speculative decoding: tokens per draft",
                "tokens",
                _promql_set(q.acceptance_length(), "mean acceptance length", "1"),
            ),
            _chart(
                "Speculative decoding: acceptance by draft position",
                "fraction",
                _promql_set(q.acceptance_by_position(), "position ${position}", "1"),
            ),
        ]
    if target.cloud_run_service is not None:
        service = target.cloud_run_service
        widgets += [
            _chart(
                "Cloud Run responses by status class",
                "requests/s",
                _filter_set(
                    RUN_REQUEST_COUNT,
                    service,
                    "ALIGN_RATE",
                    "REDUCE_SUM",
                    "${metric.labels.response_code_class}",
                    ('metric.label."response_code_class"',),
                ),
            ),
            _chart(
                "Cloud Run instances",
                "instances",
                _filter_set(
                    RUN_INSTANCE_COUNT,
                    service,
                    "ALIGN_MAX",
                    "REDUCE_SUM",
                    "${metric.labels.state}",
                    ('metric.label."state"',),
                ),
            ),
            _chart(
                "GPU utilization (Cloud Run)",
                "utilization",
                _filter_set(
                    RUN_GPU_UTILIZATIONS, service, "ALIGN_PERCENTILE_50", "REDUCE_MEAN", "p50"
                ),
                _filter_set(
                    RUN_GPU_UTILIZATIONS, service, "ALIGN_PERCENTILE_95", "REDUCE_MAX", "p95"
                ),
            ),
        ]
    if target.gke_namespace is not None:
        widgets += _gke_widgets(target, q)
    return {
        "displayName": f"vLLM {target.stack} ({target.hardware})",
        "mosaicLayout": {"columns": _COLUMNS, "tiles": _tiles(widgets)},
    }


def _gke_widgets(target: Target, q: Queries) -> list[dict[str, Any]]:
    """The Gateway's and the endpoint picker's signals on a GKE stack."""
    namespace = str(target.gke_namespace)
    picker = Queries(
        replace(target, matchers=(("namespace", namespace), ("job", "vllm-epp"))), q.window
    )
    lb_metric, lb_resource = GATEWAY_LB_METRICS[str(target.gateway_class)]
    # GKE names the load balancer's URL map after the Gateway: gkegw1-<hash>-<ns>-<name>-<hash>.
    lb = (
        f"{promql_metric_name(lb_metric)}{{monitored_resource={_quote(lb_resource)},"
        f"url_map_name=~{_quote(f'.*-{namespace}-inference-gateway-.*')}}}"
    )
    return [
        _chart(
            "Gateway responses by status class",
            "requests/s",
            _promql_set(
                f"sum by (response_code_class) (rate({lb}[{q.window}]))",
                "${response_code_class}",
                "1/s",
            ),
        ),
        _chart(
            "Endpoint picker: ready replicas",
            "replicas",
            _promql_set(picker.gauge(Picker.READY_ENDPOINTS, "max"), "ready", "1"),
        ),
        _chart(
            "Endpoint picker: pool queue and KV cache",
            "requests / percent",
            _promql_set(picker.gauge(Picker.AVERAGE_QUEUE, "max"), "average queue", "1"),
            _promql_set(
                f"100 * {picker.gauge(Picker.AVERAGE_KV_CACHE, 'max')}", "average KV cache %", "1"
            ),
        ),
        _chart(
            "Endpoint picker: requests and errors",
            "requests/s",
            _promql_set(picker.rate(Picker.REQUESTS), "picked", "1/s"),
            _promql_set(picker.rate(Picker.REQUEST_ERRORS), "errors", "1/s"),
        ),
        _chart(
            "Endpoint picker: scheduling latency",
            "seconds",
            _promql_set(picker.quantile(0.95, Picker.SCHEDULER_E2E), "p95", "s"),
        ),
        _chart(
            "vLLM replicas reporting",
            "replicas",
            _promql_set(f"count ({Vllm.RUNNING}{q.sel()})", "replicas", "1"),
        ),
    ]


def _tiles(widgets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tiles = []
    for index, widget in enumerate(widgets):
        row, column = divmod(index, _COLUMNS // _WIDTH)
        tiles.append(
            {
                "xPos": column * _WIDTH,
                "yPos": row * _HEIGHT,
                "width": _WIDTH,
                "height": _HEIGHT,
                "widget": widget,
            }
        )
    return tiles


def _about(target: Target, settings: MonitoringSettings, slo: SloSettings) -> str:
    how = {
        "cloud_run": "the Managed Service for Prometheus sidecar beside vLLM",
        "tpu": "the Ops Agent's Prometheus receiver on each TPU node",
        "gke": "Managed Service for Prometheus (a PodMonitoring per Deployment); the Gateway "
        "and endpoint picker panels follow",
    }[target.platform]
    lines = [
        f"**{target.stack}** on {target.hardware}: vLLM's `/metrics`, scraped every "
        f"{settings.monitoring_scrape_interval_seconds} s by {how}.",
        "",
        "Stack SLOs: "
        + ", ".join(
            part
            for part in (
                f"TTFT p95 <= {slo.slo_p95_ttft_ms:g} ms" if slo.slo_p95_ttft_ms else "",
                f"end-to-end p95 <= {slo.slo_p95_e2e_ms:g} ms" if slo.slo_p95_e2e_ms else "",
                f"success rate >= {slo.slo_min_success_rate:g}",
            )
            if part
        )
        + ".",
    ]
    return "\n".join(lines)


# --- Alert policies (monitoring.v3 AlertPolicy) ---------------------------------------------


@dataclass(frozen=True)
class Alert:
    """One alert: a PromQL condition that fires after holding for a while."""

    key: str
    rule: str
    title: str
    query: str
    severity: Literal["CRITICAL", "ERROR", "WARNING"]
    explanation: str


def alerts(target: Target, settings: MonitoringSettings, slo: SloSettings) -> list[Alert]:
    """The stack's alerts: one per SLO key that is set, and two for saturation."""
    q = queries(target, settings)
    found: list[Alert] = []
    if slo.slo_p95_ttft_ms is not None:
        found.append(
            Alert(
                "ttft-p95",
                "VllmTtftP95AboveSlo",
                f"TTFT p95 above {slo.slo_p95_ttft_ms:g} ms",
                f"{q.quantile(0.95, Vllm.TTFT)} > {_number(slo.slo_p95_ttft_ms / 1000)}",
                "WARNING",
                "The 95th percentile of time to first token is above the stack's `sloP95TtftMs`.",
            )
        )
    if slo.slo_p95_e2e_ms is not None:
        found.append(
            Alert(
                "e2e-p95",
                "VllmE2eP95AboveSlo",
                f"end-to-end p95 above {slo.slo_p95_e2e_ms:g} ms",
                f"{q.quantile(0.95, Vllm.E2E)} > {_number(slo.slo_p95_e2e_ms / 1000)}",
                "WARNING",
                "The 95th percentile of end-to-end request latency is above the stack's "
                "`sloP95E2EMs`.",
            )
        )
    if slo.slo_min_success_rate > 0:
        what = (
            "Cloud Run's 5xx responses"
            if target.platform == "cloud_run"
            else "vLLM's requests finished with an error"
        )
        found.append(
            Alert(
                "success-rate",
                "VllmSuccessRateBelowSlo",
                f"success rate below {slo.slo_min_success_rate:g}",
                f"{q.error_share()} > {_number(1 - slo.slo_min_success_rate)}",
                "ERROR",
                f"The share of failed requests ({what}) is above 1 - `sloMinSuccessRate`.",
            )
        )
    if target.platform in ("tpu", "gke"):
        # A node that is gone (preempted, flex-start run ended, vLLM crashed) exports nothing,
        # so no other condition can fire. On Cloud Run, scaled to zero is normal: no such alert.
        found.append(
            Alert(
                "absent",
                "VllmMetricsAbsent",
                "vLLM's metrics absent for 10 min",
                f"absent_over_time({Vllm.RUNNING}{q.sel()}[10m])",
                "ERROR",
                (
                    "No node has exported vLLM's metrics for 10 minutes: the node or vLLM is "
                    "down (preempted, its flex-start run ended, or vLLM exited). Check the "
                    "queued resources' state (`gemma4 mcp` service_status, or the console)."
                    if target.platform == "tpu"
                    else "No vLLM replica has exported metrics for 10 minutes: every Pod is "
                    "down or unschedulable (no accelerator node: quota, stock, spot "
                    "preemption). Check the replicas (`gemma4 mcp` service_status, or "
                    "`kubectl get pods -n <namespace>`)."
                ),
            )
        )
    found.append(
        Alert(
            "waiting",
            "VllmRequestsWaiting",
            f"more than {settings.monitoring_max_waiting_requests} requests waiting",
            f"{q.gauge(Vllm.WAITING, 'max')} > {settings.monitoring_max_waiting_requests}",
            "WARNING",
            "Requests queue in vLLM: the busiest engine is saturated "
            "(`monitoringMaxWaitingRequests`). Raise `maxInstances`/`replicas`, or lower "
            "`maxNumSeqs`.",
        )
    )
    found.append(
        Alert(
            "kv-cache",
            "VllmKvCacheFull",
            f"KV cache above {100 * settings.monitoring_max_kv_cache_usage:g}%",
            f"{q.gauge(Vllm.KV_CACHE_USAGE, 'max')} > "
            f"{_number(settings.monitoring_max_kv_cache_usage)}",
            "WARNING",
            "The KV cache is nearly full (`monitoringMaxKvCacheUsage`): requests are about to "
            "be preempted. Lower `maxNumSeqs` or `maxModelLen`, or add capacity.",
        )
    )
    return found


def alert_keys(platform: Platform, settings: MonitoringSettings, slo: SloSettings) -> list[str]:
    """The short names of the alerts a stack gets; they do not depend on the service's name,
    which is known only once it exists."""
    placeholder = {
        "cloud_run": cloud_run_target("-", "-", "-", mtp=False),
        "tpu": tpu_target("-", "-", "-", mtp=False),
        "gke": gke_target("-", "-", "-", mtp=False),
    }[platform]
    return [a.key for a in alerts(placeholder, settings, slo)]


def user_labels(stack: str) -> dict[str, str]:
    """Alert policy labels (lowercase letters, digits, '_' and '-'; at most 63 characters)."""
    value = re.sub(r"[^a-z0-9_-]", "-", stack.lower())[:63]
    return {"app": "gemma4-vllm", "stack": value}


def alert_policy(
    alert: Alert, target: Target, settings: MonitoringSettings, channels: list[str]
) -> dict[str, Any]:
    """One alert as the Cloud Monitoring API's AlertPolicy body."""
    body: dict[str, Any] = {
        "displayName": f"vLLM {target.stack}: {alert.title}",
        "combiner": "OR",
        "severity": alert.severity,
        "userLabels": user_labels(target.stack),
        "documentation": {
            "subject": f"vLLM {target.stack}: {alert.title}",
            "content": f"{alert.explanation}\n\nHeld for {settings.monitoring_alert_minutes} "
            f"min. Query:\n\n```\n{alert.query}\n```",
            "mimeType": "text/markdown",
        },
        "conditions": [
            {
                "displayName": alert.title,
                "conditionPrometheusQueryLanguage": {
                    "query": alert.query,
                    "duration": f"{settings.monitoring_alert_minutes * 60}s",
                    "evaluationInterval": f"{EVALUATION_INTERVAL_SECONDS}s",
                    "ruleGroup": f"gemma4-vllm-{target.stack}",
                    "alertRule": alert.rule,
                    # vLLM's series exist only after the first scrape; the policy is
                    # declared before that.
                    "disableMetricValidation": True,
                },
            }
        ],
        "alertStrategy": {"autoClose": f"{AUTO_CLOSE_SECONDS}s"},
        "enabled": True,
    }
    if channels:
        body["notificationChannels"] = list(channels)
    return body


def alert_policies(
    target: Target, settings: MonitoringSettings, slo: SloSettings
) -> dict[str, dict[str, Any]]:
    """Every alert policy of the stack, keyed by a short name."""
    channels = list(settings.monitoring_notification_channels)
    return {
        a.key: alert_policy(a, target, settings, channels) for a in alerts(target, settings, slo)
    }


# --- Collector configs ----------------------------------------------------------------------


def run_monitoring_config(port: int, settings: MonitoringSettings) -> str:
    """The sidecar's RunMonitoring config: scrape vLLM's /metrics on the ingress port."""
    document = {
        "apiVersion": RUN_MONITORING_API,
        "kind": "RunMonitoring",
        "metadata": {"name": "vllm"},
        "spec": {
            "endpoints": [
                {
                    "port": str(port),
                    "path": "/metrics",
                    "interval": f"{settings.monitoring_scrape_interval_seconds}s",
                }
            ],
            "targetLabels": {"metadata": list(RUN_TARGET_METADATA)},
        },
    }
    return yaml.safe_dump(document, sort_keys=False)


def ops_agent_config(port: int, job: str, settings: MonitoringSettings) -> str:
    """The Ops Agent's config on a TPU node: scrape vLLM on localhost, ship no logs.

    The default logging pipeline is emptied so the node's identity needs only
    roles/monitoring.metricWriter; the default host-metrics pipeline stays.
    """
    document = {
        "logging": {
            "service": {"pipelines": {"default_pipeline": {"receivers": []}}},
        },
        "metrics": {
            "receivers": {
                "vllm": {
                    "type": "prometheus",
                    "config": {
                        "scrape_configs": [
                            {
                                "job_name": job,
                                "scrape_interval": (
                                    f"{settings.monitoring_scrape_interval_seconds}s"
                                ),
                                "metrics_path": "/metrics",
                                "static_configs": [{"targets": [f"localhost:{port}"]}],
                            }
                        ]
                    },
                }
            },
            "service": {"pipelines": {"vllm": {"receivers": ["vllm"]}}},
        },
    }
    return yaml.safe_dump(document, sort_keys=False)
