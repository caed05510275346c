"""Typed stack settings: one model per platform (`serving.config.platforms`) beside the blocks
every platform shares (`serving.config.groups`), validated as a whole.

Stack files hold flat camelCase keys (`maxNumSeqs: 8`); :func:`load_settings` routes each key to
its block, the stack's own platform's model for a platform key, and refuses unknown keys, keys
of another platform and keys whose value is derived, before any resource is declared. Error
messages name the key and what is allowed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from serving.catalog.hardware import (
    GKE_SHAPES,
    HARDWARE,
    GkeShape,
    HardwareProfile,
    Platform,
    Price,
    cloud_run_price,
)
from serving.config.checks import (
    DEFAULT_REGISTRIES,
    SettingsError,
    check_text,
    closest_key,
    image_registry,
    image_repository,
)
from serving.config.groups import (
    BenchmarkSettings,
    Group,
    HealthSettings,
    JsonList,
    Labels,
    ModelSettings,
    MonitoringSettings,
    PinnedImage,
    SloSettings,
    VllmSettings,
    WeightsSettings,
)
from serving.config.platforms import (
    PLATFORMS,
    BucketSettings,
    CloudRunSettings,
    DeployPlatform,
    GkeSettings,
    NetworkSettings,
    PublicSettings,
    TpuSettings,
)
from serving.launch.vllm_contract import available, image_release
from serving.sizing.memory import (
    DEFAULT_PROFILE,
    HOURS_PER_MONTH,
    TPU_PROFILE,
    MemoryPlan,
    plan_memory,
)

_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")

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
#: Multi-region bucket locations by region prefix (https://cloud.google.com/storage/docs/locations).
_MULTI_REGIONS = {"us-": "US", "northamerica-": "US", "europe-": "EU", "asia-": "ASIA"}


_T = TypeVar("_T")
PlatformSettings = Annotated[
    CloudRunSettings | TpuSettings | GkeSettings, Field(discriminator="platform")
]


class Settings(BaseModel):
    """Everything one stack deploys, validated as a whole."""

    model_config = ConfigDict(
        allow_inf_nan=False, extra="forbid", frozen=True, protected_namespaces=()
    )

    hardware: str = Field(description="Hardware profile (see the hardware catalog).")
    image: PinnedImage = Field(
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
    weights: WeightsSettings = Field(default_factory=WeightsSettings)
    slo: SloSettings = Field(default_factory=SloSettings)
    health: HealthSettings = Field(default_factory=HealthSettings)
    benchmark: BenchmarkSettings = Field(default_factory=BenchmarkSettings)
    monitoring: MonitoringSettings = Field(default_factory=MonitoringSettings)
    #: The stack's platform's own keys (its `platform` field is the stack's `platform` key).
    platform_settings: PlatformSettings

    @field_validator("hardware")
    @classmethod
    def _known_hardware(cls, value: str) -> str:
        if value not in HARDWARE:
            raise ValueError(f"unknown hardware {value!r}; allowed: {', '.join(sorted(HARDWARE))}")
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
        family = {"vllm-openai": "vllm", "vllm-tpu": "vllm-tpu"}.get(image_repository(self.image))
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
    def _fits_hardware(self) -> Settings:
        hw = self.profile
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
        on = self.platform_settings
        tpu = hw.platform is Platform.TPU
        if (
            isinstance(on, NetworkSettings)
            and tpu
            and (on.zone is None or on.zone not in hw.locations)
        ):
            what = (
                "is required" if on.zone is None else f"{on.zone!r} does not offer {hw.accelerator}"
            )
            raise ValueError(
                f"config key 'zone' {what} for {hw.key}; allowed: {', '.join(hw.locations)}"
            )
        if isinstance(on, CloudRunSettings):
            self._cloud_run_checks(on, hw)
        if isinstance(on, BucketSettings) and on.bucket_location is not None:
            location, region = on.bucket_location, self.region
            allowed = [region] + [m for p, m in _MULTI_REGIONS.items() if region.startswith(p)]
            if location.lower() not in [a.lower() for a in allowed]:
                raise ValueError(
                    f"config key 'bucketLocation' ({location!r}): the weights bucket must be in "
                    f"the serving region or its multi-region; allowed: {', '.join(allowed)}"
                )
        return self

    def _cloud_run_checks(self, cr: CloudRunSettings, hw: HardwareProfile) -> None:
        """Cloud Run's region must offer the GPU, and the instance size be one Cloud Run
        accepts with it."""
        if cr.region is None or cr.region not in hw.locations:
            what = (
                f" is required for {hw.key}"
                if cr.region is None
                else f": {hw.accelerator} is not offered in {cr.region!r}"
            )
            raise ValueError(f"config key 'region'{what}; allowed: {', '.join(hw.locations)}")
        for key, given, least in (
            ("cpu", cr.cpu, hw.min_cpu),
            ("memoryGib", cr.memory_gib, hw.min_memory_gib),
        ):
            if given is not None and given < least:
                raise ValueError(
                    f"config key {key!r} ({given}) is below the {hw.accelerator} minimum of {least}"
                )
        (low_cpu, high_cpu), (low_mem, high_mem) = CLOUD_RUN_SIZES.get(
            hw.key, ((hw.min_cpu, 8), (hw.min_memory_gib, 32))
        )
        if not low_cpu <= self.cpu <= high_cpu:
            raise ValueError(
                f"config key 'cpu' ({self.cpu}): Cloud Run with {hw.accelerator} accepts "
                f"{low_cpu} to {high_cpu} vCPU"
            )
        high_mem = min(high_mem, _MEMORY_PER_CPU_GIB * self.cpu)
        if not low_mem <= self.memory_gib <= high_mem:
            raise ValueError(
                f"config key 'memoryGib' ({self.memory_gib}): Cloud Run with "
                f"{hw.accelerator} and {self.cpu} vCPU accepts {low_mem} to {high_mem} GiB"
            )

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

    @property
    def deploy_platform(self) -> DeployPlatform:
        """Where this stack runs: the `platform` key, or the hardware's own platform."""
        return self.platform_settings.platform

    def _on(self, kind: type[_T]) -> _T:
        on = self.platform_settings
        if not isinstance(on, kind):
            raise SettingsError(
                f"this stack runs on {on.platform}: it has no {kind.__name__} (a reader of "
                "another platform's settings)"
            )
        return on

    @property
    def cloud_run(self) -> CloudRunSettings:
        """The Cloud Run keys (platform cloud-run only)."""
        return self._on(CloudRunSettings)

    @property
    def tpu(self) -> TpuSettings:
        """The TPU VM keys (platform tpu-vm only)."""
        return self._on(TpuSettings)

    @property
    def gke(self) -> GkeSettings:
        """The GKE keys (platform gke only)."""
        return self._on(GkeSettings)

    @property
    def network(self) -> NetworkSettings:
        """The nodes' zone, network, port, client ranges and API key (tpu-vm and gke)."""
        return self._on(NetworkSettings)

    @property
    def bucket(self) -> BucketSettings:
        """The model bucket's keys."""
        return self._on(BucketSettings)

    @property
    def public(self) -> bool:
        """Reachable from the internet: Cloud Run's allUsers invoker, GKE's external Gateway
        (a TPU VM stack has no such switch: its reach is `sourceRanges`)."""
        on = self.platform_settings
        return isinstance(on, PublicSettings) and on.public

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
        on, hw = self.platform_settings, self.profile
        if isinstance(on, GkeSettings):
            shape = self.gke_shape
            return {"spot": shape.spot_price, "flex-start": shape.flex_start_price}.get(
                on.node_provisioning, shape.price
            )
        if isinstance(on, TpuSettings):
            own = {"flex-start": hw.flex_start_price, "spot": hw.spot_price}.get(on.provisioning)
            return own or hw.price
        if hw.cloud_run_gpu is None:
            return hw.price
        return cloud_run_price(hw.cloud_run_gpu, on.gpu_zonal_redundancy, self.cpu, self.memory_gib)

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
        """Requests one Cloud Run instance takes at once: ``maxNumSeqs``, the sequences vLLM
        schedules at once (a different figure would queue requests in Cloud Run or in vLLM,
        and a benchmark above it would measure that queue)."""
        return self.vllm.max_num_seqs

    @property
    def profile(self) -> HardwareProfile:
        return HARDWARE[self.hardware]

    @property
    def cpu(self) -> int:
        """Cloud Run vCPU: `cpu`, else the GPU's minimum."""
        return self.cloud_run.cpu or self.profile.min_cpu

    @property
    def memory_gib(self) -> int:
        """Cloud Run memory: `memoryGib`, else the GPU's minimum."""
        return self.cloud_run.memory_gib or self.profile.min_memory_gib

    @property
    def region(self) -> str:
        """The serving region: Cloud Run's `region`, else the zone's (TPU VM, GKE)."""
        on = self.platform_settings
        if isinstance(on, CloudRunSettings):
            return str(on.region)
        return str(on.zone).rsplit("-", 1)[0]


#: The blocks every platform shares, by their attribute on Settings.
_SHARED: dict[str, type[Group]] = {
    name: info.annotation
    for name, info in Settings.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, Group)
}
#: Blocks of platform keys, in the order a key's group is named (a key two platforms read is
#: named by the block they share).
_PLATFORM_BLOCKS: dict[str, type[Group]] = {
    "network": NetworkSettings,
    "bucket": BucketSettings,
    "public": PublicSettings,
    "cloud_run": CloudRunSettings,
    "tpu": TpuSettings,
    "gke": GkeSettings,
}
_TOP_LEVEL = ("hardware", "image", "registries", "labels")
_PLATFORM_KEY = FieldInfo.from_annotated_attribute(
    DeployPlatform | None,  # type: ignore[arg-type]
    Field(
        None,
        description="Where the stack runs: cloud-run, tpu-vm or gke; defaults to the hardware's "
        "own (cloud-run for GPUs, tpu-vm for TPUs). Selects the model its platform keys go to.",
    ),
)


def _key(name: str, info: FieldInfo) -> str:
    return info.alias or to_camel(name)


def config_keys() -> dict[str, tuple[str, Any]]:
    """Every stack config key: key -> (group, pydantic field info). Used by docs and tests."""
    keys: dict[str, tuple[str, Any]] = {k: ("", Settings.model_fields[k]) for k in _TOP_LEVEL}
    keys["platform"] = ("", _PLATFORM_KEY)
    for group, cls in {**_SHARED, **_PLATFORM_BLOCKS}.items():
        for name, info in cls.model_fields.items():
            keys.setdefault(_key(name, info), (group, info))
    return keys


#: The platforms whose model holds each platform key; elsewhere the key is refused.
PLATFORM_KEYS: dict[str, frozenset[str]] = {
    _key(name, info): frozenset(p for p, m in PLATFORMS.items() if name in m.model_fields)
    for model in PLATFORMS.values()
    for name, info in model.model_fields.items()
    if name != "platform"
}
#: Keys a stack once set whose value is now derived: key -> (platforms where it is refused,
#: what it is derived from). A stack that still sets one is told to remove it.
DERIVED: dict[str, tuple[frozenset[str], str]] = {
    "concurrency": (
        frozenset(PLATFORMS),
        "Cloud Run's concurrency is maxNumSeqs, the sequences vLLM schedules at once",
    ),
    "region": (frozenset({"gke"}), "a GKE stack's region is its zone's (us-east5 for us-east5-b)"),
}


def stack_platform(raw: Mapping[str, Any]) -> str | None:
    """The stack's platform: its `platform` key, else its hardware's own; None for an unknown
    hardware (the settings name it); SettingsError for a platform that cannot run the hardware,
    naming the allowed ones."""
    hardware, platform = raw.get("hardware"), raw.get("platform")
    if hardware not in HARDWARE:
        return None
    hw = HARDWARE[str(hardware)]
    native = "tpu-vm" if hw.platform is Platform.TPU else "cloud-run"
    allowed = [native, *(["gke"] if hw.key in GKE_SHAPES else [])]
    if platform is None:
        return allowed[0]
    if platform not in allowed:
        what = "cannot run" if platform in PLATFORMS else "is not a platform; it cannot run"
        raise SettingsError(
            f"config key 'platform': {platform!r} {what} hardware {hw.key!r}; allowed for "
            f"{hw.key}: {', '.join(allowed)}"
        )
    return str(platform)


def load_settings(raw: Mapping[str, Any]) -> Settings:
    """Validate flat stack config (camelCase keys, values as Pulumi hands them over)."""
    known = config_keys()
    unknown = sorted(set(raw) - set(known) - set(DERIVED))
    if unknown:
        named = ", ".join(f"{k!r}{closest_key(k, known)}" for k in unknown)
        raise SettingsError(f"unknown config key(s): {named}; allowed: {', '.join(sorted(known))}")
    for key, value in raw.items():
        check_text(key, value)
    platform = stack_platform(raw)
    data: dict[str, Any] = {group: {} for group in _SHARED}
    # An unknown hardware has no platform: its error and the shared blocks' are reported.
    data["platform_settings"] = {"platform": platform or "cloud-run"}
    for key, value in raw.items():
        refused, why = DERIVED.get(key, (frozenset(), ""))
        if platform in refused:
            raise SettingsError(f"remove {key!r}: {why}")
        if platform is None and (key in PLATFORM_KEYS or key in DERIVED):
            continue
        group, _ = known[key]
        if key == "platform":
            continue
        if key in PLATFORM_KEYS:
            owners = PLATFORM_KEYS[key]
            if platform not in owners:
                other = sorted(owners)[0]
                raise SettingsError(
                    f"config key {key!r} is a {' and '.join(sorted(owners))} setting; this stack "
                    f"runs on {platform}: remove it or set platform: {other}"
                )
            data["platform_settings"][key] = value
        elif group:
            data[group][key] = value
        else:
            data[key] = value
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(_describe(exc)) from None


#: Leading parts of an error's location that name a block or platform, not a key.
_BLOCKS = frozenset({*_SHARED, "platform_settings", *PLATFORMS})


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        # Drop only the leading blocks: a key may share its block's name (`model`, `monitoring`).
        parts = list(error["loc"])
        while len(parts) > 1 and parts[0] in _BLOCKS:
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
