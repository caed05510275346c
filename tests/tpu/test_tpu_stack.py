"""The tpu-v6e1 stack, rendered by the real program under Pulumi's mocks."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from components.tpu_queued_resource import api_version, queued_resource_body
from serving.render.compile_cache import cache_folder
from serving.render.tpu_startup import LAUNCHER, read_launch
from serving.render.vllm import parse_args
from tests.pulumi_harness import RecordingMocks, Rendered, render, stack_config
from tests.support import discovery

QUEUED = "pulumi-python:dynamic/gemma4:TpuQueuedResource"
FIREWALL = "gcp:compute/firewall:Firewall"
SECRET_IAM = "gcp:secretmanager/secretIamMember:SecretIamMember"
ACCOUNT = "gcp:serviceaccount/account:Account"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
JOB = "gcp:cloudrunv2/job:Job"
CLIENTS = ["203.0.113.0/24"]


def tpu(**overrides: Any) -> Rendered:
    return render({**stack_config("tpu-v6e1"), "sourceRanges": CLIENTS, **overrides}, "tpu-v6e1")


@pytest.fixture(scope="module")
def rendered() -> Rendered:
    return tpu()


def test_queued_resource_shape(rendered: Rendered) -> None:
    node = rendered.one(QUEUED).inputs
    assert node["acceleratorType"] == "v6e-1"
    assert node["runtimeVersion"] == "v2-alpha-tpuv6e"
    assert node["zone"] == "us-east5-b"
    assert node["project"] == "test-project"
    assert node["provisioning"] == "flex-start"
    assert node["maxRunDurationSeconds"] == 4 * 3600
    assert node["validUntilSeconds"] == 4 * 3600
    (account,) = [a for a in rendered.of_type(ACCOUNT) if a.name == "gemma-tpu-v6e1-tpu-sa"]
    assert node["serviceAccountEmail"].startswith(account.inputs["accountId"] + "@")


def test_node_runs_the_package_launcher_with_no_secret(rendered: Rendered) -> None:
    metadata = rendered.one(QUEUED).inputs["metadata"]
    assert set(metadata) == {"startup-script", "vllm-launch", "model-bucket", "model-revisions"}
    assert metadata["startup-script"] == LAUNCHER
    launch = read_launch(metadata["vllm-launch"])
    assert "--tensor-parallel-size=1" in launch["args"]
    assert {"--max-model-len=4096", "--max-num-seqs=64"} <= set(launch["args"])
    assert {"--kv-cache-dtype=fp8", "--disable-chunked-mm-input"} <= set(launch["args"])
    assert "--port=8000" in launch["args"] and launch["image"] == "vllm/vllm-tpu:v0.27.0"
    assert launch["secrets"] == {"VLLM_API_KEY": "vllm-api-key"}


def _node_member(rendered: Rendered) -> str:
    return f"serviceAccount:{rendered.one(QUEUED).inputs['serviceAccountEmail']}"


def test_node_reads_only_the_api_key_and_the_download_job_the_hub_token(
    rendered: Rendered,
) -> None:
    """The weights come from the bucket: the node needs no Hugging Face token; the bucket's
    download job (the Cloud Run stacks' one) reads it."""
    grants = sorted(
        (g.inputs["secretId"], g.inputs["member"] == _node_member(rendered))
        for g in rendered.of_type(SECRET_IAM)
    )
    assert grants == [("hf-token", False), ("vllm-api-key", True)]
    assert {g.inputs["role"] for g in rendered.of_type(SECRET_IAM)} == {
        "roles/secretmanager.secretAccessor"
    }


def test_node_reads_the_model_bucket_and_writes_only_its_cache_folder(rendered: Rendered) -> None:
    bucket = rendered.one(BUCKET).name + "-5678"
    node = rendered.one(QUEUED).inputs
    assert node["metadata"]["model-bucket"] == bucket
    key = read_launch(node["metadata"]["vllm-launch"])["cacheKey"]
    grants = [
        g.inputs
        for g in rendered.of_type(BUCKET_IAM)
        if g.inputs["member"] == _node_member(rendered)
    ]
    assert [(g["role"], g["bucket"]) for g in grants] == [
        ("roles/storage.objectViewer", bucket),
        ("roles/storage.objectUser", bucket),
    ]
    assert grants[1]["condition"]["expression"] == (
        f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{cache_folder(key)}/")'
    )
    assert rendered.outputs["compile_cache"] == f"gs://{bucket}/{cache_folder(key)}/"
    assert rendered.outputs["bucket_name"] == bucket


def test_the_bucket_is_filled_by_the_cloud_run_stacks_download_job(rendered: Rendered) -> None:
    (job,) = rendered.of_type(JOB)
    (container,) = job.inputs["template"]["template"]["containers"]
    assert container["commands"] == ["hf"]
    assert container["args"][:3] == ["download", "google/gemma-4-12B-it", "--revision=main"]
    assert container["args"][3] == "--local-dir=/mnt/models/gemma-4-12B-it"
    assert read_launch(rendered.one(QUEUED).inputs["metadata"]["vllm-launch"])["weights"] == [
        "gemma-4-12B-it"
    ]


def test_firewall_opens_only_the_serving_port_to_the_configured_ranges(rendered: Rendered) -> None:
    rule = rendered.one(FIREWALL).inputs
    assert rule["sourceRanges"] == CLIENTS
    assert rule["allows"] == [{"protocol": "tcp", "ports": ["8000"]}]
    assert rule["targetTags"] == rendered.one(QUEUED).inputs["tags"]


def test_no_source_ranges_means_no_open_port() -> None:
    assert tpu(sourceRanges=[]).of_type(FIREWALL) == []


def test_open_world_is_refused_before_anything_is_declared() -> None:
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError, match="covers the whole IPv4 internet"):
        render({**stack_config("tpu-v6e1"), "sourceRanges": ["0.0.0.0/0"]}, "tpu-v6e1", mocks)
    assert mocks.declared == []


def test_replicas_are_independent_nodes() -> None:
    nodes = tpu(replicas=3, modelRevision=SHA).of_type(QUEUED)
    assert sorted(n.inputs["queuedResourceId"] for n in nodes) == [
        "gemma-tpu-v6e1-tpu-0",
        "gemma-tpu-v6e1-tpu-1",
        "gemma-tpu-v6e1-tpu-2",
    ]
    assert len({n.inputs["nodeId"] for n in nodes}) == 3


def test_tpu_needs_a_zone_that_offers_v6e() -> None:
    with pytest.raises(pulumi.RunError, match="'us-west1-a' does not offer v6e-1"):
        tpu(zone="us-west1-a")


def test_vllm_arguments_match_the_reference_tpu_values(rendered: Rendered) -> None:
    args = _serve_args(rendered.one(QUEUED).inputs)
    assert args["model"] == "/mnt/models/gemma-4-12B-it"
    assert args["max-num-batched-tokens"] == "4096"
    assert args["enable-prefix-caching"] is True


def _create_request_errors(inputs: dict[str, Any]) -> list[str]:
    version = api_version(inputs)
    project, zone, qr_id = inputs["project"], inputs["zone"], inputs["queuedResourceId"]
    return discovery.request_errors(
        discovery.load("tpu", version),
        "tpu.projects.locations.queuedResources.create",
        http_method="POST",
        path=f"/{version}/projects/{project}/locations/{zone}/queuedResources",
        query={"queuedResourceId": [qr_id]},
        body=queued_resource_body(inputs),
    )


def test_default_create_request_validates_against_v2alpha1(rendered: Rendered) -> None:
    """The default stack (flex-start) as the provider would send it, checked against Google's
    TPU v2alpha1 discovery document (google-api-python-client's bundled copy)."""
    inputs = rendered.one(QUEUED).inputs
    assert api_version(inputs) == "v2alpha1"
    assert _create_request_errors(inputs) == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"provisioning": "spot"},
        {"provisioning": "guaranteed", "validUntilHours": 0.25},
        {"provisioning": "on-demand"},
        {"provisioning": "flex-start", "maxRunHours": 0.5, "validUntilHours": 168},
    ],
)
def test_each_provisioning_mode_of_the_stack_validates(overrides: dict[str, Any]) -> None:
    for node in tpu(**overrides, replicas=2, modelRevision=SHA).of_type(QUEUED):
        assert _create_request_errors(node.inputs) == []


def _serve_args(node_inputs: dict[str, Any]) -> dict[str, Any]:
    launch = read_launch(node_inputs["metadata"]["vllm-launch"])
    return parse_args([*launch["command"], *launch["args"]])


SHA = "0123456789abcdef0123456789abcdef01234567"
DRAFTER_SHA = "fedcba9876543210fedcba9876543210fedcba98"


def test_nodes_serve_the_bucket_copy_without_hub_revisions() -> None:
    """The download job fetches `modelRevision` once into the bucket; every node and reboot
    copies that folder, so a branch name is no longer resolved per node (nor refused with
    several replicas)."""
    mtp = {"speculativeMethod": "mtp", "drafter": "google/gemma-4-12B-it-assistant"}
    rendered = tpu(drafterRevision=DRAFTER_SHA, replicas=2, **mtp)
    nodes = rendered.of_type(QUEUED)
    assert len(nodes) == 2
    for node in nodes:
        args = _serve_args(node.inputs)
        assert args["model"] == "/mnt/models/gemma-4-12B-it"
        assert "revision" not in args and "tokenizer-revision" not in args
        spec = json.loads(args["speculative-config"])
        assert spec["model"] == "/mnt/models/gemma-4-12B-it-assistant" and "revision" not in spec
    jobs = {
        j.inputs["template"]["template"]["containers"][0]["args"][1]: j
        for j in rendered.of_type(JOB)
    }
    drafter = jobs["google/gemma-4-12B-it-assistant"].inputs["template"]["template"]["containers"][
        0
    ]
    assert f"--revision={DRAFTER_SHA}" in drafter["args"]
    assert not [m for m in rendered.messages if "resolved again" in m]


@pytest.mark.parametrize(
    "change", [{"image": "vllm/vllm-tpu:v0.28.0"}, {"maxNumSeqs": 32}, {"maxModelLen": 2048}]
)
def test_a_changed_image_or_flag_keeps_its_xla_cache_under_a_new_key(
    rendered: Rendered, change: dict[str, Any]
) -> None:
    def key(r: Rendered) -> str:
        return str(read_launch(r.one(QUEUED).inputs["metadata"]["vllm-launch"])["cacheKey"])

    changed = tpu(**change)
    assert key(changed) != key(rendered)
    assert changed.outputs["compile_cache"] != rendered.outputs["compile_cache"]
    assert key(tpu()) == key(rendered)


def test_cloud_run_reads_the_downloaded_copy_without_hub_revisions() -> None:
    """On Cloud Run vLLM reads the bucket copy the download job fetched at `modelRevision`."""
    from tests.pulumi_harness import stack_config as config

    service = render({**config("l4"), "modelRevision": SHA}, "l4").one(
        "gcp:cloudrunv2/service:Service"
    )
    args = service.inputs["template"]["containers"][0]["args"]
    assert not [a for a in args if "revision" in a]
    job = render({**config("l4"), "modelRevision": SHA}, "l4").of_type("gcp:cloudrunv2/job:Job")
    assert f"--revision={SHA}" in job[0].inputs["template"]["template"]["containers"][0]["args"]


def test_the_preview_shows_the_bucket_copy_its_grants_and_the_kept_cache(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`gemma4 preview -s tpu-v6e1 --json`: the node serves the bucket's copy, its grants
    belong to the model bucket component (parent), and the plan loads by a copy with the
    XLA cache kept."""
    from gemma4 import preview as pv

    assert pv.main(["-s", "tpu-v6e1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True
    assert data["vllm_command_line"].startswith("vllm serve /mnt/models/gemma-4-12B-it ")
    bucket = data["outputs"]["bucket_name"]
    assert data["outputs"]["compile_cache"].startswith(f"gs://{bucket}/compile-cache/")
    node_grants = {
        r["name"]: (r["parent"], r["inputs"]["role"])
        for r in data["resources"]
        if r["type"] == BUCKET_IAM and "-tpu-sa-" in r["name"]
    }
    assert node_grants == {
        "gemma-tpu-v6e1-tpu-sa-read-models": (
            "gemma-tpu-v6e1-models",
            "roles/storage.objectViewer",
        ),
        "gemma-tpu-v6e1-tpu-sa-write-cache": ("gemma-tpu-v6e1-models", "roles/storage.objectUser"),
    }
    cold_start = data["plan"]["cold_start"]
    assert cold_start["loader"] == "load-gcs-copy" and cold_start["cache"] == "kept"


def test_a_new_checkpoint_revision_replaces_every_node(rendered: Rendered) -> None:
    """The download job writes a new revision into the same bucket folders; a node copies them
    only at boot, so its definition changes with the revision and every node is replaced (one
    rebooting alone would serve other weights than its replicas)."""
    from components.tpu_queued_resource import REPLACE_KEYS

    changed = tpu(modelRevision=SHA)
    old, new = rendered.one(QUEUED).inputs, changed.one(QUEUED).inputs
    assert new["metadata"]["model-revisions"] == f"gemma-4-12B-it@{SHA}"
    assert old["metadata"]["vllm-launch"] == new["metadata"]["vllm-launch"]
    assert [k for k in REPLACE_KEYS if old.get(k) != new.get(k)] == ["metadata"]
