"""Settings that would pass preview and fail on Google Cloud: an image for the other platform or
of an unknown vLLM release, TPU guards rounded to nothing, floating revisions across replicas,
a project id that is not one."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from serving.config.checks import SettingsError, check_project_id
from serving.config.settings import load_settings
from tests.pulumi_harness import RecordingMocks, render, stack_config

L4 = stack_config("l4")
TPU = stack_config("tpu-v6e1")


def refused(base: dict[str, Any], **overrides: Any) -> str:
    with pytest.raises(SettingsError) as info:
        load_settings({**base, **overrides})
    return str(info.value)


@pytest.mark.parametrize(
    ("base", "image", "expected"),
    [
        (TPU, "vllm/vllm-openai:v0.27.1", "is vLLM's CUDA image, but tpu-v6e-1 is a TPU"),
        (TPU, "vllm/vllm-openai@sha256:" + "a" * 64, "is vLLM's CUDA image"),
        (L4, "vllm/vllm-tpu:v0.27.0", "is vLLM's TPU image, but l4 is a GPU"),
        (L4, "vllm/vllm-openai:v0.25.0", "vllm 0.25.0, a release whose vLLM contract"),
        (TPU, "vllm/vllm-tpu:v0.27.1", "vllm-tpu 0.27.1, a release whose vLLM contract"),
    ],
)
def test_an_image_for_the_other_platform_or_an_unknown_release_is_refused(
    base: dict[str, Any], image: str, expected: str
) -> None:
    message = refused(base, image=image)
    assert "config key 'image'" in message and expected in message


@pytest.mark.parametrize(
    ("base", "image"),
    [
        (L4, "vllm/vllm-openai@sha256:" + "a" * 64),  # what promotion writes
        (TPU, "vllm/vllm-tpu:v0.28.0"),  # a shipped contract
    ],
)
def test_digests_and_shipped_releases_are_accepted(base: dict[str, Any], image: str) -> None:
    assert load_settings({**base, "image": image}).image == image


@pytest.mark.parametrize("key", ["maxRunHours", "validUntilHours"])
def test_tpu_guards_under_a_minute_are_refused(key: str) -> None:
    assert f"config key {key!r}: 0.0001 h is under one minute" in refused(TPU, **{key: 0.0001})


def test_tpu_guards_round_up_and_spot_sends_no_run_duration() -> None:
    rendered = render({**TPU, "validUntilHours": 0.3, "maxRunHours": 1 / 60}, "tpu-v6e1")
    (node,) = [r for r in rendered.resources if r.type.endswith("QueuedResource")]
    assert node.inputs["validUntilSeconds"] == 1080
    assert node.inputs["maxRunDurationSeconds"] == 60
    spot = render({**TPU, "provisioning": "spot"}, "tpu-v6e1")
    (node,) = [r for r in spot.resources if r.type.endswith("QueuedResource")]
    assert node.inputs.get("maxRunDurationSeconds") is None


def test_replicas_serve_one_bucket_copy_whatever_the_revision() -> None:
    """The download job resolves `modelRevision` once into the model bucket and every node
    copies that folder, so a branch name no longer needs pinning with several replicas."""
    assert load_settings({**TPU, "replicas": 2, "modelRevision": "main"}).tpu.replicas == 2


@pytest.mark.parametrize(
    "project",
    ["../../v1/projects/other", "p/locations/x#", "abc\\ndef", "proj$(id)", "Upper-Case1", "short"],
)
def test_a_project_id_that_is_not_one_is_refused_before_any_resource(project: str) -> None:
    with pytest.raises(SettingsError, match="is not a Google Cloud project id"):
        check_project_id(project)
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError, match="gcp:project"):
        render(L4, "l4", mocks, other_config={"gcp:project": project})
    assert mocks.declared == []


@pytest.mark.parametrize("project", ["my-project-123", "example.com:my-project"])
def test_real_project_ids_are_accepted(project: str) -> None:
    assert check_project_id(project) == project


_VALUES: dict[str, Any] = {
    "region": "us-east4",
    "public": True,
    "bucketLocation": "US",
    "forceDestroyBucket": True,
    "downloadWeights": False,
    "zone": "us-east4-a",
    "network": "default",
    "servingPort": 8000,
    "sourceRanges": ["10.0.0.0/8"],
    "sourceRangeMinPrefixV4": 16,
    "sourceRangeMinPrefixV6": 48,
    "apiKeySecret": "vllm-api-key",
}


@pytest.mark.parametrize("key", sorted(_VALUES))
@pytest.mark.parametrize(
    ("stack", "platform"), [("l4", "cloud-run"), ("tpu-v6e1", "tpu-vm"), ("gke-l4", "gke")]
)
def test_a_key_of_another_platform_is_refused_as_the_reference_says(
    key: str, stack: str, platform: str
) -> None:
    """`docs/reference/configuration.md` (*applies to*) and the refusal read one table: a key
    the page says the platform does not read is refused there (`region` on the TPU VM stack,
    `zone` on a Cloud Run stack), naming the key, the platforms that read it and what to do."""
    from scripts.gen_docs import PLATFORM_NAMES, applies_to
    from serving.config.settings import PLATFORM_KEYS

    base = {k: v for k, v in stack_config(stack).items() if k != key}
    if PLATFORM_NAMES[platform] in applies_to(key, ""):
        assert platform in PLATFORM_KEYS[key]
        return  # read here: the shipped stack's own value or the default stands
    message = refused(base, **{key: _VALUES[key]})
    if (key, platform) == ("region", "gke"):
        assert (
            message
            == "remove 'region': a GKE stack's region is its zone's (us-east5 for us-east5-b)"
        )
        return
    owners = sorted(PLATFORM_KEYS[key])
    assert message == (
        f"config key {key!r} is a {' and '.join(owners)} setting; this stack runs on "
        f"{platform}: remove it or set platform: {owners[0]}"
    )


def test_gke_reads_its_own_public_network_and_region() -> None:
    """GKE's public Gateway, network and region are GKE's keys (its region its zone's), never
    another platform's."""
    settings = load_settings({**stack_config("gke-l4"), "network": "vpc-a", "public": False})
    assert (settings.gke.network, settings.region, settings.public) == ("vpc-a", "us-east4", False)
    with pytest.raises(SettingsError, match="runs on gke: it has no CloudRunSettings"):
        _ = settings.cloud_run
