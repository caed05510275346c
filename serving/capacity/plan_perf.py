"""The capacity planner's performance part (``gemma4 plan``, ``plan search``, ``plan
calibrate``): predicted latency against throughput, replicas, the stack search and a run's
target. The maths is :mod:`serving.capacity.perf`; this module reads stacks and runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from serving.capacity.costs import Cost, cost, instance_price, per_million
from serving.capacity.evidence import mtp_prior_acceptance
from serving.capacity.gke_costs import fixed_costs, stack_price_status
from serving.capacity.perf import Slo, StepModel, Workload
from serving.capacity.perf_stack import (
    HEADROOM,
    MAX_REPLICAS,
    autoscaling_bounds,
    benchmark_grid,
    capacity_replica_rate,
    model_for_settings,
    planned_replica_rate,
    vllm_release,
)
from serving.capacity.perf_validation import front_end, front_end_basis
from serving.config.groups import MIN_REQUESTS_PER_SECOND
from serving.config.settings import Settings


def _levels(model: StepModel) -> list[int]:
    """Concurrency levels shown besides the benchmark grid's: 1, powers of two, max-num-seqs."""
    top = model.max_num_seqs
    return sorted({1, top, *(2**i for i in range(1, top.bit_length()) if 2**i < top)})


def workload_for(settings: Settings, prompt: int | None, output: int | None) -> Workload:
    """The request shape: the stack's benchmark lengths unless told otherwise."""
    b = settings.benchmark
    return Workload(prompt or b.benchmark_prompt_tokens, output or b.benchmark_output_tokens)


def performance(
    settings: Settings,
    workload: Workload | None = None,
    mtp_acceptance: float | None = None,
    concurrencies: Sequence[int] | None = None,
    mtp_source: str | None = None,
) -> dict[str, Any]:
    """Predicted figures per concurrency for one stack, JSON-ready (means; ms, tokens/s, USD).
    Latencies are the client's (the platform's front end added, said so); each point names
    the ceiling it is closest to. An MTP stack also gets its bounds: nothing accepted and
    everything accepted. ``mtp_source`` says where a given ``mtp_acceptance`` comes from
    (default: ``--mtp-acceptance``)."""
    model, calibration = model_for_settings(settings, mtp_acceptance=mtp_acceptance)
    w = workload or workload_for(settings, None, None)
    model.check_shape(w)
    price, status = instance_price(settings)  # one instance: on GKE one replica's node
    front, front_measured, front_source = front_end(settings.deploy_platform)
    mtp: dict[str, Any] | None = None
    if model.speculation is not None:
        k = model.speculation.num_speculative_tokens
        bounds = {}
        for label, a in (("none_accepted", 0.0), ("all_accepted", 1.0)):
            bound, _ = model_for_settings(settings, mtp_acceptance=a)
            one = bound.at_concurrency(1, w)
            bounds[label] = {
                "acceptance": a,
                "mean_accepted_length": bound.tokens_per_step,
                "itl_ms_at_1": one.itl_s * 1000.0,
                "e2e_ms_at_1": one.e2e_s * 1000.0,
                "capacity_requests_per_s": bound.capacity_rps(w),
            }
        mtp = {
            "speculative_tokens": k,
            "acceptance": mtp_acceptance,
            "acceptance_source": (mtp_source or "--mtp-acceptance")
            if mtp_acceptance is not None
            else calibration.acceptance_source
            if calibration is not None and calibration.mean_accepted_length is not None
            else f"median of published Gemma 4 MTP figures ({mtp_prior_acceptance():.0%} per "
            "draft token; serving/data/performance-evidence.json)",
            "bounds": bounds,
        }
    curve = []
    for c in concurrencies or _levels(model):
        p = model.at_concurrency(c, w)
        curve.append(
            {
                "concurrency": c,
                **p.as_dict(),
                "usd_per_million_output_tokens": per_million(price, p.output_tokens_per_s),
                "usd_per_million_requests": per_million(price, p.requests_per_s),
            }
        )
    return {
        "basis": model.basis,
        "calibrated": calibration is not None,
        "band": model.band,
        "prompt_tokens": w.prompt_tokens,
        "output_tokens": w.output_tokens,
        "speculative_tokens": model.speculation.num_speculative_tokens if model.speculation else 0,
        "mean_accepted_length": model.tokens_per_step,
        "capacity_requests_per_s": model.capacity_rps(w),
        "benchmark_grid": benchmark_grid(model, w),
        "coefficients": model.coefficients.as_dict(),
        "front_end_ms": front * 1000.0,
        "front_end_measured": front_measured,
        "front_end_basis": front_end_basis(settings.deploy_platform),
        "front_end_source": front_source,
        "latency_view": "client (engine + front end)",
        "mtp": mtp,
        "curve": curve,
        # The per-token and per-request costs above are estimates (a rate counted at a named
        # source's quote), or null with an unknown price (a rate with no figure anywhere).
        "price_status": status,
        "measured": False,
    }


def fixed_usd_per_hour(settings: Settings) -> tuple[float, list[str]]:
    """What the stack bills per hour at any replica count (on GKE the cluster fee, the system
    node and the Gateway's forwarding rule: serving.capacity.gke_costs.fixed_costs), and the items
    with no figure anywhere (counted as 0). Other platforms: nothing."""
    if settings.deploy_platform != "gke":
        return 0.0, []
    items = fixed_costs(settings)
    return (
        sum(f.usd_per_hour for f in items if f.usd_per_hour is not None),
        [f.item for f in items if f.usd_per_hour is None],
    )


def slo_for(settings: Settings) -> Slo | None:
    """The stack's latency SLOs as the model's mean objectives (sloP95TtftMs, sloP95E2EMs held
    to the predicted means: a mean within a p95 limit is necessary, not sufficient), or None
    when the stack sets neither."""
    s = settings.slo
    if s.slo_p95_ttft_ms is None and s.slo_p95_e2e_ms is None:
        return None
    return Slo(ttft_ms=s.slo_p95_ttft_ms, e2e_ms=s.slo_p95_e2e_ms)


def offered_load(
    settings: Settings,
    rate: float | None,
    flag: str,
    workload: Workload | None = None,
    mtp_acceptance: float | None = None,
) -> tuple[float, str]:
    """The requests/s offered to the whole endpoint (every replica together) and where the
    figure comes from: the command's `flag`, else the stack's sloMinRequestsPerSecond, else
    what the stack's fewest replicas (at least 1) serve as planned (within the SLO, or below
    capacity without one), rounded down to 0.001, said so. Every command that takes a rate
    means this one figure."""
    if rate is not None:
        return rate, flag
    if settings.slo.slo_min_requests_per_second:
        return settings.slo.slo_min_requests_per_second, "the stack's sloMinRequestsPerSecond"
    model, _ = model_for_settings(settings, mtp_acceptance=mtp_acceptance)
    w = workload or workload_for(settings, None, None)
    slo = slo_for(settings)
    per = planned_replica_rate(model, w, slo) if slo else capacity_replica_rate(model, w)
    n = max(1, settings.replica_bounds[0])
    planned = math.floor(n * per * 1000) / 1000
    if planned < MIN_REQUESTS_PER_SECOND:
        return 1.0, f"assumed; set sloMinRequestsPerSecond or {flag}"
    return planned, (
        f"what {n} replica(s) serve as planned; set sloMinRequestsPerSecond or {flag} for your load"
    )


def endpoint_cost(
    settings: Settings, rate: float, replicas: int | None, workload: Workload
) -> Cost | None:
    """What serving ``rate`` req/s of ``workload`` on ``replicas`` costs (None: no count can
    serve it): at least the stack's fewest replicas billed, each at the instance price
    (:func:`serving.capacity.costs.instance_price`; unknown: every figure None), plus what the
    stack bills at any count (a GKE cluster's fixed costs). The one cost figure of `gemma4
    plan`, `gemma4 plan search`, the preview and the MCP capacity_plan tool."""
    if not replicas:
        return None
    count = max(replicas, settings.replica_bounds[0])
    return replicas_cost(settings, count, rate, rate * workload.output_tokens)


def replicas_cost(
    settings: Settings,
    replicas: int,
    requests_per_s: float | None = None,
    output_tokens_per_s: float | None = None,
) -> Cost:
    """``replicas`` instances plus the stack's fixed costs, in the four figures (the per-million
    ones at the throughput given); an unknown instance price makes the whole unknown."""
    price, _ = instance_price(settings)
    fixed, _ = fixed_usd_per_hour(settings)
    per_hour = None if price is None else replicas * price + fixed
    return cost(per_hour, stack_price_status(settings), requests_per_s, output_tokens_per_s)


def serving_replicas(settings: Settings, plan: dict[str, Any]) -> tuple[int | None, str]:
    """How many replicas serve the offered load: the count the replica plan says it needs
    (:func:`replica_plan`: within the SLO, or below capacity without one), at least the
    stack's fewest; a count above the stack's most is kept and said so (raise the bound to
    deploy it); None when no count can serve it (the plan's verdict says why)."""
    low, high = settings.replica_bounds
    need = plan.get("replicas_needed")
    if not need:
        return None, str(plan.get("verdict", "no replica plan"))
    count = max(need, low, 1)
    basis = "the SLO" if plan.get("slo") else "capacity"
    if need > high:
        return (
            count,
            f"{basis} needs {need}; the stack runs at most {high}: raise it to deploy this",
        )
    if count > need:
        return count, f"the stack's fewest ({low}); {basis} needs {need}"
    return count, "planned for the SLO" if plan.get("slo") else "planned below capacity"


def replica_plan(
    settings: Settings,
    rate: float,
    rate_source: str,
    workload: Workload | None = None,
    mtp_acceptance: float | None = None,
    simulated: tuple[int | None, str, str] | None = None,
) -> dict[str, Any]:
    """Replicas that serve ``rate`` req/s within the stack's SLO, against the stack's own
    bounds (`Settings.replica_bounds`), with the cost at the fewest and most replicas (fixed
    costs included). Latencies are the client's (the platform's front end included).

    ``simulated``: (replicas, why, targets) the scheduler simulation sized for percentile
    targets (:func:`serving.capacity.configsearch.sized_stack`, the one count `gemma4 plan`,
    `plan search`, the preview and the MCP tool give); without it the step model's means
    (:func:`serving.capacity.perf_stack.autoscaling_bounds`: :data:`HEADROOM` left free, the
    band's pessimistic side)."""
    model, _ = model_for_settings(settings, mtp_acceptance=mtp_acceptance)
    w = workload or workload_for(settings, None, None)
    low, high = settings.replica_bounds
    price, _ = instance_price(settings)
    fixed, unpriced = fixed_usd_per_hour(settings)
    at_min, at_max = replicas_cost(settings, low), replicas_cost(settings, high)
    out: dict[str, Any] = {
        "platform": settings.deploy_platform,
        "requests_per_second": rate,
        "requests_per_second_source": rate_source,
        "stack_min_replicas": low,
        "stack_max_replicas": high,
        "usd_per_hour_per_replica": price,
        "price_status": at_min.status,
        "fixed_usd_per_hour": fixed,
        "unpriced": unpriced,
        "usd_per_hour_at_min": at_min.usd_per_hour,
        "usd_per_month_at_min": at_min.usd_per_month,
        "usd_per_hour_at_max": at_max.usd_per_hour,
        "usd_per_month_at_max": at_max.usd_per_month,
        "measured": False,
    }
    slo = slo_for(settings)
    refusal = None
    if simulated is not None:
        need_or_none, why, targets = simulated
        if need_or_none is None:
            return {**out, "slo": targets, "replicas_needed": None, "verdict": why}
        need, per_replica = need_or_none, rate / need_or_none
        refusal = why if why.startswith("at that count") else None
        sized: dict[str, Any] = {
            "per_replica_rps": per_replica,
            "sized_on": "the SLO's percentiles, simulated at the planned load "
            f"({HEADROOM * 100:g} % headroom, the band's slow side)",
        }
        slo_text: str | None = targets
    elif slo is None:
        # No latency SLO: each replica is planned below its capacity (the same headroom), so
        # the count still says what the load needs to be served at all.
        per_replica = capacity_replica_rate(model, w)
        need = max(1, math.ceil(rate / per_replica))
        if need > MAX_REPLICAS:
            return {
                **out,
                "slo": None,
                "replicas_needed": None,
                "verdict": f"{rate:g} req/s needs {need} replicas, above the cap {MAX_REPLICAS}",
            }
        sized = {
            "per_replica_rps": per_replica,
            "sized_on": f"capacity ({HEADROOM * 100:g} % headroom): no latency SLO set "
            "(sloP95TtftMs, sloP95E2EMs)",
        }
        slo_text = None
    else:
        try:
            bounds = autoscaling_bounds(model, w, slo, base_rate=0.0, peak_rate=rate)
        except ValueError as exc:
            return {**out, "slo": slo.describe(), "replicas_needed": None, "verdict": str(exc)}
        need, per_replica = bounds.max_replicas, bounds.per_replica_rps
        sized = {**bounds.as_dict(), "sized_on": "the SLO"}
        slo_text = slo.describe()
    on_slo = slo is not None or simulated is not None
    within = "within the SLO" if on_slo else "below capacity"
    if need > high:
        key, most = replica_key(settings)
        raise_it = (
            f"raise {key} to {need}"
            if need <= most
            else f"{key} allows at most {most}: split the traffic over more stacks"
        )
        missed = "the SLO missed" if on_slo else "queues to grow"
        verdict = (
            f"{rate:g} req/s needs {need} replicas, above the stack's most ({high}): "
            f"{raise_it}, or expect {missed} above {high * per_replica:.2f} req/s"
        )
    else:
        verdict = f"{need} of at most {high} replicas serve {rate:g} req/s {within}"
    if not on_slo:
        verdict += "; no latency SLO set (sloP95TtftMs, sloP95E2EMs)"
    if simulated is not None and refusal:
        verdict += f"; {refusal}"
    return {
        **out,
        **sized,
        "slo": slo_text,
        "replicas_needed": need,
        "within_bounds": need <= high,
        "rps_at_max_replicas": high * per_replica,
        "verdict": verdict,
    }


def replica_key(settings: Settings) -> tuple[str, int]:
    """The key bounding the stack's replicas and the most it accepts (the settings' own
    bound)."""
    from pydantic import BaseModel

    from serving.config.platforms import CloudRunSettings, GkeSettings, TpuSettings

    choices: dict[str, tuple[type[BaseModel], str, str]] = {
        "gke": (GkeSettings, "max_replicas", "maxReplicas"),
        "tpu-vm": (TpuSettings, "replicas", "replicas"),
    }
    group, field, key = choices.get(
        settings.deploy_platform, (CloudRunSettings, "max_instances", "maxInstances")
    )
    bounds = [m.le for m in group.model_fields[field].metadata if getattr(m, "le", None)]
    return key, int(bounds[0]) if bounds else MAX_REPLICAS


def run_target(
    run: dict[str, Any], settings: Settings, stack: str, allow_other: bool
) -> tuple[str, str]:
    """(hardware, engine release) the run measured, from what it recorded: its model,
    hardware and engine version must be there, and the model must be the stack's; another
    hardware or vLLM release than the stack pins is refused unless ``allow_other`` (then the
    calibration is labelled with what was measured, and applies to that target only)."""
    missing = [key for key in ("model", "hardware", "engine_version") if not run.get(key)]
    if missing:
        raise ValueError(
            f"the run does not record its {', '.join(missing)}: a calibration must know what "
            "it measured (record them with the benchmark; the server's GET /version gives "
            "the engine version)"
        )
    run_model = run["model"]
    if run_model not in (settings.model.model, settings.model.served_model_name):
        raise ValueError(
            f"the run measured model {run_model!r}, stack {stack} serves {settings.model.model!r}"
        )
    hardware = str(run.get("server_hardware") or run["hardware"])[:64]
    version = str(run["engine_version"]).strip()[:64]
    engine = version if version.startswith("vllm") else f"vllm {version}"
    release = vllm_release(settings)
    other = []
    if hardware != settings.hardware:
        other.append(f"hardware {hardware!r} (stack {stack}: {settings.hardware!r})")
    if engine != release:
        other.append(f"engine {engine!r} (stack {stack}: {release!r})")
    if other and not allow_other:
        raise ValueError(
            f"the run measured {' and '.join(other)}: pass --allow-other-target to calibrate "
            "for what it measured (it then applies to that target, not to this stack)"
        )
    return hardware, engine
