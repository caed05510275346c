"""Every refusal of the program is one `pulumi.RunError`, before any resource is declared."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from serving.config.stack_config import ConfigKeyError, project_config
from serving.config.stack_file import docker_keys, gcp_keys
from tests.pulumi_harness import RecordingMocks, render, stack_config

STACKS = ("l4", "rtx6000", "tpu-v6e1", "gke-tpu-v6e", "gke-l4")


def refused(stack: str, extra: dict[str, Any]) -> tuple[str, RecordingMocks]:
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError) as info:
        render(stack_config(stack), stack, mocks, other_config=extra)
    return str(info.value), mocks


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("gemma4vllm:maxNumSeqs", "did you mean 'gemma4-vllm:maxNumSeqs'?"),
        ("gemma4_vllm:maxModelLen", "did you mean 'gemma4-vllm:maxModelLen'?"),
        ("Gemma4-VLLM:image", "did you mean 'gemma4-vllm:image'?"),
        ("gcp:projet", "did you mean 'gcp:project'?"),
        ("gpc:region", "did you mean 'gcp:region'?"),
        ("docker:hots", "did you mean 'docker:host'?"),
        ("docker:registryauth", "did you mean 'docker:registryAuth'?"),
        ("dokcer:host", "did you mean 'docker:host'?"),
    ],
)
def test_misspelled_namespaces_and_keys_are_refused(stack: str, key: str, hint: str) -> None:
    message, mocks = refused(stack, {key: "4"})
    assert key in message and hint in message
    assert mocks.declared == []


@pytest.mark.parametrize("stack", STACKS)
def test_missing_gcp_project_is_refused_before_any_resource(stack: str) -> None:
    message, mocks = refused(stack, {"gcp:project": None})
    assert "gcp:project is not set" in message
    assert mocks.declared == []


def test_gcp_keys_are_the_providers() -> None:
    assert {"project", "region", "zone", "impersonateServiceAccount"} <= gcp_keys()


def test_docker_keys_are_the_providers() -> None:
    assert {"host", "registryAuth", "sshOpts", "caMaterial"} <= docker_keys()
    assert "hots" not in docker_keys()


@pytest.mark.parametrize("stack", STACKS)
def test_real_docker_keys_are_accepted(stack: str) -> None:
    render(stack_config(stack), stack, RecordingMocks(), other_config={"docker:host": "unix:///x"})


def test_pure_split_keeps_project_keys_and_other_namespaces() -> None:
    config = {"gemma4-vllm:model": "m", "gcp:project": "p", "pulumi:tags": "{}"}
    namespaces = {"gcp": frozenset({"project"}), "pulumi": None}
    assert project_config(config, "gemma4-vllm", namespaces) == {"model": "m"}
    with pytest.raises(ConfigKeyError, match="'gemma4-vlm:model'"):
        project_config({"gemma4-vlm:model": "m"}, "gemma4-vllm", namespaces)
