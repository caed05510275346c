"""The compile cache key: what changes it, what does not, and where each stack keeps it."""

from __future__ import annotations

from typing import Any

import pytest

from serving.render.compile_cache import (
    CACHE_MOUNT_PATH,
    GPU_CACHE_ENV,
    KEY_LENGTH,
    TPU_CACHE_ENV,
    cache_key,
    mount_options,
)
from tests.contracts.variants import rendered
from tests.pulumi_harness import render, stack_config
from tests.support import discovery

BASE: dict[str, Any] = {
    "image": "vllm/vllm-openai:v0.27.1",
    "argv": ["vllm", "serve", "/mnt/models/m", "--max-model-len=32768", "--port=8080"],
    "env": {"VLLM_USE_FLASHINFER_SAMPLER": "1", GPU_CACHE_ENV: CACHE_MOUNT_PATH},
    "accelerator": "nvidia-l4",
    "count": 1,
}
SERVICE = "gcp:cloudrunv2/service:Service"
IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"


def key(**changes: Any) -> str:
    return cache_key(**{**BASE, **changes})


def test_key_is_a_short_hex_path_segment() -> None:
    value = key()
    assert len(value) == KEY_LENGTH
    assert int(value, 16) >= 0
    assert value == key()


@pytest.mark.parametrize(
    "changes",
    [
        {"image": "vllm/vllm-openai:v0.27.2"},
        {"image": "vllm/vllm-openai:v0.27.1@sha256:" + "0" * 64},
        {"argv": [*BASE["argv"][:3], "--max-model-len=16384", "--port=8080"]},
        # Order counts: the command line is hashed as given.
        {"argv": [*BASE["argv"][:3], "--port=8080", "--max-model-len=32768"]},
        {"env": {**BASE["env"], "VLLM_USE_FLASHINFER_SAMPLER": "0"}},
        {"env": {**BASE["env"], "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}},
        {"accelerator": "nvidia-rtx-pro-6000"},
        {"count": 2},
    ],
)
def test_what_decides_the_compiled_code_changes_the_key(changes: dict[str, Any]) -> None:
    assert key(**changes) != key()


def test_the_cache_locations_do_not_change_the_key() -> None:
    """vLLM leaves them out of its own key too (location-only, vllm/envs.py)."""
    moved = {**BASE["env"], GPU_CACHE_ENV: "/elsewhere", TPU_CACHE_ENV: "/xla"}
    assert key(env=moved) == key()
    assert key(env={"VLLM_USE_FLASHINFER_SAMPLER": "1"}) == key()


def test_mount_options_keep_the_owner_contract_and_show_one_folder() -> None:
    assert mount_options("abc") == ["uid=1001", "gid=1001", "only-dir=compile-cache/abc"]


def _service(variant: str) -> dict[str, Any]:
    inputs: dict[str, Any] = rendered(variant).one(SERVICE).inputs
    return inputs


def _cache_folder(props: dict[str, Any]) -> str:
    (volume,) = [v for v in props["template"]["volumes"] if v["name"] == "compile-cache"]
    (option,) = [o for o in volume["gcs"]["mountOptions"] if o.startswith("only-dir=")]
    return str(option.removeprefix("only-dir="))


def test_a_label_or_the_service_name_leaves_the_key_alone() -> None:
    base = _cache_folder(_service("l4"))
    relabelled = render({**stack_config("l4"), "labels": ["app=other", "team=x"]}, "l4")
    renamed = render(stack_config("l4"), "l4-copy")
    assert renamed.one(SERVICE).name != rendered("l4").one(SERVICE).name
    for other in (relabelled, renamed):
        assert _cache_folder(other.one(SERVICE).inputs) == base
    assert _cache_folder(_service("l4-mtp")) != base  # another command line: another key
    assert _cache_folder(_service("rtx6000")) != base


@pytest.mark.parametrize("stack", ["l4", "rtx6000"])
def test_cloud_run_mounts_its_own_folder_writable_and_points_vllm_at_it(stack: str) -> None:
    render_ = rendered(stack)
    props = _service(stack)
    (volume,) = [v for v in props["template"]["volumes"] if v["name"] == "compile-cache"]
    assert volume["gcs"]["readOnly"] is False
    vllm = props["template"]["containers"][0]
    assert {"name": GPU_CACHE_ENV, "value": CACHE_MOUNT_PATH} in vllm["envs"]
    assert {"name": "compile-cache", "mountPath": CACHE_MOUNT_PATH} in vllm["volumeMounts"]
    folder = _cache_folder(props)
    assert (
        render_.outputs["compile_cache"]
        == f"gs://{props['template']['volumes'][0]['gcs']['bucket']}/{folder}/"
    )
    # Run v2's own schema takes the volume as rendered (gcsfuse flags, no leading dashes).
    run = discovery.load("run", "v2")
    assert discovery.schema_errors(run, "GoogleCloudRunV2Volume", volume) == []
    assert (
        "gcsfuse"
        in run["schemas"]["GoogleCloudRunV2GCSVolumeSource"]["properties"]["mountOptions"][
            "description"
        ]
    )
    # The server may write that folder and nothing else of the bucket.
    (grant,) = [
        r.inputs
        for r in render_.of_type(IAM)
        if r.inputs["role"] == "roles/storage.objectUser" and "condition" in r.inputs
    ]
    bucket = props["template"]["volumes"][0]["gcs"]["bucket"]
    assert grant["condition"]["expression"] == (
        f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{folder}/")'
    )


@pytest.mark.parametrize("variant", ["gke-l4", "gke-tpu-v6e"])
def test_gke_pods_mount_their_own_folder_writable(variant: str) -> None:
    render_ = rendered(variant)
    (deployment,) = [
        r.inputs
        for r in render_.of_type("kubernetes:apps/v1:Deployment")
        if r.inputs["metadata"]["name"] == "vllm"
    ]
    pod = deployment["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "compile-cache"]
    assert "readOnly" not in volume["csi"]
    options = volume["csi"]["volumeAttributes"]["mountOptions"].split(",")
    (folder,) = [o.removeprefix("only-dir=") for o in options if o.startswith("only-dir=")]
    bucket = volume["csi"]["volumeAttributes"]["bucketName"]
    assert render_.outputs["compile_cache"] == f"gs://{bucket}/{folder}/"
    expressions = [
        r.inputs["condition"]["expression"] for r in render_.of_type(IAM) if "condition" in r.inputs
    ]
    assert expressions == [
        f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{folder}/")'
    ]
