"""Stack files read as the Pulumi CLI reads them, within bounds, by every command.

The oracle is the CLI's source: `sdk/go/common/workspace/loaders.go` (LoadProjectStackBytes:
yaml.v3 into untyped values, bare keys namespaced under the project), `sdk/go/common/resource/
config/object.go` (MarshalString: a config value handed over as text, numbers as Go's JSON
encoding) and gopkg.in/yaml.v3's `resolve.go` (plain scalars: ParseInt base 0, so `0100000` is
octal; underscores dropped; `yes` is a string) and `decode.go` (duplicate keys refused).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gemma4 import plan_cli as plan
from gemma4 import preview as pv
from gemma4 import promote_cli as promotion
from preview.harness import ROOT
from serving.config.stack_yaml import (
    MAX_BYTES,
    MAX_DEPTH,
    Secure,
    StackYamlError,
    config_of,
    load_document,
)


def _config(text: str) -> dict[str, object]:
    return config_of(load_document(text.encode()), "gemma4-vllm")


@pytest.mark.parametrize(
    ("written", "handed_over"),
    [
        ("0100000", "32768"),  # ParseInt(s, 0, 64): a leading 0 is octal in Go
        ("0o17", "15"),
        ("0x10", "16"),
        ("0b101", "5"),
        ("1_000", "1000"),
        ("08", "8"),  # not octal: yaml.v3 falls through to ParseFloat
        ("1e3", "1000"),
        ("0.950", "0.95"),
        ("1e21", "1e+21"),
        ("0.0000001", "1e-7"),
        ("'0100000'", "0100000"),
        ("!!str 0100000", "0100000"),
        ("yes", "yes"),  # YAML 1.1's booleans are strings to yaml.v3
        ("on", "on"),
        ("True", "true"),
        ("FALSE", "false"),
        ("9223372036854775808", "9223372036854775808"),  # ParseUint
        ("1" * 401, "1" * 401),  # beyond float64: left as text (the settings bound it)
        ("1e400", "1e400"),
    ],
)
def test_config_scalars_are_the_text_the_cli_hands_over(written: str, handed_over: str) -> None:
    assert _config(f"config:\n  gemma4-vllm:maxModelLen: {written}\n") == {
        "gemma4-vllm:maxModelLen": handed_over
    }


def test_bare_keys_lists_anchors_and_secure_values() -> None:
    config = _config(
        "config:\n  maxNumSeqs: 8\n  gemma4-vllm:labels: &l [a=b, c=d]\n"
        "  gemma4-vllm:invokers: *l\n  gcp:accessToken:\n    secure: v1:c2VjcmV0\n"
    )
    assert config["gemma4-vllm:maxNumSeqs"] == "8"
    assert config["gemma4-vllm:labels"] == config["gemma4-vllm:invokers"] == ["a=b", "c=d"]
    secret = config["gcp:accessToken"]
    assert isinstance(secret, Secure) and "c2VjcmV0" not in f"{secret} {secret!r}"


def _alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    return "config:\n  gemma4-vllm:x: 1\n" + "\n".join(lines) + "\n"


BAD = {
    "duplicate key": (
        "config:\n  gemma4-vllm:maxNumSeqs: 8\n  gemma4-vllm:maxNumSeqs: 16\n",
        "mapping key 'gemma4-vllm:maxNumSeqs' already defined at line 2",
    ),
    "duplicate top key": ("config: {}\nconfig: {}\n", "already defined"),
    "alias bomb": (_alias_bomb(), "aliases are expanded"),
    "alias chain": (
        "config: {}\na0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 60)),
        "once aliases are expanded",
    ),
    "deep block nesting": (
        "".join(f"{' ' * i}k{i}:\n" for i in range(200)) + " " * 200 + "v\n",
        f"nested more than {MAX_DEPTH} levels",
    ),
    "deep flow nesting": ("config: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than"),
    "deep flow mapping": ("config: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", "nested more than"),
    "huge file": ("config:\n  gemma4-vllm:x: " + "a" * (MAX_BYTES + 10) + "\n", "larger than"),
    "two documents": ("config: {}\n---\nconfig: {}\n", "second YAML document"),
    "custom tag": ("config:\n  gemma4-vllm:maxNumSeqs: !int 8\n", "YAML tag !int"),
    "python tag": ("config:\n  gemma4-vllm:x: !!python/object:os.system ls\n", "YAML tag"),
    "merge key": ("base: &b {gemma4-vllm:maxNumSeqs: 8}\nconfig:\n  <<: *b\n", "merge keys"),
    "timestamp": ("config:\n  gemma4-vllm:modelRevision: 2024-01-31\n", "timestamp"),
    "infinity": ("config:\n  gemma4-vllm:sloP95TtftMs: .inf\n", "cannot encode"),
    "nan in a list": ("config:\n  gemma4-vllm:benchmarkConcurrency: [1, .nan]\n", "cannot encode"),
    "null value": ("config:\n  gemma4-vllm:maxNumSeqs:\n", "has no value"),
    "not utf-8": ("config:\n  gemma4-vllm:x: \udcff\n", "not UTF-8"),
    "invalid yaml": ("config: [unclosed\n", "not valid YAML"),
    "non-specific tag": ("config:\n  gemma4-vllm:maxModelLen: ! 0100000\n", "YAML tag !"),
    "tag directive": ("%TAG !! tag:example.com:\n---\nconfig:\n  x: !!str 1\n", "YAML tag"),
    "keys equal once read": ("config:\n  gemma4-vllm:l:\n    1: a\n    01: b\n", "again once read"),
    "alias as a repeated key": ("config:\n  &k a: 1\n  *k : 2\n", "already defined"),
    "recursive alias": ("config:\n  x: &a [1, *a]\n", "once aliases are expanded"),
    "complex key": ("config:\n  ? [a, b]\n  : 1\n", "must be a plain value"),
    "NUL byte": ("config:\n  gemma4-vllm:x: a\x00b\n", "line 2: the control character U.0000"),
    "control character": (
        'config:\n  x: 1\n  y: "a\x01"\n',
        "line 3: the control character U.0001",
    ),
    "DEL in a key": ("config:\n  x\x7f: 1\n", "character U.007F"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files_are_refused_by_the_reader(case: str) -> None:
    text, expected = BAD[case]
    with pytest.raises(StackYamlError, match=expected.replace("(", r"\(")):
        config_of(load_document(text.encode("utf-8", "surrogateescape")), "gemma4-vllm")


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"Pulumi.{name}.yaml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A project folder (Pulumi.yaml and the shipped stacks) for plan and promote."""
    for name in ("Pulumi.yaml", "Pulumi.l4.yaml", "Pulumi.rtx6000.yaml", "__main__.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def _one_line(code: int, err: str, expected: str) -> None:
    assert code == 2, err
    assert expected in err, err
    assert "Traceback" not in err and "RecursionError" not in err and "MemoryError" not in err


@pytest.mark.parametrize(
    "case",
    [
        "duplicate key",
        "alias bomb",
        "deep flow nesting",
        "huge file",
        "two documents",
        "merge key",
        "timestamp",
        "infinity",
    ],
)
def test_every_command_refuses_with_exit_2(
    case: str, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = BAD[case]
    base = (ROOT / "Pulumi.rtx6000.yaml").read_text()
    if case in ("duplicate key", "infinity", "timestamp"):
        text = base + "".join(text.splitlines(keepends=True)[1:])
        expected = expected.split(" at line")[0]
    _write(root, "bad", text)
    code = pv.main(["--stack-file", str(root / "Pulumi.bad.yaml")])
    _one_line(code, capsys.readouterr().err, expected)
    code = plan.main(["-s", "bad", "--root", str(root)])
    _one_line(code, capsys.readouterr().err, expected)
    code = promotion.main(["--from", "l4", "--to", "bad", "--root", str(root)])
    _one_line(code, capsys.readouterr().err, expected)
    code = promotion.main(["--from", "bad", "--to", "rtx6000", "--root", str(root)])
    _one_line(code, capsys.readouterr().err, expected)


def test_a_fifo_is_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "Pulumi.fifo.yaml"
    os.mkfifo(fifo)
    code = pv.main(["--stack-file", str(fifo)])
    _one_line(code, capsys.readouterr().err, "not a regular file")
    code = plan.main(["--stack-file", str(fifo)])
    _one_line(code, capsys.readouterr().err, "not a regular file")
    zero = tmp_path / "Pulumi.zero.yaml"
    zero.symlink_to("/dev/zero")
    for main in (pv.main, plan.main):
        _one_line(main(["--stack-file", str(zero)]), capsys.readouterr().err, "not a regular file")


def test_octal_looking_value_reaches_the_program_as_the_cli_hands_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        (ROOT / "Pulumi.l4.yaml").read_text().replace("maxModelLen: 32768", "maxModelLen: 0100000")
    )
    code = pv.main(["--stack-file", str(_write(tmp_path, "oct", text)), "--json"])
    out = capsys.readouterr().out
    assert code == 0
    assert '"--max-model-len=32768"' in out or "--max-model-len 32768" in out


@pytest.mark.parametrize(
    ("key", "entry"),
    [
        ("gcp:project", "  gcp:project:\n    secure: v1:c2VjcmV0LXNh\n"),
        ("gcp:region", "  gcp:region:\n    secure: v1:c2VjcmV0LXNh\n"),
        ("gcp:zone", "  gcp:zone:\n    secure: v1:c2VjcmV0LXNh\n"),
        (
            "gemma4-vllm:healthCheckServiceAccount",
            "  gemma4-vllm:healthCheckServiceAccount:\n    secure: v1:c2VjcmV0LXNh\n",
        ),
        (
            "gemma4-vllm:invokers",
            "  gemma4-vllm:invokers:\n    - user:a@example.com\n    - secure: v1:c2VjcmV0LXNh\n",
        ),
        (
            "gemma4-vllm:monitoringNotificationChannels",
            "  gemma4-vllm:monitoringNotificationChannels:\n    - secure: v1:c2VjcmV0LXNh\n",
        ),
    ],
)
def test_a_secure_value_on_a_key_the_program_reads_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, entry: str
) -> None:
    """The Pulumi CLI decrypts `secure:` values with the stack's secrets provider before the
    program reads them; the offline preview cannot, so it names the key instead of handing the
    program a placeholder (which it then refused as, say, an invalid project id)."""
    text = (ROOT / "Pulumi.l4.yaml").read_text() + entry
    for argv in (["--json"], []):
        code = pv.main(["--stack-file", str(_write(tmp_path, "sec", text)), *argv])
        out, err = capsys.readouterr()
        _one_line(code, err, f"config key(s) {key} hold a secure: value")
        assert "the offline preview cannot" in err and "set them in plain text" in err
        assert f"pulumi config set {key} VALUE" in err
        assert len(err.strip().splitlines()) == 1 and out == ""
        assert "c2VjcmV0LXNh" not in out + err and "is not a Google Cloud project id" not in err


@pytest.mark.parametrize("key", ["gcp:accessToken", "gcp:credentials", "docker:registryAuth"])
def test_a_secure_credential_the_program_does_not_read_stays_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    text = (ROOT / "Pulumi.l4.yaml").read_text() + f"  {key}:\n    secure: v1:c2VjcmV0LXNh\n"
    code = pv.main(["--stack-file", str(_write(tmp_path, "cred", text))])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "c2VjcmV0LXNh" not in out + err


def test_secure_values_inside_lists_are_never_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / "Pulumi.l4.yaml").read_text() + (
        "  gcp:defaultLabels:\n    team:\n      secure: v1:aW5zaWRl\n"
    )
    code = pv.main(["--stack-file", str(_write(tmp_path, "nested", text)), "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 2) and "Traceback" not in err
    assert "aW5zaWRl" not in out + err


def test_plan_and_promote_refuse_a_secure_project_key(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        (ROOT / "Pulumi.rtx6000.yaml")
        .read_text()
        .replace("gemma4-vllm:maxNumSeqs: 8", "gemma4-vllm:maxNumSeqs:\n    secure: v1:OA==")
    )
    assert "secure: v1:OA==" in text
    _write(root, "sec", text)
    code = plan.main(["-s", "sec", "--root", str(root)])
    err = capsys.readouterr().err
    _one_line(code, err, "'maxNumSeqs' hold a secure: value")
    assert "v1:OA==" not in err
    code = promotion.main(["--from", "l4", "--to", "sec", "--root", str(root)])
    _one_line(code, capsys.readouterr().err, "secure")


def test_plan_bounds_the_project_file(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "Pulumi.yaml").write_text("name: &n [" + "[" * 3000 + "]" * 3000 + "]\n")
    code = plan.main(["-s", "l4", "--root", str(root)])
    _one_line(code, capsys.readouterr().err, "not a readable project file")
