"""Tail latency from a simulation of vLLM's scheduler (docs/performance-model.md, "Tail latency").

Pure (no Pulumi, no I/O) and deterministic for a seed. Requests arrive (Poisson, gamma-bursty as
``vllm bench serve --burstiness`` draws them, or a trace), pass the platform's balancer and the
replica's API server (one at a time, :meth:`StepModel.server_time_s`), and each replica's engine
runs steps as vLLM's V1 scheduler builds them: the running requests first, in the order they
were admitted (each decoding one brings ``1 + k`` tokens, a prefilling one its next chunk), then
waiting ones in arrival order while a slot (``max_num_seqs``), the token budget
(``max_num_batched_tokens``) and the KV cache allow. A running request that finds no KV room
preempts the newest running one, which later recomputes its prompt and what it had generated.
Each step costs :meth:`StepModel.step_s` at the batch's mean context, so the simulation and the
closed forms share every coefficient; MTP advances a sequence by the mean accepted length.

Steps that change nothing but the sequences' lengths (decoding only, nothing admissible) run
as one block up to the next completion, arrival or KV limit, which keeps a run of thousands of
requests within a fraction of a second. A token gap spreads around its step's mean as the
model's measured ``itl_spread`` says (:mod:`serving.capacity.itl_spread`; none when none was
measured), by at most what a full batch's decode step spreads by (the jitter of a gap that
held a prefill does not grow with the prefill); the time it moves is not fed back into the
schedule (the spread's mean is 1: every mean holds). A first token spreads the same way by the
model's ``ttft_spread``, by at most what the request's first token alone spreads by (the
jitter of a first token that queued does not grow with the queue), and its E2E moves with it
(the answer ends as much later). Left
out, and said so: per-step variance of MTP acceptance, KV block rounding (16 tokens), and the
time a response spends after the engine.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from serving.capacity.perf import MAX_RATE, MAX_TOKENS, StepModel, Workload

#: How requests reach replicas. ``engine``: one replica, no balancer. ``cloud-run``: Cloud
#: Run's per-instance concurrency: a request goes to the instance with the fewest in flight
#: below the limit, else waits at the front until a slot frees. ``endpoint-picker``: GKE
#: Inference Gateway's llm-d picker, the replica with the shortest queue, then the emptiest KV
#: cache. ``random``: independent replicas (TPU VMs) each taking an equal share at random.
BALANCERS = ("engine", "cloud-run", "endpoint-picker", "random")

#: Most requests one simulation runs (bounded input); the default is enough for a p99 within a
#: few percent at steady load (:attr:`SimResult.error` says how much for each run).
MAX_REQUESTS = 100_000
DEFAULT_REQUESTS = 4000
#: Share of the first requests left out of the figures (the engine starts empty).
WARMUP = 0.1
#: z of a two-sided 95 % interval (the percentiles' error from the number of requests).
_Z95 = 1.959964
#: z of the 95th percentile of a normal (fitting a lognormal to a mean and a p95).
_Z_P95 = 1.644854
_Z_P999 = 3.090232
PERCENTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: when it was sent (seconds from any origin) and its lengths."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")


def _check_number(name: str, value: Any, low: float, high: float) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not low < value <= high:
        raise ValueError(f"{name} must be a number in ({low:g}, {high:g}], got {value!r}")


def lognormal_sigma(mean: float, p95: float, name: str) -> float:
    """The sigma of the lognormal with this mean and 95th percentile (0 when they are equal);
    ValueError when no lognormal has them (p95 below the mean, or above ~3.87 x the mean)."""
    if p95 < mean:
        raise ValueError(f"{name} p95 ({p95:g}) must be at least its mean ({mean:g})")
    ratio = math.log(p95 / mean)
    disc = _Z_P95**2 - 2.0 * ratio
    if disc < 0:
        raise ValueError(
            f"{name} p95 ({p95:g}) is more than {math.exp(_Z_P95**2 / 2):.2f} x its mean "
            f"({mean:g}): no lognormal length distribution has that tail"
        )
    return _Z_P95 - math.sqrt(disc)


@dataclass(frozen=True)
class Lengths:
    """A length distribution: ``mean`` alone (every request the same), or a lognormal with this
    mean and 95th percentile, cut at its 99.9th (the longest request a workload states)."""

    mean: int
    p95: int | None = None

    def sigma(self, name: str) -> float:
        return 0.0 if self.p95 is None else lognormal_sigma(self.mean, self.p95, name)

    def longest(self, name: str) -> int:
        s = self.sigma(name)
        if s == 0.0:
            return self.mean
        mu = math.log(self.mean) - s * s / 2.0
        return min(MAX_TOKENS, max(self.mean, math.ceil(math.exp(mu + _Z_P999 * s))))

    def sampler(self, name: str, rng: random.Random) -> Any:
        s = self.sigma(name)
        if s == 0.0:
            return lambda: self.mean
        mu = math.log(self.mean) - s * s / 2.0
        cap = self.longest(name)
        return lambda: max(1, min(cap, round(rng.lognormvariate(mu, s))))


@dataclass(frozen=True)
class Traffic:
    """What arrives: ``rate`` requests/s to the whole endpoint, lengths (fixed, or a mean and a
    p95), how bursty (``burstiness``: the gamma shape of inter-arrival times, 1 Poisson, below
    1 burstier), the prompt tokens every request shares at its start (a system prompt the
    prefix cache holds), or a trace (its own arrivals and lengths; ``rate`` then rescales its
    time axis to that mean rate)."""

    rate: float
    prompt_tokens: int
    output_tokens: int
    prompt_p95: int | None = None
    output_p95: int | None = None
    burstiness: float = 1.0
    shared_prefix_tokens: int = 0
    trace: tuple[TraceRequest, ...] | None = None

    def __post_init__(self) -> None:
        _check_number("rate", self.rate, 0.0, MAX_RATE)
        for name in ("prompt_tokens", "output_tokens"):
            _check_int(name, getattr(self, name), 1, MAX_TOKENS)
        for name in ("prompt_p95", "output_p95"):
            value = getattr(self, name)
            if value is not None:
                _check_int(name, value, 1, MAX_TOKENS)
        _check_number("burstiness", self.burstiness, 0.0, 100.0)
        _check_int("shared_prefix_tokens", self.shared_prefix_tokens, 0, self.prompt_tokens)
        self.prompt_lengths.sigma("prompt tokens")
        self.output_lengths.sigma("output tokens")
        if self.trace is not None:
            if len(self.trace) < 2:
                raise ValueError("a trace needs at least 2 requests")
            times = [r.arrival_s for r in self.trace]
            if max(times) <= min(times):
                raise ValueError(
                    "every request of the trace arrives at one instant: no rate can rescale it"
                )

    @property
    def prompt_lengths(self) -> Lengths:
        return Lengths(self.prompt_tokens, self.prompt_p95)

    @property
    def output_lengths(self) -> Lengths:
        return Lengths(self.output_tokens, self.output_p95)

    def longest_request(self) -> int:
        """Prompt + output tokens of the longest request this traffic sends (what max-model-len
        must hold)."""
        if self.trace is not None:
            return max(r.prompt_tokens + r.output_tokens for r in self.trace)
        return self.prompt_lengths.longest("prompt tokens") + self.output_lengths.longest(
            "output tokens"
        )

    def requests(self, count: int, seed: int) -> list[tuple[float, int, int]]:
        """``count`` (arrival s, prompt, output), arrivals ascending. The arrival and length
        draws come from separate streams of the seed and arrivals are drawn at rate 1 then
        scaled, so the same seed at another rate sends the same requests, only closer."""
        if self.trace is not None:
            trace = sorted(self.trace, key=lambda r: r.arrival_s)[:count]
            start, span = trace[0].arrival_s, trace[-1].arrival_s - trace[0].arrival_s
            if span <= 0:
                raise ValueError(
                    f"the trace's first {len(trace)} requests arrive at one instant: no rate "
                    "can rescale them"
                )
            scale = (len(trace) - 1) / span / self.rate
            return [
                ((r.arrival_s - start) * scale, r.prompt_tokens, r.output_tokens) for r in trace
            ]
        gaps = random.Random(f"{seed}/arrivals")
        lengths = random.Random(f"{seed}/lengths")
        prompt = self.prompt_lengths.sampler("prompt tokens", lengths)
        output = self.output_lengths.sampler("output tokens", lengths)
        b = self.burstiness
        out, t = [], 0.0
        for _ in range(count):
            out.append((t / self.rate, prompt(), output()))
            t += gaps.expovariate(1.0) if b == 1.0 else gaps.gammavariate(b, 1.0 / b)
        return out


class _Req:
    __slots__ = (
        "cached",
        "decode_left",
        "done",
        "first",
        "index",
        "kv",
        "last",
        "output",
        "prefill_left",
        "prompt",
        "replica",
        "sent",
    )

    def __init__(self, index: int, sent: float, prompt: int, output: int) -> None:
        self.index, self.sent, self.prompt, self.output = index, sent, prompt, output
        self.cached = 0
        self.prefill_left = 0.0
        self.decode_left = 0.0
        self.kv = 0.0
        self.first = -1.0
        self.last = 0.0
        self.done = -1.0
        self.replica = -1


class _Replica:
    __slots__ = (
        "api_free",
        "arriving",
        "bulk",
        "in_flight",
        "kv_used",
        "prefix_cached",
        "running",
        "version",
        "waiting",
    )

    def __init__(self) -> None:
        self.waiting: deque[_Req] = deque()
        self.running: list[_Req] = []
        self.kv_used = 0.0
        self.api_free = 0.0
        #: Requests sent to it and not answered (Cloud Run's concurrency counts these).
        self.in_flight = 0
        #: In the API server, not yet at the engine (the picker counts them as queued).
        self.arriving = 0
        #: The step block in progress: (start, step seconds, steps, decoding requests, prefill
        #: chunks as (request, tokens)); None when idle.
        self.bulk: tuple[float, float, int, list[_Req], list[tuple[_Req, float]]] | None = None
        self.version = 0
        self.prefix_cached = False


@dataclass(frozen=True)
class SimResult:
    """What a simulation measured, at the client (the front end included), in ms."""

    requests: int
    warmup: int
    rate: float
    replicas: int
    balancer: str
    seed: int
    #: {"ttft"|"itl"|"e2e": {"p50", "p95", "p99", "mean"}}
    latency_ms: dict[str, dict[str, float]]
    #: Relative half-width of each percentile's 95 % interval from the number of requests
    #: (order statistics; ITL counted per request, not per token, since a request's gaps are
    #: not independent).
    error: dict[str, dict[str, float]]
    saturated: bool
    throughput_rps: float
    output_tokens_per_s: float
    preemptions: int
    #: Requests that waited at the platform's front for an instance slot (Cloud Run).
    held_at_front: int = 0
    #: Engine steps run, and the seconds engines were busy running them (all replicas).
    steps: int = 0
    busy_s: float = 0.0


def _quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default, the benchmark's)."""
    pos = (len(values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (pos - lo) * (values[hi] - values[lo])


def _order_error(values: Sequence[float], q: float, n: int) -> float:
    """Relative half-width of the distribution-free 95 % interval of the q-quantile of ``n``
    samples (``values`` sorted, possibly more of them, scaled to their count)."""
    half = _Z95 * math.sqrt(n * q * (1 - q))
    scale = len(values) / n
    lo = max(0, math.floor((n * q - half) * scale))
    hi = min(len(values) - 1, math.ceil((n * q + half) * scale))
    mid = _quantile(values, q)
    return 0.0 if mid <= 0 else (values[hi] - values[lo]) / 2.0 / mid


def simulate(
    model: StepModel,
    traffic: Traffic,
    *,
    replicas: int = 1,
    balancer: str = "engine",
    instance_concurrency: int | None = None,
    requests: int = DEFAULT_REQUESTS,
    seed: int = 0,
    warmup: float = WARMUP,
) -> SimResult:
    """Run ``requests`` requests of ``traffic`` through ``replicas`` copies of ``model`` behind
    ``balancer`` (:data:`BALANCERS`); ``instance_concurrency`` is Cloud Run's per-instance limit
    (default the engine's max_num_seqs, as the stacks derive it). The first ``warmup`` share
    of requests (default :data:`WARMUP`) is left out of the figures; 0 counts every request,
    as a benchmark without warm-up does (a trace replayed against a measured run)."""
    if not (isinstance(warmup, int | float) and 0 <= warmup <= 0.5):
        raise ValueError(f"warmup must be a share in [0, 0.5], got {warmup!r}")
    if balancer not in BALANCERS:
        raise ValueError(f"balancer must be one of {', '.join(BALANCERS)}, got {balancer!r}")
    _check_int("replicas", replicas, 1, 1000)
    if balancer == "engine" and replicas != 1:
        raise ValueError("balancer 'engine' is one replica; name the platform's balancer")
    _check_int("requests", requests, 10, MAX_REQUESTS)
    limit = instance_concurrency or model.max_num_seqs
    _check_int("instance_concurrency", limit, 1, 1000)
    drawn = traffic.requests(requests, seed)
    longest = max(p + o for _, p, o in drawn)
    if model.max_model_len is not None and longest > model.max_model_len:
        raise ValueError(
            f"a request of {longest} tokens is longer than max-model-len ({model.max_model_len}):"
            " vLLM refuses it"
        )
    return _Run(model, traffic, replicas, balancer, limit, drawn, seed, warmup).result()


def replay(
    model: StepModel,
    trace: Sequence[TraceRequest],
    after: Sequence[tuple[int, float] | None] | None = None,
) -> list[tuple[float, float]]:
    """Each request of ``trace`` through one engine (no rescaling, no warm-up): its (first
    token, last token) in seconds after its send, at the client (the front end included), in
    the trace's order. What a calibration compares request by request with what a benchmark
    measured, whatever its client did. A request is sent at its ``arrival_s``, or, where
    ``after[i]`` is ``(j, think)``, ``think`` seconds after request ``j``'s last token (a
    closed loop's client sends its next request on an answer: replayed so, the simulated engine
    never holds more requests than the client had in flight, and the waves or the stagger the
    run had form or not as they do in the simulated engine)."""
    if not trace:
        raise ValueError("a replay needs at least one request")
    if after is not None and len(after) != len(trace):
        raise ValueError(f"after must have one entry per request ({len(trace)}), got {len(after)}")
    for i, link in enumerate(after or ()):
        if link is None:
            continue
        j, think = link
        if not (0 <= j < len(trace) and j != i and math.isfinite(think) and think >= 0):
            raise ValueError(f"request {i} follows {j} after {think!r} s: not a request or a wait")
    for r in trace:
        _check_int("prompt_tokens", r.prompt_tokens, 1, MAX_TOKENS)
        _check_int("output_tokens", r.output_tokens, 1, MAX_TOKENS)
        if not math.isfinite(r.arrival_s):
            raise ValueError(f"a request's send time must be finite, got {r.arrival_s!r}")
    longest = max(r.prompt_tokens + r.output_tokens for r in trace)
    if model.max_model_len is not None and longest > model.max_model_len:
        raise ValueError(
            f"a request of {longest} tokens is longer than max-model-len ({model.max_model_len}):"
            " vLLM refuses it"
        )
    order = sorted(range(len(trace)), key=lambda i: trace[i].arrival_s)
    position = {i: n for n, i in enumerate(order)}
    # From the first send (the engine starts idle at 0; a trace's times may start anywhere).
    origin = trace[order[0]].arrival_s
    drawn = [
        (trace[i].arrival_s - origin, trace[i].prompt_tokens, trace[i].output_tokens) for i in order
    ]
    follow: dict[int, list[tuple[int, float]]] = {}
    for i, link in enumerate(after or ()):
        if link is not None:
            follow.setdefault(position[link[0]], []).append((position[i], link[1]))
    if follow and _cyclic(follow, len(trace)):
        raise ValueError("the requests' order of sending is a cycle: none can be sent first")
    first = trace[order[0]]
    # The traffic only names what every request shares (nothing): the arrivals are the trace's.
    traffic = Traffic(
        rate=1.0, prompt_tokens=first.prompt_tokens, output_tokens=first.output_tokens
    )
    run = _Run(model, traffic, 1, "engine", model.max_num_seqs, drawn, 0, 0.0, follow)
    front = model.front_end_s
    out: list[tuple[float, float]] = [(0.0, 0.0)] * len(trace)
    for req, i in zip(run.reqs, order, strict=True):
        out[i] = (req.first - req.sent + front, req.done - req.sent + front)
    return out


def _cyclic(follow: dict[int, list[tuple[int, float]]], n: int) -> bool:
    """Whether some request waits, through the chain of those it follows, on itself."""
    indegree = [0] * n
    for successors in follow.values():
        for j, _ in successors:
            indegree[j] += 1
    ready = [i for i in range(n) if indegree[i] == 0]
    seen = 0
    while ready:
        i = ready.pop()
        seen += 1
        for j, _ in follow.get(i, ()):
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
    return seen < n


_END, _ENGINE, _ARRIVE = 0, 1, 2


class _Run:
    """One simulation's state and event loop (events at one instant: step ends first, then
    requests reaching an engine, then client arrivals)."""

    def __init__(
        self,
        model: StepModel,
        traffic: Traffic,
        replicas: int,
        balancer: str,
        limit: int,
        drawn: list[tuple[float, int, int]],
        seed: int,
        warmup: float = WARMUP,
        follow: dict[int, list[tuple[int, float]]] | None = None,
    ) -> None:
        self.m = model
        self.traffic = traffic
        self.balancer = balancer
        self.limit = limit
        self.seed = seed
        self.k = model.speculation.num_speculative_tokens if model.speculation else 0
        self.tps = model.tokens_per_step
        self.kv_cap = model.kv_capacity_tokens or math.inf
        self.overhead = model.coefficients.prefill_overhead_s
        self.reps = [_Replica() for _ in range(replicas)]
        self.reqs = [_Req(i, t, p, o) for i, (t, p, o) in enumerate(drawn)]
        self.warm = int(len(self.reqs) * warmup)
        self.pick = random.Random(f"{seed}/balancer")
        self.front: deque[_Req] = deque()
        self.held = 0
        self.preemptions = 0
        self.steps = 0
        self.busy = 0.0
        self.itl: list[tuple[float, float]] = []
        self.events: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        #: Requests sent on another's answer (a closed loop's client): index -> (next, think s).
        self.follow = follow or {}
        followers = {j for successors in self.follow.values() for j, _ in successors}
        for r in self.reqs:
            if r.index not in followers:
                self._push(r.sent, _ARRIVE, r.index, 0)
        self._loop()

    def _push(self, t: float, kind: int, a: int, b: int) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, a, b))

    def _loop(self) -> None:
        while self.events:
            t, kind, _, a, b = heapq.heappop(self.events)
            if kind == _END:
                rep = self.reps[a]
                if rep.version == b and rep.bulk is not None:
                    self._finish(a, t)
            elif kind == _ENGINE:
                self._reach_engine(self.reqs[a], t)
            else:
                self._route(self.reqs[a], t)

    # -- the balancer and the API server ------------------------------------------------
    def _route(self, req: _Req, t: float) -> None:
        reps = self.reps
        if self.balancer == "engine":
            i = 0
        elif self.balancer == "random":
            i = self.pick.randrange(len(reps))
        elif self.balancer == "endpoint-picker":
            i = min(
                range(len(reps)),
                key=lambda j: (
                    len(reps[j].waiting) + reps[j].arriving,
                    reps[j].kv_used / self.kv_cap if self.kv_cap != math.inf else 0.0,
                    len(reps[j].running),
                ),
            )
        else:
            free = [j for j in range(len(reps)) if reps[j].in_flight < self.limit]
            if not free:
                self.front.append(req)
                self.held += 1
                return
            i = min(free, key=lambda j: reps[j].in_flight)
        self._send(req, i, t)

    def _send(self, req: _Req, i: int, t: float) -> None:
        rep = self.reps[i]
        req.replica = i
        rep.in_flight += 1
        rep.arriving += 1
        rep.api_free = (
            max(t, rep.api_free)
            + self.m.server_request_s
            + (self.m.server_prompt_token_s * req.prompt)
        )
        self._push(rep.api_free, _ENGINE, req.index, 0)

    def _reach_engine(self, req: _Req, t: float) -> None:
        rep = self.reps[req.replica]
        rep.arriving -= 1
        shared = self.traffic.shared_prefix_tokens
        if shared and rep.prefix_cached:
            # A prompt no longer than the prefix still computes its last token (vLLM never
            # serves a whole prompt from the cache).
            req.cached = min(shared, req.prompt - 1)
        rep.prefix_cached = rep.prefix_cached or shared > 0
        req.prefill_left = float(req.prompt - req.cached)
        req.decode_left = self.m.decode_steps(req.output)
        rep.waiting.append(req)
        if rep.bulk is None:
            self._plan(req.replica, t)
        else:
            self._cut(req.replica, t)

    # -- one replica's engine ---------------------------------------------------------
    def _cut(self, i: int, t: float) -> None:
        """A request reached a busy engine: a block of decode steps ends with the step in
        progress, so the next step can admit it."""
        rep = self.reps[i]
        assert rep.bulk is not None
        start, step, steps, decoding, chunks = rep.bulk
        if steps <= 1:
            return
        done = max(1, math.ceil((t - start) / step - 1e-12))
        if done < steps:
            rep.bulk = (start, step, done, decoding, chunks)
            rep.version += 1
            self._push(start + done * step, _END, i, rep.version)

    def _preempt(self, rep: _Replica, keep: _Req) -> bool:
        """Free the newest running request's KV (it recomputes later); False when only
        ``keep`` is left to free."""
        victim = rep.running[-1]
        if victim is keep:
            return False
        rep.running.pop()
        rep.kv_used -= victim.kv
        victim.prefill_left = float(victim.prompt - victim.cached) + (
            victim.output - 1 - victim.decode_left * self.tps if victim.first >= 0 else 0.0
        )
        victim.kv = 0.0
        rep.waiting.appendleft(victim)
        self.preemptions += 1
        return True

    def _plan(self, i: int, t: float) -> None:
        """Build the next step (or block of identical decode steps) at ``t`` as the scheduler
        would, and schedule its end."""
        rep = self.reps[i]
        m = self.m
        budget = float(m.max_num_batched_tokens)
        decoding: list[_Req] = []
        chunks: list[tuple[_Req, float]] = []
        preempted = False
        j = 0
        while j < len(rep.running):  # a preempted request is the last one: indices hold
            req = rep.running[j]
            j += 1
            prefilling = req.prefill_left > 0
            need = min(req.prefill_left, budget) if prefilling else float(1 + self.k)
            if budget < (1 if prefilling else 1 + self.k):
                continue
            grow = need if prefilling else self.tps
            while rep.kv_used + grow > self.kv_cap and self._preempt(rep, req):
                preempted = True
            if rep.kv_used + grow > self.kv_cap:
                continue
            budget -= need
            if prefilling:
                chunks.append((req, need))
            else:
                decoding.append(req)
            rep.kv_used += grow
            req.kv += grow
        while rep.waiting and not preempted and len(rep.running) < m.max_num_seqs and budget >= 1:
            req = rep.waiting[0]
            need = min(req.prefill_left, budget)
            if rep.kv_used + need > self.kv_cap:
                break
            rep.waiting.popleft()
            rep.running.append(req)
            budget -= need
            chunks.append((req, need))
            rep.kv_used += need
            req.kv += need
        if not decoding and not chunks:
            rep.bulk = None
            if rep.waiting or rep.running:
                raise ValueError(
                    "a request needs more KV cache than the engine has: the memory plan "
                    "does not fit this workload"
                )
            return
        running = len(decoding) + len(chunks)
        steps = 1
        if not chunks and not (rep.waiting and len(rep.running) < m.max_num_seqs):
            # Nothing changes but lengths until the next completion or KV limit: one block.
            steps = max(1, math.ceil(min(r.decode_left for r in decoding) - 1e-9))
            room = self.kv_cap - rep.kv_used
            if room != math.inf:
                steps = max(1, min(steps, 1 + int(room // (len(decoding) * self.tps))))
        context = (rep.kv_used + (steps - 1) / 2.0 * self.tps * len(decoding)) / running
        prefill = sum(n for _, n in chunks)
        step = m.step_s(len(decoding), prefill, running, context)
        rep.bulk = (t, step, steps, decoding, chunks)
        rep.version += 1
        self._push(t + steps * step, _END, i, rep.version)

    def _finish(self, i: int, t: float) -> None:
        rep = self.reps[i]
        assert rep.bulk is not None
        start, step, steps, decoding, chunks = rep.bulk
        rep.bulk = None
        self.steps += steps
        self.busy += steps * step
        tps = self.tps
        warm = self.warm
        extra = (steps - 1) * tps * len(decoding)
        rep.kv_used += extra
        uniform = 0  # gaps of one step, the usual case, counted together
        finished: list[_Req] = []
        for req in decoding:
            req.kv += (steps - 1) * tps
            req.decode_left -= steps
            if req.index >= warm:
                first_gap = start + step - req.last
                if abs(first_gap - step) > 1e-9:  # it sat out a step, or was preempted
                    self.itl.append((first_gap / tps, tps))
                    uniform += steps - 1
                else:
                    uniform += steps
            req.last = t
            if req.decode_left <= 1e-9:
                finished.append(req)
        if uniform:
            self.itl.append((step / tps, uniform * tps))
        for req, n in chunks:
            req.prefill_left -= n
            if req.prefill_left <= 1e-9:
                req.prefill_left = 0.0
                if req.first < 0:
                    req.first = t + self.overhead
                req.last = t
                if req.decode_left <= 1e-9:
                    finished.append(req)
        for req in finished:
            req.done = t + self.overhead
            for j, think in self.follow.get(req.index, ()):
                nxt = self.reqs[j]
                nxt.sent = req.done + self.m.front_end_s + think
                self._push(nxt.sent, _ARRIVE, j, 0)
            rep.running.remove(req)
            rep.kv_used -= req.kv
            rep.in_flight -= 1
            if self.front:
                self._send(self.front.popleft(), i, t)
        self._plan(i, t)

    # -- the figures ------------------------------------------------------------------
    def _first_token_jitter(self, counted: Sequence[_Req], ttft: Sequence[float]) -> list[float]:
        """How much of each first token (ms) the spread moves: its time, but never more than
        its first token alone takes (its API-server time and its uncached prompt's steps with
        nothing else running), never the time it queued."""
        m = self.m
        alone: dict[tuple[int, int], float] = {}
        out = []
        for r, t in zip(counted, ttft, strict=True):
            key = (r.prompt, max(1, r.prompt - int(r.cached)))  # its prompt, its uncached part
            if key not in alone:  # StepModel.single_stream's, its cached tokens not computed
                whole = m.single_stream(Workload(r.prompt, 1)).ttft_s
                cached = m.prefill_s(r.prompt, 0.0, r.prompt) - m.prefill_s(key[1], 0.0, r.prompt)
                alone[key] = (whole - cached) * 1e3
            out.append(min(t, alone[key]))
        return out

    def result(self) -> SimResult:
        counted = self.reqs[self.warm :]
        front = self.m.front_end_s
        n = len(counted)
        ttft = [(r.first - r.sent + front) * 1000.0 for r in counted]
        e2e = [(r.done - r.sent + front) * 1000.0 for r in counted]
        values: dict[str, Sequence[float]]
        if self.m.ttft_spread:
            # Each first token at each of the spread's multipliers, and its E2E moved with it
            # (the answer's last token comes as much later as its first): a first token is
            # never later than its answer's end, and no mean moves.
            jitter = self._first_token_jitter(counted, ttft)
            values = {
                "ttft": _spread(ttft, jitter, self.m.ttft_spread),
                "e2e": _spread(e2e, jitter, self.m.ttft_spread),
            }
        else:
            values = {"ttft": sorted(ttft), "e2e": sorted(e2e)}
        latency: dict[str, dict[str, float]] = {}
        error: dict[str, dict[str, float]] = {}
        for name, sample in values.items():
            latency[name] = {k: float(_quantile(sample, q)) for k, q in PERCENTILES.items()}
            latency[name]["mean"] = float(sum(sample) / len(sample))
            error[name] = {k: float(_order_error(sample, q, n)) for k, q in PERCENTILES.items()}
        token_gaps = [(v * 1000.0, w) for v, w in self.itl]
        if not token_gaps or sum(w for _, w in token_gaps) <= 0:  # one-token answers: no gaps
            latency["itl"] = {k: 0.0 for k in (*PERCENTILES, "mean")}
            error["itl"] = {k: 0.0 for k in PERCENTILES}
        else:
            # Each gap spread around its step's mean as the calibration measured (none: as it
            # is), by at most what a decode step at a full batch spreads by: the jitter a long
            # gap carries (a prefill in its step, a step sat out) does not grow with the work
            # it waited for.
            m = self.m
            context = self.traffic.prompt_tokens + self.traffic.output_tokens / 2.0
            full = 1000.0 * m.step_s(m.max_num_seqs, 0.0, m.max_num_seqs, context)
            spread = m.itl_spread or (1.0,)
            latency["itl"], error["itl"] = _gap_figures(token_gaps, spread, full, n)
        first, last = counted[0].sent, counted[-1].sent
        arrived = len(counted)
        answered = sum(1 for r in counted if r.done <= last + 1e-9)
        slots = len(self.reps) * self.m.max_num_seqs
        # Saturated: more left unanswered when the last request arrives than the slots hold,
        # or requests in flight growing through the second half of the arrivals (many
        # replicas' slots can hide a queue that grows without bound).
        mid = counted[len(counted) // 2].sent
        done = sorted(r.done for r in counted)

        def in_flight(t: float) -> int:
            return sum(1 for r in counted if r.sent <= t) - bisect.bisect_right(done, t)

        # Bursts make the number in flight swing: the growth that counts scales with the
        # arrivals' own squared coefficient of variation (1 for Poisson, 1/b for gamma b, a
        # trace's own), and the first token must come later through the run too (a queue that
        # grows), not only the batch (a run still filling its replicas).
        gaps = [b.sent - a.sent for a, b in itertools.pairwise(counted)]
        mean_gap = sum(gaps) / len(gaps) if gaps else 0.0
        cv2 = (
            sum((g - mean_gap) ** 2 for g in gaps) / len(gaps) / mean_gap**2
            if mean_gap > 0
            else 1.0
        )
        growth = in_flight(last) - in_flight(mid)
        quarter = max(1, len(counted) // 4)
        early = sum(r.first - r.sent for r in counted[quarter : 2 * quarter]) / quarter
        late = sum(r.first - r.sent for r in counted[-quarter:]) / quarter
        grows = growth > 3 + 0.1 * max(1.0, cv2) * (arrived - arrived // 2) and late > 1.5 * early
        saturated = arrived - answered > max(2 * slots, 0.05 * arrived) or grows
        span = max(r.done for r in counted) - first
        out_tokens = sum(r.output for r in counted)
        return SimResult(
            requests=len(self.reqs),
            warmup=self.warm,
            rate=self.traffic.rate,
            replicas=len(self.reps),
            balancer=self.balancer,
            seed=self.seed,
            latency_ms=latency,
            error=error,
            saturated=saturated,
            throughput_rps=n / span if span > 0 else math.inf,
            output_tokens_per_s=out_tokens / span if span > 0 else math.inf,
            preemptions=self.preemptions,
            held_at_front=self.held,
            steps=self.steps,
            busy_s=self.busy,
        )


def _spread(values: Sequence[float], jitter: Sequence[float], spread: Sequence[float]) -> Any:
    """Each value at each of the spread's multipliers, ``value + (f - 1) * jitter``, sorted
    (a NumPy array: a run's thousands of requests times the spread's points)."""
    import numpy as np

    out = np.asarray(values)[:, None] + np.asarray(jitter)[:, None] * (np.asarray(spread) - 1.0)
    return np.sort(out, axis=None)


def _gap_figures(
    gaps: Sequence[tuple[float, float]], spread: Sequence[float], full: float, n: int
) -> tuple[dict[str, float], dict[str, float]]:
    """The token gaps' percentiles, mean and errors with each gap (ms, weight) at each of the
    spread's multipliers, ``v + (f - 1) * min(v, full)``: over the weighted values, each
    percentile the first value whose cumulative weight reaches it, and the error from ``n``
    values spread evenly through them. Without a spread, ``(1.0,)``. NumPy: a run has
    thousands of gap groups, times a spread's 100 points."""
    import numpy as np

    v = np.array([g for g, _ in gaps])
    w = np.array([x for _, x in gaps])
    f = np.asarray(spread) - 1.0
    values = (v[:, None] + np.minimum(v, full)[:, None] * f).ravel()
    weights = np.repeat(w / len(spread), len(spread))
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    cumulative = np.cumsum(weights)
    total = float(cumulative[-1])
    last = len(values) - 1

    def at(targets: Any) -> Any:  # the first value whose cumulative weight reaches each
        return values[np.minimum(np.searchsorted(cumulative, targets, side="left"), last)]

    latency = {k: float(at(q * total)) for k, q in PERCENTILES.items()}
    latency["mean"] = float(np.dot(values, weights) / total)
    expanded = at((np.arange(n) + 0.5) / n * total)
    error = {k: float(_order_error(expanded, q, n)) for k, q in PERCENTILES.items()}
    return latency, error
