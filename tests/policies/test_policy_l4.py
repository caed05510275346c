"""L4 policies: QAT checkpoint, context cap, memory utilization range, memory budget."""

from __future__ import annotations

import pytest

from policies.gpu_memory_budget import gpu_memory_budget
from policies.gpu_memory_utilization_range import gpu_memory_utilization_range
from policies.l4_qat_checkpoint import l4_qat_checkpoint
from policies.max_model_len_cap import max_model_len_cap
from policies.vllm_server_readable import vllm_server_readable
from tests.policies._fixtures import SERVICE, edit_args, service, violations

# --- l4-qat-checkpoint -------------------------------------------------------------------


def test_qat_compliant_l4_stack() -> None:
    assert violations(l4_qat_checkpoint, SERVICE, service("l4")) == []


def test_qat_rejects_bf16_checkpoint_on_l4() -> None:
    props = edit_args(service("l4"), drop=("quantization",))
    props["template"]["containers"][0]["args"][0] = "/mnt/models/gemma-4-12B-it"
    (message,) = violations(l4_qat_checkpoint, SERVICE, props)
    assert "'/mnt/models/gemma-4-12B-it'" in message and "(~24 GB of weights)" in message
    assert "not a QAT checkpoint" in message
    assert "google/gemma-4-12B-it-qat-w4a16-ct" in message
    assert "'model'" in message


def test_qat_rejects_unknown_non_qat_hub_id() -> None:
    props = service("l4")
    props["template"]["containers"][0]["args"][0] = "meta-llama/Llama-3.1-8B-Instruct"
    (message,) = violations(l4_qat_checkpoint, SERVICE, props)
    assert "'meta-llama/Llama-3.1-8B-Instruct' on nvidia-l4" in message


@pytest.mark.parametrize(
    "model",
    [
        "someone/gemma-4-12b-it-qat-q4_0-gguf",  # a name holding "qat" is no evidence
        "/mnt/models/gemma-4-12B-it-qat",  # a bf16 folder named with qat
        "/mnt/models/Gemma-4-12B-it-qat-w4a16-ct",  # another case: another object
        "/mnt/models/gemma-4-12B-it/qat/..",  # resolves to the bf16 folder
        "/mnt/models/gemma-4-12B-it-qat-w4a16-ct/../gemma-4-12B-it",
        "/mnt/models/./gemma-4-12B-it-qat-w4a16-ct",
        "/root/.cache/huggingface/hub/models--google--gemma-4-12B-it-qat-w4a16-ct/snapshots/abc",
        "/mnt/models/gemma-4-12B-it-qat-*",
        "/mnt/other/gemma-4-12B-it-qat-w4a16-ct",  # not the model mount
        "google/gemma-4-12B-it-qat-w4a16-ct",  # a Hub id on Cloud Run: not the bucket
    ],
)
def test_qat_is_known_by_origin_not_by_name(model: str) -> None:
    props = service("l4")
    props["template"]["containers"][0]["args"][0] = model
    (message,) = violations(l4_qat_checkpoint, SERVICE, props)
    assert "does not resolve to a checkpoint this stack's download job produces" in message
    assert violations(vllm_server_readable, SERVICE, props)


def test_qat_rule_covers_only_the_configured_gpus() -> None:
    rtx = service("rtx6000")
    rtx["template"]["containers"][0]["args"][0] = "/mnt/models/gemma-4-12B-it"
    assert violations(l4_qat_checkpoint, SERVICE, rtx) == []
    # ... unless the policy is configured to cover that GPU too.
    config = {"accelerators": ["nvidia-l4", "nvidia-rtx-pro-6000"]}
    assert len(violations(l4_qat_checkpoint, SERVICE, rtx, config)) == 1


# --- max-model-len-cap -------------------------------------------------------------------


def test_max_model_len_compliant() -> None:
    assert violations(max_model_len_cap, SERVICE, service("l4")) == []
    # The cap is an L4 rule: 128K on the RTX PRO 6000 is fine.
    assert violations(max_model_len_cap, SERVICE, service("rtx6000")) == []


def test_max_model_len_above_cap() -> None:
    props = edit_args(service("l4"), set_={"max-model-len": "65536"})
    (message,) = violations(max_model_len_cap, SERVICE, props)
    assert "--max-model-len=65536 on nvidia-l4, above the cap of 32768" in message
    assert "lower it to 32768 or less" in message
    assert violations(max_model_len_cap, SERVICE, props, {"maxModelLen": 65536}) == []


def test_max_model_len_missing() -> None:
    props = edit_args(service("l4"), drop=("max-model-len",))
    (message,) = violations(max_model_len_cap, SERVICE, props)
    assert "sets no --max-model-len" in message
    assert "full context (131072 tokens)" in message
    assert "at most 32768" in message


def test_max_model_len_not_a_number() -> None:
    props = edit_args(service("l4"), set_={"max-model-len": "32x"})
    (message,) = violations(max_model_len_cap, SERVICE, props)
    assert "--max-model-len='32x', which is not a number" in message


def test_max_model_len_human_suffixes_read_as_vllm_reads_them() -> None:
    # vLLM's human_readable_int: 32k = 32000 (under the cap), 33k and 32Ki exceed it.
    assert (
        violations(
            max_model_len_cap, SERVICE, edit_args(service("l4"), set_={"max-model-len": "32k"})
        )
        == []
    )
    for big in ("33k", "33K", "40Ki", "1m"):
        (message,) = violations(
            max_model_len_cap, SERVICE, edit_args(service("l4"), set_={"max-model-len": big})
        )
        assert "above the cap of 32768" in message


# --- gpu-memory-utilization-range --------------------------------------------------------


def test_utilization_compliant_and_default() -> None:
    assert violations(gpu_memory_utilization_range, SERVICE, service("l4")) == []
    props = edit_args(service("l4"), drop=("gpu-memory-utilization",))  # vLLM's 0.9
    assert violations(gpu_memory_utilization_range, SERVICE, props) == []


def test_utilization_too_high() -> None:
    props = edit_args(service("l4"), set_={"gpu-memory-utilization": "0.98"})
    (message,) = violations(gpu_memory_utilization_range, SERVICE, props)
    assert "--gpu-memory-utilization=0.98, above 0.95" in message
    assert "Free memory on device" in message
    assert "Set it to 0.95 or less" in message
    assert violations(gpu_memory_utilization_range, SERVICE, props, {"max": 0.99}) == []


def test_utilization_too_low() -> None:
    props = edit_args(service("l4"), set_={"gpu-memory-utilization": "0.3"})
    (message,) = violations(gpu_memory_utilization_range, SERVICE, props)
    assert "below 0.5" in message
    assert "Set it between 0.5 and 0.95" in message


def test_utilization_not_a_number() -> None:
    props = edit_args(service("l4"), set_={"gpu-memory-utilization": "most"})
    (message,) = violations(gpu_memory_utilization_range, SERVICE, props)
    assert "'most', which is not a number" in message


# --- gpu-memory-budget -------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["l4", "rtx6000"])
def test_budget_compliant(stack: str) -> None:
    assert violations(gpu_memory_budget, SERVICE, service(stack)) == []


def test_budget_rejects_bf16_weights_on_l4() -> None:
    props = edit_args(service("l4"), drop=("quantization",))
    props["template"]["containers"][0]["args"][0] = "/mnt/models/gemma-4-12B-it"
    (message,) = violations(gpu_memory_budget, SERVICE, props)
    assert "does not fit on nvidia-l4: weights 22.35 GiB" in message
    assert "> 0.95 x 22.49 GiB = 21.37 GiB" in message
    assert "Lower --max-model-len" in message
    assert "gemma4 plan" in message


def test_budget_rejects_full_context_bf16_kv_with_low_utilization() -> None:
    props = edit_args(
        service("l4"),
        set_={"max-model-len": "131072", "gpu-memory-utilization": "0.5"},
        drop=("kv-cache-dtype",),
    )
    (message,) = violations(gpu_memory_budget, SERVICE, props)
    assert "KV cache for one 131072-token sequence" in message
    assert "room for 0." in message


def test_budget_thresholds_come_from_config() -> None:
    assert len(violations(gpu_memory_budget, SERVICE, service("l4"), {"cudaGraphGib": 14})) == 1
    many = {"minFullLengthSequences": 100}
    (message,) = violations(gpu_memory_budget, SERVICE, service("l4"), many)
    assert "need 100" in message


@pytest.mark.parametrize("size", ["20G", "20000000000", "19Gi"])
def test_kv_cache_memory_bytes_is_accounted_whatever_the_utilization(size: str) -> None:
    # vLLM sizes the KV cache from --kv-cache-memory-bytes and ignores the utilization.
    props = edit_args(service("l4"), add=(f"--kv-cache-memory-bytes={size}",))
    (message,) = violations(gpu_memory_budget, SERVICE, props)
    assert "--kv-cache-memory-bytes=" in message and "nvidia-l4" in message


def test_small_kv_cache_memory_bytes_leaves_no_room_for_a_sequence() -> None:
    props = edit_args(service("l4"), add=("--kv-cache-memory-bytes=64M",))
    (message,) = violations(gpu_memory_budget, SERVICE, props)
    assert "does not fit" in message
