"""The one launch shape the policies read (docs/accepted-shapes.md), and near variants refused
by name through the real `vllm-server-readable` policy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies._server import read_servers
from policies.vllm_server_readable import vllm_server_readable
from serving.launch.vllm_args import ReadError, parse_serve_args
from serving.render.tpu_startup import LAUNCHER
from tests.policies._fixtures import (
    SERVICE,
    TPU_ARGS,
    TPU_VM,
    container,
    service,
    tpu_vm,
    violations,
)


def _with_command(command: list[str] | None, args: list[str]) -> dict[str, Any]:
    props = service("l4")
    c = container(props)
    if command is None:
        c.pop("commands", None)
    else:
        c["commands"] = command
    c["args"] = args
    return props


def test_the_rendered_shapes_are_read() -> None:
    props = service("l4")
    assert container(props)["commands"] == ["vllm", "serve"]
    assert violations(vllm_server_readable, SERVICE, props) == []
    (server,) = read_servers(SERVICE, props).servers
    assert server.model_ref == container(props)["args"][0]
    vm = tpu_vm()
    assert vm["metadata"]["startup-script"] == LAUNCHER
    assert violations(vllm_server_readable, TPU_VM, vm) == []
    (server,) = read_servers(TPU_VM, vm).servers
    assert server.args["model"] == TPU_ARGS[0] and server.image == "vllm/vllm-tpu:v0.27.0"


def test_model_given_by_option_is_read() -> None:
    args = list(container(service("l4"))["args"])
    props = _with_command(["vllm", "serve"], [f"--model={args[0]}", *args[1:]])
    assert violations(vllm_server_readable, SERVICE, props) == []


ARGS = ["/mnt/models/gemma-4-12B-it-qat-w4a16-ct", "--port=8080"]


@pytest.mark.parametrize(
    ("command", "args", "shape"),
    [
        (["sh", "-c"], ["vllm serve " + " ".join(ARGS)], "a shell (`sh -c`)"),
        (["bash", "-lc"], ["vllm serve " + " ".join(ARGS)], "a shell (`bash -lc`)"),
        (["env", "-u", "VLLM_API_KEY", "vllm", "serve"], ARGS, "the wrapper `env -u`"),
        (["env", "X=1", "vllm", "serve"], ARGS, "the wrapper `env X=1`"),
        (["sudo", "vllm", "serve"], ARGS, "the wrapper `sudo vllm`"),
        (["timeout", "1h", "vllm", "serve"], ARGS, "the wrapper `timeout 1h`"),
        (
            ["python3", "-m", "vllm.entrypoints.openai.api_server"],
            ["--model", ARGS[0]],
            "Python (`python3 -m vllm.entrypoints.openai.api_server`)",
        ),
        (["/usr/bin/vllm", "serve"], ARGS, "vllm named by a path"),
        (None, ARGS, "no command (the image's own entrypoint"),
        (["vllm", "serve"], [*ARGS, "--max-model-len=$(LEN)"], "`$(...)`"),
    ],
)
def test_other_shapes_are_refused_by_name(
    command: list[str] | None, args: list[str], shape: str
) -> None:
    (message,) = violations(vllm_server_readable, SERVICE, _with_command(command, args))
    assert f"container 'vllm' holds the GPU; it runs {shape}" in message
    assert 'the accepted shape is the command ["vllm", "serve"]' in message


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--bogus-option=1"], "unrecognized arguments: --bogus-option=1"),
        (["--enable"], "ambiguous option: --enable could match"),
        (["--port=9000"], "--port given twice"),
        (["--no-enable-prefix-caching"], "--enable-prefix-caching given twice"),
        (["--max_model_len=4096"], "unrecognized arguments: --max_model_len=4096"),
        (["second-model"], "unrecognized arguments: second-model"),
        (["--tokenizer-mode=mistral"], "--tokenizer-mode 'mistral' is not one the policies"),
        (["--trust-remote-code"], "--trust-remote-code loads, serves or logs"),
    ],
)
def test_arguments_vllms_parser_or_the_policies_refuse(extra: list[str], words: str) -> None:
    props = service("l4")
    container(props)["args"] = [*container(props)["args"], *extra]
    found = violations(vllm_server_readable, SERVICE, props)
    assert any(words in m for m in found), found


def test_a_unique_abbreviation_is_read_as_argparse_reads_it() -> None:
    options, problems = parse_serve_args(["m", "--max-model=4096"])
    assert options["max-model-len"] == "4096" and problems == []
    with pytest.raises(ReadError, match="given twice"):
        parse_serve_args(["m", "--max-model=1", "--max-model-len=2"])


def test_a_tpu_machine_runs_only_the_package_launcher() -> None:
    vm = tpu_vm()
    vm["metadata"]["startup-script"] = "#!/bin/bash\ndocker run vllm/vllm-tpu vllm serve m\n"
    (message,) = violations(vllm_server_readable, TPU_VM, vm)
    assert "the startup-script is not the package's launcher" in message


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda d: d.update(command=["sh", "-c", "vllm serve m"]), "key 'command'"),
        (lambda d: d.update(args="--port=8000"), "key 'args'"),
        (lambda d: d["secrets"].pop("VLLM_API_KEY"), "key 'secrets'"),
        (lambda d: d.update(dockerOptions=["--pid=host"]), "has keys"),
    ],
)
def test_the_launcher_with_a_launch_of_another_shape_is_refused(edit: Any, named: str) -> None:
    vm = tpu_vm()
    document = json.loads(vm["metadata"]["vllm-launch"])
    edit(document)
    vm["metadata"]["vllm-launch"] = json.dumps(document)
    (message,) = violations(vllm_server_readable, TPU_VM, vm)
    assert f"vllm-launch {named}" in message


def test_the_launcher_without_its_launch_is_refused() -> None:
    vm = tpu_vm()
    del vm["metadata"]["vllm-launch"]
    (message,) = violations(vllm_server_readable, TPU_VM, vm)
    assert "the package's launcher without metadata.vllm-launch" in message


@pytest.mark.parametrize("key", ["user-data", "startup-script-url", "shutdown-script"])
def test_other_metadata_the_guest_agent_runs_is_refused(key: str) -> None:
    vm = tpu_vm()
    vm["metadata"][key] = "#cloud-config"
    (message,) = violations(vllm_server_readable, TPU_VM, vm)
    assert f"metadata.{key} may start code the guest agent runs" in message


def test_project_metadata_scripts_are_refused() -> None:
    project = "gcp:compute/projectMetadata:ProjectMetadata"
    (message,) = violations(vllm_server_readable, project, {"metadata": {"startup-script": "x"}})
    assert "project metadata 'startup-script' is run by every Compute Engine machine" in message
    assert violations(vllm_server_readable, project, {"metadata": {"enable-oslogin": "TRUE"}}) == []
