"""Capacity planner (`gemma4 plan`): reads `Pulumi.<stack>.yaml` without the Pulumi CLI,
validates it with the project's typed settings and reports vLLM's memory budget, KV cache,
batch-1 decode ceiling and costs (`serving.sizing.memory`, the model the `gpu-memory-budget`
policy enforces) with the predicted performance (`serving.capacity.plan_perf`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from serving.capacity.coldstart import cold_start
from serving.capacity.configsearch import (
    Goal,
    Target,
    answer_dict,
    describe,
    served_rate,
    sized_stack,
    stack_targets,
)
from serving.capacity.configsearch import cost as configsearch_cost
from serving.capacity.costs import cost, instance_price
from serving.capacity.idle import Shape, for_stack
from serving.capacity.perf import Workload
from serving.capacity.plan_perf import (
    endpoint_cost,
    offered_load,
    performance,
    replica_plan,
    serving_replicas,
    workload_for,
)
from serving.capacity.simulate import Traffic
from serving.capacity.start_budget import waits
from serving.config.checks import SettingsError
from serving.config.groups import MIN_REQUESTS_PER_SECOND
from serving.config.settings import Settings, load_settings
from serving.config.stack_config import stack_name_problem
from serving.config.stack_yaml import StackYamlError, load_document
from serving.sizing.memory import MemoryPlan, decode_ceiling_tokens_per_s, monthly_cost

ROOT = Path(__file__).resolve().parents[2]


class PlanError(Exception):
    """A stack that cannot be planned; the message says why."""


def project_name(root: Path = ROOT) -> str:
    from serving.config.stack_file import StackFileError, read_bounded

    path = root / "Pulumi.yaml"
    try:
        data = load_document(read_bounded(path, str(path)))
        return str(data["name"])
    except (StackFileError, StackYamlError, KeyError, TypeError) as exc:
        raise PlanError(f"{path}: no project name ({exc})") from None


def stack_names(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def _stack_path(stack: str, root: Path) -> Path:
    problem = stack_name_problem(stack)
    if problem:
        raise PlanError(problem)
    path = root / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise PlanError(
            f"no stack file {path.name}; stacks here: {', '.join(stack_names(root)) or 'none'}"
        )
    return path


def stack_config(stack: str, root: Path = ROOT) -> dict[str, Any]:
    """The whole `config:` block of `Pulumi.<stack>.yaml` (namespaced keys, e.g. `gcp:project`),
    unvalidated; a file that is not a YAML mapping with a `config:` mapping is a PlanError."""
    from serving.config.stack_file import StackFileError, config_block

    try:
        return config_block(_stack_path(stack, root), project_name(root))
    except StackFileError as exc:
        raise PlanError(str(exc)) from None


def raw_stack_settings(stack: str, root: Path = ROOT) -> dict[str, Any]:
    """The project's own keys of `Pulumi.<stack>.yaml`, without the namespace, unvalidated."""
    prefix = f"{project_name(root)}:"
    config = stack_config(stack, root)
    return {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}


def load_stack_settings(stack: str, root: Path = ROOT) -> Settings:
    """Validate `Pulumi.<stack>.yaml` the way the program does (namespaces and keys included)."""
    return load_stack_file_settings(_stack_path(stack, root), root)


def load_stack_file_settings(path: Path, root: Path | None = None) -> Settings:
    """Validate the stack file `path` the way the program does. Its keys are named for the
    project in `root` (default: the project file beside `path`, else this package's)."""
    return load_stack_file(path, root)[0]


def load_stack_file(path: Path, root: Path | None = None) -> tuple[Settings, dict[str, Any]]:
    """:func:`load_stack_file_settings`, and the file's flat settings it validated."""
    # The stack file's provider namespaces are checked against the installed pulumi-gcp's own
    # key list (serving.config.stack_file reads its generated `config/vars.py` as text).
    from serving.config.stack_file import StackFileError, read_stack_file

    if root is None:
        from serving.config.project import project_file

        root = path.parent if project_file(path.parent) is not None else ROOT
    try:
        raw = read_stack_file(path, project_name(root))
        return load_settings(raw), dict(raw)
    except StackFileError as exc:
        raise PlanError(str(exc)) from None
    except SettingsError as exc:
        raise PlanError(f"{path.name}: {exc}") from None


def plan_settings(settings: Settings) -> MemoryPlan:
    """The stack's memory plan: the same one the settings hold a TPU stack to."""
    plan = settings.memory_plan()
    if plan is None:
        raise PlanError(f"{settings.model.model} has no architecture in the model catalog")
    return plan


def report(
    stack: str,
    settings: Settings,
    requests_per_second: float | None = None,
    workload: Workload | None = None,
    *,
    flag: str = "--requests-per-second",
    mtp_acceptance: float | None = None,
    concurrencies: Sequence[int] | None = None,
    mtp_source: str | None = None,
    targets: tuple[Target, ...] = (),
    traffic: Traffic | None = None,
    raw: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every figure the planner prints, as plain numbers (bytes, tokens, USD); the predicted
    performance is for ``workload`` (default: the stack's benchmark request shape), the
    replicas and their cost for ``requests_per_second`` (:func:`offered_load`; ``flag`` names
    where a given one came from)."""
    plan = plan_settings(settings)
    # The shape first: a request longer than max-model-len is refused, not predicted.
    performance_figures = performance(
        settings, workload, mtp_acceptance, concurrencies, mtp_source=mtp_source
    )
    goal_targets = targets or stack_targets(settings)
    w = workload or workload_for(settings, None, None)
    flow = Traffic(1.0, w.prompt_tokens, w.output_tokens) if traffic is None else traffic
    low = max(1, settings.replica_bounds[0])
    if (
        requests_per_second is None
        and not settings.slo.slo_min_requests_per_second
        and goal_targets
    ):
        # The default load is what the fewest replicas serve as planned, sized as below.
        goal = Goal(flow, goal_targets, mtp_acceptance=mtp_acceptance)
        served = _sized(served_rate, stack, settings, goal, low)  # whole thousandths
        if served >= MIN_REQUESTS_PER_SECOND:
            requests_per_second = served
            flag = (
                f"what {low} replica(s) serve as planned; set sloMinRequestsPerSecond or {flag} "
                "for your load"
            )
    rate, rate_source = offered_load(settings, requests_per_second, flag, workload, mtp_acceptance)
    # Percentile targets (the command's, else the stack's sloP95* keys) are checked on the
    # scheduler simulation, as `gemma4 plan search` sizes its answers: one count everywhere.
    answer = None
    simulated = None
    if goal_targets:
        goal = Goal(replace(flow, rate=rate), goal_targets, mtp_acceptance=mtp_acceptance)
        sized = _sized(sized_stack, stack, settings, goal, raw)
        assert sized.sizing is not None
        # The price is read now, never remembered with the sizing.
        sized.cost = configsearch_cost(settings, goal.traffic, sized.sizing.replicas)
        sized.screen_usd_per_hour = None if sized.cost is None else sized.cost.usd_per_hour
        assert sized.sizing is not None
        if sized.sizing.replicas is not None:
            answer = answer_dict(sized, goal, 1)
        why = sized.sizing.why
        if sized.sizing.refused:
            why = f"at that count the settings refuse it: {sized.sizing.refused}"
        simulated = (sized.sizing.replicas, why, describe(goal_targets))
    replicas = replica_plan(settings, rate, rate_source, workload, mtp_acceptance, simulated)
    count, count_source = serving_replicas(settings, replicas)
    at_rate = endpoint_cost(settings, rate, count, workload or workload_for(settings, None, None))
    # One instance: a Cloud Run instance, a TPU node, or on GKE one replica's node.
    price, status = instance_price(settings)
    one = cost(price, status, None, None)
    hw = settings.profile
    arch = settings.model.card.architecture
    assert arch is not None
    streamed = plan.weight_bytes + plan.drafter_bytes
    return {
        "stack": stack,
        "hardware": hw.key,
        "accelerator": hw.accelerator,
        "model": settings.model.model,
        "drafter": settings.model.drafter_card.repo_id if settings.model.drafter_card else None,
        "device_memory_bytes": plan.device_bytes,
        "gpu_memory_utilization": plan.utilization,
        "budget_bytes": plan.budget_bytes,
        "weight_bytes": plan.weight_bytes,
        "drafter_bytes": plan.drafter_bytes,
        "activation_bytes": plan.activation_bytes,
        "non_torch_bytes": plan.non_torch_bytes,
        "cuda_graph_bytes": plan.cuda_graph_bytes,
        "runtime_reserve_bytes": plan.runtime_reserve_bytes,
        "kv_available_bytes": plan.kv_available_bytes,
        "kv_cache_dtype": settings.vllm.kv_cache_dtype,
        "kv_layers": [
            {
                "layers": a.layers,
                "kv_heads": a.kv_heads,
                "head_dim": a.head_dim,
                "window": a.window,
            }
            for a in arch.attention
        ],
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "kv_bytes_per_token_past_window": plan.kv_bytes_per_token_full_layers,
        "max_model_len": plan.max_model_len,
        "max_num_batched_tokens": settings.vllm.max_num_batched_tokens,
        "one_sequence_kv_bytes": plan.one_sequence_kv_bytes,
        "kv_tokens": plan.capacity.reported_tokens,
        "kv_pool_tokens": plan.capacity.pool_tokens,
        "kv_blocks": plan.capacity.num_blocks,
        "full_length_sequences": plan.capacity.max_concurrency,
        "max_num_seqs": settings.vllm.max_num_seqs,
        "fits": plan.fits,
        "decode_ceiling_tokens_per_s": decode_ceiling_tokens_per_s(
            hw.memory_bandwidth_bytes_per_s * hw.accelerator_count, streamed
        ),
        "memory_bandwidth_bytes_per_s": hw.memory_bandwidth_bytes_per_s,
        "usd_per_hour": one.usd_per_hour,
        "usd_per_month_always_on": one.usd_per_month,
        "billed_hours_per_month": settings.billed_hours_per_month,
        "usd_per_month_billed": None
        if price is None
        else monthly_cost(price, hours=settings.billed_hours_per_month),
        "billing": settings.billing,
        "price_source": f"{settings.price.source} ({settings.price.as_of})",
        "price_unconfirmed": list(settings.price.unconfirmed),
        "price_status": one.status,
        "requests_per_second": rate,
        "requests_per_second_source": rate_source,
        "serving_replicas": count,
        "serving_replicas_source": count_source,
        "requests_per_second_per_replica": rate / count if count else None,
        # Serving the load (fixed costs included), null where unknown or no count serves it.
        "usd_per_hour_at_rate": at_rate and at_rate.usd_per_hour,
        "usd_per_month_at_rate": at_rate and at_rate.usd_per_month,
        "usd_per_million_requests": at_rate and at_rate.usd_per_million_requests,
        "usd_per_million_output_tokens": at_rate and at_rate.usd_per_million_output_tokens,
        "price_status_at_rate": at_rate.status if at_rate else one.status,
        "runtime_profile": plan.profile.label,
        "performance": performance_figures,
        "replicas": replicas,
        "answer": answer,
        "cold_start": {**cold_start(settings), "waits": waits(settings)},
    }


def min_instances_report(
    settings: Settings, shape: Shape, figures: dict[str, Any], targets: tuple[Target, ...]
) -> dict[str, Any]:
    """`gemma4 plan --traffic`'s ``min_instances`` rows and ``traffic_shape`` (what they
    assume), for the plan's rate and replicas (``figures``: :func:`report`'s) and its targets
    (the command's, else the stack's)."""
    rate, count = figures["requests_per_second"], figures["serving_replicas"]
    if not count:
        return {
            "min_instances": [],
            "traffic_shape": {**shape.as_dict(rate), "note": figures["serving_replicas_source"]},
        }
    block = for_stack(
        settings,
        shape,
        rate,
        count,
        [(t.metric, t.stat, t.ms) for t in targets or stack_targets(settings)],
        settings.replica_bounds[1],
    )
    return {"min_instances": block.pop("rows"), "traffic_shape": block}


#: Sizings already run in this process, by what decides them (the settings as JSON, the goal,
#: the count or the flat settings): the simulation is deterministic, so a second plan, preview
#: or MCP call for the same stack and load reuses it. Bounded: the oldest goes first.
_SIZED: dict[tuple[Any, ...], Any] = {}
_SIZED_MAX = 64


def _sized(how: Any, stack: str, settings: Settings, goal: Any, extra: Any) -> Any:
    """``how(stack, settings, goal, extra)``, remembered (:data:`_SIZED`); a workload the
    stack cannot take (a request longer than its max-model-len, with tails: the lengths'
    99.9th percentile) is a PlanError naming the options."""
    key = (
        how.__name__,
        stack,
        settings.model_dump_json(),
        goal,
        tuple(sorted((k, repr(v)) for k, v in extra.items())) if isinstance(extra, dict) else extra,
    )
    if key in _SIZED:
        return _SIZED[key]
    try:
        result = how(stack, settings, goal, extra)
    except ValueError as exc:
        raise PlanError(
            f"{exc} (the workload's longest request: --prompt-tokens/--output-tokens, with "
            "--prompt-p95/--output-p95 their 99.9th percentile; or raise maxModelLen)"
        ) from None
    if len(_SIZED) >= _SIZED_MAX:
        _SIZED.pop(next(iter(_SIZED)))
    _SIZED[key] = result
    return result
