"""The TPU launcher: shellcheck-clean, one text for every stack, no secret in it, and it really
works when run.

The launcher is executed with stub `curl`, `gcloud` and `docker` on PATH that play the metadata
server (which serves the launch document and the bucket name), Secret Manager, vLLM's /health,
Cloud Storage and the Docker engine, so the test sees exactly what a node would do. The node's
local directories (/mnt/...) are moved into the test's folder by editing the launcher's text.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from serving.config.settings import load_settings
from serving.render.tpu_startup import (
    LAUNCHER,
    SAVE_WAIT_S,
    FromBucket,
    StartupSecrets,
    node_cache_key,
    read_launch,
    render_metadata,
)
from serving.render.vllm import mounted
from tests.support import discovery

API_KEY = "key-" + "k" * 28  # what the fake Secret Manager returns; never in the script
BUCKET = "gemma-tpu-v6e1-models-bucket-5678"
FOLDERS = ("gemma-4-12B-it", "gemma-4-12B-it-assistant")
TPU = {
    "hardware": "tpu-v6e-1",
    "image": "vllm/vllm-tpu:v0.27.0",
    "zone": "us-east5-b",
    "model": "google/gemma-4-12B-it",
    "speculativeMethod": "mtp",
    "drafter": "google/gemma-4-12B-it-assistant",
    # bf16 weights + drafter leave room for one 8192-token sequence only with an fp8 KV cache.
    "kvCacheDtype": "fp8",
}

CURL = r"""#!/usr/bin/env python3
import base64, json, os, sys
args = sys.argv[1:]
url = [a for a in args if a.startswith("http")][0]
headers = [args[i + 1] for i, a in enumerate(args) if a == "-H"]
if os.environ.get("CURL_LOG"):
    with open(os.environ["CURL_LOG"], "a") as log:
        log.write(url + "\n")
if url.endswith("/attributes/vllm-launch"):
    assert "Metadata-Flavor: Google" in headers, headers
    print(open(os.environ["LAUNCH"]).read())
elif url.endswith("/attributes/model-bucket"):
    assert "Metadata-Flavor: Google" in headers, headers
    print(os.environ.get("BUCKET_NAME", "BUCKET_VALUE"))
elif url == "http://localhost:8000/health":
    sys.exit(22 if os.environ.get("HEALTH_DOWN") else 0)
elif "metadata.google.internal" in url:
    assert "Metadata-Flavor: Google" in headers, headers
    print(json.dumps({"access_token": "ya29.node-token", "expires_in": 3599}))
elif "secretmanager.googleapis.com" in url:
    assert "Authorization: Bearer ya29.node-token" in headers, headers
    assert "/projects/my-project/secrets/" in url, url
    values = {"vllm-api-key": "API_KEY_VALUE"}
    name = url.split("/secrets/")[1].split("/")[0]
    data = base64.b64encode(values[name].encode()).decode()
    print(json.dumps({"name": name, "payload": {"data": data}}))
else:
    sys.exit(22)
"""

DOCKER = r"""#!/usr/bin/env python3
import json, os, sys
if sys.argv[1] == "inspect":
    sys.exit(1)
if sys.argv[1] == "run":
    with open(os.environ["DOCKER_LOG"], "w") as f:
        json.dump({"argv": sys.argv[1:], "VLLM_API_KEY": os.environ.get("VLLM_API_KEY")}, f)
    with open(os.environ["GCLOUD_LOG"], "a") as log:
        log.write(json.dumps(["docker-run"]) + "\n")
    if not os.environ.get("NOTHING_COMPILED"):  # vLLM writes its XLA programs to the cache
        with open(os.path.join(os.environ["XLA_CACHE"], "program"), "w") as f:
            f.write("compiled")
"""
#: Cloud Storage: `ls` (of the cache's marker) succeeds only when CACHE_KEPT is set; an upload
#: fails with UPLOAD_FAILS, or when a parallel composite upload could stage its parts outside the
#: node's folder.
GCLOUD = r"""#!/usr/bin/env python3
import json, os, sys
with open(os.environ["GCLOUD_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
if sys.argv[1:3] == ["storage", "ls"] and not os.environ.get("CACHE_KEPT"):
    sys.exit(1)
if sys.argv[2] in ("rsync", "cp") and sys.argv[-1].startswith("gs://"):
    pcu = os.environ.get("CLOUDSDK_STORAGE_PARALLEL_COMPOSITE_UPLOAD_ENABLED")
    sys.exit(1 if os.environ.get("UPLOAD_FAILS") or pcu != "False" else 0)
"""


def metadata() -> dict[str, str]:
    settings = load_settings(TPU)
    command = mounted(settings, port=8000)
    key = node_cache_key(command, settings.image, "v6e-1", 1)
    return render_metadata(
        command,
        settings.image,
        StartupSecrets("my-project", "vllm-api-key"),
        FromBucket(FOLDERS, key),
    )


def script() -> str:
    return metadata()["startup-script"]


def _write(tmp_path: Path, launch: str | None = None) -> tuple[Path, dict[str, str]]:
    """The launcher (its /mnt directories moved under `tmp_path`, its wait for /health cut to
    none) and its launch document on disk, and the stub environment."""
    (tmp_path / "launch.json").write_text(launch or metadata()["vllm-launch"])
    path = tmp_path / "startup.sh"
    text = script().replace('"/mnt/', f'"{tmp_path}/mnt/')
    path.write_text(text.replace(f"time.monotonic() + {SAVE_WAIT_S}", "time.monotonic()"))
    _stub(tmp_path, "gcloud", GCLOUD)
    env = {
        **os.environ,
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "DOCKER_LOG": str(tmp_path / "docker.json"),
        "GCLOUD_LOG": str(tmp_path / "gcloud.log"),
        "LAUNCH": str(tmp_path / "launch.json"),
        "BUCKET_NAME": BUCKET,
        "XLA_CACHE": str(tmp_path / "mnt" / "compile-cache"),
    }
    return path, env


def _calls(tmp_path: Path) -> list[list[str]]:
    """The gcloud calls (and `docker run`, in order) the boot made."""
    lines = (tmp_path / "gcloud.log").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_shellcheck_passes(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is installed by .ci/run (Debian package shellcheck)"
    path = tmp_path / "startup.sh"
    path.write_text(script())
    result = subprocess.run(
        [shellcheck, "--severity=style", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_one_launcher_for_every_stack_and_the_launch_beside_it() -> None:
    """The script is the module's constant; the stack's values are in the launch document,
    which names the one secret the node reads (the API key: no Hugging Face token) but holds
    no value."""
    data = metadata()
    assert data["startup-script"] == LAUNCHER and set(data) == {"startup-script", "vllm-launch"}
    launch = read_launch(data["vllm-launch"])
    assert launch["secrets"] == {"VLLM_API_KEY": "vllm-api-key"}
    assert launch["command"] == ["vllm", "serve"] and launch["image"] == "vllm/vllm-tpu:v0.27.0"
    assert launch["weights"] == list(FOLDERS) and len(launch["cacheKey"]) == 16
    assert API_KEY not in data["vllm-launch"] and API_KEY not in LAUNCHER


#: Launch documents the package never renders, and the key each is refused by (None: the keys).
REFUSED: list[tuple[Any, str | None]] = [
    (lambda d: d.update(command=["sh", "-c", "vllm serve"]), "command"),
    (lambda d: d.update(args="--port=1"), "args"),
    # The port reaches the /health URL: `localhost:8000@host` would ask another host.
    (lambda d: d["args"].append("--port=8000@evil.example"), "args"),
    (lambda d: d["args"].extend(["--port", "9000"]), "args"),
    (lambda d: d.update(image="--privileged"), "image"),
    (lambda d: d.update(image="vllm/vllm-tpu:v0.27.0 --privileged"), "image"),
    (lambda d: d.update(image="vllm/vllm-tpü:v0.27.0"), "image"),
    (lambda d: d.update(project="my-project/secrets/other"), "project"),
    (lambda d: d["secrets"].update(VLLM_API_KEY="a/b"), "secrets"),
    (lambda d: d["secrets"].update(HF_TOKEN="hf-token"), "secrets"),
    (lambda d: d.update(weights=["../etc"]), "weights"),
    (lambda d: d.update(weights=["a b; rm -rf /"]), "weights"),
    (lambda d: d.update(weights=["$(reboot)"]), "weights"),
    (lambda d: d.update(weights=["-rf"]), "weights"),
    (lambda d: d.update(weights=["gemma/../../etc"]), "weights"),
    (lambda d: d.update(weights=["gemma\n"]), "weights"),
    (lambda d: d.update(weights=["gemmä"]), "weights"),
    (lambda d: d.update(weights="gemma-4-12B-it"), "weights"),
    (lambda d: d.update(weights=[]), "weights"),
    (lambda d: d["weights"].append("b" * 256), "weights"),  # the second folder, too long
    (lambda d: d.update(cacheKey="../other-key"), "cacheKey"),
    (lambda d: d.update(cacheKey="0" * 15), "cacheKey"),
    (lambda d: d.update(cacheKey="A" * 16), "cacheKey"),
    (lambda d: d.update(cacheKey="-" + "0" * 15), "cacheKey"),
    (lambda d: d.update(opsAgent={"version": "latest", "config": ""}), "opsAgent"),
    (lambda d: d.update(opsAgent={"version": "1.2.3"}), "opsAgent"),
    (lambda d: d.update(extra=1), None),
]


def _refused(edit: Any) -> str:
    document = json.loads(metadata()["vllm-launch"])
    edit(document)
    return json.dumps(document)


@pytest.mark.parametrize(("edit", "key"), REFUSED)
def test_a_launch_of_another_shape_is_refused_by_key(edit: Any, key: str | None) -> None:
    with pytest.raises(ValueError, match=f"key '{key}'" if key else "has keys"):
        read_launch(_refused(edit))


@pytest.mark.parametrize(("edit", "key"), REFUSED)
def test_the_launcher_refuses_the_same_launch_before_it_runs_anything(
    tmp_path: Path, edit: Any, key: str | None
) -> None:
    """The node checks every value as the policy pack does, and stops before its first copy,
    container or secret read: no value reaches gcloud or docker, as an option or otherwise."""
    _stub(tmp_path, "curl", CURL)
    _stub(tmp_path, "docker", DOCKER)
    path, env = _write(tmp_path, _refused(edit))
    env["CURL_LOG"] = str(tmp_path / "curl.log")
    result = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env)
    assert result.returncode == 1
    named = f"vllm-launch key {key} is not " if key else "vllm-launch has keys other than"
    assert named in result.stderr
    assert not (tmp_path / "gcloud.log").exists() and not (tmp_path / "docker.json").exists()
    assert "secretmanager" not in (tmp_path / "curl.log").read_text()


def _stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text(body.replace("API_KEY_VALUE", API_KEY))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _run(tmp_path: Path, **extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    _stub(tmp_path, "curl", CURL)
    _stub(tmp_path, "docker", DOCKER)
    path, env = _write(tmp_path)
    result = subprocess.run(
        ["bash", str(path)], capture_output=True, text=True, env={**env, **extra}, timeout=30
    )
    return result, tmp_path / "docker.json"


def test_boot_reads_secrets_and_starts_vllm_without_leaking_them(tmp_path: Path) -> None:
    result, log = _run(tmp_path, CACHE_KEPT="1")
    assert result.returncode == 0, result.stderr
    run = json.loads(log.read_text())
    # The key reaches the container by environment, never by argument or output.
    assert run["VLLM_API_KEY"] == API_KEY and "--env=VLLM_API_KEY" in run["argv"]
    assert not [a for a in run["argv"] if a.startswith("--env=HF_TOKEN")]
    everything = result.stdout + result.stderr + json.dumps(run["argv"])
    assert API_KEY not in everything
    # The arguments arrive intact: the image, then `serve` and the local copy's path, and the
    # JSON in one argument.
    argv = run["argv"]
    assert argv[
        argv.index("vllm/vllm-tpu:v0.27.0") + 1 : argv.index("vllm/vllm-tpu:v0.27.0") + 3
    ] == ["serve", "/mnt/models/gemma-4-12B-it"]
    spec = [a for a in argv if a.startswith("--speculative-config=")]
    assert json.loads(spec[0].split("=", 1)[1]) == {
        "method": "mtp",
        "model": "/mnt/models/gemma-4-12B-it-assistant",
        "num_speculative_tokens": 3,
    }
    assert "--tensor-parallel-size=1" in argv


def test_boot_copies_the_weights_from_the_bucket_and_serves_the_local_copy(
    tmp_path: Path,
) -> None:
    """Each checkpoint folder is copied from the model bucket to the node's disk before vLLM
    starts; the container reads it read-only at the path vLLM is given, offline."""
    result, log = _run(tmp_path, CACHE_KEPT="1")
    assert result.returncode == 0, result.stderr
    calls = _calls(tmp_path)
    copies = [c for c in calls if c[:2] == ["storage", "rsync"] and c[3].startswith("gs://")]
    local = f"{tmp_path}/mnt/models"
    assert copies[:2] == [
        ["storage", "rsync", "--recursive", f"gs://{BUCKET}/{f}", f"{local}/{f}"] for f in FOLDERS
    ]
    assert calls.index(copies[0]) < calls.index(["docker-run"])
    argv = json.loads(log.read_text())["argv"]
    # The node's copy (moved here only for the test) at the same path in the container.
    assert "--volume=/mnt/models:/mnt/models:ro" in argv
    assert "--env=HF_HUB_OFFLINE=1" in argv
    assert not [a for a in argv if "huggingface.co" in a or a.startswith("--revision")]


def _cache(tmp_path: Path) -> tuple[str, str]:
    """The key's folder in the bucket and the node's local cache directory."""
    key = read_launch(metadata()["vllm-launch"])["cacheKey"]
    return f"gs://{BUCKET}/compile-cache/{key}", f"{tmp_path}/mnt/compile-cache"


def test_a_kept_xla_cache_is_restored_at_its_key_and_not_saved_again(tmp_path: Path) -> None:
    result, log = _run(tmp_path, CACHE_KEPT="1")
    assert result.returncode == 0, result.stderr
    cache, local = _cache(tmp_path)
    calls = _calls(tmp_path)
    assert ["storage", "ls", cache + "/complete"] in calls
    restore = ["storage", "rsync", "--recursive", cache + "/xla", local]
    assert calls.index(restore) < calls.index(["docker-run"])
    assert not [c for c in calls if c[1:2] in (["rsync"], ["cp"]) and c[-1].startswith(cache)]
    argv = json.loads(log.read_text())["argv"]
    assert "--volume=/mnt/compile-cache:/mnt/compile-cache" in argv
    assert "--env=VLLM_XLA_CACHE_PATH=/mnt/compile-cache" in argv
    assert "XLA cache restored from " + cache in result.stdout


def test_a_cache_without_its_marker_is_never_restored_and_is_saved_marker_last(
    tmp_path: Path,
) -> None:
    """A node killed while copying up leaves files but no marker: the next node restores
    nothing, saves once vLLM is healthy (no parallel composite upload, whose parts the node
    could not write) and writes the marker after the last file."""
    result, _ = _run(tmp_path, CURL_LOG=str(tmp_path / "curl.log"))
    assert result.returncode == 0, result.stderr
    cache, local = _cache(tmp_path)
    calls = _calls(tmp_path)
    assert ["storage", "ls", cache + "/complete"] in calls
    assert not [c for c in calls if c[1:2] == ["rsync"] and c[3].startswith(cache)]
    assert calls[-3:-1] == [
        ["docker-run"],
        ["storage", "rsync", "--recursive", local, cache + "/xla"],
    ]
    marker = calls[-1]
    assert marker[:2] == ["storage", "cp"] and marker[3] == cache + "/complete"
    assert Path(marker[2]).read_bytes() == b""
    assert "http://localhost:8000/health" in (tmp_path / "curl.log").read_text().split()
    assert "XLA cache saved to " + cache in result.stdout


def test_a_failed_upload_writes_no_marker(tmp_path: Path) -> None:
    result, _ = _run(tmp_path, UPLOAD_FAILS="1")
    assert result.returncode == 0, result.stderr
    assert not [c for c in _calls(tmp_path) if c[:2] == ["storage", "cp"]]
    assert "XLA cache not saved to " + _cache(tmp_path)[0] in result.stdout


def test_an_empty_cache_is_never_marked_whole(tmp_path: Path) -> None:
    """vLLM wrote nothing to the cache directory: a marker would keep every later node from
    saving the cache it compiles."""
    result, _ = _run(tmp_path, NOTHING_COMPILED="1")
    assert result.returncode == 0, result.stderr
    assert _calls(tmp_path)[-1] == ["docker-run"]
    assert "XLA cache not saved to " + _cache(tmp_path)[0] in result.stdout


def test_no_cache_is_saved_while_vllm_is_not_healthy(tmp_path: Path) -> None:
    """vLLM never answered /health (the wait is cut to none here): nothing is copied up."""
    result, _ = _run(tmp_path, HEALTH_DOWN="1")
    assert result.returncode == 1
    assert "vLLM did not answer /health" in result.stderr
    assert _calls(tmp_path)[-1] == ["docker-run"]


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Bad_Bucket",
        "b; rm -rf /",
        "a",
        "-models",
        "models/../other",
        "models\nother",
        "a" * 64,
        "models..bucket",
        "bücket",
        "$(reboot)",
    ],
)
def test_a_bucket_name_of_another_shape_stops_the_boot(tmp_path: Path, name: str) -> None:
    result, log = _run(tmp_path, BUCKET_NAME=name)
    assert result.returncode == 1
    assert "metadata model-bucket is not a Cloud Storage bucket name" in result.stderr
    assert not log.exists()
    assert not (tmp_path / "gcloud.log").exists()


def _boot(tmp_path: Path, api_key: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    curl = CURL.replace('"API_KEY_VALUE"', json.dumps(api_key))
    _stub(tmp_path, "curl", curl)
    _stub(tmp_path, "docker", DOCKER)
    log = tmp_path / "docker.json"
    path, env = _write(tmp_path)
    result = subprocess.run(
        ["bash", str(path)], capture_output=True, text=True, env=env, timeout=30
    )
    return result, log


@pytest.mark.parametrize("api_key", ["", " ", "\t\n", "\n\n"])
def test_an_empty_api_key_never_starts_vllm(tmp_path: Path, api_key: str) -> None:
    """vLLM serves without authentication when its key is empty: the node must refuse."""
    result, log = _boot(tmp_path, api_key)
    assert result.returncode == 1
    assert not log.exists(), "docker run was called"
    assert "vLLM API key secret 'vllm-api-key' is empty" in result.stderr
    assert "refusing to start vLLM without authentication" in result.stderr
    assert "started from" not in result.stdout


def test_a_real_key_still_starts_vllm(tmp_path: Path) -> None:
    result, log = _boot(tmp_path, "k")
    assert result.returncode == 0, result.stderr
    assert json.loads(log.read_text())["VLLM_API_KEY"] == "k"


def test_secret_manager_calls_match_the_discovery_document(tmp_path: Path) -> None:
    """Each URL the node calls is `secretmanager.projects.secrets.versions.access` as Google's
    secretmanager v1 discovery document defines it (path template and name pattern)."""
    _stub(tmp_path, "curl", CURL)
    _stub(tmp_path, "docker", DOCKER)
    calls = tmp_path / "curl.log"
    path, env = _write(tmp_path)
    env["CURL_LOG"] = str(calls)
    result = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    doc = discovery.load("secretmanager", "v1")
    urls = [u for u in calls.read_text().split() if "secretmanager" in u]
    assert len(urls) == 1
    for url in urls:
        parsed = urlparse(url)
        assert f"{parsed.scheme}://{parsed.netloc}/" == doc["rootUrl"]
        errors = discovery.request_errors(
            doc,
            "secretmanager.projects.secrets.versions.access",
            http_method="GET",
            path=parsed.path,
            query=parse_qs(parsed.query),
        )
        assert errors == []
    assert discovery.request_errors(
        doc,
        "secretmanager.projects.secrets.versions.access",
        http_method="GET",
        path="/v1/projects/p/secrets/s:access",
    )
