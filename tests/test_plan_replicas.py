"""Replicas from the performance model: `gemma4 plan` says how many replicas a stack's SLO
needs at a rate and compares them with the stack's own bounds; costs count one instance at
`Settings.price` (on GKE one node) and a GKE cluster's fixed costs."""

from __future__ import annotations

import json
import math

import pytest

from gemma4.plan_cli import main
from serving.capacity.gke_costs import fixed_costs
from serving.capacity.perf import Slo
from serving.capacity.perf_stack import (
    benchmark_concurrency,
    model_for_settings,
    scale_up_waiting_requests,
)
from serving.capacity.plan import load_stack_settings
from serving.capacity.plan_perf import (
    fixed_usd_per_hour,
    performance,
    replica_plan,
    workload_for,
)
from serving.catalog.hardware import GKE_SHAPES, HARDWARE
from serving.config.settings import load_settings


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_each_platform_has_its_own_replica_bounds() -> None:
    gke = load_stack_settings("gke-l4")
    assert gke.replica_bounds == (gke.gke.min_replicas, gke.gke.max_replicas) == (1, 4)
    l4 = load_stack_settings("l4")
    assert l4.replica_bounds == (0, 1)  # minInstances 0 (scale to zero), maxInstances 1
    tpu = load_stack_settings("tpu-v6e1")
    assert tpu.replica_bounds == (tpu.tpu.replicas, tpu.tpu.replicas)


def test_a_gke_replica_costs_its_node_and_the_cluster_adds_its_fixed_costs() -> None:
    settings = load_stack_settings("gke-l4")
    node = GKE_SHAPES["l4"].price.usd_per_hour  # g2-standard-8, not a Cloud Run L4 instance
    assert node != HARDWARE["l4"].price.usd_per_hour
    items = [f.usd_per_hour for f in fixed_costs(settings)]
    # The cluster fee and the forwarding rule are confirmed; the system node's rate is not,
    # counted at the figure the catalogue recorded earlier: the plan's costs are estimates.
    assert all(usd is not None for usd in items)
    fixed = [usd or 0.0 for usd in items]
    r = replica_plan(settings, 1.0, "test")
    assert r["price_status"] == "estimate"
    assert not r["unpriced"]
    assert r["usd_per_hour_per_replica"] == node
    assert r["usd_per_hour_at_min"] == pytest.approx(1 * node + sum(fixed))
    assert r["usd_per_hour_at_max"] == pytest.approx(4 * node + sum(fixed))
    # The predicted cost per million tokens divides the node's price, not Cloud Run's.
    top = performance(settings)["curve"][-1]
    assert top["usd_per_million_output_tokens"] == pytest.approx(
        node / top["output_tokens_per_s"] * 1e6 / 3600
    )


def test_the_replicas_needed_serve_the_rate_within_the_stack_slo() -> None:
    settings = load_stack_settings("gke-l4")
    model, _ = model_for_settings(settings)
    w = workload_for(settings, None, None)
    slo = Slo(ttft_ms=settings.slo.slo_p95_ttft_ms, e2e_ms=settings.slo.slo_p95_e2e_ms)
    r = replica_plan(settings, 1.0, "test")
    need = r["replicas_needed"]
    assert need == math.ceil(1.0 / r["per_replica_rps"])
    assert need * r["per_replica_rps"] >= 1.0 > (need - 1) * r["per_replica_rps"]
    assert slo.met_by(model.at_rate(1.0 / need, w))
    assert r["within_bounds"] is (need <= 4)
    assert r["rps_at_max_replicas"] == pytest.approx(4 * r["per_replica_rps"])


def test_a_rate_above_max_replicas_says_which_bound_to_raise(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "-s", "gke-l4", "--rate", "5", "--json")
    assert code == 0  # the plan's exit status is about fitting, not about the rate
    r = json.loads(out)["replicas"]
    assert r["requests_per_second_source"] == "--requests-per-second"
    assert r["replicas_needed"] > 4 and r["within_bounds"] is False
    assert f"raise maxReplicas to {r['replicas_needed']}" in r["verdict"]
    code, out, _ = run(capsys, "-s", "l4", "--rate", "5", "--json")
    assert "raise maxInstances to" in json.loads(out)["replicas"]["verdict"]
    code, out, _ = run(capsys, "-s", "tpu-v6e1", "--rate", "20", "--json")
    assert "raise replicas to" in json.loads(out)["replicas"]["verdict"]
    # Beyond what the key accepts (TPU replicas: 16; GKE: 64), it says so instead.
    code, out, _ = run(capsys, "-s", "tpu-v6e1", "--rate", "500", "--json")
    assert "replicas allows at most 16" in json.loads(out)["replicas"]["verdict"]
    code, out, _ = run(capsys, "-s", "gke-l4", "--rate", "100", "--json")
    assert "maxReplicas allows at most 64" in json.loads(out)["replicas"]["verdict"]
    code, out, _ = run(capsys, "-s", "gke-l4", "--rate", "5")
    assert "Replicas: stack gke-l4 at 5 req/s" in out and "raise" in out


def test_the_rate_defaults_to_the_stacks_minimum_throughput_slo() -> None:
    from serving.capacity.plan import raw_stack_settings, report

    raw = {**raw_stack_settings("gke-l4"), "sloMinRequestsPerSecond": 2.5}
    r = report("gke-l4", load_settings(raw))["replicas"]
    assert (r["requests_per_second"], r["requests_per_second_source"]) == (
        2.5,
        "the stack's sloMinRequestsPerSecond",
    )


def test_an_slo_one_replica_cannot_meet_is_said_not_raised() -> None:
    from serving.capacity.plan import raw_stack_settings

    raw = {**raw_stack_settings("gke-l4"), "sloP95TtftMs": 1}
    r = replica_plan(load_settings(raw), 1.0, "test")
    assert r["replicas_needed"] is None and "cannot meet" in r["verdict"]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e9"])
def test_a_bad_rate_is_refused_naming_the_option(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["-s", "gke-l4", "--rate", value])
    assert exc.value.code == 2
    assert "-r/--requests-per-second/--rate must be a number" in capsys.readouterr().err


# --- the post-deploy benchmark's grid, derived from the model -------------------------------


@pytest.mark.parametrize("stack", ["gke-l4", "gke-tpu-v6e", "l4", "rtx6000", "tpu-v6e1"])
def test_the_default_grid_is_the_models_and_fits_the_budget(stack: str) -> None:
    from serving.capacity.perf_stack import POST_DEPLOY_SECONDS_PER_CELL, benchmark_grid
    from serving.capacity.plan import raw_stack_settings

    raw = raw_stack_settings(stack)
    assert "benchmarkConcurrency" not in raw  # the shipped stacks take the derived grid
    for budget in (60, 120, 600):
        settings = load_settings({**raw, "benchmarkBudgetSeconds": budget})
        model, _ = model_for_settings(settings)
        w = workload_for(settings, None, None)
        points = min(6, max(3, budget // POST_DEPLOY_SECONDS_PER_CELL))
        grid = benchmark_concurrency(settings)
        assert grid == benchmark_grid(model, w, points)
        assert grid[0] == 1 and grid[-1] == settings.vllm.max_num_seqs
        assert len(grid) <= points  # every cell gets its share of the budget
    # A longer budget measures more of the curve than the default one.
    long = benchmark_concurrency(load_settings({**raw, "benchmarkBudgetSeconds": 600}))
    assert len(long) >= len(benchmark_concurrency(load_settings(raw)))


def test_a_stack_that_names_its_levels_gets_them() -> None:
    from serving.capacity.plan import raw_stack_settings

    raw = {**raw_stack_settings("gke-l4"), "benchmarkConcurrency": [4, 1, 4]}
    assert benchmark_concurrency(load_settings(raw)) == [1, 4]


def test_the_post_deploy_hook_measures_the_derived_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    import pulumi

    import components.stack as stack_module
    from endpoint.auth import NoAuth

    seen: list[tuple[int, ...]] = []

    def capture(name: str, config: object, **_: object) -> object:
        seen.append(config.grid.concurrency)  # type: ignore[attr-defined]
        return object()

    monkeypatch.setattr(stack_module, "benchmark_hook", capture)
    monkeypatch.setattr(pulumi, "get_stack", lambda: "gke-l4")
    monkeypatch.setattr(pulumi, "ResourceHookBinding", lambda **kw: kw)
    from serving.capacity.plan import raw_stack_settings

    settings = load_settings({**raw_stack_settings("gke-l4"), "benchmarkBudgetSeconds": 600})
    stack_module.post_deploy_binding(settings, "gemma", NoAuth(), ("url",))
    assert seen == [tuple(benchmark_concurrency(settings))]
    assert len(seen[0]) > 2  # more than the old fixed default, 1 and maxNumSeqs


# --- the GKE autoscaler's target, derived from the model -------------------------------------


def _queue_wait_ok(settings: object, waiting: int) -> bool:
    """Whether a request behind ``waiting`` others on a full replica starts within the
    stack's TTFT SLO by the model, on the slow side of its band."""
    from serving.config.settings import Settings

    assert isinstance(settings, Settings)
    model, _ = model_for_settings(settings)
    w = workload_for(settings, None, None)
    slow = 1 + model.band
    busy = model.at_concurrency(model.max_num_seqs, w)
    wait = waiting / (model.capacity_rps(w) / slow)
    assert settings.slo.slo_p95_ttft_ms is not None
    return wait + busy.ttft_s * slow <= settings.slo.slo_p95_ttft_ms / 1000


@pytest.mark.parametrize("stack", ["gke-l4", "gke-tpu-v6e"])
def test_the_autoscaler_target_is_the_largest_queue_the_ttft_slo_allows(stack: str) -> None:
    from serving.capacity.plan import raw_stack_settings
    from serving.render.gke import autoscaler

    raw = raw_stack_settings(stack)
    assert "scaleUpWaitingRequests" not in raw  # the shipped stacks take the derived target
    settings = load_settings(raw)
    target = scale_up_waiting_requests(settings)
    assert target >= 1
    assert _queue_wait_ok(settings, target) or target == 1
    assert not _queue_wait_ok(settings, target + 1)
    metric = autoscaler(settings)["spec"]["metrics"][0]["pods"]["target"]
    assert metric == {"type": "AverageValue", "averageValue": str(target)}
    # A stricter SLO queues less before scaling; an explicit value wins.
    strict = scale_up_waiting_requests(load_settings({**raw, "sloP95TtftMs": 500}))
    assert 1 <= strict <= target
    assert scale_up_waiting_requests(load_settings({**raw, "scaleUpWaitingRequests": 7})) == 7


def test_an_l4_replica_queues_less_than_a_v6e_chip() -> None:
    from serving.config.settings import load_settings
    from tests.pulumi_harness import stack_config

    # With room in the SLO, the queue a replica may hold grows with what it serves: the L4's
    # full replica serves ~1 req/s, the chip's ~12.
    roomy = {"sloP95TtftMs": 60_000}
    l4 = scale_up_waiting_requests(load_settings({**stack_config("gke-l4"), **roomy}))
    v6e = scale_up_waiting_requests(load_settings({**stack_config("gke-tpu-v6e"), **roomy}))
    assert 1 < l4 < v6e
    # A replica whose full batch already misses the SLO (the v6e chip's KV cache holds ~36 of
    # the benchmark's requests, not its 64 slots: the rest wait) holds the smallest queue.
    assert scale_up_waiting_requests(load_stack_settings("gke-tpu-v6e")) == 1


@pytest.mark.parametrize("stack", ["l4", "rtx6000", "tpu-v6e1", "gke-l4", "gke-tpu-v6e"])
def test_plan_and_preview_mean_one_rate(capsys: pytest.CaptureFixture[str], stack: str) -> None:
    """`-r`, `--requests-per-second` and `--rate` are one figure in `gemma4 plan` and
    `gemma4 preview`: the load offered to the whole endpoint, giving the same replicas and the
    same cost per million requests in both."""
    from gemma4 import preview

    outputs = []
    for flag in ("-r", "--requests-per-second", "--rate"):
        code, out, err = run(capsys, "-s", stack, flag, "3", "--json")
        assert code == 0, err
        outputs.append(json.loads(out))
    assert outputs[0] == outputs[1] == outputs[2]
    planned = outputs[0]
    assert planned["requests_per_second"] == 3
    n = planned["serving_replicas"]
    settings = load_stack_settings(stack)
    low, _ = settings.replica_bounds
    assert n == max(planned["replicas"]["replicas_needed"], low, 1)
    assert planned["requests_per_second_per_replica"] == pytest.approx(3 / n)
    # n replicas at the instance price plus what the stack bills at any count (GKE's cluster).
    # An unknown instance price (gke-tpu-v6e's spot node) leaves every figure null.
    fixed, _ = fixed_usd_per_hour(settings)
    price = planned["usd_per_hour"]
    assert planned["usd_per_hour_at_rate"] == (price and pytest.approx(n * price + fixed))
    if price is not None:
        assert planned["usd_per_month_at_rate"] == pytest.approx(
            730 * planned["usd_per_hour_at_rate"]
        )
        assert planned["usd_per_million_requests"] == pytest.approx(
            planned["usd_per_hour_at_rate"] / (3 * 3600) * 1e6
        )
        # $/M output tokens: the same hour over the tokens the load asks for.
        tokens = 3 * planned["performance"]["output_tokens"]
        assert planned["usd_per_million_output_tokens"] == pytest.approx(
            planned["usd_per_hour_at_rate"] / (tokens * 3600) * 1e6
        )
    else:
        assert planned["usd_per_million_requests"] is None
        assert planned["usd_per_million_output_tokens"] is None
    assert preview.main(["-s", stack, "--rate", "3", "--json"]) == 0
    previewed = json.loads(capsys.readouterr().out)
    assert previewed["cost"]["replicas"] == n
    for key in ("usd_per_million_requests", "usd_per_million_output_tokens"):
        assert previewed["cost"][key] == (planned[key] and pytest.approx(planned[key]))
    assert previewed["plan"]["replicas"] == planned["replicas"]


def test_without_a_latency_slo_replicas_are_sized_below_capacity() -> None:
    """No sloP95TtftMs / sloP95E2EMs: the replica count still says what the load needs to be
    served at all (each replica below its capacity by the same headroom)."""
    from serving.capacity.perf_stack import HEADROOM
    from serving.capacity.plan import raw_stack_settings, report

    raw = {**raw_stack_settings("gke-l4"), "sloP95TtftMs": None, "sloP95E2EMs": None}
    settings = load_settings(raw)
    assert settings.slo.slo_p95_ttft_ms is None and settings.slo.slo_p95_e2e_ms is None
    model, _ = model_for_settings(settings)
    capacity = model.capacity_rps(workload_for(settings, None, None))
    # Three replicas' worth, whatever the band: within the stack's replica bounds.
    rate = 2.5 * capacity * (1 - HEADROOM) / (1 + model.band)
    r = report("gke-l4", settings, rate)
    plan = r["replicas"]
    assert plan["slo"] is None and "no latency SLO set" in plan["verdict"]
    per = plan["per_replica_rps"]
    assert per == pytest.approx(capacity * (1 - HEADROOM) / (1 + model.band))
    assert plan["replicas_needed"] == math.ceil(rate / per) > 2
    assert r["serving_replicas"] == plan["replicas_needed"]
    assert r["serving_replicas_source"] == "planned below capacity"


def test_a_load_beyond_every_count_has_no_cost_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Above the most replicas the platform's settings take no count serves the load: no cost
    per million requests (not a figure for an overloaded replica), the reason named, in plan
    and preview alike."""
    from gemma4 import preview

    code, out, _ = run(capsys, "-s", "gke-l4", "-r", "100000", "--json")
    assert code == 0
    r = json.loads(out)
    assert r["serving_replicas"] is None and r["usd_per_million_requests"] is None
    assert "maxReplicas allows at most 64" in r["serving_replicas_source"]
    code, out, _ = run(capsys, "-s", "gke-l4", "-r", "100000")
    assert "maxReplicas allows at most 64" in " ".join(out.split())
    assert preview.main(["-s", "gke-l4", "-r", "100000", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)["cost"]
    assert cost["replicas"] is None and cost["usd_per_million_requests"] is None


def test_without_a_rate_the_stack_is_priced_at_what_its_fewest_replicas_serve() -> None:
    """No -r and no sloMinRequestsPerSecond: the load is what the stack's fewest replicas
    (at least 1) serve as planned, so the default figures describe a stack that can serve
    its load; said so."""
    from serving.capacity.plan import report

    for stack in ("l4", "rtx6000", "gke-l4", "tpu-v6e1", "gke-tpu-v6e"):
        r = report(stack, load_stack_settings(stack))
        assert "serve as planned" in r["requests_per_second_source"]
        low, _ = load_stack_settings(stack).replica_bounds
        assert r["serving_replicas"] == max(1, low)
        assert r["replicas"]["within_bounds"] is True


def test_the_rate_a_stack_serves_is_the_edge_of_its_targets() -> None:
    """served_rate answers a rate (whole thousandths, as printed) whose planned load the
    simulation says meets every target, and a rate 2 % higher (past the search's 1/128 of the
    bound) that does not: the edge, not merely a safe rate."""
    from dataclasses import replace

    from serving.capacity import configsearch as cs
    from serving.capacity.configsearch import stack_targets
    from serving.capacity.plan_perf import workload_for
    from serving.capacity.simulate import Traffic

    for stack in ("l4", "rtx6000", "tpu-v6e1"):
        settings = load_stack_settings(stack)
        w = workload_for(settings, None, None)
        goal = cs.Goal(Traffic(1.0, w.prompt_tokens, w.output_tokens), stack_targets(settings))
        rate = cs.served_rate(stack, settings, goal, 1)
        assert rate > 0 and rate == round(rate, 3)
        c = cs._bare(stack, settings, goal)
        factor = cs.planned_factor(c.model)

        for r, ok in ((rate, True), (rate * 1.02 + 0.001, False)):
            probe = replace(goal, traffic=replace(goal.traffic, rate=r))
            assert cs._meets(cs._run(c, probe, 1, r * factor), goal.targets)[0] is ok, (stack, r)


@pytest.mark.parametrize(
    ("bound", "edge", "ratio_met"),
    [
        (0.1, 0.09, 0.9999),  # a step finer than a thousandth: the bracket still closes
        (10.0, 7.3, 1.0),  # a met load at a ratio of exactly 1 pins the line at its end
        (10.0, 7.3, 0.2),  # a ratio flat below the edge
        (10.0, 0.0, 0.5),  # nothing meets
        (10.0, math.inf, 0.5),  # everything meets, up to the bound
        (0.0015, 0.0015, 0.5),  # one thousandth to try
        (5000.0, 4321.0, 0.9),
        # A ratio that jumps just past 1 at the edge pins the line next to the missed end.
        (10.0, 4.3, (0.5, 1 + 1e-12)),
        (5000.0, 2150.0, (0.5, 1 + 1e-12)),
        (12.8, 5.504, (0.5, 1 + 1e-12)),
        (1.0, 0.43, (0.0, 1 + 2**-52)),
        (10.0, 4.3, (0.1, 1 + 1e-7)),
        (2e9, 1e9, 0.5),  # past what the planner takes: searched below it
    ],
)
def test_the_served_rate_search_closes_its_bracket_whatever_the_ratio(
    monkeypatch: pytest.MonkeyPatch,
    bound: float,
    edge: float,
    ratio_met: float | tuple[float, float],
) -> None:
    """served_rate against a made-up edge (met up to ``edge``, at ``ratio_met``; missed past
    it, far): the answer is a load it tried and met, a load at most one step higher (1/128
    of the bound, at least a thousandth) was tried and missed or is past the bound, nothing
    above the bound is tried, and it takes at most twice the halvings' count and four."""
    from types import SimpleNamespace

    from serving.capacity import configsearch as cs
    from serving.capacity.simulate import Traffic
    from serving.config.groups import MAX_REQUESTS_PER_SECOND

    tried: list[float] = []
    model = SimpleNamespace(max_rate_meeting=lambda *_, **__: bound)
    monkeypatch.setattr(cs, "_bare", lambda *_: SimpleNamespace(model=model))
    monkeypatch.setattr(cs, "planned_factor", lambda _: 1.0)

    def run(_c: object, _g: object, _n: int, rate: float) -> float:
        tried.append(rate)
        return rate  # the made-up result: the load it ran at

    monkeypatch.setattr(cs, "_run", run)
    monkeypatch.setattr(cs, "_meets", lambda r, _t: (r <= edge, "ttft_p95"))
    met, missed = ratio_met if isinstance(ratio_met, tuple) else (ratio_met, 50.0)
    monkeypatch.setattr(cs, "_ratio", lambda r, _t: met if r <= edge else missed)
    goal = cs.Goal(Traffic(1.0, 512, 128), (cs.Target("ttft", "p95", 2000.0),))
    got = cs.served_rate("made-up", load_stack_settings("l4"), goal, 1)
    bound = min(bound, MAX_REQUESTS_PER_SECOND)
    step = max(0.001, bound / cs.SERVED_RATE_STEPS)
    assert all(0 < r < bound and r == round(r, 3) for r in tried)
    assert got == 0.0 or (got in tried and got <= edge)
    missed_above = [r for r in tried if r > got and r > edge]
    assert bound - got <= step + 1e-9 or min(missed_above) - got <= step + 1e-9
    assert len(tried) <= 2 * 7 + 4  # twice the seven halvings, and the first guesses


def test_the_served_rate_is_priced_as_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default load is the rate the search answered, not a thousandth below it (1.001 *
    1000 is just under 1001 in binary, and a second floor took it to 1.000)."""
    from serving.capacity import plan

    def served_rate(*_: object) -> float:
        return 1.001

    monkeypatch.setattr(plan, "served_rate", served_rate)
    monkeypatch.setattr(plan, "_SIZED", {})
    r = plan.report("l4", load_stack_settings("l4"))
    assert r["requests_per_second"] == 1.001
