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

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "HISTOGRAMS",
    "Histogram",
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
class Histogram:
    """One cumulative histogram summed over the label sets kept, or the difference of two."""

    sum: float
    count: float
    buckets: tuple[tuple[float, float], ...]
    """(upper bound ``le``, cumulative count), ascending, ``+Inf`` last."""

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None


def parse_histograms(text: str, *, model_name: str | None = None) -> dict[str, Histogram]:
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
        key: Histogram(sums[key], counts[key], tuple(sorted(buckets[key].items()))) for key in seen
    }


def histogram_deltas(
    before: Mapping[str, Histogram], after: Mapping[str, Histogram]
) -> dict[str, Histogram | None]:
    """Per metric, ``after - before``; None where either scrape lacks it, where a series went
    down (the server restarted between the scrapes: its counters began again) or is not a
    finite number."""
    out: dict[str, Histogram | None] = {}
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
        out[key] = Histogram(total, count, deltas)
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
