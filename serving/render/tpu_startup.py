"""The TPU node's launch: one fixed launcher script and a JSON launch document beside it.

A node's metadata carries two keys (:func:`render_metadata`): `startup-script` is
:data:`LAUNCHER`, the same text for every stack, and `vllm-launch` is a JSON document with the
image, the command and argument lists, the project, the Secret Manager secret ids (not values)
and the Ops Agent to install. The launcher runs it with argument lists, so no shell reads a
value of the document, and reads the secrets at boot (docs/deploy/tpu.md: an empty API key
stops the boot). :func:`read_launch` checks a document's shape (the policy pack reads nodes
with it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from serving.render.monitoring import OPS_AGENT_CONFIG, OPS_AGENT_REPO_SCRIPT
from serving.render.vllm import VllmCommand

CONTAINER_NAME = "vllm"
LAUNCH_KEY = "vllm-launch"
#: `docker run` options of every node: the TPU devices need --privileged (vLLM's TPU guide:
#: `docker run --privileged --net host --shm-size=16G`).
DOCKER_OPTIONS = (
    "--detach", f"--name={CONTAINER_NAME}", "--restart=unless-stopped", "--privileged",
    "--net=host", "--shm-size=10gb",
)  # fmt: skip
SECRET_ENV = ("HF_TOKEN", "VLLM_API_KEY")
_VERSION = r"[0-9]+\.[0-9]+\.[0-9]+"
_SECRET_ID = r"[A-Za-z0-9_-]{1,255}"
_PROJECT = r"[a-z][a-z0-9.:-]{4,61}[a-z0-9]"

#: The node's startup script: fixed text, so the policy pack compares it whole.
LAUNCHER = rf"""#!/bin/bash
# gemma4-vllm's TPU launcher (serving/render/tpu_startup.py): the same text on every node.
# It runs the launch in the metadata key {LAUNCH_KEY} with argument lists, through no shell.
# Holds no secret: tokens are read from Secret Manager at boot and never printed.
exec python3 -I - <<'LAUNCHER'
import base64, json, os, re, subprocess, sys, tempfile

METADATA = "http://metadata.google.internal/computeMetadata/v1/instance/"
CREDENTIAL_HEADER = "Authorization"  # named apart: the preview's redactor masks header values
ACCESS = "https://secretmanager.googleapis.com/v1/projects/{{}}/secrets/{{}}/versions/latest:access"


def curl(url, *options):
    argv = ["curl", "--silent", "--fail", "--retry", "5", *options, url]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def read_secret(project, secret):
    token = curl(METADATA + "service-accounts/default/token", "-H", "Metadata-Flavor: Google")
    header = CREDENTIAL_HEADER + ": Bearer " + json.loads(token)["access_token"]
    body = json.loads(curl(ACCESS.format(project, secret), "-H", header))
    return base64.b64decode(body["payload"]["data"]).decode()


def ops_agent(version, config):
    if not re.fullmatch(r"{_VERSION}", version):
        raise ValueError("Ops Agent version is not MAJOR.MINOR.PATCH")
    query = ["dpkg-query", "-W", "-f=${{Version}}", "google-cloud-ops-agent"]
    installed = subprocess.run(query, capture_output=True, text=True).stdout
    if not installed.startswith(version):
        repo = tempfile.mkstemp(suffix=".sh")[1]
        curl("{OPS_AGENT_REPO_SCRIPT}", "--show-error", "-o", repo)
        subprocess.run(["bash", repo, "--also-install", "--version=" + version], check=True)
    os.makedirs(os.path.dirname("{OPS_AGENT_CONFIG}"), exist_ok=True)
    with open("{OPS_AGENT_CONFIG}", "w") as f:
        f.write(config)
    subprocess.run(["systemctl", "restart", "google-cloud-ops-agent"], check=True)


launch = json.loads(curl(METADATA + "attributes/{LAUNCH_KEY}", "-H", "Metadata-Flavor: Google"))
image, command, secrets = launch["image"], launch["command"], launch["secrets"]
if subprocess.run(["docker", "inspect", "{CONTAINER_NAME}"], capture_output=True).returncode == 0:
    subprocess.run(["docker", "rm", "--force", "{CONTAINER_NAME}"], capture_output=True, check=True)
subprocess.run(["docker", "pull", "--quiet", image], capture_output=True, check=True)
env = dict(os.environ)
for name, secret in secrets.items():
    if not re.fullmatch(r"{_SECRET_ID}", secret):
        sys.exit("secret id of " + name + " is not a Secret Manager id")
    env[name] = read_secret(launch["project"], secret)
if not env["VLLM_API_KEY"].strip():
    sys.exit(
        "vLLM API key secret '" + secrets["VLLM_API_KEY"] + "' is empty: refusing to start vLLM "
        "without authentication. Add a non-empty version (gcloud secrets versions add "
        + secrets["VLLM_API_KEY"] + " --data-file=-) and reboot the node."
    )
options = {list(DOCKER_OPTIONS)!r} + ["--env=" + name for name in secrets]
run = ["docker", "run", *options, "--entrypoint=" + command[0], image, *command[1:]]
subprocess.run([*run, *launch["args"]], env=env, check=True)
print("vLLM container {CONTAINER_NAME} started from " + image, flush=True)
if launch["opsAgent"] is not None:
    try:
        ops_agent(launch["opsAgent"]["version"], launch["opsAgent"]["config"])
        print("Ops Agent " + launch["opsAgent"]["version"] + " scrapes vLLM's metrics")
    except Exception:
        print("Ops Agent setup failed: vLLM serves, its metrics are not collected", file=sys.stderr)
LAUNCHER
"""


@dataclass(frozen=True)
class StartupSecrets:
    """Secret Manager secret ids (not values) the node reads at boot."""

    project: str
    hf_token_secret: str
    api_key_secret: str


@dataclass(frozen=True)
class OpsAgent:
    """The Ops Agent, pinned, with the config that scrapes vLLM's /metrics on localhost."""

    version: str
    config_yaml: str


def render_metadata(
    command: VllmCommand, image: str, secrets: StartupSecrets, ops_agent: OpsAgent | None = None
) -> dict[str, str]:
    """The node metadata: the fixed launcher and the launch document (checked by
    :func:`read_launch`, so what is rendered is what the policy pack accepts)."""
    document = {
        "image": image,
        "command": list(command.command),
        "args": list(command.args),
        "project": secrets.project,
        "secrets": dict(
            zip(SECRET_ENV, (secrets.hf_token_secret, secrets.api_key_secret), strict=True)
        ),
        "opsAgent": None
        if ops_agent is None
        else {"version": ops_agent.version, "config": ops_agent.config_yaml},
    }
    text = json.dumps(document, indent=1)
    read_launch(text)
    return {"startup-script": LAUNCHER, LAUNCH_KEY: text}


#: Each key of the launch document and what it must be.
_KEYS: dict[str, str] = {
    "image": "a string",
    "command": 'the list ["vllm", "serve"]',
    "args": "a list of strings",
    "project": f"a project id ({_PROJECT})",
    "secrets": f"an object of exactly {', '.join(SECRET_ENV)} to Secret Manager ids",
    "opsAgent": 'null or an object of exactly "version" (MAJOR.MINOR.PATCH) and "config" text',
}


def _valid(key: str, value: Any) -> bool:
    if key == "image":
        return isinstance(value, str) and bool(value)
    if key == "command":
        return bool(value == ["vllm", "serve"])
    if key == "args":
        return isinstance(value, list) and all(isinstance(a, str) for a in value)
    if key == "project":
        return isinstance(value, str) and re.fullmatch(_PROJECT, value) is not None
    if key == "secrets":
        return (
            isinstance(value, Mapping)
            and sorted(value) == sorted(SECRET_ENV)
            and all(isinstance(v, str) and re.fullmatch(_SECRET_ID, v) for v in value.values())
        )
    return value is None or (
        isinstance(value, Mapping)
        and sorted(value) == ["config", "version"]
        and isinstance(value["version"], str)
        and re.fullmatch(_VERSION, value["version"]) is not None
        and isinstance(value["config"], str)
    )


def read_launch(text: str) -> dict[str, Any]:
    """The launch document, or ValueError naming the key that is not of the accepted shape."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{LAUNCH_KEY} is not JSON ({exc})") from None
    if not isinstance(document, dict) or sorted(document) != sorted(_KEYS):
        found = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise ValueError(f"{LAUNCH_KEY} has keys {found}; accepted: exactly {sorted(_KEYS)}")
    for key, accepted in _KEYS.items():
        if not _valid(key, document[key]):
            raise ValueError(
                f"{LAUNCH_KEY} key {key!r} is {json.dumps(document[key])[:80]}; accepted: "
                f"{accepted}"
            )
    return document
