"""compile-cache-keyed: a compile cache on a bucket shows only its own key's folder, writable."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from policies.compile_cache_keyed import compile_cache_keyed
from policies.model_volume_read_only import model_volume_read_only
from policies.vllm_server_readable import vllm_server_readable
from serving.render.compile_cache import CACHE_MOUNT_PATH, GPU_CACHE_ENV, TPU_CACHE_ENV
from serving.render.tpu_startup import BUCKET_KEY, LAUNCH_KEY
from tests.policies._fixtures import (
    SERVICE,
    STACKS,
    TPU_DYNAMIC,
    container,
    edit_args,
    service,
    violations,
)
from tests.policies._gke_stack import resources, vllm

DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def _cache_volume(props: dict[str, Any]) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = props["template"]["volumes"]
    (volume,) = [v for v in volumes if v["name"] == "compile-cache"]
    return volume


def _set_env(props: dict[str, Any], name: str, value: str) -> None:
    envs = container(props)["envs"]
    envs[:] = [e for e in envs if e["name"] != name] + [{"name": name, "value": value}]


@pytest.mark.parametrize("stack", STACKS)
def test_shipped_cloud_run_stacks_comply(stack: str) -> None:
    props = service(stack)
    for policy in (compile_cache_keyed, model_volume_read_only, vllm_server_readable):
        assert violations(policy, SERVICE, props) == []


@pytest.mark.parametrize("variant", ["gke-l4", "gke-tpu-v6e"])
def test_shipped_gke_stacks_comply(variant: str) -> None:
    props = vllm(resources(variant))
    env = {
        e["name"]: e.get("value") for e in props["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    expected = TPU_CACHE_ENV if "tpu" in variant else GPU_CACHE_ENV
    assert env[expected] == CACHE_MOUNT_PATH
    assert ({GPU_CACHE_ENV, TPU_CACHE_ENV} - {expected}).isdisjoint(env)
    for policy in (compile_cache_keyed, model_volume_read_only, vllm_server_readable):
        assert violations(policy, DEPLOYMENT, props) == []


@pytest.mark.parametrize(
    "change",
    [
        lambda p: edit_args(p, set_={"max-model-len": "16384"}),
        lambda p: container(p).update(image="vllm/vllm-openai:v0.27.2"),
        lambda p: _set_env(p, "VLLM_USE_FLASHINFER_SAMPLER", "0"),
        lambda p: p["template"]["nodeSelector"].update(accelerator="nvidia-rtx-pro-6000"),
    ],
)
def test_a_server_unlike_the_folder_it_mounts_is_refused(change: Any) -> None:
    """Another command line, image, environment or GPU in the same folder: the key differs."""
    props = service("l4")
    change(props)
    (message,) = violations(compile_cache_keyed, SERVICE, props)
    assert (
        f"{GPU_CACHE_ENV}={CACHE_MOUNT_PATH} is on Cloud Storage volume 'compile-cache'" in message
    )
    assert "load each other's compiled code" in message
    assert "Mount it with only-dir=compile-cache/" in message


def test_two_resources_with_different_keys_cannot_share_one_folder() -> None:
    first = service("l4")
    second = edit_args(copy.deepcopy(first), set_={"max-num-seqs": "4"})
    assert _cache_volume(second) == _cache_volume(first)
    assert violations(compile_cache_keyed, SERVICE, first) == []
    assert len(violations(compile_cache_keyed, SERVICE, second, name="other")) == 1


def test_the_whole_bucket_as_a_cache_is_refused() -> None:
    props = service("l4")
    _cache_volume(props)["gcs"]["mountOptions"] = ["uid=1001", "gid=1001"]
    (message,) = violations(compile_cache_keyed, SERVICE, props)
    assert "which shows the whole bucket" in message


def test_a_cache_on_a_read_only_mount_is_refused() -> None:
    props = service("l4")
    _cache_volume(props)["gcs"]["readOnly"] = True
    (message,) = violations(compile_cache_keyed, SERVICE, props)
    assert "mounted read-only; vLLM 0.27.1 writes into its cache directory" in message


def test_a_cache_inside_the_read_only_model_mount_is_refused() -> None:
    props = service("l4")
    _set_env(props, GPU_CACHE_ENV, "/mnt/models/cache")
    (message,) = violations(compile_cache_keyed, SERVICE, props)
    assert "is on volume 'models', mounted read-only" in message


def test_a_read_only_kubernetes_mount_is_refused() -> None:
    props = vllm(resources("gke-tpu-v6e"))
    mounts = props["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    (mount,) = [m for m in mounts if m["name"] == "compile-cache"]
    mount["readOnly"] = True
    (message,) = violations(compile_cache_keyed, DEPLOYMENT, props)
    assert f"{TPU_CACHE_ENV}={CACHE_MOUNT_PATH} is on volume 'compile-cache'" in message


def test_the_container_filesystem_is_not_judged() -> None:
    """vLLM's default: neither shared nor kept."""
    props = service("l4")
    _set_env(props, GPU_CACHE_ENV, "/root/.cache/vllm")
    assert violations(compile_cache_keyed, SERVICE, props) == []


def test_a_cache_volume_no_cache_variable_names_is_an_unread_mount() -> None:
    """The reader admits the cache folder only where vLLM is told to keep its cache."""
    props = service("l4")
    envs = container(props)["envs"]
    envs[:] = [e for e in envs if e["name"] != GPU_CACHE_ENV]
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert f"it mounts volume 'compile-cache' at '{CACHE_MOUNT_PATH}'" in message


def test_only_the_cache_folder_may_be_writable() -> None:
    props = service("l4")
    _cache_volume(props)["gcs"]["mountOptions"] = ["uid=1001", "gid=1001", "only-dir=weights"]
    (message,) = violations(model_volume_read_only, SERVICE, props)
    assert "volume 'compile-cache' is not read-only" in message


@pytest.mark.parametrize(
    "spelled",
    [
        "only_dir={folder}",  # gcsfuse's flag is only-dir; another spelling is not read as it
        "ONLY-DIR={folder}",
        "--only-dir={folder}",
        "only-dir={folder},only-dir=weights",  # two values: which one gcsfuse keeps is a guess
    ],
)
def test_a_cache_folder_claimed_in_another_spelling_or_twice_is_refused(spelled: str) -> None:
    props = service("l4")
    volume = _cache_volume(props)
    (folder,) = [o.split("=", 1)[1] for o in volume["gcs"]["mountOptions"] if "only-dir" in o]
    others = [o for o in volume["gcs"]["mountOptions"] if "only-dir" not in o]
    volume["gcs"]["mountOptions"] = [*others, *spelled.format(folder=folder).split(",")]
    (message,) = violations(compile_cache_keyed, SERVICE, props)
    assert "which shows the whole bucket" in message
    # ... and it is no cache volume to the policies that let a cache be writable.
    (message,) = violations(model_volume_read_only, SERVICE, props)
    assert "volume 'compile-cache' is not read-only" in message


def test_a_cache_path_that_leaves_its_mount_is_judged_where_it_lands() -> None:
    """/mnt/compile-cache/../models is the weights' read-only mount, as the kernel resolves it."""
    props = service("l4")
    weights = next(m["mountPath"] for m in container(props)["volumeMounts"]
                   if m["mountPath"] != CACHE_MOUNT_PATH)  # fmt: skip
    up = "/.." * CACHE_MOUNT_PATH.count("/")  # back to the root, then down to the weights
    _set_env(props, GPU_CACHE_ENV, f"{CACHE_MOUNT_PATH}{up}{weights}")
    messages = violations(compile_cache_keyed, SERVICE, props)
    assert any("mounted read-only" in m for m in messages), messages


def _tpu_node() -> dict[str, Any]:
    """The shipped tpu-v6e1 stack's queued resource, as the program declares it."""
    from tests.pulumi_harness import render, stack_config

    return render(stack_config("tpu-v6e1"), "tpu-v6e1").one(TPU_DYNAMIC).inputs


def _relaunch(props: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The node with its launch document changed (`cacheKey`, `image` or `args`)."""
    node = copy.deepcopy(props)
    launch = json.loads(node["metadata"][LAUNCH_KEY])
    launch.update(changes)
    node["metadata"][LAUNCH_KEY] = json.dumps(launch)
    return node


def test_the_shipped_tpu_node_keeps_its_xla_cache_at_its_own_key() -> None:
    assert violations(compile_cache_keyed, TPU_DYNAMIC, _tpu_node()) == []


@pytest.mark.parametrize(
    "change",
    [
        {"cacheKey": "0" * 16},
        {"image": "vllm/vllm-tpu:v0.28.0"},
        {"args": ["/mnt/models/gemma-4-12B-it", "--max-model-len=2048", "--port=8000"]},
    ],
)
def test_a_tpu_launch_whose_cache_key_is_not_its_own_is_refused(change: dict[str, Any]) -> None:
    node = _tpu_node()
    (message,) = violations(compile_cache_keyed, TPU_DYNAMIC, _relaunch(node, **change))
    launch = json.loads(_relaunch(node, **change)["metadata"][LAUNCH_KEY])
    assert f"keeps the XLA cache at compile-cache/{launch['cacheKey']}" in message
    assert "may share that folder" in message


def test_two_nodes_of_other_tpus_cannot_share_one_cache_folder() -> None:
    """The same launch on a bigger TPU compiles other programs: its key is not the folder's."""
    node = _tpu_node()
    other = copy.deepcopy(node)
    other["acceleratorType"] = "v6e-8"
    assert violations(compile_cache_keyed, TPU_DYNAMIC, node) == []
    (message,) = violations(compile_cache_keyed, TPU_DYNAMIC, other, name="other")
    assert "this node's key (its image, command line and v6e-8)" in message


@pytest.mark.parametrize(
    "name",
    [None, "", "Models", "models bucket", "-models", "models/other", "models;reboot",
     "a" * 64, "models..bucket", "bücket"],
)  # fmt: skip
def test_a_tpu_node_whose_model_bucket_its_launcher_refuses_is_refused(name: str | None) -> None:
    node = _tpu_node()
    if name is None:
        del node["metadata"][BUCKET_KEY]
    else:
        node["metadata"][BUCKET_KEY] = name
    (message,) = violations(compile_cache_keyed, TPU_DYNAMIC, node)
    assert f"metadata {BUCKET_KEY} is {json.dumps(name)}; accepted: a Cloud Storage" in message
    assert "launcher stops before it copies the weights" in message
