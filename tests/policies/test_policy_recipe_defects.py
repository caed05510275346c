"""Each failure mode of the hand-run recipes that a policy covers is rejected, with the fix.

Numbers refer to "Defects of the hand-run recipes" in the shared reference notes
(reference-deployments.md); unnumbered cases are the start-up failures and measurements the
same notes record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy

from policies.registry import BY_NAME
from tests.policies._fixtures import (
    FIREWALL,
    IAM_MEMBER,
    SERVICE,
    TPU_QUEUED,
    TPU_VM,
    container,
    edit_args,
    service,
    violations,
    with_mtp,
)

FAKE_HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"


def _split_speculative_json() -> dict[str, Any]:
    props = service("l4")
    spec = (
        '{"method":"mtp","model":"/mnt/models/gemma-4-12B-it-assistant","num_speculative_tokens":3}'
    )
    first, *rest = spec.split(",")  # what a comma-separated argument list does to it
    container(props)["args"][-2:-2] = [f"--speculative-config={first}", *rest]
    return props


def _token_in_tpu_metadata() -> dict[str, Any]:
    script = f"#!/bin/bash\necho {FAKE_HF_TOKEN} > hf_token.txt\nvllm serve google/gemma-4-12B-it\n"
    return {"acceleratorType": "v6e-1", "metadata": {"startup-script": script}}


def _open_tpu_port() -> dict[str, Any]:
    return {
        "direction": "INGRESS",
        "sourceRanges": ["0.0.0.0/0"],
        "allows": [{"protocol": "tcp", "ports": ["8000"]}],
    }


def _nightly() -> dict[str, Any]:
    props = service("l4")
    container(props)["image"] = "vllm/vllm-openai:nightly"
    return props


def _no_uid_gid() -> dict[str, Any]:
    props = service("l4")
    props["template"]["volumes"][0]["gcs"]["mountOptions"] = []
    return props


def _bf16_on_l4() -> dict[str, Any]:
    # As the renderer writes a bf16 checkpoint: no --quantization (vLLM reads the format from
    # the checkpoint; `--quantization=compressed-tensors` would load it as another format).
    props = service("l4")
    args = container(props)["args"]
    container(props)["args"] = [a for a in args if not a.startswith("--quantization")]
    container(props)["args"][0] = "/mnt/models/gemma-4-12B-it"
    return props


def _cpu_throttled() -> dict[str, Any]:
    props = service("l4")
    container(props)["resources"]["cpuIdle"] = True
    return props


def _too_many_instances() -> dict[str, Any]:
    props = service("rtx6000")
    props["template"]["scaling"]["maxInstanceCount"] = 5
    return props


@dataclass(frozen=True)
class Case:
    failure: str
    policy: str
    type_: str
    build: Callable[[], dict[str, Any]]
    fix: str


CASES = [
    Case("2: speculative JSON split by a comma list", "vllm-server-readable", SERVICE,
         _split_speculative_json, "parser refuses the arguments: unrecognized arguments"),
    Case("3: HF token pasted into TPU startup-script metadata", "no-plaintext-secrets", TPU_VM,
         _token_in_tpu_metadata, "store it in Secret Manager"),
    Case("4: TPU endpoint open to the internet", "serving-port-not-public", FIREWALL,
         _open_tpu_port, "Restrict sourceRanges"),
    Case("9: floating :nightly image", "pinned-image", SERVICE, _nightly,
         "pin a version tag or a @sha256: digest"),
    Case("12: bucket mounted without uid=1001;gid=1001", "model-volume-read-only", SERVICE,
         _no_uid_gid, "Add mount_options ['uid=1001', 'gid=1001']"),
    Case("bf16 weights leave no KV cache on an L4", "l4-qat-checkpoint", SERVICE, _bf16_on_l4,
         "Serve a QAT checkpoint instead"),
    Case("'No available memory for the cache blocks'", "gpu-memory-budget", SERVICE,
         _bf16_on_l4, "Lower --max-model-len"),
    Case("'Chunked MM input disabled but max_tokens_per_mm_item (2496) ...'",
         "multimodal-batched-tokens", SERVICE,
         lambda: edit_args(service("l4"), set_={"max-num-batched-tokens": "2048"}),
         "Set --max-num-batched-tokens to at least 2496"),
    Case("'Free memory on device ... less than desired GPU memory utilization'",
         "gpu-memory-utilization-range", SERVICE,
         lambda: edit_args(service("l4"), set_={"gpu-memory-utilization": "0.99"}),
         "Set it to 0.95 or less"),
    Case("GPU service without CPU always allocated", "cpu-always-allocated", SERVICE,
         _cpu_throttled, "Set resources.cpu_idle=False"),
    Case("service made publicly invokable", "no-public-invoker", IAM_MEMBER,
         lambda: {"role": "roles/run.invoker", "member": "allUsers"},
         "grant roles/run.invoker to named members"),
    Case("'Max instances must be set to 3 or fewer ...'", "max-instances-cap", SERVICE,
         _too_many_instances, "Lower maxInstances"),
    Case("MTP slower under concurrency on L4 (8-13 vs 18.9-23.8 req/s)", "mtp-max-num-seqs",
         SERVICE, lambda: with_mtp(service("l4")), "Turn MTP off"),
    Case("TPU without the 4 h cost guard", "tpu-run-duration-limit", TPU_QUEUED,
         lambda: {"tpu": {"nodeSpecs": [{"node": {"acceleratorType": "v6e-1"}}]}},
         "set a max run duration"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.failure)
def test_recipe_failure_is_rejected_with_the_fix(case: Case) -> None:
    policy = BY_NAME[case.policy]
    assert isinstance(policy, (ResourceValidationPolicy, StackValidationPolicy))
    messages = violations(policy, case.type_, case.build(), name="recipe")
    assert messages, f"{case.policy} let the recipe's failure through"
    assert any(case.fix in m for m in messages), messages
    assert all(m.startswith("recipe") for m in messages)


def test_blocking_cases_are_mandatory() -> None:
    advisory = {
        c.policy for c in CASES if BY_NAME[c.policy].enforcement_level is EnforcementLevel.ADVISORY
    }
    assert advisory == {"max-instances-cap", "mtp-max-num-seqs", "tpu-run-duration-limit"}
