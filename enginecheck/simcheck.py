"""The pure parts of ``scripts/sim-check``: the scheduler simulation
(:mod:`serving.capacity.simulate`) against the real vLLM engine on this CPU (docs/sim-check.md).

Figures are milliseconds, per metric (``ttft``, ``itl``) and percentile (``p50``, ``p95``,
``p99``), from three sources per offered rate: the benchmark's records (the client's raw
samples, :mod:`bench.results.stats`), the server's own histograms (deltas over the cell,
quantiles interpolated inside a bucket as Prometheus' ``histogram_quantile`` does), and the
simulation. The targets compare the simulation with the benchmark: p95 within 20 %, p99 within
30 % at every rate the engine kept up with, and the saturation rate within 10 %.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.load.hotload import arrival_gap
from bench.load.server_metrics import Histogram, histogram_deltas, parse_histograms
from serving.capacity.perf import Coefficients, KvLayer, Shape, StepModel
from serving.config.inputs import JsonInputError, parse_json

METRICS = ("ttft", "itl")
PERCENTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
#: Largest relative error of the simulation against the benchmark, per percentile.
TARGETS = {"p95": 0.20, "p99": 0.30}
SATURATION_TARGET = 0.10
#: The client kept the offered schedule when it sent at least this share of its rate.
KEPT_SCHEDULE = 0.95
#: vLLM's waiting queue grew through a cell when its mean over the cell's last third exceeds
#: its mean over the first third by this share of the cell's requests (and by 2 at least): a
#: queue that only fluctuates comes back down, one past saturation climbs the whole cell.
QUEUE_GROWTH = 0.03
MAX_RATE = 1000.0
WAITING = "vllm:num_requests_waiting"
#: vLLM's histogram of tokens per engine iteration: its count is the number of engine steps
#: whose outputs the server processed (vllm/v1/metrics/loggers.py, one observation per step).
ITERATIONS = "vllm:iteration_tokens_total"

Figures = dict[str, dict[str, float | None]]


def parse_rates(text: str) -> tuple[float, ...]:
    """``--rates R1,R2,...``: ascending-free positive finite req/s, at most :data:`MAX_RATE`;
    ValueError naming the option otherwise."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"--rates: expected comma-separated numbers, got {text!r}") from None
    if not values or not all(math.isfinite(v) and 0 < v <= MAX_RATE for v in values):
        raise ValueError(
            f"--rates: expected request rates above 0 and at most {MAX_RATE:g} req/s, got {text!r}"
        )
    return values


def histogram_quantile(h: Histogram, q: float) -> float | None:
    """The ``q`` quantile of a histogram (seconds): linear inside the bucket that holds it, as
    Prometheus' ``histogram_quantile``; the highest finite bound when it falls in ``+Inf``;
    None for an empty histogram."""
    if h.count <= 0 or not h.buckets:
        return None
    rank = q * h.count
    lower, below = 0.0, 0.0
    for le, cumulative in h.buckets:
        if cumulative >= rank:
            if math.isinf(le):
                return lower
            inside = cumulative - below
            return lower + (le - lower) * ((rank - below) / inside if inside > 0 else 1.0)
        lower, below = le, cumulative
    return lower


def server_percentiles(before: str, after: str, model: str) -> Figures:
    """p50/p95/p99 (ms) of the server's TTFT and ITL histograms over what it served between two
    ``/metrics`` texts; None where a histogram is missing or empty."""
    deltas = histogram_deltas(
        parse_histograms(before, model_name=model), parse_histograms(after, model_name=model)
    )
    out: Figures = {}
    for metric in METRICS:
        h = deltas.get(metric)
        out[metric] = {}
        for name, q in PERCENTILES.items():
            value = histogram_quantile(h, q) if h is not None else None
            out[metric][name] = None if value is None else value * 1000.0
    return out


def measured_percentiles(cell: Mapping[str, Any]) -> Figures:
    """p50/p95/p99 (ms) of TTFT and ITL from a benchmark cell record."""
    keys = {"p50": "median", "p95": "p95", "p99": "p99"}
    return {m: {p: _number(cell.get(f"{keys[p]}_{m}_ms")) for p in PERCENTILES} for m in METRICS}


def simulated_percentiles(latency_ms: Mapping[str, Mapping[str, float]]) -> Figures:
    """p50/p95/p99 (ms) of TTFT and ITL from :attr:`SimResult.latency_ms`."""
    return {m: {p: _number(latency_ms[m].get(p)) for p in PERCENTILES} for m in METRICS}


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def waiting(text: str) -> float:
    """vLLM's waiting-queue gauge in a ``/metrics`` text, summed over engines (0 if absent)."""
    return sum(
        float(s.value)
        for family in text_string_to_metric_families(text)
        if family.name == WAITING
        for s in family.samples
        if s.name == WAITING
    )


def engine_steps(before: str, after: str, model: str) -> int | None:
    """The engine steps run between two ``/metrics`` texts (the count of
    :data:`ITERATIONS` for ``model``, summed over engines); None when the histogram is absent
    or went backwards (a restarted server)."""

    def count(text: str) -> float | None:
        values = [
            float(s.value)
            for family in text_string_to_metric_families(text)
            if family.name == ITERATIONS
            for s in family.samples
            if s.name == f"{ITERATIONS}_count" and s.labels.get("model_name") == model
        ]
        return sum(values) if values else None

    first, last = count(before), count(after)
    if first is None or last is None or last < first:
        return None
    return round(last - first)


def queue_grew(samples: Sequence[float], requests: int) -> bool:
    """Whether the waiting queue, sampled evenly through a cell, climbed through it."""
    third = len(samples) // 3
    if third == 0:
        return False
    first = sum(samples[:third]) / third
    last = sum(samples[-third:]) / third
    return last - first > max(2.0, QUEUE_GROWTH * requests)


def while_sending(
    samples: Sequence[tuple[float, float]], cell: Mapping[str, Any], requests: int
) -> list[float]:
    """The (epoch time, queue) samples taken while a cell sent: from its start to its last send,
    ``(requests - 1) / the rate it sent at`` later. After the last send the queue drains whether
    or not the engine kept up, so the drain says nothing of saturation."""
    start = dt.datetime.fromisoformat(cell["started_at"]).timestamp()
    achieved = _number(cell.get("achieved_request_rate"))
    if achieved:
        end = start + (requests - 1) / achieved + 1.0
    else:
        end = dt.datetime.fromisoformat(cell["finished_at"]).timestamp() + 1.0
    return [w for t, w in samples if start <= t <= end]


def scheduled_rate(rate: float, burstiness: float, seed: int, requests: int) -> float:
    """The rate the benchmark's seeded schedule offers over ``requests`` sends (one client
    process draws it so: :func:`bench.load.hotload.arrival_gap`), which a short cell's draw
    moves away from ``rate`` by several percent."""
    rng = random.Random(seed)
    span = sum(arrival_gap(rng, rate, burstiness) for _ in range(requests - 1))
    return (requests - 1) / span if span > 0 else rate


def measured_saturated(achieved: float | None, scheduled: float, queue: bool) -> bool:
    """Saturated: the client could not send at the schedule's rate (under
    :data:`KEPT_SCHEDULE` of it), or the server's waiting queue grew through the cell."""
    return achieved is None or achieved < KEPT_SCHEDULE * scheduled or queue


def saturation_measured(rows: Sequence[Mapping[str, Any]]) -> tuple[float | None, float | None]:
    """(highest Poisson rate the engine kept up with, lowest saturated Poisson rate above it):
    the measured saturation rate lies between them (None: the rates did not reach that side).
    Each rate is the one its cell's seeded schedule offered (``scheduled_rate``: what the
    engine was sent, several percent off the asked rate over 200 requests), else the asked."""

    def sent(r: Mapping[str, Any]) -> float:
        return float(r.get("scheduled_rate") or r["rate"])

    poisson = sorted((r for r in rows if r["burstiness"] == 1.0), key=sent)
    kept = [sent(r) for r in poisson if not r["saturated"]]
    low = max(kept) if kept else None
    high = next(
        (sent(r) for r in poisson if r["saturated"] and (low is None or sent(r) > low)),
        None,
    )
    return low, high


def saturation_within(low: float | None, high: float | None, simulated: float | None) -> bool:
    """The simulation's saturation rate within :data:`SATURATION_TARGET` of the measured
    bracket ``[low, high]`` (a side not measured bounds nothing); no measured side: False."""
    if simulated is None or (low is None and high is None):
        return False
    above = low is None or simulated >= low * (1 - SATURATION_TARGET)
    below = high is None or simulated <= high * (1 + SATURATION_TARGET)
    return above and below


def missed(measured: Figures, simulated: Figures) -> list[str]:
    """The targets the simulation misses against the benchmark, as ``ttft p95 +34%``."""
    out = []
    for metric in METRICS:
        for name, limit in TARGETS.items():
            m, s = measured[metric][name], simulated[metric][name]
            if m is None or s is None or m <= 0:
                out.append(f"{metric} {name} not measured")
                continue
            error = (s - m) / m
            if abs(error) > limit:
                out.append(f"{metric} {name} {error:+.0%}")
    return out


def row_misses(row: Mapping[str, Any], simulated_saturated: bool) -> list[str]:
    """One rate's missed targets: below saturation the percentile targets (and the simulation
    keeping up too). Past it none: the saturation rate's own target judges where each side
    saturates, on one rule each (a single 200-request replay near capacity is no verdict)."""
    if row["saturated"]:
        return []
    misses = missed(row["measured"], row["simulated"])
    if simulated_saturated:
        misses.append("the simulation saturated where the engine kept up")
    return misses


def scaled(model: StepModel, factor: float) -> StepModel:
    """The model with every time it spends on the engine's core multiplied by ``factor``:
    each efficiency divided by it, each constant and the API server's times multiplied. A
    step's cost is linear in all of them, so every step, and every closed form, scales by
    ``factor`` exactly (but a term whose efficiency is already 1, which stays): the fit at the
    far sides of its own held-out error."""
    if not (math.isfinite(factor) and 0.5 <= factor <= 2.0):
        raise ValueError(f"a speed factor must be in [0.5, 2], got {factor!r}")
    c = model.coefficients
    return replace(
        model,
        coefficients=Coefficients(
            bandwidth_efficiency=min(1.0, c.bandwidth_efficiency / factor),
            decode_compute_efficiency=min(1.0, c.decode_compute_efficiency / factor),
            step_overhead_s=c.step_overhead_s * factor,
            prefill_compute_efficiency=min(1.0, c.prefill_compute_efficiency / factor),
            prefill_overhead_s=c.prefill_overhead_s * factor,
        ),
        server_request_s=model.server_request_s * factor,
        server_prompt_token_s=model.server_prompt_token_s * factor,
    )


#: The rate repeated, as a share of the fitted model's closed-form capacity: among the Poisson
#: rates the engine kept up with, the one nearest it (docs/sim-check.md, "The engine against
#: itself").
REPEAT_AT = 0.85


def repeat_choice(rows: Sequence[Mapping[str, Any]], capacity: float) -> int | None:
    """The index of the row to run again with the same seed (the same arrivals): the Poisson
    rate kept up with nearest :data:`REPEAT_AT` times ``capacity`` (the lower on a tie); None
    when the engine kept up with none."""
    kept = [  # distances rounded: 0.57 and 1.13 are as near 0.85 (the lower is taken)
        (round(abs(float(r["rate"]) - REPEAT_AT * capacity), 9), float(r["rate"]), i)
        for i, r in enumerate(rows)
        if r["burstiness"] == 1.0 and not r["saturated"]
    ]
    return min(kept)[2] if kept else None


def repeat_report(first: Mapping[str, Any], again: Mapping[str, Any]) -> dict[str, Any]:
    """The engine against itself: one cell's measured figures (``first``) beside the same
    arrivals sent again (``again``), each percentile's difference as the targets measure a
    simulation's (relative to the first), and whether the engine met the targets against
    itself (None when a figure was not measured: not judged). A difference the engine has
    with itself is one no simulation of it can be judged closer than."""
    difference: dict[str, dict[str, float | None]] = {}
    for metric in METRICS:
        difference[metric] = {}
        for name in PERCENTILES:
            a, b = first["measured"][metric][name], again["measured"][metric][name]
            difference[metric][name] = None if not a or b is None else round((b - a) / a, 6)
    judged = [difference[m][name] for m in METRICS for name in TARGETS]
    within: bool | None = None
    if all(d is not None for d in judged):
        limits = [limit for _ in METRICS for limit in TARGETS.values()]
        held = all(abs(d or 0.0) <= limit for d, limit in zip(judged, limits, strict=True))
        within = held and not again["saturated"]
    return {
        "rate": first["rate"],
        "seed": first["seed"],
        "scheduled_rate": first.get("scheduled_rate"),
        "first": first["measured"],
        "again": again["measured"],
        "engine_steps": {"first": first.get("engine_steps"), "again": again.get("engine_steps")},
        "saturated_again": again["saturated"],
        "difference": difference,
        "within_targets": within,
    }


def repeat_line(repeat: Mapping[str, Any] | None, why: str | None = None) -> str:
    """One line for the table and the progress: how far the engine moved from itself."""
    if repeat is None:
        return f"the engine against itself: not run ({why or 'it kept up with no Poisson rate'})"
    parts = [
        f"{m.upper()} {name} {repeat['difference'][m][name]:+.0%}"
        if repeat["difference"][m][name] is not None
        else f"{m.upper()} {name} not measured"
        for m in METRICS
        for name in TARGETS
    ]
    if repeat["within_targets"] is None:
        verdict = "not judged: a figure was not measured"
    elif repeat["within_targets"]:
        verdict = "within the targets"
    else:
        verdict = "NOT within the targets: a miss of that size is not the simulation's alone"
    again = "; saturated the second time" if repeat["saturated_again"] else ""
    return (
        f"the engine against itself at {repeat['rate']:g} req/s (seed {repeat['seed']}, the "
        f"same arrivals sent again): {', '.join(parts)}{again}: {verdict}"
    )


def within_band(measured: Figures, low: Figures, high: Figures) -> bool:
    """Whether every measured p95 and p99 lies within its target of the range the simulation
    spans between the fit's faster and slower side (``low`` and ``high``): a miss the fit's
    own error explains, which a closer check needs a closer fit for."""
    for metric in METRICS:
        for name, limit in TARGETS.items():
            m, lo, hi = measured[metric][name], low[metric][name], high[metric][name]
            if m is None or lo is None or hi is None:
                return False
            if not min(lo, hi) * (1 - limit) <= m <= max(lo, hi) * (1 + limit):
                return False
    return True


#: The machine itself, read on the engine's core while the engine is idle (before the closed
#: loop, before every open-loop run and after the last): a fixed pure-Python loop timed
#: :data:`PROBE_REPEATS` times, its median. Nothing of vLLM's: how far the host's own speed
#: moved during the run (on a shared 2-core VM the slowest reading of one 10-minute run was
#: 1.65 times its fastest; docs/sim-check.md, "The machine itself").
PROBE_REPEATS = 30
PROBE_CODE = f"""
import json, time
out = []
for _ in range({PROBE_REPEATS}):
    t = time.perf_counter()
    s = 0
    for i in range(300_000):
        s += i * i
    out.append(time.perf_counter() - t)
print(json.dumps(out))
"""
PROBE_WHAT = (
    f"a fixed Python loop on the engine's core, the median of {PROBE_REPEATS}, read while "
    "the engine was idle"
)
#: What a repetition may read (s): 300,000 interpreted multiply-adds take milliseconds on any
#: CPU that runs vLLM; a reading outside is not a reading.
PROBE_MIN_S = 0.001
PROBE_MAX_S = 10.0


def probe_ms(stdout: str) -> float:
    """The probe's median in ms from what :data:`PROBE_CODE` prints: one JSON list of
    :data:`PROBE_REPEATS` durations in seconds, each a float in [:data:`PROBE_MIN_S`,
    :data:`PROBE_MAX_S`]; ValueError naming what is wrong otherwise."""
    text = stdout.strip()
    if len(text) > 64 * PROBE_REPEATS:
        raise ValueError(
            f"the machine probe printed {len(text)} characters, not its list: {text[:40]!r}..."
        )
    try:
        values = parse_json(text)  # the project's one JSON reader: finite numbers, bounded depth
    except JsonInputError as exc:
        raise ValueError(f"the machine probe printed no JSON list ({exc}): {text[:80]!r}") from None
    if not isinstance(values, list) or len(values) != PROBE_REPEATS:
        got = f"a list of {len(values)}" if isinstance(values, list) else "something else"
        raise ValueError(
            f"the machine probe printed {got}, not a list of {PROBE_REPEATS} durations: "
            f"{text[:40]!r}"
        )
    for i, v in enumerate(values):
        if not isinstance(v, float) or not (math.isfinite(v) and PROBE_MIN_S <= v <= PROBE_MAX_S):
            raise ValueError(
                f"the machine probe's duration {i} is {str(v)[:40]}: expected seconds, a "
                f"float in [{PROBE_MIN_S:g}, {PROBE_MAX_S:g}]"
            )
    return round(float(statistics.median(values)) * 1000.0, 3)


def machine_report(readings: Sequence[tuple[str, float | None]]) -> dict[str, Any]:
    """The machine's readings (``(before what, ms or None when the probe failed)``) and how
    far they moved: the slowest over the fastest (None under two readings)."""
    read = [ms for _, ms in readings if ms is not None and ms > 0]
    return {
        "probe": PROBE_WHAT,
        "readings": [{"before": what, "ms": ms} for what, ms in readings],
        "slowest_over_fastest": round(max(read) / min(read), 3) if len(read) >= 2 else None,
    }


def machine_line(machine: Mapping[str, Any] | None) -> str:
    """One line for the table and the progress: how far the machine itself moved."""
    read = [r["ms"] for r in (machine or {}).get("readings", ()) if r["ms"] is not None]
    if machine is None or len(read) < 2:
        return "the machine itself: fewer than two readings"
    return (
        f"the machine itself ({machine['probe']}, {len(read)} readings): {min(read):.1f} to "
        f"{max(read):.1f} ms, the slowest {machine['slowest_over_fastest']:.2f} times the fastest"
    )


def report(
    cpu: str,
    rows: Sequence[dict[str, Any]],
    simulated_rps: float | None,
    repeat: Mapping[str, Any] | None = None,
    repeat_not_run: str | None = None,
    machine: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON document: the CPU, the saturation rates (measured: the highest Poisson rate
    the engine kept up with), every rate's comparison, the engine against itself
    (:func:`repeat_report`; None when not run, ``repeat_not_run`` saying why it failed) and
    the machine itself (:func:`machine_report`)."""
    return {
        "cpu": cpu,
        "saturation_rps": {
            "measured": _rounded(saturation_measured(rows)[0]),
            "simulated": simulated_rps,
        },
        "rates": list(rows),
        "repeat": dict(repeat) if repeat is not None else None,
        "repeat_not_run": repeat_not_run,
        "machine": dict(machine) if machine is not None else None,
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def exit_status(doc: Mapping[str, Any]) -> int:
    """0 when every target held, 1 when one was missed."""
    low, high = saturation_measured(doc["rates"])
    held = saturation_within(low, high, doc["saturation_rps"]["simulated"])
    return 0 if held and all(r["within_target"] for r in doc["rates"]) else 1


def tiny_shape(
    text_config: Mapping[str, Any], weight_bytes: float, params: float, kv_dtype_bytes: int
) -> Shape:
    """What a step of the tiny Gemma 4 reads and computes, from its ``config.json`` text
    config and its weights: the stacks' 12B shape does not describe it."""
    c = text_config
    sliding = sum(1 for t in c["layer_types"] if t == "sliding_attention")
    full = len(c["layer_types"]) - sliding
    kv_sliding = 2 * c["num_key_value_heads"] * c["head_dim"] * kv_dtype_bytes
    shared = 1 if c.get("attention_k_eq_v") else 2
    kv_full = shared * c["num_global_key_value_heads"] * c["global_head_dim"] * kv_dtype_bytes
    return Shape(
        name="tiny Gemma 4 (engine-check)",
        weight_bytes=weight_bytes,
        params=params,
        kv_layers=(
            KvLayer(sliding, kv_sliding, c["sliding_window"]),
            KvLayer(full, kv_full, None),
        ),
    )
