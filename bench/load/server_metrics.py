"""The server's own latency histograms, as deltas over a cell, and the client's share.

vLLM's ``vllm:time_to_first_token_seconds`` (arrival to first token),
``vllm:inter_token_latency_seconds`` (one observation per decode step) and
``vllm:e2e_request_latency_seconds`` are cumulative; two scrapes around a cell's measured
window give exactly the requests that finished in between (``after - before``, summed over
engines). Means are exact; bucket quantiles are too coarse (0.1 then 0.25 s) for shares. The
client's share of a latency is ``(client mean - server mean) / client mean``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "HISTOGRAMS",
    "HistogramDelta",
    "HistogramSnapshot",
    "ServerHistogramsError",
    "client_share",
    "histogram_deltas",
    "parse_histograms",
]

HISTOGRAMS: Mapping[str, str] = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2el": "vllm:e2e_request_latency_seconds",
}
"""Our metric name -> vLLM's histogram."""


class ServerHistogramsError(ValueError):
    """The text is not Prometheus exposition format."""


@dataclass(frozen=True)
class HistogramSnapshot:
    """One cumulative histogram, summed over the label sets kept."""

    sum: float
    count: float
    buckets: tuple[tuple[float, float], ...]
    """(upper bound ``le``, cumulative count), ascending, ``+Inf`` last."""


@dataclass(frozen=True)
class HistogramDelta:
    """A histogram over a window: ``after - before``."""

    sum: float
    count: float
    buckets: tuple[tuple[float, float], ...]

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        """Prometheus's ``histogram_quantile``: linear within the bucket holding rank
        ``q x count`` (the lower bound of the first bucket is 0); None without observations or
        when the rank falls in the ``+Inf`` bucket beyond the last finite bound."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be within [0, 1], got {q}")
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.count
        lower_bound, lower_count = 0.0, 0.0
        for bound, cumulative in self.buckets:
            if cumulative >= rank:
                if math.isinf(bound):
                    return None
                inside = cumulative - lower_count
                if inside <= 0:
                    return bound
                return lower_bound + (bound - lower_bound) * (rank - lower_count) / inside
            lower_bound, lower_count = bound, cumulative
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "sum": self.sum,
            "count": self.count,
            "mean": self.mean,
            "buckets": [["+Inf" if math.isinf(b) else b, c] for b, c in self.buckets],
        }


def parse_histograms(text: str, *, model_name: str | None = None) -> dict[str, HistogramSnapshot]:
    """The histograms of :data:`HISTOGRAMS` found in ``text`` (keys ``ttft``, ``itl``,
    ``e2el``; absent ones are left out), summed over label sets; with ``model_name`` only the
    samples labelled with it. Raises :class:`ServerHistogramsError` for unparsable text."""
    wanted = {name: key for key, name in HISTOGRAMS.items()}
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, float] = defaultdict(float)
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    seen: set[str] = set()
    try:
        for family in text_string_to_metric_families(text):
            key = wanted.get(family.name)
            if key is None:
                continue
            for sample in family.samples:
                labels = sample.labels
                if model_name is not None and labels.get("model_name") != model_name:
                    continue
                if sample.name == family.name + "_sum":
                    sums[key] += float(sample.value)
                    seen.add(key)
                elif sample.name == family.name + "_count":
                    counts[key] += float(sample.value)
                    seen.add(key)
                elif sample.name == family.name + "_bucket":
                    le = float(labels["le"])
                    buckets[key][le] += float(sample.value)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ServerHistogramsError(f"/metrics is not Prometheus text: {exc}") from exc
    return {
        key: HistogramSnapshot(sums[key], counts[key], tuple(sorted(buckets[key].items())))
        for key in seen
    }


def histogram_deltas(
    before: Mapping[str, HistogramSnapshot], after: Mapping[str, HistogramSnapshot]
) -> dict[str, HistogramDelta | None]:
    """Per metric, ``after - before``; None where either scrape lacks it, where a series went
    down (the server restarted between the scrapes: its counters began again) or is not a
    finite number."""
    out: dict[str, HistogramDelta | None] = {}
    for key in HISTOGRAMS:
        b, a = before.get(key), after.get(key)
        if b is None or a is None:
            out[key] = None
            continue
        count, total = a.count - b.count, a.sum - b.sum
        before_buckets = dict(b.buckets)
        deltas = tuple((le, c - before_buckets.get(le, 0.0)) for le, c in a.buckets)
        values = [count, total, *(c for _, c in deltas)]
        if not all(math.isfinite(v) and v >= 0 for v in values):
            # A restart (counters went down) or a server exporting NaN/inf: no figure.
            out[key] = None
            continue
        out[key] = HistogramDelta(total, count, deltas)
    return out


def client_share(client_mean: float | None, server_mean: float | None) -> float | None:
    """``(client - server) / client``, in [0, 1]: the fraction of the client's figure that the
    server did not measure; None when either is missing or the client's is not positive.

    A server figure above the client's (the server's histogram counts steps the client saw
    arrive together, or rounding in a short window) leaves nothing to the client: 0, never a
    negative share."""
    if client_mean is None or server_mean is None or client_mean <= 0:
        return None
    return min(1.0, max(0.0, (client_mean - server_mean) / client_mean))
