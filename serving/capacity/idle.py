"""Min instances priced against cold starts (`gemma4 plan --traffic`, `plan search --traffic`):
for each min-instance setting, what the instances kept warm cost, the share of requests that
meet a cold start, and which latency percentiles those cold starts break (docs/min-instances.md).

Closed-form, so that a plan answers at once and a search can price every answer without a
second simulation, and so that each figure can be checked by hand. The traffic is a sequence
of periods, each at one rate: a day of one rate (``steady``), 24 hourly rates (``profile``),
busy stretches at one rate between idle gaps (``gaps``), or a trace cut at its idle gaps and
into hours (``trace``: its own arrivals). A modelled period's arrivals are Poisson.

A request meets a cold start when fewer instances are warm than it needs:

- scaled to zero: with no instance kept warm, one left idle longer than the platform's idle
  period is gone. Within a Poisson period at rate r the gap before an arrival exceeds the idle
  period T with probability exp(-r T); each such gap starts an instance, and the request that
  starts it and the r x D arriving during its start (D the cold start's p50) wait for it.
  An idle gap g < T of the shape adds to the busy-time wait X it falls in (cold when
  X + g > T); a profile hour's first requests wait partly in the hour before;
- scaled out: a period needs ceil(r / c) instances (c: the requests/s one instance serves as
  planned), at most the replicas sized for the traffic. It starts with the instances the last
  period needed, or only the minimum after an idle stretch of at least T; of the requests
  arriving in its first D seconds, the share the missing instances would serve waits for them.

Boundary effects of about one request per period are left out (the period's first gap is
taken from its own rate). A percentile q of TTFT or E2E breaks when the share of requests
meeting a cold start exceeds 1 - q and the cold start's p50 exceeds the target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from serving.capacity.coldstart import cold_start
from serving.capacity.costs import cost, instance_price
from serving.config.groups import MAX_REQUESTS_PER_SECOND, MIN_REQUESTS_PER_SECOND
from serving.config.inputs import INTEGER, NUMBER
from serving.config.settings import Settings

SHAPES = ("steady", "profile", "gaps", "trace")
SHAPE_HELP = "steady, profile:R0,...,R23 (req/s each hour), gaps:SECONDS,PER_DAY, trace"
DAY_S = 86_400.0
HOUR_S = 3_600.0
#: Cloud Run keeps an idle instance "up to 15 minutes" before it scales in
#: (https://cloud.google.com/run/docs/about-instance-autoscaling, "Idle instances"): the
#: longest it keeps one, so a shorter wait means more cold starts than predicted, never fewer.
CLOUD_RUN_IDLE_S = 900.0
#: GKE: the HorizontalPodAutoscaler's scale-down window the stack renders (serving/render/gke.py
#: reads it here;
#: Kubernetes' default is 300 s). minReplicas is at least 1: GKE stacks never scale to zero.
GKE_SCALE_DOWN_S = 600
#: The percentiles a target may name, as fractions.
QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}
MAX_GAPS_PER_DAY = 1440


@dataclass(frozen=True)
class Shape:
    """The traffic's shape (the rate is the plan's or the search's, except a profile's)."""

    kind: str
    profile: tuple[float, ...] = ()
    gap_s: float = 0.0
    gaps_per_day: int = 0
    arrivals: tuple[float, ...] = ()

    @property
    def peak(self) -> float | None:
        """The busiest hour's rate of a profile (what replicas are sized for); None otherwise."""
        return max(self.profile) if self.profile else None

    def with_trace(self, arrivals: Sequence[float] | None) -> Shape:
        """A ``trace`` shape with the --trace's arrival times (others as they are)."""
        if self.kind != "trace":
            return self
        if arrivals is None:
            raise ValueError("--traffic trace reads the arrivals of --trace FILE: give --trace")
        return replace(self, arrivals=tuple(sorted(arrivals)))

    def as_dict(self, rate: float) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "requests_per_second": rate}
        if self.kind == "profile":
            out["hourly_requests_per_second"] = list(self.profile)
        elif self.kind == "gaps":
            out.update(idle_gap_s=self.gap_s, gaps_per_day=self.gaps_per_day)
        elif self.kind == "trace":
            out["requests"] = len(self.arrivals)
        return out


def _number(text: str, what: str, low: float, high: float, integer: bool = False) -> float:
    value = float(text) if (INTEGER if integer else NUMBER).fullmatch(text) else math.nan
    if not (math.isfinite(value) and low <= value <= high):
        kind = "an integer" if integer else "a number"
        raise ValueError(
            f"--traffic {what} must be {kind} in [{low:g}, {high:g}], got {text[:40]!r}"
        )
    return value


def parse_shape(text: str) -> Shape:
    """``--traffic``'s value (:data:`SHAPE_HELP`; a trace's arrivals come with
    :meth:`Shape.with_trace`). ValueError naming the option and what it takes otherwise."""
    kind, colon, args = text.partition(":")
    if kind not in SHAPES or (kind in ("steady", "trace")) == bool(colon):
        raise ValueError(f"--traffic takes {SHAPE_HELP}, got {text[:60]!r}")
    if kind == "profile":
        parts = args.split(",")
        if len(parts) != 24:
            raise ValueError(f"--traffic profile takes 24 hourly rates (req/s), got {len(parts)}")
        rates = tuple(
            _number(p, f"profile hour {h}", 0.0, MAX_REQUESTS_PER_SECOND)
            for h, p in enumerate(parts)
        )
        if max(rates) < MIN_REQUESTS_PER_SECOND:
            raise ValueError(
                f"--traffic profile: at least one hour at {MIN_REQUESTS_PER_SECOND:g} req/s or more"
            )
        return Shape(kind, profile=rates)
    if kind == "gaps":
        parts = args.split(",")
        if len(parts) != 2:
            raise ValueError(
                "--traffic gaps takes SECONDS,PER_DAY (an idle gap's length, how many)"
            )
        per_day = _number(parts[1], "gaps PER_DAY", 1, MAX_GAPS_PER_DAY, integer=True)
        gap = _number(parts[0], "gaps SECONDS", 1, DAY_S / per_day)
        if gap * per_day >= DAY_S:
            raise ValueError("--traffic gaps: the gaps fill the whole day; leave some busy time")
        return Shape(kind, gap_s=gap, gaps_per_day=int(per_day))
    return Shape(kind)


@dataclass(frozen=True)
class Period:
    """Requests at one rate; ``after_idle``: an idle stretch of at least the idle period came
    first (every instance above the minimum is gone); ``gap_cold``: the chance that the wait
    before one of its requests outlasts the idle period (its modelled Poisson gaps; 0 for a
    trace's own arrivals, cut at each such wait)."""

    requests: float
    rate: float
    after_idle: bool
    gap_cold: float


def periods(shape: Shape, rate: float, idle_s: float) -> list[Period]:
    """The shape as periods. A modelled shape's repeat (the last precedes the first); a
    trace's arrivals are rescaled to ``rate`` (as the simulation replays them), then cut at
    each gap longer than ``idle_s`` and every hour (its first period follows an idle stretch:
    nothing is known before it)."""
    if shape.kind == "steady":
        return [Period(rate * DAY_S, rate, False, math.exp(-rate * idle_s))]
    if shape.kind == "profile":
        p = shape.profile
        return [
            Period(r * HOUR_S, r, p[h - 1] == 0, _hourly(p[h - 1], r, idle_s))
            for h, r in enumerate(p)
        ]
    if shape.kind == "gaps":
        busy = (DAY_S - shape.gap_s * shape.gaps_per_day) / shape.gaps_per_day
        if shape.gap_s >= idle_s:
            return [Period(rate * busy, rate, True, math.exp(-rate * idle_s))]
        # A gap shorter than the idle period keeps the instances, unless the wait around it
        # outlasts the idle period: one busy stretch repeats.
        return [Period(rate * busy, rate, False, _straddled(rate, busy, shape.gap_s, idle_s))]
    times = shape.arrivals
    first, span, rescaled = times[0], times[-1] - times[0], (len(times) - 1) / rate
    # Each arrival as a share of the span from the first: a trace far from time 0 keeps its
    # gaps' precision, and a tiny span cannot overflow the scale.
    scaled = [(x - first) / span * rescaled if span > 0 else 0.0 for x in times]
    out: list[Period] = []
    piece = scaled[:1]
    after_idle = True
    for t in scaled[1:]:
        gap = t - piece[-1]
        if gap > idle_s or t - piece[0] >= HOUR_S:
            out.append(_piece(piece, after_idle))
            piece, after_idle = [], gap > idle_s
        piece.append(t)
    out.append(_piece(piece, after_idle))
    return out


def _piece(times: list[float], after_idle: bool) -> Period:
    span = times[-1] - times[0]
    rate = (len(times) - 1) / span if span > 0 else float(len(times) - 1)
    return Period(float(len(times)), rate, after_idle, 0.0)


def _hourly(before: float, r: float, idle: float) -> float:
    """The chance that a request's wait outlasts ``idle`` in an hour at ``r`` req/s after one
    at ``before``. A Poisson request t seconds into the hour finds none in the ``idle``
    seconds before it with probability exp(-(r t + before (idle - t))) for t < idle, exp(-r
    idle) after: its mean over the hour. After an idle hour (``before`` 0) the period's
    ``after_idle`` counts its first request instead."""
    own, d = math.exp(-r * idle), r - before
    if before == 0:
        return own
    early = (math.exp(-before * idle) - own) / d if abs(d * idle) > 1e-6 else idle * own
    return own + (early - idle * own) / HOUR_S


def _straddled(r: float, busy: float, gap: float, idle: float) -> float:
    """The chance that a request's wait since the one before outlasts ``idle``, in busy
    stretches of ``busy`` seconds at ``r`` req/s between idle gaps of ``gap`` < ``idle``
    seconds. A request ``u`` seconds into its stretch waited X ~ Exp(r) seconds of busy time:
    within the stretch (X <= u) it is cold when X > idle; across the gap (X > u) when
    X + gap > idle. The mean over u uniform in [0, busy]; a wait across two gaps or more is
    counted as one (exact when ``busy`` >= ``idle - gap``; fewer cold starts than happen
    otherwise)."""
    s, e = idle - gap, math.exp
    across = min(busy, s) * e(-r * s) + max(0.0, e(-r * s) - e(-r * busy)) / r
    within = max(0.0, (busy - idle) * e(-r * idle) - (e(-r * idle) - e(-r * busy)) / r)
    return (across + within) / busy


def needs(spans: Sequence[Period], per_instance: float, most: int) -> list[int]:
    """Instances each period needs: ceil(rate / per instance), one for any request, at most
    ``most`` (the replicas sized for the whole traffic: a trace's busy hour above its mean
    rate needs no more than the simulation, which replays the trace, found)."""
    return [
        min(most, max(1, math.ceil(p.rate / per_instance - 1e-9))) if p.requests else 0
        for p in spans
    ]


def cold_share(spans: Sequence[Period], need: Sequence[int], warm: int, start_s: float) -> float:
    """The share of requests meeting a cold start with ``warm`` instances kept, each period
    needing ``need`` (:func:`needs`; module doc)."""
    total = cold = 0.0
    for i, p in enumerate(spans):
        if not p.requests:
            continue
        kept = max(warm, 0 if p.after_idle else need[i - 1])
        starting = max(0, need[i] - kept)
        n = starting / need[i] * p.rate * start_s + (1.0 if kept == 0 else 0.0)
        if warm == 0:
            n += p.requests * p.gap_cold * (1 + p.rate * start_s)
        total += p.requests
        cold += min(p.requests, n)
    return cold / total


def scaling(platform: str) -> tuple[float | None, int]:
    """(seconds an idle instance above the minimum lives, the fewest min instances): Cloud Run
    scales to zero; GKE keeps at least one replica; a TPU VM stack's nodes never scale (None)."""
    return {"cloud-run": (CLOUD_RUN_IDLE_S, 0), "gke": (GKE_SCALE_DOWN_S, 1)}.get(
        platform, (None, 0)
    )


def min_instances(
    shape: Shape,
    rate: float,
    replicas: int,
    platform: str,
    start: dict[str, Any],
    price: tuple[float | None, str],
    targets: Sequence[tuple[str, str, float]],
    most: int,
) -> dict[str, Any]:
    """The table for each min-instance setting from the platform's fewest to what the busiest
    period needs (at most ``most``; the first with no cold start ends it: more only cost
    more), ``replicas`` serving ``rate`` as planned: its cost, the share of requests
    meeting a cold start, their added latency (``start``:
    :func:`serving.capacity.coldstart.cold_start`'s p50_s and p90_s) and which percentile
    ``targets`` (metric, stat, ms) still hold. A TPU VM stack has no row: its nodes never
    scale to zero, so no request meets a cold start in service."""
    idle_s, floor = scaling(platform)
    out: dict[str, Any] = {
        "shape": shape.as_dict(rate),
        "platform": platform,
        "idle_s": idle_s,
        "cold_start_s": {"p50": start["p50_s"], "p90": start["p90_s"]},
        "requests_per_second_per_instance": rate / replicas,
        "rows": [],
    }
    if idle_s is None:
        out["note"] = "a TPU VM stack's nodes never scale to zero: no cold start in service"
        return out
    spans = periods(shape, rate, idle_s)
    need = needs(spans, rate / replicas, replicas)
    usd, status = price
    # A cold start delays the first token and so the whole request, not the gaps between
    # tokens: ITL targets are not judged here.
    percentiles = [t for t in targets if t[0] in ("ttft", "e2e") and t[1] in QUANTILES]
    for warm in range(floor, max(floor, min(max(need), most)) + 1):
        share = cold_share(spans, need, warm, start["p50_s"])
        reached = [q for q, f in QUANTILES.items() if share > 1 - f + 1e-12]
        broken = [
            f"{m}_{q}" for m, q, ms in percentiles if q in reached and start["p50_s"] * 1000 > ms
        ]
        kept = cost(None if usd is None else warm * usd, status, None, None)
        out["rows"].append(
            {
                "min_instances": warm,
                "usd_per_hour": kept.usd_per_hour,
                "usd_per_month": kept.usd_per_month,
                "price_status": kept.status,
                "cold_share": share,
                "added_latency_s": {"p50": start["p50_s"], "p90": start["p90_s"]},
                "percentiles_reached": reached,
                "slo_broken": broken,
                "slo_holds": not broken if percentiles else None,
            }
        )
        if share == 0:
            break
    return out


def chosen(block: dict[str, Any]) -> int | None:
    """The fewest min instances whose row breaks no percentile target (None: no row, or
    none up to the ``most`` asked)."""
    return next((r["min_instances"] for r in block["rows"] if not r["slo_broken"]), None)


def for_stack(
    settings: Settings,
    shape: Shape,
    rate: float,
    replicas: int,
    targets: Sequence[tuple[str, str, float]],
    most: int,
) -> dict[str, Any]:
    """:func:`min_instances` for a stack whose ``replicas`` serve ``rate`` as planned, at its
    instance price and predicted cold start."""
    return min_instances(
        shape,
        rate,
        replicas,
        settings.deploy_platform,
        cold_start(settings),
        instance_price(settings),
        targets,
        most,
    )
