"""Promotion under attack: a refused promotion changes no byte; an accepted one only values."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from gemma4.promote_cli import main
from preview.build import promotion_check as check_stack
from serving.promotion import (
    PromotionError,
    Validator,
    prepare_changes,
    stack_path,
    write_atomically,
)
from tests.pulumi_harness import ROOT

DIGEST = "vllm/vllm-openai@sha256:" + "a" * 64
OTHER = "vllm/vllm-openai@sha256:" + "b" * 64
NIGHTLY = "vllm/vllm-openai:nightly"
GHCR = "ghcr.io/x/vllm-openai@sha256:" + "a" * 64


def write_changes(
    stack: str,
    changes: Mapping[str, str],
    root: Path,
    validator: Validator | None = None,
) -> None:
    """What `gemma4 promote --write` does: edit `Pulumi.<stack>.yaml` in place once the complete
    result is valid; otherwise PromotionError and the file unchanged."""
    before, after = prepare_changes(stack, changes, root, validator)
    write_atomically(stack_path(stack, root), after, expected=before)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for name in ("Pulumi.yaml", "Pulumi.l4.yaml", "Pulumi.rtx6000.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def digest_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def never_called(project: str, stack: str, config: Mapping[str, Any]) -> list[str]:
    raise AssertionError("refused before validation")


@pytest.mark.parametrize(
    "image",
    [
        "vllm/vllm-openai:v0.28.0",  # a tag, even a pinned one
        "vllm/vllm-openai:latest",
        "vllm/vllm-openai@sha256:" + "a" * 63,
        "vllm/vllm-openai@sha256:" + "A" * 64,
        "vllm/vllm-openai@sha512:" + "a" * 128,
        "vllm/vllm-openai@sha256:" + "a" * 64 + "\n",
        "vllm/vllm-openai@sha256:" + "a" * 64 + "\ngemma4-vllm:public: true",
        "vllm/vllm-openai@sha256:" + "a" * 64 + " # x",
        "ghcr.io/evil/vllm-openai@sha256:" + "a" * 64,  # a registry the stack does not allow
        "docker.io.evil.com/vllm/vllm-openai@sha256:" + "a" * 64,
    ],
)
def test_refused_images_change_no_byte(repo: Path, image: str) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    before = digest_of(path)
    with pytest.raises((PromotionError, ValueError)):
        write_changes("rtx6000", {"image": image}, repo, never_called)
    assert digest_of(path) == before
    assert sorted(p.name for p in repo.iterdir()) == sorted(
        ["Pulumi.yaml", "Pulumi.l4.yaml", "Pulumi.rtx6000.yaml"]
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--from", "l4", "--to", "rtx6000", "--source-image", NIGHTLY, "--write"],
        ["--from", "l4", "--to", "rtx6000", "--source-image", GHCR, "--write"],
        ["--from", "l4", "--to", "../etc/passwd", "--write"],
        ["--from", "l4", "--to", "nope"],
        ["--from", "l4", "--to", "rtx6000", "--source-image", "a\nb"],
    ],
)  # fmt: skip
def test_cli_refusals_exit_2_with_one_message(
    repo: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = digest_of(repo / "Pulumi.rtx6000.yaml")
    assert main([*argv, "--root", str(repo)], validator=never_called) == 2
    err = capsys.readouterr().err
    assert err.startswith("gemma4 promote: error: ") and "Traceback" not in err
    assert digest_of(repo / "Pulumi.rtx6000.yaml") == before


def test_registry_the_stack_allows_is_accepted(repo: Path) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    path.write_text(path.read_text() + "  gemma4-vllm:registries: [docker.io, ghcr.io]\n")
    image = "ghcr.io/acme/vllm-openai@sha256:" + "c" * 64
    write_changes("rtx6000", {"image": image}, repo, lambda *a: [])
    assert f"gemma4-vllm:image: {image}\n" in path.read_text()


LAYOUT = """\
# A hand-kept stack file: 4-space indentation, anchors, quoted keys, inline comments.
config:
    "gemma4-vllm:hardware": rtx-pro-6000   # the GPU
    'gemma4-vllm:image': &img "vllm/vllm-openai:v0.27.1"  # pinned; promotion swaps it
    gemma4-vllm:region: &region us-central1
    gemma4-vllm:labels:
        - app=gemma4-vllm   # app
        - hardware=rtx-pro-6000
    gemma4-vllm:model: google/gemma-4-12B-it-qat-w4a16-ct
    gemma4-vllm:modelRevision: 'main'    # revision
    gemma4-vllm:maxModelLen: 32768
    gemma4-vllm:cpu: 20
    gemma4-vllm:memoryGib: 80
    gemma4-vllm:mirrorImage: false
    pulumi:tags:
        region: *region
# the environment block comes after config
environment:
    - gemma4/shared
"""


def test_layout_is_kept_exactly(repo: Path) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    path.write_text(LAYOUT)
    write_changes("rtx6000", {"image": DIGEST, "modelRevision": "0123abcd"}, repo, lambda *a: [])
    expected = LAYOUT.replace('"vllm/vllm-openai:v0.27.1"', f'"{DIGEST}"').replace(
        "'main'", "'0123abcd'"
    )
    assert path.read_text() == expected


def test_new_key_is_appended_to_config_not_elsewhere(repo: Path) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    path.write_text(LAYOUT)
    write_changes("rtx6000", {"reasoningParser": "none"}, repo, lambda *a: [])
    text = path.read_text()
    assert text.startswith(LAYOUT.split("# the environment block")[0].rstrip("\n"))
    assert "gemma4-vllm:reasoningParser: none" in text
    assert text.index("reasoningParser") < text.index("environment:")


def test_layout_the_editor_cannot_reproduce_is_refused(repo: Path) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    odd = LAYOUT.replace("gemma4-vllm:region: &region", "gemma4-vllm:region:     &region")
    assert odd != LAYOUT
    path.write_text(odd)
    with pytest.raises(PromotionError, match="by hand"):
        write_changes("rtx6000", {"image": DIGEST}, repo, lambda *a: [])
    assert path.read_text() == odd


def test_program_and_mandatory_policies_judge_the_result(repo: Path) -> None:
    """The real validator: the preview's program render, mandatory policies and plan."""
    path = repo / "Pulumi.rtx6000.yaml"
    write_changes("rtx6000", {"image": DIGEST}, repo, check_stack)
    assert f"gemma4-vllm:image: {DIGEST}\n" in path.read_text()
    # A stack that the policies refuse (a public endpoint) refuses any promotion into it.
    path.write_text(path.read_text() + "  gemma4-vllm:public: true\n")
    before = digest_of(path)
    with pytest.raises(PromotionError, match="no-public-invoker"):
        write_changes("rtx6000", {"image": OTHER}, repo, check_stack)
    assert digest_of(path) == before


def test_a_second_writer_during_validation_wins_and_nothing_is_overwritten(repo: Path) -> None:
    path = repo / "Pulumi.rtx6000.yaml"

    def meddling(project: str, stack: str, config: Mapping[str, Any]) -> list[str]:
        path.write_text(path.read_text() + "# someone else\n")
        return []

    with pytest.raises(PromotionError, match="changed while"):
        write_changes("rtx6000", {"image": DIGEST}, repo, meddling)
    assert path.read_text().endswith("# someone else\n")


def test_a_failed_write_leaves_the_file_and_no_temporary(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    before = digest_of(path)

    def broken(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError):
        write_changes("rtx6000", {"image": DIGEST}, repo, lambda *a: [])
    assert digest_of(path) == before
    assert not [p for p in repo.iterdir() if p.name.endswith(".tmp")]


def test_the_validator_refuses_what_the_preview_blocks() -> None:
    """A promoted config the preview would block (a bf16 checkpoint on an L4: the QAT policy
    and the memory plan both refuse it) is refused with both reasons; the shipped one passes."""
    from preview.harness import PROJECT, ROOT

    config = yaml.safe_load((ROOT / "Pulumi.l4.yaml").read_text())["config"]
    assert check_stack(PROJECT, "l4", config) == []
    config[f"{PROJECT}:model"] = "google/gemma-4-12B-it"
    problems = check_stack(PROJECT, "l4", config)
    assert any(p.startswith("[l4-qat-checkpoint]") for p in problems), problems
    assert any("does not fit" in p for p in problems), problems
    assert check_stack("other-project", "l4", config)[0].startswith("the stack config is for")


RTX_IMAGE = "  gemma4-vllm:image: vllm/vllm-openai:v0.27.1\n"


@pytest.mark.parametrize(
    "edit",
    [
        # The promoted value is the anchor; another key is its alias.
        lambda t: (
            t.replace(RTX_IMAGE, RTX_IMAGE.replace(": ", ": &img ", 1))
            + "  gemma4-vllm:servedModelName: *img\n"
        ),
        # The promoted value is the alias.
        lambda t: t.replace(
            RTX_IMAGE,
            "  gemma4-vllm:servedModelName: &img vllm/vllm-openai:v0.27.1\n"
            "  gemma4-vllm:image: *img\n",
        ),
    ],
    ids=["anchor-promoted", "alias-promoted"],
)
def test_a_promoted_value_that_is_an_anchor_or_alias_is_refused(
    repo: Path, edit: Callable[[str], str]
) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    path.write_text(edit(path.read_text()))
    before = digest_of(path)
    with pytest.raises(PromotionError, match=r"(?i)break the alias by hand") as caught:
        write_changes("rtx6000", {"image": DIGEST}, repo, never_called)
    assert "gemma4-vllm:image is the YAML anchor or alias &img" in str(caught.value)
    assert digest_of(path) == before


@pytest.mark.parametrize(
    "ending",
    [
        LAYOUT.replace("\n", "\r\n"),  # CRLF throughout
        LAYOUT.replace("\n", "\r\n", 3),  # CRLF, then LF
        LAYOUT.replace("\n", "\r\n").replace("\r\nenvironment", "\renvironment"),  # a bare CR
    ],
)
def test_cr_line_endings_are_refused(repo: Path, ending: str) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    path.write_bytes(ending.encode())
    before = digest_of(path)
    with pytest.raises(PromotionError, match="cannot be reproduced"):
        write_changes("rtx6000", {"image": DIGEST}, repo, never_called)
    assert digest_of(path) == before


def test_a_symlinked_stack_file_is_refused_and_stays_a_link(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    elsewhere = repo / "shared"
    elsewhere.mkdir()
    target = elsewhere / "rtx6000.yaml"
    path.replace(target)
    path.symlink_to(target)
    before = digest_of(target)
    with pytest.raises(PromotionError, match="symbolic link"):
        write_changes("rtx6000", {"image": DIGEST}, repo, never_called)
    argv = ["--from", "l4", "--to", "rtx6000", "--source-image", DIGEST, "--root", str(repo)]
    for mode in ([], ["--write"]):
        assert main([*argv, *mode], validator=never_called) == 2
        assert "symbolic link" in capsys.readouterr().err
    assert path.is_symlink() and path.readlink() == target
    assert digest_of(target) == before


def test_a_link_swapped_in_during_validation_is_not_replaced(repo: Path) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    same = repo / "copy.yaml"

    def swapping(project: str, stack: str, config: Mapping[str, Any]) -> list[str]:
        shutil.copy(path, same)
        path.unlink()
        path.symlink_to(same)
        return []

    with pytest.raises(PromotionError, match="symbolic link"):
        write_changes("rtx6000", {"image": DIGEST}, repo, swapping)
    assert path.is_symlink()
    assert not [p for p in repo.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    "edit",
    [
        # A key in a namespace nothing reads: the program refuses it.
        lambda t: t + "  gemma4vllm:maxNumSeqs: 4\n",
        lambda t: (
            t.replace(RTX_IMAGE, RTX_IMAGE.replace(": ", ": &img ", 1))
            + "  gemma4-vllm:servedModelName: *img\n"
        ),
        lambda t: t.replace("\n", "\r\n", 2),
        lambda t: t + "  gemma4-vllm:public: true\n",
    ],
    ids=["unread-namespace", "alias", "mixed-line-endings", "policy"],
)
def test_the_dry_run_refuses_what_write_refuses_with_the_same_message(
    repo: Path, edit: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    path.write_bytes(edit(path.read_text()).encode())
    before = digest_of(path)
    argv = ["--from", "l4", "--to", "rtx6000", "--source-image", DIGEST, "--root", str(repo)]
    assert main(argv, validator=check_stack) == 2
    dry = capsys.readouterr().err
    assert main([*argv, "--write"], validator=check_stack) == 2
    assert capsys.readouterr().err == dry
    assert dry.startswith("gemma4 promote: error: ") and "Traceback" not in dry
    assert digest_of(path) == before


def test_a_dry_run_that_passes_writes_nothing_and_write_then_succeeds(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = repo / "Pulumi.rtx6000.yaml"
    before = digest_of(path)
    argv = ["--from", "l4", "--to", "rtx6000", "--source-image", DIGEST, "--root", str(repo)]
    assert main(argv, validator=check_stack) == 0
    assert "run again with --write" in capsys.readouterr().out
    assert digest_of(path) == before
    assert main([*argv, "--write"], validator=check_stack) == 0
    assert f"gemma4-vllm:image: {DIGEST}\n" in path.read_text()
