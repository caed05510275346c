"""Settings refuse what vLLM's own config checks refuse at start-up, in vLLM's words.

The refusal texts are vLLM 0.27.1's (vllm/config/scheduler.py, vllm/config/model.py,
vllm/v1/core/encoder_cache_manager.py; identical in vllm-tpu 0.27.0 and 0.28.0);
`scripts/vllm_contract.py` confirms with vLLM itself that the scheduler refusals are real.
Every check applies to every stack kind, the TPU included.
"""

from __future__ import annotations

from typing import Any

import pytest

from serving.capacity.plan import load_stack_settings, plan_settings, stack_names
from serving.config.checks import SettingsError
from serving.config.groups import VllmSettings
from serving.config.settings import load_settings
from serving.launch import vllm_contract as contract
from tests.pulumi_harness import stack_config

KINDS = {
    "l4": {"hardware": "l4", "image": "vllm/vllm-openai:v0.27.1", "region": "us-east4"},
    "rtx": {
        "hardware": "rtx-pro-6000",
        "image": "vllm/vllm-openai:v0.27.1",
        "region": "us-central1",
    },
    "tpu": {
        "hardware": "tpu-v6e-1",
        "image": "vllm/vllm-tpu:v0.27.0",
        "zone": "us-east5-b",
        "model": "google/gemma-4-12B-it",
        "kvCacheDtype": "fp8",
    },
}


def refusal(raw: dict[str, Any]) -> str:
    with pytest.raises(SettingsError) as info:
        load_settings(raw)
    return str(info.value)


def vllm_check(kind: str, name: str) -> Any:
    """vLLM's own answer (its message or field bounds), recorded by scripts/vllm_contract.py
    from the release the stack kind's image runs."""
    return contract.for_image(KINDS[kind]["image"]).data["config_checks"][name]


@pytest.mark.parametrize("kind", KINDS)
def test_chunked_prefill_off_needs_a_whole_sequence_per_step(kind: str) -> None:
    check = vllm_check(kind, "chunked_prefill_off")
    inputs = check["inputs"]
    assert inputs["enable_chunked_prefill"] is False
    raw = {
        **KINDS[kind],
        "maxModelLen": inputs["max_model_len"],
        "maxNumSeqs": inputs["max_num_seqs"],
        "chunkedPrefill": False,
    }
    message = refusal({**raw, "maxNumBatchedTokens": inputs["max_num_batched_tokens"]})
    assert check["message"] and f"'{check['message']}'" in message
    assert "config key 'maxNumBatchedTokens' (4095) is below 'maxModelLen' (4096)" in message
    assert "Set maxNumBatchedTokens to at least 4096" in message
    load_settings({**raw, "maxNumBatchedTokens": 4096})  # the boundary vLLM accepts
    load_settings({**raw, "maxNumBatchedTokens": 4095, "chunkedPrefill": True})


@pytest.mark.parametrize("kind", KINDS)
def test_batched_tokens_at_least_max_num_seqs(kind: str) -> None:
    check = vllm_check(kind, "batched_below_seqs")
    inputs = check["inputs"]
    raw = {
        **KINDS[kind],
        "maxModelLen": inputs["max_model_len"],
        "maxNumBatchedTokens": inputs["max_num_batched_tokens"],
    }
    message = refusal({**raw, "maxNumSeqs": inputs["max_num_seqs"]})
    assert check["message"] and f"'{check['message']}'" in message
    assert "config key 'maxNumBatchedTokens' (512) is below 'maxNumSeqs' (513)" in message
    # At the boundary the seqs check passes (Gemma 4's whole image still does not fit).
    assert "'maxNumSeqs'" not in refusal({**raw, "maxNumSeqs": inputs["max_num_batched_tokens"]})


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunked", [False, None])
def test_one_image_fits_a_step_when_it_may_not_be_chunked(kind: str, chunked: bool | None) -> None:
    """Gemma 4 never chunks an image (vLLM forces it off), so the bound holds whether or not
    the stack sets chunkedMmInput."""
    raw = {**KINDS[kind], **({} if chunked is None else {"chunkedMmInput": chunked})}
    for batched in (2048, 2495):
        message = refusal({**raw, "maxNumBatchedTokens": batched})
        assert (
            "'Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger than "
            f"max_num_batched_tokens ({batched}). Please increase max_num_batched_tokens.'"
        ) in message
        assert "config key 'maxNumBatchedTokens'" in message and "at least 2496" in message
    load_settings({**raw, "maxNumBatchedTokens": 2496})


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("batched", [2048, 8192])
def test_chunked_mm_input_is_refused_for_gemma4(kind: str, batched: int) -> None:
    """vLLM 0.27.1 forces --disable-chunked-mm-input for a multimodal prefix-LM model
    (vllm/platforms/cuda.py) and the TPU platform for every multimodal model: turning it on
    would have no effect, so the settings say so instead of rendering a wish."""
    message = refusal({**KINDS[kind], "chunkedMmInput": True, "maxNumBatchedTokens": batched})
    assert "config key 'chunkedMmInput' is true" in message
    assert "'Forcing --disable_chunked_mm_input for models with multimodal-bidirectional" in message
    assert "accepted: false" in message


@pytest.mark.parametrize("kind", KINDS)
def test_max_model_len_beyond_the_models_context(kind: str) -> None:
    message = refusal({**KINDS[kind], "maxModelLen": 131073, "maxNumBatchedTokens": 8192})
    assert "exceeds google/gemma-4-12B-it" in message
    assert "'User-specified max_model_len (131073) is greater than the derived" in message


@pytest.mark.parametrize("kind", KINDS)
def test_gpu_memory_utilization_outside_vllms_range(kind: str) -> None:
    """vLLM's CacheConfig bounds on gpu_memory_utilization, as recorded from vLLM."""
    bounds = vllm_check(kind, "gpu_memory_utilization")
    assert bounds == {"gt": 0, "le": 1}
    for refused in (bounds["gt"], -0.1, bounds["le"] + 0.01):
        message = refusal({**KINDS[kind], "gpuMemoryUtilization": refused})
        assert "config key 'gpuMemoryUtilization'" in message
    load_settings({**KINDS[kind], "gpuMemoryUtilization": bounds["le"]})


@pytest.mark.parametrize("kind", KINDS)
def test_speculative_tokens_must_be_positive(kind: str) -> None:
    """vLLM's SpeculativeConfig bound on num_speculative_tokens, as recorded from vLLM."""
    assert vllm_check(kind, "num_speculative_tokens") == {"gt": 0}
    mtp = {"speculativeMethod": "mtp", "drafter": "google/gemma-4-12B-it-assistant"}
    message = refusal({**KINDS[kind], **mtp, "numSpeculativeTokens": 0})
    assert "config key 'numSpeculativeTokens'" in message
    load_settings({**KINDS[kind], **mtp, "numSpeculativeTokens": 1, "kvCacheDtype": "fp8"})


@pytest.mark.parametrize(("field", "option"), [("kv_cache_dtype", "--kv-cache-dtype")])
def test_choices_are_among_vllms_choices(field: str, option: str) -> None:
    """Every value the settings allow is a choice of vLLM's parser at each pinned version."""
    from typing import get_args

    allowed = set(get_args(VllmSettings.model_fields[field].annotation))
    for package, version in contract.available():
        choices = set(contract.load(package, version).options[option]["choices"])
        assert allowed - {"default"} <= choices, (package, version)


def test_dtype_choices_are_among_vllms_choices() -> None:
    from typing import get_args

    allowed = set(get_args(VllmSettings.model_fields["dtype"].annotation))
    for package, version in contract.available():
        assert allowed <= set(contract.load(package, version).options["--dtype"]["choices"])


@pytest.mark.parametrize(
    "change",
    [
        {"gpuMemoryUtilization": 0.78},
        {
            "kvCacheDtype": "auto",
            "maxModelLen": 8192,
            "speculativeMethod": "mtp",
            "drafter": "google/gemma-4-12B-it-assistant",
        },
    ],
)
def test_tpu_that_the_planner_says_cannot_fit_is_refused(change: dict[str, Any]) -> None:
    fitting = load_settings(KINDS["tpu"])
    assert plan_settings(fitting).fits
    message = refusal({**KINDS["tpu"], **change})
    # The planner's own figures for the refused settings (model_copy does not validate).
    refused = load_settings(
        {
            # A TPU zone on a Cloud Run stack is refused (a key of another platform).
            **{k: v for k, v in KINDS["tpu"].items() if k != "zone"},
            **change,
            "hardware": "rtx-pro-6000",
            "region": "us-central1",
            "image": "vllm/vllm-openai:v0.27.1",
        }
    )
    refused = refused.model_copy(update={"hardware": "tpu-v6e-1"})
    plan = plan_settings(refused)
    assert not plan.fits
    gib = 1024**3
    assert f"{refused.model.model} does not fit on v6e-1 (29.80 GiB)" in message
    assert f"weights {plan.weight_bytes / gib:.2f} GiB" in message
    assert f"drafter {plan.drafter_bytes / gib:.2f} GiB" in message
    assert f"= {plan.required_bytes / gib:.2f} GiB > gpuMemoryUtilization" in message
    assert f"= {plan.budget_bytes / gib:.2f} GiB (room for" in message
    assert f"room for {plan.capacity.max_concurrency:.2f} full-length sequences" in message
    assert "vLLM needs 1" in message and "gemma4 plan" in message


@pytest.mark.parametrize("stack", stack_names())
def test_shipped_stacks_pass_every_check(stack: str) -> None:
    settings = load_stack_settings(stack)
    assert settings.hardware == stack_config(stack)["hardware"]
    plan = plan_settings(settings)
    assert plan.fits
