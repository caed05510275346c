"""Hardware catalog: the accelerators this project deploys to, with the figures the rest needs.

Each figure carries its source. Prices are list prices in USD and change over time; they are
used for cost estimates only (capacity planner, benchmark comparisons), never for billing.
Every price is built from :class:`Rate` s of Google's own price pages, each with its region,
URL and the date it was read. A rate confirmed there counts at its figure; a rate not confirmed
there but quoted by a named public source counts at that figure, marked UNCONFIRMED with who
quotes it, and the price is an ESTIMATE (``~$X``); only a rate with no figure anywhere counts 0
and makes the price a LOWER BOUND. A price's status is its weakest rate's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

GIB = 1024**3
MIB = 1024**2


class Platform(StrEnum):
    CLOUD_RUN = "cloud-run"
    TPU = "tpu"


#: A price's status, strongest first: every rate confirmed on Google's page; some rate counted
#: at a figure a named public source quotes; some rate with no figure anywhere (counted 0).
CONFIRMED = "confirmed"
ESTIMATE = "estimate"
LOWER_BOUND = "lower_bound"
STATUSES = (CONFIRMED, ESTIMATE, LOWER_BOUND)

#: The date the stored copies of Google's price pages were read for this catalogue.
READ = "2026-11-26"
#: How a rate read in a stored copy says when the copy was made (the copies carry no date).
STORED_COPY = f"read {READ} in a stored copy of the page (date of the stored copy unknown)"


@dataclass(frozen=True)
class Rate:
    """One rate of one of Google's price pages: the figure per unit, the region it applies to,
    the page (its original URL) and when it was read.

    ``usd`` is None when the figure could not be read on Google's page (no stored copy of the
    page reaches it): the rate is then NOT confirmed and ``note`` says why. Such a rate counts at
    ``quoted``, the figure a named public source quotes for it (``quoted_by`` names the source
    and when), and every price built from it is an ESTIMATE; with no figure anywhere
    (``quoted`` None too) it counts 0 and every price built from it is a LOWER BOUND."""

    what: str
    usd: float | None
    #: "vCPU-second", "GiB-second", "GPU-second" (per second) or "chip-hour", "node-hour",
    #: "cluster-hour", "rule-hour" (per hour).
    unit: str
    region: str
    url: str
    read: str
    note: str = ""
    #: The figure (USD per ``unit``) a public source quotes for a rate not confirmed here.
    quoted: float | None = None
    #: Who quotes ``quoted``, and when (never empty when ``quoted`` is given).
    quoted_by: str = ""

    def __post_init__(self) -> None:
        if not self.url.startswith("https://cloud.google.com/"):
            raise ValueError(f"{self.what}: a rate cites Google's own page, not {self.url!r}")
        if not self.unit.endswith(("-second", "-hour")):
            raise ValueError(f"{self.what}: unit {self.unit!r} is per second or per hour")
        if self.usd is not None and not self.usd > 0:
            raise ValueError(f"{self.what}: a confirmed rate is positive, not {self.usd!r}")
        if self.usd is None and not self.note:
            raise ValueError(f"{self.what}: an unconfirmed rate says why in its note")
        if self.quoted is not None:
            if self.usd is not None:
                raise ValueError(f"{self.what}: a confirmed rate needs no quoted figure")
            if not self.quoted > 0:
                raise ValueError(f"{self.what}: a quoted figure is positive, not {self.quoted!r}")
            if not self.quoted_by.strip():
                raise ValueError(f"{self.what}: a quoted figure names who quotes it (quoted_by)")
        elif self.quoted_by:
            raise ValueError(f"{self.what}: quoted_by without a quoted figure")

    @property
    def confirmed(self) -> bool:
        return self.usd is not None

    @property
    def status(self) -> str:
        """What this rate makes of a price built from it: confirmed, estimate or lower_bound."""
        if self.usd is not None:
            return CONFIRMED
        return ESTIMATE if self.quoted is not None else LOWER_BOUND

    @property
    def counted(self) -> float | None:
        """The figure counted (USD per ``unit``): Google's, else the quoted one, else None."""
        return self.usd if self.usd is not None else self.quoted

    @property
    def usd_per_hour(self) -> float:
        """USD for one unit held an hour, at the counted figure (0 with no figure anywhere)."""
        if self.counted is None:
            return 0.0
        return self.counted * (3600 if self.unit.endswith("-second") else 1)

    @property
    def usd_per_second(self) -> float | None:
        """USD for one unit held a second at the counted figure (None with no figure)."""
        return None if self.counted is None else self.usd_per_hour / 3600

    @property
    def figure(self) -> str:
        if self.counted is None:
            return "NO FIGURE (not confirmed, none quoted)"
        amount = f"${self.counted:.8f}".rstrip("0").rstrip(".") + f" / {self.unit}"
        if self.usd is None:
            return f"~{amount} UNCONFIRMED (quoted by {self.quoted_by})"
        return amount

    @property
    def citation(self) -> str:
        """The rate in one line: what, region, figure and page (``read`` says when)."""
        return f"{self.what}, {self.region}: {self.figure} ({self.url})"


@dataclass(frozen=True)
class Price:
    """An hourly price for one serving instance (accelerator plus the host it requires), built
    from Google's rates (``parts``: each rate with how many units the instance holds)."""

    usd_per_hour: float
    source: str
    as_of: str
    #: Parts of the bill whose rate could not be confirmed on Google's page, each said so: counted
    #: at a quoted figure (the price is an ESTIMATE) or, with no figure anywhere, as 0 (a LOWER
    #: BOUND).
    unconfirmed: tuple[str, ...] = ()
    parts: tuple[tuple[Rate, float], ...] = ()

    @property
    def note(self) -> str:
        """How far to trust the figure, in words ('' when every rate is confirmed)."""
        return "; ".join(self.unconfirmed)

    @property
    def status(self) -> str:
        """The weakest of its rates' statuses: confirmed, estimate or lower_bound."""
        return weakest(*(rate.status for rate, _ in self.parts))

    @property
    def is_lower_bound(self) -> bool:
        return self.status == LOWER_BOUND

    @property
    def is_estimate(self) -> bool:
        return self.status == ESTIMATE


def weakest(*statuses: str) -> str:
    """The weakest of price statuses (lower_bound < estimate < confirmed)."""
    return max(statuses, key=STATUSES.index, default=CONFIRMED)


def status_prefix(status: str, bound: str = "at least ") -> str:
    """What a figure of a price with ``status`` says first: ``~`` for an estimate, ``bound``
    for a lower bound, nothing when confirmed."""
    return {CONFIRMED: "", ESTIMATE: "~", LOWER_BOUND: bound}[status]


def unconfirmed_note(rate: Rate) -> str:
    """How a price names a rate not confirmed on Google's page: the figure it counts and who
    quotes it (an ESTIMATE), or that it counts 0 (a LOWER BOUND)."""
    if rate.status == ESTIMATE:
        return f"ESTIMATE, counted at {rate.figure}: {rate.what} ({rate.region}): {rate.note}"
    return (
        f"LOWER BOUND, not counted (no figure anywhere): {rate.what} ({rate.region}): {rate.note}"
    )


def price_of(label: str, parts: tuple[tuple[Rate, float], ...]) -> Price:
    """The hourly price of ``parts`` (rate, units): the sum of each rate's counted figure
    (Google's, else a named source's quote) times its units; a rate with no figure anywhere
    counts 0. Each rate not confirmed is named (:func:`unconfirmed_note`)."""
    return Price(
        usd_per_hour=round(sum(rate.usd_per_hour * n for rate, n in parts), 4),
        source=f"{label}: " + "; ".join(f"{n:g} x {rate.citation}" for rate, n in parts),
        as_of=", ".join(sorted({rate.read for rate, _ in parts})),
        unconfirmed=tuple(unconfirmed_note(rate) for rate, _ in parts if not rate.confirmed),
        parts=parts,
    )


_RUN_PRICING = "https://cloud.google.com/run/pricing"
#: Where the stored copies of the Cloud Run page stop: the first table's CPU column.
_RUN_COPY_ENDS = "not in the stored copies of the page (they end at its first table's CPU column)"
#: Who quotes Cloud Run's memory and GPU rates (Tier 1; the L4 and memory figures are the
#: us-central1 Cloud Billing SKUs another public cost estimate quotes for 2026-08 too).
_RUN_QUOTE = (
    "mikgra91/spotyvibe, 'Cloud Run x SpotyVibe - Synergy & Cost Analysis' (2026-04-21), "
    "Tier-1 paid pricing table"
)
#: Figures this catalogue recorded before its rates were read on Google's pages.
_EARLIER = "this project's hardware catalogue before 2026-11-26"
CLOUD_RUN_CPU = Rate(
    "Cloud Run vCPU (instance-based billing; the page's 'services with CPU always allocated')",
    0.000018,
    "vCPU-second",
    "Tier 1 regions (which regions are Tier 1 is not in the stored copy)",
    _RUN_PRICING,
    STORED_COPY,
)
CLOUD_RUN_MEMORY = Rate(
    "Cloud Run memory (instance-based billing)",
    None,
    "GiB-second",
    "Tier 1 regions",
    _RUN_PRICING,
    STORED_COPY,
    _RUN_COPY_ENDS,
    quoted=0.000002,
    quoted_by=_RUN_QUOTE,
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
    #: TPU: what a spot chip bills.
    spot_price: Price | None = None

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB


def cloud_run_price(gpu: CloudRunGpuRates, zonal: bool, cpu: int, memory_gib: int) -> Price:
    """A Cloud Run GPU instance's hourly price: the GPU's rate (the zonal-redundancy SKU when
    on) plus ``cpu`` vCPU and ``memory_gib`` GiB at Cloud Run's instance-based rates. A rate
    that could not be confirmed counts 0 and the price says it is a lower bound."""
    rate = gpu.with_zonal_redundancy if zonal else gpu.without_zonal_redundancy
    return price_of(
        f"GPU ({'with' if zonal else 'without'} zonal redundancy) + {cpu} vCPU + {memory_gib} GiB",
        ((rate, 1.0), (CLOUD_RUN_CPU, float(cpu)), (CLOUD_RUN_MEMORY, float(memory_gib))),
    )


def _run_gpu(name: str, zonal: bool, quoted: float) -> Rate:
    return Rate(
        f"Cloud Run {name} GPU, {'with' if zonal else 'without'} zonal redundancy",
        None,
        "GPU-second",
        "Tier 1 regions",
        _RUN_PRICING,
        STORED_COPY,
        _RUN_COPY_ENDS,
        quoted=quoted,
        quoted_by=_RUN_QUOTE,
    )


_L4_GPU = CloudRunGpuRates(
    _run_gpu("NVIDIA L4", False, 0.0001867), _run_gpu("NVIDIA L4", True, 0.0002909)
)
_RTX_GPU = CloudRunGpuRates(
    _run_gpu("NVIDIA RTX PRO 6000", False, 0.00036522),
    _run_gpu("NVIDIA RTX PRO 6000", True, 0.00056913),
)

_TPU_PRICING = "https://cloud.google.com/tpu/pricing"
_TPU_COPY = "not in the stored copies of the page (older versions: TPU v2, v3 and v4 only)"
TPU_V6E_ON_DEMAND = Rate(
    "TPU v6e chip, on-demand",
    None,
    "chip-hour",
    "us-east5",
    _TPU_PRICING,
    STORED_COPY,
    _TPU_COPY,
    quoted=2.70,
    quoted_by=f"{_EARLIER} (recorded 2026-06 from {_TPU_PRICING}, not re-read)",
)
TPU_V6E_FLEX_START = Rate(
    "TPU v6e chip, flex-start (Dynamic Workload Scheduler)",
    None,
    "chip-hour",
    "us-east5",
    "https://cloud.google.com/products/dws/pricing",
    f"searched {READ}: no stored copy of the page",
    "no stored copy of the page",
    quoted=1.35,
    quoted_by=f"{_EARLIER} (recorded 2026-08 from a Cloud Billing catalog figure as reported "
    "then, not read on the page)",
)
_SPOT_PRICING = "https://cloud.google.com/spot-vms/pricing"
#: What the Spot VMs page says of every spot rate (read in its stored copy).
_SPOT_SAYS = (
    "not in the stored copies of the page, which say only that spot prices are discounts of up "
    "to 91% off the default price and change up to once a day (at most the on-demand rate); "
    "no public source found that quotes it"
)
TPU_V6E_SPOT = Rate(
    "TPU v6e chip, spot", None, "chip-hour", "us-east5", _SPOT_PRICING, STORED_COPY, _SPOT_SAYS
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
            # The minimum host the GPU requires (20 vCPU, 80 GiB); a stack's own: Settings.price.
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
            price=price_of("one v6e chip", ((TPU_V6E_ON_DEMAND, 1.0),)),
            # What the shipped stack provisions: billed only while the node exists, at most
            # maxRunHours (https://cloud.google.com/tpu/docs/request-using-flex-start).
            flex_start_price=price_of("one v6e chip, flex-start", ((TPU_V6E_FLEX_START, 1.0),)),
            spot_price=price_of("one v6e chip, spot", ((TPU_V6E_SPOT, 1.0),)),
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
    #: What the node bills in a spot node pool.
    spot_price: Price
    #: What the node bills provisioned flex-start (Dynamic Workload Scheduler).
    flex_start_price: Price
    source: str


_VM_PRICING = "https://cloud.google.com/compute/vm-instance-pricing"
_VM_COPY = "not in the stored copies of the page (they end in its introduction)"
_G2_STANDARD_8 = Rate(
    "g2-standard-8 node (8 vCPU, 32 GB, one L4), on-demand",
    None,
    "node-hour",
    "us-east4",
    _VM_PRICING,
    STORED_COPY,
    _VM_COPY,
    quoted=0.85,
    quoted_by=f"{_EARLIER} (us-central1, recorded without a page read)",
)
_G2_STANDARD_8_SPOT = Rate(
    "g2-standard-8 node, spot",
    None,
    "node-hour",
    "us-east4",
    _SPOT_PRICING,
    STORED_COPY,
    _SPOT_SAYS,
)
_G4_STANDARD_48 = Rate(
    "g4-standard-48 node (48 vCPU, 180 GB, one RTX PRO 6000), on-demand",
    None,
    "node-hour",
    "us-central1",
    _VM_PRICING,
    STORED_COPY,
    _VM_COPY,
    quoted=4.5001,
    quoted_by="dstackai/dstack PR #3213 (2025-10), us-central1, from Google's catalog",
)
_G4_STANDARD_48_SPOT = Rate(
    "g4-standard-48 node, spot",
    None,
    "node-hour",
    "us-central1",
    _SPOT_PRICING,
    STORED_COPY,
    _SPOT_SAYS,
)


def _flex(machine: str, region: str) -> Rate:
    return Rate(
        f"{machine} node, flex-start (Dynamic Workload Scheduler)",
        None,
        "node-hour",
        region,
        "https://cloud.google.com/products/dws/pricing",
        f"searched {READ}: no stored copy of the page",
        "no stored copy of the page, and no public source found that quotes it",
    )


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
            # A v6e chip bills the same chip-hour on GKE as a TPU VM: the catalog's one rate.
            price=HARDWARE["tpu-v6e-1"].price,
            spot_price=price_of("one v6e chip, spot", ((TPU_V6E_SPOT, 1.0),)),
            flex_start_price=HARDWARE["tpu-v6e-1"].flex_start_price
            or price_of("one v6e chip, flex-start", ((TPU_V6E_FLEX_START, 1.0),)),
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
            price=price_of("one g2-standard-8 node", ((_G2_STANDARD_8, 1.0),)),
            spot_price=price_of("one g2-standard-8 node, spot", ((_G2_STANDARD_8_SPOT, 1.0),)),
            flex_start_price=price_of(
                "one g2-standard-8 node, flex-start", ((_flex("g2-standard-8", "us-east4"), 1.0),)
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
            price=price_of("one g4-standard-48 node", ((_G4_STANDARD_48, 1.0),)),
            spot_price=price_of("one g4-standard-48 node, spot", ((_G4_STANDARD_48_SPOT, 1.0),)),
            flex_start_price=price_of(
                "one g4-standard-48 node, flex-start",
                ((_flex("g4-standard-48", "us-central1"), 1.0),),
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
