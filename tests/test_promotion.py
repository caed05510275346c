"""Promotion logic: what moves from stack to stack, and what never does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from serving.promotion import PROMOTED, STACK_OWN, main, plan, read_stack, write_changes
from serving.settings import Settings, config_keys, load_settings
from tests.pulumi_harness import ROOT

DIGEST = "vllm/vllm-openai@sha256:" + "a" * 64


def settings(stack: str, **overrides: object) -> Settings:
    return load_settings({**read_stack(stack), **overrides})


def test_every_key_is_classified() -> None:
    assert set(PROMOTED) | STACK_OWN == set(config_keys())
    for never in (
        "hardware",
        "region",
        "zone",
        "maxModelLen",
        "gpuMemoryUtilization",
        "kvCacheDtype",
        "maxNumSeqs",
        "speculativeMethod",
        "cpu",
        "minInstances",
        "public",
        "invokers",
        "sourceRanges",
    ):
        assert never in STACK_OWN


def test_l4_to_rtx_carries_the_verified_digest_and_revision() -> None:
    source = settings("l4", modelRevision="0123abcd")
    result = plan("l4", source, "rtx6000", settings("rtx6000"), deployed_image=DIGEST)
    assert result.changes == {"image": DIGEST, "modelRevision": "0123abcd"}
    assert "drafterRevision" in result.held  # L4 runs no drafter


def test_hardware_settings_never_move() -> None:
    source = settings("l4", maxModelLen=4096, maxNumSeqs=2, gpuMemoryUtilization=0.6)
    result = plan("l4", source, "rtx6000", settings("rtx6000"))
    assert set(result.changes) <= set(PROMOTED)


def test_tpu_keeps_its_own_image_and_checkpoint() -> None:
    result = plan(
        "rtx6000",
        settings("rtx6000", modelRevision="abc"),
        "tpu-v6e1",
        settings("tpu-v6e1"),
        deployed_image=DIGEST,
    )
    assert result.changes == {}
    assert "vllm-tpu, not vllm-openai" in result.held["image"]
    assert result.held["modelRevision"] == "tpu-v6e1 serves google/gemma-4-12B-it"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for stack in ("l4", "rtx6000"):
        shutil.copy(ROOT / f"Pulumi.{stack}.yaml", tmp_path)
    return tmp_path


def test_write_keeps_comments_and_yields_a_valid_stack(repo: Path) -> None:
    before = (repo / "Pulumi.rtx6000.yaml").read_text()
    write_changes("rtx6000", {"image": DIGEST, "modelRevision": "0123abcd"}, root=repo)
    after = (repo / "Pulumi.rtx6000.yaml").read_text()
    comments = [line for line in before.splitlines() if line.lstrip().startswith("#")]
    assert comments == [line for line in after.splitlines() if line.lstrip().startswith("#")]
    promoted = read_stack("rtx6000", repo)
    assert promoted["image"] == DIGEST and promoted["modelRevision"] == "0123abcd"
    assert promoted["maxModelLen"] == "131072"  # untouched (as the CLI hands it over: text)


def test_cli_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--from", "l4", "--to", "rtx6000", "--source-image", DIGEST]) == 0
    out = capsys.readouterr().out
    assert f"promote image: {DIGEST}" in out
    assert main(["--from", "l4", "--to", "nope"]) == 2
