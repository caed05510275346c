"""The TPU stack's queued resource and firewall, as rendered, against the policies."""

from __future__ import annotations

from typing import Any

import pytest

from policies.multimodal_batched_tokens import multimodal_batched_tokens
from policies.no_plaintext_secrets import no_plaintext_secrets
from policies.serving_port_not_public import serving_port_not_public
from policies.speculative_config_valid import speculative_config_valid
from policies.tpu_run_duration_limit import tpu_run_duration_limit
from policies.vllm_server_readable import vllm_server_readable
from tests.policies._fixtures import (
    FIREWALL,
    TPU_DYNAMIC,
    TPU_VM,
    stack_violations,
    tpu_vm,
    violations,
)
from tests.pulumi_harness import render, stack_config

FAKE_HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"


def queued_resource() -> dict[str, Any]:
    return render(stack_config("tpu-v6e1"), "tpu-v6e1").one(TPU_DYNAMIC).inputs


def script_of(props: dict[str, Any]) -> str:
    """The node's launch document (its vLLM arguments; the startup script is the launcher)."""
    launch: str = props["metadata"]["vllm-launch"]
    return launch


def test_rendered_tpu_resource_is_read() -> None:
    props = queued_resource()
    assert "--max-num-batched-tokens=4096" in script_of(props)
    for policy in (multimodal_batched_tokens, speculative_config_valid, no_plaintext_secrets):
        assert violations(policy, TPU_DYNAMIC, props) == []
    assert violations(tpu_run_duration_limit, TPU_DYNAMIC, props) == []


def test_tpu_script_arguments_are_checked() -> None:
    props = queued_resource()
    props["metadata"]["vllm-launch"] = script_of(props).replace(
        "--max-num-batched-tokens=4096", "--max-num-batched-tokens=2048"
    )
    (message,) = violations(multimodal_batched_tokens, TPU_DYNAMIC, props, name="tpu")
    assert "tpu: startup script (metadata.startup-script)" in message
    assert "--max-num-batched-tokens=2048" in message


def test_tpu_token_pasted_into_the_startup_script() -> None:
    """Reference defect 3, on the resource the TPU stack declares."""
    props = queued_resource()
    props["metadata"]["startup-script"] += f"export HF_TOKEN={FAKE_HF_TOKEN}\n"
    (message,) = violations(no_plaintext_secrets, TPU_DYNAMIC, props)
    assert "metadata.startup-script contains a literal Hugging Face token" in message
    assert "Secret Manager" in message
    # Edited, the script is no longer the package's launcher: refused.
    (message,) = violations(vllm_server_readable, TPU_DYNAMIC, props)
    assert "the startup-script is not the package's launcher" in message


def test_tpu_without_run_limits() -> None:
    props = queued_resource()
    del props["maxRunDurationSeconds"], props["validUntilSeconds"]
    (message,) = violations(tpu_run_duration_limit, TPU_DYNAMIC, props)
    assert "no run-duration or valid-until limit" in message


def test_tpu_firewall() -> None:
    # The rule the TPU stack declares with `sourceRanges: [203.0.113.0/24]`, written out: rendering
    # it would import pulumi_gcp.compute (seconds), which tests/test_stacks.py keeps unloaded.
    rule: dict[str, Any] = {
        "targetTags": ["gemma-tpu-v6e1-vllm"],
        "sourceRanges": ["203.0.113.0/24"],
        "description": "vLLM serving port, only from the configured source ranges",
        "direction": "INGRESS",
        "network": "default",
        "allows": [{"ports": ["8000"], "protocol": "tcp"}],
    }
    assert violations(serving_port_not_public, FIREWALL, rule) == []
    rule["sourceRanges"] = ["203.0.113.0/24", "0.0.0.0/0"]
    (message,) = violations(serving_port_not_public, FIREWALL, rule)
    assert "allows TCP port(s) 8000 from 203.0.113.0/24, 0.0.0.0/0" in message


def open_firewall(port: str) -> dict[str, Any]:
    return {
        "direction": "INGRESS",
        "network": "default",
        "sourceRanges": ["0.0.0.0/0"],
        "allows": [{"ports": [port], "protocol": "tcp"}],
    }


def test_firewall_opening_the_port_the_tpu_stack_serves_on_is_refused() -> None:
    # A TPU stack serving on 9000 (not one of the configured servingPorts) and a hand-written
    # rule opening that port to everyone.
    stack = render({**stack_config("tpu-v6e1"), "servingPort": "9000"}, "tpu-v6e1")
    resources = [(r.type, r.inputs, r.name) for r in stack.resources]
    assert "--port=9000" in script_of(stack.one(TPU_DYNAMIC).inputs)
    assert stack_violations(serving_port_not_public, resources) == {}
    found = stack_violations(
        serving_port_not_public, [*resources, (FIREWALL, open_firewall("9000"), "open-9000")]
    )
    ((urn, (message,)),) = found.items()
    assert urn.endswith("::open-9000") and "allows TCP port(s) 9000 from 0.0.0.0/0" in message
    # The same rule on a port nothing in the stack serves on is not this policy's concern.
    assert (
        stack_violations(
            serving_port_not_public, [*resources, (FIREWALL, open_firewall("9001"), "other")]
        )
        == {}
    )


@pytest.mark.parametrize(
    ("args", "port"), [(("/mnt/models/x", "--port=7000"), "7000"), (("/mnt/models/x",), "8000")]
)
def test_every_vllm_port_in_the_stack_is_judged(args: tuple[str, ...], port: str) -> None:
    vm = tpu_vm(*args)  # 8000: vLLM's own default port
    messages = violations(
        serving_port_not_public,
        FIREWALL,
        open_firewall(port),
        {"servingPorts": []},
        stack=[(TPU_VM, vm, "tpu-vm")],
    )
    assert messages and f"allows TCP port(s) {port}" in messages[0]


def test_configured_serving_ports_are_still_judged() -> None:
    assert violations(serving_port_not_public, FIREWALL, open_firewall("9100")) == []
    (message,) = violations(
        serving_port_not_public, FIREWALL, open_firewall("9100"), {"servingPorts": [9100]}
    )
    assert "allows TCP port(s) 9100" in message
