"""The spread of a token gap (and of a first token) around its mean: measured, never assumed.

The step model prices a step by its batch (:mod:`serving.capacity.perf`), which gives each gap
between two tokens its mean. A real engine's gaps spread around that mean even where nothing
else shares the step: the API server streaming between steps, the host's scheduler, a Python
collection. On the CPU engine of ``scripts/sim-check`` a single stream's p95 gap is 1.7 to 1.9
times its mean (docs/sim-check.md).

A spread is the quantile function of a gap's multiplier, mean 1, at :data:`POINTS` evenly
spaced probabilities (``(j + 0.5) / POINTS``). It comes from a benchmark cell at concurrency 1
(no other request's prefill in any step: what the simulation models itself stays out of it):
the piecewise-linear quantile function through the cell's p50, p90, p95 and p99 over its mean,
extended past p99 by the p95-p99 slope, its lowest value chosen so the mean is 1. The
simulation multiplies each gap by it (:mod:`serving.capacity.simulate`); a mean of 1 leaves
every mean, and so every closed form, as it was. Without a measured spread there is none: the
tail then comes only from the steps the simulation builds, and the docs say so.

A first token spreads the same way: the same cell's TTFT percentiles over its mean (``metric``
``"ttft"`` in :func:`from_cells`). Alone, a request's first token is its API-server time and
its prompt's steps, nothing the simulation builds itself; on the sim-check engine on an Intel
Xeon its p95 was 1.9 times its mean (docs/sim-check.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

POINTS = 100
#: What a spread is measured on: a token gap, or a first token.
METRICS = ("itl", "ttft")
#: The statistics of a benchmark cell (``bench/results/stats.py``) a spread is built from: its
#: mean, then the percentiles at 0.5, 0.9, 0.95 and 0.99.
_STATS = ("mean", "median", "p90", "p95", "p99")
#: A multiplier above this is no spread but a stall: refused.
MAX_MULTIPLIER = 100.0


def check(spread: Sequence[float], name: str = "itl_spread") -> tuple[float, ...]:
    """A spread as the model holds it: empty (none), or :data:`POINTS` finite multipliers in
    [0, :data:`MAX_MULTIPLIER`], non-decreasing, mean 1 (within 1e-6); ValueError naming the
    rule (and ``name``, the field) otherwise."""
    values = tuple(spread)
    if not values:
        return values
    if len(values) != POINTS:
        raise ValueError(f"{name} must hold {POINTS} multipliers, got {len(values)}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ValueError(f"{name}: multipliers must be finite numbers, got {v!r}")
        if not 0.0 <= v <= MAX_MULTIPLIER:
            raise ValueError(f"{name}: multipliers must be in [0, {MAX_MULTIPLIER:g}], got {v}")
    if any(b < a for a, b in itertools.pairwise(values)):
        raise ValueError(f"{name}: multipliers must be non-decreasing (a quantile function)")
    mean = sum(values) / len(values)
    if abs(mean - 1.0) > 1e-6:
        raise ValueError(f"{name}: multipliers must have mean 1, got {mean:.6f}")
    return tuple(float(v) for v in values)


def from_percentiles(
    mean: float, p50: float, p90: float, p95: float, p99: float
) -> tuple[float, ...]:
    """The spread of gaps with these mean and percentiles (ms or s, one unit); ValueError when
    they are not a distribution (not positive, not ordered, or a mean no distribution of
    non-negative gaps with those percentiles has)."""
    knots = (p50, p90, p95, p99)
    if not all(isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in (mean, *knots)):
        raise ValueError("a spread needs a positive mean and positive p50, p90, p95 and p99")
    if any(b < a for a, b in itertools.pairwise(knots)):
        raise ValueError("a spread needs p50 <= p90 <= p95 <= p99")
    r50, r90, r95, r99 = (v / mean for v in knots)
    top = r99 + (r99 - r95) / 4.0  # the p95-p99 slope carried to q = 1
    upper = [(0.5, r50), (0.9, r90), (0.95, r95), (0.99, r99), (1.0, top)]
    above = sum((q1 - q0) * (a + b) / 2.0 for (q0, a), (q1, b) in itertools.pairwise(upper))
    bottom = 2.0 * (1.0 - above) / 0.5 - r50  # the mean of the lower half makes the mean 1
    if bottom < 0.0 or bottom > r50:
        raise ValueError(
            f"a mean of {mean:g} does not fit p50 {p50:g} to p99 {p99:g}: no distribution of "
            "non-negative gaps has them"
        )
    knots_q = [(0.0, bottom), *upper]

    def at(q: float) -> float:
        for (q0, a), (q1, b) in itertools.pairwise(knots_q):
            if q <= q1:
                return a + (b - a) * (q - q0) / (q1 - q0)
        return top

    values = [at((j + 0.5) / POINTS) for j in range(POINTS)]
    scale = sum(values) / POINTS  # midpoints of a piecewise-linear function: exact but for
    return check([v / scale for v in values])  # the segment ends falling between two points


def from_cells(cells: Iterable[Mapping[str, Any]], metric: str = "itl") -> tuple[float, ...]:
    """The spread of ``metric`` (:data:`METRICS`) measured by a benchmark run: from its
    closed-loop cells at concurrency 1 (the one with the most tokens when several: output
    tokens, then prompt tokens), each cell's ``mean_<metric>_ms``, ``median_<metric>_ms``,
    ``p90_<metric>_ms``, ``p95_<metric>_ms`` and ``p99_<metric>_ms``; empty when no such cell
    was measured or its figures are not a distribution."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    keys = [f"{stat}_{metric}_ms" for stat in _STATS]
    best: tuple[tuple[float, float], tuple[float, ...]] | None = None
    for cell in cells:
        if cell.get("status") != "ok" or cell.get("concurrency") != 1:
            continue
        if cell.get("request_rate") is not None:
            continue  # an open-loop cell: other requests' prefills share its steps
        figures = [cell.get(key) for key in keys]
        tokens, prompt = _count(cell.get("total_output_tokens")), _count(cell.get("prompt_tokens"))
        if tokens is None:
            continue
        size = (tokens, prompt or 0.0)
        try:
            spread = from_percentiles(*figures)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if best is None or size > best[0]:
            best = (size, spread)
    return best[1] if best else ()


def at(spread: Sequence[float], q: float) -> float:
    """The multiplier at probability ``q`` read between the spread's points (each at
    ``(j + 0.5) / POINTS``), for showing: the cell's own p50, p95 and p99 over its mean, within
    the points' spacing (1 without a spread)."""
    if not spread:
        return 1.0
    pos = min(len(spread) - 1.0, max(0.0, q * len(spread) - 0.5))
    lo = math.floor(pos)
    hi = min(lo + 1, len(spread) - 1)
    return float(spread[lo] + (pos - lo) * (spread[hi] - spread[lo]))


def _count(value: Any) -> float | None:
    """A cell's token count as a number, or None (absent, a bool, not finite)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
