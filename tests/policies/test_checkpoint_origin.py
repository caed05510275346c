"""checkpoint-from-download-job: a served bucket folder is one the stack's download job writes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policies.checkpoint_from_download_job import BUCKET_OBJECT, checkpoint_from_download_job
from tests.policies._fixtures import JOB, SERVICE, rendered, stack_violations


def stack(name: str = "l4") -> list[tuple[str, dict[str, Any], str]]:
    r = rendered(name)
    return [(res.type, res.inputs, res.name) for res in r.resources]


def jobs(resources: list[tuple[str, dict[str, Any], str]]) -> list[dict[str, Any]]:
    return [props for type_, props, _ in resources if type_ == JOB]


@pytest.mark.parametrize("name", ["l4", "rtx6000", "tpu-v6e1"])
def test_shipped_stacks_serve_what_they_download(name: str) -> None:
    assert stack_violations(checkpoint_from_download_job, stack(name)) == {}


def test_no_download_job_is_refused() -> None:
    resources = [r for r in stack() if r[0] != JOB]
    (messages,) = stack_violations(checkpoint_from_download_job, resources).values()
    assert "no download job of this stack writes 'gemma-4-12B-it-qat-w4a16-ct'" in messages[0]


def test_a_job_that_downloads_another_repository_into_the_folder_is_refused() -> None:
    resources = stack()
    for props in jobs(resources):
        props["template"]["template"]["containers"][0]["args"][1] = "google/gemma-4-12B-it"
    (messages,) = stack_violations(checkpoint_from_download_job, resources).values()
    assert (
        "downloads 'google/gemma-4-12B-it', not 'google/gemma-4-12B-it-qat-w4a16-ct'"
        in (messages[0])
    )


def test_a_job_writing_another_bucket_does_not_count() -> None:
    resources = stack()
    for props in jobs(resources):
        props["template"]["template"]["volumes"][0]["gcs"]["bucket"] = "someone-elses-bucket"
    (messages,) = stack_violations(checkpoint_from_download_job, resources).values()
    assert "no download job of this stack writes" in messages[0]


def test_a_job_writing_another_folder_does_not_count() -> None:
    resources = stack()
    for props in jobs(resources):
        args = props["template"]["template"]["containers"][0]["args"]
        args[-1] = "--local-dir=/mnt/models/elsewhere"
    assert stack_violations(checkpoint_from_download_job, resources)


def test_the_service_alone_is_judged_by_its_own_type() -> None:
    resources = [r for r in stack() if r[0] == SERVICE]
    assert stack_violations(checkpoint_from_download_job, resources)


def test_a_second_job_writing_another_repository_over_the_folder_is_refused() -> None:
    # One job downloading the right repository does not vouch for the folder when another
    # job of the stack writes a different repository into the same folder.
    resources = stack()
    type_, props, name = next(r for r in resources if r[0] == JOB)
    second = copy.deepcopy(props)
    second["template"]["template"]["containers"][0]["args"][1] = "someone/other-weights"
    resources.append((type_, second, name + "-second"))
    (messages,) = stack_violations(checkpoint_from_download_job, resources).values()
    assert "downloads 'someone/other-weights'" in messages[0]


@pytest.mark.parametrize(
    "object_name",
    ["gemma-4-12B-it-qat-w4a16-ct/config.json", "gemma-4-12B-it-qat-w4a16-ct/sub/model.bin",
     "./gemma-4-12B-it-qat-w4a16-ct/config.json", "x//config.json", None],
)  # fmt: skip
def test_an_object_the_stack_writes_into_the_folder_is_refused(object_name: str | None) -> None:
    resources = stack()
    props: dict[str, Any] = {"bucket": "gemma-l4-models-bucket-5678", "source": "config.json"}
    if object_name is not None:
        props["name"] = object_name
    resources.append((BUCKET_OBJECT, props, "planted"))
    (messages,) = stack_violations(checkpoint_from_download_job, resources).values()
    assert "BucketObject" in messages[0]


def test_an_object_in_another_folder_is_not_the_checkpoint() -> None:
    resources = stack()
    props = {"bucket": "gemma-l4-models-bucket-5678", "name": "notes/readme.txt", "source": "r.txt"}
    resources.append((BUCKET_OBJECT, props, "notes"))
    assert stack_violations(checkpoint_from_download_job, resources) == {}


@pytest.mark.parametrize("option", ["only-dir=other", "only_dir=other", "--only-dir=other"])
def test_a_job_whose_mount_shows_another_folder_of_the_bucket_does_not_count(option: str) -> None:
    # gcsfuse's only-dir makes the mount's root a folder of the bucket: the job writes
    # bucket/other/<folder>, not the folder the service serves.
    resources = stack()
    for props in jobs(resources):
        gcs = props["template"]["template"]["volumes"][0]["gcs"]
        gcs["mountOptions"] = [*gcs.get("mountOptions", []), option]
    (messages,) = stack_violations(checkpoint_from_download_job, resources).values()
    assert "no download job of this stack writes" in messages[0] or (
        "mounts its bucket writable" in messages[0]
    )


def test_a_job_mounting_a_sub_path_does_not_count() -> None:
    resources = stack()
    for props in jobs(resources):
        props["template"]["template"]["containers"][0]["volumeMounts"][0]["subPath"] = "other"
    (messages,) = stack_violations(checkpoint_from_download_job, resources).values()
    assert "no download job of this stack writes" in messages[0] or (
        "mounts its bucket writable" in messages[0]
    )


@pytest.mark.parametrize(
    "revision",
    ["--revision=refs/pr/7", "--revision=refs/convert/parquet", "--revision=refs%2Fpr%2F7"],
)
def test_a_job_downloading_a_pull_request_of_the_repository_is_refused(revision: str) -> None:
    # refs/pr/N is a pull request anyone with access may open on google's repository: the
    # same repository id, someone else's files.
    resources = stack()
    for props in jobs(resources):
        props["template"]["template"]["containers"][0]["args"][2] = revision
    (messages,) = stack_violations(checkpoint_from_download_job, resources).values()
    assert "pull request or conversion ref" in messages[0]


@pytest.mark.parametrize(
    "extra", [["--rev=refs/pr/7"], ["--repo-type=dataset"], ["--cache-dir=/x"], ["--revision", "x"]]
)
def test_a_job_whose_command_line_is_not_read_exactly_vouches_for_nothing(extra: list[str]) -> None:
    resources = stack()
    for props in jobs(resources):
        props["template"]["template"]["containers"][0]["args"] += extra
    (messages,) = stack_violations(checkpoint_from_download_job, resources).values()
    assert "no download job of this stack writes" in messages[0] or (
        "mounts its bucket writable" in messages[0]
    )


@pytest.mark.parametrize("command", [["sh", "-c", "echo {} > /mnt/models/x/config.json"], ["hf"]])
def test_another_container_mounting_the_bucket_writable_is_refused(command: list[str]) -> None:
    # A second job of the stack that mounts the model bucket writable writes what it likes
    # into the served folder (by hand, or `hf download` read inexactly): the download job no
    # longer vouches for its files.
    resources = stack()
    type_, props, name = next(r for r in resources if r[0] == JOB)
    second = copy.deepcopy(props)
    c = second["template"]["template"]["containers"][0]
    c["commands"] = command
    c["args"] = (
        [
            "download",
            "google/gemma-4-12B-it-qat-w4a16-ct",
            "config.json",
            "--local-dir=/mnt/models/gemma-4-12B-it-qat-w4a16-ct",
        ]
        if command == ["hf"]
        else []
    )
    resources.append((type_, second, name + "-by-hand"))
    (messages,) = stack_violations(checkpoint_from_download_job, resources).values()
    assert "mounts its bucket writable" in messages[0]
