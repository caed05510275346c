"""Devices a server asks for are compared with what the resource declares, not the catalogue.

The hardware catalogue describes one accelerator; how many a resource has is its own
declaration (a container's accelerator limit, guestAccelerators, a TPU accelerator type),
and when it cannot be told, a server asking for more than one device is refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from policies._devices import tpu_type_chips
from policies.vllm_server_readable import vllm_server_readable
from tests.policies._fixtures import (
    INSTANCE,
    SERVICE,
    TPU_ARGS,
    TPU_VM,
    container,
    edit_args,
    service,
    tpu_vm,
    violations,
)
from tests.policies.test_policy_gke import container as pod_container
from tests.policies.test_policy_gke import resource_type, set_arg, vllm


def _device_messages(type_: str, props: dict[str, Any]) -> list[str]:
    return [m for m in violations(vllm_server_readable, type_, props) if "devices" in m]


@pytest.mark.parametrize(("gpus", "tp", "ok"), [(2, 2, True), ("2", 2, True), (2, 4, False)])
def test_gke_pod_counts_its_gpu_limit(gpus: Any, tp: int, ok: bool) -> None:
    deployment = vllm("l4")
    limits = pod_container(deployment)["resources"]["limits"]
    limits["nvidia.com/gpu"] = gpus
    set_arg(deployment, "tensor-parallel-size", str(tp))
    found = _device_messages(resource_type(deployment), deployment)
    if ok:
        assert found == []
    else:
        (message,) = found
        assert "more than the 2 nvidia-l4 the resource has (container 'vllm' resources." in message
        assert "'nvidia.com/gpu'] = " in message


def test_gke_tpu_pod_counts_its_tpu_limit() -> None:
    deployment = vllm("tpu-v6e")
    limits = pod_container(deployment)["resources"]["limits"]
    limits["google.com/tpu"] = 4
    set_arg(deployment, "tensor-parallel-size", "4")
    assert _device_messages(resource_type(deployment), deployment) == []
    set_arg(deployment, "tensor-parallel-size", "8")
    (message,) = _device_messages(resource_type(deployment), deployment)
    assert "more than the 4" in message and "'google.com/tpu'] = 4" in message


@pytest.mark.parametrize(
    ("accelerator", "chips"),
    [("v6e-1", 1), ("v6e-4", 4), ("v6e-8", 8), ("v5litepod-4", 4), ("v4-8", 4), ("v5p-8", 4)],
)
def test_tpu_vm_counts_the_chips_of_its_accelerator_type(accelerator: str, chips: int) -> None:
    assert tpu_type_chips(accelerator) == chips
    vm = tpu_vm(*TPU_ARGS, f"-tp={chips}", accelerator=accelerator)
    assert _device_messages(TPU_VM, vm) == []
    vm = tpu_vm(*TPU_ARGS, f"-tp={chips * 2}", accelerator=accelerator)
    (message,) = _device_messages(TPU_VM, vm)
    assert f"more than the {chips} {accelerator} the resource has (accelerator type" in message


@pytest.mark.parametrize("accelerator", ["v6e-16", "v3-8", "v2-8", "v4-7", "v7x-2", "TPU"])
def test_tpu_vm_whose_chips_per_host_are_not_known_fails_closed(accelerator: str) -> None:
    assert tpu_type_chips(accelerator) is None
    vm = tpu_vm(*TPU_ARGS, "-tp=2", accelerator=accelerator)
    (message,) = _device_messages(TPU_VM, vm)
    assert "cannot be told" in message and accelerator in message
    one = tpu_vm(accelerator=accelerator)
    assert _device_messages(TPU_VM, one) == []


def test_a_compute_engine_gpu_machine_is_refused_by_name() -> None:
    """The package renders no Compute Engine machine: one with accelerators is refused by
    name, whatever it starts (a `docker run` script, the TPU launcher)."""
    script = "#!/bin/bash\ndocker run --gpus=all vllm/vllm-openai:v0.27.1 google/gemma-4-12B-it\n"
    gpus = {"guestAccelerators": [{"type": "nvidia-l4", "count": 2}]}
    for metadata in ({"startup-script": script}, tpu_vm()["metadata"]):
        (message,) = violations(vllm_server_readable, INSTANCE, {"metadata": metadata, **gpus})
        assert "runs accelerators (guestAccelerators) but is a resource type" in message


@pytest.mark.parametrize("gpu", [None, "1", 1])
def test_cloud_run_counts_its_gpu_limit_and_fails_closed_without_one(gpu: Any) -> None:
    props = edit_args(service("l4"), set_={"tensor-parallel-size": "2"})
    limits = container(props)["resources"]["limits"]
    if gpu is None:
        del limits["nvidia.com/gpu"]
    else:
        limits["nvidia.com/gpu"] = gpu
    (message,) = _device_messages(SERVICE, props)
    if gpu is None:
        assert "cannot be told (container 'vllm' declares no nvidia.com/gpu" in message
    else:
        assert "more than the 1 nvidia-l4 the resource has (container 'vllm' resources" in message


def test_a_gpu_limit_unknown_at_preview_fails_closed() -> None:
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

    props = edit_args(service("l4"), set_={"tensor-parallel-size": "2"})
    container(props)["resources"]["limits"]["nvidia.com/gpu"] = UNKNOWN_STRING_VALUE
    found = [
        m
        for m in violations(vllm_server_readable, SERVICE, unknown_checking_proxy(props))
        if "devices" in m
    ]
    assert any("cannot be told" in m and "not known at preview" in m for m in found)
