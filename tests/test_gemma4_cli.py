"""`gemma4`: one console entry point whose subcommands are the existing command lines."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gemma4 import cli
from preview.harness import ROOT


def test_the_console_script_is_declared_and_installed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["gemma4"] == "gemma4._start:main"
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
    + [["bench", sub, "--help"] for sub in ("run", "compare", "gate")]
    + [["plan", sub, "--help"] for sub in ("search", "calibrate")],
    ids=lambda argv: " ".join(argv),
)
def test_every_command_has_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: gemma4 {' '.join(argv[:-1])} ") and "--help" in out


def walk(
    parser: argparse.ArgumentParser,
) -> list[tuple[argparse.ArgumentParser, argparse.Action]]:
    """Every action of a parser and of its subcommands' parsers, recursively."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share one parser
                found += walk(sub)
        else:
            found.append((parser, action))
    return found


def every_parser() -> list[argparse.ArgumentParser]:
    return [cli.build_parser(), *(cli.subcommand_parser(c) for c in cli.COMMANDS)]


def test_every_usage_names_gemma4_and_the_subcommand() -> None:
    for command in cli.COMMANDS:
        parser = cli.subcommand_parser(command)
        progs = {p.prog for p, _ in walk(parser)}
        assert all(prog.startswith(f"gemma4 {command.name}") for prog in progs), progs


def test_every_option_and_argument_has_help() -> None:
    missing = [
        f"{p.prog}: {'/'.join(a.option_strings) or a.dest}"
        for parser in every_parser()
        for p, a in walk(parser)
        if not a.help  # argparse.SUPPRESS (a hidden old name) is help too: deliberately hidden
    ]
    assert missing == []


def test_old_project_dir_names_are_aliases_not_shown(capsys: pytest.CaptureFixture[str]) -> None:
    for parser in every_parser():
        for p, action in walk(parser):
            if "--root" in action.option_strings or "--cwd" in action.option_strings:
                assert action.help == argparse.SUPPRESS and action.dest == "project_dir", p.prog
                assert any("--project-dir" in a.option_strings for _, a in walk(p)), p.prog


@pytest.mark.parametrize(
    ("argv", "prefix"),
    [
        (["plan", "--bogus"], "gemma4 plan: error:"),
        (["health", "--bogus"], "gemma4 health: error:"),
        (["bench", "gate"], "gemma4 bench gate: error:"),
        (["bench", "run", "--concurrency", "0"], "gemma4 bench run: error:"),
        (["promote", "--from", "l4"], "gemma4 promote: error:"),
        (["mcp", "--port", "0"], "gemma4 mcp: error:"),
        (["preview"], "gemma4 preview: error:"),
        (["plan", "-s", "nope"], "gemma4 plan: error:"),
        (["preview", "-s", "nope"], "gemma4 preview: error:"),
    ],
)
def test_errors_name_gemma4_and_the_subcommand(
    argv: list[str], prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert prefix in err and "python -m" not in err


def test_version_is_the_installed_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"gemma4 {version('gemma4-vllm-gcp')}\n"
    assert version("gemma4-vllm-gcp") == project["version"]
    result = subprocess.run(
        [str(Path(sys.executable).parent / "gemma4"), "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and result.stdout == f"gemma4 {project['version']}\n"


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
        assert out.startswith(f"usage: gemma4 {command.name} ")


@pytest.mark.parametrize("command", ["preview", "plan", "promote", "bench"])
def test_ctrl_c_in_any_command_is_one_line_and_exit_130(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*_: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run", interrupted)
    assert cli.main([command]) == 130
    err = capsys.readouterr().err
    assert err.strip() == f"gemma4 {command}: interrupted", err


def test_ctrl_c_during_the_preflight_leaves_no_traceback(tmp_path: Path) -> None:
    import os
    import signal
    import socket

    silent = socket.socket()  # accepts connections (the backlog), never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    argv = ["bench", "run", "--url", url, "--model", "m", "--auth", "none", "--hardware", "l4"]
    process = subprocess.Popen(
        [sys.executable, "-m", "gemma4", *argv, "--out", str(tmp_path / "r"), "--no-progress"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        # As in a terminal's foreground job, whatever ran this suite: a background job
        # (`scripts/check &`) starts with SIGINT ignored, and the child would inherit that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    connection: socket.socket | None = None
    try:
        # The preflight has connected and waits for an answer that never comes.
        silent.settimeout(60)
        connection, _ = silent.accept()
        assert process.poll() is None
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        if connection is not None:
            connection.close()
        silent.close()
    assert process.returncode in (1, 130), out + err
    assert "Traceback" not in err and "Session is closed" not in err, err
    assert "interrupted" in out + err, out + err
