"""The settings blocks every platform shares: the model, vLLM's engine, the weights' token, the
SLOs, the health checks, the benchmark and monitoring. Each field holds its key's one default.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from serving.catalog.models import MODELS, ModelCard, Role
from serving.config.checks import check_pinned_image, check_secret_name
from serving.config.inputs import MAX_DEADLINE_S


def _json_list(value: Any) -> Any:
    """Pulumi hands arrays over as JSON text; accept both forms."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if not text.startswith("["):
            raise ValueError(f"expected a list (YAML list or JSON array), got {value!r}")
        return json.loads(text)
    return value


def _label_map(value: Any) -> Any:
    value = _json_list(value) if isinstance(value, str) else value
    if isinstance(value, list):
        pairs: dict[str, str] = {}
        for item in value:
            key, sep, val = str(item).partition("=")
            if not sep:
                raise ValueError(f"label {item!r} is not of the form key=value")
            pairs[key] = val
        return pairs
    return value


JsonList = Annotated[list[str], BeforeValidator(_json_list)]
JsonIntList = Annotated[list[int], BeforeValidator(_json_list)]
Labels = Annotated[dict[str, str], BeforeValidator(_label_map)]
PinnedImage = Annotated[str, AfterValidator(check_pinned_image)]


def _secret_id(value: str, info: ValidationInfo) -> str:
    return check_secret_name(value, to_camel(str(info.field_name)))


#: A Secret Manager secret id (never the secret itself: see check_secret_name).
SecretId = Annotated[str, AfterValidator(_secret_id)]


#: Upper bounds the platforms accept (see docs/inputs.md, "Numbers").
MAX_TOKENS = 1 << 20
"""vLLM token counts (maxModelLen, maxNumBatchedTokens, benchmark prompts): 1,048,576."""
MAX_SLO_MS = 3_600_000.0
"""Latency SLOs: a request cannot take longer than Cloud Run's 3600 s request timeout."""
MIN_REQUESTS_PER_SECOND = 0.001
"""Request rates (SLO, cost estimates): from one request in about 17 minutes ..."""
MAX_REQUESTS_PER_SECOND = 100_000.0
"""... to 100,000 requests/s."""
MAX_BENCHMARK_CONCURRENCY = 4096
"""Most concurrent requests one benchmark cell sends (as `gemma4 bench run --concurrency`)."""


class Group(BaseModel):
    """One block of keys: camelCase aliases of its fields, nothing unknown, frozen."""

    model_config = ConfigDict(
        allow_inf_nan=False,
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        protected_namespaces=(),
    )


class ModelSettings(Group):
    """Which checkpoint is served, under what name, and speculative decoding."""

    model: str = Field(
        "google/gemma-4-12B-it-qat-w4a16-ct",
        description="Hugging Face repo id of the target checkpoint (from the model catalog).",
    )
    model_revision: str = Field(
        "main",
        description="Hugging Face revision (commit sha or tag) of the checkpoint to download.",
    )
    served_model_name: str | None = Field(
        None, description="Model name clients send in requests; defaults to the repo id."
    )
    speculative_method: Literal["none", "mtp"] = Field(
        "none", description="Speculative decoding: none, or mtp with an assistant drafter."
    )
    drafter: str | None = Field(
        None, description="Repo id of the MTP assistant checkpoint; required when mtp is on."
    )
    drafter_revision: str = Field(
        "main", description="Hugging Face revision of the drafter checkpoint to download."
    )
    num_speculative_tokens: int = Field(
        3, ge=1, le=5, description="Tokens the drafter proposes per step (1-5)."
    )

    @field_validator("model")
    @classmethod
    def _known_target(cls, value: str) -> str:
        if value not in MODELS or MODELS[value].role is not Role.TARGET:
            allowed = sorted(k for k, v in MODELS.items() if v.role is Role.TARGET)
            raise ValueError(f"unknown model {value!r}; allowed: {', '.join(allowed)}")
        return value

    @field_validator("drafter")
    @classmethod
    def _known_drafter(cls, value: str | None) -> str | None:
        if value is not None and (value not in MODELS or MODELS[value].role is not Role.DRAFTER):
            allowed = sorted(k for k, v in MODELS.items() if v.role is Role.DRAFTER)
            raise ValueError(f"unknown drafter {value!r}; allowed: {', '.join(allowed)}")
        return value

    @model_validator(mode="after")
    def _mtp_needs_drafter(self) -> ModelSettings:
        if self.speculative_method == "mtp" and not self.drafter:
            assistant = MODELS[self.model].assistant
            hint = f" (for {self.model}: {assistant!r})" if assistant else ""
            raise ValueError(
                f"config key 'drafter' is required when speculativeMethod is 'mtp'{hint}"
            )
        return self

    @property
    def card(self) -> ModelCard:
        return MODELS[self.model]

    @property
    def drafter_card(self) -> ModelCard | None:
        if self.speculative_method == "none" or self.drafter is None:
            return None
        return MODELS[self.drafter]

    @property
    def served_name(self) -> str:
        return self.served_model_name or self.model


class VllmSettings(Group):
    """vLLM engine settings, rendered into the argument list by `serving.render.vllm`."""

    max_model_len: int = Field(
        8192, ge=256, le=MAX_TOKENS, description="Longest request (prompt + output), tokens."
    )
    gpu_memory_utilization: float = Field(
        0.9, gt=0.0, le=1.0, description="Fraction of device memory vLLM may use (0-1]."
    )
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = Field(
        "auto", description="KV cache element type."
    )
    dtype: Literal["auto", "bfloat16"] = Field("bfloat16", description="Activation dtype.")
    max_num_seqs: int = Field(16, ge=1, le=1024, description="Sequences scheduled at once.")
    max_num_batched_tokens: int = Field(
        8192, ge=256, le=MAX_TOKENS, description="Tokens processed per scheduler step."
    )
    chunked_prefill: bool = Field(True, description="Split long prompts across steps.")
    chunked_mm_input: bool = Field(
        False,
        description="Allow splitting one multimodal item across steps. Must stay false for "
        "Gemma 4: vLLM forces chunked multimodal input off for a multimodal model with "
        "bidirectional (prefix-LM) attention (and the TPU platform for every multimodal "
        "model), so one whole image must fit in maxNumBatchedTokens.",
    )
    prefix_caching: bool = Field(True, description="Reuse KV cache of shared prompt prefixes.")
    tool_call_parser: Literal["gemma4", "none"] = Field(
        "gemma4", description="Tool-call parser (enables auto tool choice), or none."
    )
    reasoning_parser: Literal["gemma4", "none"] = Field(
        "gemma4", description="Reasoning parser, or none."
    )
    load_format: Literal["auto", "safetensors", "runai_streamer"] = Field(
        "auto", description="How weights are read from the mount."
    )
    safetensors_load_strategy: Literal["default", "lazy", "eager", "prefetch"] = Field(
        "default", description="Safetensors read strategy (prefetch reads ahead from FUSE)."
    )
    async_scheduling: bool = Field(True, description="Overlap scheduling with execution.")


class SloSettings(Group):
    """Service-level objectives the benchmark gate holds a deployment to."""

    slo_p95_ttft_ms: float | None = Field(
        2000.0, gt=0, le=MAX_SLO_MS, description="Highest acceptable p95 time to first token, ms."
    )
    slo_p95_e2e_ms: float | None = Field(
        60000.0, gt=0, le=MAX_SLO_MS, description="Highest acceptable p95 end-to-end latency, ms."
    )
    slo_min_success_rate: float = Field(
        0.99, ge=0, le=1, description="Lowest acceptable share of successful requests."
    )
    slo_min_requests_per_second: float | None = Field(
        None,
        ge=MIN_REQUESTS_PER_SECOND,
        le=MAX_REQUESTS_PER_SECOND,
        description="Lowest acceptable request throughput, requests/s.",
    )


_CHANNEL = re.compile(r"^projects/[a-z0-9-]{6,30}/notificationChannels/[0-9]+$")
_OPS_AGENT_VERSION = r"^[0-9]+\.[0-9]+\.[0-9]+$"


class MonitoringSettings(Group):
    """vLLM's metrics in Cloud Monitoring: collector, dashboard and alert policies."""

    monitoring: bool = Field(
        True,
        description="Collect vLLM's metrics into Cloud Monitoring and declare the dashboard and "
        "alert policies.",
    )
    monitoring_notification_channels: JsonList = Field(
        default_factory=list,
        description="Notification channels the alert policies notify "
        "(projects/<id>/notificationChannels/<n>); empty: no alert policy is declared (a warning).",
    )
    monitoring_scrape_interval_seconds: int = Field(
        30, ge=10, le=300, description="How often vLLM's /metrics is scraped, seconds."
    )
    monitoring_alert_minutes: int = Field(
        5, ge=1, le=60, description="Minutes a condition must hold before an alert fires."
    )
    monitoring_max_waiting_requests: int = Field(
        8,
        ge=1,
        le=100_000,
        description="Saturation alert: requests waiting in vLLM's queue above this.",
    )
    monitoring_max_kv_cache_usage: float = Field(
        0.95, gt=0, le=1, description="Saturation alert: KV cache usage (0-1] above this."
    )
    monitoring_sidecar_image: PinnedImage = Field(
        "us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/"
        "cloud-run-gmp-sidecar:1.2.0",
        description="Managed Service for Prometheus collector image run beside vLLM on Cloud "
        "Run (pinned tag or digest).",
    )
    monitoring_ops_agent_version: str = Field(
        "2.70.0",
        pattern=_OPS_AGENT_VERSION,
        description="Ops Agent version the TPU startup script installs (MAJOR.MINOR.PATCH).",
    )

    @field_validator("monitoring_notification_channels")
    @classmethod
    def _channels(cls, channels: list[str]) -> list[str]:
        for channel in channels:
            if not _CHANNEL.match(channel):
                raise ValueError(
                    f"{channel!r} is not a notification channel name; use "
                    "projects/<project-id>/notificationChannels/<number>"
                )
        if len(set(channels)) != len(channels):
            raise ValueError("notification channels are listed more than once")
        return channels


class HealthSettings(Group):
    """The post-deploy health check that gates `pulumi up`."""

    health_check: bool = Field(
        True, description="Run the health checks after the serving resource is created/updated."
    )
    health_check_deadline_seconds: int | None = Field(
        None,
        ge=30,
        le=int(MAX_DEADLINE_S),
        description="Deadline for the checks; defaults to the hardware's cold start.",
    )
    health_check_service_account: str | None = Field(
        None,
        description="Service account to impersonate for the ID token (Cloud Run) when your own "
        "credentials cannot mint one.",
    )


class BenchmarkSettings(Group):
    """The short benchmark `pulumi up` runs after the health checks pass."""

    post_deploy_benchmark: bool = Field(
        True, description="Benchmark the serving resource after it is created/updated."
    )
    benchmark_concurrency: JsonIntList = Field(
        default_factory=list,
        description="Concurrency levels to measure; empty: derived from the performance model "
        "(1, the predicted curve's knee, maxNumSeqs; up to 6 levels, one per 20 s of "
        "benchmarkBudgetSeconds).",
    )
    benchmark_prompt_tokens: int = Field(
        512, ge=1, le=MAX_TOKENS, description="Prompt size of every cell."
    )
    benchmark_output_tokens: int = Field(
        128, ge=1, le=MAX_TOKENS, description="Output tokens per request."
    )
    benchmark_budget_seconds: int = Field(
        60, ge=10, le=3600, description="Time the whole post-deploy benchmark may take."
    )
    benchmark_fail_on_slo: bool = Field(
        False, description="Fail `pulumi up` when an SLO is missed (default: a warning)."
    )
    benchmark_results_dir: str = Field(
        "bench-results", description="Where each run is written (<dir>/<stack>/<timestamp>)."
    )

    @field_validator("benchmark_concurrency")
    @classmethod
    def _positive(cls, levels: list[int]) -> list[int]:
        if any(level < 1 or level > MAX_BENCHMARK_CONCURRENCY for level in levels):
            raise ValueError(
                "concurrency levels must be at least 1 and at most "
                f"{MAX_BENCHMARK_CONCURRENCY}, got {levels}"
            )
        if len(levels) > 32:
            raise ValueError(f"at most 32 concurrency levels, got {len(levels)}")
        return levels

    @field_validator("benchmark_results_dir")
    @classmethod
    def _inside_the_project(cls, value: str) -> str:
        parts = value.replace("\\", "/").split("/")
        if not value or value.startswith(("/", "~")) or ":" in value or ".." in parts:
            raise ValueError(
                f"{value!r} must be a relative folder inside the project (no leading / or ~, "
                "no '..', no drive letter)"
            )
        return value


class WeightsSettings(Group):
    """The token the checkpoint is downloaded with (the download job, or a TPU node at boot)."""

    hf_token_secret: SecretId = Field(
        "hf-token",
        pattern=r"^[A-Za-z0-9_-]{1,255}$",
        description="Secret Manager secret id holding the Hugging Face token.",
    )
