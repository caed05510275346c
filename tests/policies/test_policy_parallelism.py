"""accelerators-match-parallelism: every accelerator asked for is one vLLM is told to use."""

from __future__ import annotations

from typing import Any

import pytest

from policies.accelerators_match_parallelism import accelerators_match_parallelism
from tests.contracts import gke_fixtures as g
from tests.policies._fixtures import TPU_DYNAMIC, violations
from tests.pulumi_harness import render, stack_config

DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def pod(kind: str, asked: str, *args: str) -> dict[str, Any]:
    d = g.vllm_deployment(kind)
    c = d["spec"]["template"]["spec"]["containers"][0]
    resource = g.POOLS[kind]["resource"]
    c["resources"]["limits"][resource] = c["resources"]["requests"][resource] = asked
    given = {a.split("=")[0] for a in args} | (
        {"--tensor-parallel-size"} if "-tp" in args else set()
    )
    c["args"] = [*(a for a in c["args"] if a.split("=")[0] not in given), *args]
    return d


def messages(props: dict[str, Any]) -> list[str]:
    return violations(accelerators_match_parallelism, DEPLOYMENT, props)


def test_the_shipped_stacks_pass() -> None:
    for stack in ("gke-l4", "gke-tpu-v6e", "l4", "rtx6000", "tpu-v6e1"):
        for d in render(stack_config(stack), stack).resources:
            assert violations(accelerators_match_parallelism, d.type, d.inputs) == [], stack


@pytest.mark.parametrize(
    ("kind", "asked", "args", "idle"),
    [
        ("l4", "2", (), 1),  # 2 GPUs, tensor parallel 1
        ("l4", "2", ("--tensor-parallel-size=1",), 1),
        ("l4", "4", ("-tp", "2"), 2),
        ("l4", "4", ("--pipeline-parallel-size=2",), 2),
        ("tpu-v6e", "4", (), 3),  # 4 chips, tensor parallel 1
    ],
)
def test_idle_accelerators_are_refused(
    kind: str, asked: str, args: tuple[str, ...], idle: int
) -> None:
    d = pod(kind, asked, *args)
    if kind == "tpu-v6e":
        d["spec"]["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = "2x2"
    found = messages(d)
    assert any(f"so {idle} stay idle" in m for m in found), found


@pytest.mark.parametrize(
    ("asked", "args"),
    [
        ("2", ("--tensor-parallel-size=2",)),
        ("4", ("-tp", "2", "-pp", "2")),
        ("2", ("--data-parallel-size=2",)),
    ],
)
def test_every_accelerator_used_passes(asked: str, args: tuple[str, ...]) -> None:
    assert messages(pod("l4", asked, *args)) == []


def test_a_tpu_pod_asks_for_every_chip_of_its_topology() -> None:
    d = pod("tpu-v6e", "1")
    d["spec"]["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = "2x2"
    (message,) = messages(d)
    assert "topology 2x2 (4 chips per node)" in message and "ask for 4" in message
    d = pod("tpu-v6e", "4", "--tensor-parallel-size=4")
    d["spec"]["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = "2x2"
    assert messages(d) == []


def test_a_tpu_vm_with_idle_chips_is_refused() -> None:
    resource = render(stack_config("tpu-v6e1"), "tpu-v6e1").one(TPU_DYNAMIC).inputs
    resource["acceleratorType"] = "v6e-4"  # four chips, vLLM told to use one
    found = violations(accelerators_match_parallelism, TPU_DYNAMIC, resource)
    assert any("3 stay idle" in m and "v6e-4" in m for m in found), found
