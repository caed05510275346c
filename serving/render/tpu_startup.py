"""The TPU node's launch: one fixed launcher script and a JSON launch document beside it.

A node's metadata carries three keys (:func:`render_metadata`, and :data:`BUCKET_KEY` from the
stack): `startup-script` is :data:`LAUNCHER`, the same text for every stack; `vllm-launch` is
a JSON document with the image, the command and argument lists, the project, the Secret
Manager secret id (not its value), the checkpoint folders to copy from the model bucket, the
compile cache key and the Ops Agent to install; `model-bucket` names the bucket (known only
once it exists, so kept out of the document the policy pack reads at preview). The launcher
runs everything with argument lists, so no shell reads a value, and checks every value first
against the same table as :func:`read_launch` (the policy pack reads nodes with it), so no
value it refuses reaches a command. Before vLLM starts it copies the checkpoint folders with
`gcloud storage rsync` (parallel, and a reboot copies only what is missing) to
:data:`MODEL_MOUNT_PATH` on the node's disk, and restores the XLA cache from the bucket's
`compile-cache/<key>/` into a local directory (JAX got no cache hits from a `gs://` path:
marin-community/marin #2318) when its :data:`CACHE_MARKER` says it is whole. A cache the bucket
did not hold whole is copied up once vLLM's `/health` answers, the marker last.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from serving.config.checks import IMAGE_REFERENCE, PROJECT_ID
from serving.render.compile_cache import (
    CACHE_MOUNT_PATH,
    CACHE_PREFIX,
    KEY_LENGTH,
    TPU_CACHE_ENV,
    cache_key,
)
from serving.render.monitoring import OPS_AGENT_CONFIG, OPS_AGENT_REPO_SCRIPT
from serving.render.vllm import MODEL_MOUNT_PATH, VllmCommand

CONTAINER_NAME = "vllm"
LAUNCH_KEY = "vllm-launch"
#: The metadata key naming the model bucket the node copies from.
BUCKET_KEY = "model-bucket"
#: The container's literal environment (the cache key reads it): weights and tokenizer are the
#: local copy, so vLLM never reaches the Hub; the JAX cache is the restored local directory.
CONTAINER_ENV = {"HF_HUB_OFFLINE": "1", TPU_CACHE_ENV: CACHE_MOUNT_PATH}
#: The node's copies, mounted at the same paths in the container (weights read-only).
VOLUMES = (
    f"--volume={MODEL_MOUNT_PATH}:{MODEL_MOUNT_PATH}:ro",
    f"--volume={CACHE_MOUNT_PATH}:{CACHE_MOUNT_PATH}",
)
#: How long the launcher waits for vLLM's /health before it gives up saving the cache.
SAVE_WAIT_S = 3600
#: `docker run` options of every node: the TPU devices need --privileged (vLLM's TPU guide:
#: `docker run --privileged --net host --shm-size=16G`).
DOCKER_OPTIONS = (
    "--detach", f"--name={CONTAINER_NAME}", "--restart=unless-stopped", "--privileged",
    "--net=host", "--shm-size=10gb",
)  # fmt: skip
SECRET_ENV = ("VLLM_API_KEY",)
#: The object written after the last file of a saved XLA cache (`compile-cache/<key>/`, files
#: under `xla/`): a node killed while copying up leaves none, so its partial copy is never
#: restored and the next node saves the cache again. Objects appear only once their upload is
#: complete, so what a marker vouches for is whole.
CACHE_FILES, CACHE_MARKER = "xla", "complete"
_VERSION = r"[0-9]+\.[0-9]+\.[0-9]+"
_SECRET_ID = r"[A-Za-z0-9_-]{1,255}"
#: The project id as the settings accept it (serving/config/checks.py), domain-scoped too.
_PROJECT = PROJECT_ID.pattern
#: A Cloud Storage bucket name (cloud.google.com/storage/docs/buckets#naming): dot-separated
#: parts of 1 to 63 lowercase letters, digits, `-` and `_`, each starting and ending with a
#: letter or digit; 3 to 222 characters in all.
_PART = r"[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?"
_BUCKET = rf"(?=.{{3,222}}$)(?:{_PART}\.)*{_PART}"
#: A checkpoint folder (one path segment, no dot first) and an image reference: neither can
#: start with `-`, so neither is ever read as an option of gcloud or docker.
_FOLDER = r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}"
_IMAGE = IMAGE_REFERENCE.pattern
#: Any JSON string; a vLLM argument, whose port (the launcher probes it) is `--port=N`.
_STRING = r'"(?:[^"\\]|\\.)*"'
_ARG = rf'(?!"--port){_STRING}|"--port=[0-9]{{1,5}}"'


def _list(item: str) -> str:
    return rf"\[(?:{item})(?:, (?:{item}))*\]"


#: Each key of the launch document: the pattern its canonical JSON (`json.dumps(value,
#: sort_keys=True)`) must match whole, and what that is in words. One table for both readers:
#: :func:`read_launch` (so the policy pack) and the launcher, which checks every value before
#: anything runs (each reaches a path, a URL or an argument list).
_SHAPES: dict[str, tuple[str, str]] = {
    "image": (
        f'"{_IMAGE}"',
        "an image reference (a letter or digit, then letters, digits, ._/:@-)",
    ),
    "command": (r'\["vllm", "serve"\]', 'the list ["vllm", "serve"]'),
    "args": (rf"\[\]|{_list(_ARG)}", "a list of strings, the port as --port=N"),
    "project": (f'"{_PROJECT}"', f"a project id ({_PROJECT})"),
    "secrets": (
        r"\{" + ", ".join(f'"{n}": "{_SECRET_ID}"' for n in sorted(SECRET_ENV)) + r"\}",
        f"an object of exactly {', '.join(SECRET_ENV)} to Secret Manager ids",
    ),
    "weights": (
        _list(f'"{_FOLDER}"'),
        "a non-empty list of bucket folders (one path segment each)",
    ),
    "cacheKey": (f'"[0-9a-f]{{{KEY_LENGTH}}}"', f"{KEY_LENGTH} lowercase hex digits"),
    "opsAgent": (
        rf'null|\{{"config": {_STRING}, "version": "{_VERSION}"\}}',
        'null or an object of exactly "version" (MAJOR.MINOR.PATCH) and "config" text',
    ),
}

#: The node's startup script: fixed text, so the policy pack compares it whole.
LAUNCHER = rf"""#!/bin/bash
# gemma4-vllm's TPU launcher (serving/render/tpu_startup.py): the same text on every node.
# It runs the launch in the metadata key {LAUNCH_KEY} with argument lists, through no shell.
# Holds no secret: the API key is read from Secret Manager at boot and never printed.
exec python3 -I - <<'LAUNCHER'
import base64, json, os, re, shutil, subprocess, sys, tempfile, time

METADATA = "http://metadata.google.internal/computeMetadata/v1/instance/"
CREDENTIAL_HEADER = "Authorization"  # named apart: the preview's redactor masks header values
ACCESS = "https://secretmanager.googleapis.com/v1/projects/{{}}/secrets/{{}}/versions/latest:access"


def curl(url, *options):
    argv = ["curl", "--silent", "--fail", "--retry", "5", *options, url]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def attribute(key):
    return curl(METADATA + "attributes/" + key, "-H", "Metadata-Flavor: Google")


def read_secret(project, secret):
    token = curl(METADATA + "service-accounts/default/token", "-H", "Metadata-Flavor: Google")
    header = CREDENTIAL_HEADER + ": Bearer " + json.loads(token)["access_token"]
    body = json.loads(curl(ACCESS.format(project, secret), "-H", header))
    return base64.b64decode(body["payload"]["data"]).decode()


def gcloud(*argv, check=False):
    # Every path in argv starts with gs:// or /, so none is read as a flag. Parallel composite
    # uploads stage parts under the bucket's root (gcloud/tmp/parallel_composite_uploads/),
    # outside the one folder this node may write: off, by the property's environment variable
    # (cloud.google.com/sdk/docs/properties; .../storage/docs/parallel-composite-uploads).
    env = dict(os.environ, CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED="False")
    return subprocess.run(["gcloud", "storage", *argv], env=env, check=check).returncode == 0


def sync(source, destination, check=False):
    # Parallel transfers; a reboot copies only what is missing (`gcloud storage rsync`,
    # cloud.google.com/sdk/gcloud/reference/storage/rsync: --recursive walks the folders; no
    # --delete-unmatched-destination-objects: a new revision replaces the node, disk and all).
    return gcloud("rsync", "--recursive", source, destination, check=check)


def exists(url):
    # `gcloud storage ls URL` fails when no object matches (.../reference/storage/ls).
    return subprocess.run(["gcloud", "storage", "ls", url], capture_output=True).returncode == 0


def ops_agent(version, config):
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


try:
    launch = json.loads(attribute("{LAUNCH_KEY}"))
except ValueError:
    sys.exit("metadata {LAUNCH_KEY} is not JSON")
bucket = attribute("{BUCKET_KEY}").strip()
# Every value reaches a path, a URL or an argument list: all are checked before anything runs.
if not re.fullmatch(r"{_BUCKET}", bucket):
    sys.exit("metadata {BUCKET_KEY} is not a Cloud Storage bucket name")
shapes = {_SHAPES!r}
if not isinstance(launch, dict) or sorted(launch) != sorted(shapes):
    sys.exit("metadata {LAUNCH_KEY} has keys other than exactly " + ", ".join(sorted(shapes)))
for key, (pattern, accepted) in shapes.items():
    if not re.fullmatch(pattern, json.dumps(launch[key], sort_keys=True)):
        sys.exit("metadata {LAUNCH_KEY} key " + key + " is not " + accepted)
image, command, secrets = launch["image"], launch["command"], launch["secrets"]
if shutil.which("gcloud") is None:
    sys.exit("gcloud is not on this node's PATH: it copies the weights from gs://" + bucket)
for folder in launch["weights"]:
    os.makedirs("{MODEL_MOUNT_PATH}/" + folder, exist_ok=True)
    sync("gs://" + bucket + "/" + folder, "{MODEL_MOUNT_PATH}/" + folder, check=True)
# Restored only once the marker, written after the last file, says the copy is whole.
cache = "gs://" + bucket + "/{CACHE_PREFIX}/" + launch["cacheKey"]
files, marker = cache + "/{CACHE_FILES}", cache + "/{CACHE_MARKER}"
os.makedirs("{CACHE_MOUNT_PATH}", exist_ok=True)
kept = exists(marker) and sync(files, "{CACHE_MOUNT_PATH}")
print("XLA cache " + ("restored from " if kept else "not in the bucket yet: ") + cache, flush=True)
if subprocess.run(["docker", "inspect", "{CONTAINER_NAME}"], capture_output=True).returncode == 0:
    subprocess.run(["docker", "rm", "--force", "{CONTAINER_NAME}"], capture_output=True, check=True)
subprocess.run(["docker", "pull", "--quiet", image], capture_output=True, check=True)
env = dict(os.environ)
for name, secret in secrets.items():
    env[name] = read_secret(launch["project"], secret)
if not env["VLLM_API_KEY"].strip():
    sys.exit(
        "vLLM API key secret '" + secrets["VLLM_API_KEY"] + "' is empty: refusing to start vLLM "
        "without authentication. Add a non-empty version (gcloud secrets versions add "
        + secrets["VLLM_API_KEY"] + " --data-file=-) and reboot the node."
    )
options = {[*DOCKER_OPTIONS, *VOLUMES]!r} + ["--env=" + name for name in secrets]
options += ["--env=" + name + "=" + value for name, value in {CONTAINER_ENV!r}.items()]
run = ["docker", "run", *options, "--entrypoint=" + command[0], image, *command[1:]]
subprocess.run([*run, *launch["args"]], env=env, check=True)
print("vLLM container {CONTAINER_NAME} started from " + image, flush=True)
if launch["opsAgent"] is not None:
    try:
        ops_agent(launch["opsAgent"]["version"], launch["opsAgent"]["config"])
        print("Ops Agent " + launch["opsAgent"]["version"] + " scrapes vLLM's metrics")
    except Exception:
        print("Ops Agent setup failed: vLLM serves, its metrics are not collected", file=sys.stderr)
if not kept:
    # Saved once vLLM serves: by then it has compiled (and written) every XLA program.
    ports = [a.split("=", 1)[1] for a in launch["args"] if a.startswith("--port=")]
    port = ports[-1] if ports else "8000"  # vLLM's default
    health = ["curl", "--silent", "--fail", "http://localhost:" + port + "/health"]
    deadline = time.monotonic() + {SAVE_WAIT_S}
    while subprocess.run(health, capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            sys.exit("vLLM did not answer /health in {SAVE_WAIT_S} s: the XLA cache is not saved")
        time.sleep(10)
    # Nothing written (the cache off in this image): no marker, which would stop later saves.
    written = any(names for _, _, names in os.walk("{CACHE_MOUNT_PATH}"))
    done = tempfile.mkstemp()[1]  # the marker: an empty file, `gcloud storage cp`'d up last
    saved = written and sync("{CACHE_MOUNT_PATH}", files) and gcloud("cp", done, marker)
    print("XLA cache " + ("saved to " if saved else "not saved to ") + cache, flush=True)
LAUNCHER
"""


@dataclass(frozen=True)
class StartupSecrets:
    """The Secret Manager secret id (not its value) the node reads at boot: the vLLM API key
    (the weights come from the model bucket, so the node needs no Hugging Face token)."""

    project: str
    api_key_secret: str


@dataclass(frozen=True)
class FromBucket:
    """What the node copies from the model bucket before vLLM starts: the checkpoint folders
    (:data:`MODEL_MOUNT_PATH`/<folder>, the path vLLM is given) and its compile cache key."""

    folders: tuple[str, ...]
    cache_key: str


def node_cache_key(command: VllmCommand, image: str, accelerator: str, count: int) -> str:
    """The key of a node's XLA cache: its image, command line, :data:`CONTAINER_ENV` and TPU."""
    return cache_key(
        image=image, argv=command.argv, env=CONTAINER_ENV, accelerator=accelerator, count=count
    )


@dataclass(frozen=True)
class OpsAgent:
    """The Ops Agent, pinned, with the config that scrapes vLLM's /metrics on localhost."""

    version: str
    config_yaml: str


def render_metadata(
    command: VllmCommand,
    image: str,
    secrets: StartupSecrets,
    weights: FromBucket,
    ops_agent: OpsAgent | None = None,
) -> dict[str, str]:
    """The node metadata: the fixed launcher and the launch document (checked by
    :func:`read_launch`, so what is rendered is what the policy pack accepts); the stack adds
    :data:`BUCKET_KEY`."""
    document = {
        "image": image,
        "command": list(command.command),
        "args": list(command.args),
        "project": secrets.project,
        "secrets": dict(zip(SECRET_ENV, (secrets.api_key_secret,), strict=True)),
        "weights": list(weights.folders),
        "cacheKey": weights.cache_key,
        "opsAgent": None
        if ops_agent is None
        else {"version": ops_agent.version, "config": ops_agent.config_yaml},
    }
    text = json.dumps(document, indent=1)
    read_launch(text)
    return {"startup-script": LAUNCHER, LAUNCH_KEY: text}


def read_bucket(value: Any) -> str:
    """The :data:`BUCKET_KEY` metadata value, or ValueError naming it (the launcher stops with
    any other before it copies anything)."""
    if not isinstance(value, str) or re.fullmatch(_BUCKET, value) is None:
        raise ValueError(
            f"metadata {BUCKET_KEY} is {json.dumps(value)[:80]}; accepted: a Cloud Storage "
            "bucket name (3 to 222 characters: dot-separated parts of 1 to 63 lowercase "
            "letters, digits, - and _, each with a letter or digit at both ends)"
        )
    return value


def read_launch(text: str) -> dict[str, Any]:
    """The launch document, or ValueError naming the key that is not of the accepted shape."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{LAUNCH_KEY} is not JSON ({exc})") from None
    if not isinstance(document, dict) or sorted(document) != sorted(_SHAPES):
        found = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise ValueError(f"{LAUNCH_KEY} has keys {found}; accepted: exactly {sorted(_SHAPES)}")
    for key, (pattern, accepted) in _SHAPES.items():
        if re.fullmatch(pattern, json.dumps(document[key], sort_keys=True)) is None:
            raise ValueError(
                f"{LAUNCH_KEY} key {key!r} is {json.dumps(document[key])[:80]}; accepted: "
                f"{accepted}"
            )
    return document
