"""Every rendered `vllm serve` line and every request body against vLLM's own contract.

The oracle is the snapshot `scripts/vllm_contract.py` wrote from vLLM's real parser and request
models at the pinned versions (`serving/data/`); CI cannot install vLLM, so these tests read the
snapshot through the small validator below. It is stricter than argparse in one way:
abbreviated option names, which argparse would accept by prefix, are refused (this package
always renders full names).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from scripts import vllm_contract as script
from serving.capacity.plan import stack_names
from serving.config.settings import load_settings
from serving.launch import vllm_contract as contract
from tests.pulumi_harness import stack_config

ROOT = Path(__file__).resolve().parent.parent


def _canonical(option: str, snapshot: contract.Snapshot) -> str:
    if option.startswith("--") and snapshot.data.get("underscore_options"):
        return "--" + option[2:].replace("_", "-")
    return option


def _looks_like_option(token: str) -> bool:
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False  # a negative number is a value


def _type_error(option: str, value: str, kind: str | None) -> str | None:
    converters: dict[str, type] = {"int": int, "float": float}
    convert = converters.get(kind or "")
    if convert is None:
        return None
    try:
        convert(value)
    except ValueError:
        return f"{option}: {value!r} is not a valid {kind}"
    return None


def _speculative_keys(value: str, snapshot: contract.Snapshot) -> list[str]:
    """vLLM builds `SpeculativeConfig(**config)` from `--speculative-config`: unknown keys fail."""
    fields = snapshot.data.get("speculative_config_fields")
    try:
        config = json.loads(value)
    except json.JSONDecodeError as exc:
        return [f"--speculative-config is not JSON ({exc.msg})"]
    if not isinstance(config, dict):
        return ["--speculative-config is not a JSON object"]
    if fields is None:
        return []
    unknown = sorted(set(config) - set(fields))
    return [f"--speculative-config: SpeculativeConfig has no field {k!r}" for k in unknown]


def check_argv(argv: Sequence[str], snapshot: contract.Snapshot) -> list[str]:
    """Errors vLLM's parser would raise for `argv` (the arguments after `vllm serve`): unknown
    option, missing value, value given to a boolean, choice not allowed, wrong number type,
    a `--speculative-config` key SpeculativeConfig does not have, more than one positional.
    Empty when the snapshot accepts every argument."""
    errors: list[str] = []
    tokens = list(argv)
    positionals = 0
    where = f"vLLM {snapshot.package} {snapshot.version}"
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not _looks_like_option(token):
            positionals += 1
            if positionals > 1:
                errors.append(f"unrecognized argument {token!r} ({where} takes one model)")
            continue
        name, eq, inline = token.partition("=")
        option = _canonical(name, snapshot)
        spec = snapshot.options.get(option)
        if spec is None:
            errors.append(f"unknown option {name!r} ({where} has no such option)")
            if eq == "" and i < len(tokens) and not _looks_like_option(tokens[i]):
                i += 1  # skip its value so that it is not read as the model
            continue
        if not spec["takes_value"]:
            if eq:
                errors.append(f"{name} takes no value ({where}), got {inline!r}")
            continue
        values: list[str]
        if eq:
            values = [inline]
        else:
            values = []
            many = spec.get("nargs") in ("+", "*")
            while i < len(tokens) and not _looks_like_option(tokens[i]):
                values.append(tokens[i])
                i += 1
                if not many:
                    break
            if not values:
                errors.append(f"{name} needs a value ({where})")
                continue
        if spec["dest"] == "speculative_config":
            errors += [f"{e} ({where})" for e in _speculative_keys(values[0], snapshot)]
        choices = spec.get("choices")
        for value in values:
            if choices is not None and value not in choices:
                errors.append(
                    f"{name}: invalid choice {value!r} ({where} allows: {', '.join(choices)})"
                )
            problem = _type_error(name, value, spec.get("type"))
            if problem:
                errors.append(f"{problem} ({where})")
    return errors


def check_body(path: str, body: Mapping[str, Any], snapshot: contract.Snapshot) -> list[str]:
    """Fields of a request body that vLLM's request model for `path` does not declare
    (vLLM accepts and silently ignores them), including inside `stream_options`."""
    model = snapshot.data["request_paths"].get(path)
    if model is None:
        return [f"{path}: no request model known for this path in vLLM {snapshot.version}"]
    fields = set(snapshot.data["request_models"][model])
    errors = [
        f"{path}: field {key!r} is not declared by vLLM {snapshot.version}'s {model}"
        for key in body
        if key not in fields
    ]
    options = body.get("stream_options")
    if isinstance(options, Mapping):
        stream_fields = set(snapshot.data["request_models"]["StreamOptions"])
        errors += [
            f"{path}: stream_options.{key} is not declared by vLLM {snapshot.version}'s "
            "StreamOptions"
            for key in options
            if key not in stream_fields
        ]
    return errors


@cache
def cases() -> tuple[list[script.CommandCase], list[str]]:
    return script.command_cases()


@cache
def bodies() -> list[script.RequestCase]:
    return script.request_cases()


def shipped_images() -> list[str]:
    return sorted({str(stack_config(s)["image"]) for s in stack_names()})


def test_every_shipped_image_has_a_snapshot_of_its_release() -> None:
    for image in shipped_images():
        snapshot = contract.for_image(image)
        release = contract.image_release(image)
        assert release == (snapshot.package, snapshot.version), image


def test_snapshots_say_where_they_come_from() -> None:
    for package, version in contract.available():
        snap = contract.load(package, version)
        assert (snap.package, snap.version) == (package, version)
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", snap.generated)
        assert snap.data["generator"] == "scripts/vllm_contract.py"
        # A snapshot read from a real parser knows the options this package renders.
        assert {"--max-num-seqs", "--enable-chunked-prefill", "-tp"} <= set(snap.options)


def test_every_rendered_command_line_is_accepted() -> None:
    commands, _ = cases()
    rendered = {c.name.split("/")[0] for c in commands}
    # A line is checked once, under the first stack that renders it (tpu-v6e1 renders the
    # lines of gke-tpu-v6e); every stack's declared lines are covered (the test below).
    assert rendered <= set(stack_names())
    for case in commands:
        snapshot = contract.for_image(case.image)
        assert check_argv(case.argv, snapshot) == [], case.name


def test_variants_reach_every_option_the_settings_can_emit() -> None:
    """The variants switch every vLLM setting, so every flag form the renderer has is seen."""
    commands, _ = cases()
    names = {a.partition("=")[0] for c in commands for a in c.argv if a.startswith("--")}
    for flag in (
        "--no-enable-chunked-prefill",
        "--enable-chunked-prefill",
        "--no-enable-prefix-caching",
        "--disable-chunked-mm-input",
        "--async-scheduling",
        "--load-format",
        "--safetensors-load-strategy",
        "--kv-cache-dtype",
        "--speculative-config",
        "--quantization",
        "--tool-call-parser",
        "--reasoning-parser",
    ):
        assert flag in names, flag


def test_deployed_resources_carry_the_checked_command_lines() -> None:
    """The shipped stacks as the program declares them (under Pulumi mocks) carry exactly
    command lines that the contract check covers."""
    from tests.pulumi_harness import render, stack_config

    checked = {(c.image, c.argv) for c in cases()[0]}
    for stack in stack_names():
        declared = render(stack_config(stack), stack)
        argvs: list[tuple[str, tuple[str, ...]]] = []
        for resource in declared.resources:
            props: dict[str, Any] = resource.inputs
            pod = ((props.get("spec") or {}).get("template") or {}).get("spec") or {}
            for container in (props.get("template") or {}).get("containers") or []:
                args = container.get("args") or []
                if args and container.get("commands", [])[-1:] == ["serve"]:
                    argvs.append((container["image"], tuple(args)))
            # A Kubernetes Pod template (the GKE stacks' vLLM Deployment).
            for container in pod.get("containers") or []:
                args = container.get("args") or []
                if args and (container.get("command") or [])[-1:] == ["serve"]:
                    argvs.append((container["image"], tuple(args)))
            metadata = props.get("metadata") or {}
            if "vllm-launch" in metadata:
                tpu_argv = script.tpu_launch_argv(metadata)
                argvs.append((stack_config(stack)["image"], tuple(tpu_argv)))
        assert argvs, f"{stack}: no vLLM command line declared"
        for image, argv in argvs:
            assert (image, argv) in checked, f"{stack}: {argv} not covered by the contract check"


@pytest.mark.parametrize("image", shipped_images())
def test_request_bodies_use_only_declared_fields(image: str) -> None:
    snapshot = contract.for_image(image)
    sent = bodies()
    assert {b.path for b in sent} == {"/v1/completions", "/v1/chat/completions", "/tokenize"}
    for body in sent:
        assert check_body(body.path, body.body, snapshot) == [], body.name


SNAP = contract.load("vllm", "0.27.1")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["m", "--max-num-seq=4"], "unknown option '--max-num-seq'"),
        (["m", "--enable-chunked-prefill=true"], "--enable-chunked-prefill takes no value"),
        (["m", "--max-num-seqs"], "--max-num-seqs needs a value"),
        (["m", "--max-num-seqs", "--enforce-eager"], "--max-num-seqs needs a value"),
        (["m", "--kv-cache-dtype=fp9"], "invalid choice 'fp9'"),
        (["m", "--dtype", "float8"], "invalid choice 'float8'"),
        (["m", "--max-num-seqs=eight"], "'eight' is not a valid int"),
        (["m", "--gpu-memory-utilization=high"], "'high' is not a valid float"),
        (["m", "extra"], "unrecognized argument 'extra'"),
        (
            ["m", '--speculative-config={"method":"mtp","revison":"main"}'],
            "SpeculativeConfig has no field 'revison'",
        ),
        (["m", "--speculative-config={method: mtp}"], "--speculative-config is not JSON"),
    ],
)
def test_validator_refuses_what_the_parser_refuses(argv: list[str], expected: str) -> None:
    errors = check_argv(argv, SNAP)
    assert len(errors) == 1 and expected in errors[0], errors
    assert "vLLM vllm 0.27.1" in errors[0]


def test_validator_accepts_the_parsers_spellings() -> None:
    argv = [
        "m",
        "-tp",
        "2",
        "--max_num_seqs=4",
        "--no-enable-chunked-prefill",
        "--served-model-name",
        "a",
        "b",
        "--kv-cache-dtype",
        "fp8",
        "--enforce-eager",
    ]
    assert check_argv(argv, SNAP) == []


def test_unknown_request_fields_are_named() -> None:
    body = {"model": "m", "prompt": "x", "max_token": 3, "stream_options": {"usage": True}}
    errors = check_body("/v1/completions", body, SNAP)
    assert errors == [
        "/v1/completions: field 'max_token' is not declared by vLLM 0.27.1's CompletionRequest",
        "/v1/completions: stream_options.usage is not declared by vLLM 0.27.1's StreamOptions",
    ]


def test_unknown_release_is_named() -> None:
    with pytest.raises(contract.UnknownVersion, match=r"vllm-tpu 0\.27\.1 .*shipped: "):
        contract.for_image("vllm/vllm-tpu:v0.27.1")


#: Metric names the health checks read only when the current name is absent (older vLLM).
OLDER_NAMES = {"vllm:gpu_cache_usage_perc"}


def test_metric_names_in_the_code_are_exposed_by_the_pinned_vllm() -> None:
    used: set[str] = set()
    for folder in ("healthchecks", "bench", "serving", "components", "policies"):
        for path in (ROOT / folder).rglob("*.py"):
            used |= set(re.findall(r"\"(vllm:[a-z_]+)\"", path.read_text()))
    assert used, "no metric name found in the code"
    for image in shipped_images():
        snapshot = contract.for_image(image)
        known = {m["name"] for m in snapshot.metrics}
        known |= {name for m in snapshot.metrics for name in m["exposed"]}
        missing = sorted(used - known - OLDER_NAMES)
        assert missing == [], f"{image}: {missing}"


def test_settings_defaults_render_a_valid_line_for_every_hardware() -> None:
    """Defaults alone (no stack file) also pass: each hardware with its first location."""
    from serving.catalog.hardware import HARDWARE, Platform
    from serving.render.vllm import render

    for key, hw in HARDWARE.items():
        place = {"zone" if hw.platform is Platform.TPU else "region": hw.locations[0]}
        image = (
            "vllm/vllm-tpu:v0.27.0" if hw.platform is Platform.TPU else "vllm/vllm-openai:v0.27.1"
        )
        settings = load_settings({"hardware": key, "image": image, **place})
        command = render(settings, model_path="/m", port=8000)
        assert check_argv(command.args, contract.for_image(image)) == [], key


def test_the_docs_state_the_last_run_of_each_snapshot() -> None:
    assert "scripts/vllm_contract.py" in (ROOT / "docs" / "contracts.md").read_text()
    page = (ROOT / "docs" / "verification.md").read_text()
    section = page.split("## The vLLM contract: last run", 1)[1].split("\n## ", 1)[0]
    for package, version in contract.available():
        snap = contract.load(package, version)
        assert f"Last run: {snap.generated}" in section
        assert f"{package}-{version}.json" in section
