"""gpu-memory-budget holds the TPU stack's nodes (their startup script) to the planner's budget."""

from __future__ import annotations

from typing import Any

from policies.gpu_memory_budget import gpu_memory_budget
from serving.capacity.plan import load_stack_settings, plan_settings
from tests.policies._fixtures import TPU_DYNAMIC, rendered, violations


def queued_resource() -> dict[str, Any]:
    props: dict[str, Any] = rendered("tpu-v6e1").one(TPU_DYNAMIC).inputs
    return props


def with_script(props: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    launch: str = props["metadata"]["vllm-launch"]
    assert old in launch
    props["metadata"]["vllm-launch"] = launch.replace(old, new)
    return props


def test_shipped_tpu_nodes_fit() -> None:
    assert plan_settings(load_stack_settings("tpu-v6e1")).fits
    assert violations(gpu_memory_budget, TPU_DYNAMIC, queued_resource()) == []


def test_hand_edited_tpu_script_that_cannot_fit_is_refused() -> None:
    props = with_script(
        queued_resource(), "--gpu-memory-utilization=0.9", "--gpu-memory-utilization=0.78"
    )
    (message,) = violations(gpu_memory_budget, TPU_DYNAMIC, props, name="tpu")
    assert message.startswith("tpu: startup script (metadata.startup-script) does not fit on v6e-1")
    assert "weights 22.35 GiB" in message and "0.78 x 29.80 GiB" in message
    assert "larger accelerator" in message


def test_tpu_nodes_capture_no_cuda_graphs() -> None:
    """The CUDA graph reserve (a GPU figure) is not charged to a TPU node."""
    props = queued_resource()
    assert violations(gpu_memory_budget, TPU_DYNAMIC, props, {"cudaGraphGib": 14}) == []
    assert len(violations(gpu_memory_budget, TPU_DYNAMIC, props, {"nonTorchGib": 14})) == 1
