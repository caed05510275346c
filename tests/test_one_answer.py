"""One answer everywhere: `gemma4 plan -s`, `gemma4 preview`, the MCP capacity tool and the
configuration search size a stack the same way for the same workload, targets and load: the
same replicas, cost and simulated percentiles; the stack's sloP95* keys are p95s, checked on
the simulation's p95, not on a mean."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gemma4 import preview
from gemma4.plan_cli import main as plan_main
from serving.capacity.configsearch import Candidate, Goal, Target, sized_stack, stack_targets
from serving.capacity.plan import load_stack_settings, raw_stack_settings
from serving.capacity.simulate import Traffic

WORKLOAD = ["--prompt-tokens", "1000", "--output-tokens", "200", "--prompt-p95", "1500"]


def sized_stack_file(name: str, raw: dict[str, Any], goal: Goal) -> Candidate:
    """A stack file's flat settings sized as the search sizes its answers."""
    from serving.config.settings import load_settings

    return sized_stack(name, load_settings(raw), goal, raw)


def _json(capsys: pytest.CaptureFixture[str], command: Any, argv: list[str]) -> dict[str, Any]:
    assert command(argv) in (0, 1)
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


@pytest.mark.parametrize(("stack", "rate"), [("rtx6000", 6.0), ("gke-tpu-v6e", 10.0)])
def test_plan_preview_and_the_search_give_one_answer(
    capsys: pytest.CaptureFixture[str], stack: str, rate: float
) -> None:
    argv = ["-s", stack, "-r", str(rate), *WORKLOAD, "--ttft-p95-ms", "1500", "--json"]
    planned = _json(capsys, plan_main, argv)
    answer = planned["answer"]
    assert answer is not None and answer["stack"]["hardware"] == planned["hardware"]
    assert planned["replicas"]["replicas_needed"] == answer["replicas"]
    assert "simulated" in planned["replicas"]["sized_on"]
    goal = Goal(Traffic(rate, 1000, 200, prompt_p95=1500), (Target("ttft", "p95", 1500),))
    searched = sized_stack_file(stack, raw_stack_settings(stack), goal)
    assert searched.sizing is not None and searched.sizing.replicas == answer["replicas"]
    assert searched.sizing.at_rate is not None
    assert searched.sizing.at_rate.latency_ms["ttft"]["p95"] == pytest.approx(
        answer["latency_ms"]["ttft"]["p95"]
    )
    previewed = _json(capsys, preview.main, argv)
    assert previewed["plan"]["answer"]["replicas"] == answer["replicas"]
    assert previewed["cost"]["replicas"] == planned["serving_replicas"]
    assert previewed["cost"]["usd_per_million_requests"] == planned["usd_per_million_requests"]
    assert previewed["performance"]["prompt_tokens"] == 1000


def test_the_stacks_p95_keys_are_checked_on_the_simulated_p95() -> None:
    """l4 states sloP95TtftMs 2000: at a load where the predicted MEAN is within 2 s but the
    simulated p95 is not, the plan adds replicas."""
    settings = load_stack_settings("l4")
    assert stack_targets(settings)[0] == Target("ttft", "p95", 2000.0)
    from serving.capacity.plan import report

    r = report("l4", settings, 0.4)
    answer = r["answer"]
    assert answer is not None and answer["latency_ms"]["ttft"]["p95"] <= 2000
    assert r["replicas"]["replicas_needed"] == answer["replicas"]
    planned = answer["planned_load_latency_ms"]["ttft"]["p95"]
    assert planned <= 2000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ttft-p95-ms", "0"], "--ttft-p95-ms must be a number"),
        (["--prompt-p95", "10"], "--prompt-p95 (10) must be at least the mean"),
        (["--burstiness", "1000"], "--burstiness must be a number from 0.01 to 100"),
    ],
)
@pytest.mark.parametrize("command", [plan_main, preview.main], ids=["plan", "preview"])
def test_plan_and_preview_refuse_bad_workload_options_by_name(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str, command: Any
) -> None:
    try:
        code = command(["-s", "l4", *argv])
    except SystemExit as exc:
        code = int(str(exc.code))
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err
