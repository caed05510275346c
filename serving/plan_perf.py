"""The capacity planner's performance part: predicted latency against throughput, the hardware
search, and fitting a calibration from a benchmark run (``gemma4 plan``, ``gemma4 plan search``,
``gemma4 plan calibrate``). The maths is :mod:`serving.perf`; this module reads stacks and runs
and formats.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from serving.calibration import CALIBRATIONS_DIR, CalibrationError, calibrate
from serving.memory import cost_per_million_requests
from serving.perf import MAX_TOKENS, Slo, StepModel, Workload, cost_per_million_tokens
from serving.perf_stack import (
    HEADROOM,
    MAX_REPLICAS,
    autoscaling_bounds,
    benchmark_grid,
    capacity_replica_rate,
    model_for_settings,
    planned_replica_rate,
    vllm_release,
)
from serving.settings import MAX_REQUESTS_PER_SECOND, MIN_REQUESTS_PER_SECOND, Settings

__all__ = [
    "calibrate_main",
    "fixed_usd_per_hour",
    "perf_table",
    "performance",
    "replica_plan",
    "replica_table",
    "search",
    "search_main",
    "slo_for",
    "validated_tokens",
    "workload_for",
]


# Concurrency levels shown besides the benchmark grid's: powers of two up to max-num-seqs.
def _levels(model: StepModel) -> list[int]:
    levels = {1, model.max_num_seqs}
    c = 2
    while c < model.max_num_seqs:
        levels.add(c)
        c *= 2
    return sorted(levels)


def workload_for(settings: Settings, prompt: int | None, output: int | None) -> Workload:
    """The request shape: the stack's benchmark lengths unless told otherwise."""
    b = settings.benchmark
    return Workload(prompt or b.benchmark_prompt_tokens, output or b.benchmark_output_tokens)


def performance(settings: Settings, workload: Workload | None = None) -> dict[str, Any]:
    """Predicted figures per concurrency for one stack, JSON-ready (means; ms, tokens/s, USD)."""
    model, calibration = model_for_settings(settings)
    w = workload or workload_for(settings, None, None)
    price = settings.price.usd_per_hour  # one instance: on GKE one replica's node
    curve = []
    for c in _levels(model):
        p = model.at_concurrency(c, w)
        curve.append(
            {
                "concurrency": c,
                **p.as_dict(),
                "usd_per_million_output_tokens": cost_per_million_tokens(
                    price, p.output_tokens_per_s
                ),
                "usd_per_million_requests": cost_per_million_requests(price, p.requests_per_s),
            }
        )
    return {
        "basis": model.basis,
        "calibrated": calibration is not None,
        "band": model.band,
        "prompt_tokens": w.prompt_tokens,
        "output_tokens": w.output_tokens,
        "speculative_tokens": model.speculation.num_speculative_tokens if model.speculation else 0,
        "mean_accepted_length": model.tokens_per_step,
        "capacity_requests_per_s": model.capacity_rps(w),
        "benchmark_grid": benchmark_grid(model, w),
        "coefficients": model.coefficients.as_dict(),
        "curve": curve,
        "measured": False,
    }


def _ms(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def perf_table(stack: str, perf: dict[str, Any]) -> Table:
    t = Table(
        title=f"Predicted performance: stack {stack}, {perf['prompt_tokens']} prompt + "
        f"{perf['output_tokens']} output tokens per request (means, PREDICTED, not measured)"
    )
    for name in (
        "concurrency",
        "TTFT ms",
        "ITL ms",
        "E2E ms",
        "output tok/s",
        "req/s",
        "$/M output tokens",
    ):
        t.add_column(name, justify="right")
    for p in perf["curve"]:
        cost = p["usd_per_million_output_tokens"]
        t.add_row(
            str(p["concurrency"]),
            _ms(p["ttft_ms"]),
            _ms(p["itl_ms"]),
            _ms(p["e2e_ms"]),
            f"{p['output_tokens_per_s']:,.0f}",
            f"{p['requests_per_s']:,.2f}",
            "-" if cost is None else f"${cost:,.2f}",
        )
    spec = (
        f"; MTP {perf['speculative_tokens']} tokens, mean accepted length "
        f"{perf['mean_accepted_length']:.2f} (prior)"
        if perf["speculative_tokens"] and not perf["calibrated"]
        else ""
    )
    t.caption = (
        f"Basis: {perf['basis']}{spec}. Band: +/-{perf['band']:.0%}. Capacity "
        f"{perf['capacity_requests_per_s']:,.2f} req/s with every sequence slot busy. "
        "Model: serving/perf.py; docs/performance-model.md."
    )
    return t


# --- search -------------------------------------------------------------------------------


def fixed_usd_per_hour(settings: Settings) -> tuple[float, list[str]]:
    """What the stack bills per hour at any replica count (on GKE the cluster fee, the system
    node and the Gateway's forwarding rule: serving.gke.fixed_costs), and the items without a
    price (counted as 0). Other platforms: nothing."""
    if settings.deploy_platform != "gke":
        return 0.0, []
    from serving.gke import fixed_costs

    items = fixed_costs(settings)
    return (
        sum(usd for _, usd, _ in items if usd is not None),
        [item for item, usd, _ in items if usd is None],
    )


def search(
    stacks: dict[str, Settings],
    rate: float,
    slo: Slo,
    prompt_tokens: int | None = None,
    output_tokens: int | None = None,
) -> list[dict[str, Any]]:
    """For each stack: the replicas that serve ``rate`` req/s within ``slo`` and their cost,
    each replica planned as the replica plan plans it (:func:`planned_replica_rate`: the
    :data:`HEADROOM` left free, the band's slow side), so both name the same count;
    cheapest first (stacks that cannot meet the SLO at all last, with ``replicas`` None).
    A replica is one instance (`Settings.price`: on GKE one node); the cost counts at least the
    stack's fewest replicas and, on GKE, the cluster's fixed costs; a count above the stack's
    most replicas is kept and flagged (``within_bounds`` False: raise the bound to deploy it).
    Request lengths default to each stack's benchmark lengths."""
    rows: list[dict[str, Any]] = []
    for name, settings in stacks.items():
        model, calibration = model_for_settings(settings)
        w = workload_for(settings, prompt_tokens, output_tokens)
        per_replica = planned_replica_rate(model, w, slo)
        price = settings.price.usd_per_hour
        fixed, unpriced = fixed_usd_per_hour(settings)
        low, high = settings.replica_bounds
        replicas = math.ceil(rate / per_replica) if per_replica > 0 else None
        if replicas is not None and replicas > MAX_REPLICAS:
            replicas = None
        usd_per_hour, usd_per_million = endpoint_cost(settings, rate, replicas)
        row: dict[str, Any] = {
            "stack": name,
            "hardware": settings.hardware,
            "platform": settings.deploy_platform,
            "model": settings.model.model,
            "per_replica_requests_per_s": per_replica,
            "replicas": replicas,
            "stack_replicas": [low, high],
            "within_bounds": replicas is not None and replicas <= high,
            "usd_per_hour_per_replica": price,
            "fixed_usd_per_hour": fixed,
            "unpriced": unpriced,
            "usd_per_hour": usd_per_hour,
            "usd_per_million_requests": usd_per_million,
            "point": model.at_rate(rate / replicas, w).as_dict() if replicas else None,
            "band": model.band,
            "basis": model.basis,
            "calibrated": calibration is not None,
            "measured": False,
        }
        rows.append(row)
    rows.sort(key=lambda r: (r["usd_per_hour"] is None, r["usd_per_hour"] or 0.0, r["stack"]))
    return rows


# --- replicas for the stack's own SLO ------------------------------------------------------


def slo_for(settings: Settings) -> Slo | None:
    """The stack's latency SLOs as the model's mean objectives (sloP95TtftMs, sloP95E2EMs held
    to the predicted means: a mean within a p95 limit is necessary, not sufficient), or None
    when the stack sets neither."""
    s = settings.slo
    if s.slo_p95_ttft_ms is None and s.slo_p95_e2e_ms is None:
        return None
    return Slo(ttft_ms=s.slo_p95_ttft_ms, e2e_ms=s.slo_p95_e2e_ms)


def offered_load(
    settings: Settings, rate: float | None, flag: str, workload: Workload | None = None
) -> tuple[float, str]:
    """The requests/s offered to the whole endpoint (every replica together) and where the
    figure comes from: the command's `flag`, else the stack's sloMinRequestsPerSecond, else
    what the stack's fewest replicas (at least 1) serve as planned (within the SLO, or below
    capacity without one), rounded down to 0.001, said so. Every command that takes a rate
    means this one figure."""
    if rate is not None:
        return rate, flag
    if settings.slo.slo_min_requests_per_second:
        return settings.slo.slo_min_requests_per_second, "the stack's sloMinRequestsPerSecond"
    model, _ = model_for_settings(settings)
    w = workload or workload_for(settings, None, None)
    slo = slo_for(settings)
    per = planned_replica_rate(model, w, slo) if slo else capacity_replica_rate(model, w)
    n = max(1, settings.replica_bounds[0])
    planned = math.floor(n * per * 1000) / 1000
    if planned < MIN_REQUESTS_PER_SECOND:
        return 1.0, f"assumed; set sloMinRequestsPerSecond or {flag}"
    return planned, (
        f"what {n} replica(s) serve as planned; set sloMinRequestsPerSecond or {flag} for your load"
    )


def endpoint_cost(
    settings: Settings, rate: float, replicas: int | None
) -> tuple[float | None, float | None]:
    """(USD per hour, USD per million requests) of serving ``rate`` req/s on ``replicas``
    (None: no count can serve it): at least the stack's fewest replicas billed, each at
    `Settings.price`, plus what the stack bills at any count (a GKE cluster's fixed costs).
    The one cost figure of `gemma4 plan`, `gemma4 plan search`, the preview and the MCP
    capacity_plan tool."""
    if not replicas:
        return None, None
    fixed, _ = fixed_usd_per_hour(settings)
    per_hour = max(replicas, settings.replica_bounds[0]) * settings.price.usd_per_hour + fixed
    return per_hour, cost_per_million_requests(per_hour, rate)


def serving_replicas(settings: Settings, plan: dict[str, Any]) -> tuple[int | None, str]:
    """How many replicas serve the offered load: the count the replica plan says it needs
    (:func:`replica_plan`: within the SLO, or below capacity without one), at least the
    stack's fewest; a count above the stack's most is kept and said so (raise the bound to
    deploy it); None when no count can serve it (the plan's verdict says why)."""
    low, high = settings.replica_bounds
    need = plan.get("replicas_needed")
    if not need:
        return None, str(plan.get("verdict", "no replica plan"))
    count = max(need, low, 1)
    basis = "the SLO" if plan.get("slo") else "capacity"
    if need > high:
        return (
            count,
            f"{basis} needs {need}; the stack runs at most {high}: raise it to deploy this",
        )
    if count > need:
        return count, f"the stack's fewest ({low}); {basis} needs {need}"
    return count, "planned for the SLO" if plan.get("slo") else "planned below capacity"


def replica_plan(
    settings: Settings, rate: float, rate_source: str, workload: Workload | None = None
) -> dict[str, Any]:
    """Replicas the model says serve ``rate`` req/s within the stack's SLO
    (:func:`serving.perf_stack.autoscaling_bounds`: :data:`HEADROOM` left free, the band's
    pessimistic side), against the stack's own bounds (`Settings.replica_bounds`), with the
    cost at the fewest and most replicas (fixed costs included)."""
    model, _ = model_for_settings(settings)
    w = workload or workload_for(settings, None, None)
    low, high = settings.replica_bounds
    price = settings.price.usd_per_hour
    fixed, unpriced = fixed_usd_per_hour(settings)
    out: dict[str, Any] = {
        "platform": settings.deploy_platform,
        "requests_per_second": rate,
        "requests_per_second_source": rate_source,
        "stack_min_replicas": low,
        "stack_max_replicas": high,
        "usd_per_hour_per_replica": price,
        "fixed_usd_per_hour": fixed,
        "unpriced": unpriced,
        "usd_per_hour_at_min": low * price + fixed,
        "usd_per_hour_at_max": high * price + fixed,
        "measured": False,
    }
    slo = slo_for(settings)
    if slo is None:
        # No latency SLO: each replica is planned below its capacity (the same headroom), so
        # the count still says what the load needs to be served at all.
        per_replica = capacity_replica_rate(model, w)
        need = max(1, math.ceil(rate / per_replica))
        if need > MAX_REPLICAS:
            return {
                **out,
                "slo": None,
                "replicas_needed": None,
                "verdict": f"{rate:g} req/s needs {need} replicas, above the cap {MAX_REPLICAS}",
            }
        sized = {
            "per_replica_rps": per_replica,
            "sized_on": f"capacity ({HEADROOM * 100:g} % headroom): no latency SLO set "
            "(sloP95TtftMs, sloP95E2EMs)",
        }
        slo_text = None
    else:
        try:
            bounds = autoscaling_bounds(model, w, slo, base_rate=0.0, peak_rate=rate)
        except ValueError as exc:
            return {**out, "slo": slo.describe(), "replicas_needed": None, "verdict": str(exc)}
        need, per_replica = bounds.max_replicas, bounds.per_replica_rps
        sized = {**bounds.as_dict(), "sized_on": "the SLO"}
        slo_text = slo.describe()
    within = "within the SLO" if slo is not None else "below capacity"
    if need > high:
        key, most = _replica_key(settings)
        raise_it = (
            f"raise {key} to {need}"
            if need <= most
            else f"{key} allows at most {most}: split the traffic over more stacks"
        )
        missed = "the SLO missed" if slo is not None else "queues to grow"
        verdict = (
            f"{rate:g} req/s needs {need} replicas, above the stack's most ({high}): "
            f"{raise_it}, or expect {missed} above {high * per_replica:.2f} req/s"
        )
    else:
        verdict = f"{need} of at most {high} replicas serve {rate:g} req/s {within}"
    if slo is None:
        verdict += "; no latency SLO set (sloP95TtftMs, sloP95E2EMs)"
    return {
        **out,
        **sized,
        "slo": slo_text,
        "replicas_needed": need,
        "within_bounds": need <= high,
        "rps_at_max_replicas": high * per_replica,
        "verdict": verdict,
    }


def _replica_key(settings: Settings) -> tuple[str, int]:
    """The key bounding the stack's replicas and the most it accepts (the settings' own
    bound)."""
    from pydantic import BaseModel

    from serving.settings import CloudRunSettings, GkeSettings, TpuSettings

    choices: dict[str, tuple[type[BaseModel], str, str]] = {
        "gke": (GkeSettings, "max_replicas", "maxReplicas"),
        "tpu-vm": (TpuSettings, "replicas", "replicas"),
    }
    group, field, key = choices.get(
        settings.deploy_platform, (CloudRunSettings, "max_instances", "maxInstances")
    )
    bounds = [m.le for m in group.model_fields[field].metadata if getattr(m, "le", None)]
    return key, int(bounds[0]) if bounds else MAX_REPLICAS


def replica_table(stack: str, r: dict[str, Any]) -> Table:
    t = Table(
        title=f"Replicas: stack {stack} at {r['requests_per_second']:g} req/s "
        f"({r['requests_per_second_source']}; PREDICTED, not measured)"
    )
    t.add_column("item")
    t.add_column("value", justify="right")
    t.add_column("how")
    rows: list[tuple[str, str, str]] = [("SLO (on predicted means)", r["slo"] or "-", "")]
    if r.get("per_replica_rps") is not None:
        on_slo = r["slo"] is not None
        rows += [
            (
                "one replica within the SLO" if on_slo else "one replica below capacity",
                f"{r['per_replica_rps']:,.2f} req/s",
                f"{'largest rate meeting it' if on_slo else 'its capacity (every slot busy)'} "
                f"x {1 - HEADROOM:g} ({HEADROOM * 100:g} % headroom) / (1 + band)",
            ),
            ("replicas needed", str(r["replicas_needed"]), "at the rate above"),
            (
                f"most replicas ({r['stack_max_replicas']}) serve",
                f"{r['rps_at_max_replicas']:,.2f} req/s",
                "within the SLO" if on_slo else "below capacity",
            ),
        ]
    unpriced = f"; not priced: {', '.join(r['unpriced'])}" if r["unpriced"] else ""
    rows += [
        (
            "stack's replicas",
            f"{r['stack_min_replicas']} to {r['stack_max_replicas']}",
            "minReplicas/maxReplicas"
            if r["platform"] == "gke"
            else "replicas"
            if r["platform"] == "tpu-vm"
            else "minInstances/maxInstances",
        ),
        (
            "cost at the fewest",
            f"${r['usd_per_hour_at_min']:,.2f}/h",
            f"{r['stack_min_replicas']} x ${r['usd_per_hour_per_replica']:,.2f} + fixed "
            f"${r['fixed_usd_per_hour']:,.2f}{unpriced}",
        ),
        (
            "cost at the most",
            f"${r['usd_per_hour_at_max']:,.2f}/h",
            f"{r['stack_max_replicas']} x ${r['usd_per_hour_per_replica']:,.2f} + fixed "
            f"${r['fixed_usd_per_hour']:,.2f}{unpriced}",
        ),
    ]
    for row in rows:
        t.add_row(*row)
    t.caption = r["verdict"]
    return t


def _bounded(name: str, value: float | None, upper: float) -> float | None:
    if value is None:
        return None
    if not math.isfinite(value) or not 0 < value <= upper:
        raise ValueError(f"{name} must be a number in (0, {upper:g}], got {value!r}")
    return value


def validated_tokens(name: str, value: int | None) -> int | None:
    """A token count from the command line: None, or within [1, MAX_TOKENS] (else ValueError
    naming the option)."""
    if value is not None and not 1 <= value <= MAX_TOKENS:
        raise ValueError(f"{name} must be in [1, {MAX_TOKENS}], got {value}")
    return value


def build_search_parser(add_help: bool = True) -> argparse.ArgumentParser:
    from serving.project import add_project_options

    parser = argparse.ArgumentParser(
        prog="gemma4 plan search",
        add_help=add_help,
        description="The cheapest stack (hardware, checkpoint, settings) and replica count "
        "that serves RATE requests/s within an SLO on the predicted means, each replica "
        f"planned as `gemma4 plan --rate` plans it ({HEADROOM * 100:g} % headroom, the band's "
        "slow side).",
    )
    from serving.inputs import bounded_number

    parser.add_argument(
        "--rate",
        type=bounded_number("--rate", MIN_REQUESTS_PER_SECOND, MAX_REQUESTS_PER_SECOND),
        required=True,
        help="requests/s offered to the whole endpoint (all replicas; the same figure as "
        "`gemma4 plan -r` and `gemma4 preview -r`)",
    )
    parser.add_argument("--ttft-ms", type=float, help="mean time to first token at most")
    parser.add_argument("--itl-ms", type=float, help="mean inter-token latency at most")
    parser.add_argument("--e2e-ms", type=float, help="mean end-to-end latency at most")
    parser.add_argument("--prompt-tokens", type=int, help="default: each stack's benchmark's")
    parser.add_argument("--output-tokens", type=int, help="default: each stack's benchmark's")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_project_options(parser, stack_file=False)
    return parser


def _project_dir(given: Path | None) -> Path:
    """`--project-dir`, else the Pulumi project found from the current directory upward."""
    from serving.project import ProjectError, find_project_file

    if given is not None:
        return given
    found = find_project_file()
    if found is None:
        raise ProjectError(
            f"no Pulumi project (Pulumi.yaml) in {Path.cwd()} or its parents; run from a "
            "Pulumi project directory, or pass --project-dir DIR"
        )
    return found.parent


def search_main(argv: Sequence[str]) -> int:
    from serving.plan import PlanError, load_stack_settings, stack_names

    o = build_search_parser().parse_args(list(argv))
    try:
        rate = float(o.rate)
        slo = Slo(
            _bounded("--ttft-ms", o.ttft_ms, 3_600_000),
            _bounded("--itl-ms", o.itl_ms, 3_600_000),
            _bounded("--e2e-ms", o.e2e_ms, 3_600_000),
        )
        if slo.ttft_ms is None and slo.itl_ms is None and slo.e2e_ms is None:
            raise ValueError("give at least one of --ttft-ms, --itl-ms, --e2e-ms")
        prompt = validated_tokens("--prompt-tokens", o.prompt_tokens)
        output = validated_tokens("--output-tokens", o.output_tokens)
        root = _project_dir(o.project_dir)
        names = stack_names(root)
        if not names:
            raise ValueError(f"no Pulumi.<stack>.yaml in {root}")
        print(
            f"gemma4 plan search: reading {', '.join(f'Pulumi.{n}.yaml' for n in names)} "
            f"in {root.resolve()}",
            file=sys.stderr,
        )
        stacks = {name: load_stack_settings(name, root) for name in names}
        rows = search(stacks, rate, slo, prompt, output)
    except (ValueError, PlanError) as exc:
        print(f"gemma4 plan search: error: {exc}", file=sys.stderr)
        return 2
    if o.json:
        print(json.dumps({"rate": rate, "slo": slo.describe(), "stacks": rows}, indent=2))
    else:
        t = Table(
            title=f"Cheapest stack for {rate:g} req/s within {slo.describe()} "
            "(PREDICTED means, not measured)"
        )
        for name in (
            "stack",
            "hardware",
            "per replica req/s",
            "replicas",
            "stack's bounds",
            "$/h",
            "$/M req",
        ):
            t.add_column(name, justify="right" if name not in ("stack", "hardware") else "left")
        t.add_column("band")
        for r in rows:
            low, high = r["stack_replicas"]
            t.add_row(
                r["stack"],
                r["hardware"],
                f"{r['per_replica_requests_per_s']:,.2f}",
                str(r["replicas"]) if r["replicas"] else "cannot meet",
                f"{low}-{high}" + ("" if r["within_bounds"] or not r["replicas"] else " (raise)"),
                f"${r['usd_per_hour']:,.2f}" if r["usd_per_hour"] else "-",
                f"${r['usd_per_million_requests']:,.2f}" if r["usd_per_million_requests"] else "-",
                f"+/-{r['band']:.0%} ({'calibrated' if r['calibrated'] else 'uncalibrated'})",
            )
        t.caption = (
            f"Per replica: the largest arrival rate whose predicted means meet the SLO x "
            f"{1 - HEADROOM:g} ({HEADROOM * 100:g} % headroom) / (1 + band), as "
            "`gemma4 plan --rate` plans replicas (serving/perf_stack.py). $/h: at least the "
            "stack's fewest replicas, plus a GKE cluster's fixed costs (fee, system node, "
            "forwarding rule). "
            "Uncalibrated predictions carry a +/-50 % band."
        )
        Console().print(t)
    return 0 if rows and rows[0]["replicas"] else 1


# --- calibrate ----------------------------------------------------------------------------


def build_calibrate_parser(add_help: bool = True) -> argparse.ArgumentParser:
    from serving.project import add_project_options

    parser = argparse.ArgumentParser(
        prog="gemma4 plan calibrate",
        add_help=add_help,
        description="Fit the performance model's coefficients to a benchmark run of a stack "
        "and write the calibration (with its provenance) for that hardware, checkpoint and "
        "vLLM release.",
    )
    parser.add_argument("run_dir", type=Path, help="a `gemma4 bench run` output folder")
    parser.add_argument("-s", "--stack", required=True, help="the stack the run measured")
    parser.add_argument(
        "--where", default=None, help="where the server and client ran (free text, 200 chars)"
    )
    parser.add_argument(
        "--synthetic",
        action="store_true",
        help="the run measured a fake server: stored, never used for a real stack's prediction",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder to write to (default: the package's serving/data/calibrations)",
    )
    add_project_options(parser, stack_file=False)
    return parser


def calibrate_main(argv: Sequence[str]) -> int:
    from bench.results.store import StoreError, load_run
    from serving.plan import PlanError, load_stack_settings
    from serving.project import say_read, stack_file

    o = build_calibrate_parser().parse_args(list(argv))
    try:
        if o.where is not None and not 0 < len(o.where) <= 200:
            raise ValueError("--where must be 1 to 200 characters")
        root = _project_dir(o.project_dir)
        settings = load_stack_settings(o.stack, root)
        say_read(
            "gemma4 plan calibrate", stack_file(o.stack, root, offers_stack_file=False).resolve()
        )
        if not o.run_dir.is_dir():
            raise ValueError(f"{o.run_dir}: no such run folder")
        data = load_run(o.run_dir)
        run_model = data.run.get("model")
        if run_model not in (None, settings.model.model, settings.model.served_model_name):
            raise ValueError(
                f"the run measured model {run_model!r}, stack {o.stack} serves "
                f"{settings.model.model!r}"
            )
        run_hw = data.run.get("hardware")
        if run_hw not in (None, settings.hardware):
            raise ValueError(
                f"the run measured hardware {run_hw!r}, stack {o.stack} is {settings.hardware!r}"
            )
        base, _ = model_for_settings(settings, calibrations=None)  # fit from the priors
        release = vllm_release(settings)
        calibration = calibrate(
            base,
            data.cells,
            hardware=settings.hardware,
            checkpoint=settings.model.model,
            vllm=release,
            provenance={
                "run": data.label,
                "run_dir": o.run_dir.name,
                "run_created_at": data.run.get("created_at"),
                "url": data.run.get("url"),
                "where": o.where or "not stated",
                "image": settings.image,
                "stack": o.stack,
                "fitted_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "synthetic": bool(o.synthetic),
            },
        )
    except (ValueError, PlanError, StoreError, CalibrationError) as exc:
        print(f"gemma4 plan calibrate: error: {exc}", file=sys.stderr)
        return 2
    name = f"{settings.hardware}--{settings.model.card.folder}--{release.replace(' ', '-')}"
    out: Path = CALIBRATIONS_DIR if o.out is None else o.out
    path = out / f"{name}{'--synthetic' if o.synthetic else ''}.json"
    try:
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(calibration.as_dict(), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        print(
            f"gemma4 plan calibrate: error: --out {out}: cannot write ({exc.strerror or exc})",
            file=sys.stderr,
        )
        return 2
    print(f"wrote {path}")
    for key, value in calibration.coefficients.as_dict().items():
        print(f"  {key}: {value:.4g}")
    print("held-out median error (fit on alternate concurrencies, predict the others):")
    for metric, error in calibration.held_out_error.items():
        print(f"  {metric}: {'-' if error is None else f'{error:.1%}'}")
    return 0
