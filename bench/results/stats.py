"""Percentiles and per-cell summaries, named as ``vllm bench serve`` names its results.

Percentiles interpolate linearly between closest ranks (Hyndman and Fan's type 7, numpy's
default): the p95 of 20 values is ``x[18] + 0.05 * (x[19] - x[18])``, never ``x[19]``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.results.record import ERROR_KINDS, RequestResult

__all__ = [
    "PERCENTILES",
    "GoodputSlo",
    "Summary",
    "percentile",
    "summarize",
]

PERCENTILES = (90, 95, 99)
"""The percentiles every latency metric reports (plus mean, median and std)."""


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by linear interpolation between closest ranks (type 7).

    Raises ValueError for an empty sequence or ``p`` outside [0, 100].
    """
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"percentile must be within [0, 100], got {p}")
    ordered = sorted(values)
    h = (len(ordered) - 1) * p / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


@dataclass(frozen=True)
class GoodputSlo:
    """Per-request objectives for goodput: a request counts when it meets every one set."""

    ttft_ms: float | None = None
    e2el_ms: float | None = None
    tpot_ms: float | None = None

    def met_by(self, result: RequestResult) -> bool:
        if not result.ok:
            return False
        checks = (
            (self.ttft_ms, result.ttft_s),
            (self.e2el_ms, result.e2e_s),
            (self.tpot_ms, result.tpot_s),
        )
        for limit_ms, value_s in checks:
            if limit_ms is None:
                continue
            if value_s is None or value_s * 1000.0 > limit_ms:
                return False
        return True

    def as_dict(self) -> dict[str, float]:
        out = {"ttft": self.ttft_ms, "e2el": self.e2el_ms, "tpot": self.tpot_ms}
        return {k: v for k, v in out.items() if v is not None}


Summary = dict[str, Any]
"""A cell's figures: JSON-ready, keys as in :func:`summarize`."""


def _describe(name: str, values_s: Sequence[float], out: Summary) -> None:
    values = [v * 1000.0 for v in values_s]
    if not values:
        for stat in ("mean", "median", "std", *(f"p{p}" for p in PERCENTILES)):
            out[f"{stat}_{name}_ms"] = None
        return
    out[f"mean_{name}_ms"] = statistics.fmean(values)
    out[f"median_{name}_ms"] = percentile(values, 50)
    out[f"std_{name}_ms"] = statistics.pstdev(values) if len(values) > 1 else 0.0
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = percentile(values, p)


def summarize(
    results: Iterable[RequestResult],
    duration_s: float,
    *,
    goodput_slo: GoodputSlo | None = None,
) -> Summary:
    """Figures for one cell from its requests and its duration (first send to last answer), named
    as ``vllm bench serve`` names them (docs/benchmark-method.md lists them). Latencies are over
    successful requests; token counts come from the server's usage, never from counting chunks."""
    results = list(results)
    ok = [r for r in results if r.ok]
    errors = dict.fromkeys(ERROR_KINDS, 0)
    for r in results:
        if r.error_kind is not None:
            errors[r.error_kind] += 1
    out: Summary = {
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "success_rate": (len(ok) / len(results)) if results else None,
        "errors": errors,
        "duration": duration_s,
    }
    input_tokens = sum(r.prompt_tokens or 0 for r in ok)
    output_tokens = sum(r.output_tokens or 0 for r in ok)
    out["total_input_tokens"] = input_tokens
    out["total_output_tokens"] = output_tokens
    rate = (lambda n: n / duration_s) if duration_s > 0 else (lambda n: None)
    out["request_throughput"] = rate(len(ok))
    out["output_throughput"] = rate(output_tokens)
    out["total_token_throughput"] = rate(input_tokens + output_tokens)
    if goodput_slo is not None:
        out["request_goodput"] = rate(sum(1 for r in ok if goodput_slo.met_by(r)))
        out["goodput_slo"] = goodput_slo.as_dict()
    else:
        out["request_goodput"] = None
        out["goodput_slo"] = None
    _describe("ttft", [r.ttft_s for r in ok if r.ttft_s is not None], out)
    _describe("tpot", [r.tpot_s for r in ok if r.tpot_s is not None], out)
    _describe("itl", [itl for r in ok for itl in r.itls_s], out)
    _describe("e2el", [r.e2e_s for r in ok], out)
    return out
