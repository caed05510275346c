"""The planner refuses what the program refuses, with exit 2 and one message."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gemma4.plan_cli import main
from serving.capacity.plan import ROOT


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for name in ("Pulumi.yaml", "Pulumi.l4.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("  gemma4vllm:maxNumSeqs: 2\n", "did you mean 'gemma4-vllm:maxNumSeqs'?"),
        ("  gcp:projcet: p\n", "did you mean 'gcp:project'?"),
        ("  gemma4-vllm:maxNumSeq: 2\n", "did you mean 'maxNumSeqs'?"),
        ('  gemma4-vllm:servedModelName: "a b;c"\n', "'servedModelName'"),
    ],
)
def test_bad_keys_exit_2_with_one_message(
    root: Path, line: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = root / "Pulumi.l4.yaml"
    path.write_text(path.read_text() + line)
    assert main(["-s", "l4", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    read, error = err.split("\n", 1)
    assert read == f"gemma4 plan: reading {path}"  # which file, then the one message
    assert error.startswith("gemma4 plan: error: Pulumi.l4.yaml: ")


@pytest.mark.parametrize(
    "text", ["config: [\n", "config:\n  a: [1,\n", "- just\n- a list\n", "config: 3\n"]
)
def test_torn_stack_file_exits_2(root: Path, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "Pulumi.l4.yaml").write_text(text)
    assert main(["-s", "l4", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.split("\n", 1)[1].startswith("gemma4 plan: error: Pulumi.l4.yaml")
    assert "Traceback" not in err
