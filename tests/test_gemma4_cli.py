"""`gemma4`: one console entry point whose subcommands are the existing command lines."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gemma4 import cli
from gemma4.harness import ROOT


def test_the_console_script_is_declared_and_installed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["gemma4"] == "gemma4.cli:main"
    assert (Path(sys.executable).parent / "gemma4").exists()


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in cli.COMMANDS:
        assert command.name in out and command.legacy in out
    assert {c.name for c in cli.COMMANDS} >= {"preview", "plan", "health", "bench", "promote"}


@pytest.mark.parametrize(
    "argv",
    [[c.name, "--help"] for c in cli.COMMANDS]
    + [["bench", sub, "--help"] for sub in ("run", "compare", "gate")],
    ids=lambda argv: " ".join(argv),
)
def test_every_command_has_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ") and "--help" in out


def test_no_or_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "a command is required" in capsys.readouterr().err
    assert cli.main(["deploy"]) == 2
    assert "unknown command 'deploy'" in capsys.readouterr().err


def test_exit_statuses_pass_through(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plan", "-s", "l4", "--json"]) == 0
    assert cli.main(["plan", "-s", "nope"]) == 2
    assert cli.main(["bench", "gate"]) == 2  # argparse's usage error, returned not raised
    assert cli.main(["promote", "--from", "l4"]) == 2
    capsys.readouterr()


def test_every_command_delegates_to_a_main_and_its_python_m_form_still_runs() -> None:
    procs = []
    for command in cli.COMMANDS:
        assert callable(importlib.import_module(command.module).main)
        legacy = command.legacy.split()
        assert legacy[:2] == ["python", "-m"]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", *legacy[2:], "--help"],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for command, proc in zip(cli.COMMANDS, procs, strict=True):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, (command.legacy, err)
        assert out.startswith("usage: ")
