"""`-s STACK` finds the stack file the way `pulumi -s` does (serving/config/project.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.config import project


def make(root: Path, project_file: str = "Pulumi.yaml", *stacks: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / project_file).write_text("name: gemma4-vllm\nruntime: python\n")
    suffix = Path(project_file).suffix
    for stack in stacks:
        (root / f"Pulumi.{stack}{suffix}").write_text("config: {}\n")
    return root


def test_the_current_directory_then_the_nearest_parent(tmp_path: Path) -> None:
    outer = make(tmp_path / "outer", "Pulumi.yaml", "dev")
    inner = make(outer / "svc" / "inner", "Pulumi.yaml", "dev")
    deep = inner / "a" / "b"
    deep.mkdir(parents=True)
    assert project.stack_file("dev", start=deep) == inner / "Pulumi.dev.yaml"
    assert project.stack_file("dev", start=outer / "svc") == outer / "Pulumi.dev.yaml"


def test_pulumi_yml_reads_the_yml_stack_files(tmp_path: Path) -> None:
    root = make(tmp_path / "p", "Pulumi.yml", "dev")
    (root / "Pulumi.dev.yaml").write_text("config: {}\n")  # not the one pulumi reads here
    assert project.stack_file("dev", start=root) == root / "Pulumi.dev.yml"
    assert project.stack_names(root) == ["dev"]


def test_project_dir_is_taken_as_given(tmp_path: Path) -> None:
    root = make(tmp_path / "given", "Pulumi.yaml", "dev")
    assert project.stack_file("dev", root, start=tmp_path) == root / "Pulumi.dev.yaml"
    with pytest.raises(project.ProjectError, match=r"no Pulumi\.prod\.yaml in .*stacks there: dev"):
        project.stack_file("prod", root)


@pytest.mark.parametrize("name", ["", "../l4", "a/b", ".hidden", "a\\b", "x\0y"])
def test_a_stack_name_that_is_a_path_is_refused(tmp_path: Path, name: str) -> None:
    """Refused as every command refuses a name that is no stack's, naming the option."""
    make(tmp_path, "Pulumi.yaml", "dev")
    said = "the stack name is empty" if not name else "cannot become resource names"
    with pytest.raises(project.ProjectError, match=f"^-s: .*{said}"):
        project.stack_file(name, tmp_path)


def test_no_project_anywhere_up_is_refused_naming_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(project.ProjectError, match=r"no Pulumi project \(Pulumi.yaml\) in "):
        project.stack_file("dev", start=tmp_path)


@pytest.mark.parametrize(
    "text", ["name: x\nstackConfigDir: stacks\n", "name: x\nconfig: stacks\n", "a: [\n"]
)
def test_a_project_file_it_cannot_follow_is_refused_by_name(tmp_path: Path, text: str) -> None:
    (tmp_path / "Pulumi.yaml").write_text(text)
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    with pytest.raises(project.ProjectError, match=r"stackConfigDir|'config'|not a readable"):
        project.stack_file("dev", start=tmp_path)


def test_an_oversized_project_file_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: x\n# " + "x" * project.MAX_PROJECT_FILE_BYTES)
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    with pytest.raises(project.ProjectError, match="larger than"):
        project.stack_file("dev", start=tmp_path)


def test_a_project_level_config_schema_is_fine(tmp_path: Path) -> None:
    text = "name: gemma4-vllm\nconfig:\n  key:\n    type: string\n"
    (tmp_path / "Pulumi.yaml").write_text(text)
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    assert project.stack_file("dev", start=tmp_path) == tmp_path / "Pulumi.dev.yaml"


@pytest.mark.parametrize("name", ["webapp", "", "x" * 100_000, None])
@pytest.mark.parametrize("command", ["preview", "plan", "promote", "bench", "mcp"])
def test_another_pulumi_project_is_named_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str | None,
    command: str,
) -> None:
    """Inside another program's Pulumi project, every command says so in one line (not the
    keys this program would miss in its stack file)."""
    from gemma4.cli import main
    from tests.bench._cells import cell, write_run

    header = "" if name is None else f"name: {name!r}\n"
    (tmp_path / "Pulumi.yaml").write_text(header + "runtime: python\n")
    (tmp_path / "Pulumi.dev.yaml").write_text("config:\n  webapp:replicas: 3\n")
    write_run(tmp_path / "run", [cell(1, 512)], label="r", hardware="l4")
    monkeypatch.chdir(tmp_path)
    argv = {
        "preview": ["preview", "-s", "dev"],
        "plan": ["plan", "-s", "dev"],
        "promote": ["promote", "--from", "dev", "--to", "prod"],
        "bench": ["bench", "gate", str(tmp_path / "run"), "-s", "dev"],
        "mcp": ["mcp"],
    }[command]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "is the Pulumi project" in lines[-1] and "not gemma4-vllm" in lines[-1]
    assert len(lines[-1]) < 600
    assert not any("config key" in line for line in lines)


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ("maxModelLen:\n    type: integer\n    default: 131072\n", "maxModelLen"),
        ("gemma4-vllm:maxModelLen:\n    value: 131072\n", "gemma4-vllm:maxModelLen"),
        ("gemma4-vllm:hfToken: hf_aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xYzC\n", "gemma4-vllm:hfToken"),
        ("gcp:project: my-project\n", "gcp:project"),
        ("labels:\n    type: array\n    items: {type: string}\n    default: [a=b]\n", "labels"),
        ("k:\n    type: string\n    unknownField: 1\n", "k"),
    ],
)
def test_a_project_file_that_sets_config_values_is_refused(
    tmp_path: Path, entry: str, named: str
) -> None:
    # Pulumi applies a project-level value (a plain value, `value:` or `default:`) to every
    # stack that does not set the key; a reader of the stack file alone would miss it.
    (tmp_path / "Pulumi.yaml").write_text(f"name: gemma4-vllm\nconfig:\n  {entry}")
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    with pytest.raises(project.ProjectError, match=f"config key '{named}'") as info:
        project.stack_file("dev", start=tmp_path)
    assert "hf_aB3" not in str(info.value)


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_project_file_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    import os

    path = tmp_path / "Pulumi.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    with pytest.raises(project.ProjectError, match="not a regular file"):
        project.stack_file("dev", tmp_path)
    with pytest.raises(project.ProjectError, match="not a regular file"):
        project.stack_file("dev", start=tmp_path)


@pytest.mark.parametrize(
    "command",
    [["preview", "-s", "dev"], ["plan", "-s", "dev"], ["promote", "--from", "a", "--to", "b"]],
)
def test_every_command_refuses_a_fifo_project_file_with_exit_2(
    tmp_path: Path, command: list[str]
) -> None:
    import os
    import subprocess
    import sys

    os.mkfifo(tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    done = subprocess.run(
        [sys.executable, "-m", "gemma4", *command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert done.returncode == 2, done.stderr
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr
