"""The cheapest deployment that meets a workload's SLO (`gemma4 plan search`).

Pure: the stack templates come in as flat settings (the shipped stack files' own keys); nothing
is read or written here. The space is every platform and hardware the program deploys (a
template per platform, its hardware swapped for each the platform offers) x checkpoint x the
engine settings that change the answer: max-model-len fitted to the workload's longest
request, KV cache dtype, MTP off or on with its draft count, max-num-batched-tokens, and
max-num-seqs as many as the KV cache holds at the workload's mean length (at most
:data:`MOST_SEQS`) x capacity type (on-demand, spot, flex-start when asked). A candidate is
answered only when the settings validate (the rules the program holds every stack to) and the
memory plan fits.

A fast screen (the step model's closed-form means, each percentile target held as a bound on
the mean: necessary, not sufficient) ranks candidates by cost; the cheapest are then sized by
the scheduler simulation (:mod:`serving.capacity.simulate`) behind their platform's balancer:
the fewest replicas whose simulated percentiles meet every target at the planned load (the
offered rate x (1 + band) / (1 - headroom), as every replica count of the planner is planned).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from serving.capacity.coldstart import cold_start
from serving.capacity.costs import Cost
from serving.capacity.idle import Shape, chosen, for_stack
from serving.capacity.perf import Slo, StepModel, Workload
from serving.capacity.perf_stack import HEADROOM, MAX_REPLICAS, model_for_settings
from serving.capacity.plan_perf import endpoint_cost, replica_key
from serving.capacity.simulate import DEFAULT_REQUESTS, SimResult, Traffic, simulate
from serving.capacity.start_budget import waits
from serving.catalog.hardware import GKE_SHAPES, HARDWARE, Platform
from serving.catalog.models import MODELS, Quantization, Role
from serving.config.checks import SettingsError
from serving.config.groups import MAX_REQUESTS_PER_SECOND
from serving.config.settings import Settings, load_settings, stack_platform

METRICS = ("ttft", "itl", "e2e")
STATS = ("mean", "p50", "p95", "p99")
CAPACITY_TYPES = ("on-demand", "spot", "flex-start")
PLATFORMS = ("cloud-run", "gke", "tpu-vm")
#: The balancer in front of each platform's replicas (:data:`serving.capacity.simulate.BALANCERS`).
BALANCER = {"cloud-run": "cloud-run", "gke": "endpoint-picker", "tpu-vm": "random"}
#: vLLM's default max-num-seqs: the most a candidate is given.
MOST_SEQS = 256
#: Chunk budgets tried (vLLM's default for online serving is 8192 on GPUs; a smaller one cuts
#: the pause a long prompt puts in every decoding sequence's tokens; below ~2,500 one image of
#: Gemma 4 no longer fits a step, which the settings refuse).
BATCHED_TOKENS = (4096, 8192)
#: Draft counts tried where the checkpoint has an MTP assistant (0: MTP off).
DRAFTS = (0, 2, 4)
KV_DTYPES = ("auto", "fp8")
#: Requests simulated per sizing run unless told otherwise (`--requests`).
SIZING_REQUESTS = DEFAULT_REQUESTS // 2
#: Candidates simulated after the screen (the cheapest by the screen's cost).
FINALISTS = 4
#: The workload's longest request is rounded up to this for max-model-len.
LEN_STEP = 256


@dataclass(frozen=True)
class Target:
    """One latency objective: ``metric`` (ttft, itl, e2e) at ``stat`` (mean, p50, p95, p99)."""

    metric: str
    stat: str
    ms: float

    def __post_init__(self) -> None:
        if self.metric not in METRICS or self.stat not in STATS:
            raise ValueError(f"unknown target {self.metric} {self.stat}")
        if not (math.isfinite(self.ms) and 0 < self.ms <= 3_600_000):
            raise ValueError(f"{self.flag} must be a number in (0, 3600000], got {self.ms!r}")

    @property
    def flag(self) -> str:
        middle = "" if self.stat == "mean" else f"-{self.stat}"
        return f"--{self.metric}{middle}-ms"

    @property
    def label(self) -> str:
        return f"{self.metric.upper()} {self.stat} <= {self.ms:g} ms"

    def value(self, result: SimResult) -> float:
        return result.latency_ms[self.metric][self.stat]


def mean_slo(targets: tuple[Target, ...]) -> Slo:
    """The closed forms' objective: each target's bound held by the mean (a mean above a
    percentile's bound cannot meet it; the converse needs the simulation)."""
    bound: dict[str, float] = {}
    for t in targets:
        bound[t.metric] = min(bound.get(t.metric, math.inf), t.ms)
    return Slo(bound.get("ttft"), bound.get("itl"), bound.get("e2e"))


def describe(targets: tuple[Target, ...]) -> str:
    return ", ".join(t.label for t in targets) or "none"


@dataclass(frozen=True)
class Goal:
    """What the user asks: the traffic, the targets and the limits of the search."""

    traffic: Traffic
    targets: tuple[Target, ...]
    max_replicas: int | None = None
    platforms: tuple[str, ...] = PLATFORMS
    capacity: tuple[str, ...] = ("on-demand", "spot")
    budget_usd_per_hour: float | None = None
    #: Simulated requests per sizing run, and the seed.
    requests: int = SIZING_REQUESTS
    seed: int = 0
    #: Per-draft-token MTP acceptance to predict with (None: a calibration's, else the prior).
    mtp_acceptance: float | None = None
    #: Stack names whose settings are preferred as a platform's starting point (the shipped).
    preferred: tuple[str, ...] = ()
    #: The traffic over a day (`--traffic`): each answer then keeps the fewest min instances
    #: whose cold starts break no percentile target (serving.capacity.idle).
    shape: Shape | None = None

    def __post_init__(self) -> None:
        if not self.targets:
            raise ValueError("give at least one latency target (e.g. --ttft-p95-ms 2000)")
        for name, values, allowed in (
            ("--platforms", self.platforms, PLATFORMS),
            ("--capacity", self.capacity, CAPACITY_TYPES),
        ):
            bad = [v for v in values if v not in allowed]
            if bad or not values:
                raise ValueError(
                    f"{name}: {', '.join(bad) or 'nothing'} is not one of {', '.join(allowed)}"
                )


@dataclass
class Sizing:
    """A candidate sized: its replicas, their cost and what the simulation predicts."""

    replicas: int | None
    #: At the offered rate (what a user sees), and at the planned load (what was checked).
    at_rate: SimResult | None
    planned: SimResult | None
    meets: bool
    why: str
    binding: str | None = None
    quota_capped: bool = False
    #: Why the settings refuse this count (a rule that depends on it), when they do.
    refused: str | None = None


@dataclass
class Candidate:
    """One configuration: the settings a stack file would hold, validated."""

    platform: str
    hardware: str
    capacity: str
    raw: dict[str, Any]
    settings: Settings
    model: StepModel
    #: The screen's replicas and cost (None: the screen says it cannot meet the targets).
    screen_replicas: int | None = None
    screen_usd_per_hour: float | None = None
    sizing: Sizing | None = None
    calibrated: bool = False
    #: The stack file its settings start from.
    template: str = ""
    #: The sized answer's cost in the four figures (None until sized).
    cost: Cost | None = None
    #: With a traffic shape: each min-instance setting priced against its cold starts.
    min_instances: dict[str, Any] | None = None

    @property
    def most_replicas(self) -> int:
        return replica_key(self.settings)[1]

    @property
    def key(self) -> str:
        v = self.settings.vllm
        m = self.settings.model
        mtp = f"mtp{m.num_speculative_tokens}" if m.speculative_method == "mtp" else "no-mtp"
        return (
            f"{self.platform}/{self.hardware}/{self.capacity}/{m.card.folder}/{v.kv_cache_dtype}/"
            f"{mtp}/seqs{v.max_num_seqs}/mbt{v.max_num_batched_tokens}/len{v.max_model_len}"
        )


def cost(settings: Settings, traffic: Traffic, replicas: int | None) -> Cost | None:
    """What ``replicas`` serving the traffic cost, fixed costs included
    (:func:`serving.capacity.plan_perf.endpoint_cost`: the planner's one cost figure); None
    when no count serves it. An unknown instance price leaves every figure None."""
    w = Workload(traffic.prompt_tokens, traffic.output_tokens)
    return endpoint_cost(settings, traffic.rate, replicas, w)


def _usd(c: Cost | None) -> float | None:
    return None if c is None else c.usd_per_hour


def fitted_len(traffic: Traffic) -> int:
    """max-model-len for the workload: its longest request, rounded up to :data:`LEN_STEP`."""
    return max(LEN_STEP, math.ceil(traffic.longest_request() / LEN_STEP) * LEN_STEP)


def _coerce(value: Any) -> Any:
    """A template's value as Pulumi hands it over (text) back to its YAML type."""
    if isinstance(value, str):
        if value in ("true", "false"):
            return value == "true"
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                return value
    return value


def _platform_keys(
    platform: str, capacity: str, replicas: int, base: Mapping[str, Any]
) -> dict[str, Any]:
    if platform == "cloud-run":
        low = min(int(_coerce(base.get("minInstances", 0))), replicas)
        return {"maxInstances": replicas, "minInstances": low}
    if platform == "gke":
        low = min(int(_coerce(base.get("minReplicas", 1))), replicas)
        return {"minReplicas": max(1, low), "maxReplicas": replicas, "nodeProvisioning": capacity}
    out: dict[str, Any] = {"replicas": replicas, "provisioning": capacity}
    if capacity != "flex-start":
        out.update({"maxRunHours": None, "validUntilHours": None})
    return out


def with_replicas(c: Candidate, replicas: int) -> dict[str, Any]:
    """The candidate's settings with ``replicas`` (None values removed)."""
    raw = {**c.raw, **_platform_keys(c.platform, c.capacity, replicas, c.raw)}
    return {k: v for k, v in raw.items() if v is not None}


def _hardware_for(platform: str) -> list[str]:
    if platform == "gke":
        return sorted(GKE_SHAPES)
    want = Platform.TPU if platform == "tpu-vm" else Platform.CLOUD_RUN
    return sorted(k for k, v in HARDWARE.items() if v.platform is want)


def _capacities(platform: str, goal: Goal) -> list[str]:
    offered = ("on-demand",) if platform == "cloud-run" else CAPACITY_TYPES
    return [c for c in offered if c in goal.capacity]


def templates_for(
    stacks: Mapping[str, Mapping[str, Any]],
    platforms: tuple[str, ...],
    preferred: tuple[str, ...] = (),
) -> tuple[dict[tuple[str, str], tuple[str, dict[str, Any]]], list[str]]:
    """The settings each (platform, hardware) starts from: the stack file of exactly that
    target (the ``preferred`` names first, the package's shipped stacks; then by name), else
    one of the same platform and accelerator kind (GPU or TPU) with its hardware swapped and
    its location moved to one the hardware is offered in; and the targets with no stack file
    to start from."""
    by_target: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    order = sorted(stacks.items(), key=lambda item: (item[0] not in preferred, item[0]))
    for name, raw in order:
        try:
            platform = stack_platform(raw)
        except SettingsError:
            continue
        if platform is not None:
            by_target.setdefault((platform, str(raw["hardware"])), (name, dict(raw)))
    out: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    missing = []
    for platform in platforms:
        for hardware in _hardware_for(platform):
            kind = HARDWARE[hardware].platform
            found = by_target.get((platform, hardware))
            if found is None:
                same = sorted(
                    (
                        (name, raw)
                        for (p, h), (name, raw) in by_target.items()
                        if p == platform and HARDWARE[h].platform is kind
                    ),
                    key=lambda item: (item[0] not in preferred, item[0]),
                )
                if not same:
                    missing.append(f"{platform}/{hardware}")
                    continue
                name, raw = same[0]
                raw = {**raw, "hardware": hardware}
                key = "region" if platform == "cloud-run" else "zone"
                offered = HARDWARE[hardware].locations
                if key == "region" and raw.get(key) not in offered and offered:
                    raw[key] = offered[0]
                found = (name, raw)
            out[(platform, hardware)] = found
    return out, missing


def candidates(
    stacks: Mapping[str, Mapping[str, Any]], goal: Goal
) -> tuple[list[Candidate], dict[str, int]]:
    """Every configuration of the space that validates and fits, and why the others were left
    out (counts by reason). ``stacks``: each stack file's flat settings, by stack name."""
    traffic = goal.traffic
    mean_tokens = traffic.prompt_tokens + traffic.output_tokens
    length = fitted_len(traffic)
    checkpoints = [k for k, v in MODELS.items() if v.role is Role.TARGET]
    out: list[Candidate] = []
    refused: dict[str, int] = {}

    def refuse(reason: str) -> None:
        refused[reason] = refused.get(reason, 0) + 1

    templates, missing = templates_for(stacks, goal.platforms, goal.preferred)
    for target in missing:
        refuse(f"{target}: no stack file of its platform and accelerator kind to start from")
    for platform in goal.platforms:
        if not _capacities(platform, goal):
            offered = "on-demand" if platform == "cloud-run" else ", ".join(CAPACITY_TYPES)
            refuse(f"{platform}: offers {offered}, not {', '.join(goal.capacity)}")
    for (platform, hardware), (source, template) in templates.items():
        for checkpoint, kv, drafts, mbt in _grid(checkpoints):
            raw: dict[str, Any] = {k: _coerce(v) for k, v in template.items()}
            raw.update(
                {
                    "model": checkpoint,
                    "kvCacheDtype": kv,
                    "maxModelLen": length,
                    "maxNumBatchedTokens": mbt,
                    "labels": [
                        x if not str(x).startswith("hardware=") else f"hardware={hardware}"
                        for x in raw.get("labels", [])
                    ],
                }
            )
            assistant = MODELS[checkpoint].assistant
            if drafts:
                if not assistant:
                    continue
                raw.update(speculativeMethod="mtp", drafter=assistant, numSpeculativeTokens=drafts)
            else:
                raw.update(speculativeMethod="none")
                raw.pop("drafter", None)
                raw.pop("numSpeculativeTokens", None)
            try:
                settings = load_settings(raw)
            except SettingsError as exc:
                refuse(f"{platform}/{hardware}: {_first_line(exc)}")
                continue
            plan = settings.memory_plan()
            if plan is None or not plan.fits:
                refuse(f"{platform}/{hardware}: {checkpoint} does not fit its memory")
                continue
            seqs = max(1, min(MOST_SEQS, int(plan.capacity.reported_tokens // mean_tokens)))
            raw["maxNumSeqs"] = seqs
            shared: tuple[StepModel, bool] | None = None  # the engine is the same on any capacity
            for capacity in _capacities(platform, goal):
                c_raw = {**raw, **_platform_keys(platform, capacity, 1, raw)}
                c_raw = {k: v for k, v in c_raw.items() if v is not None}
                try:
                    c_settings = load_settings(c_raw)
                except SettingsError as exc:
                    refuse(f"{platform}/{hardware}/{capacity}: {_first_line(exc)}")
                    continue
                if shared is None:
                    model, calibration = model_for_settings(
                        c_settings, mtp_acceptance=goal.mtp_acceptance
                    )
                    shared = (model, calibration is not None)
                out.append(
                    Candidate(
                        platform,
                        hardware,
                        capacity,
                        c_raw,
                        c_settings,
                        shared[0],
                        calibrated=shared[1],
                        template=source,
                    )
                )
    return out, refused


def _first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[1] if len(lines) > 1 and lines[0].endswith(":") else lines[0])[:300]


def _grid(checkpoints: list[str]) -> Iterator[tuple[str, str, int, int]]:
    for checkpoint in checkpoints:
        for kv in KV_DTYPES:
            for drafts in DRAFTS:
                for mbt in BATCHED_TOKENS:
                    yield checkpoint, kv, drafts, mbt


def planned_factor(model: StepModel) -> float:
    """How much more load than offered each replica is planned for: the band's slow side and
    the headroom (:data:`serving.capacity.perf_stack.HEADROOM`)."""
    return (1 + model.band) / (1 - HEADROOM)


def screen(c: Candidate, goal: Goal, seen: dict[int, float] | None = None) -> None:
    """The closed forms' replicas and cost for ``c`` (means within each target's bound);
    ``seen``: the best rate of models already screened (by identity)."""
    traffic = goal.traffic
    w = Workload(traffic.prompt_tokens, traffic.output_tokens)
    seen = {} if seen is None else seen
    if id(c.model) not in seen:
        seen[id(c.model)] = c.model.max_rate_meeting(mean_slo(goal.targets), w, rel_tol=1e-3)
    best = seen[id(c.model)]
    if best <= 0:
        return
    need = math.ceil(traffic.rate * planned_factor(c.model) / best)
    c.screen_replicas = need
    c.screen_usd_per_hour = _usd(cost(c.settings, traffic, need))


def _run(c: Candidate, goal: Goal, replicas: int, rate: float) -> SimResult:
    return simulate(
        c.model,
        replace(goal.traffic, rate=rate),
        replicas=replicas,
        balancer=BALANCER[c.platform] if replicas > 1 or c.platform != "tpu-vm" else "engine",
        requests=goal.requests,
        seed=goal.seed,
    )


def _meets(result: SimResult, targets: tuple[Target, ...]) -> tuple[bool, str]:
    """(every target met and the queue stable, the target closest to its bound)."""
    worst = max(targets, key=lambda t: t.value(result) / t.ms)
    ok = not result.saturated and all(t.value(result) <= t.ms for t in targets)
    return ok, f"{worst.metric}_{worst.stat}"


def size(c: Candidate, goal: Goal) -> Sizing:
    """The fewest replicas (from the screen's count up) whose simulated percentiles meet every
    target at the planned load, within the platform's and the user's most replicas."""
    assert c.screen_replicas is not None
    most = min(c.most_replicas, goal.max_replicas or MAX_REPLICAS, MAX_REPLICAS)
    planned_rate = goal.traffic.rate * planned_factor(c.model)
    checked: dict[int, tuple[bool, str, SimResult]] = {}

    def check(n: int) -> bool:
        if n not in checked:
            result = _run(c, goal, n, planned_rate)
            ok, binding = _meets(result, goal.targets)
            checked[n] = (ok, binding, result)
        return checked[n][0]

    # The fewest count that meets the targets, whatever count the search starts from: down
    # from the screen's count by 30 % steps while it still meets them (the simulation's tail
    # can be kinder than the closed forms' means), else up by 30 % steps, then a bisection
    # between the last miss and the first hit.
    n = max(1, min(c.screen_replicas, most))
    bad = 0
    if check(n):
        while n > 1:
            probe = max(1, min(n - 1, math.floor(n * 0.7)))
            if not check(probe):
                bad = probe
                break
            n = probe
    else:
        bad = n
        while not check(n):
            bad = n
            if n >= most:
                break
            n = min(most, max(n + 1, math.ceil(n * 1.3)))
        if not checked[n][0]:
            _, binding, result = checked[n]
            capped = n == c.most_replicas and n < (goal.max_replicas or MAX_REPLICAS)
            bound = (
                f"{replica_key(c.settings)[0]} allows at most {n}: split the traffic over "
                "more stacks, or a quota increase"
                if capped
                else f"--max-replicas is {n}"
                if goal.max_replicas == n
                else f"above the cap {MAX_REPLICAS}"
            )
            why = f"more than {n} replicas needed ({bound}); {n} miss {binding.replace('_', ' ')}"
            return Sizing(None, None, result, False, why, binding, quota_capped=capped)
    while n - bad > 1:  # the fewest between the last miss and the first hit
        mid = (n + bad) // 2
        if check(mid):
            n = mid
        else:
            bad = mid
    ok, binding, planned = checked[n]
    at_rate = _run(c, goal, n, goal.traffic.rate)
    return Sizing(n, at_rate, planned, ok, "meets every target", binding)


@dataclass
class SearchResult:
    goal: Goal
    answers: list[Candidate]
    #: The closest candidate when none meets the targets.
    closest: Candidate | None
    considered: int
    refused: dict[str, int]
    screened_out: int
    #: Sized candidates the settings refuse at their replica count, and why (cheaper than the
    #: answers: a stack file change, e.g. a pinned revision, would let them in).
    set_aside: list[str]


def search(
    templates: Mapping[str, Mapping[str, Any]],
    goal: Goal,
    progress: Callable[[str], None] | None = None,
) -> SearchResult:
    """Screen every candidate, size the cheapest :data:`FINALISTS` (per price kind) by
    simulation, and answer those that meet the targets, cheapest first (unknown prices last)."""
    pool, refused = candidates(templates, goal)
    if progress is not None:
        progress(f"screening {len(pool)} configurations")
    seen: dict[int, float] = {}
    for c in pool:
        screen(c, goal, seen)
    viable = [c for c in pool if c.screen_replicas is not None]
    most = goal.max_replicas or MAX_REPLICAS
    # A budget holds only what has a price: an unknown one cannot be shown to be within it.
    in_budget = [
        c
        for c in viable
        if goal.budget_usd_per_hour is None
        or (c.screen_usd_per_hour is not None and c.screen_usd_per_hour <= goal.budget_usd_per_hour)
    ]
    priced = sorted(
        (c for c in in_budget if c.screen_usd_per_hour is not None),
        key=lambda c: (c.screen_usd_per_hour or 0.0, c.key),
    )
    unpriced = sorted(
        (c for c in in_budget if c.screen_usd_per_hour is None),
        key=lambda c: (c.screen_replicas or 0, c.key),
    )
    finalists = _spread(priced, FINALISTS) + _spread(unpriced, 1)
    answers = []
    set_aside: list[str] = []
    for i, c in enumerate(finalists, 1):
        if progress is not None:
            progress(f"simulating {i}/{len(finalists)}: {c.platform}/{c.hardware} ({c.capacity})")
        c.sizing = size(c, goal)
        problem = _refused_at(c, goal)
        if problem:
            if problem not in set_aside:
                set_aside.append(problem)
        elif c.sizing.replicas is not None and c.sizing.replicas <= most:
            answers.append(c)
    for c in answers:
        assert c.sizing is not None
        keep_warm(c, goal)
        c.cost = cost(c.settings, goal.traffic, c.sizing.replicas)
        c.screen_usd_per_hour = _usd(c.cost)
    if goal.budget_usd_per_hour is not None:
        over = [
            c
            for c in answers
            if c.screen_usd_per_hour is None or c.screen_usd_per_hour > goal.budget_usd_per_hour
        ]
        for c in over:
            set_aside.append(
                f"{c.platform}/{c.hardware} over --budget ${goal.budget_usd_per_hour:g}/h: "
                f"{_dollars(c.screen_usd_per_hour)}/h as sized"
            )
        answers = [c for c in answers if c not in over]
    answers.sort(key=lambda c: (c.screen_usd_per_hour is None, c.screen_usd_per_hour or 0.0, c.key))
    if goal.budget_usd_per_hour is not None and not answers:
        priced_all = sorted(
            (c for c in viable if c.screen_usd_per_hour is not None),
            key=lambda c: c.screen_usd_per_hour or 0.0,
        )
        if priced_all and not in_budget:
            cheap = priced_all[0]
            set_aside.append(
                f"nothing within --budget ${goal.budget_usd_per_hour:g}/h: the cheapest the "
                f"screen finds is {cheap.platform}/{cheap.hardware} at about "
                f"${cheap.screen_usd_per_hour:,.2f}/h ({cheap.screen_replicas} replicas; "
                "unknown prices cannot be held to a budget)"
            )
    closest = None
    if not answers:
        tried = [c for c in finalists if c.sizing is not None] or pool
        closest = min(tried, key=lambda c: _shortfall(c, goal), default=None)
    return SearchResult(
        goal, answers, closest, len(pool), refused, len(pool) - len(viable), set_aside
    )


#: Each platform's min-instances key (a TPU VM stack's nodes are all always on).
MIN_KEY = {"cloud-run": "minInstances", "gke": "minReplicas"}


def keep_warm(c: Candidate, goal: Goal) -> None:
    """With a traffic shape, the fewest min instances whose cold starts break no percentile
    target go into the answer's settings (what `--write-stack` writes). Its replicas are the
    most it takes (they serve the busiest period), and its cost already bills them all."""
    if goal.shape is None:
        return
    assert c.sizing is not None and c.sizing.replicas is not None
    n = c.sizing.replicas
    targets = [(t.metric, t.stat, t.ms) for t in goal.targets]
    c.min_instances = for_stack(c.settings, goal.shape, goal.traffic.rate, n, targets, n)
    warm = chosen(c.min_instances)
    if warm is not None:
        c.raw = {**c.raw, MIN_KEY[c.platform]: warm}


def _refused_at(c: Candidate, goal: Goal) -> str | None:
    """Why the settings refuse the candidate at its sized replica count (a rule that depends
    on the count, e.g. a pinned checkpoint revision for several TPU nodes), else None."""
    if c.sizing is None or c.sizing.replicas is None:
        return None
    try:
        load_settings(stack_settings(c, goal))
    except SettingsError as exc:
        return f"{c.platform}/{c.hardware} at {c.sizing.replicas} replicas: {_first_line(exc)}"
    return None


def _spread(ranked: list[Candidate], count: int) -> list[Candidate]:
    """The cheapest ``count``, one per platform and hardware, so that an answer's
    alternatives are other hardware, not the same one with another flag."""
    out: list[Candidate] = []
    seen: set[tuple[str, str]] = set()
    for c in ranked:
        key = (c.platform, c.hardware)
        if key in seen:
            continue
        seen.add(key)
        out.append(c)
        if len(out) == count:
            break
    return out


def _shortfall(c: Candidate, goal: Goal) -> float:
    """How far the candidate is from the targets (its worst ratio of predicted to bound)."""
    result = c.sizing.planned if c.sizing is not None else None
    if result is None:
        return math.inf
    return max(t.value(result) / t.ms for t in goal.targets)


def traffic_text(traffic: Traffic) -> str:
    """The workload in one line."""
    if traffic.trace is not None:
        return f"a trace of {len(traffic.trace)} requests at {traffic.rate:.3g} req/s"
    lengths = []
    for what, mean, p95 in (
        ("prompt", traffic.prompt_tokens, traffic.prompt_p95),
        ("output", traffic.output_tokens, traffic.output_p95),
    ):
        lengths.append(f"{mean} {what}" + (f" (p95 {p95})" if p95 else ""))
    arrivals = "Poisson" if traffic.burstiness == 1 else f"burstiness {traffic.burstiness:g}"
    shared = (
        f", {traffic.shared_prefix_tokens} shared prefix" if traffic.shared_prefix_tokens else ""
    )
    return f"{traffic.rate:g} req/s, {' + '.join(lengths)} tokens{shared}, {arrivals}"


def engine_text(c: Candidate) -> str:
    """The engine settings that were searched, in one line."""
    v, m = c.settings.vllm, c.settings.model
    mtp = f"MTP {m.num_speculative_tokens}" if m.speculative_method == "mtp" else "no MTP"
    weights = "QAT w4a16" if m.card.quantization is not Quantization.NONE else "bf16"
    return (
        f"{weights}, KV {v.kv_cache_dtype}, {mtp}, max-num-seqs {v.max_num_seqs}, "
        f"batched tokens {v.max_num_batched_tokens}, max-model-len {v.max_model_len}"
    )


def stack_settings(c: Candidate, goal: Goal) -> dict[str, Any]:
    """The flat settings an answer's stack file holds: the candidate's, its replicas, the SLO
    keys the stack can carry (sloP95TtftMs, sloP95E2EMs, sloMinRequestsPerSecond) and the
    workload's mean lengths as its benchmark shape. Length tails, bursts, a shared prefix and
    targets on ITL or other percentiles have no key: the header says them."""
    assert c.sizing is not None and c.sizing.replicas is not None
    raw = with_replicas(c, c.sizing.replicas)
    planned = c.sizing.planned
    for metric, key in (("ttft", "sloP95TtftMs"), ("e2e", "sloP95E2EMs")):
        asked = [t.ms for t in goal.targets if t.metric == metric and t.stat == "p95"]
        if asked:
            raw[key] = min(asked)
        elif planned is not None:
            # Not asked: what the answer holds at the planned load, rounded up to two
            # significant figures, so that the stack's post-deploy gate and the preview hold
            # it to something true instead of the settings' default.
            raw[key] = _round_up(planned.latency_ms[metric]["p95"])
    raw["sloMinRequestsPerSecond"] = goal.traffic.rate
    # The request shape the preview and the post-deploy benchmark predict and measure at.
    raw["benchmarkPromptTokens"] = goal.traffic.prompt_tokens
    raw["benchmarkOutputTokens"] = goal.traffic.output_tokens
    return raw


def _round_up(ms: float) -> float:
    """``ms`` rounded up to two significant figures (1,234 -> 1,300)."""
    if ms <= 0:
        return 1.0
    step = 10 ** max(0, math.floor(math.log10(ms)) - 1)
    return float(math.ceil(ms / step) * step)


def stack_file_text(
    c: Candidate, goal: Goal, result: SearchResult, project: str, name: str, today: str
) -> str:
    """``Pulumi.<name>.yaml`` for an answer: a header saying the workload, the SLO, what was
    searched and why this one won, then the `config:` block in the project's namespace."""
    import yaml

    assert c.sizing is not None and c.sizing.at_rate is not None
    others = [a for a in result.answers if a is not c]
    runner = (
        f"; next: {others[0].platform}/{others[0].hardware} at "
        f"{_dollars(others[0].screen_usd_per_hour)}/h"
        if others
        else ""
    )
    lat = c.sizing.at_rate.latency_ms
    header = [
        f"Written by `gemma4 plan search` ({today}): the cheapest configuration it found for",
        f"  workload: {traffic_text(goal.traffic)}",
        f"  SLO: {describe(goal.targets)}",
        f"  searched: {result.considered} configurations (platform x hardware x checkpoint x KV "
        "dtype x MTP x batched tokens x capacity type, max-model-len fitted to the longest "
        f"request); {len([a for a in result.answers])} answered after simulation",
        f"  why this one: {_dollars(c.screen_usd_per_hour)}/h for {c.sizing.replicas} replica(s) "
        f"on {c.platform}/{c.hardware} ({c.capacity}), the least of those meeting the SLO"
        f"{runner}",
        f"  engine: {engine_text(c)}",
        *_warm_header(c),
        "  predicted at that rate (simulated, not measured): "
        + ", ".join(f"{m.upper()} p95 {lat[m]['p95']:,.0f} ms" for m in METRICS),
        f"  started from Pulumi.{c.template}.yaml; set your project once:",
        f"  `pulumi config set gcp:project <project-id> -s {name}`",
    ]
    raw = stack_settings(c, goal)
    for metric, key in (("ttft", "sloP95TtftMs"), ("e2e", "sloP95E2EMs")):
        if not any(t.metric == metric and t.stat == "p95" for t in goal.targets):
            header.insert(
                3,
                f"  {key} {raw[key]:g} ms was not asked: it is what this answer holds at the "
                "planned load (the post-deploy gate checks it)",
            )
    body = yaml.safe_dump(
        {"config": {f"{project}:{k}": v for k, v in raw.items()}},
        sort_keys=False,
        default_flow_style=False,
        width=100,
    )
    return "".join(f"# {line}\n".replace("#  \n", "#\n") for line in header) + body


def _warm_header(c: Candidate) -> list[str]:
    """The stack file's line on its min instances, when a traffic shape chose them."""
    warm = None if c.min_instances is None else chosen(c.min_instances)
    if c.min_instances is None or warm is None:
        return []
    rows = c.min_instances["rows"]
    row = next(r for r in rows if r["min_instances"] == warm)
    fewer = "" if row is rows[0] else f"; {rows[0]['min_instances']}: {rows[0]['cold_share']:.2%}"
    return [
        f"  min instances {warm}: {row['cold_share']:.2%} of requests meet a cold start "
        f"(p50 {row['added_latency_s']['p50']:,} s){fewer} (docs/min-instances.md)"
    ]


def _dollars(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def capacity_of(settings: Settings) -> str:
    """A stack's capacity type: on-demand on Cloud Run, else its node or TPU provisioning."""
    if settings.deploy_platform == "gke":
        return settings.gke.node_provisioning
    if settings.deploy_platform == "tpu-vm":
        return settings.tpu.provisioning
    return "on-demand"


def stack_targets(settings: Settings) -> tuple[Target, ...]:
    """The stack's own latency SLO as percentile targets: sloP95TtftMs and sloP95E2EMs are
    p95s, checked on the simulated p95 (not on a mean)."""
    slo = settings.slo
    out = []
    if slo.slo_p95_ttft_ms is not None:
        out.append(Target("ttft", "p95", slo.slo_p95_ttft_ms))
    if slo.slo_p95_e2e_ms is not None:
        out.append(Target("e2e", "p95", slo.slo_p95_e2e_ms))
    return tuple(out)


def sized_stack(
    name: str, settings: Settings, goal: Goal, raw: Mapping[str, Any] | None = None
) -> Candidate:
    """A stack's settings as they are, sized for ``goal`` as the search sizes its answers
    (``sizing`` None: its predicted means already miss a target). With its flat settings
    (``raw``), a count its settings refuse (a rule that depends on the count) is said so."""
    c = _bare(name, settings, goal)
    c.raw = dict(raw or {})
    screen(c, goal)
    if c.screen_replicas is None:
        c.sizing = Sizing(None, None, None, False, "its predicted means already miss the SLO")
        return c
    c.sizing = size(c, goal)
    problem = _refused_at(c, goal) if raw is not None else None
    if problem:
        c.sizing = replace(c.sizing, refused=problem)
    c.cost = cost(settings, goal.traffic, c.sizing.replicas)
    c.screen_usd_per_hour = _usd(c.cost)
    return c


#: served_rate's resolution: the screen's bound over 2**7, as a bisection of seven halvings.
SERVED_RATE_STEPS = 128


def _ratio(result: SimResult, targets: tuple[Target, ...]) -> float:
    """How close a simulated load is to its targets: the largest value over its bound (at
    most 1: every target met); infinite when the queue grew without bound."""
    if result.saturated:
        return math.inf
    return max(t.value(result) / t.ms for t in targets)


def _next_rate(lo: int, at_lo: float | None, hi: int, at_hi: float | None, tol: float) -> int:
    """The next load to simulate, in thousandths of a request per second, strictly between
    ``lo`` (met its targets) and ``hi`` (did not, or the bound; ``hi - lo`` at least 2):
    where the line through both ends' ratios crosses 1 when both are known, else the middle;
    kept ``tol`` inside each end where the bracket allows, so a guess next to an end closes
    the bracket."""
    guess = (lo + hi) / 2.0
    if at_lo is not None and at_hi is not None and math.isfinite(at_hi) and at_hi > at_lo:
        guess = lo + (hi - lo) * (1.0 - at_lo) / (at_hi - at_lo)
    if hi - lo > 2.0 * tol:
        guess = min(max(guess, lo + tol), hi - tol)
    return min(max(math.floor(guess), lo + 1), hi - 1)


#: served_rate's first load, a share of the screen's bound: the shipped stacks serve 0.73 to
#: 0.96 of it as planned (their benchmark shapes, their targets).
FIRST_SHARE = 0.85


def served_rate(name: str, settings: Settings, goal: Goal, replicas: int) -> float:
    """The most requests/s ``replicas`` of the stack serve as planned: the largest rate whose
    planned load meets every target in the simulation (``goal``'s rate is not used), to
    1/:data:`SERVED_RATE_STEPS` of the screen's bound and never finer than 0.001 requests/s
    (the returned rate met them; one that much higher did not, or is past the bound); 0 when
    none does. Every load tried is a whole number of thousandths of a request per second, as
    the planner prints it: the rate returned is one the simulation ran, so sizing the stack
    at it finds the same count (the simulation need not be monotonic within a thousandth).

    A bracket narrowed by false position on the targets' ratio (:func:`_ratio`), the Illinois
    way (an end kept twice has its ratio's distance from 1 halved, so neither end sticks),
    halved instead when two guesses have not halved it (a ratio of exactly 1, or one that
    jumps at the edge, pins the line next to one end): at most twice the halvings' count and
    four (18), five to seven for the shipped stacks, each 0.06 to 0.3 s on 2 cores. A bound
    past :data:`~serving.config.groups.MAX_REQUESTS_PER_SECOND` (what the planner takes) is
    searched below it."""
    c = _bare(name, settings, goal)
    w = Workload(goal.traffic.prompt_tokens, goal.traffic.output_tokens)
    factor = planned_factor(c.model)
    bound = c.model.max_rate_meeting(mean_slo(goal.targets), w, rel_tol=1e-3) * replicas / factor
    if not bound > 0:  # NaN included: the predicted means already miss a target at any load
        return 0.0
    bound = min(bound, MAX_REQUESTS_PER_SECOND)
    # In thousandths: the bound's is never tried (it counts as missed), nor anything above it.
    lo, hi = 0, math.ceil(bound * 1000.0)
    tol = max(1.0, bound * 1000.0 / SERVED_RATE_STEPS)
    at_lo: float | None = None
    at_hi: float | None = None
    kept = 0
    widths = [hi - lo]
    mid = min(max(math.floor(FIRST_SHARE * bound * 1000.0), lo + 1), hi - 1)
    while hi - lo > tol:
        rate = mid / 1000.0
        probe = replace(goal, traffic=replace(goal.traffic, rate=rate))
        result = _run(c, probe, replicas, rate * factor)
        ratio = _ratio(result, goal.targets)
        if _meets(result, goal.targets)[0]:
            lo, at_lo = mid, ratio
            if kept > 0 and at_hi is not None:
                at_hi = 1.0 + (at_hi - 1.0) / 2.0
            kept = 1
        else:
            hi, at_hi = mid, ratio
            if kept < 0 and at_lo is not None:
                at_lo = 1.0 - (1.0 - at_lo) / 2.0
            kept = -1
        widths.append(hi - lo)
        if hi - lo <= tol:
            break
        if len(widths) >= 3 and 2 * (hi - lo) > widths[-3]:
            mid = (lo + hi) // 2  # two guesses did not halve the bracket: halve it
        else:
            mid = _next_rate(lo, at_lo, hi, at_hi, tol)
    return lo / 1000.0


def _bare(name: str, settings: Settings, goal: Goal) -> Candidate:
    model, calibration = model_for_settings(settings, mtp_acceptance=goal.mtp_acceptance)
    return Candidate(
        settings.deploy_platform,
        settings.hardware,
        capacity_of(settings),
        {},
        settings,
        model,
        calibrated=calibration is not None,
        template=name,
    )


def answer_dict(c: Candidate, goal: Goal, rank: int) -> dict[str, Any]:
    """One answer as `plan search --json` prints it (and `gemma4 plan -s STACK --json` as
    ``answer``): the settings, the cost in the four figures, the simulated percentiles at the
    offered rate and at the planned load, what binds, the band."""
    s = c.sizing
    assert s is not None and s.at_rate is not None and s.planned is not None
    rate = goal.traffic.rate
    figures = c.cost or cost(c.settings, goal.traffic, s.replicas)
    assert figures is not None
    sim = s.at_rate
    w = Workload(goal.traffic.prompt_tokens, goal.traffic.output_tokens)
    point = c.model.at_rate(rate / s.replicas, w) if s.replicas else None
    quantiles = ("p50", "p95", "p99")
    return {
        "rank": rank,
        "stack": stack_settings(c, goal) if c.raw else c.template,
        "platform": c.platform,
        "hardware": c.hardware,
        "capacity": c.capacity,
        "checkpoint": c.settings.model.model,
        "engine": engine_text(c),
        "replicas": s.replicas,
        **figures.as_dict(),
        "price_source": f"{c.settings.price.source} ({c.settings.price.as_of})",
        "latency_ms": {m: {q: sim.latency_ms[m][q] for q in quantiles} for m in METRICS},
        "mean_latency_ms": {m: sim.latency_ms[m]["mean"] for m in METRICS},
        "planned_load_latency_ms": {
            m: {q: s.planned.latency_ms[m][q] for q in quantiles} for m in METRICS
        },
        "error": sim.error,
        "limits": {
            "slo": s.binding,
            "ceiling": point.ceiling if point is not None and point.stable else None,
            "quota": s.quota_capped,
        },
        "band": c.model.band,
        "basis": c.model.basis,
        "calibrated": c.calibrated,
        "meets_slo": s.meets,
        "simulated_requests": sim.requests,
        "balancer": sim.balancer,
        "template": c.template,
        "measured": False,
        "cold_start": {**cold_start(c.settings), "waits": waits(c.settings)},
        **({} if c.min_instances is None else _warm_dict(c.min_instances)),
    }


def _warm_dict(block: dict[str, Any]) -> dict[str, Any]:
    """An answer's ``min_instances`` (the count kept warm, None on a TPU VM), each setting's
    row, and what they assume."""
    return {
        "min_instances": chosen(block),
        "min_instances_rows": block["rows"],
        "min_instances_basis": {k: v for k, v in block.items() if k != "rows"},
    }
