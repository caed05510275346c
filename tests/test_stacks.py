"""Each shipped stack, rendered by the real program under Pulumi's mocks."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pulumi
import pytest

from serving.capacity.start_budget import startup_probe
from serving.config.settings import load_settings
from serving.render.vllm import parse_args
from tests.pulumi_harness import ROOT, RecordingMocks, Rendered, render, stack_config

SERVICE = "gcp:cloudrunv2/service:Service"
JOB = "gcp:cloudrunv2/job:Job"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
INVOKER = "gcp:cloudrunv2/serviceIamMember:ServiceIamMember"
ACCOUNT = "gcp:serviceaccount/account:Account"

EXPECTED = {
    "l4": {
        "accelerator": "nvidia-l4",
        "cpu": "4",
        "memory": "16Gi",
        "probe": (180, 60, 30),
        "max_model_len": "32768",
        "mtp": False,
    },
    "rtx6000": {
        "accelerator": "nvidia-rtx-pro-6000",
        "cpu": "20",
        "memory": "80Gi",
        "probe": (240, 15, 10),
        "max_model_len": "131072",
        "mtp": True,
    },
}


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def stack(request: pytest.FixtureRequest) -> tuple[str, Rendered]:
    return request.param, render(stack_config(request.param), request.param)


def container(rendered: Rendered) -> dict[str, Any]:
    """The vLLM container: the only one with a port (the ingress container)."""
    containers = rendered.one(SERVICE).inputs["template"]["containers"]
    (vllm,) = [c for c in containers if "ports" in c]
    assert vllm["name"] == "vllm"
    first: dict[str, Any] = vllm
    return first


def test_gpu_shape(stack: tuple[str, Rendered]) -> None:
    name, rendered = stack
    expected = EXPECTED[name]
    template = rendered.one(SERVICE).inputs["template"]
    assert template["nodeSelector"] == {"accelerator": expected["accelerator"]}
    assert template["gpuZonalRedundancyDisabled"] is True
    assert template["executionEnvironment"] == "EXECUTION_ENVIRONMENT_GEN2"
    resources = container(rendered)["resources"]
    assert resources["cpuIdle"] is False  # CPU always allocated
    assert resources["startupCpuBoost"] is True
    assert resources["limits"] == {
        "cpu": expected["cpu"],
        "memory": expected["memory"],
        "nvidia.com/gpu": "1",
    }


def test_model_bucket_mounted_read_only_as_the_vllm_user(stack: tuple[str, Rendered]) -> None:
    _, rendered = stack
    template = rendered.one(SERVICE).inputs["template"]
    (volume,) = [v for v in template["volumes"] if v["name"] == "models"]
    assert volume["gcs"]["readOnly"] is True
    assert volume["gcs"]["mountOptions"] == ["uid=1001", "gid=1001"]
    assert volume["gcs"]["bucket"].startswith("gemma-")
    mount, _cache = container(rendered)["volumeMounts"]  # the compile cache: test_compile_cache
    assert mount == {"name": volume["name"], "mountPath": "/mnt/models"}


def test_probes_sized_for_the_cold_start(stack: tuple[str, Rendered]) -> None:
    name, rendered = stack
    c = container(rendered)
    startup = c["startupProbe"]
    assert startup["httpGet"] == {"path": "/health", "port": 8080}
    got = (startup["initialDelaySeconds"], startup["periodSeconds"], startup["timeoutSeconds"])
    assert got == EXPECTED[name]["probe"]  # the catalog's cadence
    derived = startup_probe(load_settings(stack_config(name)))  # failures: the prediction's
    assert derived is not None and startup["failureThreshold"] == derived.failure_threshold
    assert startup["periodSeconds"] <= 240 and startup["initialDelaySeconds"] <= 240
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"


def test_pinned_image(stack: tuple[str, Rendered]) -> None:
    _, rendered = stack
    image = container(rendered)["image"]
    assert image.startswith("vllm/vllm-openai:v") or "@sha256:" in image


def test_argument_list(stack: tuple[str, Rendered]) -> None:
    name, rendered = stack
    c = container(rendered)
    assert c["commands"] == ["vllm", "serve"]
    args = parse_args(c["args"])
    assert args["model"] == "/mnt/models/gemma-4-12B-it-qat-w4a16-ct"
    assert args["max-model-len"] == EXPECTED[name]["max_model_len"]
    assert args["quantization"] == "compressed-tensors"
    assert args["port"] == "8080"
    if EXPECTED[name]["mtp"]:
        spec = json.loads(args["speculative-config"])
        assert spec == {
            "method": "mtp",
            "model": "/mnt/models/gemma-4-12B-it-assistant",
            "num_speculative_tokens": 3,
        }
    else:
        assert "speculative-config" not in args


def test_iam_limited_to_the_bucket_and_private_by_default(stack: tuple[str, Rendered]) -> None:
    _, rendered = stack
    service_account = rendered.one(SERVICE).inputs["template"]["serviceAccount"]
    bucket = rendered.one(BUCKET)
    grants = [r for r in rendered.of_type(BUCKET_IAM) if service_account in r.inputs["member"]]
    assert [(g.inputs["role"], g.inputs["bucket"]) for g in grants] == [
        ("roles/storage.objectViewer", bucket.name + "-5678"),
        # Its compile cache folder only (an IAM condition: tests/test_compile_cache.py).
        ("roles/storage.objectUser", bucket.name + "-5678"),
    ]
    # One project-wide role, the metrics collector's; nobody but configured members may invoke.
    project_roles = [r.inputs for r in rendered.resources if "iAMMember" in r.type]
    assert project_roles == [
        {
            "project": "test-project",
            "role": "roles/monitoring.metricWriter",
            "member": f"serviceAccount:{service_account}",
        }
    ]
    assert rendered.of_type(INVOKER) == []
    assert bucket.inputs["publicAccessPrevention"] == "enforced"
    assert bucket.inputs["uniformBucketLevelAccess"] is True
    assert bucket.inputs["forceDestroy"] is False


def test_weights_job_reads_the_token_from_secret_manager(stack: tuple[str, Rendered]) -> None:
    name, rendered = stack
    jobs = rendered.of_type(JOB)
    assert len(jobs) == (2 if EXPECTED[name]["mtp"] else 1)
    for job in jobs:
        (c,) = job.inputs["template"]["template"]["containers"]
        token_env = [e for e in c["envs"] if e["name"] == "HF_TOKEN"]
        assert token_env == [
            {
                "name": "HF_TOKEN",
                "valueSource": {"secretKeyRef": {"secret": "hf-token", "version": "latest"}},
            }
        ]
        assert "value" not in token_env[0]
        assert job.inputs["runExecutionToken"]
    repos = {j.inputs["template"]["template"]["containers"][0]["args"][1] for j in jobs}
    expected = {"google/gemma-4-12B-it-qat-w4a16-ct"}
    if EXPECTED[name]["mtp"]:
        expected.add("google/gemma-4-12B-it-assistant")
    assert repos == expected


def test_server_waits_for_its_weights(stack: tuple[str, Rendered]) -> None:
    _, rendered = stack
    order = [r.type for r in rendered.resources]
    assert max(i for i, t in enumerate(order) if t == JOB) < order.index(SERVICE)


def test_public_and_invokers() -> None:
    config = {**stack_config("l4"), "public": True, "invokers": ["group:ml@example.com"]}
    members = sorted(r.inputs["member"] for r in render(config).of_type(INVOKER))
    assert members == ["allUsers", "group:ml@example.com"]


def test_accounts_are_per_stack() -> None:
    l4 = {r.inputs["accountId"] for r in render(stack_config("l4"), "l4").of_type(ACCOUNT)}
    rtx = {
        r.inputs["accountId"] for r in render(stack_config("rtx6000"), "rtx6000").of_type(ACCOUNT)
    }
    assert l4.isdisjoint(rtx)
    assert all(6 <= len(a) <= 30 for a in l4 | rtx)


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ({"maxNumSeqs": 0}, "config key 'maxNumSeqs'"),
        ({"hardware": "nvidia-a100"}, "unknown hardware 'nvidia-a100'"),
        ({"image": "vllm/vllm-openai:latest"}, "floating tag 'latest'"),
        ({"gpuMemoryUtilization": 1.2}, "config key 'gpuMemoryUtilization'"),
        ({"speculativeMethod": "mtp"}, "config key 'drafter' is required"),
        ({"maxNumSeq": 8}, "unknown config key(s): 'maxNumSeq' (did you mean 'maxNumSeqs'?)"),
    ],
)
def test_bad_config_declares_nothing(override: dict[str, Any], needle: str) -> None:
    config = {**stack_config("l4"), **override}
    with pytest.raises(pulumi.RunError) as info:
        render(config)
    assert needle in str(info.value)


def test_bad_config_leaves_no_resource_behind() -> None:
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError):
        render({**stack_config("rtx6000"), "region": "us-east4"}, mocks=mocks)
    assert mocks.declared == []
    render(stack_config("rtx6000"), mocks=mocks)  # the same harness does record a good stack
    assert mocks.declared


def test_only_the_used_provider_modules_are_loaded() -> None:
    # A fresh interpreter, so what other tests imported does not count.
    code = (
        "import sys\n"
        "from tests.pulumi_harness import render, stack_config\n"
        "render(stack_config('l4'), 'l4')\n"
        "print(type(sys.modules['pulumi_gcp.compute']).__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    # pulumi_gcp.compute alone costs seconds to import; the program must not touch it.
    assert out.stdout.split()[-1] == "_LazyModule"


def test_image_mirror_runs_the_pushed_digest() -> None:
    rendered = render({**stack_config("l4"), "mirrorImage": True}, "l4")
    repo = rendered.one("gcp:artifactregistry/repository:Repository").inputs
    assert repo["location"] == "us-east4" and repo["format"] == "DOCKER"
    upstream = rendered.one("docker:index/remoteImage:RemoteImage").inputs
    assert upstream["name"] == "vllm/vllm-openai:v0.27.1"
    image = rendered.one("docker:index/image:Image").inputs
    # Built FROM the upstream digest the pinned tag resolved to.
    assert image["build"]["args"] == {"BASE_IMAGE": "vllm/vllm-openai@sha256:" + "1" * 64}
    registry = "us-east4-docker.pkg.dev/test-project/gemma-l4-images"
    assert image["imageName"] == f"{registry}/vllm-openai:v0.27.1"
    # The registry credentials travel as a Pulumi secret (the sig key marks a secret value).
    registry_args = image["registry"]
    assert registry_args["4dabf18193072939515e22adb298388d"] == "1b47061264138c4ac30d75fd1eb44270"
    assert registry_args["value"]["username"] == "oauth2accesstoken"
    served = container(rendered)["image"]
    assert served == (
        "us-east4-docker.pkg.dev/test-project/gemma-l4-images/vllm-openai@sha256:" + "0" * 64
    )


def test_without_mirror_docker_hub_image_is_used_and_no_registry_declared() -> None:
    rendered = render(stack_config("l4"), "l4")
    assert rendered.of_type("docker:index/image:Image") == []
    assert container(rendered)["image"] == "vllm/vllm-openai:v0.27.1"


def test_health_check_identity_may_invoke_the_service() -> None:
    checker = "checks@test-project.iam.gserviceaccount.com"
    config = {**stack_config("l4"), "healthCheckServiceAccount": checker}
    members = [r.inputs["member"] for r in render(config).of_type(INVOKER)]
    assert members == [f"serviceAccount:{checker}"]


def test_the_l4_stack_holds_its_sequences_at_full_context() -> None:
    """The l4 stack's promise, with the checkpoint's real size (vLLM's 8.28 GiB): every one of
    its maxNumSeqs sequences can reach maxModelLen without preemption."""
    from serving.capacity.plan import load_stack_settings, report

    r = report("l4", load_stack_settings("l4"), 1.0)
    assert r["max_model_len"] == 32768
    assert r["full_length_sequences"] >= r["max_num_seqs"]
    assert r["full_length_sequences"] < r["max_num_seqs"] + 1  # no larger maxNumSeqs would
