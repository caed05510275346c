"""Every image this package pins names a tag of a published release of that image's project.

Docker Hub tags cannot be listed from the build machines, so the evidence is the project's
release on PyPI: the `vllm/vllm-openai` image is published per `vllm` release (tag `v<version>`),
and the `vllm/vllm-tpu` image per `vllm-tpu` release (vLLM's TPU build, backend
`tpu-inference`, same version). The lists below are what `pip index versions vllm` and
`pip index versions vllm-tpu` returned on 2026-11-23 (pypi.org through pip); they are data
verified once, not fetched by the test (the tests run offline).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.contracts.variants import VARIANTS, rendered
from tests.pulumi_harness import ROOT

#: image repository -> (PyPI project, releases seen there on 2026-11-23, newest first).
RELEASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "vllm/vllm-openai": (
        "vllm",
        ("0.33.0", "0.32.0", "0.31.0", "0.30.0", "0.29.0", "0.28.0", "0.27.1", "0.27.0",
         "0.26.0", "0.25.1", "0.25.0"),
    ),
    "vllm/vllm-tpu": (
        "vllm-tpu",
        # No 0.27.1: vllm-tpu has had no patch releases since 0.13.x.
        ("0.32.0", "0.31.0", "0.30.0", "0.29.0", "0.28.0", "0.27.0", "0.26.0", "0.25.0"),
    ),
}  # fmt: skip

IMAGE = re.compile(r"\b((?:docker\.io/)?vllm/vllm-[a-z-]+):([A-Za-z0-9._-]+)")


def release_errors(image: str) -> list[str]:
    errors = []
    for repository, tag in IMAGE.findall(image):
        repository = repository.removeprefix("docker.io/")
        if repository not in RELEASES:
            errors.append(f"{repository}:{tag}: no verified release list for {repository}")
            continue
        project, versions = RELEASES[repository]
        if not tag.startswith("v") or tag[1:] not in versions:
            errors.append(
                f"{repository}:{tag} matches no {project} release on PyPI "
                f"(verified: {', '.join(versions)})"
            )
    return errors


def stack_files() -> list[Path]:
    return sorted(ROOT.glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("path", stack_files(), ids=lambda p: p.name)
def test_stack_file_image_is_a_published_release(path: Path) -> None:
    config = yaml.safe_load(path.read_text())["config"] or {}
    image = config["gemma4-vllm:image"]
    assert IMAGE.search(image), image
    assert release_errors(image) == []


def test_documented_pins_are_published_releases() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [m for page in pages for m in IMAGE.findall(page.read_text())]
    assert found
    pinned = {f"{r}:{t}" for r, t in found if t.startswith("v")}
    assert [e for image in sorted(pinned) for e in release_errors(image)] == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_image_the_program_declares_is_a_published_release(variant: str) -> None:
    """Cloud Run service and job images, the mirror's source, and the TPU startup script."""
    images: list[str] = []
    for resource in rendered(variant).resources:
        text = repr(resource.inputs)
        images += [f"{r}:{t}" for r, t in IMAGE.findall(text)]
    assert images
    assert [e for image in images for e in release_errors(image)] == []


def test_the_check_refuses_a_tag_with_no_release() -> None:
    assert release_errors("vllm/vllm-tpu:v0.27.1") == [
        "vllm/vllm-tpu:v0.27.1 matches no vllm-tpu release on PyPI (verified: "
        + ", ".join(RELEASES["vllm/vllm-tpu"][1])
        + ")"
    ]
    assert release_errors("docker.io/vllm/vllm-openai:0.27.1")  # tags carry a leading v
    assert release_errors("vllm/vllm-cpu:v0.27.1")  # no verified list for it
    assert release_errors("vllm/vllm-openai:v0.27.1") == []


#: Google's collectors, pinned by version; their repositories' release tags were read on
#: 2026-11-23 (GoogleCloudPlatform/run-gmp-sidecar: 1.2.0 exists, newest 1.7.0, and its config
#: path, apiVersion, kind and targetLabels were read at 1.2.0; GoogleCloudPlatform/ops-agent:
#: 2.70.0, whose Prometheus receiver config shape was read at that tag).
SIDECAR = re.compile(r"cloud-run-gmp-sidecar/cloud-run-gmp-sidecar:([A-Za-z0-9._-]+)")
OPS_AGENT = re.compile(r'"version": "([0-9][0-9.]*)"')  # the launch document's pinned version
VERIFIED = {"sidecar": ("1.2.0",), "ops-agent": ("2.70.0",)}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_collectors_are_pinned_to_verified_releases(variant: str) -> None:
    text = " ".join(repr(r.inputs) for r in rendered(variant).resources)
    sidecars = SIDECAR.findall(text)
    agents = OPS_AGENT.findall(text) if "add-google-cloud-ops-agent-repo" in text else []
    assert sidecars or agents, "monitoring is on in every variant: a collector is declared"
    assert [t for t in sidecars if t not in VERIFIED["sidecar"]] == []
    assert [v for v in agents if v not in VERIFIED["ops-agent"]] == []
