"""Render the TPU VM startup script that runs vLLM in the pinned `vllm/vllm-tpu` image.

The script is assembled from lines in code and every value is shell-quoted with `shlex.quote`;
there is no string template, so JSON in an argument (the speculative config) cannot break it.
It holds no secret: at boot it reads the Hugging Face token and the vLLM API key from Secret
Manager with the node's own service account (metadata-server token), hands them to the
container as environment variables by name only (`docker run -e NAME`), and never prints them.
An API key that is empty (or only whitespace) stops the script before the container starts:
vLLM would otherwise serve without authentication.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from serving.render.vllm import VllmCommand

CONTAINER_NAME = "vllm"
SECRET_MANAGER = "https://secretmanager.googleapis.com/v1"
METADATA_TOKEN = (
    "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
)


_EMPTY_KEY = (
    "vLLM API key secret '{secret}' is empty: refusing to start vLLM without authentication. "
    "Add a non-empty version (gcloud secrets versions add {secret} --data-file=-) and reboot "
    "the node."
)


@dataclass(frozen=True)
class StartupSecrets:
    """Secret Manager secret ids (not values) the node reads at boot."""

    project: str
    hf_token_secret: str
    api_key_secret: str


def render_startup_script(
    command: VllmCommand,
    image: str,
    secrets: StartupSecrets,
    ops_agent: OpsAgent | None = None,
) -> str:
    """A bash startup script that (re)starts the vLLM container; safe to run at every boot.

    With `ops_agent`, the Ops Agent is installed after vLLM has started (see
    :func:`ops_agent_lines`)."""
    q = shlex.quote
    options = [
        "--detach",
        f"--name={CONTAINER_NAME}",
        "--restart=unless-stopped",
        "--privileged",
        "--net=host",
        "--shm-size=10gb",
        "--env=HF_TOKEN",
        "--env=VLLM_API_KEY",
        f"--entrypoint={command.command[0]}",
    ]
    arguments = [*command.command[1:], *command.args]
    lines = [
        "#!/bin/bash",
        "# Rendered by gemma4-vllm (serving/render/tpu_startup.py); do not edit on the node.",
        "# Holds no secret: tokens are read from Secret Manager at boot and never printed.",
        "set -euo pipefail",
        "",
        f"readonly PROJECT={q(secrets.project)}",
        f"readonly IMAGE={q(image)}",
        "",
        "access_token() {",
        f"  curl --silent --fail --retry 5 -H 'Metadata-Flavor: Google' {q(METADATA_TOKEN)} \\",
        "    | python3 -c 'import json, sys; print(json.load(sys.stdin)[\"access_token\"])'",
        "}",
        "",
        "read_secret() {",
        "  local token",
        '  token="$(access_token)"',
        '  curl --silent --fail --retry 5 -H "Authorization: Bearer ${token}" \\',
        f'    "{SECRET_MANAGER}/projects/${{PROJECT}}/secrets/$1/versions/latest:access" \\',
        "    | python3 -c 'import base64, json, sys; "
        'sys.stdout.write(base64.b64decode(json.load(sys.stdin)["payload"]["data"]).decode())\'',
        "}",
        "",
        f"if docker inspect {CONTAINER_NAME} >/dev/null 2>&1; then",
        f"  docker rm --force {CONTAINER_NAME} >/dev/null",
        "fi",
        'docker pull --quiet "${IMAGE}" >/dev/null',
        "",
        f'HF_TOKEN="$(read_secret {q(secrets.hf_token_secret)})"',
        f'VLLM_API_KEY="$(read_secret {q(secrets.api_key_secret)})"',
        # vLLM drops an empty key and then serves without authentication (vLLM 0.27.1,
        # entrypoints/openai/api_server.py: `[key for key in (...[envs.VLLM_API_KEY]) if key]`).
        'if [[ -z "${VLLM_API_KEY//[[:space:]]/}" ]]; then',
        f"  echo {q(_EMPTY_KEY.format(secret=secrets.api_key_secret))} >&2",
        "  exit 1",
        "fi",
        "export HF_TOKEN VLLM_API_KEY",
        " \\\n  ".join(["docker run", *map(q, options), '"${IMAGE}"', *map(q, arguments)]),
        "unset HF_TOKEN VLLM_API_KEY",
        f'echo "vLLM container {CONTAINER_NAME} started from ${{IMAGE}}"',
        "",
        *(ops_agent_lines(ops_agent) if ops_agent is not None else []),
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class OpsAgent:
    """The Ops Agent, pinned, with the config that scrapes vLLM's /metrics on localhost."""

    version: str
    config_yaml: str
    repo_script_url: str
    config_path: str


def ops_agent_lines(agent: OpsAgent) -> list[str]:
    """Install the pinned Ops Agent (once) and write its config, after vLLM has started.

    A failure here never stops vLLM: it is reported on the serial console and the script goes
    on, so a node without metrics still serves.
    """
    q = shlex.quote
    if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", agent.version):
        raise ValueError(f"Ops Agent version {agent.version!r} is not MAJOR.MINOR.PATCH")
    # `set -e` does not apply inside a function called from `if`: every step checks itself.
    return [
        "install_ops_agent() {",
        f"  local version={q(agent.version)}",
        "  local installed",
        "  installed=\"$(dpkg-query -W -f='${Version}' google-cloud-ops-agent 2>/dev/null \\",
        '    || true)"',
        '  if [[ "${installed}" != "${version}"* ]]; then',
        "    local repo_script",
        '    repo_script="$(mktemp)" || return 1',
        '    curl --silent --show-error --fail --retry 5 -o "${repo_script}" \\',
        f"      {q(agent.repo_script_url)} || return 1",
        '    bash "${repo_script}" --also-install --version="${version}" || return 1',
        "  fi",
        f"  mkdir -p {q(agent.config_path.rsplit('/', 1)[0])} || return 1",
        f"  printf '%s' {q(agent.config_yaml)} > {q(agent.config_path)} || return 1",
        "  systemctl restart google-cloud-ops-agent || return 1",
        "}",
        "if install_ops_agent; then",
        f'  echo "Ops Agent {agent.version} scrapes vLLM\'s metrics"',
        "else",
        '  echo "Ops Agent setup failed: vLLM serves, its metrics are not collected" >&2',
        "fi",
        "",
    ]


@dataclass(frozen=True)
class RenderedScript:
    """A startup script recognised as this module's rendering: its `docker run` command
    (the only part that varies with the vLLM options) and the variables set before it."""

    docker_run: str
    #: Shell variables in effect at the `docker run` (values of secrets are not known).
    variables: dict[str, str | None]


_DOCKER_BLOCK = re.compile(r"^docker run (?:.*\\\n)*.*$", re.M)


def _value_after(script: str, pattern: str) -> str | None:
    match = re.search(pattern, script, re.M)
    if match is None:
        return None
    try:
        words = shlex.split(match.group(1))
    except ValueError:
        return None
    return words[0] if len(words) == 1 else None


def read_rendered_startup_script(script: str, ops_agent_url: str) -> RenderedScript | None:
    """The script's `docker run` when everything else in it is exactly what
    :func:`render_startup_script` writes for the values it names (project, image, secret
    ids, Ops Agent version, config and `ops_agent_url`); None for any other script.

    The rest of the rendered script (functions, command substitutions, `if` blocks) is
    outside the launch reader's grammar; it is accepted only as this exact text.
    """
    blocks = _DOCKER_BLOCK.findall(script)
    if len(blocks) != 1:
        return None
    project = _value_after(script, r"^readonly PROJECT=(.*)$")
    image = _value_after(script, r"^readonly IMAGE=(.*)$")
    hf = _value_after(script, r'^HF_TOKEN="\$\(read_secret (.*)\)"$')
    api = _value_after(script, r'^VLLM_API_KEY="\$\(read_secret (.*)\)"$')
    if None in (project, image, hf, api):
        return None
    assert project is not None and image is not None and hf is not None and api is not None
    agent: OpsAgent | None = None
    if "install_ops_agent() {" in script:
        version = _value_after(script, r"^  local version=(.*)$")
        config = re.search(r"^  printf '%s' (.*) > (\S+) \|\| return 1$", script, re.M | re.S)
        if version is None or config is None:
            return None
        try:
            (config_yaml,) = shlex.split(config.group(1))
            (config_path,) = shlex.split(config.group(2))
        except ValueError:
            return None
        agent = OpsAgent(version, config_yaml, ops_agent_url, config_path)
    try:
        expected = render_startup_script(
            VllmCommand(command=("vllm",), args=()),
            image,
            StartupSecrets(project, hf, api),
            agent,
        )
    except ValueError:
        return None
    (expected_block,) = _DOCKER_BLOCK.findall(expected)
    marker = "\x00docker-run\x00"
    if script.replace(blocks[0], marker, 1) != expected.replace(expected_block, marker, 1):
        return None
    return RenderedScript(
        docker_run=blocks[0],
        variables={"PROJECT": project, "IMAGE": image, "HF_TOKEN": None, "VLLM_API_KEY": None},
    )
