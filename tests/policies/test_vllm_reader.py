"""The same vLLM server started another way is still read, and judged, by every policy."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest

from policies._server import read_servers
from policies.gpu_host_minimums import gpu_host_minimums
from policies.l4_qat_checkpoint import l4_qat_checkpoint
from policies.max_model_len_cap import max_model_len_cap
from policies.model_volume_read_only import model_volume_read_only
from policies.multimodal_batched_tokens import multimodal_batched_tokens
from policies.no_plaintext_secrets import no_plaintext_secrets
from policies.pinned_image import pinned_image
from policies.speculative_config_valid import speculative_config_valid
from policies.vllm_server_readable import vllm_server_readable
from serving.launch.vllm_argv import (
    DEFAULT_MODEL,
    ReadError,
    find_launches,
    human_int,
    parse_serve_args,
    script_launches,
    split_script,
)
from tests.policies._fixtures import (
    SERVICE,
    TPU_DYNAMIC,
    container,
    rendered,
    service,
    violations,
)

BF16 = "/mnt/models/gemma-4-12B-it"
QAT = "/mnt/models/gemma-4-12B-it-qat-w4a16-ct"
JOB = "gcp:cloudrunv2/job:Job"
WORKER_POOL = "gcp:cloudrunv2/workerPool:WorkerPool"
V1_SERVICE = "gcp:cloudrun/service:Service"


def l4_with(
    commands: list[str] | None, args: list[str], image: str | None = None
) -> dict[str, Any]:
    props = service("l4")
    c = container(props)
    if commands is None:
        c.pop("commands", None)
    else:
        c["commands"] = commands
    c["args"] = args
    if image is not None:
        c["image"] = image
    return props


def serve_line(*extra: str, model: str = BF16) -> list[str]:
    return [model, "--max-model-len=8192", *extra]


# --- the pure reader ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["vllm", "serve", BF16],
        ["/usr/local/bin/vllm", "serve", BF16],
        ["sh", "-c", f"vllm serve {BF16}"],
        ["bash", "-lc", f"exec vllm serve {BF16}"],
        ["/bin/sh", "-ec", f"set -e; cd /tmp; env A=1 vllm serve {BF16} 2>&1 | tee /tmp/vllm.log"],
        ["/bin/bash", "-euxc", f"nohup vllm serve {BF16} &\nwait"],
        ["env", "-i", "PATH=/usr/bin", "vllm", "serve", BF16],
        ["HF_HUB_OFFLINE=1", "vllm", "serve", BF16],
        ["exec", "vllm", "serve", BF16],
        ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", BF16],
        ["python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model=" + BF16],
        ["python3", "-m", "vllm.entrypoints.cli.main", "serve", BF16],
        ["/usr/bin/python3.12", "-m", "vllm.entrypoints.cli.main", "serve", BF16],
        ["tini", "--", "vllm", "serve", BF16],
        ["sh", "-c", f"sh -c 'vllm serve {BF16}'"],
        ["sh", "-c", "--", f"vllm serve {BF16}"],
        ["bash", "-o", "pipefail", "--login", "-c", f"vllm serve {BF16} | tee /tmp/vllm.log"],
        ["sudo", "-u", "vllm", "-E", "vllm", "serve", BF16],
        ["timeout", "-s", "KILL", "3600", "vllm", "serve", BF16],
        [
            "taskset",
            "-c",
            "0-3",
            "numactl",
            "--cpunodebind=0",
            "stdbuf",
            "-oL",
            "vllm",
            "serve",
            BF16,
        ],
        [
            "/bin/sh",
            "-c",
            f"exec /usr/bin/env X=1 python3 -m vllm.entrypoints.openai.api_server --model {BF16}",
        ],
    ],
)
def test_wrappers_are_seen_through(argv: list[str]) -> None:
    (launch,) = find_launches(argv)
    assert parse_serve_args(launch.argv).model == BF16


def test_boolean_flags_before_the_positional_model() -> None:
    args = parse_serve_args(
        ["--enable-prefix-caching", "--trust-remote-code", BF16, "--max-model-len", "4096"]
    )
    assert args.model == BF16
    assert args.options["enable-prefix-caching"] is True
    assert args.options["max-model-len"] == "4096"


def test_every_spelling_of_an_option() -> None:
    args = parse_serve_args(
        [
            BF16,
            "--max_model_len",
            "9000",
            "-tp",
            "2",
            "-q=fp8",
            "--no-enable-chunked-prefill",
            "--gpu-memory-utilization",
            "0.97",
            "--max-model-len=10000",  # the last occurrence wins
        ]
    )
    assert args.options["max-model-len"] == "10000"
    assert args.options["tensor-parallel-size"] == "2"
    assert args.options["quantization"] == "fp8"
    assert args.options["enable-chunked-prefill"] is False
    assert args.options["gpu-memory-utilization"] == "0.97"


@pytest.mark.parametrize("dotted_first", [True, False])
def test_dotted_fields_replace_a_json_object_wherever_it_stands(dotted_first: bool) -> None:
    # vLLM 0.27.1's FlexibleArgumentParser.parse_args removes every dotted option, merges
    # them into one JSON object per option and appends it after all other arguments, so
    # argparse's last-wins store replaces the JSON object, before or after it.
    json_option = [
        "--speculative-config",
        json.dumps({"method": "mtp", "num_speculative_tokens": 2, "model": QAT}),
    ]
    dotted = ["--speculative-config.num_speculative_tokens=9", "--speculative_config.model", "/d"]
    argv = [BF16, *(dotted + json_option if dotted_first else json_option + dotted)]
    args = parse_serve_args(argv)
    assert args.options["speculative-config"] == {"num_speculative_tokens": 9, "model": "/d"}


def test_dotted_values_are_json_then_human_readable_ints() -> None:
    args = parse_serve_args(
        [BF16, "--compilation-config.level", "3", "--compilation-config.x", "2k",
         "--compilation-config.y=abc", "--compilation-config.z+", "a,b"]
    )  # fmt: skip
    assert args.options["compilation-config"] == {
        "level": 3,
        "x": 2000,
        "y": "abc",
        "z": ["a", "b"],
    }


@pytest.mark.parametrize(
    ("argv", "model"),
    [
        (["--model", QAT, "--model", BF16], QAT),
        (["--model=" + QAT, "--max-model-len=8", "--model=" + BF16], QAT),
        (["--max-model-len=8", "--model", QAT, "--model=" + BF16], QAT),
    ],
)
def test_the_first_model_option_wins_as_in_vllm(argv: list[str], model: str) -> None:
    args = parse_serve_args(argv)
    assert args.model == model
    assert "model" not in args.options


def test_a_positional_model_and_a_model_option_are_refused_as_vllm_does() -> None:
    args = parse_serve_args([QAT, "--model", BF16])
    assert any("second positional" in p for p in args.problems)


@pytest.mark.parametrize("cleared", ["None", ""])
def test_an_optional_value_of_none_clears_the_option(cleared: str) -> None:
    args = parse_serve_args(
        [QAT, "--kv-cache-memory-bytes", "8G", "--kv-cache-memory-bytes", cleared]
    )
    assert "kv-cache-memory-bytes" not in args.options


def test_append_options_accumulate_and_code_options_are_refused() -> None:
    args = parse_serve_args([QAT, "--middleware", "a.b", "--middleware=c.d"])
    assert args.options["middleware"] == ["a.b", "c.d"]
    assert any("--middleware" in p and "imports Python middleware" in p for p in args.problems)


@pytest.mark.parametrize(
    "option",
    ["--tool-parser-plugin=/x.py", "--worker-extension-cls=a.B", "--lora-modules=a=/x",
     "--enable-lora", "--tokenizer=/mnt/other", "--hf-config-path=/x", "--load-format=dummy",
     "--logits-processors=a.B"],
)  # fmt: skip
def test_options_that_bring_other_code_or_weights_are_refused(option: str) -> None:
    assert parse_serve_args([QAT, option]).problems


def test_negative_one_and_auto_are_values_not_options() -> None:
    args = parse_serve_args([BF16, "--max-model-len", "-1", "--enforce-eager"])
    assert args.options["max-model-len"] == "-1"
    assert args.options["enforce-eager"] is True


def test_config_file_is_reported() -> None:
    args = parse_serve_args([BF16, "--config", "/etc/vllm.yaml"])
    assert any("/etc/vllm.yaml" in p for p in args.problems)


def test_an_option_vllm_does_not_have_is_reported() -> None:
    args = parse_serve_args(["--some-new-flag", BF16])
    assert any("--some-new-flag" in p for p in args.problems)


def test_multi_value_option_swallows_the_model_as_argparse_does() -> None:
    # vLLM's --served-model-name takes one or more values (nargs="+"): the model path after it
    # is a second served name, and vLLM serves its default model.
    args = parse_serve_args(["--served-model-name", "gemma", BF16])
    assert args.options["served-model-name"] == ["gemma", BF16]
    assert args.model == DEFAULT_MODEL


def test_aliases_and_abbreviations_from_vllms_parser() -> None:
    args = parse_serve_args(
        [BF16, "-sc", '{"method": "mtp"}', "--max-model", "99999", "-ep", "-O3", "-dcp", "2"]
    )
    assert args.options["speculative-config"] == '{"method": "mtp"}'
    assert args.options["max-model-len"] == "99999"  # a unique abbreviation, as argparse reads it
    assert args.options["enable-expert-parallel"] is True
    assert args.options["optimization-level"] == "3"  # vLLM 0.27.1 reads -O3 so
    assert args.options["decode-context-parallel-size"] == "2"


def test_flag_given_a_value_and_ambiguous_abbreviation_are_reported() -> None:
    args = parse_serve_args([BF16, "--enable-prefix-caching=false", "--max-num", "4"])
    assert any("takes no value" in p for p in args.problems)
    assert any("abbreviates several options" in p for p in args.problems)


@pytest.mark.parametrize(
    ("text", "value"),
    [("32768", 32768), ("32k", 32000), ("32K", 32768), ("32Ki", 32768), ("1.5k", 1500)],
)
def test_human_readable_ints(text: str, value: int) -> None:
    assert human_int(text) == value


@pytest.mark.parametrize(
    "argv",
    [
        ["/entrypoint.sh", "--max-model-len=99999"],
        ["python", "-c", "import runpy; runpy.run_module('vllm.entrypoints.openai.api_server')"],
        ["bash", "/start-vllm.sh", "--gpu-memory-utilization=0.99"],
        ["vllm", "run-server", BF16],
        ["python3", "-m", "vllm.entrypoints.openai.other", BF16, "--max-num-seqs=4"],
    ],
)
def test_commands_the_reader_does_not_understand_fail_closed(argv: list[str]) -> None:
    with pytest.raises(ReadError):
        find_launches(argv)


def test_commands_that_do_not_start_vllm_are_not_servers() -> None:
    assert find_launches(["hf", "download", "google/gemma-4-12B-it", "--local-dir", "/x"]) == []
    assert script_launches("docker pull vllm/vllm-openai:v1\necho 'vllm ready'\n") == []


def test_script_with_control_characters_is_unreadable() -> None:
    with pytest.raises(ReadError, match="control characters"):
        split_script("docker run img \x1b[2J vllm serve x\n")


# --- Cloud Run: every policy sees the server however it is started -----------------------


@pytest.mark.parametrize(
    ("commands", "args", "image"),
    [
        (["sh", "-c"], [shlex.join(["vllm", "serve", *serve_line()])], None),
        (["/bin/bash", "-lc"], [f"exec env X=1 vllm serve {shlex.join(serve_line())}"], None),
        (["vllm", "serve"], serve_line(), "us-docker.pkg.dev/p/r/inference@sha256:" + "a" * 64),
        (None, serve_line(), "vllm/vllm-openai:v0.27.1"),
        (["python3", "-m", "vllm.entrypoints.openai.api_server"], ["--model", BF16], None),
    ],
)
def test_bf16_on_l4_is_refused_however_vllm_is_started(
    commands: list[str] | None, args: list[str], image: str | None
) -> None:
    props = l4_with(commands, args, image)
    assert violations(vllm_server_readable, SERVICE, props) == []
    (message,) = violations(l4_qat_checkpoint, SERVICE, props)
    assert "not a QAT checkpoint" in message


def test_shell_variables_are_resolved_from_the_container_env() -> None:
    props = l4_with(["sh", "-c"], ['vllm serve "$MODEL" --max-model-len=${LEN}'])
    container(props)["envs"] += [
        {"name": "MODEL", "value": BF16},
        {"name": "LEN", "value": "131072"},
    ]
    assert violations(vllm_server_readable, SERVICE, props) == []
    assert violations(l4_qat_checkpoint, SERVICE, props)
    assert any("131072" in m for m in violations(max_model_len_cap, SERVICE, props))


@pytest.mark.parametrize(
    "script",
    ["vllm serve $MODEL", f"vllm serve {QAT} --max-model-len=$(cat /len)",
     f"M={QAT}; vllm serve $M --max-model-len `cat /len`"],
)  # fmt: skip
def test_unresolvable_shell_expansions_fail_closed(script: str) -> None:
    (message,) = violations(vllm_server_readable, SERVICE, l4_with(["sh", "-c"], [script]))
    assert "cannot resolve" in message or "cannot read" in message


@pytest.mark.parametrize(
    ("commands", "args"),
    [
        (["env", "-S"], [f"vllm serve {QAT} --max-model-len=1000000"]),
        (["/usr/bin/env"], [f"-Svllm serve {QAT} --max-model-len=1000000"]),
        (["env"], [f"--split-string=vllm serve {QAT} --max-model-len=1000000"]),
        (["env", "--split-string"], [f"vllm serve {QAT} --max-model-len 1000000"]),
        (["env", "-iS", f"A=1 'vllm' serve {QAT}"], ["--max-model-len=1000000"]),
        (["env", "-u", "X", "-S", f"env -S 'vllm serve {QAT}'"],
         ["--max-model-len=1000000"]),
        (["sh", "-c"], [f"exec env -S 'vllm serve {QAT} --max-model-len=1000000'"]),
    ],
)  # fmt: skip
def test_env_split_string_is_read_as_a_command_line(commands: list[str], args: list[str]) -> None:
    props = l4_with(commands, args)
    assert violations(vllm_server_readable, SERVICE, props) == []
    (message,) = violations(max_model_len_cap, SERVICE, props)
    assert "1000000" in message


@pytest.mark.parametrize(
    "args",
    [["-S", f"vllm serve {QAT} --max-model-len=${{UNSET}}"], ["-S"],
     ["-S", f"vllm serve {QAT}; vllm serve {QAT}"],
     ["-S", f"vllm\\_serve\\_{QAT}\\_--max-model-len=1000000"]],
)  # fmt: skip
def test_env_split_string_that_cannot_be_read_fails_closed(args: list[str]) -> None:
    (message,) = violations(vllm_server_readable, SERVICE, l4_with(["env"], args))
    assert "cannot read the vLLM server" in message


@pytest.mark.parametrize("spelling", [["--max-model-len", "-1"], ["--max-model-len=auto"], []])
def test_full_context_spellings_are_refused_on_l4(spelling: list[str]) -> None:
    props = l4_with(
        ["sh", "-c"],
        [
            shlex.join(
                [
                    "vllm",
                    "serve",
                    "--enforce-eager",
                    f"{QAT}",
                    *spelling,
                ]
            )
        ],
    )
    (message,) = violations(max_model_len_cap, SERVICE, props)
    assert "at most 32768" in message


def test_dotted_speculative_config_is_judged() -> None:
    props = l4_with(
        ["vllm", "serve"],
        [*serve_line(model=f"{QAT}"), "--speculative-config.method=mtp",
         "--speculative-config.num_speculative_tokens=9"],
    )  # fmt: skip
    messages = violations(speculative_config_valid, SERVICE, props)
    assert any("names no drafter" in m for m in messages)
    assert any("num_speculative_tokens 9" in m for m in messages)


def test_boolean_flag_before_the_model_is_judged() -> None:
    props = l4_with(
        ["vllm", "serve"],
        [
            "--disable-chunked-mm-input",
            "/mnt/models/gemma-4-12B-it-qat-w4a16-ct",
            "--max-num-batched-tokens",
            "1024",
        ],
    )
    (message,) = violations(multimodal_batched_tokens, SERVICE, props)
    assert "--max-num-batched-tokens=1024" in message


@pytest.mark.parametrize(
    ("commands", "args"),
    [
        (["/start.sh"], ["--max-model-len=131072"]),
        (["sh", "-c"], ["vllm serve 'unbalanced"]),
        (["vllm", "serve"], [QAT, "--config", "/etc/vllm.yaml"]),
    ],
)
def test_unreadable_containers_fail_closed(commands: list[str], args: list[str]) -> None:
    props = l4_with(commands, args)
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "cannot read the vLLM server" in message and "container" in message


def test_gpu_container_running_an_unseen_entrypoint_fails_closed() -> None:
    props = l4_with(None, [], image="us-docker.pkg.dev/p/r/server@sha256:" + "a" * 64)
    container(props).pop("args")
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "runs its image's own entrypoint" in message


@pytest.mark.parametrize(
    ("commands", "args", "image"),
    [
        (["sh"], ["/start.sh"], None),
        (["/start.sh"], [], None),
        (["bash", "-c"], ["exec /opt/run-server"], None),
        (["python3"], ["/app/server.py"], None),
        (["sleep", "infinity"], [], None),
        (["sh"], ["/start.sh"], "vllm/vllm-openai@sha256:" + "a" * 64),
    ],
)
def test_gpu_container_whose_command_starts_no_readable_vllm_fails_closed(
    commands: list[str], args: list[str], image: str | None
) -> None:
    props = l4_with(commands, args, image)
    (message,) = violations(vllm_server_readable, SERVICE, props, name="gpu-svc")
    assert message.startswith("gpu-svc (")
    # A command that starts no server, or a script running a program the reader does not know.
    assert shlex.join([*commands, *args]) in message or "/opt/run-server" in message


def test_vllm_image_without_the_gpu_whose_command_is_unreadable_fails_closed() -> None:
    props = service("l4")
    props["template"]["containers"].append(
        {"name": "second", "image": "vllm/vllm-openai:v0.27.1", "commands": ["/start.sh"]}
    )
    (message,) = violations(vllm_server_readable, SERVICE, props, name="two")
    assert "container 'second' runs a vLLM image" in message and "/start.sh" in message


def test_model_download_in_a_vllm_image_is_not_a_server() -> None:
    props = service("l4")
    props["template"]["containers"].append(
        {"name": "dl", "image": "vllm/vllm-openai:v0.27.1", "commands": ["env", "A=1", "hf"],
         "args": ["download", "google/gemma-4-12B-it"]}
    )  # fmt: skip
    assert violations(vllm_server_readable, SERVICE, props) == []
    props["template"]["containers"][-1]["commands"] = ["sh", "-c", "hf download x; /run.sh"]
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "container 'dl'" in message and "'/run.sh'" in message


def test_non_vllm_sidecar_without_the_gpu_is_not_flagged() -> None:
    props = service("l4")
    props["template"]["containers"].append(
        {"name": "proxy", "image": "envoyproxy/envoy:v1.31", "commands": ["/docker-entrypoint.sh"]}
    )
    assert violations(vllm_server_readable, SERVICE, props) == []


def test_sidecar_with_unknown_args_is_not_a_vllm_server() -> None:
    from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, unknown_checking_proxy

    props = service("l4")
    props["template"]["containers"].append(
        {"name": "collector", "image": "otel/collector:1.0", "args": UNKNOWN_ARRAY_VALUE}
    )
    assert violations(vllm_server_readable, SERVICE, unknown_checking_proxy(props)) == []


@pytest.mark.parametrize("key", ["args", "commands"])
def test_unknown_args_at_preview_fail_closed(key: str) -> None:
    """The engine's own proxy and sentinel, as a preview hands them to a policy."""
    from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, unknown_checking_proxy

    props = service("l4")
    container(props)[key] = UNKNOWN_ARRAY_VALUE
    (message,) = violations(vllm_server_readable, SERVICE, unknown_checking_proxy(props))
    assert "unknown at preview" in message


# --- GPU jobs, worker pools and v1 services are held to the same policies ----------------


def as_job(props: dict[str, Any]) -> dict[str, Any]:
    template = props["template"]
    return {
        "location": props.get("location"),
        "template": {
            "template": {
                "containers": template["containers"],
                "volumes": template.get("volumes", []),
                "nodeSelector": template["nodeSelector"],
            }
        },
    }


def as_worker_pool(props: dict[str, Any]) -> dict[str, Any]:
    template = props["template"]
    return {"location": props.get("location"), "template": dict(template)}


def as_v1(props: dict[str, Any]) -> dict[str, Any]:
    template = props["template"]
    return {
        "location": props.get("location"),
        "template": {
            "spec": {
                "containers": template["containers"],
                "nodeSelector": {
                    "run.googleapis.com/accelerator": template["nodeSelector"]["accelerator"]
                },
            }
        },
    }


@pytest.mark.parametrize(
    ("type_", "convert"), [(JOB, as_job), (WORKER_POOL, as_worker_pool), (V1_SERVICE, as_v1)]
)
def test_gpu_jobs_pools_and_v1_services_are_judged(type_: str, convert: Any) -> None:
    props = convert(l4_with(["vllm", "serve"], serve_line()))
    assert read_servers(type_, props).servers[0].accelerator == "nvidia-l4"
    assert violations(l4_qat_checkpoint, type_, props)
    holder = props["template"]["template"] if type_ == JOB else props["template"]
    holder = holder.get("spec", holder)
    holder["containers"][0]["image"] = "vllm/vllm-openai:latest"
    assert violations(pinned_image, type_, props)
    for c in holder["containers"]:
        c["resources"] = {"limits": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}}
    assert violations(gpu_host_minimums, type_, props)


def test_gpu_job_volume_is_read_only() -> None:
    props = as_job(service("l4"))
    for volume in props["template"]["template"]["volumes"]:
        if "gcs" in volume:
            volume["gcs"]["readOnly"] = False
    assert any("not read-only" in m for m in violations(model_volume_read_only, JOB, props))


# --- TPU startup scripts ----------------------------------------------------------------


def tpu_props() -> dict[str, Any]:
    return rendered("tpu-v6e1").one(TPU_DYNAMIC).inputs


def test_tpu_script_is_read() -> None:
    (server,) = read_servers(TPU_DYNAMIC, tpu_props()).servers
    assert server.model_ref == "google/gemma-4-12B-it"
    assert server.args["max-model-len"] == "4096"


@pytest.mark.parametrize(
    "script", ["#!/bin/bash\nbash /opt/start.sh\n", "/opt/run-server --port 8000\n", "true\n"]
)
def test_tpu_script_that_starts_no_readable_vllm_fails_closed(script: str) -> None:
    props = rendered("tpu-v6e1").one(TPU_DYNAMIC).inputs
    props["metadata"]["startup-script"] = script
    (message,) = violations(vllm_server_readable, TPU_DYNAMIC, props, name="tpu")
    assert message.startswith("tpu (")
    assert (
        "starts no vLLM server" in message
        or "a shell that reads its script" in message
        or ("a program the reader does not know ('/opt/run-server')" in message)
    )


def test_tpu_script_with_a_newline_in_a_value_fails_closed() -> None:
    props = tpu_props()
    script = props["metadata"]["startup-script"]
    props["metadata"]["startup-script"] = script.replace("--max-model-len=4096", "'--x=a\x0bb'")
    (message,) = violations(vllm_server_readable, TPU_DYNAMIC, props, name="tpu")
    assert "control characters" in message


def test_tpu_docker_run_reads_the_command_after_the_image() -> None:
    # The vllm-tpu image has no `vllm serve` entrypoint (tpu-inference's docker/Dockerfile:
    # CMD ["/bin/bash"]; its docker/entrypoint.sh runs the arguments as a command), so what
    # follows the image is the command; vLLM's arguments alone would be run as a program.
    script = (
        "#!/bin/bash\ndocker run -d --net=host -e HF_TOKEN vllm/vllm-tpu:v0.27.0 "
        "vllm serve --enable-prefix-caching google/gemma-4-12B-it --max-model-len -1\n"
    )
    props = {"metadata": {"startup-script": script}, "acceleratorType": "v6e-1"}
    (server,) = read_servers(TPU_DYNAMIC, props).servers
    assert server.model_ref == "google/gemma-4-12B-it"
    assert server.max_model_len() == (None, None)
    bare = script.replace("vllm/vllm-tpu:v0.27.0 vllm serve ", "vllm/vllm-tpu:v0.27.0 ")
    with pytest.raises(ReadError, match="no `vllm serve` entrypoint"):
        script_launches(bare)
    props = {"metadata": {"startup-script": bare}, "acceleratorType": "v6e-1"}
    (message,) = violations(vllm_server_readable, TPU_DYNAMIC, props, name="tpu")
    assert "no `vllm serve` entrypoint" in message


@pytest.mark.parametrize(
    "image", ["vllm/vllm-tpu:nightly", "vllm/vllm-tpu", "vllm/vllm-tpu@sha256:abc"]
)
def test_tpu_script_image_is_pinned(image: str) -> None:
    props = tpu_props()
    script = props["metadata"]["startup-script"]
    props["metadata"]["startup-script"] = re.sub(
        r"readonly IMAGE=\S+", f"readonly IMAGE={image}", script
    )
    assert image in props["metadata"]["startup-script"]
    (message,) = violations(pinned_image, TPU_DYNAMIC, props, name="tpu")
    assert "startup script" in message and image in message


@pytest.mark.parametrize(
    "option", ["--env=VLLM_API_KEY=s3cr3t-value", "-e VLLM_API_KEY=s3cr3t-value",
               "-eVLLM_API_KEY=s3cr3t-value", "--env VLLM_API_KEY=s3cr3t-value"],
)  # fmt: skip
def test_tpu_literal_key_in_docker_env_is_refused(option: str) -> None:
    props = tpu_props()
    script = props["metadata"]["startup-script"]
    props["metadata"]["startup-script"] = script.replace("--env=VLLM_API_KEY", option)
    messages = violations(no_plaintext_secrets, TPU_DYNAMIC, props, name="tpu")
    assert any("VLLM_API_KEY" in m and "literal" in m for m in messages)


def test_tpu_script_edited_outside_its_docker_run_is_not_read_as_rendered() -> None:
    # Only the `docker run` of the rendered script varies; an edit anywhere else (here a
    # literal key) leaves a script with functions and command substitutions, outside the
    # grammar, and the reader refuses it instead of guessing.
    props = tpu_props()
    script = props["metadata"]["startup-script"]
    props["metadata"]["startup-script"] = script.replace(
        'VLLM_API_KEY="$(read_secret vllm-api-key)"', "VLLM_API_KEY=plain-text-key"
    )
    (message,) = violations(vllm_server_readable, TPU_DYNAMIC, props, name="tpu")
    assert "command substitution" in message or "subshell" in message


# What vLLM 0.27.1's own parser gave for `--max-model-len VALUE` (run on 2026-11-23 with
# make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args on the CPU platform,
# the environment of scripts/vllm_contract.py); its allow_abbrev is True, so a unique prefix of
# an option is that option.
VLLM_0_27_1_MAX_MODEL_LEN = {"32K": 32768, "32k": 32000, "1024": 1024, "-1": -1}


@pytest.mark.parametrize(("text", "parsed"), sorted(VLLM_0_27_1_MAX_MODEL_LEN.items()))
def test_sizes_are_read_as_vllm_0_27_1_reads_them(text: str, parsed: int) -> None:
    from serving.launch.vllm_argv import human_int

    assert human_int(text) == parsed


def test_the_api_server_module_serves_its_last_model_option() -> None:
    # vLLM 0.27.1: only `vllm serve` moves the first --model to the front, and only the serve
    # subcommand copies the positional model over --model; api_server's __main__ does neither.
    (launch,) = find_launches(
        ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", QAT, "--model", BF16]
    )
    assert parse_serve_args(launch.argv, entry=launch.entry).model == BF16
    (launch,) = find_launches(["python3", "-m", "vllm.entrypoints.openai.api_server", QAT])
    args = parse_serve_args(launch.argv, entry=launch.entry)
    assert args.model == DEFAULT_MODEL
    assert any("ignores" in p for p in args.problems)
    (launch,) = find_launches(["vllm", "serve", "--model", QAT, "--model", BF16])
    assert parse_serve_args(launch.argv, entry=launch.entry).model == QAT


@pytest.mark.parametrize(
    "image",
    [
        "ghcr.io/acme/server:1.2",
        "ghcr.io/acme/vllm-openai:v0.27.1",  # named like the official image, elsewhere
        "docker.io/someone/vllm-openai:v0.27.1",
        "us-docker.pkg.dev/p/r/vllm-openai@sha256:" + "a" * 64,
    ],
)
def test_an_image_whose_entrypoint_is_not_known_is_not_guessed(image: str) -> None:
    # vLLM-looking arguments do not prove what an unknown image's entrypoint does with them.
    props = l4_with(None, serve_line("--gpu-memory-utilization=0.9"), image)
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "runs its image's own entrypoint" in message and image in message
    script = f"docker run -d --net=host {image} {QAT} --max-model-len=8192\n"
    with pytest.raises(ReadError, match="give --entrypoint"):
        script_launches(script)


@pytest.mark.parametrize(
    "image",
    ["vllm/vllm-openai:v0.27.1", "docker.io/vllm/vllm-openai@sha256:" + "a" * 64,
     "index.docker.io/vllm/vllm-openai:v0.27.1", "index.docker.io/vllm/vllm-tpu:v0.27.0"],
)  # fmt: skip
def test_official_images_are_known_by_their_full_reference(image: str) -> None:
    command = "vllm serve " if "tpu" in image else ""
    script = f"docker run -d --net=host {image} {command}{QAT} --max-model-len=8192\n"
    (launch,) = script_launches(script)
    assert launch.argv[0] == QAT


def test_v1_env_froms_bring_names_the_reader_cannot_see() -> None:
    # A Secret's keys become variables (VLLM_PLUGINS, PYTHONPATH, ...) by names nobody wrote.
    props = as_v1(l4_with(["vllm", "serve"], serve_line()))
    props["template"]["spec"]["containers"][0]["envFroms"] = [
        {"secretRef": {"localObjectReference": {"name": "vllm-env"}}}
    ]
    (message,) = violations(vllm_server_readable, V1_SERVICE, props)
    assert "its env are not known" in message
