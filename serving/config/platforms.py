"""One settings model per platform (Cloud Run, TPU VM, GKE), selected by the `platform` key.

Keys two platforms read are declared once, in a block both models include: the nodes' network
(TPU VM and GKE), the model bucket (every platform) and `public` (Cloud Run and GKE:
reachable from the internet). A stack's keys go to its platform's model only; a key of another
platform is refused by name (`serving.config.settings.load_settings`).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from serving.config.groups import Group, JsonList, PinnedImage, SecretId
from serving.config.netrange import (
    DEFAULT_MIN_PREFIX_V4,
    DEFAULT_MIN_PREFIX_V6,
    RangeError,
    source_range_problems,
)

DeployPlatform = Literal["cloud-run", "tpu-vm", "gke"]
PUBLIC_MEMBERS = frozenset({"allUsers", "allAuthenticatedUsers"})
_MEMBER = re.compile(r"^(user|serviceAccount|group|domain|principal|principalSet):\S+$")


class NetworkSettings(Group):
    """Where the nodes run and who reaches them: the block the TPU VM and GKE models share (a
    Cloud Run service has no zone, network, port or client ranges of its own)."""

    zone: str | None = Field(
        None, description="Zone of the TPU nodes or GKE accelerator nodes (must offer it)."
    )
    network: str = Field("default", description="VPC network of the TPU nodes or GKE cluster.")
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
    api_key_secret: SecretId = Field(
        "vllm-api-key",
        pattern=r"^[A-Za-z0-9_-]{1,255}$",
        description="Secret Manager secret id holding the vLLM API key clients must send.",
    )

    @model_validator(mode="after")
    def _no_open_world(self) -> NetworkSettings:
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


class BucketSettings(Group):
    """The model bucket a download job fills: the block every platform's model includes."""

    bucket_location: str | None = Field(
        None, description="Bucket location; defaults to the serving region."
    )
    force_destroy_bucket: bool = Field(
        False, description="Let `pulumi destroy` delete a bucket that still holds weights."
    )
    download_weights: bool = Field(
        True, description="Declare a Cloud Run job that downloads the checkpoint into the bucket."
    )


class PublicSettings(Group):
    """`public`, one concept on Cloud Run and GKE: reachable from the internet."""

    public: bool = Field(
        False,
        description="Reachable from the internet: on Cloud Run allUsers may invoke the service; "
        "on GKE an external HTTPS Gateway (gatewayDomain, sourceRanges) replaces the internal "
        "one.",
    )


class CloudRunSettings(BucketSettings, PublicSettings):
    """Cloud Run service shape, scaling and access."""

    platform: Literal["cloud-run"] = "cloud-run"
    region: str | None = Field(None, description="Cloud Run region (must offer the GPU).")
    cpu: int | None = Field(
        None, ge=1, le=64, description="vCPU; defaults to the GPU type's minimum."
    )
    memory_gib: int | None = Field(
        None, ge=1, le=256, description="Memory in GiB; defaults to the GPU type's minimum."
    )
    min_instances: int = Field(0, ge=0, description="Instances kept warm (billed while idle).")
    max_instances: int = Field(1, ge=1, le=100, description="Upper bound on instances.")
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


class TpuSettings(NetworkSettings, BucketSettings):
    """TPU queued resources: how they are provisioned and how many."""

    platform: Literal["tpu-vm"] = "tpu-vm"
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
    external_ips: bool = Field(True, description="Give each TPU node an external IP address.")
    create_timeout_minutes: int = Field(
        30, ge=1, le=1440, description="How long `pulumi up` waits for a node to become ACTIVE."
    )

    @model_validator(mode="after")
    def _guards(self) -> TpuSettings:
        if self.provisioning == "flex-start" and self.max_run_hours is None:
            raise ValueError("config key 'maxRunHours' is required with flex-start provisioning")
        for key, hours in (
            ("maxRunHours", self.max_run_hours),
            ("validUntilHours", self.valid_until_hours),
        ):
            # Sent in whole seconds: a value under a minute would read as a guard but be
            # rounded to almost nothing.
            if hours is not None and hours * 60 < 1:
                raise ValueError(
                    f"config key {key!r}: {hours} h is under one minute; allowed: "
                    "1/60 to 168 hours, or null for no limit"
                )
        return self


#: The oldest GKE version that installs the GA Gateway API and InferencePool CRDs itself
#: (llm-d.ai/docs/resources/gateway/gke; GKE's "Deploy GKE Inference Gateway" how-to).
MIN_GKE_VERSION = "1.34.0-gke.1626000"
_GKE_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")
#: The endpoint picker (llm-d-router release v0.10.0, 2026-08-17; its release checklist names
#: the image `ghcr.io/llm-d/llm-d-router-endpoint-picker:${VERSION}`).
DEFAULT_PICKER_IMAGE = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"
#: A zone name (`us-east5-b`): its region, a hyphen and a letter.
_ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")
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


class GkeSettings(NetworkSettings, BucketSettings, PublicSettings):
    """GKE: the cluster, the accelerator node pool, the Inference Gateway and the autoscaler.
    The cluster's region is its zone's."""

    platform: Literal["gke"] = "gke"
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
    picker_image: PinnedImage = Field(
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
        if self.zone is None or not _ZONE.fullmatch(self.zone):
            raise ValueError(
                "config key 'zone' is required for platform gke: the zone of the accelerator "
                f"nodes, whose region is the cluster's and the Gateway's, e.g. us-east5-b (got "
                f"{self.zone!r})"
            )
        if self.public and not self.source_ranges:
            raise ValueError(
                "config key 'sourceRanges' is required with 'public: true' on platform gke: the "
                "external Gateway admits only these client ranges (and the vLLM API key)"
            )
        if self.public and self.gateway_domain is None:
            raise ValueError(
                "config key 'gatewayDomain' is required with 'public: true' on platform gke: a "
                "public Gateway serves HTTPS only (the API key must not cross the internet in "
                "clear text), with a Google-managed certificate for that domain, or with your "
                "own regional Certificate Manager certificate named in 'gatewayCertificate'"
            )
        if not self.public and (self.gateway_domain or self.gateway_certificate):
            key = "gatewayDomain" if self.gateway_domain else "gatewayCertificate"
            raise ValueError(
                f"config key {key!r} applies to a public Gateway only (public: true); the "
                "internal Gateway serves HTTP inside the VPC"
            )
        return self

    @property
    def region(self) -> str:
        """The cluster's and the Gateway's region: the accelerator nodes' zone's."""
        return str(self.zone).rsplit("-", 1)[0]


#: The model of each platform, by the `platform` key's value.
PLATFORMS: dict[str, type[CloudRunSettings | TpuSettings | GkeSettings]] = {
    "cloud-run": CloudRunSettings,
    "tpu-vm": TpuSettings,
    "gke": GkeSettings,
}
