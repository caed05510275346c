"""Promotion logic: what moves from stack to stack, and what never does."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from gemma4.promote_cli import main
from serving.config.settings import Settings, config_keys, load_settings
from serving.promotion import PROMOTED, plan, read_stack
from tests.pulumi_harness import ROOT
from tests.test_promotion_guard import write_changes

DIGEST = "vllm/vllm-openai@sha256:" + "a" * 64


def settings(stack: str, **overrides: object) -> Settings:
    return load_settings({**read_stack(stack), **overrides})


def test_every_key_is_classified() -> None:
    assert set(PROMOTED) <= set(config_keys())
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
        assert never in config_keys() and never not in PROMOTED


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


def test_cli_says_nothing_was_carried_when_every_key_is_held(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--from", "rtx6000", "--to", "tpu-v6e1", "--source-image", DIGEST]) == 0
    out = capsys.readouterr().out
    assert "hold    image:" in out
    assert "already runs" not in out
    assert "nothing promoted: tpu-v6e1 runs what rtx6000 verified except the held keys" in out


def test_cli_says_already_runs_only_when_nothing_differs(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(repo / "Pulumi.l4.yaml", repo / "Pulumi.l4-copy.yaml")
    shutil.copy(ROOT / "Pulumi.yaml", repo)
    assert main(["--from", "l4", "--to", "l4-copy", "--project-dir", str(repo)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"stack files: {repo.resolve() / 'Pulumi.l4.yaml'} -> "
        f"{repo.resolve() / 'Pulumi.l4-copy.yaml'}",
        "l4-copy already runs what l4 verified",
    ]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("write", [[], ["--write"]])
def test_promoting_a_stack_onto_itself_is_a_usage_error(
    repo: Path, capsys: pytest.CaptureFixture[str], write: list[str]
) -> None:
    shutil.copy(ROOT / "Pulumi.yaml", repo)
    before = _sha(repo / "Pulumi.l4.yaml")
    argv = ["--from", "l4", "--to", "l4", "--source-image", DIGEST, "--project-dir", str(repo)]
    assert main([*argv, *write]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "gemma4 promote: error: --to 'l4' names the stack that --from names: a promotion "
        "carries what one stack verified into another stack; name a different stack with --to"
    ]
    assert _sha(repo / "Pulumi.l4.yaml") == before


@pytest.mark.parametrize("link", ["symbolic", "hard"])
@pytest.mark.parametrize("write", [[], ["--write"]])
def test_two_names_of_one_stack_file_are_a_usage_error(
    repo: Path, capsys: pytest.CaptureFixture[str], link: str, write: list[str]
) -> None:
    shutil.copy(ROOT / "Pulumi.yaml", repo)
    alias = repo / "Pulumi.l4-alias.yaml"
    if link == "symbolic":
        alias.symlink_to("Pulumi.l4.yaml")
    else:
        os.link(repo / "Pulumi.l4.yaml", alias)
    before = _sha(repo / "Pulumi.l4.yaml")
    for source, target in (("l4", "l4-alias"), ("l4-alias", "l4")):
        argv = ["--from", source, "--to", target, "--source-image", DIGEST]
        assert main([*argv, "--project-dir", str(repo), *write]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err.startswith(f"gemma4 promote: error: --to '{target}': ")
        assert "is the same file as" in err and "onto itself" in err
        assert len(err.splitlines()) == 1
    assert _sha(repo / "Pulumi.l4.yaml") == before


@pytest.mark.parametrize("target", ["rtx6000", "tpu-v6e1"])  # carried, and held
@pytest.mark.parametrize(
    "image",
    [
        "evil.example.com/vllm/vllm-openai@sha256:" + "b" * 64,
        "ghcr.io/someone/vllm-tpu@sha256:" + "c" * 64,
        "localhost:5000/vllm-openai@sha256:" + "d" * 64,
    ],
)
def test_a_source_image_outside_the_allow_list_is_refused(
    capsys: pytest.CaptureFixture[str], target: str, image: str
) -> None:
    assert main(["--from", "l4", "--to", target, "--source-image", image]) == 2
    captured = capsys.readouterr()
    assert "which stack 'l4' does not allow" in captured.err
    assert "promote" not in captured.out and "hold" not in captured.out


def test_a_source_image_without_a_digest_is_refused_even_when_held(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--from", "rtx6000", "--to", "tpu-v6e1", "--source-image", "vllm/vllm-openai:v0.27.1"]
    assert main(argv) == 2
    assert "is not pinned by a digest" in capsys.readouterr().err


def test_promote_prints_no_credential_it_carries_or_refuses(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A token pasted into a promoted key is masked in the plan and in refusals (the output
    lands in CI logs): the value is still carried, only its display is redacted."""
    token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
    shutil.copy(ROOT / "Pulumi.yaml", repo)
    source = repo / "Pulumi.l4.yaml"
    source.write_text(source.read_text() + f"  gemma4-vllm:modelRevision: {token}\n")
    code = main(["--from", "l4", "--to", "rtx6000", "--source-image", DIGEST,
                 "--project-dir", str(repo)])  # fmt: skip
    captured = capsys.readouterr()
    assert token not in captured.out + captured.err
    assert token[:12] not in captured.out + captured.err
    assert code in (0, 2)
    assert "[REDACTED]" in captured.out + captured.err
