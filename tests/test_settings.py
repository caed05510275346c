"""Stack settings: bad config is refused before any resource, with the key and what is allowed."""

from __future__ import annotations

import pytest

from serving.config.checks import SettingsError, check_pinned_image
from serving.config.settings import config_keys, load_settings

BASE = {"hardware": "l4", "image": "vllm/vllm-openai:v0.27.1", "region": "us-east4"}


def refused(**overrides: object) -> str:
    with pytest.raises(SettingsError) as info:
        load_settings({**BASE, **overrides})
    return str(info.value)


def test_minimal_config_takes_defaults_from_the_catalog() -> None:
    s = load_settings(BASE)
    assert s.cpu == 4 and s.memory_gib == 16  # the L4's Cloud Run minimum
    assert s.model.served_name == s.model.model
    assert s.model.drafter_card is None


def test_values_arrive_as_strings_from_pulumi() -> None:
    s = load_settings(
        {
            **BASE,
            "maxNumSeqs": "8",
            "gpuMemoryUtilization": "0.95",
            "public": "false",
            "invokers": '["group:ml@example.com"]',
        }
    )
    assert s.vllm.max_num_seqs == 8
    assert s.vllm.gpu_memory_utilization == 0.95
    assert s.public is False
    assert s.cloud_run.invokers == ["group:ml@example.com"]


def test_unknown_key_is_named_with_the_allowed_keys() -> None:
    message = refused(maxNumSeq=8)
    assert "unknown config key(s): 'maxNumSeq' (did you mean 'maxNumSeqs'?)" in message
    assert "maxNumSeqs" in message


def test_unknown_hardware_lists_the_profiles() -> None:
    message = refused(hardware="nvidia-h100")
    assert "'hardware'" in message and "nvidia-h100" in message
    assert "l4, rtx-pro-6000, tpu-v6e-1" in message


def test_max_num_seqs_zero() -> None:
    message = refused(maxNumSeqs=0)
    assert "config key 'maxNumSeqs'" in message and "greater than or equal to 1" in message


def test_gpu_memory_utilization_above_one() -> None:
    message = refused(gpuMemoryUtilization=1.2)
    assert "config key 'gpuMemoryUtilization'" in message and "less than or equal to 1" in message


@pytest.mark.parametrize(
    "image", ["vllm/vllm-openai:latest", "vllm/vllm-openai:nightly", "vllm/vllm-openai"]
)
def test_floating_or_missing_image_tag(image: str) -> None:
    message = refused(image=image)
    assert "config key 'image'" in message and "pin a version tag or a @sha256: digest" in message


@pytest.mark.parametrize(
    "image", ["--privileged:v0.27.0", "-v/host:v1", ".vllm:v1", "a" * 256 + ":v1"]
)
def test_an_image_that_a_command_could_read_as_an_option_is_refused(image: str) -> None:
    message = refused(image=image)
    assert "config key 'image'" in message and "a letter or digit first" in message


def test_digest_pinned_image_is_accepted() -> None:
    check_pinned_image("vllm/vllm-openai@sha256:" + "a" * 64)
    with pytest.raises(ValueError, match="malformed"):
        check_pinned_image("vllm/vllm-openai@sha256:abc")


def test_mtp_without_drafter_names_the_assistant() -> None:
    message = refused(speculativeMethod="mtp")
    assert "config key 'drafter' is required when speculativeMethod is 'mtp'" in message
    assert "google/gemma-4-12B-it-assistant" in message


def test_unknown_model_and_drafter() -> None:
    assert "allowed: google/gemma-4-12B-it, google/gemma-4-12B-it-qat-w4a16-ct" in refused(
        model="google/gemma-3-12b-it"
    )
    assert "unknown drafter" in refused(speculativeMethod="mtp", drafter="google/gemma-4-12B-it")


def test_speculative_tokens_range() -> None:
    assert "config key 'numSpeculativeTokens'" in refused(numSpeculativeTokens=6)


def test_region_must_offer_the_gpu() -> None:
    message = refused(hardware="rtx-pro-6000", region="us-east4")
    assert "nvidia-rtx-pro-6000 is not offered in 'us-east4'" in message
    assert "us-central1" in message


def test_region_is_required_for_cloud_run() -> None:
    with pytest.raises(SettingsError, match="config key 'region' is required for l4"):
        load_settings({"hardware": "l4", "image": BASE["image"]})


def test_cpu_and_memory_not_below_the_gpu_minimum() -> None:
    assert "below the nvidia-rtx-pro-6000 minimum of 20" in refused(
        hardware="rtx-pro-6000", region="us-central1", cpu=8
    )
    assert "'memoryGib' (8) is below the nvidia-l4 minimum of 16" in refused(memoryGib=8)


def test_context_longer_than_the_model() -> None:
    assert "exceeds google/gemma-4-12B-it-qat-w4a16-ct's context of 131072" in refused(
        maxModelLen=262144
    )


def test_public_members_only_through_public_flag() -> None:
    assert "set 'public: true' instead" in refused(invokers=["allUsers"])
    assert "is not an IAM member" in refused(invokers=["alice@example.com"])


def test_min_instances_above_max() -> None:
    assert "'minInstances' (2) must not exceed 'maxInstances' (1)" in refused(minInstances=2)


def test_labels_follow_google_rules() -> None:
    assert load_settings({**BASE, "labels": ["team=ml-platform"]}).labels == {"team": "ml-platform"}
    assert "not a valid Google Cloud label" in refused(labels=["Team=ML"])
    assert "not of the form key=value" in refused(labels=["team"])


def test_every_key_has_a_description() -> None:
    for key, (_, info) in config_keys().items():
        assert info.description, key
