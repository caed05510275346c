"""Performance model of one vLLM instance: latency, throughput and cost before deploying.

Pure (no Pulumi, no I/O): the capacity planner, the preview, the benchmark report and the
autoscaling bounds all call it. The model is a step model, the kind the best published
predictors use (BLIS: roofline terms times learned coefficients plus constants, ~7-15 % median
error once fitted; see docs/performance-model.md for the sources and the checks):

- **A decode step** reads the weights once and, for every running sequence, its KV cache
  (Gemma 4's sliding-window layers up to their window, the global layers the whole context), and
  computes ``2 x parameters`` FLOPs per token it verifies::

      step(B, ctx) = bytes(B, ctx) / (eb x bandwidth) + flops(B) / (ec x peak) + c_step

  ``eb`` (bandwidth efficiency), ``ec`` (decode compute efficiency) and ``c_step`` (a constant per
  step: scheduler, sampling, kernel launches) are what a calibration fits. The two terms are
  added, not maxed: kernels overlap memory and compute only in part, and a sum is linear in the
  coefficients, so three cells fit it by least squares.
- **A prefill** of ``P`` prompt tokens computes ``2 x parameters x P`` FLOPs at efficiency
  ``ep``, rides in ``ceil(P / max_num_batched_tokens)`` steps with the running sequences, plus a
  constant ``c_prefill`` (tokenising, scheduling, the first sampling).
- **Speculative decoding** (MTP) verifies ``1 + k`` tokens per sequence and step, reads the
  drafter ``k`` times, and advances each sequence by the mean accepted length ``L`` (vLLM's
  ``mean_acceptance_length``, the bonus token included): ITL per token is ``step / L``.

From these: TTFT, ITL, end-to-end latency, tokens/s and requests/s at a concurrency (closed
loop) or at an arrival rate (open loop: the in-flight count solves Little's law
``N = rate x e2e(N)``, and a request waits for one of ``max_num_seqs`` slots as in an M/M/c
queue), the largest load meeting an SLO, and the cost per million tokens and requests.

What it leaves out, and a calibration absorbs into its constants: prefill chunks stalling
other sequences' decode, preemption, attention FLOPs (small below ~8K context), the client and
network (the benchmark records their share apart). It predicts means, not percentiles.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "UNCALIBRATED_BAND",
    "Coefficients",
    "Device",
    "KvLayer",
    "Point",
    "Shape",
    "Slo",
    "Speculation",
    "StepModel",
    "Workload",
    "cost_per_million_tokens",
]

#: Relative band of an uncalibrated prediction (each side). The independent study of the
#: published predictors found analytical models without calibration 40 %+ off; calibrated step
#: models reach ~10 % (docs/performance-model.md). A calibration replaces it with its own
#: measured error.
UNCALIBRATED_BAND = 0.5

#: Largest arrival rate, concurrency and lengths the model accepts (bounded inputs).
MAX_RATE = 1e6
MAX_CONCURRENCY = 100_000
MAX_TOKENS = 10_000_000


def _positive(name: str, value: float, upper: float) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if not 0 < value <= upper:
        raise ValueError(f"{name} must be in (0, {upper:g}], got {value:g}")
    return float(value)


@dataclass(frozen=True)
class Device:
    """What one serving instance can move and compute (all its accelerators together)."""

    name: str
    memory_bandwidth_bytes_per_s: float
    dense_flops: float
    source: str = ""


@dataclass(frozen=True)
class KvLayer:
    """One kind of attention layer: ``layers`` of them, each caching ``bytes_per_token`` (K and
    V, all KV heads on the device), up to ``window`` tokens (None: the whole context)."""

    layers: int
    bytes_per_token: float
    window: int | None = None

    def bytes_read(self, context: float) -> float:
        tokens = context if self.window is None else min(context, float(self.window))
        return self.layers * self.bytes_per_token * tokens


@dataclass(frozen=True)
class Shape:
    """What a step of one checkpoint reads and computes."""

    name: str
    #: Bytes of weights read per step (the loaded size: vLLM's "Model loading took").
    weight_bytes: float
    #: Parameters that compute per token (2 FLOPs each).
    params: float
    kv_layers: tuple[KvLayer, ...]
    drafter_bytes: float = 0.0
    drafter_params: float = 0.0

    def kv_bytes_read(self, context: float) -> float:
        """KV bytes one sequence's step reads at ``context`` tokens."""
        return sum(layer.bytes_read(context) for layer in self.kv_layers)


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding: ``num_speculative_tokens`` drafted per step, ``mean_accepted_length``
    tokens gained per sequence and step (1 + accepted drafts; at least 1)."""

    num_speculative_tokens: int
    mean_accepted_length: float

    def __post_init__(self) -> None:
        if not 1 <= self.num_speculative_tokens <= 16:
            raise ValueError("num_speculative_tokens must be in [1, 16]")
        if not 1.0 <= self.mean_accepted_length <= self.num_speculative_tokens + 1:
            raise ValueError(
                f"mean_accepted_length must be in [1, {self.num_speculative_tokens + 1}], got "
                f"{self.mean_accepted_length:g}"
            )


@dataclass(frozen=True)
class Coefficients:
    """The fitted part of the model. The defaults are priors, not measurements: 75 % of peak
    bandwidth and 1.5 ms a step reproduce the published L4 and A100 single-stream figures to
    within ~15 % (docs/performance-model.md); compute efficiencies and the prefill constant are
    typical of dense bf16 GEMMs and unchecked until a calibration fits them."""

    bandwidth_efficiency: float = 0.75
    decode_compute_efficiency: float = 0.5
    step_overhead_s: float = 0.0015
    prefill_compute_efficiency: float = 0.5
    prefill_overhead_s: float = 0.015

    def __post_init__(self) -> None:
        for name in ("bandwidth_efficiency", "decode_compute_efficiency"):
            _positive(name, getattr(self, name), 1.5)
        _positive("prefill_compute_efficiency", self.prefill_compute_efficiency, 1.5)
        for name in ("step_overhead_s", "prefill_overhead_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or not 0 <= value <= 10:
                raise ValueError(f"{name} must be in [0, 10] s, got {value!r}")

    def as_dict(self) -> dict[str, float]:
        return {
            "bandwidth_efficiency": self.bandwidth_efficiency,
            "decode_compute_efficiency": self.decode_compute_efficiency,
            "step_overhead_s": self.step_overhead_s,
            "prefill_compute_efficiency": self.prefill_compute_efficiency,
            "prefill_overhead_s": self.prefill_overhead_s,
        }


@dataclass(frozen=True)
class Workload:
    """Mean prompt and output lengths of the requests, in tokens."""

    prompt_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        for name in ("prompt_tokens", "output_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
            if not 1 <= value <= MAX_TOKENS:
                raise ValueError(f"{name} must be in [1, {MAX_TOKENS}], got {value}")


@dataclass(frozen=True)
class Slo:
    """Objectives on the mean (the model predicts means): TTFT, ITL per token, end to end."""

    ttft_ms: float | None = None
    itl_ms: float | None = None
    e2e_ms: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_ms", "itl_ms", "e2e_ms"):
            value = getattr(self, name)
            if value is not None:
                _positive(name, value, 3_600_000)

    def met_by(self, point: Point) -> bool:
        if not point.stable:
            return False
        checks = (
            (self.ttft_ms, point.ttft_s),
            (self.itl_ms, point.itl_s),
            (self.e2e_ms, point.e2e_s),
        )
        return all(limit is None or value * 1000.0 <= limit for limit, value in checks)

    def describe(self) -> str:
        parts = [
            f"{label} <= {value:g} ms"
            for label, value in (("TTFT", self.ttft_ms), ("ITL", self.itl_ms), ("E2E", self.e2e_ms))
            if value is not None
        ]
        return ", ".join(parts) or "none"


@dataclass(frozen=True)
class Point:
    """The model's figures at one load. Latencies in seconds, means."""

    #: Requests in flight (closed loop: the concurrency; open loop: Little's law).
    in_flight: float
    #: Sequences in the running batch (at most max_num_seqs).
    batch: float
    ttft_s: float
    #: Inter-token latency per output token (a step over the tokens it brings).
    itl_s: float
    step_s: float
    e2e_s: float
    output_tokens_per_s: float
    requests_per_s: float
    #: Time waiting for a free sequence slot (part of TTFT).
    queue_s: float
    stable: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "in_flight": self.in_flight,
            "batch": self.batch,
            "ttft_ms": self.ttft_s * 1000.0,
            "itl_ms": self.itl_s * 1000.0,
            "step_ms": self.step_s * 1000.0,
            "e2e_ms": self.e2e_s * 1000.0,
            "output_tokens_per_s": self.output_tokens_per_s,
            "requests_per_s": self.requests_per_s,
            "queue_ms": self.queue_s * 1000.0,
            "stable": self.stable,
        }


def _unstable(in_flight: float, batch: float) -> Point:
    inf = math.inf
    return Point(in_flight, batch, inf, inf, inf, inf, 0.0, 0.0, inf, stable=False)


def erlang_c_wait(servers: int, arrival_rate: float, service_s: float) -> float:
    """Mean wait in an M/M/c queue (Erlang C); infinite when the servers are saturated."""
    offered = arrival_rate * service_s
    if offered >= servers:
        return math.inf
    # Erlang B by the stable recurrence, then C from B.
    b = 1.0
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    rho = offered / servers
    c = b / (1.0 - rho + rho * b)
    return c * service_s / (servers - offered)


@dataclass(frozen=True)
class StepModel:
    """The model for one hardware, checkpoint and serving configuration."""

    shape: Shape
    device: Device
    coefficients: Coefficients = field(default_factory=Coefficients)
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    speculation: Speculation | None = None
    #: Relative error band of a prediction, each side (see :data:`UNCALIBRATED_BAND`).
    band: float = UNCALIBRATED_BAND
    #: Where the coefficients come from (a calibration's name, or "uncalibrated priors").
    basis: str = "uncalibrated priors"

    # --- features (what the coefficients multiply) -----------------------------------------

    def decode_features(self, batch: float, context: float) -> tuple[float, float]:
        """(bytes read, FLOPs) of one decode step with ``batch`` running sequences."""
        spec = self.speculation
        k = spec.num_speculative_tokens if spec else 0
        read = (
            self.shape.weight_bytes
            + k * self.shape.drafter_bytes
            + batch * self.shape.kv_bytes_read(context)
        )
        flops = 2.0 * batch * ((1 + k) * self.shape.params + k * self.shape.drafter_params)
        return read, flops

    def prefill_flops(self, prompt_tokens: float) -> float:
        return 2.0 * self.shape.params * prompt_tokens

    # --- times ----------------------------------------------------------------------------

    def decode_step_s(self, batch: float, context: float) -> float:
        c = self.coefficients
        read, flops = self.decode_features(batch, context)
        return (
            read / (c.bandwidth_efficiency * self.device.memory_bandwidth_bytes_per_s)
            + flops / (c.decode_compute_efficiency * self.device.dense_flops)
            + c.step_overhead_s
        )

    def prefill_chunks(self, prompt_tokens: float) -> int:
        return max(1, math.ceil(prompt_tokens / self.max_num_batched_tokens))

    def prefill_s(self, prompt_tokens: float, running: float, context: float) -> float:
        """Time from a request's admission to its first token, ``running`` others decoding."""
        c = self.coefficients
        compute = self.prefill_flops(prompt_tokens) / (
            c.prefill_compute_efficiency * self.device.dense_flops
        )
        steps = self.prefill_chunks(prompt_tokens) * self.decode_step_s(running, context)
        return compute + steps + c.prefill_overhead_s

    @property
    def tokens_per_step(self) -> float:
        return self.speculation.mean_accepted_length if self.speculation else 1.0

    def decode_steps(self, output_tokens: int) -> float:
        """Steps after the first token (which the prefill brings)."""
        return max(0.0, (output_tokens - 1) / self.tokens_per_step)

    # --- loads ----------------------------------------------------------------------------

    def _running(self, batch: float, w: Workload) -> Point:
        """Figures with ``batch`` requests running and none waiting."""
        context = w.prompt_tokens + w.output_tokens / 2.0
        step = self.decode_step_s(batch, context)
        ttft = self.prefill_s(w.prompt_tokens, max(0.0, batch - 1.0), context)
        e2e = ttft + self.decode_steps(w.output_tokens) * step
        rate = batch / e2e
        return Point(
            in_flight=batch,
            batch=batch,
            ttft_s=ttft,
            itl_s=step / self.tokens_per_step,
            step_s=step,
            e2e_s=e2e,
            output_tokens_per_s=rate * w.output_tokens,
            requests_per_s=rate,
            queue_s=0.0,
        )

    def at_concurrency(self, concurrency: float, w: Workload) -> Point:
        """Closed loop: ``concurrency`` clients, each sending its next request on an answer."""
        _positive("concurrency", concurrency, MAX_CONCURRENCY)
        if concurrency <= self.max_num_seqs:
            return self._running(concurrency, w)
        full = self._running(float(self.max_num_seqs), w)
        # Little's law: the extra clients wait for a slot; throughput stays the full batch's.
        e2e = concurrency / full.requests_per_s
        queue = e2e - full.e2e_s
        return replace(
            full, in_flight=concurrency, e2e_s=e2e, ttft_s=full.ttft_s + queue, queue_s=queue
        )

    def capacity_rps(self, w: Workload) -> float:
        """Requests/s with every sequence slot busy: the most one instance sustains."""
        return self._running(float(self.max_num_seqs), w).requests_per_s

    def at_rate(self, rate: float, w: Workload) -> Point:
        """Open loop: Poisson arrivals at ``rate`` requests/s."""
        _positive("rate", rate, MAX_RATE)
        top = float(self.max_num_seqs)
        if rate >= self.capacity_rps(w):
            return _unstable(math.inf, top)
        lo, hi = 0.0, top
        for _ in range(60):  # N = rate x e2e(N), e2e increasing in N
            mid = (lo + hi) / 2.0
            if rate * self._running(max(mid, 1.0), w).e2e_s > mid:
                lo = mid
            else:
                hi = mid
        batch = hi
        # A request in service always has itself in the batch.
        point = self._running(max(batch, 1.0), w)
        wait = erlang_c_wait(self.max_num_seqs, rate, point.e2e_s)
        if not math.isfinite(wait):
            return _unstable(math.inf, top)
        e2e = point.e2e_s + wait
        return replace(
            point,
            in_flight=rate * e2e,
            batch=batch,
            ttft_s=point.ttft_s + wait,
            e2e_s=e2e,
            requests_per_s=rate,
            output_tokens_per_s=rate * w.output_tokens,
            queue_s=wait,
        )

    def curve(self, concurrencies: Sequence[int], w: Workload) -> list[Point]:
        return [self.at_concurrency(c, w) for c in concurrencies]

    # --- what meets an SLO ----------------------------------------------------------------

    def max_concurrency_meeting(self, slo: Slo, w: Workload, limit: int | None = None) -> int:
        """The largest closed-loop concurrency whose predicted means meet ``slo`` (0: none)."""
        top = limit if limit is not None else self.max_num_seqs
        best = 0
        for c in range(1, top + 1):  # latencies grow with c; stop at the first miss
            if not slo.met_by(self.at_concurrency(c, w)):
                break
            best = c
        return best

    def max_rate_meeting(self, slo: Slo, w: Workload) -> float:
        """The largest arrival rate (requests/s) one instance serves within ``slo`` (0: none)."""
        hi = self.capacity_rps(w)
        if not slo.met_by(self.at_rate(hi * 1e-6, w)):
            return 0.0
        lo = hi * 1e-6
        for _ in range(50):
            mid = (lo + hi) / 2.0
            if slo.met_by(self.at_rate(mid, w)):
                lo = mid
            else:
                hi = mid
        return lo


def cost_per_million_tokens(usd_per_hour: float, tokens_per_s: float) -> float | None:
    """USD per million output tokens at a sustained token rate (None at no throughput)."""
    if tokens_per_s <= 0 or not math.isfinite(tokens_per_s):
        return None
    return usd_per_hour / (tokens_per_s * 3600.0) * 1e6
