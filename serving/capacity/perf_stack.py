"""The performance model of a stack (pure): :func:`model_for_settings` builds a
:class:`serving.capacity.perf.StepModel` from a stack's validated settings, the hardware and
model catalogues and the calibration for exactly that hardware, checkpoint and vLLM release, if
the repository has one; the replica rates, autoscaling bounds and benchmark grid come from it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from serving.capacity.calibration import CALIBRATIONS_DIR, Calibration, find_calibration
from serving.capacity.evidence import (
    accepted_length,
    api_server_time,
    efficiency_prior,
    evidence,
    kernel_path,
    mtp_prior_acceptance,
)
from serving.capacity.perf import (
    UNCALIBRATED_BAND,
    Coefficients,
    Slo,
    Speculation,
    StepModel,
    Workload,
)
from serving.capacity.perf_validation import decode_validated, front_end, stack_band
from serving.capacity.shapes import device_for, shape_for
from serving.config.settings import Settings
from serving.launch.vllm_contract import image_release


def vllm_release(settings: Settings) -> str:
    """``vllm 0.27.1`` for an official image tag, else the image reference itself."""
    release = image_release(settings.image)
    return f"{release[0]} {release[1]}" if release else settings.image


def model_for_settings(
    settings: Settings,
    calibrations: Path | None = CALIBRATIONS_DIR,
    mtp_acceptance: float | None = None,
) -> tuple[StepModel, Calibration | None]:
    """The stack's model and the calibration it uses (None: uncalibrated priors, wide band).
    ``calibrations`` None: the priors, whatever calibrations exist. ``mtp_acceptance``: the
    per-draft acceptance to assume (else the calibration's measured length, else the prior)."""
    card = settings.model.card
    drafter = settings.model.drafter_card if settings.model.speculative_method == "mtp" else None
    v = settings.vllm
    shape = shape_for(card, v.kv_cache_dtype, v.dtype, drafter, settings.profile.accelerator_count)
    calibration = (
        find_calibration(
            settings.hardware,
            card.repo_id,
            vllm_release(settings),
            calibrations,
            platform=settings.deploy_platform,
        )
        if calibrations is not None
        else None
    )
    speculation = None
    if drafter is not None:
        k = settings.model.num_speculative_tokens
        accepted = accepted_length(mtp_prior_acceptance(), k)
        if calibration is not None and calibration.mean_accepted_length is not None:
            accepted = min(calibration.mean_accepted_length, k + 1.0)  # measured by the run
        if mtp_acceptance is not None:
            accepted = accepted_length(mtp_acceptance, k)
        speculation = Speculation(k, accepted)
    bandwidth, measured_path, _ = efficiency_prior(card, settings.profile)
    front, measured_front, _ = front_end(settings.deploy_platform)

    widen = float(evidence()["unmeasured_band_widening"])
    published = stack_band(
        settings.hardware, kernel_path(card, settings.profile)[0], drafter is not None
    )
    band = (
        calibration.band
        if calibration
        else published
        if published is not None
        else UNCALIBRATED_BAND
    )
    if not calibration and not measured_path:
        band += widen  # a kernel path nobody measured
    if not calibration and not decode_validated(settings.hardware):
        band += widen  # no published row of this hardware decodes: the band saw no decode
    if not measured_front:
        band += widen  # a front end nobody measured
    server_request, server_prompt_token, _ = api_server_time()
    plan = settings.memory_plan()
    model = StepModel(
        shape=shape,
        device=device_for(settings.profile),
        coefficients=(
            calibration.coefficients
            if calibration
            else replace(Coefficients(), bandwidth_efficiency=bandwidth)
        ),
        max_num_seqs=v.max_num_seqs,
        max_num_batched_tokens=v.max_num_batched_tokens,
        speculation=speculation,
        band=band,
        basis=(
            f"calibrated on {calibration.provenance.get('run', '?')} "
            f"({calibration.name}; held-out median error {calibration.band:.0%})"
            if calibration
            else "uncalibrated priors (no calibration for "
            f"{settings.hardware} / {card.repo_id} / {vllm_release(settings)})"
        ),
        front_end_s=front,
        itl_spread=calibration.itl_spread if calibration else (),
        ttft_spread=calibration.ttft_spread if calibration else (),
        server_request_s=server_request,
        server_prompt_token_s=server_prompt_token,
        kv_capacity_tokens=(
            float(plan.capacity.reported_tokens) if plan is not None and plan.fits else None
        ),
        max_model_len=v.max_model_len,
    )
    return model, calibration


@dataclass(frozen=True)
class AutoscalingBounds:
    """Replica bounds for a peak arrival rate, derived from the model."""

    #: Requests/s one replica serves within the SLO (the model's largest rate meeting it).
    per_replica_rps: float
    min_replicas: int
    max_replicas: int
    #: In-flight requests per replica at that rate (a target for a concurrency-based scaler).
    target_in_flight_per_replica: float
    slo: str
    basis: str

    def as_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


#: The most replicas any plan names (the replica plan, `gemma4 plan search`, the autoscaling
#: bounds); a load needing more is said to need more than this, with no count and no cost.
MAX_REPLICAS = 1000


#: The share of the largest SLO-meeting rate each replica is NOT planned for (bursts, the
#: model's error). The one figure every replica count uses: the replica plan (`gemma4 plan`,
#: the preview), `gemma4 plan search` and the autoscaling bounds.
HEADROOM = 0.2


def planned_replica_rate(model: StepModel, workload: Workload, slo: Slo) -> float:
    """Requests/s one replica is planned to serve within ``slo``: ``(1 - HEADROOM)`` of the
    largest rate the model says meets it, on the band's slow side (divided by ``1 + band``);
    0 when one replica cannot meet it at any load."""
    best = model.max_rate_meeting(slo, workload)
    return best * (1 - HEADROOM) / (1 + model.band) if best > 0 else 0.0


def capacity_replica_rate(model: StepModel, workload: Workload) -> float:
    """Requests/s one replica is planned to serve when no latency SLO is set: ``(1 -
    HEADROOM)`` of the most it sustains with every sequence slot busy, on the band's slow
    side. Past its capacity a replica's queue grows without bound."""
    return model.capacity_rps(workload) * (1 - HEADROOM) / (1 + model.band)


def autoscaling_bounds(
    model: StepModel,
    workload: Workload,
    slo: Slo,
    *,
    base_rate: float,
    peak_rate: float,
) -> AutoscalingBounds:
    """Replica bounds for traffic between ``base_rate`` and ``peak_rate`` requests/s, each
    replica at :func:`planned_replica_rate`: ``min_replicas`` serves ``base_rate`` (0: scale to
    zero), ``max_replicas`` the peak, at most :data:`MAX_REPLICAS`. ValueError when no load
    meets the SLO."""
    if not (math.isfinite(base_rate) and math.isfinite(peak_rate) and 0 <= base_rate <= peak_rate):
        raise ValueError("need 0 <= base_rate <= peak_rate, both finite")
    per_replica = planned_replica_rate(model, workload, slo)
    if per_replica <= 0:
        raise ValueError(f"one replica cannot meet {slo.describe()} at any load ({model.basis})")
    in_flight = model.at_rate(per_replica, workload).in_flight
    low = 0 if base_rate == 0 else math.ceil(base_rate / per_replica)
    high = max(1, math.ceil(peak_rate / per_replica))
    if high > MAX_REPLICAS:
        raise ValueError(f"{peak_rate:g} req/s needs {high} replicas, above the cap {MAX_REPLICAS}")
    return AutoscalingBounds(per_replica, low, high, in_flight, slo.describe(), model.basis)


def benchmark_grid(model: StepModel, workload: Workload, points: int = 6) -> list[int]:
    """Concurrency levels for a post-deploy benchmark: 1, then levels spread geometrically up
    to the knee (where predicted throughput stops growing by 10 % per doubling) and
    max-num-seqs, so the measured cells cover the curve's bend and calibrate it."""
    top = model.max_num_seqs
    knee = top
    c = 1
    previous = model.at_concurrency(1, workload).output_tokens_per_s
    while c * 2 <= top:
        current = model.at_concurrency(c * 2, workload).output_tokens_per_s
        if current < previous * 1.1:
            knee = c * 2
            break
        previous, c = current, c * 2
    levels = {1, knee, top}
    if points > 3 and knee > 1:
        ratio = knee ** (1 / (points - 2))
        levels |= {max(1, round(ratio**i)) for i in range(1, points - 2)}
    return sorted(levels)[: max(points, 3)]


#: Seconds the post-deploy benchmark gives one cell at least (a warm-up and enough requests
#: for a p95): benchmarkBudgetSeconds / this is how many levels the derived grid has, 3 to 6.
POST_DEPLOY_SECONDS_PER_CELL = 20


def post_deploy_grid(settings: Settings) -> list[int]:
    """The post-deploy benchmark's concurrency levels when the stack names none
    (``benchmarkConcurrency: []``): :func:`benchmark_grid` of the stack's model at its benchmark
    request shape, with as many levels as ``benchmarkBudgetSeconds`` allows at
    :data:`POST_DEPLOY_SECONDS_PER_CELL` each (at least 1, the knee and max-num-seqs)."""
    model, _ = model_for_settings(settings)
    b = settings.benchmark
    points = min(6, max(3, b.benchmark_budget_seconds // POST_DEPLOY_SECONDS_PER_CELL))
    workload = Workload(b.benchmark_prompt_tokens, b.benchmark_output_tokens)
    return benchmark_grid(model, workload, points)


def waiting_requests_target(settings: Settings) -> int:
    """The queue per replica the GKE autoscaler holds (`scaleUpWaitingRequests` when unset).

    A request arriving behind W waiting ones on a full replica waits about W / capacity
    (capacity: requests/s with every sequence slot busy) before its own prefill. The target is
    the largest W whose wait plus a full replica's mean TTFT stays within ``sloP95TtftMs``
    (else ``sloP95E2EMs`` with the full replica's E2E), on the band's slow side (times taken
    1 + band longer, capacity 1 + band smaller); at least 1, at most 1024. Without either SLO:
    max-num-seqs (a full batch waiting)."""
    model, _ = model_for_settings(settings)
    b = settings.benchmark
    workload = Workload(b.benchmark_prompt_tokens, b.benchmark_output_tokens)
    busy = model.at_concurrency(model.max_num_seqs, workload)
    slow = 1 + model.band
    capacity = model.capacity_rps(workload) / slow
    slo = settings.slo
    if slo.slo_p95_ttft_ms is not None:
        room = slo.slo_p95_ttft_ms / 1000 - busy.ttft_s * slow
    elif slo.slo_p95_e2e_ms is not None:
        room = slo.slo_p95_e2e_ms / 1000 - busy.e2e_s * slow
    else:
        return max(1, min(1024, model.max_num_seqs))
    if not math.isfinite(room) or not math.isfinite(capacity):
        return 1
    return max(1, min(1024, math.floor(room * capacity)))


def scale_up_waiting_requests(settings: Settings) -> int:
    """The GKE autoscaler's target, average requests waiting per replica:
    `scaleUpWaitingRequests`, else derived from the performance model
    (:func:`waiting_requests_target`)."""
    if settings.gke.scale_up_waiting_requests is not None:
        return settings.gke.scale_up_waiting_requests
    return waiting_requests_target(settings)


def benchmark_concurrency(settings: Settings) -> list[int]:
    """The post-deploy benchmark's concurrency levels: `benchmarkConcurrency`, else derived
    from the performance model (:func:`post_deploy_grid`: 1, the knee of the predicted curve
    and max-num-seqs, more levels as the budget allows)."""
    if settings.benchmark.benchmark_concurrency:
        return sorted(set(settings.benchmark.benchmark_concurrency))
    return post_deploy_grid(settings)
