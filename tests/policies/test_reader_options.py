"""vLLM options that read files, change what is loaded or what is served, judged on purpose.

Every option of vLLM 0.27.1's `vllm serve` that takes free text (a path, a URL, a module, a
JSON object) is decided: refused naming the option, judged against the served checkpoint or a
set of values, or listed as harmless with the reason. Servers that listen on no TCP port,
`--quantization` against the catalogue, the `docker run` options a startup script may give,
the object-store loaders' variables, and images unknown at preview are tried here with near
variants of each class.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policies._server import read_servers
from policies.l4_qat_checkpoint import l4_qat_checkpoint
from policies.pinned_image import pinned_image
from policies.vllm_server_readable import vllm_server_readable
from serving.launch.vllm_argv import (
    CHECKPOINT_OPTIONS,
    CHOICE_OPTIONS,
    CODE_OPTIONS,
    HARMLESS_OPTIONS,
    INT_OPTIONS,
    JUDGED_OPTIONS,
    NO_HTTP_OPTIONS,
    REFUSED_OPTIONS,
    SNAPSHOT,
    ReadError,
    parse_serve_args,
    script_launches,
)
from tests.policies._fixtures import SERVICE, TPU_DYNAMIC, container, rendered, service, violations
from tests.policies.test_reader_grammar import (
    GOOD,
    QAT,
    TPU_SCRIPT,
    TPU_VM,
    refused,
    shell_service,
    tpu_vm,
)

BF16 = "/mnt/models/gemma-4-12B-it"
INSTANCE = "gcp:compute/instance:Instance"


def _options(snapshot: Any) -> set[str]:
    """Every option of a parser snapshot (canonical names), flags and numbers included."""
    data = json.loads(snapshot.read_text())["serve_options"]
    return {str(spec["dest"]).replace("_", "-") for spec in data.values()} - {"help"}


def _decisions() -> list[set[str]]:
    return [
        set(CODE_OPTIONS),
        set(NO_HTTP_OPTIONS),
        set(REFUSED_OPTIONS),
        set(CHOICE_OPTIONS),
        set(INT_OPTIONS),
        set(CHECKPOINT_OPTIONS),
        set(JUDGED_OPTIONS),
        set(HARMLESS_OPTIONS),
    ]


def test_every_option_flag_and_number_is_decided_once() -> None:
    decided = _decisions()
    undecided = _options(SNAPSHOT) - set().union(*decided)
    assert undecided == set(), f"decide these vLLM options: {sorted(undecided)}"
    for index, group in enumerate(decided):
        for other in decided[index + 1 :]:
            assert group.isdisjoint(other), group & other


def test_decisions_name_only_options_vllm_has() -> None:
    assert set().union(*_decisions()) - _options(SNAPSHOT) == set()


def test_an_option_a_new_snapshot_adds_is_undecided(tmp_path: Any) -> None:
    data = json.loads(SNAPSHOT.read_text())
    for name, spec in (("--enable-new-thing", False), ("--new-size", True)):
        data["serve_options"][name] = {
            **data["serve_options"]["--enforce-eager"],
            "dest": name[2:].replace("-", "_"),
            "takes_value": spec,
        }
    newer = tmp_path / "vllm-9.9.9.json"
    newer.write_text(json.dumps(data))
    assert _options(newer) - set().union(*_decisions()) == {"enable-new-thing", "new-size"}


# --- files that change the prompt or the sampling defaults -------------------------------


@pytest.mark.parametrize(
    "option",
    [
        "--chat-template /tmp/t.jinja",
        "--chat-template=/etc/t.jinja",
        "--chat-template '{{ messages }}'",
        "--chat-template template_chatml",
        f"--chat-template {QAT}/../x/t.jinja",
        f"--chat-template {QAT}/./chat_template.jinja",
        f"--chat-template {BF16}/chat_template.jinja",
        f"--chat-template {QAT}-other/chat_template.jinja",
        f"--chat_template={QAT.upper()}/chat_template.jinja",
        "--chat-template chat_template.jinja",
    ],
)
def test_a_chat_template_outside_the_served_checkpoint_is_refused(option: str) -> None:
    message = refused(f"{GOOD} {option}")
    assert "--chat-template" in message and f"a file inside {QAT}" in message


def test_a_chat_template_of_the_served_checkpoint_is_read() -> None:
    script = f"{GOOD} --chat-template {QAT}/chat_template.jinja"
    assert violations(vllm_server_readable, SERVICE, shell_service(script)) == []


@pytest.mark.parametrize(
    "value", ["/tmp/gen", "/mnt/models", f"{BF16}", f"{QAT}/..", "hf", "Auto", f"{QAT}/sub"]
)
def test_a_generation_config_from_elsewhere_is_refused(value: str) -> None:
    message = refused(f"{GOOD} --generation-config {value}")
    assert "--generation-config" in message and "accepted: auto, vllm" in message


@pytest.mark.parametrize("value", ["auto", "vllm", QAT, f"{QAT}/"])
def test_a_generation_config_that_is_the_checkpoints_or_none_is_read(value: str) -> None:
    script = f"{GOOD} --generation-config={value}"
    assert violations(vllm_server_readable, SERVICE, shell_service(script)) == []


@pytest.mark.parametrize(
    "value", [QAT, f"{QAT}/", f"{QAT}//", "/mnt/models/./gemma-4-12B-it-qat-w4a16-ct"]
)
def test_a_tokenizer_that_is_the_served_path_is_read(value: str) -> None:
    script = f"{GOOD} --tokenizer={value}"
    assert violations(vllm_server_readable, SERVICE, shell_service(script)) == []
    assert (
        violations(vllm_server_readable, SERVICE, shell_service(f"{GOOD} --tokenizer {value}"))
        == []
    )


@pytest.mark.parametrize(
    "value",
    [BF16, f"{QAT}/..", f"{QAT}/../gemma-4-12B-it-qat-w4a16-ct", QAT.lstrip("/"), "/mnt/models",
     "google/gemma-4-12B-it", f"{QAT}-other", QAT.upper(), "/"],
)  # fmt: skip
def test_a_tokenizer_from_another_path_is_refused(value: str) -> None:
    message = refused(f"{GOOD} --tokenizer {value}")
    assert "--tokenizer" in message and "another path than the served model" in message


def test_on_a_tpu_node_no_chat_template_file_is_accepted() -> None:
    for value in ("/tmp/t.jinja", "/root/.cache/huggingface/t.jinja", "google/gemma-4-12B-it"):
        script = TPU_SCRIPT.replace("--port=8000", f"--port=8000 --chat-template={value}")
        (message,) = violations(vllm_server_readable, TPU_VM, tpu_vm(script))
        assert "--chat-template" in message and "downloaded at boot" in message


def test_on_a_tpu_node_the_generation_config_may_only_be_auto_or_vllm() -> None:
    for value, ok in (("auto", True), ("vllm", True), ("/tmp/g", False), ("google/x", False)):
        script = TPU_SCRIPT.replace("--port=8000", f"--port=8000 --generation-config={value}")
        assert (violations(vllm_server_readable, TPU_VM, tpu_vm(script)) == []) is ok, value


# --- the sweep: every other option that reads, imports, fetches or writes ----------------


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("--log-config-file /tmp/log.json", "--log-config-file"),
        ("--log-config /tmp/log.json", "--log-config-file"),
        ('--default-mm-loras \'{"image": "/tmp/l"}\'', "--default-mm-loras"),
        ("--mm-encoder-fp8-scale-path /tmp/s", "--mm-encoder-fp8-scale-path"),
        ("--mm-encoder-fp8-scale-save-path /tmp/s", "--mm-encoder-fp8-scale-save-path"),
        ("--otlp-traces-endpoint http://x:4317", "--otlp-traces-endpoint"),
        ("--tool-server demo", "--tool-server"),
        ("--kv-events-config '{}'", "--kv-events-config"),
        ("--scheduler-cls my.Scheduler", "--scheduler-cls"),
        ("--profiler-config.torch_profiler_dir=/tmp/p", "--profiler-config"),
        ('--compilation-config \'{"cache_dir": "/tmp/c"}\'', "--compilation-config"),
        ("--compilation-config.debug_dump_path=/tmp/d", "--compilation-config"),
        ("-cc.cache_dir=/tmp/c", "--compilation-config"),
        ("--structured-outputs-config.reasoning_parser_plugin=/tmp/p.py",
         "--structured-outputs-config"),
        ("--num-gpu-blocks-override 100000", "--num-gpu-blocks-override"),
        ("--spec-model /tmp/drafter", "--spec-model"),
        ("--spec-method ngram", "--spec-method"),
        ("--spec-tokens 4", "--spec-tokens"),
        ("--ssl-keyfile /k --ssl-certfile /c", "--ssl-keyfile"),
        ("--ssl-certfile /c", "--ssl-certfile"),
        ("--ssl-ca-certs /ca", "--ssl-ca-certs"),
        ("--enable-prompt-embeds", "--enable-prompt-embeds"),
        ("--enable-mm-embeds", "--enable-mm-embeds"),
        ("--default-mm-loras.image=/tmp/l", "--default-mm-loras"),
    ],
)  # fmt: skip
def test_options_that_read_import_fetch_or_write_are_refused(option: str, named: str) -> None:
    assert named in refused(f"{GOOD} {option}")


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("--tokenizer-mode custom", "--tokenizer-mode 'custom'"),
        ("--tokenizer-mode mistral", "--tokenizer-mode 'mistral'"),
        ("--model-impl transformers", "--model-impl 'transformers'"),
        ("--model-impl terratorch", "--model-impl 'terratorch'"),
        ("--distributed-executor-backend my.Executor", "--distributed-executor-backend"),
        ("--distributed-executor-backend ray", "--distributed-executor-backend"),
        ("--data-parallel-backend ray", "--data-parallel-backend"),
        ("--safetensors-load-strategy torchao", "--safetensors-load-strategy"),
        ("--runner pooling", "--runner 'pooling'"),
        ("--convert embed", "--convert 'embed'"),
    ],
)
def test_options_judged_by_value_refuse_other_values(option: str, named: str) -> None:
    message = refused(f"{GOOD} {option}")
    assert named in message and "accepted:" in message


@pytest.mark.parametrize(
    "option",
    ["--tokenizer-mode auto", "--model-impl vllm", "--distributed-executor-backend mp",
     "--runner generate", "--convert none", "--response-role assistant",
     "--served-model-name gemma", "--override-generation-config '{\"temperature\": 0.5}'",
     "--tool-call-parser gemma4", "--safetensors-load-strategy lazy"],
)  # fmt: skip
def test_options_decided_harmless_or_with_accepted_values_are_read(option: str) -> None:
    assert violations(vllm_server_readable, SERVICE, shell_service(f"{GOOD} {option}")) == []


@pytest.mark.parametrize(
    "field", ["draft_model_config", "draft_load_config", "target_model_config", "code_revision"]
)
def test_speculative_config_fields_the_policies_do_not_read_are_refused(field: str) -> None:
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 2, field: {}})
    message = refused(f"{GOOD} --speculative-config '{spec}'")
    assert repr(field) in message
    assert repr(field) in refused(f"{GOOD} --speculative-config.{field}=x")


def test_the_tokenizer_revision_must_be_the_served_revision() -> None:
    base = TPU_SCRIPT.replace("--port=8000", "--port=8000 --revision=abc123")
    for extra, ok in (
        ("--tokenizer-revision=abc123", True),
        ("--tokenizer-revision=refs/pr/7", False),
        ("--tokenizer-revision=main", False),
        ("--tokenizer_revision abc124", False),
    ):
        script = base.replace("--revision=abc123", f"--revision=abc123 {extra}")
        messages = violations(vllm_server_readable, TPU_VM, tpu_vm(script))
        assert (messages == []) is ok, (extra, messages)
        if not ok:
            assert "--tokenizer-revision" in messages[0]


def test_the_rendered_tpu_stack_passes_its_tokenizer_revision() -> None:
    props = rendered("tpu-v6e1").one(TPU_DYNAMIC).inputs
    assert "--tokenizer-revision=" in props["metadata"]["startup-script"]
    assert violations(vllm_server_readable, TPU_DYNAMIC, props) == []


# --- servers that listen on no TCP port --------------------------------------------------


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("--headless", "--headless"),
        ("--headl", "--headless"),
        ("--uds /tmp/vllm.sock", "--uds"),
        ("--uds=/run/v.sock", "--uds"),
        ("--grpc", "--grpc"),
        ("--api-server-count 0", "--api-server-count"),
        ("--api-server-count=-1", "--api-server-count"),
        ("-asc 0", "--api-server-count"),
        ("--data-parallel-multi-port-external-lb", "--data-parallel-multi-port-external-lb"),
        ("--data-parallel-multi-port", "--data-parallel-multi-port-external-lb"),
    ],
)
def test_a_server_that_serves_no_http_port_is_refused(option: str, named: str) -> None:
    message = refused(f"{GOOD} --port 8000 {option}")
    assert named in message and "port" in message
    script = TPU_SCRIPT.replace("--port=8000", f"--port=8000 {option}")
    (message,) = violations(vllm_server_readable, TPU_VM, tpu_vm(script))
    assert named in message


def test_an_api_server_count_of_one_or_more_serves_the_port() -> None:
    for value in ("1", "2"):
        script = f"{GOOD} --api-server-count {value}"
        assert violations(vllm_server_readable, SERVICE, shell_service(script)) == []


def test_uds_cleared_with_none_serves_the_port() -> None:
    script = f"{GOOD} --uds /tmp/s --uds None"
    assert violations(vllm_server_readable, SERVICE, shell_service(script)) == []


# --- --quantization given at load time ---------------------------------------------------


def _l4_serving(path: str, *extra: str) -> dict[str, Any]:
    props = service("l4")
    args = container(props)["args"]
    container(props)["args"] = [
        path if a == QAT else a for a in args if not a.startswith("--quantization")
    ] + [word for words in extra for word in words.split()]
    return props


@pytest.mark.parametrize(
    "extra",
    ["--quantization=fp8", "-q fp8", "--quantization bitsandbytes", "-q=awq",
     "--quantization=compressed-tensors --quantization=gptq", "--quantization experts_int8"],
)  # fmt: skip
def test_a_quantization_other_than_the_checkpoints_is_refused(extra: str) -> None:
    props = _l4_serving(QAT, extra)
    messages = violations(vllm_server_readable, SERVICE, props)
    assert any("--quantization" in m and "'compressed-tensors' or none" in m for m in messages)
    # The QAT and memory policies read the checkpoint as vLLM loads it: no longer the QAT one.
    (message,) = violations(l4_qat_checkpoint, SERVICE, props)
    assert "--quantization" in message
    (server,) = read_servers(SERVICE, props).servers
    assert server.card is None


@pytest.mark.parametrize("extra", ["--quantization=fp8", "-q=compressed-tensors", "-q awq"])
def test_a_bf16_checkpoint_is_not_quantised_at_load_time(extra: str) -> None:
    props = _l4_serving(BF16, extra)
    messages = violations(vllm_server_readable, SERVICE, props)
    assert any("--quantization" in m and "none: omit it" in m for m in messages)
    # The QAT policy still reads the checkpoint's own (bf16) format.
    assert violations(l4_qat_checkpoint, SERVICE, props)


@pytest.mark.parametrize(
    "extra", [(), ("--quantization=compressed-tensors",), ("-q None",), ("-q=",), ("-q fp8 -q=",)]
)
def test_the_checkpoints_own_quantization_or_none_is_read(extra: tuple[str, ...]) -> None:
    props = _l4_serving(QAT, *extra)
    assert violations(vllm_server_readable, SERVICE, props) == []
    assert violations(l4_qat_checkpoint, SERVICE, props) == []


def test_the_drafter_quantization_is_judged_against_the_drafter() -> None:
    spec = json.dumps(
        {"method": "mtp", "model": "/mnt/models/gemma-4-12B-it-assistant",
         "num_speculative_tokens": 2, "quantization": "fp8"}
    )  # fmt: skip
    message = refused(f"{GOOD} --speculative-config '{spec}'")
    assert "--speculative-config quantization 'fp8'" in message


# --- docker run on TPU and other machines ------------------------------------------------


def instance(script: str) -> dict[str, Any]:
    return {
        "machineType": "g2-standard-8",
        "guestAccelerators": [{"type": "nvidia-l4", "count": 1}],
        "metadata": {"startup-script": script},
    }


def test_the_shipped_tpu_script_keeps_its_privileged_container() -> None:
    props = rendered("tpu-v6e1").one(TPU_DYNAMIC).inputs
    assert "--privileged" in props["metadata"]["startup-script"]
    assert violations(vllm_server_readable, TPU_DYNAMIC, props) == []
    privileged = TPU_SCRIPT.replace("--net=host", "--privileged --net=host")
    assert violations(vllm_server_readable, TPU_VM, tpu_vm(privileged)) == []


def test_privileged_is_refused_on_a_gpu_machine() -> None:
    script = TPU_SCRIPT.replace("--net=host", "--privileged --net=host --gpus=all")
    (message,) = violations(vllm_server_readable, INSTANCE, instance(script))
    assert "--privileged" in message and "only a TPU VM" in message
    plain = TPU_SCRIPT.replace("--net=host", "--net=host --gpus=all")
    assert violations(vllm_server_readable, INSTANCE, instance(plain)) == []


@pytest.mark.parametrize(
    "option",
    ["--pid=host", "--pid host", "--ipc=host", "--cap-add=SYS_PTRACE", "--cap-add ALL",
     "--device=/dev/mem", "--security-opt seccomp=unconfined", "--userns=host", "--uts=host",
     "--cgroupns=host", "--add-host=huggingface.co:10.0.0.1", "--dns=10.0.0.1",
     "-w /tmp", "--workdir=/mnt", "--tmpfs /root/.cache", "--cidfile=/etc/x",
     "--net=bridge", "--network=container:other", "-h x", "--log-driver=gelf",
     "--log-opt gelf-address=udp://x:12201"],
)  # fmt: skip
def test_docker_options_that_reach_the_host_are_refused_everywhere(option: str) -> None:
    script = TPU_SCRIPT.replace("--net=host", f"--net=host {option}")
    for type_, props in ((TPU_VM, tpu_vm(script)), (INSTANCE, instance(script))):
        (message,) = violations(vllm_server_readable, type_, props)
        assert option.split("=")[0].split()[0] in message, message
    with pytest.raises(ReadError, match="docker run"):
        script_launches(script)


@pytest.mark.parametrize("machine", ["tpu", "gpu"])
def test_a_server_left_on_dockers_default_network_is_refused(machine: str) -> None:
    # Without --net=host the container is on Docker's bridge network, and publishing a port is
    # refused: nothing on the host's serving port reaches vLLM, whatever its --port says.
    script = TPU_SCRIPT.replace("--net=host", "")
    assert "--net" not in script and "--network" not in script
    type_, props = (TPU_VM, tpu_vm(script)) if machine == "tpu" else (INSTANCE, instance(script))
    (message,) = violations(vllm_server_readable, type_, props)
    assert "without --net=host" in message and "accepted: --net=host" in message
    with pytest.raises(ReadError, match="default bridge network"):
        script_launches(script)
    # The project's own TPU script keeps --net=host and stays readable.
    assert violations(vllm_server_readable, TPU_VM, tpu_vm(TPU_SCRIPT)) == []


OPENAI_RUN = (
    "docker run {} vllm/vllm-openai:v0.27.1 google/gemma-4-12B-it-qat-w4a16-ct "
    "--max-model-len=8192 --port=8000\n"
)


@pytest.mark.parametrize(
    "flags",
    ["-q", "-d -q", "-dq", "-qd", "-iq", "-qit", "-q -i -t", "-dit", "-q --quiet"],
)
def test_no_value_short_flags_swallow_no_word(flags: str) -> None:
    # Docker's -q (--quiet) and the other no-value letters take no value: what follows them
    # is still read as an option (here --privileged, refused on a GPU machine).
    script = OPENAI_RUN.format(f"-d {flags} --privileged --net=host --gpus=all")
    (launch,) = script_launches(script)
    assert launch.privileged
    (message,) = violations(vllm_server_readable, INSTANCE, instance(script))
    assert "--privileged" in message and "only a TPU VM" in message


@pytest.mark.parametrize(
    ("after", "named"),
    [("--publish=80:8000", "publishes"), ("--volume=/:/host", "from the host"),
     ("--cap-add=ALL", "--cap-add"), ("--device=/dev/mem", "--device"),
     ("--pid=host", "--pid"), ("--env-file=/etc/x", "from the host"),
     ("-w /tmp", "-w"), ("-qv/:/host", "from the host"), ("-qdp80:8000", "publishes"),
     ("-qP", "publishes"), ("-qeVLLM_PLUGINS=x -w /tmp", "-w")],
)  # fmt: skip
def test_options_after_a_no_value_flag_are_still_judged(after: str, named: str) -> None:
    for flags in ("-q", "-it", "-dq"):
        script = OPENAI_RUN.format(f"{flags} {after} --net=host")
        with pytest.raises(ReadError, match=named):
            script_launches(script)


def test_a_value_in_a_cluster_is_read_as_docker_reads_it() -> None:
    for flags in (
        "-qeVLLM_PLUGINS=x",
        "-qe VLLM_PLUGINS=x",
        "-de=VLLM_PLUGINS=x",
        "-e=VLLM_PLUGINS=x",
    ):
        (launch,) = script_launches(OPENAI_RUN.format(f"{flags} --net=host"))
        assert launch.env == {"VLLM_PLUGINS": "x"}, flags


@pytest.mark.parametrize("flags", ["-it", "-dit", "-td", "-ti", "-i -t", "-itd --rm", "-q"])
def test_clusters_of_no_value_flags_are_read(flags: str) -> None:
    script = TPU_SCRIPT.replace("docker run -d ", f"docker run {flags} ")
    assert violations(vllm_server_readable, TPU_VM, tpu_vm(script)) == []
    script = OPENAI_RUN.format(f"{flags} --net=host --gpus=all")
    assert violations(vllm_server_readable, INSTANCE, instance(script)) == []


@pytest.mark.parametrize(
    ("flags", "named"),
    [("-x", "-x is not a `docker run` short option"), ("-dX", "-X is not"),
     ("-itz", "-z is not"), ("-d=true", "a value given to the flag -d"),
     ("-q=1", "a value given to the flag -q"), ("-it-", "-- is not")],
)  # fmt: skip
def test_unknown_short_options_and_flag_values_are_refused(flags: str, named: str) -> None:
    with pytest.raises(ReadError, match=re.escape(named)):
        script_launches(OPENAI_RUN.format(f"{flags} --net=host"))


@pytest.mark.parametrize(
    "rest",
    ["vllm serve " + QAT, "/usr/bin/vllm serve " + QAT, "serve " + QAT,
     "python3 -m vllm.entrypoints.openai.api_server --model " + QAT, "bash -c 'vllm serve x'"],
)  # fmt: skip
def test_a_command_after_the_openai_image_is_appended_to_its_entrypoint(rest: str) -> None:
    # vLLM 0.27.1's docker/Dockerfile: ENTRYPOINT ["vllm", "serve"]; Docker appends what
    # follows the image, so `vllm serve vllm serve ...` would run and vLLM refuses it.
    script = f"docker run -d --net=host docker.io/vllm/vllm-openai:v0.27.1 {rest}\n"
    with pytest.raises(ReadError, match="vllm serve"):
        script_launches(script)
    (message,) = violations(vllm_server_readable, INSTANCE, instance(script))
    assert "ENTRYPOINT" in message, message
    fixed = f"docker run -d --net=host --entrypoint=vllm vllm/vllm-openai:v0.27.1 serve {QAT}\n"
    (launch,) = script_launches(fixed)
    assert launch.argv[0] == QAT


def test_container_args_given_to_the_openai_entrypoint_are_not_a_command() -> None:
    props = service("l4")
    c = container(props)
    c.pop("commands", None)
    c["args"] = ["serve", *c["args"]] if c["args"][:1] != ["serve"] else c["args"]
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "ENTRYPOINT" in message and "vllm serve serve" in message


# --- the object-store loaders' variables -------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["S3_ENDPOINT_URL", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "RUNAI_STREAMER_CONCURRENCY",
     "RUNAI_STREAMER_OVERRIDE_ENDPOINT_URL", "RUNAI_STREAMER_OBJECT_PLUGIN", "AWS_ENDPOINT_URL",
     "AWS_ENDPOINT_URL_S3", "AWS_CA_BUNDLE", "AZURE_STORAGE_ACCOUNT_NAME", "Runai_Streamer_X"],
)  # fmt: skip
def test_object_store_loader_variables_are_refused_as_families(name: str) -> None:
    assert name in refused(f"export {name}=x\n{GOOD} --load-format runai_streamer")
    props = service("l4")
    container(props)["envs"].append({"name": name, "value": "x"})
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert name in message and "variables of the libraries under vLLM" in message
    script = TPU_SCRIPT.replace("-e HF_TOKEN", f"-e HF_TOKEN -e {name}=x")
    (message,) = violations(vllm_server_readable, TPU_VM, tpu_vm(script))
    assert name in message


# --- images unknown at preview -----------------------------------------------------------


def test_an_image_unknown_at_preview_fails_closed() -> None:
    props = service("l4")
    container(props)["image"] = UNKNOWN_STRING_VALUE
    (message,) = violations(pinned_image, SERVICE, unknown_checking_proxy(props))
    assert "image is not known at preview" in message and "allowed registry" in message


def test_a_sidecar_image_unknown_at_preview_fails_closed_too() -> None:
    props = service("l4")
    props["template"]["containers"].append({"name": "proxy", "image": UNKNOWN_STRING_VALUE})
    (message,) = violations(pinned_image, SERVICE, unknown_checking_proxy(props))
    assert "'proxy'" in message and "not known at preview" in message


def test_containers_unknown_at_preview_fail_closed() -> None:
    props = service("l4")
    props["template"]["containers"] = UNKNOWN_ARRAY_VALUE
    (message,) = violations(pinned_image, SERVICE, unknown_checking_proxy(props))
    assert "containers are not known at preview" in message


def test_the_shipped_stacks_images_are_known_and_pass() -> None:
    for stack in ("l4", "rtx6000"):
        props = rendered(stack).one(SERVICE).inputs
        assert violations(pinned_image, SERVICE, unknown_checking_proxy(props)) == [], stack


def test_the_reader_reads_known_servers_after_all_of_this() -> None:
    (server,) = read_servers(SERVICE, shell_service(GOOD)).servers
    assert server.card is not None and server.card.qat


# --- the same decisions on GKE Pods ------------------------------------------------------


def _gke_with(*extra: str) -> dict[str, Any]:
    from tests.policies.test_policy_gke import container as pod_container
    from tests.policies.test_policy_gke import vllm as gke_vllm

    d = gke_vllm()
    pod_container(d)["args"] = [*pod_container(d)["args"], *extra]
    return d


@pytest.mark.parametrize(
    "extra",
    [("--uds", "/tmp/s"), ("--headless",), ("--chat-template", "/tmp/t.jinja"),
     ("--generation-config", "/tmp/g"), ("--quantization", "fp8"), ("-q", "awq"),
     ("--log-config-file", "/tmp/l.json"), ("--enable-log-requests",),
     ("--skip-tokenizer-init",), ("--tensor-parallel-size", "2"), ("--nnodes", "2")],
)  # fmt: skip
def test_gke_pods_are_held_to_the_same_option_decisions(extra: tuple[str, ...]) -> None:
    deployment = "kubernetes:apps/v1:Deployment"
    assert violations(vllm_server_readable, deployment, _gke_with()) == []
    (message,) = violations(vllm_server_readable, deployment, _gke_with(*extra))
    assert extra[0] in message or "--quantization" in message or "asks for 2 devices" in message


def test_the_api_server_entry_point_is_held_to_them_too() -> None:
    for option in ("--uds /tmp/s", "--chat-template /tmp/t", "-q fp8", "--disable-log-stats",
                   "-tp 2"):  # fmt: skip
        script = (
            f"python3 -m vllm.entrypoints.openai.api_server --model {QAT} "
            f"--max-model-len=8192 {option}"
        )
        assert refused(script)
    script = f"python3 -m vllm.entrypoints.openai.api_server --model {QAT} --max-model-len=8192"
    assert violations(vllm_server_readable, SERVICE, shell_service(script)) == []


def test_a_gke_pod_image_unknown_at_preview_fails_closed() -> None:
    from tests.policies.test_policy_gke import container as pod_container
    from tests.policies.test_policy_gke import vllm as gke_vllm

    deployment = "kubernetes:apps/v1:Deployment"
    d = gke_vllm()
    assert violations(pinned_image, deployment, unknown_checking_proxy(d)) == []
    pod_container(d)["image"] = UNKNOWN_STRING_VALUE
    messages = violations(pinned_image, deployment, unknown_checking_proxy(d))
    assert any("image is not known at preview" in m for m in messages), messages


# --- flags and numbers ------------------------------------------------------------------


@pytest.mark.parametrize(
    "snapshot", sorted(SNAPSHOT.parent.glob("vllm*.json")), ids=lambda p: p.stem
)
def test_every_shipped_image_option_is_decided_or_refused_as_unknown(snapshot: Any) -> None:
    """The reader parses every image's launch with vLLM 0.27.1's parser: an option another
    image's vLLM has and that one lacks is refused as unknown, so it needs no decision."""
    undecided = _options(snapshot) - set().union(*_decisions())
    assert undecided.isdisjoint(_options(SNAPSHOT))
    for name in sorted(undecided):
        assert f"--{name} is not an option of vLLM 0.27.1's parser" in refused(f"{GOOD} --{name}=1")


@pytest.mark.parametrize(
    "option",
    ["--swap-space 4", "--swap-space=4", "--disable-log-requests", "--swap-space 4 --swap-space 8",
     "--swap_space 4", "--swap-space 4 16"],
)  # fmt: skip
def test_an_option_vllm_no_longer_has_is_named_once_without_follow_on_noise(option: str) -> None:
    # `--swap-space` and `--disable-log-requests` were removed before vLLM 0.27.1: argparse
    # refuses them as unrecognized arguments, the value after them included.
    props = shell_service(f"{GOOD} {option}")
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "is not an option of vLLM 0.27.1's parser" in message
    assert "refuses unknown options at start" in message
    assert "positional" not in message
    assert message.count("is not an option") == 1
    (launch,) = script_launches(f"{GOOD} {option}")
    parsed = parse_serve_args(launch.argv)
    assert parsed.model == QAT and len(parsed.problems) == 1, parsed.problems


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("--skip-tokenizer-init", "--skip-tokenizer-init"),
        ("--skip_tokenizer_init", "--skip-tokenizer-init"),
        ("--skip-tokenizer", "--skip-tokenizer-init"),
        ("--no-skip-tokenizer-init --skip-tokenizer-init", "--skip-tokenizer-init"),
        ("--tokens-only", "--tokens-only"),
        ("--mm-encoder-only", "--mm-encoder-only"),
        ("--enable-log-requests", "--enable-log-requests"),
        ("--enable-log-outputs", "--enable-log-outputs"),
        ("--disable-log-stats", "--disable-log-stats"),
        ("--enable-sleep-mode", "--enable-sleep-mode"),
        ("--allow-credentials", "--allow-credentials"),
        ("--disable-hybrid-kv-cache-manager", "--disable-hybrid-kv-cache-manager"),
        ("--disable-sliding-window", "--disable-sliding-window"),
        ("--skip-mm-profiling", "--skip-mm-profiling"),
        ("-dpe", "--data-parallel-external-lb"),
        ("--data-parallel-hybrid-lb", "--data-parallel-hybrid-lb"),
        ("--data-parallel-rank 0", "--data-parallel-rank"),
        ("-dpr=0", "--data-parallel-start-rank"),
        ("--enable-elastic-ep", "--enable-elastic-ep"),
        ("--enable-lora", "--enable-lora"),
    ],
)
def test_flags_that_change_what_is_served_or_kept_are_refused(option: str, named: str) -> None:
    message = refused(f"{GOOD} {option}")
    assert named in message and "remove it (accepted: leaving it out" in message


def test_a_refused_flag_names_its_negation_where_vllm_has_one() -> None:
    assert "or --no-enable-log-requests;" in refused(f"{GOOD} --enable-log-requests")
    message = refused(f"{GOOD} --disable-log-stats")
    assert "accepted: leaving it out;" in message and "--no-disable-log-stats" not in message


@pytest.mark.parametrize(
    "option",
    ["--no-skip-tokenizer-init", "--skip-tokenizer-init --no-skip-tokenizer-init",
     "--no-enable-log-requests", "--no-allow-credentials", "--no-enable-sleep-mode",
     "--enforce-eager", "--enable-prefix-caching", "--no-enable-prefix-caching",
     "--enable-auto-tool-choice --tool-call-parser gemma4", "--disable-fastapi-docs",
     "--enable-request-id-headers", "--enable-server-load-tracking",
     "--enable-force-include-usage", "--disable-uvicorn-access-log", "--block-size 32",
     "--cpu-offload-gb 4", "--seed 7", "--kv-cache-dtype fp8", "--kv-cache-dtype=auto",
     "-tp 1", "--tensor-parallel-size=1", "-pp 1", "-dp 1", "--nnodes 1", "--node-rank 0",
     "--kv-offloading-backend native", "--performance-mode interactivity",
     "--kv-cache-dtype fp8 --calculate-kv-scales"],
)  # fmt: skip
def test_flags_and_numbers_decided_harmless_or_judged_are_read(option: str) -> None:
    assert violations(vllm_server_readable, SERVICE, shell_service(f"{GOOD} {option}")) == []


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("--kv-cache-dtype nvfp4", "--kv-cache-dtype 'nvfp4'"),
        ("--kv-cache-dtype turboquant_3bit_nc", "--kv-cache-dtype 'turboquant_3bit_nc'"),
        ("--kv-offloading-backend lmcache", "--kv-offloading-backend 'lmcache'"),
        ("--nnodes 2", "--nnodes '2'"),
        ("-n 2", "--nnodes '2'"),
        ("--node-rank 1", "--node-rank '1'"),
        ("-tp 0", "--tensor-parallel-size '0'"),
        ("-tp two", "--tensor-parallel-size 'two'"),
        ("-pp -1", "--pipeline-parallel-size '-1'"),
        ("-dcp 0", "--decode-context-parallel-size '0'"),
    ],
)
def test_numbers_and_choices_judged_by_value_name_what_is_accepted(option: str, named: str) -> None:
    message = refused(f"{GOOD} {option}")
    assert named in message and "accepted:" in message


@pytest.mark.parametrize(
    ("option", "devices"),
    [
        ("-tp 2", 2),
        ("--tensor-parallel-size=4", 4),
        ("--tensor_parallel_size 2", 2),
        ("-pp 2", 2),
        ("--data-parallel-size 2", 2),
        ("-dp 2 -dpl 2", 2),
        ("-pcp 2", 2),
        ("-tp 2 -pp 2", 4),
        ("-tp 1 -tp 2", 2),
    ],
)
def test_a_server_asking_for_more_devices_than_the_resource_has_is_refused(
    option: str, devices: int
) -> None:
    message = refused(f"{GOOD} {option}")
    assert f"asks for {devices} devices" in message and "the 1 nvidia-l4" in message
    assert "accepted: a product of 1 or less" in message


def test_the_same_device_check_holds_on_a_tpu_node() -> None:
    script = TPU_SCRIPT.replace("--port=8000", "--port=8000 -tp 4")
    (message,) = violations(vllm_server_readable, TPU_VM, tpu_vm(script))
    assert "asks for 4 devices" in message and "v6e-1" in message


def test_decode_context_parallelism_reuses_the_tensor_parallel_devices() -> None:
    message = refused(f"{GOOD} -tp 2 -dcp 2")
    assert "asks for 2 devices" in message


@pytest.mark.parametrize("option", ["-dp 2 -dpl 1", "-dpl 2", "--data-parallel-size-local 0"])
def test_data_parallel_ranks_started_elsewhere_are_refused(option: str) -> None:
    message = refused(f"{GOOD} {option}")
    assert "--data-parallel-size-local" in message and "accepted:" in message


# --- values unknown at preview (secrets) -------------------------------------------------


def _secret_service(script: str) -> dict[str, Any]:
    props = shell_service(script)
    container(props)["envs"].append(
        {"name": "API_KEY", "valueSource": {"secretKeyRef": {"secret": "key", "version": "1"}}}
    )
    return props


@pytest.mark.parametrize(
    "option",
    ['--api-key "$API_KEY"', '--api-key="$API_KEY"', '"--api-key=${API_KEY}"',
     '--api-key "${API_KEY}"', '--hf-token "$API_KEY"', '--served-model-name "$API_KEY"'],
)  # fmt: skip
def test_a_harmless_option_may_take_a_quoted_secret(option: str) -> None:
    # --api-key only authenticates clients: its value, one word, cannot change what is served.
    props = _secret_service(f"{GOOD} {option}")
    assert violations(vllm_server_readable, SERVICE, props) == []
    (server,) = read_servers(SERVICE, props).servers
    assert server.model_ref == QAT


@pytest.mark.parametrize(
    ("option", "named"),
    [("--api-key $API_KEY", '"$API_KEY"'), ("--api-key=${API_KEY}", "VLLM_API_KEY"),
     ('--port "$API_KEY"', "no value the reader knows"),
     ('--max-model-len="$API_KEY"', "no value the reader knows"),
     ('--tokenizer "$API_KEY"', "no value the reader knows"),
     ('--chat-template "$API_KEY"', "no value the reader knows"),
     ('"$API_KEY"', "no value the reader knows"),
     ('--api-key "$API_KEY" --max-num-seqs "$API_KEY"', "no value the reader knows")],
)  # fmt: skip
def test_a_secret_elsewhere_or_unquoted_is_refused(option: str, named: str) -> None:
    messages = violations(vllm_server_readable, SERVICE, _secret_service(f"{GOOD} {option}"))
    assert len(messages) == 1 and named in messages[0], messages


@pytest.mark.parametrize(
    "script",
    ['vllm serve "$API_KEY" --max-model-len=8192', f'timeout "$API_KEY" {GOOD}',
     f'env "X=$API_KEY" {GOOD}',
     f'docker run -d --net=host -e "X=$API_KEY" vllm/vllm-openai:v0.27.1 {QAT}',
     f'docker run -d --net=host "$API_KEY" {QAT} --api-key "$API_KEY"',
     f'sh -c "{GOOD} --api-key \\"$API_KEY\\""'],
)  # fmt: skip
def test_a_quoted_secret_that_reaches_no_harmless_option_is_refused(script: str) -> None:
    (message,) = violations(vllm_server_readable, SERVICE, _secret_service(script))
    assert "$API_KEY" in message, message


def _gke_secret(*args: str) -> dict[str, Any]:
    from tests.policies.test_policy_gke import container as pod_container

    d = _gke_with(*args)
    pod_container(d).setdefault("env", []).append(
        {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "api-key"}}}
    )
    return d


def test_a_gke_secret_may_reach_the_api_key_through_the_kubelet() -> None:
    from tests.policies.test_policy_gke import container as pod_container

    deployment = "kubernetes:apps/v1:Deployment"
    for args in (("--api-key=$(API_KEY)",), ("--api-key", "$(API_KEY)")):
        assert violations(vllm_server_readable, deployment, _gke_secret(*args)) == []
    for args in (("--max-model-len=$(API_KEY)",), ("--port", "$(API_KEY)"),
                 ("--tokenizer=$(API_KEY)",)):  # fmt: skip
        (message,) = violations(vllm_server_readable, deployment, _gke_secret(*args))
        assert "$(API_KEY), whose value is not known" in message and "VLLM_API_KEY" in message
    # Expanded by the kubelet before the shell reads it: the secret would be shell code.
    d = _gke_secret()
    pod = pod_container(d)
    pod["command"], pod["args"] = ["sh", "-c"], [f"{GOOD} --api-key=$(API_KEY)"]
    (message,) = violations(vllm_server_readable, deployment, d)
    assert "$(API_KEY), whose value is not known" in message


def test_container_args_with_the_tpu_image_and_no_command_are_not_read() -> None:
    # vllm-tpu has no `vllm serve` entrypoint: without a command its arguments are a program.
    props = service("l4")
    c = container(props)
    c["image"] = "vllm/vllm-tpu:v0.27.0"
    c.pop("commands", None)
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "runs its image's own entrypoint" in message and "vllm/vllm-tpu" in message
