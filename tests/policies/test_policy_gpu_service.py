"""Policies for every GPU service: CPU, model volume, host size, multimodal tokens, MTP, image."""

from __future__ import annotations

import json

import pytest

from policies.cpu_always_allocated import cpu_always_allocated
from policies.gpu_host_minimums import gpu_host_minimums
from policies.model_volume_read_only import model_volume_read_only
from policies.multimodal_batched_tokens import multimodal_batched_tokens
from policies.pinned_image import pinned_image
from policies.speculative_config_valid import speculative_config_valid
from policies.vllm_server_readable import vllm_server_readable
from tests.policies._fixtures import (
    JOB,
    SERVICE,
    STACKS,
    TPU_ARGS,
    TPU_VM,
    container,
    edit_args,
    rendered,
    service,
    tpu_vm,
    violations,
    with_mtp,
)

# --- cpu-always-allocated ----------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_cpu_compliant(stack: str) -> None:
    assert violations(cpu_always_allocated, SERVICE, service(stack)) == []


def test_cpu_idle_true() -> None:
    props = service("l4")
    container(props)["resources"]["cpuIdle"] = True
    (message,) = violations(cpu_always_allocated, SERVICE, props)
    assert "container 'vllm' resources.cpuIdle is true" in message
    assert "Set resources.cpu_idle=False" in message


def test_cpu_idle_unset() -> None:
    props = service("l4")
    del container(props)["resources"]["cpuIdle"]
    (message,) = violations(cpu_always_allocated, SERVICE, props)
    assert "resources.cpuIdle is not set" in message


def test_cpu_rule_ignores_services_without_gpu() -> None:
    props = service("l4")
    del props["template"]["nodeSelector"]
    del container(props)["resources"]["limits"]["nvidia.com/gpu"]
    container(props)["resources"]["cpuIdle"] = True
    assert violations(cpu_always_allocated, SERVICE, props) == []


# --- model-volume-read-only --------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_volume_compliant(stack: str) -> None:
    assert violations(model_volume_read_only, SERVICE, service(stack)) == []


def test_volume_not_read_only() -> None:
    props = service("l4")
    props["template"]["volumes"][0]["gcs"]["readOnly"] = False
    (message,) = violations(model_volume_read_only, SERVICE, props)
    assert "volume 'models' is not read-only" in message
    assert "gcs.read_only=True" in message


def test_volume_without_uid_gid_for_the_vllm_image() -> None:
    """Reference defect 12: the baseline L4 recipe omitted uid=1001;gid=1001."""
    props = service("l4")
    del props["template"]["volumes"][0]["gcs"]["mountOptions"]
    (message,) = violations(model_volume_read_only, SERVICE, props)
    assert "mounted into 'vllm/vllm-openai:v0.27.1' without uid=1001 and gid=1001" in message
    assert "the owner this package's contract gives the model mount" in message
    assert "vLLM 0.27.1's own image runs as root" in message
    assert "Add mount_options ['uid=1001', 'gid=1001']" in message


NONROOT = "us-docker.pkg.dev/p/r/vllm:openai-nonroot"


@pytest.mark.parametrize(
    ("options", "readable"),
    [
        (["uid=1001", "gid=1001"], True),  # gcsfuse's 0644/0755: "other" may read
        ([], True),
        (["uid=1001", "gid=1001", "file-mode=640"], False),
        (["uid=1001", "gid=1001", "file-mode=644", "dir-mode=750"], False),
        (["uid=2000", "gid=1001", "file-mode=600", "dir-mode=700"], True),  # owner
        (["uid=1001", "gid=0", "file-mode=640", "dir-mode=750"], True),  # group 0
        (["uid=1001", "gid=0", "file-mode=600"], False),
        (["uid=1001;gid=1001;file_mode=440"], False),
        (["uid=1001", "gid=1001", "file-mode=rw-r--r--"], False),  # not octal: refused
    ],
)
def test_non_root_image_must_be_able_to_read_the_mount(options: list[str], readable: bool) -> None:
    """vLLM 0.27.1's non-root target runs as uid 2000, gid 0 (its docker/Dockerfile)."""
    props = service("l4")
    props["template"]["volumes"][0]["gcs"]["mountOptions"] = options
    container(props)["image"] = NONROOT
    # Held to the uid/gid contract like every image (a separate message); here: can it read?
    found = [
        m
        for m in violations(model_volume_read_only, SERVICE, props)
        if "which runs as uid 2000" in m
    ]
    if readable:
        assert found == []
    else:
        (message,) = found
        assert f"mounted into '{NONROOT}', which runs as uid 2000 gid 0" in message
        assert "no read" in message or "is not an octal mode" in message


def test_an_image_whose_user_is_not_known_needs_a_mount_every_user_reads() -> None:
    props = service("l4")
    props["template"]["volumes"][0]["gcs"]["mountOptions"] = [
        "uid=1001", "gid=1001", "file-mode=600", "dir-mode=700",
    ]  # fmt: skip
    (message,) = violations(model_volume_read_only, SERVICE, props)
    assert "whose user is not known" in message and "other users" in message
    assert violations(model_volume_read_only, SERVICE, props, {"imageUsers": {}}) == [message]
    config = {"imageUsers": {"vllm/vllm-openai": "0:0"}}  # root reads whatever the modes
    assert violations(model_volume_read_only, SERVICE, props, config) == []
    config = {"imageUsers": {"vllm/vllm-openai": "1234:1234"}}
    (message,) = violations(model_volume_read_only, SERVICE, props, config)
    assert "runs as uid 1234 gid 1234" in message
    config = {"imageUsers": {"vllm/vllm-openai": "vllm:root"}}
    (message,) = violations(model_volume_read_only, SERVICE, props, config)
    assert "imageUsers['vllm/vllm-openai'] = 'vllm:root' is not 'uid:gid'" in message


@pytest.mark.parametrize(
    "image",
    [
        "vllm/vllm-openai:v0.27.1",
        "us-docker.pkg.dev/p/r/my-vllm:1.0",  # a mirror under another repository name
        "europe-west4-docker.pkg.dev/p/mirror/inference@sha256:" + "a" * 64,
        "ghcr.io/acme/server:1.2",
    ],
)
def test_every_image_mounting_the_model_volume_is_held_to_the_contract(image: str) -> None:
    props = service("l4")
    props["template"]["volumes"][0]["gcs"]["mountOptions"] = ["uid=1001;gid=1001"]
    container(props)["image"] = image
    assert violations(model_volume_read_only, SERVICE, props) == []
    props["template"]["volumes"][0]["gcs"]["mountOptions"] = ["uid=1001"]
    (message,) = violations(model_volume_read_only, SERVICE, props)
    assert f"mounted into {image!r} without gid=1001" in message


# --- gpu-host-minimums -------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_host_compliant(stack: str) -> None:
    assert violations(gpu_host_minimums, SERVICE, service(stack)) == []


def test_host_cpu_below_minimum() -> None:
    props = service("rtx6000")
    props["template"]["containers"] = [container(props)]  # vLLM alone, without the collector
    container(props)["resources"]["limits"]["cpu"] = "8000m"
    (message,) = violations(gpu_host_minimums, SERVICE, props)
    assert "8 vCPU is below the nvidia-rtx-pro-6000 minimum of 20" in message
    assert "at least '20'" in message


def test_host_memory_below_minimum() -> None:
    props = service("l4")
    props["template"]["containers"] = [container(props)]  # vLLM alone, without the collector
    container(props)["resources"]["limits"]["memory"] = "8192Mi"
    (message,) = violations(gpu_host_minimums, SERVICE, props)
    assert "8 GiB of memory is below the nvidia-l4 minimum of 16 GiB" in message
    assert "at least '16Gi'" in message


def test_host_unknown_gpu_type() -> None:
    props = service("l4")
    props["template"]["nodeSelector"]["accelerator"] = "nvidia-a100"
    (message,) = violations(gpu_host_minimums, SERVICE, props)
    assert "GPU type 'nvidia-a100'" in message
    assert "allowed: nvidia-l4, nvidia-rtx-pro-6000" in message


# --- multimodal-batched-tokens -----------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_multimodal_compliant(stack: str) -> None:
    assert violations(multimodal_batched_tokens, SERVICE, service(stack)) == []


def test_multimodal_batched_tokens_too_small() -> None:
    props = edit_args(service("l4"), set_={"max-num-batched-tokens": "2048"})
    (message,) = violations(multimodal_batched_tokens, SERVICE, props)
    assert "--max-num-batched-tokens=2048" in message
    assert "max_tokens_per_mm_item (2496)" in message
    assert "at least 2496" in message


def test_multimodal_batched_tokens_default_is_raised_by_vllm_to_one_item() -> None:
    """vLLM 0.27.1 raises a left-out --max-num-batched-tokens (2048 on an L4) to one whole
    multimodal item for Gemma 4 (`_set_default_max_num_seqs_and_batched_tokens_args`)."""
    props = edit_args(service("l4"), drop=("max-num-batched-tokens",))
    assert violations(multimodal_batched_tokens, SERVICE, props) == []


def test_multimodal_batched_tokens_default_capped_by_seqs_times_length() -> None:
    """...but caps it at max_num_seqs x max_model_len, below one item here."""
    props = edit_args(
        service("l4"),
        set_={"max-num-seqs": "1", "max-model-len": "2048"},
        drop=("max-num-batched-tokens",),
    )
    (message,) = violations(multimodal_batched_tokens, SERVICE, props)
    assert "--max-num-batched-tokens=2048 (vLLM's start-up default here)" in message


@pytest.mark.parametrize(
    "chunking",
    [
        ("disable-chunked-mm-input",),  # the flag left out: vLLM forces it on CUDA
        ("disable-chunked-mm-input", "no-disable-chunked-mm-input"),  # asking for chunking
    ],
)
@pytest.mark.parametrize("batched", ["2048", "2495", "2k"])
def test_gemma4_cannot_chunk_an_image_whatever_the_flags(
    chunking: tuple[str, ...], batched: str
) -> None:
    """vLLM 0.27.1 forces chunked multimodal input off for a multimodal prefix-LM model on
    CUDA (`vllm/platforms/cuda.py`), so Gemma 4 needs one whole image per step even without
    --disable-chunked-mm-input, and --no-disable-chunked-mm-input does not help."""
    drop, *ask = chunking
    props = edit_args(
        service("l4"),
        set_={"max-num-batched-tokens": batched, **{a: None for a in ask}},
        drop=(drop,),
    )
    (message,) = violations(multimodal_batched_tokens, SERVICE, props)
    assert "a multimodal model with bidirectional (prefix-LM) attention" in message
    assert "'Forcing --disable_chunked_mm_input for models with multimodal-bidirectional" in message
    assert "at least 2496" in message
    passing = edit_args(
        service("l4"),
        set_={"max-num-batched-tokens": "2496", **{a: None for a in ask}},
        drop=(drop,),
    )
    assert violations(multimodal_batched_tokens, SERVICE, passing) == []


def test_gemma4_on_a_tpu_vm_without_the_flag() -> None:
    """The TPU platform disables chunked multimodal input for every multimodal model; the
    hub id a TPU VM's `docker run` serves is resolved to the same catalogue card."""
    vm = tpu_vm(*TPU_ARGS, "--max-num-batched-tokens=2048")
    (message,) = violations(multimodal_batched_tokens, TPU_VM, vm, name="tpu")
    assert "serves google/gemma-4-12B-it, a multimodal model" in message
    fixed = tpu_vm(*TPU_ARGS, "--max-num-batched-tokens=2496")
    assert violations(multimodal_batched_tokens, TPU_VM, fixed) == []


def test_gemma4_on_a_gke_pod_without_the_flag() -> None:
    from tests.policies.test_policy_gke import container as pod_container
    from tests.policies.test_policy_gke import resource_type, set_arg, vllm

    deployment = vllm("l4")
    pod = pod_container(deployment)
    pod["args"] = [a for a in pod["args"] if a != "--disable-chunked-mm-input"]
    set_arg(deployment, "max-num-batched-tokens", "2048")
    (message,) = violations(multimodal_batched_tokens, resource_type(deployment), deployment)
    assert "a multimodal model with bidirectional (prefix-LM) attention" in message


def test_the_item_size_is_the_catalogues() -> None:
    """One figure, the model card's: no policy setting can shrink it."""
    from serving.catalog.models import MODELS

    props = edit_args(service("l4"), set_={"max-num-batched-tokens": "2048"})
    (message,) = violations(multimodal_batched_tokens, SERVICE, props, {"maxTokensPerMmItem": 512})
    per_item = MODELS["google/gemma-4-12B-it-qat-w4a16-ct"].max_tokens_per_mm_item
    assert f"at least {per_item}" in message


# --- speculative-config-valid ------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_speculative_compliant(stack: str) -> None:
    assert violations(speculative_config_valid, SERVICE, service(stack)) == []


def test_speculative_json_split_by_a_comma_separated_list() -> None:
    """Reference defect 2: the JSON went through a comma-separated argument list."""
    props = service("l4")
    args = container(props)["args"]
    args[-2:-2] = [
        '--speculative-config={"method":"mtp"',
        '"model":"/mnt/models/gemma-4-12B-it-assistant"',
        '"num_speculative_tokens":3}',
    ]
    # The pieces are arguments vLLM's own parser refuses: the server is not read at all.
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "vLLM 0.27.1's parser refuses the arguments: unrecognized arguments" in message


def test_speculative_without_drafter() -> None:
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 3})
    props = edit_args(service("l4"), set_={"speculative-config": spec})
    (message,) = violations(speculative_config_valid, SERVICE, props)
    assert "names no drafter ('model') for method 'mtp'" in message
    assert "'drafter'" in message


@pytest.mark.parametrize("tokens", [0, 6])
def test_speculative_token_count_out_of_range(tokens: int) -> None:
    props = with_mtp(service("l4"), tokens)
    (message,) = violations(speculative_config_valid, SERVICE, props)
    assert f"num_speculative_tokens {tokens}" in message
    assert "from 1 to 5" in message


def test_speculative_not_an_object_and_ngram() -> None:
    props = edit_args(service("l4"), set_={"speculative-config": "[3]"})
    (message,) = violations(speculative_config_valid, SERVICE, props)
    assert "must be a JSON object" in message
    ngram = json.dumps({"method": "ngram", "num_speculative_tokens": 4})
    props = edit_args(service("l4"), set_={"speculative-config": ngram})
    assert violations(speculative_config_valid, SERVICE, props) == []


# --- pinned-image ------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_image_compliant(stack: str) -> None:
    assert violations(pinned_image, SERVICE, service(stack)) == []
    for job in rendered(stack).of_type(JOB):
        assert violations(pinned_image, JOB, job.inputs) == []


@pytest.mark.parametrize("tag", ["nightly", "latest"])
def test_image_floating_tag(tag: str) -> None:
    """Reference defect 9: floating :nightly/:latest images."""
    props = service("l4")
    container(props)["image"] = f"vllm/vllm-openai:{tag}"
    (message,) = violations(pinned_image, SERVICE, props)
    assert f"uses the floating tag {tag!r}" in message
    assert "pin a version tag or a @sha256: digest" in message


def test_image_untagged_in_a_job() -> None:
    job = rendered("l4").of_type(JOB)[0].inputs
    job["template"]["template"]["containers"][0]["image"] = "vllm/vllm-openai"
    (message,) = violations(pinned_image, JOB, job)
    assert "has no tag" in message
    digest = "vllm/vllm-openai@sha256:" + "a" * 64
    job["template"]["template"]["containers"][0]["image"] = digest
    assert violations(pinned_image, JOB, job) == []


@pytest.mark.parametrize(
    "image",
    ["us-east4-docker.pkg.dev/p/gemma-l4-images/vllm-openai@sha256:" + "a" * 64, None],
    ids=["mirror-of-vllm-openai", "unknown-at-preview"],
)
def test_mirrored_or_unknown_image_still_needs_the_uid_options(image: str | None) -> None:
    """The CI path runs a mirror (another registry, same repository) whose digest is not
    known at preview: both are held to the package's mount-owner contract."""
    props = service("l4")
    del props["template"]["volumes"][0]["gcs"]["mountOptions"]
    container(props)["image"] = image
    (message,) = violations(model_volume_read_only, SERVICE, props)
    assert "without uid=1001 and gid=1001" in message


def test_automatic_base_image_updates_are_refused() -> None:
    # The reference stays pinned while Cloud Run swaps the base layers under it.
    props = service("l4")
    container(props)["baseImageUri"] = (
        "us-central1-docker.pkg.dev/serverless-runtimes/google-22/runtimes/python312"
    )
    (message,) = violations(pinned_image, SERVICE, props)
    assert "baseImageUri" in message


def test_processor_kwargs_change_the_item_size_so_the_check_fails_closed() -> None:
    """Gemma 4's processor reads max_soft_tokens from --mm-processor-kwargs
    (vllm/model_executor/models/gemma4_mm.py), so the catalogue's item size no longer holds."""
    props = edit_args(service("l4"), set_={"mm-processor-kwargs": '{"max_soft_tokens": 1120}'})
    (message,) = violations(multimodal_batched_tokens, SERVICE, props)
    assert "--mm-processor-kwargs" in message and "leave --mm-processor-kwargs out" in message


def test_a_text_only_server_budgets_no_image() -> None:
    """--language-model-only sets every modality's limit to 0: vLLM budgets no item."""
    small = {"max-num-batched-tokens": "2048", "language-model-only": None}
    props = edit_args(service("l4"), set_=small)
    assert violations(multimodal_batched_tokens, SERVICE, props) == []
    props = edit_args(service("l4"), set_={**small, "enable-mm-embeds": None})
    (message,) = violations(multimodal_batched_tokens, SERVICE, props)
    assert "at least 2496" in message
