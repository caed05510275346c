"""Advisory policies: MTP under concurrency, warm instances, instance cap, TPU run limits."""

from __future__ import annotations

from policies.max_instances_cap import max_instances_cap
from policies.min_instances_cost import min_instances_cost
from policies.mtp_max_num_seqs import mtp_max_num_seqs
from policies.multimodal_batched_tokens import multimodal_batched_tokens
from policies.tpu_run_duration_limit import tpu_run_duration_limit
from tests.policies._fixtures import (
    SERVICE,
    STACKS,
    TPU_ARGS,
    TPU_QUEUED,
    TPU_VM,
    edit_args,
    service,
    tpu_vm,
    violations,
    with_mtp,
)

# --- mtp-max-num-seqs --------------------------------------------------------------------


def test_mtp_compliant() -> None:
    for stack in STACKS:
        assert violations(mtp_max_num_seqs, SERVICE, service(stack)) == []
    low = edit_args(with_mtp(service("l4")), set_={"max-num-seqs": "4"})
    assert violations(mtp_max_num_seqs, SERVICE, low) == []


def test_mtp_with_high_concurrency_on_l4() -> None:
    props = with_mtp(service("l4"))
    (message,) = violations(mtp_max_num_seqs, SERVICE, props)
    assert "speculative decoding (mtp) with --max-num-seqs=6 on nvidia-l4" in message
    assert "8-13 req/s" in message
    assert "Turn MTP off (speculativeMethod: none)" in message
    assert violations(mtp_max_num_seqs, SERVICE, props, {"maxNumSeqs": 6}) == []


# --- min-instances-cost ------------------------------------------------------------------


def test_min_instances_compliant() -> None:
    for stack in STACKS:
        assert violations(min_instances_cost, SERVICE, service(stack)) == []


def test_min_instances_warm_gpu_says_the_monthly_cost() -> None:
    props = service("rtx6000")
    props["template"]["scaling"]["minInstanceCount"] = 1.0  # the engine sends numbers as floats
    (message,) = violations(min_instances_cost, SERVICE, props)
    assert "keeps 1 GPU instance(s) warm" in message
    from serving.catalog.hardware import HARDWARE

    price = HARDWARE["rtx-pro-6000"].price
    monthly = round(price.usd_per_hour * 730)
    # A rate not confirmed on Google's page, counted at a named source's quote: an estimate,
    # said so, with who quotes it.
    assert price.is_estimate
    assert f"an estimated ${monthly:,} a month (1 x ${price.usd_per_hour:.2f}/h x 730 h" in message
    assert "quoted by" in message
    assert price.note and price.note in message
    assert "Set minInstances to 0" in message
    assert violations(min_instances_cost, SERVICE, props, {"maxMinInstances": 1}) == []


# --- max-instances-cap -------------------------------------------------------------------


def test_max_instances_compliant() -> None:
    for stack in STACKS:
        assert violations(max_instances_cap, SERVICE, service(stack)) == []


def test_max_instances_above_cap() -> None:
    props = service("l4")
    props["template"]["scaling"]["maxInstanceCount"] = 10
    (message,) = violations(max_instances_cap, SERVICE, props)
    assert "allows up to 10 GPU instances, above 3" in message
    assert "Max instances must be set to 3 or fewer" in message
    assert violations(max_instances_cap, SERVICE, props, {"maxInstances": 10}) == []


# --- tpu-run-duration-limit --------------------------------------------------------------

QUEUED = {
    "zone": "us-east5-a",
    "tpu": {"nodeSpecs": [{"nodeId": "gemma-node", "node": {"acceleratorType": "v6e-1"}}]},
}


def test_tpu_without_limits() -> None:
    (message,) = violations(tpu_run_duration_limit, TPU_QUEUED, QUEUED, name="tpu")
    assert "tpu: this TPU has no run-duration or valid-until limit" in message
    assert "set a max run duration" in message


def test_tpu_with_limits_and_other_resources() -> None:
    limited = {**QUEUED, "queueingPolicy": {"validUntilDuration": "14400s"}}
    assert violations(tpu_run_duration_limit, TPU_QUEUED, limited) == []
    vm = {"acceleratorType": "v6e-1", "schedulingConfig": {"maxRunDuration": "14400s"}}
    assert violations(tpu_run_duration_limit, TPU_VM, vm) == []
    assert violations(tpu_run_duration_limit, SERVICE, service("l4")) == []
    custom = {"limitKeys": ["deadline"]}
    assert (
        violations(tpu_run_duration_limit, TPU_QUEUED, {**QUEUED, "deadline": "4h"}, custom) == []
    )


# --- vLLM arguments inside a TPU startup script ------------------------------------------


def test_vllm_arguments_are_read_from_a_startup_script() -> None:
    args = ("--kv-cache-dtype=fp8", "--max-num-batched-tokens=2048", "--disable-chunked-mm-input")
    vm = tpu_vm(*TPU_ARGS, *args)
    (message,) = violations(multimodal_batched_tokens, TPU_VM, vm, name="tpu")
    assert "tpu: startup script (metadata.startup-script) disables chunked multimodal" in message
    fixed = tpu_vm(*TPU_ARGS, *(a.replace("2048", "4096") for a in args))
    assert violations(multimodal_batched_tokens, TPU_VM, fixed) == []
