"""A cell's figures from its measured window: the client's view, the server's, and the gap.

:func:`window_figures` adds to :func:`bench.results.stats.summarize`'s fields the coalesced
tokens, the server's own means over the window from its ``/metrics`` histograms and the
client's share of each (``(client mean - server mean) / client mean``), requests in the server
by Little's law, the client's own limits (event-loop lag, requests in flight, ramp, workers),
and ``client_limited`` with its ``warnings``: the client's share of TTFT or ITL over
:attr:`ClientLimits.max_client_share` *and* a gap over :attr:`ClientLimits.min_client_gap_ms`
(a few milliseconds on a fast server are not what limits a cell), a p99 loop lag over
:attr:`ClientLimits.max_loop_lag_ms`, or fewer requests in flight or sent than asked. Such a
cell's figures are the client's, not the server's.

Against a remote endpoint the "client share" also holds the network (a round trip or two of
TTFT, nothing of ITL): what users feel too, but not the server's.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from bench.load.hotload import WindowLoad
from bench.load.server_metrics import (
    HISTOGRAMS,
    ServerHistogramsError,
    client_share,
    histogram_deltas,
    parse_histograms,
)

__all__ = ["ClientLimits", "window_figures"]


@dataclass(frozen=True)
class ClientLimits:
    """When a cell's figures are the client's rather than the server's."""

    max_client_share: float = 0.10
    """Client share of mean TTFT or ITL above which a cell is client-limited (with
    :attr:`min_client_gap_ms`)."""
    min_client_gap_ms: float = 10.0
    """The client's figure must also exceed the server's by more than this, in milliseconds:
    a share over the limit made of a few milliseconds on a fast server does not mark a cell."""
    max_loop_lag_ms: float = 10.0
    """p99 of the event loop's lag above which a cell is client-limited."""
    min_in_flight_ratio: float = 0.95
    """Closed loop: mean requests in flight at least this x the concurrency asked for; open
    loop: requests sent at at least this x the offered rate."""

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def _mean_ms(values: list[float]) -> float | None:
    return statistics.fmean(values) * 1000.0 if values else None


def _step_mean_ms(results: list[Any]) -> float | None:
    span = 0.0
    steps = 0
    for r in results:
        chunks = getattr(r, "content_chunks", 0)
        if chunks > 1:
            span += sum(r.itls_s)
            steps += chunks - 1
    if steps:
        return span / steps * 1000.0
    return _mean_ms([x for r in results for x in r.itls_s])


def window_figures(
    load: WindowLoad,
    *,
    concurrency: int,
    model_name: str | None,
    limits: ClientLimits | None = None,
) -> dict[str, Any]:
    """The fields described in the module docstring, JSON-ready."""
    limits = limits or ClientLimits()
    ok = [r for r in load.results if r.ok]
    out: dict[str, Any] = {}
    output_tokens = sum(r.output_tokens or 0 for r in ok)
    coalesced = sum(getattr(r, "coalesced_tokens", 0) for r in ok)
    out["coalesced_tokens"] = coalesced
    out["coalesced_share"] = coalesced / output_tokens if output_tokens else None
    client_means = {
        "ttft": _mean_ms([r.ttft_s for r in ok if r.ttft_s is not None]),
        # Per engine step, as vLLM 0.27.1 observes `vllm:inter_token_latency_seconds` (one
        # sample per step and request, vllm/v1/metrics/stats.py): the first-to-last token time
        # over the gaps between content chunks. Per token it would differ by the tokens a step
        # carries (speculative decoding), which is not the client's doing.
        "itl": _step_mean_ms(ok),
        "e2el": _mean_ms([r.e2e_s for r in ok]),
    }
    deltas: dict[str, Any] = dict.fromkeys(HISTOGRAMS)
    window_s: float | None = None
    if load.metrics_before is not None and load.metrics_after is not None:
        try:
            before = parse_histograms(load.metrics_before[1], model_name=model_name)
            after = parse_histograms(load.metrics_after[1], model_name=model_name)
            deltas = histogram_deltas(before, after)
            window_s = load.metrics_after[0] - load.metrics_before[0]
        except ServerHistogramsError:
            pass
    for key in HISTOGRAMS:
        delta = deltas.get(key)
        server_ms = delta.mean * 1000.0 if delta is not None and delta.mean is not None else None
        out[f"server_mean_{key}_ms"] = server_ms
        out[f"server_{key}_count"] = delta.count if delta is not None else None
        out[f"client_mean_{key}_ms"] = client_means[key]
        out[f"client_share_{key}"] = client_share(client_means[key], server_ms)
    e2e = deltas.get("e2el")
    out["server_in_flight"] = (
        e2e.sum / window_s if e2e is not None and window_s is not None and window_s > 0 else None
    )
    out.update(load.monitor.summary())
    out["ramp_s"] = load.ramp_s
    out["untimed_requests"] = load.untimed
    out["workers"] = load.workers
    sent = len(load.results) + load.untimed
    out["client_cpu_ms_per_request"] = load.cpu_s * 1000.0 / sent if sent else None

    warnings: list[str] = []
    for key, name in (("ttft", "TTFT"), ("itl", "ITL")):
        share = out[f"client_share_{key}"]
        if share is None:
            continue
        gap_ms = out[f"client_mean_{key}_ms"] - out[f"server_mean_{key}_ms"]
        if share > limits.max_client_share and gap_ms > limits.min_client_gap_ms:
            warnings.append(
                f"the client's share of mean {name} is {share:.0%}, {gap_ms:.1f} ms (client "
                f"{out[f'client_mean_{key}_ms']:.1f} ms, server "
                f"{out[f'server_mean_{key}_ms']:.1f} ms; limits {limits.max_client_share:.0%} "
                f"and {limits.min_client_gap_ms:g} ms)"
            )
    lag = out.get("p99_loop_lag_ms")
    if lag is not None and lag > limits.max_loop_lag_ms:
        warnings.append(
            f"the client's event loop lagged {lag:.1f} ms at p99 (max "
            f"{out['max_loop_lag_ms']:.1f} ms; limit {limits.max_loop_lag_ms:g} ms): responses "
            "waited for the client"
        )
    if load.offered_rate is None:
        # The client's own count decides: the server's Little's-law figure misses requests
        # still unfinished when the window ends, so it is shown only as information.
        kept = out.get("mean_in_flight")
        if kept is not None and kept < limits.min_in_flight_ratio * concurrency:
            server_in_flight = out["server_in_flight"]
            seen = (
                f" (the server's Little's-law figure: {server_in_flight:.2f})"
                if server_in_flight is not None
                else ""
            )
            warnings.append(
                f"the client kept {kept:.2f} requests in flight on average, not the "
                f"{concurrency} asked for{seen}"
            )
    else:
        achieved = load.achieved_rate
        if achieved is not None and achieved < limits.min_in_flight_ratio * load.offered_rate:
            warnings.append(
                f"requests were sent at {achieved:.2f}/s, not the {load.offered_rate:g}/s offered"
            )
    out["warnings"] = warnings
    out["client_limited"] = bool(warnings)
    return out
