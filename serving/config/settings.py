"""Typed stack settings: the one place where every configurable value and its default live.

Stack files hold flat camelCase keys (`maxNumSeqs: 8`); :func:`load_settings` routes each key to
its group, rejects unknown keys, and validates values and the rules that tie them together
before any resource is declared. Error messages name the key and what is allowed.
"""

from __future__ import annotations

import difflib
import fnmatch
import ipaddress
import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from serving.catalog.hardware import (
    GKE_SHAPES,
    HARDWARE,
    GkeShape,
    HardwareProfile,
    Platform,
    Price,
    cloud_run_price,
)
from serving.catalog.models import MODELS, ModelCard, Role
from serving.config.inputs import MAX_DEADLINE_S
from serving.config.netrange import (
    DEFAULT_MIN_PREFIX_V4,
    DEFAULT_MIN_PREFIX_V6,
    RangeError,
    source_range_problems,
)
from serving.launch.vllm_contract import available, image_release
from serving.sizing.memory import (
    DEFAULT_PROFILE,
    HOURS_PER_MONTH,
    TPU_PROFILE,
    MemoryPlan,
    plan_memory,
)

FLOATING_TAGS = frozenset(
    {"latest", "nightly", "main", "master", "dev", "stable", "edge", "canary", "head"}
)
#: A major (`v0`, `1`) or major.minor (`v0.10`) tag: moved to each new release.
_FLOATING_VERSION = re.compile(r"[vV]?\d+(\.\d+)?")
PUBLIC_MEMBERS = frozenset({"allUsers", "allAuthenticatedUsers"})
_MEMBER = re.compile(r"^(user|serviceAccount|group|domain|principal|principalSet):\S+$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


class SettingsError(ValueError):
    """Stack configuration that cannot be deployed; the message names each bad key. A value the
    message echoes is redacted (:func:`endpoint.redact.redact`): every command that reports
    it (preview, plan, promote, the Pulumi program) shows no credential a stack holds."""

    def __init__(self, message: str) -> None:
        from endpoint.redact import redact

        super().__init__(redact(message, limit=None, by_name=False))


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


#: Upper bounds the platforms accept (see docs/inputs.md, "Numbers").
MAX_TOKENS = 1 << 20
"""vLLM token counts (maxModelLen, maxNumBatchedTokens, benchmark prompts): 1,048,576."""
MAX_SLO_MS = 3_600_000.0
"""Latency SLOs: a request cannot take longer than Cloud Run's 3600 s request timeout."""
MIN_REQUESTS_PER_SECOND = 0.001
"""Request rates (SLO, cost estimates): from one request in about 17 minutes ..."""
MAX_REQUESTS_PER_SECOND = 100_000.0
"""... to 100,000 requests/s."""
#: Cloud Run instance sizes by GPU type (https://cloud.google.com/run/docs/configuring/services/
#: gpu: "a minimum of 4 CPU and 16 GiB" for L4, "a minimum of 20 CPU and 80 GiB" for RTX PRO
#: 6000; .../services/cpu and .../memory-limits: "The maximum amount of vCPU you can configure
#: is 8", "The maximum amount of memory ... is 32 GiB", 4 GiB per vCPU). Google documents no
#: other size for RTX PRO 6000, so only its documented one is accepted.
CLOUD_RUN_SIZES: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "l4": ((4, 8), (16, 32)),
    "rtx-pro-6000": ((20, 20), (80, 80)),
}
_MEMORY_PER_CPU_GIB = 4
MAX_BENCHMARK_CONCURRENCY = 4096
"""Most concurrent requests one benchmark cell sends (as `gemma4 bench run --concurrency`)."""
#: Multi-region bucket locations by region prefix (https://cloud.google.com/storage/docs/locations).
_MULTI_REGIONS = {"us-": "US", "northamerica-": "US", "europe-": "EU", "asia-": "ASIA"}


#: A value of this many hexadecimal digits or more is a generated key (`openssl rand -hex 16`
#: gives 32), never a Secret Manager secret id a person chose.
_KEY_HEX_DIGITS = 16
_HEX_RUN = re.compile(rf"[0-9a-fA-F]{{{_KEY_HEX_DIGITS},}}")


def check_secret_name(value: str, key: str) -> str:
    """A Secret Manager secret id, not the secret itself: a value that reads as a generated key
    (a run of 16 or more hexadecimal digits, as `openssl rand -hex` prints, a random string,
    or any credential shape) is refused, because the stack file, the program's outputs and
    every command that shows settings would carry it in clear text."""
    from endpoint.secret_shapes import find_secret, high_entropy

    if _HEX_RUN.search(value) or high_entropy(value) or find_secret(value):
        raise ValueError(
            f"config key {key!r} reads as a key, not as the id of the Secret Manager secret "
            "that holds it; store the key in Secret Manager (`gcloud secrets create NAME "
            "--data-file=-`), put NAME here, and rotate the key that was written in the stack "
            "file"
        )
    return value


class _Group(BaseModel):
    model_config = ConfigDict(
        allow_inf_nan=False,
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        protected_namespaces=(),
    )


class ModelSettings(_Group):
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
        try:
            _ = MODELS[value]
            assert MODELS[value].role is Role.TARGET
        except (KeyError, AssertionError):
            allowed = sorted(k for k, v in MODELS.items() if v.role is Role.TARGET)
            raise ValueError(f"unknown model {value!r}; allowed: {', '.join(allowed)}") from None
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


class VllmSettings(_Group):
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


class CloudRunSettings(_Group):
    """Cloud Run service shape, scaling and access."""

    region: str | None = Field(None, description="Cloud Run region (must offer the GPU).")
    cpu: int | None = Field(
        None, ge=1, le=64, description="vCPU; defaults to the GPU type's minimum."
    )
    memory_gib: int | None = Field(
        None, ge=1, le=256, description="Memory in GiB; defaults to the GPU type's minimum."
    )
    min_instances: int = Field(0, ge=0, description="Instances kept warm (billed while idle).")
    max_instances: int = Field(1, ge=1, le=100, description="Upper bound on instances.")
    concurrency: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="Requests one instance takes at once; must equal maxNumSeqs (the default), "
        "the sequences vLLM schedules at once.",
    )
    request_timeout_seconds: int = Field(3600, ge=1, le=3600, description="Per-request timeout.")
    startup_cpu_boost: bool = Field(True, description="Extra CPU while the container starts.")
    gpu_zonal_redundancy: bool = Field(
        False, description="GPU zonal redundancy (separate quota, higher price)."
    )
    mirror_image: bool = Field(
        False,
        description="Mirror the image into Artifact Registry in the region and run it by digest "
        "(needs Docker where `pulumi up` runs).",
    )
    artifact_repository: str | None = Field(
        None,
        pattern=r"^[a-z][a-z0-9-]{0,62}$",
        description="Artifact Registry repository id for the mirrored image; defaults to "
        "one per stack (gemma-<stack>-images).",
    )
    public: bool = Field(False, description="Let allUsers invoke the service.")
    invokers: JsonList = Field(
        default_factory=list,
        description="IAM members given roles/run.invoker (user:, group:, serviceAccount:).",
    )

    @field_validator("invokers")
    @classmethod
    def _members(cls, members: list[str]) -> list[str]:
        for member in members:
            if member in PUBLIC_MEMBERS:
                raise ValueError(f"{member!r} is public: set 'public: true' instead")
            if not _MEMBER.match(member):
                raise ValueError(
                    f"{member!r} is not an IAM member; use user:, group:, serviceAccount:, "
                    "domain:, principal: or principalSet:"
                )
        return members

    @model_validator(mode="after")
    def _scaling(self) -> CloudRunSettings:
        if self.min_instances > self.max_instances:
            raise ValueError(
                f"config key 'minInstances' ({self.min_instances}) must not exceed "
                f"'maxInstances' ({self.max_instances})"
            )
        return self


class TpuSettings(_Group):
    """TPU queued resources: where, how they are provisioned, and who may reach them."""

    zone: str | None = Field(None, description="TPU zone (must offer the accelerator).")
    tpu_runtime_version: str = Field(
        "v2-alpha-tpuv6e", description="TPU VM runtime (software) version."
    )
    provisioning: Literal["flex-start", "spot", "guaranteed", "on-demand"] = Field(
        "flex-start", description="How the queued resource obtains capacity."
    )
    max_run_hours: float | None = Field(
        4.0, gt=0, le=168, description="Cost guard: flex-start nodes are deleted after this long."
    )
    valid_until_hours: float | None = Field(
        4.0, gt=0, le=168, description="Give up a queued request not fulfilled within this long."
    )
    replicas: int = Field(1, ge=1, le=16, description="Independent TPU nodes, each one endpoint.")
    network: str = Field("default", description="VPC network of the TPU nodes.")
    external_ips: bool = Field(True, description="Give each TPU node an external IP address.")
    serving_port: int = Field(8000, ge=1024, le=65535, description="Port vLLM listens on.")
    source_ranges: JsonList = Field(
        default_factory=list,
        description="CIDR ranges allowed to reach the serving port (no public range wider than "
        "sourceRangeMinPrefixV4/V6, never the whole internet).",
    )
    source_range_min_prefix_v4: int = Field(
        DEFAULT_MIN_PREFIX_V4,
        ge=0,
        le=32,
        description="Widest public IPv4 range sourceRanges may hold, as a prefix length.",
    )
    source_range_min_prefix_v6: int = Field(
        DEFAULT_MIN_PREFIX_V6,
        ge=0,
        le=128,
        description="Widest public IPv6 range sourceRanges may hold, as a prefix length.",
    )
    api_key_secret: str = Field(
        "vllm-api-key",
        pattern=r"^[A-Za-z0-9_-]{1,255}$",
        description="Secret Manager secret id holding the vLLM API key clients must send.",
    )

    @field_validator("api_key_secret")
    @classmethod
    def _names_the_api_key(cls, value: str) -> str:
        return check_secret_name(value, "apiKeySecret")

    create_timeout_minutes: int = Field(
        30, ge=1, le=1440, description="How long `pulumi up` waits for a node to become ACTIVE."
    )

    @model_validator(mode="after")
    def _no_open_world(self) -> TpuSettings:
        try:
            problems = source_range_problems(
                self.source_ranges,
                min_prefix_v4=self.source_range_min_prefix_v4,
                min_prefix_v6=self.source_range_min_prefix_v6,
            )
        except RangeError as exc:
            raise ValueError(f"config key 'sourceRanges': {exc}") from None
        if problems:
            raise ValueError(
                f"config key 'sourceRanges': {'; '.join(problems)}: that opens the serving port "
                "to the internet; list your clients' ranges (the vLLM API key is a second "
                "lock, not the only one), or raise sourceRangeMinPrefixV4/V6 deliberately"
            )
        return self


#: The oldest GKE version that installs the GA Gateway API and InferencePool CRDs itself
#: (llm-d.ai/docs/resources/gateway/gke; GKE's "Deploy GKE Inference Gateway" how-to).
MIN_GKE_VERSION = "1.34.0-gke.1626000"
_GKE_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")
#: The endpoint picker (llm-d-router release v0.10.0, 2026-08-17; its release checklist names
#: the image `ghcr.io/llm-d/llm-d-router-endpoint-picker:${VERSION}`).
DEFAULT_PICKER_IMAGE = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"
_DNS_LABEL = r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$"
#: A fully qualified domain name a public certificate can name (no wildcard, no IP address).
_DOMAIN = re.compile(
    r"(?=.{4,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?"
)
#: Namespaces a GKE stack must not take (Kubernetes', and the metrics adapter's).
RESERVED_NAMESPACES = frozenset({"default", "custom-metrics"})
#: `proxySubnetRange` value that uses the region's existing proxy-only subnet.
EXISTING_PROXY_SUBNET = "existing"
#: Auto-mode VPC networks' subnet ranges (cloud.google.com/vpc/docs/subnets, auto mode).
AUTO_MODE_RANGE = ipaddress.IPv4Network("10.128.0.0/9")


def gke_version_key(version: str) -> tuple[int, ...]:
    """`1.34.0-gke.1626000` -> (1, 34, 0, 1626000); ValueError for anything else."""
    match = _GKE_VERSION.fullmatch(version)
    if not match:
        raise ValueError(f"{version!r} is not a GKE version (MAJOR.MINOR.PATCH-gke.N)")
    return tuple(int(part) for part in match.groups())


class GkeSettings(_Group):
    """GKE: the cluster, the accelerator node pool, the Inference Gateway and the autoscaler."""

    min_replicas: int = Field(1, ge=1, le=64, description="vLLM replicas the autoscaler keeps.")
    max_replicas: int = Field(
        2, ge=1, le=64, description="Most vLLM replicas the autoscaler (and the node pool) runs."
    )
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = Field(
        "REGULAR", description="GKE release channel of the cluster."
    )
    cluster_version: str = Field(
        MIN_GKE_VERSION,
        description=f"Minimum GKE control-plane version (at least {MIN_GKE_VERSION}, where GKE "
        "installs the Gateway API and InferencePool CRDs itself).",
    )
    node_provisioning: Literal["on-demand", "spot", "reservation", "flex-start"] = Field(
        "on-demand", description="How the accelerator node pool obtains capacity."
    )
    reservation_name: str | None = Field(
        None,
        pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="Compute Engine reservation the node pool consumes (nodeProvisioning: "
        "reservation).",
    )
    system_machine_type: str = Field(
        "e2-standard-4",
        pattern=r"^[a-z][a-z0-9]*-[a-z]+-[0-9]+$",
        description="Machine type of the system node pool (endpoint picker, metrics adapter).",
    )
    namespace: str = Field(
        "gemma4", pattern=_DNS_LABEL, description="Kubernetes namespace of the serving objects."
    )
    proxy_subnet_range: str = Field(
        "10.127.0.0/23",
        description="CIDR of the proxy-only subnet the regional Gateway's proxies use (/26 or "
        "larger; Google recommends /23), or `existing`: the one the region and network "
        "already have (one per region and network).",
    )
    picker_image: str = Field(
        DEFAULT_PICKER_IMAGE,
        description="Endpoint picker image (llm-d-router), pinned by release tag or digest.",
    )
    picker_failure_mode: Literal["FailOpen", "FailClose"] = Field(
        "FailOpen",
        description="What the Gateway does when no endpoint picker answers: FailOpen routes "
        "without it (load-unaware), FailClose refuses the request.",
    )
    backend_timeout_seconds: int = Field(
        3600,
        ge=1,
        le=86400,
        description="Gateway backend timeout (GCPBackendPolicy timeoutSec; GKE's default 300 s "
        "cuts long generations).",
    )
    gateway_domain: str | None = Field(
        None,
        description="DNS name a public Gateway (public: true) serves HTTPS for: its certificate's "
        "domain, the name clients and the post-deploy checks call; point its A record at the "
        "stack's gateway_address output.",
    )
    gateway_certificate: str | None = Field(
        None,
        pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="A regional Certificate Manager certificate of yours (its name, in the "
        "stack's region) that covers gatewayDomain; default: the stack creates a "
        "Google-managed certificate for gatewayDomain, authorized by DNS.",
    )
    scale_up_waiting_requests: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Autoscaler target: average requests waiting in vLLM's queue per replica; "
        "default: derived from the performance model (the queue one full replica drains "
        "within sloP95TtftMs, on the slow side of the model's band).",
    )

    @field_validator("cluster_version")
    @classmethod
    def _new_enough(cls, value: str) -> str:
        if gke_version_key(value) < gke_version_key(MIN_GKE_VERSION):
            raise ValueError(
                f"{value!r} is older than {MIN_GKE_VERSION}, the first GKE version that installs "
                "the GA Gateway API and InferencePool CRDs; allowed: "
                f"{MIN_GKE_VERSION} or later"
            )
        return value

    @field_validator("gateway_domain")
    @classmethod
    def _domain(cls, value: str | None) -> str | None:
        if value is not None and not _DOMAIN.fullmatch(value):
            raise ValueError(
                f"{value!r} is not a DNS name a certificate can be issued for; allowed: lowercase "
                "labels of letters, digits and hyphens separated by dots, at least two labels, "
                "at most 253 characters, no wildcard, no trailing dot (e.g. llm.example.com)"
            )
        return value

    @field_validator("picker_image")
    @classmethod
    def _pinned_picker(cls, value: str) -> str:
        check_pinned_image(value)
        return value

    @field_validator("namespace")
    @classmethod
    def _own_namespace(cls, value: str) -> str:
        if value in RESERVED_NAMESPACES or value.startswith(("kube-", "gke-", "gmp-")):
            raise ValueError(
                f"{value!r} belongs to Kubernetes, GKE or another component of this stack; "
                "name a namespace of your own (not default, kube-*, gke-*, gmp-*, "
                "custom-metrics)"
            )
        return value

    @field_validator("proxy_subnet_range")
    @classmethod
    def _proxy_range(cls, value: str) -> str:
        if value == EXISTING_PROXY_SUBNET:
            return value
        try:
            network = ipaddress.IPv4Network(value, strict=True)
        except ValueError as exc:
            raise ValueError(
                f"{value!r} is not an IPv4 CIDR block ({exc}); allowed: a private IPv4 range "
                f"of /26 or larger, or {EXISTING_PROXY_SUBNET!r}"
            ) from None
        if network.prefixlen > 26 or not network.is_private:
            raise ValueError(
                f"{value!r}: a proxy-only subnet is a private IPv4 range of /26 or larger "
                "(Google recommends /23)"
            )
        if network.overlaps(AUTO_MODE_RANGE):
            raise ValueError(
                f"{value!r} overlaps {AUTO_MODE_RANGE}, which auto-mode VPC networks (the "
                "`default` network) reserve for their subnets; pick a range outside it"
            )
        return value

    @model_validator(mode="after")
    def _bounds(self) -> GkeSettings:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"config key 'minReplicas' ({self.min_replicas}) must not exceed "
                f"'maxReplicas' ({self.max_replicas})"
            )
        if (self.node_provisioning == "reservation") != (self.reservation_name is not None):
            raise ValueError(
                "config key 'reservationName' is required with nodeProvisioning 'reservation' "
                "and allowed only with it"
            )
        return self


class SloSettings(_Group):
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


class MonitoringSettings(_Group):
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
    monitoring_sidecar_image: str = Field(
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

    @field_validator("monitoring_sidecar_image")
    @classmethod
    def _pinned_sidecar(cls, value: str) -> str:
        check_pinned_image(value)
        return value


class HealthSettings(_Group):
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


class BenchmarkSettings(_Group):
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


class WeightsSettings(_Group):
    """The model bucket and how weights get into it."""

    bucket_location: str | None = Field(
        None, description="Bucket location; defaults to the serving region."
    )
    force_destroy_bucket: bool = Field(
        False, description="Let `pulumi destroy` delete a bucket that still holds weights."
    )
    download_weights: bool = Field(
        True, description="Declare a Cloud Run job that downloads the checkpoint into the bucket."
    )
    hf_token_secret: str = Field(
        "hf-token",
        pattern=r"^[A-Za-z0-9_-]{1,255}$",
        description="Secret Manager secret id holding the Hugging Face token.",
    )

    @field_validator("hf_token_secret")
    @classmethod
    def _names_the_token(cls, value: str) -> str:
        return check_secret_name(value, "hfTokenSecret")


DeployPlatform = Literal["cloud-run", "tpu-vm", "gke"]
#: Keys that mean something on some platforms only; set elsewhere they are refused.
PLATFORM_KEYS: dict[str, frozenset[str]] = {
    **dict.fromkeys(
        (
            "cpu",
            "memoryGib",
            "minInstances",
            "maxInstances",
            "concurrency",
            "requestTimeoutSeconds",
            "startupCpuBoost",
            "gpuZonalRedundancy",
            "mirrorImage",
            "artifactRepository",
            "invokers",
        ),
        frozenset({"cloud-run"}),
    ),
    **dict.fromkeys(
        (
            "tpuRuntimeVersion",
            "provisioning",
            "maxRunHours",
            "validUntilHours",
            "replicas",
            "externalIps",
            "createTimeoutMinutes",
        ),
        frozenset({"tpu-vm"}),
    ),
    # Keys of the Cloud Run and weights groups GKE reads too (its cluster's region, its
    # Gateway's exposure, its model bucket); a TPU VM has a zone and no bucket.
    **dict.fromkeys(
        ("region", "public", "bucketLocation", "forceDestroyBucket", "downloadWeights"),
        frozenset({"cloud-run", "gke"}),
    ),
    # Keys of the TPU group GKE reads too (the node pool's zone, the network, the serving port
    # and who may reach it, the vLLM API key); a Cloud Run service has none of them.
    **dict.fromkeys(
        (
            "zone",
            "network",
            "servingPort",
            "sourceRanges",
            "sourceRangeMinPrefixV4",
            "sourceRangeMinPrefixV6",
            "apiKeySecret",
        ),
        frozenset({"tpu-vm", "gke"}),
    ),
}
"""The platforms that read each platform-specific key; a key of another platform is refused.
Keys not listed are read everywhere (`docs/reference/configuration.md`, *applies to*)."""


def native_platform(profile: HardwareProfile) -> DeployPlatform:
    """The platform a hardware profile runs on when a stack names none."""
    return "tpu-vm" if profile.platform is Platform.TPU else "cloud-run"


class Settings(BaseModel):
    """Everything one stack deploys, validated as a whole."""

    model_config = ConfigDict(
        allow_inf_nan=False, extra="forbid", frozen=True, protected_namespaces=()
    )

    hardware: str = Field(description="Hardware profile (see the hardware catalog).")
    image: str = Field(
        description="vLLM container image, pinned by version tag or @sha256 digest "
        "(no latest/nightly)."
    )
    registries: JsonList = Field(
        default_factory=lambda: list(DEFAULT_REGISTRIES),
        description="Registries the image may come from (host names, `*` wildcards; "
        "`vllm/...` is docker.io).",
    )
    labels: Labels = Field(
        default_factory=dict, description="Google Cloud labels as key=value strings."
    )
    model: ModelSettings = Field(default_factory=ModelSettings)
    vllm: VllmSettings = Field(default_factory=VllmSettings)
    cloud_run: CloudRunSettings = Field(default_factory=CloudRunSettings)
    weights: WeightsSettings = Field(default_factory=WeightsSettings)
    tpu: TpuSettings = Field(default_factory=TpuSettings)
    slo: SloSettings = Field(default_factory=SloSettings)
    health: HealthSettings = Field(default_factory=HealthSettings)
    benchmark: BenchmarkSettings = Field(default_factory=BenchmarkSettings)
    monitoring: MonitoringSettings = Field(default_factory=MonitoringSettings)
    gke: GkeSettings = Field(default_factory=GkeSettings)
    platform: DeployPlatform | None = Field(
        None,
        description="Where the stack runs: cloud-run, tpu-vm or gke; defaults to the hardware's "
        "own (cloud-run for GPUs, tpu-vm for TPUs).",
    )

    @field_validator("hardware")
    @classmethod
    def _known_hardware(cls, value: str) -> str:
        if value not in HARDWARE:
            raise ValueError(f"unknown hardware {value!r}; allowed: {', '.join(sorted(HARDWARE))}")
        return value

    @field_validator("image")
    @classmethod
    def _pinned_image(cls, value: str) -> str:
        check_pinned_image(value)
        return value

    @model_validator(mode="after")
    def _allowed_registry(self) -> Settings:
        registry = image_registry(self.image)
        if not any(fnmatch.fnmatchcase(registry, pattern) for pattern in self.registries):
            raise ValueError(
                f"config key 'image': {self.image!r} comes from {registry!r}, which is not in "
                f"config key 'registries' ({', '.join(self.registries) or 'empty'})"
            )
        return self

    @model_validator(mode="after")
    def _image_for_the_platform(self) -> Settings:
        """vLLM's CUDA image (`vllm-openai`) cannot start on a TPU VM, nor its TPU image
        (`vllm-tpu`) on a GPU; and the settings hold vLLM to the checks of a release whose
        contract this package ships (`serving/data/`). An image under another name (a mirror)
        is judged by what it runs, by the policies."""
        repository = self.image.partition("@")[0]
        if ":" in repository.rsplit("/", 1)[-1]:
            repository = repository.rsplit(":", 1)[0]
        family = {"vllm-openai": "vllm", "vllm-tpu": "vllm-tpu"}.get(repository.rsplit("/", 1)[-1])
        if family is None:
            return self
        tpu = self.profile.platform is Platform.TPU
        wanted = "vllm-tpu" if tpu else "vllm"
        if family != wanted:
            raise ValueError(
                f"config key 'image': {self.image!r} is vLLM's "
                f"{'TPU' if family == 'vllm-tpu' else 'CUDA'} image, but {self.hardware} is "
                f"{'a TPU' if tpu else 'a GPU'}: use "
                f"{'vllm/vllm-tpu' if tpu else 'vllm/vllm-openai'}:vX.Y.Z"
            )
        release = image_release(self.image)
        if release is not None and release not in available():
            shipped = ", ".join(f"{p} {v}" for p, v in available() if p == wanted)
            raise ValueError(
                f"config key 'image': {self.image!r} is {release[0]} {release[1]}, a release "
                f"whose vLLM contract this package does not ship (shipped: {shipped}); its "
                "flags and start-up checks are unknown here. Pin a shipped release, or run "
                "scripts/vllm_contract.py with that version to add its snapshot"
            )
        return self

    @field_validator("labels")
    @classmethod
    def _gcp_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, val in labels.items():
            if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(val):
                raise ValueError(
                    f"label {key}={val} is not a valid Google Cloud label (lowercase letters, "
                    "digits, '_' and '-', key starting with a letter, at most 63 characters)"
                )
        return labels

    @model_validator(mode="after")
    def _platform_combination(self) -> Settings:
        """The platform must be able to run the hardware, and keys of another platform are
        refused (a `maxInstances` on a GKE stack would silently do nothing)."""
        hw = self.profile
        allowed = [native_platform(hw), *(["gke"] if hw.key in GKE_SHAPES else [])]
        if self.deploy_platform not in allowed:
            raise ValueError(
                f"config key 'platform': {self.deploy_platform!r} cannot run hardware "
                f"{hw.key!r}; allowed for {hw.key}: {', '.join(allowed)}"
            )
        gke_keys = frozenset(
            GkeSettings.model_fields[name].alias or to_camel(name)
            for name in GkeSettings.model_fields
        )
        restricted = {**PLATFORM_KEYS, **dict.fromkeys(gke_keys, frozenset({"gke"}))}
        for group in (self.cloud_run, self.weights, self.tpu, self.gke):
            for name in sorted(group.model_fields_set):
                key = type(group).model_fields[name].alias or to_camel(name)
                platforms = restricted.get(key)
                if platforms is not None and self.deploy_platform not in platforms:
                    raise ValueError(
                        f"config key {key!r} applies to platform {', '.join(sorted(platforms))} "
                        f"only; this stack's platform is {self.deploy_platform!r} (config key "
                        "'platform'; allowed: cloud-run, tpu-vm, gke)"
                    )
        return self

    @model_validator(mode="after")
    def _fits_hardware(self) -> Settings:
        hw = self.profile
        if self.deploy_platform == "gke":
            self._gke_checks()
        card = self.model.card
        if card.architecture and self.vllm.max_model_len > card.architecture.max_context:
            # vLLM refuses it too (vllm/config/model.py, ModelConfig: "User-specified
            # max_model_len (...) is greater than the derived max_model_len ...").
            raise ValueError(
                f"config key 'maxModelLen' ({self.vllm.max_model_len}) exceeds {card.repo_id}'s "
                f"context of {card.architecture.max_context} tokens; vLLM refuses to start: "
                f"'User-specified max_model_len ({self.vllm.max_model_len}) is greater than the "
                "derived max_model_len'"
            )
        if hw.platform is Platform.TPU:
            zone = self.tpu.zone
            if zone is None or zone not in hw.locations:
                what = (
                    "is required" if zone is None else f"{zone!r} does not offer {hw.accelerator}"
                )
                raise ValueError(
                    f"config key 'zone' {what} for {hw.key}; allowed: {', '.join(hw.locations)}"
                )
            if self.deploy_platform == "gke":
                return self
            if self.tpu.provisioning == "flex-start" and self.tpu.max_run_hours is None:
                raise ValueError(
                    "config key 'maxRunHours' is required with flex-start provisioning"
                )
            for key, hours in (
                ("maxRunHours", self.tpu.max_run_hours),
                ("validUntilHours", self.tpu.valid_until_hours),
            ):
                # Sent in whole seconds: a value under a minute would read as a guard but be
                # rounded to almost nothing.
                if hours is not None and hours * 60 < 1:
                    raise ValueError(
                        f"config key {key!r}: {hours} h is under one minute; allowed: "
                        "1/60 to 168 hours, or null for no limit"
                    )
            if self.tpu.replicas > 1:
                # Every node downloads the weights at boot: a branch name can resolve to other
                # weights on each node (and after each reboot).
                for key, revision in (
                    ("modelRevision", self.model.model_revision),
                    (
                        "drafterRevision",
                        self.model.drafter_revision if self.model.drafter else None,
                    ),
                ):
                    if revision is not None and not re.fullmatch(r"[0-9a-f]{40}", revision):
                        raise ValueError(
                            f"config key {key!r}: {revision!r} is not a 40-character commit "
                            f"sha; with replicas {self.tpu.replicas} each node downloads the "
                            "weights at boot, so a branch can serve different weights on "
                            "different nodes. Pin the commit (the Hugging Face model page's "
                            "history lists them)"
                        )
        if self.deploy_platform == "cloud-run":
            cr = self.cloud_run
            if cr.region is None:
                raise ValueError(
                    f"config key 'region' is required for {hw.key}; "
                    f"allowed: {', '.join(hw.locations)}"
                )
            if cr.region not in hw.locations:
                raise ValueError(
                    f"config key 'region': {hw.accelerator} is not offered in {cr.region!r}; "
                    f"allowed: {', '.join(hw.locations)}"
                )
            if cr.cpu is not None and cr.cpu < hw.min_cpu:
                raise ValueError(
                    f"config key 'cpu' ({cr.cpu}) is below the {hw.accelerator} "
                    f"minimum of {hw.min_cpu}"
                )
            if cr.memory_gib is not None and cr.memory_gib < hw.min_memory_gib:
                raise ValueError(
                    f"config key 'memoryGib' ({cr.memory_gib}) is below the {hw.accelerator} "
                    f"minimum of {hw.min_memory_gib}"
                )
            (low_cpu, high_cpu), (low_mem, high_mem) = CLOUD_RUN_SIZES.get(
                hw.key, ((hw.min_cpu, 8), (hw.min_memory_gib, 32))
            )
            if not low_cpu <= self.cpu <= high_cpu:
                raise ValueError(
                    f"config key 'cpu' ({self.cpu}): Cloud Run with {hw.accelerator} accepts "
                    f"{low_cpu} to {high_cpu} vCPU"
                )
            if not low_mem <= self.memory_gib <= min(high_mem, _MEMORY_PER_CPU_GIB * self.cpu):
                raise ValueError(
                    f"config key 'memoryGib' ({self.memory_gib}): Cloud Run with "
                    f"{hw.accelerator} and {self.cpu} vCPU accepts {low_mem} to "
                    f"{min(high_mem, _MEMORY_PER_CPU_GIB * self.cpu)} GiB"
                )
            seqs = self.vllm.max_num_seqs
            if cr.concurrency is not None and cr.concurrency != seqs:
                where = (
                    "vLLM never gets more than that, its other sequences stay idle, and the "
                    "requests past it wait in Cloud Run's queue (maxInstances permitting)"
                    if cr.concurrency < seqs
                    else "the requests past maxNumSeqs wait in vLLM's queue, and Cloud Run "
                    "starts no other instance for them until an instance holds that many"
                )
                raise ValueError(
                    f"config key 'concurrency' ({cr.concurrency}) differs from 'maxNumSeqs' "
                    f"({seqs}): Cloud Run sends one instance up to {cr.concurrency} requests "
                    f"and vLLM schedules {seqs} at once, so {where}; a benchmark cell above "
                    f"the smaller measures that queue, not the model. Set concurrency to {seqs} "
                    "or remove it (it defaults to maxNumSeqs)"
                )
        location = self.weights.bucket_location
        if location is not None:
            region = (
                self.cloud_run.region
                if hw.platform is Platform.CLOUD_RUN
                else (self.tpu.zone or "").rsplit("-", 1)[0]
            ) or ""
            allowed = [region] + [m for p, m in _MULTI_REGIONS.items() if region.startswith(p)]
            if location.lower() not in [a.lower() for a in allowed]:
                raise ValueError(
                    f"config key 'bucketLocation' ({location!r}): the weights bucket must be in "
                    f"the serving region or its multi-region; allowed: {', '.join(allowed)}"
                )
        return self

    @model_validator(mode="after")
    def _vllm_start_up_checks(self) -> Settings:
        """What vLLM's own config checks refuse at start-up, in vLLM's words, for every stack
        kind (the checks are in vLLM's core, which the TPU image runs too). Read in vLLM
        0.27.1 and vllm-tpu 0.27.0/0.28.0, where these checks are identical."""
        v = self.vllm
        batched, seqs, max_len = v.max_num_batched_tokens, v.max_num_seqs, v.max_model_len
        refusals: list[str] = []
        # vllm/config/scheduler.py, SchedulerConfig.verify_max_model_len.
        if batched < max_len and not v.chunked_prefill:
            refusals.append(
                f"config key 'maxNumBatchedTokens' ({batched}) is below 'maxModelLen' "
                f"({max_len}) with 'chunkedPrefill' off; vLLM refuses to start: "
                f"'max_num_batched_tokens ({batched}) is smaller than max_model_len "
                f"({max_len}). This effectively limits the maximum sequence length to "
                "max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
                "max_num_batched_tokens or decrease max_model_len.' Set maxNumBatchedTokens to "
                f"at least {max_len}, lower maxModelLen, or turn chunkedPrefill on"
            )
        if batched < seqs:
            refusals.append(
                f"config key 'maxNumBatchedTokens' ({batched}) is below 'maxNumSeqs' ({seqs}); "
                f"vLLM refuses to start: 'max_num_batched_tokens ({batched}) must be greater "
                f"than or equal to max_num_seqs ({seqs}).' Raise maxNumBatchedTokens to at "
                f"least {seqs} or lower maxNumSeqs"
            )
        # vllm/v1/core/encoder_cache_manager.py, compute_mm_encoder_budget.
        # vllm/platforms/cuda.py (CudaPlatform.check_and_update_config) and the TPU platform:
        # chunked multimodal input is forced off for this model whatever the flag says.
        card = self.model.card
        forced = card.chunked_mm_input_forced_off(tpu=self.profile.platform is Platform.TPU)
        if v.chunked_mm_input and forced:
            refusals.append(
                f"config key 'chunkedMmInput' is true, but vLLM disables chunked multimodal "
                f"input for {self.model.model} whatever the flag says (a multimodal model with "
                "bidirectional, prefix-LM, attention: 'Forcing --disable_chunked_mm_input for "
                "models with multimodal-bidirectional attention.'; the TPU platform does the "
                "same for every multimodal model), so it would have no effect; set "
                "chunkedMmInput to false (accepted: false)"
            )
        per_item = card.max_tokens_per_mm_item
        if (not v.chunked_mm_input or forced) and per_item is not None and per_item > batched:
            refusals.append(
                f"config key 'maxNumBatchedTokens' ({batched}) is below one image of "
                f"{self.model.model} ({per_item} tokens), and vLLM does not chunk it (chunked "
                "multimodal input is off for this model); vLLM "
                "refuses to start: 'Chunked MM input disabled but max_tokens_per_mm_item "
                f"({per_item}) is larger than max_num_batched_tokens ({batched}). Please "
                f"increase max_num_batched_tokens.' Set maxNumBatchedTokens to at least "
                f"{per_item}" + ("" if forced else " or turn chunkedMmInput on")
            )
        if refusals:
            raise ValueError("; ".join(refusals))
        return self

    @model_validator(mode="after")
    def _tpu_fits_memory(self) -> Settings:
        """A TPU node that the capacity planner says cannot hold the model and one full-length
        sequence is refused (Cloud Run GPUs are held to it by the gpu-memory-budget policy)."""
        if self.profile.platform is not Platform.TPU:
            return self
        plan = self.memory_plan()
        if plan is None or plan.fits:
            return self
        gib = 1024**3
        raise ValueError(
            f"{self.model.model} does not fit on {self.profile.accelerator} "
            f"({self.profile.memory_bytes / gib:.2f} GiB): weights {plan.weight_bytes / gib:.2f}"
            f" GiB + drafter {plan.drafter_bytes / gib:.2f} GiB + runtime reserve "
            f"{plan.runtime_reserve_bytes / gib:.2f} GiB + KV cache for one "
            f"{plan.max_model_len}-token sequence {plan.one_sequence_kv_bytes / gib:.2f} GiB = "
            f"{plan.required_bytes / gib:.2f} GiB > gpuMemoryUtilization {plan.utilization} x "
            f"{plan.device_bytes / gib:.2f} GiB = {plan.budget_bytes / gib:.2f} GiB (room for "
            f"{plan.capacity.max_concurrency:.2f} full-length sequences, vLLM needs 1). Lower "
            "maxModelLen or maxNumBatchedTokens, raise gpuMemoryUtilization (at most 1), use "
            "kvCacheDtype fp8 or the QAT checkpoint; see `gemma4 plan`"
        )

    def _gke_checks(self) -> None:
        """What a GKE stack needs: a region for the cluster and Gateway, a zone in it for the
        accelerator nodes; a public Gateway only with client ranges to enforce."""
        region, zone = self.cloud_run.region, self.tpu.zone
        if region is None or not re.fullmatch(r"[a-z]+-[a-z]+[0-9]+", region):
            raise ValueError(
                "config key 'region' is required for platform gke: the cluster's and the "
                f"Gateway's region, e.g. us-east5 (got {region!r})"
            )
        if zone is None or not zone.startswith(f"{region}-"):
            raise ValueError(
                f"config key 'zone' is required for platform gke: a zone of region {region!r} "
                f"for the accelerator nodes (got {zone!r})"
            )
        if self.cloud_run.public and not self.tpu.source_ranges:
            raise ValueError(
                "config key 'sourceRanges' is required with 'public: true' on platform gke: the "
                "external Gateway admits only these client ranges (and the vLLM API key)"
            )
        g = self.gke
        if self.cloud_run.public and g.gateway_domain is None:
            raise ValueError(
                "config key 'gatewayDomain' is required with 'public: true' on platform gke: a "
                "public Gateway serves HTTPS only (the API key must not cross the internet in "
                "clear text), with a Google-managed certificate for that domain, or with your "
                "own regional Certificate Manager certificate named in 'gatewayCertificate'"
            )
        if not self.cloud_run.public and (g.gateway_domain or g.gateway_certificate):
            key = "gatewayDomain" if g.gateway_domain else "gatewayCertificate"
            raise ValueError(
                f"config key {key!r} applies to a public Gateway only (public: true); the "
                "internal Gateway serves HTTP inside the VPC"
            )

    @property
    def deploy_platform(self) -> DeployPlatform:
        """Where this stack runs: the `platform` key, or the hardware's own platform."""
        return self.platform or native_platform(self.profile)

    @property
    def gke_shape(self) -> GkeShape:
        """The GKE node shape of this stack's hardware (platform gke only)."""
        return GKE_SHAPES[self.hardware]

    def memory_plan(self) -> MemoryPlan | None:
        """The capacity planner's memory plan for one instance (None without an architecture
        in the model catalog); `gemma4 plan` prints it."""
        card = self.model.card
        if card.architecture is None:
            return None
        drafter = self.model.drafter_card
        v = self.vllm
        return plan_memory(
            card.architecture,
            weight_bytes=card.weight_bytes,
            drafter_bytes=drafter.weight_bytes if drafter else 0,
            device_bytes=self.profile.memory_bytes,
            utilization=v.gpu_memory_utilization,
            max_model_len=v.max_model_len,
            max_num_batched_tokens=v.max_num_batched_tokens,
            kv_cache_dtype=v.kv_cache_dtype,
            model_dtype=v.dtype,
            tensor_parallel=self.profile.accelerator_count,
            profile=TPU_PROFILE if self.profile.platform is Platform.TPU else DEFAULT_PROFILE,
        )

    @property
    def price(self) -> Price:
        """The hourly rate one serving instance bills (the one price source of the planner and
        the preview): on GKE one replica's node (its spot or flex-start rate in such a node
        pool; a reservation bills the on-demand rate unless a commitment applies); a
        flex-start or spot TPU node its own rate; a Cloud Run GPU instance its GPU's rate
        (the zonal-redundancy SKU when on) plus its own vCPU and memory; otherwise the
        hardware's list price."""
        if self.deploy_platform == "gke":
            shape = self.gke_shape
            return {"spot": shape.spot_price, "flex-start": shape.flex_start_price}.get(
                self.gke.node_provisioning, shape.price
            )
        flex = self.profile.flex_start_price
        if self.deploy_platform == "tpu-vm" and self.tpu.provisioning == "flex-start" and flex:
            return flex
        spot = self.profile.spot_price
        if self.deploy_platform == "tpu-vm" and self.tpu.provisioning == "spot" and spot:
            return spot
        gpu = self.profile.cloud_run_gpu
        if self.deploy_platform == "cloud-run" and gpu is not None:
            return cloud_run_price(
                gpu, self.cloud_run.gpu_zonal_redundancy, self.cpu, self.memory_gib
            )
        return self.profile.price

    @property
    def replica_bounds(self) -> tuple[int, int]:
        """(fewest, most) serving instances the stack runs: on GKE the autoscaler's
        minReplicas/maxReplicas (one node each), on a TPU VM its fixed `replicas`, on Cloud Run
        minInstances/maxInstances (the one place the planner and the preview read them)."""
        if self.deploy_platform == "gke":
            return self.gke.min_replicas, self.gke.max_replicas
        if self.deploy_platform == "tpu-vm":
            return self.tpu.replicas, self.tpu.replicas
        return self.cloud_run.min_instances, self.cloud_run.max_instances

    @property
    def billed_hours_per_month(self) -> float:
        """Hours a month one instance of this stack bills at most, deployed once: a flex-start
        TPU node is deleted after `maxRunHours`; anything else runs until deleted (730 h)."""
        if self.deploy_platform == "tpu-vm" and self.tpu.provisioning == "flex-start":
            return min(self.tpu.max_run_hours or HOURS_PER_MONTH, HOURS_PER_MONTH)
        return HOURS_PER_MONTH

    @property
    def billing(self) -> str:
        """How an instance of this stack is billed, in words (with the price's provisioning)."""
        if self.deploy_platform == "gke":
            return (
                f"GKE ({self.gke.node_provisioning}): each replica's node bills while it runs "
                "(730 h a month), beside the cluster's fixed costs"
            )
        if self.deploy_platform == "tpu-vm":
            kind = self.tpu.provisioning
            if kind == "flex-start":
                return (
                    f"flex-start: each node bills at most maxRunHours "
                    f"({self.billed_hours_per_month:g} h) per deployment, then is deleted"
                )
            return f"{kind}: each node bills while it exists (730 h a month)"
        return "Cloud Run, instance-based: each instance bills while it runs (730 h a month)"

    @property
    def instance_concurrency(self) -> int:
        """Requests one Cloud Run instance takes at once: ``concurrency``, which must equal
        ``maxNumSeqs``, else ``maxNumSeqs``."""
        return self.cloud_run.concurrency or self.vllm.max_num_seqs

    @property
    def profile(self) -> HardwareProfile:
        return HARDWARE[self.hardware]

    @property
    def cpu(self) -> int:
        return self.cloud_run.cpu or self.profile.min_cpu

    @property
    def memory_gib(self) -> int:
        return self.cloud_run.memory_gib or self.profile.min_memory_gib

    @property
    def region(self) -> str:
        if self.cloud_run.region is None:
            raise SettingsError("config key 'region' is not set")
        return self.cloud_run.region


#: Where images may come from unless a stack says otherwise (the official vLLM images).
DEFAULT_REGISTRIES: tuple[str, ...] = ("docker.io",)
_IMAGE_CHARS = re.compile(r"[A-Za-z0-9._/:@-]+")


def image_registry(image: str) -> str:
    """The registry host of an image reference (`vllm/vllm-openai:v1` -> `docker.io`)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first.lower()
    return "docker.io"


def check_pinned_image(image: str) -> None:
    """Raise ValueError unless `image` names a fixed tag or a sha256 digest of 64 hex digits."""
    if not _IMAGE_CHARS.fullmatch(image):
        raise ValueError(
            f"image {image!r} is not an image reference (letters, digits, . _ / : @ - only)"
        )
    if "@" in image:
        digest = image.split("@", 1)[1]
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            raise ValueError(
                f"image {image!r} has a malformed digest: only sha256: and 64 lowercase hex digits"
            )
        return
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:
        raise ValueError(f"image {image!r} has no tag: pin a version tag or a @sha256: digest")
    if tag.lower() in FLOATING_TAGS or tag.lower().startswith(("nightly-", "latest-")):
        raise ValueError(
            f"image {image!r} uses the floating tag {tag!r}; pin a version tag or a @sha256: digest"
        )
    if _FLOATING_VERSION.fullmatch(tag):
        raise ValueError(
            f"image {image!r} uses {tag!r}, a major or major.minor tag that moves with each "
            "release (llm-d's guides use `v0`); pin a full version tag or a @sha256: digest"
        )


_GROUPS: dict[str, type[_Group]] = {
    "model": ModelSettings,
    "vllm": VllmSettings,
    "cloud_run": CloudRunSettings,
    "weights": WeightsSettings,
    "tpu": TpuSettings,
    "slo": SloSettings,
    "health": HealthSettings,
    "benchmark": BenchmarkSettings,
    "monitoring": MonitoringSettings,
    "gke": GkeSettings,
}
_TOP_LEVEL = ("hardware", "image", "registries", "labels", "platform")


def config_keys() -> dict[str, tuple[str, Any]]:
    """Every stack config key: key -> (group, pydantic field info). Used by docs and tests."""
    keys: dict[str, tuple[str, Any]] = {k: ("", Settings.model_fields[k]) for k in _TOP_LEVEL}
    for group, cls in _GROUPS.items():
        for name, info in cls.model_fields.items():
            keys[info.alias or to_camel(name)] = (group, info)
    return keys


#: Keys whose values reach a shell script (the TPU startup script) or an argument vector
#: (vLLM's, the download job's) or a REST path: no shell metacharacters or whitespace.
SCRIPT_KEYS = frozenset(
    {
        "image",
        "pickerImage",
        "modelRevision",
        "drafterRevision",
        "servedModelName",
        "tpuRuntimeVersion",
        "network",
        "zone",
        "region",
        "bucketLocation",
        "healthCheckServiceAccount",
        "invokers",
        "sourceRanges",
        "apiKeySecret",
        "hfTokenSecret",
    }
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: Unicode categories no config value may hold: controls, invisible format characters
#: (zero-width space, bidirectional overrides, BOM), line/paragraph separators, surrogates and
#: private use. A value that looks like `main` must be `main`.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
#: A Google Cloud project id (6 to 30 lowercase letters, digits and hyphens, starting with a
#: letter, not ending with a hyphen), optionally domain-scoped (`example.com:my-project`).
_PROJECT_ID = re.compile(r"(?:[a-z0-9][a-z0-9.-]*[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]")


def _invisible(text: str) -> str | None:
    match = _CONTROL.search(text)
    if match:
        return match.group()
    return next((ch for ch in text if unicodedata.category(ch) in _INVISIBLE), None)


def check_project_id(value: Any) -> str:
    """`gcp:project` as Google allows it; it reaches REST paths and resource names."""
    if not isinstance(value, str) or not value:
        raise SettingsError("gcp:project is not set: `pulumi config set gcp:project <id>`")
    if not _PROJECT_ID.fullmatch(value):
        raise SettingsError(
            f"gcp:project {value!r} is not a Google Cloud project id: 6 to 30 lowercase "
            "letters, digits and hyphens, starting with a letter and not ending with a hyphen "
            "(optionally domain-scoped, `example.com:my-project`)"
        )
    return value


_SHELL_META = re.compile(r"[\s;&|$`<>(){}\[\]*?!~#'\"\\]")


def check_text(key: str, value: Any) -> None:
    """Refuse control characters in any string value, and shell metacharacters in values
    that reach a script or argv (SCRIPT_KEYS). Lists and their items are checked too."""
    values = value if isinstance(value, list) else [value]
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list):
            values = parsed
    for item in values:
        if not isinstance(item, str):
            continue
        control = _invisible(item)
        if control:
            raise SettingsError(
                f"config key {key!r}: {item!r} contains the control or invisible character "
                f"{control!r} (U+{ord(control):04X}); values are single-line visible text"
            )
        meta = _SHELL_META.search(item) if key in SCRIPT_KEYS else None
        if meta:
            raise SettingsError(
                f"config key {key!r}: {item!r} contains {meta.group()!r}; this value reaches a "
                "shell script or an argument list, which allow no whitespace or shell "
                "metacharacters (; & | $ ` < > ( ) { } [ ] * ? ! ~ # quotes \\)"
            )


def closest_key(key: str, known: Any) -> str:
    """`; did you mean 'maxNumSeqs'?` for a misspelled key, or ''."""
    match = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    if not match:
        lowered = {k.lower(): k for k in known}
        if key.lower() in lowered:
            match = [lowered[key.lower()]]
    return f" (did you mean {match[0]!r}?)" if match else ""


def load_settings(raw: Mapping[str, Any]) -> Settings:
    """Validate flat stack config (camelCase keys, values as Pulumi hands them over)."""
    known = config_keys()
    unknown = sorted(set(raw) - set(known))
    if unknown:
        named = ", ".join(f"{k!r}{closest_key(k, known)}" for k in unknown)
        raise SettingsError(f"unknown config key(s): {named}; allowed: {', '.join(sorted(known))}")
    for key, value in raw.items():
        check_text(key, value)
    data: dict[str, Any] = {group: {} for group in _GROUPS}
    for key, value in raw.items():
        group, _ = known[key]
        if group:
            data[group][key] = value
        else:
            data[key] = value
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        # Drop only the leading group: a key may share its group's name (`model`, `monitoring`).
        parts = list(error["loc"])
        if parts and parts[0] in _GROUPS:
            parts = parts[1:]
        loc = [str(part) for part in parts]
        key = loc[0] if loc else ""
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "is required"
        where = f"config key {key!r}: " if key and "config key" not in message else ""
        given = error.get("input")
        from endpoint.redact import redact

        given_text = redact(repr(given), limit=None, by_name=False)  # before it is cut
        if len(given_text) > 80:
            given_text = f"{given_text[:60]}... ({len(given_text)} characters)"
        shown = (
            f" (got {given_text})"
            if key
            and error["type"] not in ("missing", "value_error")
            and not isinstance(given, dict)
            else ""
        )
        lines.append(f"{where}{message}{shown}")
    return "invalid stack configuration:\n  " + "\n  ".join(lines)
