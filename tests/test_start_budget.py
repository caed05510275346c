"""The startup probe and the health check wait what the cold start prediction derives: twice a
first start's p90, within the platform's limits, and longer when the start is predicted longer."""

from __future__ import annotations

from typing import Any

import pytest

from components.stack import post_deploy_binding
from endpoint.auth import NoAuth
from serving.capacity import start_budget
from serving.capacity.coldstart import checkpoint_bytes, predict, start_path, totals
from serving.capacity.plan import load_stack_settings, stack_names
from serving.catalog.hardware import Platform
from serving.config.inputs import MAX_DEADLINE_S
from serving.config.settings import Settings, load_settings
from tests.contracts.test_cloud_run_limits import _as_dict, probe_errors
from tests.pulumi_harness import stack_config

STACKS = stack_names()


def _p90(settings: Settings, *, inside: bool) -> int:
    phases = predict(start_path(settings), checkpoint_bytes(settings))["phases"]
    if inside:
        phases = [p for p in phases if p["name"] not in ("capacity", "image")]
    return totals(phases)[1]


@pytest.mark.parametrize("stack", STACKS)
def test_the_probe_allows_twice_the_first_starts_p90_and_no_more_than_one_period(
    stack: str,
) -> None:
    settings = load_stack_settings(stack)
    probe = start_budget.startup_probe(settings)
    if settings.deploy_platform == "tpu-vm":
        assert probe is None
        return
    assert probe is not None
    want = 2 * _p90(settings, inside=True)
    if settings.profile.platform is Platform.TPU:
        # Never shorter than tpu-inference CI's wait for Gemma 4's start (its PR #2722).
        want = max(want, start_budget.TPU_ENGINE_START_S)
    assert (
        want
        <= probe.budget_seconds
        < max(want, probe.initial_delay_seconds) + (probe.period_seconds)
    )
    assert probe_errors(_as_dict(probe), "startup") == []


@pytest.mark.parametrize("stack", STACKS)
def test_the_health_check_waits_the_whole_start_and_never_less_than_the_probe(
    stack: str,
) -> None:
    settings = load_stack_settings(stack)
    deadline = start_budget.health_deadline_s(settings)
    probe = start_budget.startup_probe(settings)
    assert deadline >= 2 * _p90(settings, inside=False) or deadline == MAX_DEADLINE_S
    assert deadline >= (probe.budget_seconds if probe else 0)
    assert deadline <= MAX_DEADLINE_S


def test_a_slower_loader_waits_longer() -> None:
    """The waits follow the prediction: the default memory-mapped read of a FUSE mount is
    slower than the prefetch the l4 stack sets."""
    fast = load_settings(stack_config("l4"))
    slow = load_settings({**stack_config("l4"), "safetensorsLoadStrategy": "lazy"})
    assert start_budget.probe_allowance_s(slow) > start_budget.probe_allowance_s(fast)
    assert start_budget.health_deadline_s(slow) > start_budget.health_deadline_s(fast)


@pytest.mark.parametrize("stack", ["l4", "rtx6000", "tpu-v6e1"])
def test_the_hook_waits_the_derived_deadline_unless_the_stack_sets_one(
    stack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(
        "components.stack.health_hook", lambda *a, **k: seen.append(k["deadline_s"])
    )
    for config, want in (
        ({}, start_budget.health_deadline_s(load_settings(stack_config(stack)))),
        ({"healthCheckDeadlineSeconds": 45}, 45),
    ):
        settings = load_settings({**stack_config(stack), "postDeployBenchmark": False, **config})
        post_deploy_binding(settings, "p", NoAuth(), url_keys=("uri",))
        assert seen.pop() == want


def test_the_plan_shows_the_waits() -> None:
    settings = load_stack_settings("l4")
    block = start_budget.waits(settings)
    probe = start_budget.startup_probe(settings)
    assert probe is not None and block["startup_probe_s"] == probe.budget_seconds
    assert block["health_check_s"] == start_budget.health_deadline_s(settings)
    assert f"startup probe {probe.budget_seconds:,} s" in start_budget.waits_text(block)
