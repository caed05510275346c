"""The typed results of the MCP tools (each becomes the tool's output schema)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from endpoint.metrics import SpecDecodeAcceptance
from healthchecks.checks import CheckResult


class StackSummary(BaseModel):
    stack: str
    hardware: str
    accelerator: str
    platform: str = Field(description="cloud-run, tpu (a TPU VM) or gke: the stack's platform key")
    location: str | None = Field(description="Cloud Run or GKE region, or TPU VM zone")
    model: str
    served_model_name: str
    speculative_method: str
    num_speculative_tokens: int | None
    endpoints: list[str] = Field(description="Endpoint URLs from the stack outputs")
    outputs_error: str | None = Field(
        None, description="Why the stack outputs could not be read (e.g. not deployed)"
    )


class StacksResult(BaseModel):
    stacks: list[StackSummary]
    problems: list[str] = Field(
        default_factory=list, description="Stack files that cannot be read, and why"
    )


class EndpointInfo(BaseModel):
    url: str
    auth: str = Field(description="How requests authenticate (never the credential itself)")


class StackEndpoints(BaseModel):
    stack: str
    served_model_name: str
    endpoints: list[EndpointInfo]
    service_name: str | None
    node_names: list[str]
    image_ref: str | None


class Condition(BaseModel):
    type: str
    state: str | None
    reason: str | None
    message: str | None
    last_transition_time: str | None


class CloudRunStatus(BaseModel):
    service: str
    region: str
    uri: str | None
    ready: bool | None = Field(description="The Ready condition is CONDITION_SUCCEEDED")
    latest_ready_revision: str | None
    latest_created_revision: str | None
    reconciling: bool | None
    conditions: list[Condition]


class QueuedResourceStatus(BaseModel):
    queued_resource: str
    zone: str
    found: bool
    state: str | None
    state_initiator: str | None
    detail: str | None = None


class ReplicaStatus(BaseModel):
    pod: str
    phase: str | None
    ready: bool
    node: str | None
    restarts: int
    detail: str | None = Field(
        None, description="Why it is not ready: waiting reason, or why it cannot be scheduled"
    )


class GkeStatus(BaseModel):
    cluster: str
    location: str
    namespace: str
    cluster_status: str | None = Field(description="The cluster's status (RUNNING, ...)")
    desired_replicas: int | None = Field(description="The vLLM Deployment's spec.replicas")
    ready_replicas: int
    updated_replicas: int
    autoscaler_min: int | None
    autoscaler_max: int | None
    autoscaler_desired: int | None
    replicas: list[ReplicaStatus]


class StatusResult(BaseModel):
    stack: str
    platform: str
    cloud_run: CloudRunStatus | None = None
    tpu: list[QueuedResourceStatus] = Field(default_factory=list)
    gke: GkeStatus | None = None


class EndpointHealth(BaseModel):
    url: str
    served_model_name: str
    auth: str
    ok: bool
    checks: list[CheckResult]


class HealthResult(BaseModel):
    stack: str
    ok: bool = Field(description="Every check of every endpoint passed")
    endpoints: list[EndpointHealth]


class ServedModel(BaseModel):
    id: str
    max_model_len: int | None
    owned_by: str | None
    root: str | None


class ConfiguredModel(BaseModel):
    model: str
    served_model_name: str
    max_model_len: int
    quantization: str | None
    dtype: str
    kv_cache_dtype: str
    speculative_config: dict[str, Any] | None
    vllm_args: list[str] = Field(description="vLLM's arguments, as deployed or as rendered")
    vllm_args_source: str


class ModelDetails(BaseModel):
    stack: str
    url: str
    served: list[ServedModel] = Field(description="GET /v1/models")
    configured: ConfiguredModel
    max_model_len_matches: bool | None = Field(
        description="The served max_model_len equals the stack's (None: not reported)"
    )


class QueryResult(BaseModel):
    stack: str
    url: str
    model: str
    content: str = Field(description="The answer (first 200 characters)")
    finish_reason: str | None
    ttft_s: float | None
    latency_s: float
    prompt_tokens: int
    completion_tokens: int
    tokens_per_s: float | None = Field(description="completion tokens / latency")
    decode_tokens_per_s: float | None = Field(
        description="(completion tokens - 1) / (latency - TTFT)"
    )


class MetricsResult(BaseModel):
    stack: str
    url: str
    window_s: float
    num_requests_running: float | None
    num_requests_waiting: float | None
    kv_cache_usage: float | None
    prompt_tokens: float | None = Field(description="Prompt tokens in the window")
    generation_tokens: float | None = Field(description="Generated tokens in the window")
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    requests_finished: float | None
    mean_ttft_s: float | None = Field(description="Mean TTFT of requests in the window")
    mean_e2e_s: float | None
    spec_decode: SpecDecodeAcceptance | None = Field(
        description="Acceptance over the window (None: off, or no drafts in the window)"
    )
    speculative_decoding_on: bool


class PlanResult(BaseModel):
    stack: str
    what_if: str | None
    fits: bool
    plan: dict[str, Any] = Field(description="Every figure of `python -m gemma4.plan_cli --json`")
    changes: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="For a what-if: figures that differ {before, after}"
    )


class BenchRunSummary(BaseModel):
    run: str = Field(description="Run id: <stack>/<folder> under the results directory")
    label: str
    hardware: str | None
    created_at: str | None
    finished_at: str | None
    cells: int
    measured: int
    skipped: int
    best_request_throughput: float | None


class BenchRuns(BaseModel):
    runs: list[BenchRunSummary]
    problems: list[str] = Field(default_factory=list, description="Folders that are not runs")


class BenchComparison(BaseModel):
    baseline: str
    other: str
    comparison: dict[str, Any]
    markdown: str


class LogEntry(BaseModel):
    timestamp: str | None
    severity: str | None
    log_name: str | None
    resource: dict[str, str]
    text: str
    truncated: bool


class LogsResult(BaseModel):
    stack: str
    filter: str
    entries: list[LogEntry]


class ZoneOffer(BaseModel):
    zone: str
    accelerator_type: str
    topology: list[str]


class ZonesResult(BaseModel):
    stack: str
    accelerator: str
    zones: list[ZoneOffer]
    locations_checked: int
    errors: list[str]
    quota_note: str


class BenchCellResult(BaseModel):
    run: str
    cell: dict[str, Any]


class PreviewResult(BaseModel):
    stack: str
    preview: dict[str, Any]
