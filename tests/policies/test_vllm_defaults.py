"""A server that leaves an option out is judged with what vLLM really uses.

Parser defaults come from the contract snapshot of the image's vLLM release (written from vLLM
itself); `--max-num-batched-tokens` and `--max-num-seqs`, which vLLM 0.27.1 decides at
start-up (`EngineArgs.get_batch_defaults`, `_set_default_max_num_seqs_and_batched_tokens_args`
in `vllm/engine/arg_utils.py`), follow that rule on the resource's GPU and are unknown on a
TPU, where the platform plugin names the chip.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies._resources import VllmServer
from policies._server import read_servers
from policies.gpu_memory_budget import gpu_memory_budget, plan_server
from policies.gpu_memory_utilization_range import gpu_memory_utilization_range
from policies.mtp_max_num_seqs import mtp_max_num_seqs
from serving.launch.vllm_args import SNAPSHOT
from serving.launch.vllm_contract import DATA
from serving.launch.vllm_defaults import parser_default
from tests.policies._fixtures import (
    SERVICE,
    TPU_ARGS,
    TPU_VM,
    container,
    edit_args,
    service,
    tpu_vm,
    violations,
    with_mtp,
)

START_UP = ("max-num-batched-tokens", "max-num-seqs")


def _server(props: dict[str, Any], kind: str = SERVICE) -> VllmServer:
    reading = read_servers(kind, props)
    assert reading.problems == []
    (server,) = reading.servers
    return server


def _snapshot_default(name: str, option: str) -> Any:
    return json.loads((DATA / f"{name}.json").read_text())["serve_options"][option]["default"]


def test_gpu_memory_utilization_left_out_is_the_snapshots_not_a_copy() -> None:
    server = _server(edit_args(service("l4"), drop=("gpu-memory-utilization",)))
    assert server.value("gpu-memory-utilization") == _snapshot_default(
        "vllm-0.27.1", "--gpu-memory-utilization"
    )
    assert server.value("gpu-memory-utilization") == 0.92  # vLLM 0.27.1, not 0.9
    plan = plan_server(server)
    assert plan is not None and plan.utilization == 0.92
    assert violations(gpu_memory_utilization_range, SERVICE, edit_args(
        service("l4"), drop=("gpu-memory-utilization",))) == []  # fmt: skip


@pytest.mark.parametrize("name", ["vllm-tpu-0.27.0", "vllm-tpu-0.28.0", "vllm-0.27.1"])
def test_parser_defaults_come_from_the_images_release(name: str) -> None:
    package, _, version = name.rpartition("-")
    repository = "vllm-openai" if package == "vllm" else "vllm-tpu"
    image = f"docker.io/vllm/{repository}:v{version}"
    for option in ("--gpu-memory-utilization", "--kv-cache-dtype", "--tensor-parallel-size"):
        assert parser_default(option[2:], image) == _snapshot_default(name, option)


def test_a_release_without_a_snapshot_has_no_known_default() -> None:
    assert parser_default("gpu-memory-utilization", "vllm/vllm-openai:v0.26.0") is None
    assert parser_default("gpu-memory-utilization", "vllm/vllm-tpu:v9.9.9") is None
    # an image naming no release is read as the reader reads its arguments
    assert parser_default("gpu-memory-utilization", "example.com/vllm@sha256:ab") == (
        _snapshot_default(SNAPSHOT.stem, "--gpu-memory-utilization")
    )


def test_the_snapshot_leaves_the_start_up_options_to_vllm() -> None:
    for option in START_UP:
        assert _snapshot_default("vllm-0.27.1", f"--{option}") is None


@pytest.mark.parametrize(
    ("stack", "extra", "batched", "seqs"),
    [
        # an L4 (22.5 GiB): 2048 tokens, 256 sequences, raised to one Gemma 4 item (2496)
        ("l4", {}, 2496, 256),
        # an RTX PRO 6000 (95.6 GiB, not an A100): 8192 and 1024
        ("rtx6000", {}, 8192, 1024),
        # --performance-mode throughput doubles both
        ("l4", {"performance-mode": "throughput"}, 4096, 512),
        ("rtx6000", {"performance-mode": "throughput"}, 16384, 2048),
        # chunked prefill off: at least --max-model-len
        ("l4", {"enable-chunked-prefill": None, "max-model-len": "8192"}, 2496, 256),
        ("l4", {"no-enable-chunked-prefill": None, "max-model-len": "8192"}, 8192, 256),
        # at most max_num_seqs x max_model_len
        ("l4", {"max-num-seqs": "1", "max-model-len": "1024"}, 1024, 1),
        # a left-out --max-num-seqs is at most max_num_batched_tokens
        ("l4", {"max-num-batched-tokens": "128"}, 128, 128),
        ("rtx6000", {"max-num-batched-tokens": "512"}, 512, 512),
    ],
)
def test_start_up_defaults_follow_vllms_rule_on_the_resources_gpu(
    stack: str, extra: dict[str, str | None], batched: int, seqs: int
) -> None:
    drop = tuple(o for o in START_UP if o not in extra)
    server = _server(edit_args(service(stack), set_=extra, drop=drop))
    assert server.int_value("max-num-batched-tokens") == batched
    assert server.int_value("max-num-seqs") == seqs


def test_the_memory_budget_counts_vllms_start_up_batch() -> None:
    left_out = _server(edit_args(service("rtx6000"), drop=START_UP))
    given = _server(edit_args(service("rtx6000"), set_={"max-num-batched-tokens": "8192"}))
    smaller = _server(edit_args(service("rtx6000"), set_={"max-num-batched-tokens": "2048"}))
    plan = plan_server(left_out)
    assert plan is not None and plan == plan_server(given) != plan_server(smaller)


def test_mtp_on_an_l4_is_judged_with_vllms_default_sequences() -> None:
    props = edit_args(with_mtp(service("l4")), drop=("max-num-seqs",))
    (message,) = violations(mtp_max_num_seqs, SERVICE, props)
    assert "--max-num-seqs=256" in message


def test_on_a_tpu_the_start_up_values_are_unknown_and_the_budget_fails_closed() -> None:
    server = _server(tpu_vm(), TPU_VM)
    assert server.int_value("max-num-batched-tokens") is None
    assert server.int_value("max-num-seqs") is None
    assert server.value("gpu-memory-utilization") == _snapshot_default(
        "vllm-tpu-0.27.0", "--gpu-memory-utilization"
    )
    (message,) = violations(gpu_memory_budget, TPU_VM, tpu_vm())
    assert "leaves --max-num-batched-tokens to vLLM" in message and "v6e-1" in message
    given = tpu_vm(*TPU_ARGS, "--max-num-batched-tokens=1024")
    assert violations(gpu_memory_budget, TPU_VM, given) == []


def test_a_release_without_a_snapshot_leaves_the_budget_uncounted_not_crashed() -> None:
    props = edit_args(service("rtx6000"), drop=("kv-cache-dtype",))
    container(props)["image"] = "docker.io/vllm/vllm-openai:v0.26.0"
    server = _server(props)
    assert server.value("kv-cache-dtype") is None
    assert plan_server(server) is None
    assert violations(gpu_memory_budget, SERVICE, props) == []
