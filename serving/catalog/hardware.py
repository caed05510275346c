"""Hardware catalog: the accelerators this project deploys to, with the figures the rest needs.

The figures are data, each with its source, loaded and checked here: `serving/data/hardware.json`
(profiles and GKE node shapes) and `serving/data/prices.json` (the rates of Google's own price
pages). Prices are list prices in USD, for estimates only, never for billing; a price's status
(confirmed, estimate, lower bound) is its weakest rate's, as docs/deploy/cost.md explains.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

GIB = 1024**3


class Platform(StrEnum):
    CLOUD_RUN = "cloud-run"
    TPU = "tpu"


#: A price's status, strongest first (see the module text).
CONFIRMED = "confirmed"
ESTIMATE = "estimate"
LOWER_BOUND = "lower_bound"
STATUSES = (CONFIRMED, ESTIMATE, LOWER_BOUND)


@dataclass(frozen=True)
class Rate:
    """One rate of one of Google's price pages: the figure per unit, the region it applies to,
    the page (its original URL) and when it was read. ``usd`` is None when the figure could not
    be read there (``note`` says why); the rate then counts at ``quoted``, a named public
    source's figure, or, with none, 0."""

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
    #: The parts whose rate is not confirmed on Google's page (:func:`unconfirmed_note`).
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
    """How a price names a rate not confirmed on Google's page."""
    if rate.status == ESTIMATE:
        return f"ESTIMATE, counted at {rate.figure}: {rate.what} ({rate.region}): {rate.note}"
    return (
        f"UNKNOWN, no figure anywhere (never counted as 0): {rate.what} ({rate.region}): "
        f"{rate.note}"
    )


def price_of(label: str, parts: tuple[tuple[Rate, float], ...]) -> Price:
    """The hourly price of ``parts`` (rate, units): each rate's counted figure times its units."""
    return Price(
        usd_per_hour=round(sum(rate.usd_per_hour * n for rate, n in parts), 4),
        source=f"{label}: " + "; ".join(f"{n:g} x {rate.citation}" for rate, n in parts),
        as_of=", ".join(sorted({rate.read for rate, _ in parts})),
        unconfirmed=tuple(unconfirmed_note(rate) for rate, _ in parts if not rate.confirmed),
        parts=parts,
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
    #: The catalog holds a probe's cadence; a stack's failures come from its cold start
    #: prediction (serving/capacity/start_budget.py).
    failure_threshold: int = 1
    #: Why these figures (the deployment they come from, what the budget covers).
    source: str = ""

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
    #: Where the remaining figures come from, and why they are what they are.
    notes: tuple[str, ...] = ()


def cloud_run_price(gpu: CloudRunGpuRates, zonal: bool, cpu: int, memory_gib: int) -> Price:
    """A Cloud Run GPU instance's hourly price: the GPU's rate (the zonal-redundancy SKU when
    on) plus ``cpu`` vCPU and ``memory_gib`` GiB at Cloud Run's instance-based rates."""
    rate = gpu.with_zonal_redundancy if zonal else gpu.without_zonal_redundancy
    return price_of(
        f"GPU ({'with' if zonal else 'without'} zonal redundancy) + {cpu} vCPU + {memory_gib} GiB",
        ((rate, 1.0), (CLOUD_RUN_CPU, float(cpu)), (CLOUD_RUN_MEMORY, float(memory_gib))),
    )


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
    notes: tuple[str, ...] = ()


_DATA = Path(__file__).resolve().parents[1] / "data"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((_DATA / name).read_text())
    return data


def _build(cls: type[Any], where: str, fields: dict[str, Any]) -> Any:
    """``cls(**fields)``; a missing or unknown field is a ValueError naming the entry."""
    try:
        return cls(**fields)
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}") from None


#: Google's rates by id (serving/data/prices.json), each checked by Rate itself.
RATES: dict[str, Rate] = {
    key: _build(Rate, f"prices.json rate {key!r}", entry)
    for key, entry in _load("prices.json")["rates"].items()
}
#: Cloud Run's instance-based vCPU and memory rates: a GPU instance's host bills on top.
CLOUD_RUN_CPU = RATES["cloud-run-vcpu"]
CLOUD_RUN_MEMORY = RATES["cloud-run-memory"]


def _price(where: str, entry: dict[str, Any]) -> Price:
    """A price of hardware.json: its label and parts ([rate id, units], ids of RATES)."""
    unknown = [rate for rate, _ in entry["parts"] if rate not in RATES]
    if unknown or set(entry) != {"label", "parts"}:
        raise ValueError(
            f"hardware.json {where}: a price is {{label, parts: [[rate id, units]]}} with rate "
            f"ids of prices.json; got keys {sorted(entry)}, unknown rates {unknown}"
        )
    return price_of(entry["label"], tuple((RATES[r], float(n)) for r, n in entry["parts"]))


def _profile(entry: dict[str, Any]) -> HardwareProfile:
    """One profile; a Cloud Run GPU's list price is its rate plus the minimum host (a stack's
    own size: Settings.price)."""
    where = f"profile {entry.get('key')!r}"
    fields = dict(entry, platform=Platform(entry["platform"]), locations=tuple(entry["locations"]))
    fields["startup_probe"] = _build(Probe, where, entry["startup_probe"])
    fields["notes"] = tuple(entry.get("notes", ()))
    for key in ("flex_start_price", "spot_price"):
        if key in entry:
            fields[key] = _price(f"{where} {key}", entry[key])
    if "cloud_run_gpu" in entry:
        gpu = CloudRunGpuRates(*(RATES[r] for r in entry["cloud_run_gpu"]))
        fields["cloud_run_gpu"] = gpu
        fields["price"] = cloud_run_price(gpu, False, entry["min_cpu"], entry["min_memory_gib"])
    else:
        fields["price"] = _price(f"{where} price", entry["price"])
    profile: HardwareProfile = _build(HardwareProfile, f"hardware.json {where}", fields)
    return profile


def _shape(entry: dict[str, Any]) -> GkeShape:
    where = f"GKE shape {entry.get('hardware')!r}"
    fields = dict(entry, startup_probe=_build(Probe, where, entry["startup_probe"]))
    fields["notes"] = tuple(entry.get("notes", ()))
    for key in ("price", "spot_price", "flex_start_price"):
        fields[key] = _price(f"{where} {key}", entry[key])
    shape: GkeShape = _build(GkeShape, f"hardware.json {where}", fields)
    return shape


_HARDWARE_DATA = _load("hardware.json")
HARDWARE: dict[str, HardwareProfile] = {p.key: p for p in map(_profile, _HARDWARE_DATA["profiles"])}
#: GKE node shapes by hardware key.
GKE_SHAPES: dict[str, GkeShape] = {s.hardware: s for s in map(_shape, _HARDWARE_DATA["gke_shapes"])}
#: The GKE system node's rate by machine type (another machine type is shown unpriced).
SYSTEM_NODE: dict[str, Rate] = {
    key.removesuffix("-on-demand"): rate
    for key, rate in RATES.items()
    if key.startswith("e2-") and key.endswith("-on-demand")
}
