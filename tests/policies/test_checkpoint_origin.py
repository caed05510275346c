"""checkpoint-from-download-job: a served bucket folder is one the stack's download job writes."""

from __future__ import annotations

from typing import Any

import pytest

from policies.checkpoint_from_download_job import checkpoint_from_download_job
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
