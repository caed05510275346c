"""Compatibility: reading vLLM's ``/metrics`` lives in :mod:`endpoint.metrics`."""

from endpoint.metrics import (
    MetricsParseError,
    MetricsSnapshot,
    SpecDecodeAcceptance,
    SpecDecodeCounters,
    parse_metrics,
    spec_decode_acceptance,
)

__all__ = [
    "MetricsParseError",
    "MetricsSnapshot",
    "SpecDecodeAcceptance",
    "SpecDecodeCounters",
    "parse_metrics",
    "spec_decode_acceptance",
]
