"""Every input bounded: numbers, JSON files, policy thresholds and stack names, through the
real command-line entry points (exit 2, one message naming the field and what is allowed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gemma4 import plan_cli as plan
from gemma4 import preview as pv
from preview.harness import ROOT
from serving.config.checks import SettingsError
from serving.config.settings import load_settings
from serving.config.stack_config import MAX_STACK_NAME, stack_name_problem
from tests.test_stack_inputs import root  # noqa: F401  (fixture)


def _l4(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "hardware": "l4",
        "image": "vllm/vllm-openai:v0.27.1",
        "region": "us-east4",
        "model": "google/gemma-4-12B-it-qat-w4a16-ct",
        "maxModelLen": "32768",
        "kvCacheDtype": "fp8",
        "gpuMemoryUtilization": "0.95",
    }
    base.update(changes)
    return base


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("maxNumBatchedTokens", "1" + "0" * 400, "less than or equal to 1048576"),
        ("maxNumBatchedTokens", "1e+33", "valid integer"),
        ("maxModelLen", "2097152", "less than or equal to 1048576"),
        ("sloP95TtftMs", "Infinity", "finite number"),
        ("sloP95TtftMs", "1e308", "less than or equal to 3600000"),
        ("sloP95E2EMs", "-inf", "finite number"),
        ("sloP95E2EMs", "nan", "finite number"),
        ("sloMinRequestsPerSecond", "1e-320", "greater than or equal to 0.001"),
        ("gpuMemoryUtilization", "NaN", "finite number"),
        ("monitoringMaxKvCacheUsage", "Infinity", "finite number"),
        ("monitoringMaxWaitingRequests", "10000000", "less than or equal to 100000"),
        ("healthCheckDeadlineSeconds", "86400", "less than or equal to 7200"),
        ("benchmarkConcurrency", "[1, 100000]", "levels must be at least 1 and at most 4096"),
        ("benchmarkPromptTokens", "99999999", "less than or equal to 1048576"),
        ("cpu", "9", "accepts 4 to 8 vCPU"),
        ("cpu", "1000", "less than or equal to 64"),
        ("memoryGib", "33", "and 4 vCPU accepts 16 to 16 GiB"),
        ("benchmarkResultsDir", "/etc", "relative folder inside the project"),
        ("benchmarkResultsDir", "../outside", "relative folder inside the project"),
        ("benchmarkResultsDir", "~/x", "relative folder inside the project"),
        ("bucketLocation", "mars-north1", "allowed: us-east4, US"),
        ("region", "us-moon1", "allowed: us-east4"),
    ],
)
def test_absurd_numbers_paths_and_locations_are_refused(
    key: str, value: str, expected: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(_l4(**{key: value}))
    assert expected in str(caught.value) and key in str(caught.value)


def test_memory_per_vcpu_and_rtx_size() -> None:
    with pytest.raises(SettingsError, match="with nvidia-l4 and 4 vCPU accepts 16 to 16 GiB"):
        load_settings(_l4(cpu="4", memoryGib="32"))
    assert load_settings(_l4(cpu="8", memoryGib="32", bucketLocation="us")).memory_gib == 32
    rtx = _l4(hardware="rtx-pro-6000", region="us-central1", cpu="24")
    with pytest.raises(SettingsError, match="accepts 20 to 20 vCPU"):
        load_settings(rtx)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e-320", "0", "-1", "1e9", "x"])
def test_requests_per_second_is_bounded_in_plan_and_preview(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for main in (plan.main, pv.main):
        with pytest.raises(SystemExit) as exited:
            main(["-s", "l4", f"--requests-per-second={value}"])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert "-r/--requests-per-second/--rate must be a number from 0.001 to 100000" in err
        assert "Traceback" not in err


def _policy_file(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(content)
    return path


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"max-model-len-cap": {"maxModelLen": "big"}}', "'big' is not of type 'integer'"),
        ('{"max-model-len-cap": {"maxModelLenn": 1}}', "did you mean 'maxModelLen'"),
        ('{"gpu-memory-utilization-range": {"minimum": NaN}}', "NaN, which is not a JSON number"),
        ('{"gpu-memory-utilization-range": {"minimum": Infinity}}', "Infinity"),
        ('{"gpu-memory-utilization-range": {"minimum": 1e400}}', "beyond a finite double"),
        ("[" * 5000 + "]" * 5000, "nested more than 64 levels"),
        ('{"a": ' * 3000 + "1" + "}" * 3000, "nested more than 64 levels"),
        ('{"no-plaintext-secret": "advisory"}', "did you mean 'no-plaintext-secrets'"),
        ('{"no-plaintext-secrets": {"enforcementLevel": 3}}', "enforcementLevel must be a string"),
        ('{"no-plaintext-secrets": {"extraPaterns": []}}', "did you mean 'extraPatterns'"),
        ('{"no-plaintext-secrets": {"extraPatterns": "x"}}', "'x' is not of type 'array'"),
        ('{"no-plaintext-secrets": {"extraPatterns": [1]}}', "[0]: 1 is not of type"),
        ("{", "not valid JSON"),
    ],
)
def test_policy_config_is_typed_and_bounded(
    content: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = pv.main(["-s", "l4", "--policy-config", str(_policy_file(tmp_path, content))])
    err = capsys.readouterr().err
    assert code == 2, err
    # One message; a `-s` run first says which stack file it read (as pulumi names its stack).
    lines = [line for line in err.splitlines() if not line.startswith("gemma4 preview: reading")]
    assert expected in err and "Traceback" not in err and len(lines) == 1


def test_wrong_threshold_types_name_the_policy_and_the_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from policies.registry import BY_NAME

    numeric = [
        (name, key, spec["type"])
        for name, policy in BY_NAME.items()
        if policy.config_schema is not None
        for key, spec in policy.config_schema.properties.items()
        if spec.get("type") in ("number", "integer", "boolean")
    ]
    assert len(numeric) >= 5
    for name, key, kind in numeric[:6]:
        path = _policy_file(tmp_path, json.dumps({name: {key: "ten"}}))
        code = pv.main(["-s", "l4", "--policy-config", str(path)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"{name}.{key}: 'ten' is not of type '{kind}'" in err, err


def test_diff_against_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "base.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    code = pv.main(["-s", "l4", "--markdown", "--diff-against", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "nested more than 64 levels" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "stack", ["L4", "my_stack", "-x", "x-", "9lives", "a" * (MAX_STACK_NAME + 1), "a.b"]
)
def test_stack_names_that_cannot_name_resources(
    stack: str,
    root: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert stack_name_problem(stack) is not None
    (root / f"Pulumi.{stack}.yaml").write_text((ROOT / "Pulumi.l4.yaml").read_text())
    code = pv.main(["--stack-file", str(root / f"Pulumi.{stack}.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "cannot become resource names" in err
    assert plan.main([f"--stack={stack}", "--root", str(root)]) == 2
    meant = "-s: no stack 'L4'; did you mean 'l4'?"  # a slip -s gets answered in one line
    assert (meant if stack == "L4" else "cannot become resource names") in capsys.readouterr().err


def test_longest_allowed_stack_name_is_accepted() -> None:
    assert stack_name_problem("a" * MAX_STACK_NAME) is None
    assert len(f"gemma-{'a' * MAX_STACK_NAME}-vllm-service-1234567") < 50


def test_a_subprocess_run_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    bomb = tmp_path / "Pulumi.bomb.yaml"
    lines = ['config: {}\na0: &a0 ["l", "l", "l", "l", "l", "l", "l", "l", "l"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    bomb.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "gemma4", "preview", "--stack-file", str(bomb)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if ": reading " not in line]
    assert len(lines) == 1 and "aliases are expanded" in done.stderr


@pytest.mark.parametrize("value", ["1e308", "inf", "nan", "7201", "0"])
def test_health_deadlines_are_bounded(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from healthchecks.cli import main

    code = main(["--url", "http://127.0.0.1:9", f"--timeout-seconds={value}"])
    err = capsys.readouterr().err
    assert code == 2 and "at least 0.001 and at most 7200" in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"policies": 5}', "'policies' must be a list"),
        ('{"resources": "x"}', "'resources' must be a list"),
        ('{"plan": [], "cost": {}}', "'plan' must be a mapping"),
        ('{"vllm_command_line": [1]}', "'vllm_command_line' must be text"),
        ("[1]", "not a preview JSON object"),
        ('{"plan": {"fits": NaN}}', "NaN"),
    ],
)
def test_diff_against_must_be_a_preview(
    content: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "base.json"
    path.write_text(content)
    code = pv.main(["-s", "l4", "--markdown", "--diff-against", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and "Traceback" not in err


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "folder"])
def test_json_options_read_only_regular_files(
    special: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    path = Path(special) if special.startswith("/") else tmp_path / special
    if special == "fifo":
        os.mkfifo(path)
    elif special == "folder":
        path.mkdir()
    code = pv.main(["-s", "l4", "--policy-config", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "not a regular file" in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1, "a": 2}', "the key 'a' twice"),
        ('{"x": {"b": 1, "b": 1}}', "the key 'b' twice"),
        ('[{"k": 1}, {"k": 2, "k": 3}]', "the key 'k' twice"),
    ],
)
def test_json_with_a_key_given_twice_is_refused(text: str, expected: str) -> None:
    from serving.config.inputs import JsonInputError, parse_json

    with pytest.raises(JsonInputError, match=expected):
        parse_json(text)


def test_policy_config_with_a_policy_given_twice_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "policy.json"
    path.write_text(
        '{"max-model-len-cap": {"maxModelLen": 8192}, "max-model-len-cap": {"maxModelLen": 1}}'
    )
    code = pv.main(["-s", "l4", "--policy-config", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "'max-model-len-cap' twice" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "run", "--request-rate", "1e-320"],
        ["bench", "run", "--request-timeout-seconds", "1e-320"],
        ["bench", "run", "--max-cell-seconds", "0.0000001"],
        ["bench", "run", "--goodput-ttft-ms", "5e-324"],
        ["bench", "run", "--max-loop-lag-ms", "1e-300"],
        ["health", "--timeout-seconds", "1e-320"],
        ["health", "--refused-grace-seconds", "1e-320"],
    ],
)
def test_tiny_positive_numbers_are_refused_with_the_smallest_allowed(argv: list[str]) -> None:
    # A positive number below a millisecond (or a millisecond's thousandth) is no setting a user
    # means; its reciprocal (a rate's inter-arrival time) overflows.
    url = ["--url", "http://127.0.0.1:9", "--model", "m", "--auth", "none"]
    done = subprocess.run(
        [sys.executable, "-m", "gemma4", argv[0], *argv[1:2], *url, *argv[2:]]
        if argv[0] == "bench"
        else [sys.executable, "-m", "gemma4", argv[0], *url, *argv[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stderr
    assert "at least 0.001" in done.stderr and "Traceback" not in done.stderr, done.stderr


NOT_WRITTEN_AS_DOCS_WRITE = [" 1", "1 ", "1_0", "\u0661", "+1", "0x10", "1e", "", "\uff11"]


@pytest.mark.parametrize("text", NOT_WRITTEN_AS_DOCS_WRITE)
def test_every_number_option_takes_ascii_digits_only(text: str) -> None:
    """Python's float and int take spaces, underscores and other scripts' digits; no option
    does: the numbers the docs and the package write are ASCII digits."""
    import argparse

    from bench.cli import _int, _ints
    from gemma4.options import bounded_int, bounded_number
    from healthchecks.cli import number_type

    for parse in (
        bounded_number("--rate", 0.0, 1e6),
        bounded_int("--max-replicas", 0, 1000),
        plan.concurrency_list,
        _int(0, 1000),
        _ints(0, 1000, "--concurrency"),
        number_type(1e6),
    ):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)
    assert bounded_number("--rate", 0.0, 1e6)("1.5") == 1.5
    assert bounded_int("--max-replicas", 0, 1000)("12") == 12
    assert plan.concurrency_list("4,1") == [1, 4]


def test_a_rate_with_a_space_exits_2_naming_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        plan.main(["-s", "l4", "-r", " 1"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--rate must be a number from 0.001" in err and "Traceback" not in err
