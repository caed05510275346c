"""Performance model of one vLLM instance: latency, throughput and cost before deploying
(docs/performance-derivation.md says why each term is there and what checks it).

Pure (no Pulumi, no I/O). A scheduler step runs every sequence in the batch together, as
vLLM's chunked prefill schedules it (each decoding sequence's ``1 + k`` tokens, then prefill
chunks in arrival order up to ``max_num_batched_tokens``), and costs::

    step = compute + bytes + c_step
    compute = (decode tokens / ec + prefill tokens / ep) x 2 x parameters / dense peak
    bytes   = (weights + k x drafter + every running sequence's KV) / (eb x peak bandwidth)

Reads and arithmetic add up (``StepModel.overlap`` 0), as the published fall of MTP's
speed-up with the batch asks; ``overlap`` 1 is the roofline, the judge's physical floor. Every
efficiency is a share of the peak, refused above 1; in steady state Little's law sets the
tokens a step carries, so no prediction exceeds the peak. Speculative decoding (MTP) verifies
``1 + k`` tokens per sequence and step and advances each by the mean accepted length; the API
server's serial time and the platform's front end are in TTFT and end-to-end. It predicts
means, not percentiles; preemption and prefix-cache hits are left out.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections import deque
from dataclasses import dataclass, field, fields, replace
from typing import Any

from serving.capacity import itl_spread

#: Relative band of an uncalibrated prediction (each side). The independent study of the
#: published predictors found analytical models without calibration 40 %+ off; calibrated step
#: models reach ~10 % (docs/performance-evidence.md). A calibration replaces it with its own
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
    #: True for a stand-in whose figures are ceilings set above the hardware, not its peaks
    #: (``scripts/sim-check``'s CPU core): a fitted efficiency of 1 there says nothing of
    #: physics, so a calibration does not refuse it.
    ceilings_only: bool = False


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
    within ~15 % (docs/performance-evidence.md); compute efficiencies and the prefill constant are
    typical of dense bf16 GEMMs and unchecked until a calibration fits them."""

    bandwidth_efficiency: float = 0.75
    decode_compute_efficiency: float = 0.5
    step_overhead_s: float = 0.0015
    prefill_compute_efficiency: float = 0.5
    prefill_overhead_s: float = 0.015

    def __post_init__(self) -> None:
        # An efficiency is a share of the chip's peak: above 1 is beyond physics.
        for name in (
            "bandwidth_efficiency",
            "decode_compute_efficiency",
            "prefill_compute_efficiency",
        ):
            _positive(name, getattr(self, name), 1.0)
        for name in ("step_overhead_s", "prefill_overhead_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or not 0 <= value <= 10:
                raise ValueError(f"{name} must be in [0, 10] s, got {value!r}")

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


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
    #: The engine's own TTFT and end-to-end latency (the fields above add the front end).
    engine_ttft_s: float = 0.0
    engine_e2e_s: float = 0.0
    #: The client's extra latency the figures above include (ingress, auth, network).
    front_end_s: float = 0.0
    #: Share of each ceiling in use (:meth:`StepModel.utilisation`) and the closest one.
    utilisation: dict[str, float] = field(default_factory=dict)
    ceiling: str = ""

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
            "engine_ttft_ms": self.engine_ttft_s * 1000.0,
            "engine_e2e_ms": self.engine_e2e_s * 1000.0,
            "front_end_ms": self.front_end_s * 1000.0,
            "utilisation": dict(self.utilisation),
            "ceiling": self.ceiling,
            "stable": self.stable,
        }


def _unstable(in_flight: float, batch: float) -> Point:
    inf = math.inf
    return Point(
        in_flight, batch, inf, inf, inf, inf, 0.0, 0.0, inf, False, inf, inf, 0.0, {}, "queue"
    )


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
    """The model for one hardware, checkpoint and serving configuration (the module docstring
    says what a step costs); a step is ``max(compute, bytes) + (1 - overlap) x min(compute,
    bytes) + c_step``, and :meth:`utilisation` shows per point that no ceiling is exceeded."""

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
    #: What the client sees on top of the engine (ingress, auth, TLS, network), seconds; added
    #: to TTFT and end-to-end latency of every point.
    front_end_s: float = 0.0
    #: KV cache tokens the engine holds (vLLM's "GPU KV cache size"); None: not bounded here.
    kv_capacity_tokens: float | None = None
    #: Longest prompt + output the engine accepts (vLLM's max-model-len); None: unbounded.
    max_model_len: int | None = None
    #: Serial time the API server spends on each request (the HTTP request and a one-token
    #: answer), seconds, plus ``server_prompt_token_s`` per prompt token (tokenising the
    #: prompt and priming the detokenizer with it): one process does it for every request,
    #: so it caps the rate at 1 / :meth:`server_time_s`. Time per output token is not in it.
    server_request_s: float = 0.0
    server_prompt_token_s: float = 0.0
    #: Share of the smaller of a step's compute and reads hidden under the larger: 0 (the
    #: default) adds them, which the published fall of MTP's speed-up with the batch asks for
    #: (module docstring); 1 is the roofline, the physical floor of a step.
    overlap: float = 0.0
    #: A token gap's spread around its step's mean, measured by a calibration run
    #: (:mod:`serving.capacity.itl_spread`); empty: none measured, none assumed. Mean 1: it moves
    #: the simulation's ITL percentiles, never a mean.
    itl_spread: tuple[float, ...] = ()
    #: A first token's spread around its mean, measured by the same run; empty: none. Mean 1:
    #: it moves the simulation's TTFT (and with them E2E) percentiles, never a mean.
    ttft_spread: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not (isinstance(self.overlap, int | float) and 0.0 <= self.overlap <= 1.0):
            raise ValueError(f"overlap must be in [0, 1], got {self.overlap!r}")
        object.__setattr__(self, "itl_spread", itl_spread.check(self.itl_spread))
        object.__setattr__(self, "ttft_spread", itl_spread.check(self.ttft_spread, "ttft_spread"))

    def combine(self, compute_s: float, bytes_s: float) -> float:
        """A step's compute and reads together (without its constant)."""
        return max(compute_s, bytes_s) + (1.0 - self.overlap) * min(compute_s, bytes_s)

    def server_time_s(self, w: Workload) -> float:
        """The API server's serial time for one request of this shape."""
        return self.server_request_s + self.server_prompt_token_s * w.prompt_tokens

    def api_server_s(self, rate: float, w: Workload) -> float:
        """A request's time in the API server at ``rate`` requests/s: its own serial time
        plus the M/D/1 wait behind the others (infinite at or past 1 / server_time_s)."""
        s = self.server_time_s(w)
        if s <= 0:
            return 0.0
        u = rate * s
        if u >= 1.0:
            return math.inf
        return s + s * u / (2.0 * (1.0 - u))

    @property
    def _k(self) -> int:
        return self.speculation.num_speculative_tokens if self.speculation else 0

    def step_bytes(self, batch: float, context: float) -> float:
        """Bytes one step reads: the weights, the drafter ``k`` times, each sequence's KV."""
        return (
            self.shape.weight_bytes
            + self._k * self.shape.drafter_bytes
            + batch * self.shape.kv_bytes_read(context)
        )

    def prefill_flops(self, prompt_tokens: float) -> float:
        return 2.0 * self.shape.params * prompt_tokens

    def _bytes_s(self, batch: float, context: float) -> float:
        return self.step_bytes(batch, context) / (
            self.coefficients.bandwidth_efficiency * self.device.memory_bandwidth_bytes_per_s
        )

    def _decode_flops_s(self, sequences: float) -> float:
        """Compute seconds of ``sequences`` decoding sequences' tokens in one step."""
        k = self._k
        flops = 2.0 * sequences * ((1 + k) * self.shape.params + k * self.shape.drafter_params)
        return flops / (self.coefficients.decode_compute_efficiency * self.device.dense_flops)

    def _prefill_flops_s(self, tokens: float) -> float:
        return self.prefill_flops(tokens) / (
            self.coefficients.prefill_compute_efficiency * self.device.dense_flops
        )

    def decode_step_s(self, batch: float, context: float) -> float:
        """A step with ``batch`` sequences decoding and no prefill in it."""
        return (
            self.combine(self._decode_flops_s(batch), self._bytes_s(batch, context))
            + self.coefficients.step_overhead_s
        )

    def step_s(self, decoding: float, prefill_tokens: float, running: float, ctx: float) -> float:
        """A step with ``decoding`` sequences decoding, ``prefill_tokens`` prompt tokens and
        ``running`` sequences' KV caches read."""
        compute = self._decode_flops_s(decoding) + self._prefill_flops_s(prefill_tokens)
        return (
            self.combine(compute, self._bytes_s(running, ctx)) + self.coefficients.step_overhead_s
        )

    def prefill_s(self, prompt_tokens: float, running: float, context: float) -> float:
        """Time from admission to the first token of one request, ``running`` others
        decoding, no other prefill waiting: its chunks ride with their decodes."""
        budget = max(1.0, self.max_num_batched_tokens - running * (1 + self._k))
        chunks = max(1, math.ceil(prompt_tokens / budget))
        per_chunk = prompt_tokens / chunks
        step = self.step_s(running, per_chunk, running + 1, context)
        return chunks * step + self.coefficients.prefill_overhead_s

    @property
    def tokens_per_step(self) -> float:
        return self.speculation.mean_accepted_length if self.speculation else 1.0

    def decode_steps(self, output_tokens: int) -> float:
        """Steps after the first token (which the prefill brings)."""
        return max(0.0, (output_tokens - 1) / self.tokens_per_step)

    def _steady(self, rate: float, batch: float, w: Workload) -> _Steady | None:
        """Steady state at ``rate`` requests/s with ``batch`` sequences running (None: the
        engine cannot complete that many requests a second)."""
        k = self._k
        c = self.coefficients
        p = float(w.prompt_tokens)
        d_steps = self.decode_steps(w.output_tokens)
        context = w.prompt_tokens + w.output_tokens / 2.0
        # Compute seconds per step = a x rate x step: each request brings its prompt and its
        # decode steps' tokens (1 + k per step, drafter included) once.
        a = self._prefill_flops_s(p) + self._decode_flops_s(1.0) * d_steps
        bytes_s = self._bytes_s(batch, context)
        x = rate * a  # compute seconds per second
        if x >= 1.0:
            return None
        # The step s solves s = combine(x s, bytes) + c (a slope below 1: one solution):
        # read-bound when x s <= bytes, else compute-bound.
        hidden = 1.0 - self.overlap
        step = (bytes_s + c.step_overhead_s) / (1.0 - hidden * x)
        if x * step > bytes_s:
            step = (hidden * bytes_s + c.step_overhead_s) / (1.0 - x)
        if step <= 0:
            return None
        decoding = rate * step * d_steps
        budget = self.max_num_batched_tokens - decoding * (1 + k)
        tokens = rate * step * (p + d_steps * (1 + k))
        if budget <= 0 or tokens > self.max_num_batched_tokens:
            return None
        per_request = max(1.0, math.ceil(p / budget))
        use = rate * step * p / budget  # share of the prefill budget in use
        if use >= 1.0:
            return None
        wait = per_request * use / (2.0 * (1.0 - use))  # M/D/1 wait for the budget, in steps
        api = self.api_server_s(rate, w)
        if not math.isfinite(api):
            return None
        ttft = max(
            (wait + per_request) * step + c.prefill_overhead_s,
            self.prefill_s(p, min(max(0.0, batch - 1.0), decoding), context),
        )
        e2e = ttft + d_steps * step
        return _Steady(rate, batch, step, ttft, e2e, rate * a, api)

    def _closed(self, batch: float, w: Workload) -> _Steady:
        """Steady state with ``batch`` (<= the slots) requests always running.

        With ``n`` = requests completed per step (rate x step), a step holds ``n`` prompts
        and ``n x decode steps`` decoding sequences, so its compute is ``a x n`` seconds and
        its length ``combine(a x n, bytes(batch)) + c``; Little's law ``batch = rate x e2e``
        fixes ``n``. Compute per second is then ``a x n / step <= 1`` by construction."""
        k = self._k
        c = self.coefficients
        p = float(w.prompt_tokens)
        d_steps = self.decode_steps(w.output_tokens)
        context = w.prompt_tokens + w.output_tokens / 2.0
        a = self._prefill_flops_s(p) + self._decode_flops_s(1.0) * d_steps
        bytes_s = self._bytes_s(batch, context)
        m = float(self.max_num_batched_tokens)
        # The most requests a step can carry: every token within max_num_batched_tokens.
        n_max = m / (p + d_steps * (1 + k))
        # What prefill_s(p, running, context) computes, with its loop-invariant terms taken
        # out: the same operations in the same order (so the same floats), without the
        # method calls, since the search below evaluates it 60 times per call and a
        # calibration's fit calls this thousands of times.
        decode_flops = (1 + k) * self.shape.params + k * self.shape.drafter_params
        decode_peak = c.decode_compute_efficiency * self.device.dense_flops
        prefill_flops = 2.0 * self.shape.params
        prefill_peak = c.prefill_compute_efficiency * self.device.dense_flops
        fixed_bytes = self.shape.weight_bytes + k * self.shape.drafter_bytes
        kv_bytes = self.shape.kv_bytes_read(context)
        bandwidth = c.bandwidth_efficiency * self.device.memory_bandwidth_bytes_per_s

        def prefill_s(running: float) -> float:
            budget = max(1.0, self.max_num_batched_tokens - running * (1 + k))
            chunks = max(1, math.ceil(p / budget))
            per_chunk = p / chunks
            compute = 2.0 * running * decode_flops / decode_peak
            compute += prefill_flops * per_chunk / prefill_peak
            read_s = (fixed_bytes + (running + 1) * kv_bytes) / bandwidth
            return (
                chunks * (self.combine(compute, read_s) + c.step_overhead_s) + c.prefill_overhead_s
            )

        # (rate, step, ttft, e2e, compute share, API server time) with n requests completed per
        # step (ttft and e2e in the engine: Little's law counts the slots it holds); the
        # search makes a _Steady of the one it keeps only.
        def state(n: float) -> tuple[float, float, float, float, float, float] | None:
            budget = m - n * d_steps * (1 + k)
            if budget <= 0:
                return None
            use = n * p / budget
            if use >= 1.0:
                return None
            per_request = max(1.0, math.ceil(p / budget))
            wait = per_request * use / (2.0 * (1.0 - use))
            step = self.combine(a * n, bytes_s) + c.step_overhead_s
            rate = n / step
            # A prefill's own steps are longer than the mean step when few share them:
            # the first token waits at least for its chunks with the others' decodes.
            api = self.api_server_s(rate, w)
            if not math.isfinite(api):
                return None  # past what the API server hands over: this rate cannot be
            ttft = max(
                (wait + per_request) * step + c.prefill_overhead_s,
                prefill_s(min(batch - 1.0, n * d_steps)),
            )
            return rate, step, ttft, ttft + d_steps * step, a * n / step, api

        lo, hi = 0.0, n_max
        best = None
        for _ in range(60):
            mid = (lo + hi) / 2.0
            s = state(mid)
            if s is not None and s[0] * s[3] <= batch:
                lo, best = mid, s
            else:
                hi = mid
        if best is None:
            best = state(n_max * 1e-12)
        assert best is not None
        rate, step, ttft, e2e, share, api = best
        return _Steady(rate, batch, step, ttft, e2e, share, api)

    def _point(self, s: _Steady, w: Workload, in_flight: float, queue: float) -> Point:
        f = self.front_end_s
        ttft = s.api_s + queue + s.ttft_s
        e2e = s.api_s + queue + s.e2e_s
        util = self.utilisation(s, w)
        context = w.prompt_tokens + w.output_tokens / 2.0
        # Closeness to each ceiling as the engine reaches it (at its efficiencies): the share
        # of a step spent computing, the share spent reading, slots and cache in use.
        near = {
            "compute": s.compute_share,
            "bandwidth": self._bytes_s(s.batch, context) / s.step_s,
            "slots": s.batch / self._slots_for(w),
            "kv-cache": util["kv-cache"],
            "api-server": util["api-server"],
        }
        return Point(
            in_flight=in_flight,
            batch=s.batch,
            ttft_s=ttft + f,
            itl_s=s.step_s / self.tokens_per_step,
            step_s=s.step_s,
            e2e_s=e2e + f,
            output_tokens_per_s=s.rate * w.output_tokens,
            requests_per_s=s.rate,
            queue_s=queue,
            engine_ttft_s=ttft,
            engine_e2e_s=e2e,
            front_end_s=f,
            utilisation=util,
            ceiling=max(near, key=lambda name: near[name]),
        )

    def utilisation(self, s: _Steady, w: Workload) -> dict[str, float]:
        """Share of each ceiling a steady state uses, at 100 % efficiency: compute (FLOP/s
        over the dense peak), bandwidth (bytes/s over peak), slots (running over
        max_num_seqs), KV cache (running sequences' tokens over the cache's)."""
        k = self._k
        d_steps = self.decode_steps(w.output_tokens)
        flops = s.rate * (
            self.prefill_flops(w.prompt_tokens)
            + 2.0 * d_steps * ((1 + k) * self.shape.params + k * self.shape.drafter_params)
        )
        context = w.prompt_tokens + w.output_tokens / 2.0
        out = {
            "compute": flops / self.device.dense_flops,
            "bandwidth": self.step_bytes(s.batch, context)
            / s.step_s
            / self.device.memory_bandwidth_bytes_per_s,
            "slots": s.batch / self.max_num_seqs,
            "kv-cache": 0.0,
            "api-server": s.rate * self.server_time_s(w),
        }
        if self.kv_capacity_tokens:
            out["kv-cache"] = (
                s.batch * (w.prompt_tokens + w.output_tokens) / (self.kv_capacity_tokens)
            )
        return out

    def check_shape(self, w: Workload) -> None:
        """Raise ValueError when the engine refuses every request of this shape."""
        if self.max_model_len is not None and w.prompt_tokens + w.output_tokens > (
            self.max_model_len
        ):
            raise ValueError(
                f"a request of {w.prompt_tokens} prompt + {w.output_tokens} output tokens is "
                f"longer than the stack's max-model-len ({self.max_model_len}): vLLM refuses it"
            )

    def _slots_for(self, w: Workload) -> float:
        """Sequences the engine can run at once: max_num_seqs, or what the KV cache holds."""
        top = float(self.max_num_seqs)
        if self.kv_capacity_tokens:
            top = min(top, max(1.0, self.kv_capacity_tokens / (w.prompt_tokens + w.output_tokens)))
        return top

    def at_concurrency(self, concurrency: float, w: Workload) -> Point:
        """Closed loop: ``concurrency`` requests in flight at the engine, each client sending
        its next request on an answer; each also spends its API server time before it, which
        holds no engine slot (the point's latencies include it, Little's law at the engine
        does not). Past the slots (max_num_seqs, or what the KV cache holds) the rest wait:
        throughput stays the full batch's (Little's law)."""
        _positive("concurrency", concurrency, MAX_CONCURRENCY)
        self.check_shape(w)
        if concurrency <= 1:
            return self.single_stream(w)
        top = self._slots_for(w)
        if concurrency <= top:
            return self._point(self._closed(concurrency, w), w, concurrency, 0.0)
        full = self._closed(top, w)
        queue = concurrency / full.rate - full.e2e_s
        return self._point(full, w, concurrency, max(0.0, queue))

    def single_stream(self, w: Workload) -> Point:
        """One request alone: its prompt's chunks with nothing else running, then its decode
        steps at batch 1 (no other prompt's compute in them). The floor of every load: no
        request is faster than this, and the open-loop figures converge to it as the rate
        falls to zero (the scheduler simulation does too)."""
        self.check_shape(w)
        return self._point(self._alone(w), w, 1.0, 0.0)

    def _alone(self, w: Workload) -> _Steady:
        # Its prompt's steps read the prompt's KV; its decode steps, the mean context.
        p = float(w.prompt_tokens)
        step = self.decode_step_s(1.0, p + w.output_tokens / 2.0)
        ttft = self.prefill_s(p, 0.0, p)
        e2e = ttft + self.decode_steps(w.output_tokens) * step
        share = self._decode_flops_s(1.0) / step
        # Alone, nothing queues at the API server either: its own serial time only.
        return _Steady(1.0 / e2e, 1.0, step, ttft, e2e, share, self.server_time_s(w))

    def capacity_rps(self, w: Workload) -> float:
        """Requests/s with every sequence slot busy: the most one instance sustains."""
        self.check_shape(w)
        return self._closed(self._slots_for(w), w).rate

    def at_rate(self, rate: float, w: Workload, capacity: float | None = None) -> Point:
        """Open loop: Poisson arrivals at ``rate`` requests/s (``capacity``: the caller's
        :meth:`capacity_rps` for ``w``, when it has it)."""
        _positive("rate", rate, MAX_RATE)
        self.check_shape(w)
        top = self._slots_for(w)
        if rate >= (self.capacity_rps(w) if capacity is None else capacity):
            return _unstable(math.inf, top)
        batch = 1.0
        for _ in range(60):  # running = rate x engine e2e (Little), at least the request itself
            steady = self._steady(rate, min(batch, top), w)
            if steady is None:
                return _unstable(math.inf, top)
            batch, previous = max(1.0, rate * steady.e2e_s), batch
            if abs(batch - previous) < 1e-9 * max(1.0, previous):
                break
        steady = self._steady(rate, min(batch, top), w)
        if steady is None:
            return _unstable(math.inf, top)
        wait = erlang_c_wait(max(1, int(top)), rate, steady.e2e_s) if batch > 0.5 * top else 0.0
        if not math.isfinite(wait):
            return _unstable(math.inf, top)
        # No request is faster than alone (the closed form's shared steps carry a share of the
        # others' prefill, which at low load a request alone does not wait for: the floor).
        one = self._alone(w)
        floor = replace(
            steady,
            step_s=max(steady.step_s, one.step_s),
            ttft_s=max(steady.ttft_s, one.ttft_s),
            e2e_s=max(steady.e2e_s, one.e2e_s),
        )
        return self._point(floor, w, rate * (wait + floor.e2e_s), wait)

    def max_rate_meeting(self, slo: Slo, w: Workload, rel_tol: float = 0.0) -> float:
        """The largest arrival rate (requests/s) one instance serves within ``slo`` (0: none),
        found to ``rel_tol`` of the capacity (0: to the float's precision, 40 halvings)."""
        hi = capacity = self.capacity_rps(w)
        if not slo.met_by(self.at_rate(hi * 1e-6, w, hi)):
            return 0.0
        lo = hi * 1e-6
        for _ in range(40 if rel_tol <= 0 else max(1, math.ceil(-math.log2(rel_tol)))):
            mid = (lo + hi) / 2.0
            if slo.met_by(self.at_rate(mid, w, capacity)):
                lo = mid
            else:
                hi = mid
        return lo

    def burst(
        self,
        requests: int,
        w: Workload,
        cached_prompt_tokens: int = 0,
        client_slots: int | None = None,
        return_gap_s: float = 0.0,
        send_gap_s: float = 0.0,
        instance_slots: int | None = None,
    ) -> tuple[float, float]:
        """``requests`` sent by one client, none after, simulated step by step as vLLM schedules
        them (decodes first, then prefill chunks in arrival order within
        max_num_batched_tokens, at most the engine's slots running): (mean latency from when
        the client started each timer, the front end left out; time from the first arrival
        until the last answer).

        ``client_slots``: at most this many out at once (a semaphore; None: all at once); an
        answered request's successor arrives ``return_gap_s`` later. ``send_gap_s``: the
        client's serial time per request (one thread writes each in turn), each timed from the
        start of its wave. ``cached_prompt_tokens`` of each prompt come from the prefix cache
        (no step computes them; their KV is still read). ``instance_slots``: the platform lets
        at most this many into the instance (Cloud Run's container concurrency), each holding
        its slot until its answer has left the API server, so below the engine's slots that
        limit sets the rate. Each request passes the API server (:meth:`server_time_s`, one at
        a time, in sending order) before the instance limit; inside a container it comes
        after, a few milliseconds against the limit's waits."""
        self.check_shape(w)
        if requests < 1:
            raise ValueError(f"requests must be at least 1, got {requests}")
        if instance_slots is not None and instance_slots < 1:
            raise ValueError(f"instance_slots must be at least 1, got {instance_slots}")
        k = self._k
        top = int(self._slots_for(w))
        p = max(1, w.prompt_tokens - cached_prompt_tokens)
        context = w.prompt_tokens + w.output_tokens / 2.0
        out = requests if client_slots is None else max(1, min(requests, client_slots))
        gate = requests if instance_slots is None else instance_slots
        # Two serial stages in a row: the client sends one request every send_gap_s, and the
        # API server takes each in turn for server_time_s before the engine sees it (its own
        # time, and its wait behind the ones before). Each is timed from ``clock``.
        serve = self.server_time_s(w)
        server_free = 0.0

        def through_server(sent_at: float) -> float:
            nonlocal server_free
            server_free = max(sent_at, server_free) + serve
            return server_free

        pending = [(through_server(i * send_gap_s), i) for i in range(out)]
        heapq.heapify(pending)
        clock = dict.fromkeys(range(out), 0.0)
        free = (out - 1) * send_gap_s  # when the client last sent
        sent = out
        left_prompt = [float(p)] * requests
        left_decode = [self.decode_steps(w.output_tokens)] * requests
        inside = 0  # requests let into the instance and not yet answered
        leaving: list[float] = []  # when each answered request's slot is let go (a heap)
        admitted: deque[int] = deque()  # in the instance, waiting for an engine slot
        running: list[int] = []
        now = 0.0
        latencies: list[float] = []
        last = 0.0
        while pending or admitted or running:
            if not running and not admitted:
                # Idle: the next arrival, or (every instance slot held) the next slot let go.
                now = max(now, pending[0][0])
                if inside + len(leaving) >= gate:
                    now = max(now, leaving[0])
            while leaving and leaving[0] <= now:
                heapq.heappop(leaving)
            while pending and pending[0][0] <= now and inside + len(leaving) < gate:
                admitted.append(heapq.heappop(pending)[1])
                inside += 1
            while admitted and len(running) < top:
                running.append(admitted.popleft())
            decoding = [r for r in running if left_prompt[r] <= 0]
            budget = float(self.max_num_batched_tokens - len(decoding) * (1 + k))
            prefill = 0.0
            for r in running:
                if left_prompt[r] > 0 and budget > 0:
                    take = min(left_prompt[r], budget)
                    left_prompt[r] -= take
                    budget -= take
                    prefill += take
            now += self.step_s(len(decoding), prefill, len(running), context)
            for r in decoding:
                left_decode[r] -= 1.0
            finished = [r for r in running if left_prompt[r] <= 0 and (left_decode[r] <= 1e-9)]
            for r in finished:
                running.remove(r)
                answered = now + self.coefficients.prefill_overhead_s
                latencies.append(answered - clock[r])
                last = max(last, answered)
                # Its instance slot is let go once the answer has left the API server.
                inside -= 1
                heapq.heappush(leaving, answered)
                if sent < requests:
                    # The answer frees a client slot: the next request's clock starts when it
                    # gets back; it leaves once the client is free and arrives after the gap.
                    clock[sent] = answered + return_gap_s
                    free = max(free + send_gap_s, answered + return_gap_s)
                    heapq.heappush(pending, (through_server(free), sent))
                    sent += 1
        return statistics.fmean(latencies), last


@dataclass(frozen=True)
class _Steady:
    rate: float
    batch: float
    step_s: float
    #: In the engine: from entering it to the first token, to the last (no API server time).
    ttft_s: float
    e2e_s: float
    compute_share: float
    #: In the API server, before the engine: its own serial time and its wait behind others.
    #: No engine slot is held meanwhile, so Little's law and the slot wait leave it out.
    api_s: float = 0.0
