"""vLLM's ``/metrics``: fetch it (capped), parse it with prometheus-client's text parser,
summarise it, compute spec-decode acceptance. Values are summed over label sets unless
``model_name`` keeps only that model's samples."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from .client import request_capped
from .errors import status_line
from .limits import MAX_ECHO_CHARS, MAX_METRICS_BYTES
from .redact import redact


class MetricsParseError(ValueError):
    """The text is not Prometheus exposition format, carries no vLLM metrics, or ``/metrics``
    did not answer 200."""


@dataclass(frozen=True)
class SpecDecodeCounters:
    """Cumulative ``vllm:spec_decode_*`` counters."""

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    accepted_per_position: tuple[float, ...]
    """Accepted tokens at draft position 0, 1, ... (``position`` label)."""


@dataclass(frozen=True)
class SpecDecodeAcceptance:
    """Speculative-decoding acceptance over a window (deltas of two snapshots)."""

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    acceptance_rate: float
    """accepted / draft tokens."""
    mean_acceptance_length: float
    """1 + accepted / drafts: tokens produced per verification step."""
    acceptance_by_position: tuple[float, ...]
    """accepted at position i / drafts."""

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "acceptance_by_position": list(self.acceptance_by_position)}


@dataclass(frozen=True)
class MetricsSnapshot:
    """The figures the health check reports from one scrape of ``/metrics``."""

    num_requests_running: float | None
    num_requests_waiting: float | None
    kv_cache_usage: float | None
    """Fraction 0..1 (``vllm:kv_cache_usage_perc``, or the older ``vllm:gpu_cache_usage_perc``)."""
    prompt_tokens_total: float | None
    generation_tokens_total: float | None
    ttft_sum_s: float | None
    ttft_count: float | None
    e2e_sum_s: float | None
    e2e_count: float | None
    spec_decode: SpecDecodeCounters | None = None
    raw: dict[str, float] = field(default_factory=dict, repr=False)
    """Every sample summed by sample name (e.g. ``vllm:prompt_tokens_total``)."""

    @property
    def mean_ttft_s(self) -> float | None:
        """Mean time to first token since start (histogram sum / count), if any request ran."""
        if not self.ttft_count or self.ttft_sum_s is None:
            return None
        return self.ttft_sum_s / self.ttft_count

    @property
    def mean_e2e_s(self) -> float | None:
        """Mean end-to-end request latency since start."""
        if not self.e2e_count or self.e2e_sum_s is None:
            return None
        return self.e2e_sum_s / self.e2e_count

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary, with spec-decode acceptance since start when present."""
        out: dict[str, Any] = {
            "num_requests_running": self.num_requests_running,
            "num_requests_waiting": self.num_requests_waiting,
            "kv_cache_usage": self.kv_cache_usage,
            "prompt_tokens_total": self.prompt_tokens_total,
            "generation_tokens_total": self.generation_tokens_total,
            "mean_ttft_s": self.mean_ttft_s,
            "mean_e2e_s": self.mean_e2e_s,
        }
        acceptance = spec_decode_acceptance(None, self)
        out["spec_decode"] = acceptance.as_dict() if acceptance is not None else None
        return out


_PREFIX = "vllm:"


def parse_metrics(text: str, *, model_name: str | None = None) -> MetricsSnapshot:
    """Parse vLLM's ``/metrics`` text. Raises :class:`MetricsParseError`."""
    sums: dict[str, float] = defaultdict(float)
    per_pos: dict[int, float] = defaultdict(float)
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsParseError(
            f"not Prometheus text format: {redact(exc, limit=MAX_ECHO_CHARS)}"
        ) from exc
    for family in families:
        for sample in family.samples:
            if not sample.name.startswith(_PREFIX):
                continue
            if model_name is not None and sample.labels.get("model_name", model_name) != model_name:
                continue
            sums[sample.name] += float(sample.value)
            if sample.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
                try:
                    per_pos[int(sample.labels["position"])] += float(sample.value)
                except (KeyError, ValueError) as exc:
                    raise MetricsParseError(f"bad position label on {sample.name}") from exc
    if not sums:
        if model_name is not None and any(
            s.name.startswith(_PREFIX) for f in families for s in f.samples
        ):
            raise MetricsParseError(f"no vllm: metrics with model_name={model_name!r}")
        raise MetricsParseError("no vllm: metrics found (is this a vLLM server?)")

    def get(name: str) -> float | None:
        return sums.get(name)

    kv = get("vllm:kv_cache_usage_perc")
    if kv is None:
        kv = get("vllm:gpu_cache_usage_perc")
    spec: SpecDecodeCounters | None = None
    if "vllm:spec_decode_num_drafts_total" in sums:
        positions = range(max(per_pos) + 1) if per_pos else range(0)
        spec = SpecDecodeCounters(
            num_drafts=sums["vllm:spec_decode_num_drafts_total"],
            num_draft_tokens=sums.get("vllm:spec_decode_num_draft_tokens_total", 0.0),
            num_accepted_tokens=sums.get("vllm:spec_decode_num_accepted_tokens_total", 0.0),
            accepted_per_position=tuple(per_pos.get(p, 0.0) for p in positions),
        )
    return MetricsSnapshot(
        num_requests_running=get("vllm:num_requests_running"),
        num_requests_waiting=get("vllm:num_requests_waiting"),
        kv_cache_usage=kv,
        prompt_tokens_total=get("vllm:prompt_tokens_total"),
        generation_tokens_total=get("vllm:generation_tokens_total"),
        ttft_sum_s=get("vllm:time_to_first_token_seconds_sum"),
        ttft_count=get("vllm:time_to_first_token_seconds_count"),
        e2e_sum_s=get("vllm:e2e_request_latency_seconds_sum"),
        e2e_count=get("vllm:e2e_request_latency_seconds_count"),
        spec_decode=spec,
        raw=dict(sums),
    )


def _counters(x: MetricsSnapshot | SpecDecodeCounters | None) -> SpecDecodeCounters | None:
    return x.spec_decode if isinstance(x, MetricsSnapshot) else x


def spec_decode_acceptance(
    before: MetricsSnapshot | SpecDecodeCounters | None,
    after: MetricsSnapshot | SpecDecodeCounters,
) -> SpecDecodeAcceptance | None:
    """Acceptance over the window between two snapshots (``before=None``: since start).

    Returns None when speculative decoding is off (no counters) or no draft was made in the
    window (rates would be 0/0).
    """
    end = _counters(after)
    if end is None:
        return None
    start = _counters(before) or SpecDecodeCounters(0.0, 0.0, 0.0, ())
    drafts = end.num_drafts - start.num_drafts
    draft_tokens = end.num_draft_tokens - start.num_draft_tokens
    accepted = end.num_accepted_tokens - start.num_accepted_tokens
    if drafts <= 0 or draft_tokens <= 0:
        return None
    n = len(end.accepted_per_position)
    prior = start.accepted_per_position + (0.0,) * max(0, n - len(start.accepted_per_position))
    by_pos = tuple((end.accepted_per_position[i] - prior[i]) / drafts for i in range(n))
    return SpecDecodeAcceptance(
        num_drafts=drafts,
        num_draft_tokens=draft_tokens,
        num_accepted_tokens=accepted,
        acceptance_rate=accepted / draft_tokens,
        mean_acceptance_length=1.0 + accepted / drafts,
        acceptance_by_position=by_pos,
    )


async def fetch_metrics(
    client: httpx.AsyncClient,
    *,
    model_name: str | None = None,
    max_bytes: int = MAX_METRICS_BYTES,
    timeout: float | None = None,
) -> MetricsSnapshot:
    """``GET /metrics`` (at most ``max_bytes`` decoded) parsed by :func:`parse_metrics`.

    Raises :class:`MetricsParseError` (not 200, not parsable, no vLLM metrics),
    :class:`~endpoint.client.LimitExceeded`, or httpx's transport errors.
    """
    reply = await request_capped(
        client, "GET", "/metrics", max_bytes=max_bytes, timeout=timeout, what="/metrics"
    )
    if reply.status != 200:
        raise MetricsParseError(f"/metrics answered {status_line(reply.status, reply.text)}")
    return parse_metrics(reply.text, model_name=model_name)
