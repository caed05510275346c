"""Run from another Pulumi project's directory (a subfolder of it), every command that takes
`-s` reads that project's stack files, as `pulumi -s` does, and says which it read."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.pulumi_harness import ROOT


@pytest.fixture
def other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Another project with its own l4 stack (a different context length), entered from below."""
    project = tmp_path / "elsewhere"
    (project / "sub" / "deeper").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    text = (ROOT / "Pulumi.l4.yaml").read_text()
    assert "maxModelLen: 32768" in text
    (project / "Pulumi.l4.yaml").write_text(text.replace("maxModelLen: 32768", "maxModelLen: 8192"))
    monkeypatch.chdir(project / "sub" / "deeper")
    return project.resolve()


def _failing_pulumi(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `pulumi` that records where it ran and fails as a missing stack would."""
    log = folder / "pulumi-cwd.txt"
    script = folder / "pulumi"
    script.write_text(f'#!/bin/sh\npwd > {log}\necho "no stack named $6" >&2\nexit 255\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


def test_promote_reads_and_names_that_projects_files(
    other: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemma4.promote_cli import main

    shutil.copy(other / "Pulumi.l4.yaml", other / "Pulumi.l4b.yaml")
    assert main(["--from", "l4", "--to", "l4b"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"stack files: {other / 'Pulumi.l4.yaml'} -> {other / 'Pulumi.l4b.yaml'}"


def test_promote_outside_any_project_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemma4.promote_cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["--from", "l4", "--to", "rtx6000", "--write"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gemma4 promote: error: no Pulumi project (Pulumi.yaml) in ")


def test_plan_search_reads_that_projects_stacks(
    other: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemma4.search_cli import search_main

    assert search_main(["--rate", "1", "--ttft-p95-ms", "60000", "--json"]) == 0
    captured = capsys.readouterr()
    first = captured.err.splitlines()[0]
    assert first == f"gemma4 plan search: starting from Pulumi.l4.yaml in {other}"
    answers = json.loads(captured.out)["answers"]
    # Every answer starts from that project's one stack file (Cloud Run, the only platform it
    # has a stack of); nothing of this checkout's other stacks.
    assert answers and {a["template"] for a in answers} == {"l4"}
    assert {a["platform"] for a in answers} == {"cloud-run"}


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("gemma4 health", ["-s", "l4"]),
        ("gemma4 bench run", ["run", "-s", "l4", "--out", "runs-here"]),
    ],
)
def test_health_and_bench_run_read_outputs_in_that_project(
    other: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    argv: list[str],
) -> None:
    from bench.cli import main as bench_main
    from healthchecks.cli import main as health_main

    log = _failing_pulumi(tmp_path, monkeypatch)
    main = health_main if command == "gemma4 health" else bench_main
    assert main(argv) == 2
    err = capsys.readouterr().err
    said = f"{command}: reading stack l4's outputs with `pulumi stack output` in {other}\n"
    assert err.startswith(said)
    assert "no stack named l4" in err
    # pulumi ran where the user stood and found the project upward, as it does by itself.
    assert Path(log.read_text().strip()) == other / "sub" / "deeper"


def test_mcp_names_the_project_it_serves(other: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_server.cli import main

    (other / "Pulumi.l4.yaml").unlink()  # a project without stacks: the server does not start
    assert main(["--transport", "stdio"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"gemma4 mcp: reading stack files in {other} (none)",
        f"gemma4 mcp: error: no Pulumi.<stack>.yaml in {other}; pass --project-dir",
    ]
