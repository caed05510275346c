"""Hardware catalog: the accelerators this project deploys to, with the figures the rest needs.

Each figure carries its source. Prices are list prices in USD and change over time; they are
used for cost estimates only (capacity planner, benchmark comparisons), never for billing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

GIB = 1024**3
MIB = 1024**2


class Platform(StrEnum):
    CLOUD_RUN = "cloud-run"
    TPU = "tpu"


@dataclass(frozen=True)
class Price:
    """An hourly price for one serving instance (accelerator plus the host it requires)."""

    usd_per_hour: float
    source: str
    as_of: str
    #: Parts of the bill whose rate could not be confirmed (counted as 0: the price is then a
    #: lower bound), or rates taken from another provisioning (an upper bound); said so.
    unconfirmed: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        """How far to trust the figure, in words ('' when every rate is confirmed)."""
        return "; ".join(self.unconfirmed)


@dataclass(frozen=True)
class Rate:
    """One per-second rate of a price page, with where and when it was read."""

    usd_per_second: float | None
    source: str
    as_of: str

    @property
    def confirmed(self) -> bool:
        return self.usd_per_second is not None


#: Cloud Run's page, https://cloud.google.com/run/pricing (Tier 1 regions, instance-based
#: billing, "Services with CPU always allocated"): vCPU and memory rates.
_RUN_PRICING = "https://cloud.google.com/run/pricing"
_CATALOG_QUOTE = (
    "Cloud Billing catalog SKU for us-central1 as quoted (2026-08) in a public repository's "
    "cost estimate, not read from Google's page here"
)
CLOUD_RUN_CPU = Rate(
    0.000018,
    f"{_RUN_PRICING}: Tier 1, services with CPU always allocated, $0.00001800 / vCPU-second",
    "read 2026-11-26 (stored copy of the page)",
)
CLOUD_RUN_MEMORY = Rate(
    0.000002,
    f"{_RUN_PRICING}: Tier 1, instance-based billing, $0.0000020 / GiB-second ({_CATALOG_QUOTE})",
    "2026-08",
)


@dataclass(frozen=True)
class CloudRunGpuRates:
    """A Cloud Run GPU's own per-second rates: without zonal redundancy and with it (a
    separate, higher SKU); the host's vCPU and memory bill on top at CLOUD_RUN_CPU/MEMORY."""

    without_zonal_redundancy: Rate
    with_zonal_redundancy: Rate


@dataclass(frozen=True)
class Probe:
    """Startup probe sizing for a cold start: model load from the bucket plus engine warm-up.

    Cloud Run's limits for a startup probe (run v2 discovery document, `GoogleCloudRunV2Probe`;
    checked in tests/contracts): initial delay 0-240 s, period 1-240 s, timeout at least 1 s and
    smaller than the period, failure threshold at least 1.
    """

    initial_delay_seconds: int
    period_seconds: int
    timeout_seconds: int
    failure_threshold: int

    @property
    def budget_seconds(self) -> int:
        """The longest cold start the probe tolerates before the instance is killed."""
        return self.initial_delay_seconds + self.period_seconds * self.failure_threshold


@dataclass(frozen=True)
class HardwareProfile:
    """One accelerator target. `key` is what a stack's `hardware` setting names."""

    key: str
    platform: Platform
    display_name: str
    #: Cloud Run `node_selector.accelerator` value, or the TPU accelerator type.
    accelerator: str
    accelerator_count: int
    #: Device memory per accelerator as the runtime reports it (what vLLM's utilization applies to).
    memory_bytes: int
    memory_source: str
    #: Peak memory bandwidth per accelerator, bytes/s (decode-speed ceiling).
    memory_bandwidth_bytes_per_s: float
    #: Minimum host vCPU and memory the platform requires with this accelerator.
    min_cpu: int
    min_memory_gib: int
    #: Regions (Cloud Run) or zones (TPU) where the accelerator is offered.
    locations: tuple[str, ...]
    locations_source: str
    startup_probe: Probe
    #: How long a post-deploy health check may wait for a cold start to serve.
    cold_start_deadline_seconds: int
    price: Price
    #: Where the bandwidth figure above comes from.
    memory_bandwidth_source: str
    #: Dense bf16 peak per accelerator, FLOP/s (what w4a16 and bf16 checkpoints compute in).
    dense_bf16_flops: float
    compute_source: str
    #: The rate a flex-start node bills (TPU queued resources provisioned flex-start), when
    #: it differs from `price`.
    flex_start_price: Price | None = None
    #: Cloud Run GPUs: the GPU's own rates (the instance price is built from them and the
    #: host's vCPU and memory, see `Settings.price`).
    cloud_run_gpu: CloudRunGpuRates | None = None
    #: TPU: the spot rate of a chip (None: not confirmed).
    spot_price: Price | None = None

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB


def cloud_run_price(gpu: CloudRunGpuRates, zonal: bool, cpu: int, memory_gib: int) -> Price:
    """A Cloud Run GPU instance's hourly price: the GPU's rate (the zonal-redundancy SKU when
    on) plus ``cpu`` vCPU and ``memory_gib`` GiB at Cloud Run's instance-based rates. A rate
    that could not be confirmed counts 0 and the price says it is a lower bound."""
    rate = gpu.with_zonal_redundancy if zonal else gpu.without_zonal_redundancy
    parts = [(rate, 1.0), (CLOUD_RUN_CPU, float(cpu)), (CLOUD_RUN_MEMORY, float(memory_gib))]
    per_s = sum((r.usd_per_second or 0.0) * n for r, n in parts)
    missing = [r.source for r, _ in parts if not r.confirmed]
    return Price(
        usd_per_hour=round(per_s * 3600, 4),
        source=(
            f"GPU ({'with' if zonal else 'without'} zonal redundancy) + {cpu} vCPU + "
            f"{memory_gib} GiB: " + "; ".join(r.source for r, _ in parts)
        ),
        as_of=", ".join(sorted({r.as_of for r, _ in parts})),
        unconfirmed=tuple(f"LOWER BOUND, not priced: {m}" for m in missing),
    )


_L4_GPU = CloudRunGpuRates(
    Rate(0.0001867, f"NVIDIA L4 without zonal redundancy: {_CATALOG_QUOTE}", "2026-08"),
    Rate(0.0002909, f"NVIDIA L4 with zonal redundancy: {_CATALOG_QUOTE}", "2026-08"),
)
_RTX_GPU = CloudRunGpuRates(
    Rate(
        None,
        "NVIDIA RTX PRO 6000 on Cloud Run: no rate could be confirmed from Google's page "
        f"({_RUN_PRICING}) or a quoted catalog SKU",
        "2026-11-26",
    ),
    Rate(None, "NVIDIA RTX PRO 6000 with zonal redundancy: not confirmed", "2026-11-26"),
)

_CLOUD_RUN_GPU_DOC = "https://cloud.google.com/run/docs/configuring/services/gpu (2026)"

HARDWARE: dict[str, HardwareProfile] = {
    profile.key: profile
    for profile in (
        HardwareProfile(
            key="l4",
            platform=Platform.CLOUD_RUN,
            display_name="NVIDIA L4 24 GB on Cloud Run",
            accelerator="nvidia-l4",
            accelerator_count=1,
            # nvidia-smi reports 23034 MiB on an L4 (24 GB marketed).
            memory_bytes=23034 * MIB,
            memory_source="nvidia-smi total memory on an L4: 23034 MiB",
            memory_bandwidth_bytes_per_s=300e9,
            min_cpu=4,
            min_memory_gib=16,
            locations=(
                "us-east4",
                "us-central1",
                "europe-west1",
                "europe-west4",
                "asia-southeast1",
                "asia-south1",
            ),
            locations_source=_CLOUD_RUN_GPU_DOC,
            # Reference deployment: 180 s initial delay, 60 s period, 10 failures. Its 60 s
            # timeout equalled the period, which Cloud Run v2's Probe reference forbids
            # ("timeoutSeconds ... Must be smaller than period_seconds"): 30 s here. The
            # budget (delay + period x failures) is unchanged; /health answers in milliseconds
            # once vLLM listens, and nothing listens before that.
            startup_probe=Probe(
                initial_delay_seconds=180,
                period_seconds=60,
                timeout_seconds=30,
                failure_threshold=10,
            ),
            # Probe budget (780 s), a scale-from-zero start for the first request, and margin.
            cold_start_deadline_seconds=1200,
            # The minimum host (4 vCPU, 16 GiB); a stack's own size: Settings.price.
            price=cloud_run_price(_L4_GPU, False, 4, 16),
            cloud_run_gpu=_L4_GPU,
            memory_bandwidth_source="NVIDIA L4 datasheet: 300 GB/s GDDR6 (AIConfigurator "
            "systems/l4.yaml)",
            dense_bf16_flops=121e12,
            compute_source="NVIDIA L4 datasheet: 121 TFLOPS dense bf16 (242 with sparsity; "
            "AIConfigurator systems/l4.yaml)",
        ),
        HardwareProfile(
            key="rtx-pro-6000",
            platform=Platform.CLOUD_RUN,
            display_name="NVIDIA RTX PRO 6000 Blackwell 96 GB on Cloud Run",
            accelerator="nvidia-rtx-pro-6000",
            accelerator_count=1,
            memory_bytes=97887 * MIB,
            memory_source="nvidia-smi total memory on an RTX PRO 6000 Blackwell Server: 97887 MiB",
            memory_bandwidth_bytes_per_s=1.6e12,
            min_cpu=20,
            min_memory_gib=80,
            locations=("us-central1", "europe-west4", "asia-southeast1", "asia-south2"),
            locations_source=_CLOUD_RUN_GPU_DOC,
            # Reference deployment: 240 s initial delay, 15 s period, 10 s timeout, 120 failures.
            startup_probe=Probe(
                initial_delay_seconds=240,
                period_seconds=15,
                timeout_seconds=10,
                failure_threshold=120,
            ),
            # Probe budget (2040 s) plus margin.
            cold_start_deadline_seconds=2400,
            # The minimum host the GPU requires (20 vCPU, 80 GiB); the GPU is not priced.
            price=cloud_run_price(_RTX_GPU, False, 20, 80),
            cloud_run_gpu=_RTX_GPU,
            memory_bandwidth_source="NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: "
            "1,597 GB/s (AIConfigurator's systems/rtx_pro_6000_server.yaml: 1,792; Callstack "
            "measured 1,396)",
            dense_bf16_flops=468e12,
            compute_source="AIConfigurator systems/rtx_pro_6000_server.yaml (~468 TFLOPS dense "
            "bf16)",
        ),
        HardwareProfile(
            key="tpu-v6e-1",
            platform=Platform.TPU,
            display_name="Cloud TPU v6e-1 (Trillium, one chip)",
            accelerator="v6e-1",
            accelerator_count=1,
            memory_bytes=32 * 10**9,
            memory_source="https://cloud.google.com/tpu/docs/v6e: 32 GB HBM per chip",
            memory_bandwidth_bytes_per_s=1.64e12,
            min_cpu=0,
            min_memory_gib=0,
            locations=(
                "us-east1-d",
                "us-east5-a",
                "us-east5-b",
                "us-central1-b",
                "europe-west4-a",
                "asia-northeast1-b",
                "southamerica-west1-a",
            ),
            locations_source="https://cloud.google.com/tpu/docs/regions-zones (v6e)",
            startup_probe=Probe(
                initial_delay_seconds=0, period_seconds=30, timeout_seconds=10, failure_threshold=60
            ),
            # VM boot, the vllm-tpu image pull and a Hugging Face download of bf16 weights.
            cold_start_deadline_seconds=2400,
            price=Price(
                usd_per_hour=2.70,
                source="Google's Cloud TPU price page, https://cloud.google.com/tpu/pricing "
                "(TPU v6e, one chip, on-demand rate, us-east5; spot and flex-start have their "
                "own rates)",
                as_of="2026-06 (figure from then, not re-read from the page since; re-check it)",
            ),
            flex_start_price=Price(
                # What the shipped stack provisions: billed only while the node exists, at most
                # maxRunHours (https://cloud.google.com/tpu/docs/request-using-flex-start).
                usd_per_hour=1.35,
                source="Google's Dynamic Workload Scheduler price page, "
                "https://cloud.google.com/products/dws/pricing (TPU v6e flex-start, per chip-hour, "
                "us-east5; the same rate in europe-west4, us-east1 and asia-northeast1)",
                as_of="2026-08-25 (Cloud Billing catalog figure as reported then, not read "
                "from the page here; re-check it)",
            ),
            memory_bandwidth_source="https://cloud.google.com/tpu/docs/v6e: 1,640 GB/s HBM "
            "bandwidth per chip",
            dense_bf16_flops=918e12,
            compute_source="https://cloud.google.com/tpu/docs/v6e: 918 TFLOPS bf16 per chip",
        ),
    )
}


@dataclass(frozen=True)
class GkeShape:
    """How one replica of a hardware profile runs on GKE: the node pool's machine and the
    Pod's accelerator request and node selectors (one replica per node)."""

    hardware: str
    machine_type: str
    #: Extended resource the vLLM container requests (`google.com/tpu`, `nvidia.com/gpu`).
    accelerator_resource: str
    #: Node selectors GKE sets on nodes of this shape; the Pod selects exactly these.
    node_selector: dict[str, str]
    #: Compute Engine accelerator type on the node pool (GPUs); None for TPUs.
    gpu_type: str | None
    #: TPU slice topology of the node pool (TPUs); None for GPUs.
    tpu_topology: str | None
    vcpu: int
    memory_gib: int
    #: What the vLLM container requests of the node (the rest is left to the system pods,
    #: the GCS FUSE sidecar and kubelet reservations).
    pod_cpu: str
    pod_memory: str
    #: Startup probe of the vLLM container on GKE (TPU engines compile for minutes).
    startup_probe: Probe
    #: On-demand list price of one node (accelerator included), USD per hour.
    price: Price
    source: str


#: GKE node shapes by hardware key. Shapes and selectors: GKE's TPU and GPU docs
#: (cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus, .../how-to/gpus).
GKE_SHAPES: dict[str, GkeShape] = {
    shape.hardware: shape
    for shape in (
        GkeShape(
            hardware="tpu-v6e-1",
            machine_type="ct6e-standard-1t",
            accelerator_resource="google.com/tpu",
            node_selector={
                "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                "cloud.google.com/gke-tpu-topology": "1x1",
            },
            gpu_type=None,
            tpu_topology="1x1",
            vcpu=44,
            memory_gib=176,
            pod_cpu="32",
            pod_memory="128Gi",
            # llm-d's TPU overlay: 30 s x 120 (an hour) for XLA compilation at first start.
            startup_probe=Probe(
                initial_delay_seconds=0,
                period_seconds=30,
                timeout_seconds=10,
                failure_threshold=120,
            ),
            # A v6e chip bills the same chip-hour on GKE as a TPU VM: the catalog's one figure.
            price=HARDWARE["tpu-v6e-1"].price,
            source="cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus (v6e: "
            "ct6e-standard-1t, 1x1, tpu-v6e-slice)",
        ),
        GkeShape(
            hardware="l4",
            machine_type="g2-standard-8",
            accelerator_resource="nvidia.com/gpu",
            node_selector={"cloud.google.com/gke-accelerator": "nvidia-l4"},
            gpu_type="nvidia-l4",
            tpu_topology=None,
            vcpu=8,
            memory_gib=32,
            pod_cpu="6",
            pod_memory="24Gi",
            startup_probe=Probe(
                initial_delay_seconds=60,
                period_seconds=30,
                timeout_seconds=10,
                failure_threshold=60,
            ),
            price=Price(
                usd_per_hour=0.85,
                source="https://cloud.google.com/compute/vm-instance-pricing (G2, g2-standard-8, "
                "us-central1; the figure was not in the stored copy of the page: check it)",
                as_of="2026-11",
            ),
            source="cloud.google.com/compute/docs/accelerator-optimized-machines (G2: one L4 "
            "on g2-standard-4/8/12/16/32)",
        ),
        GkeShape(
            hardware="rtx-pro-6000",
            machine_type="g4-standard-48",
            accelerator_resource="nvidia.com/gpu",
            node_selector={"cloud.google.com/gke-accelerator": "nvidia-rtx-pro-6000"},
            gpu_type="nvidia-rtx-pro-6000",
            tpu_topology=None,
            vcpu=48,
            memory_gib=180,
            pod_cpu="40",
            pod_memory="160Gi",
            startup_probe=Probe(
                initial_delay_seconds=60,
                period_seconds=15,
                timeout_seconds=10,
                failure_threshold=120,
            ),
            price=Price(
                usd_per_hour=4.50,
                source="g4-standard-48 in us-central1 at $4.5001/h (Google's catalog as listed in "
                "dstackai/dstack PR #3213, 2025-10)",
                as_of="2025-10",
            ),
            source="G4 machine series: g4-standard-48 = 48 vCPU, 180 GB, 1 x RTX PRO 6000 "
            "(dstackai/dstack PR #3213)",
        ),
    )
}


def get_hardware(key: str) -> HardwareProfile:
    """Look a profile up by key; the error lists what is allowed."""
    try:
        return HARDWARE[key]
    except KeyError:
        allowed = ", ".join(sorted(HARDWARE))
        raise KeyError(f"unknown hardware {key!r}; allowed: {allowed}") from None
