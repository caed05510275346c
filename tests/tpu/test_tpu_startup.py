"""The TPU launcher: shellcheck-clean, one text for every stack, no secret in it, and it really
works when run.

The launcher is executed with stub `curl` and `docker` on PATH that play the metadata server
(which serves the launch document), Secret Manager and the Docker engine, so the test sees
exactly what a node would do.
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
from serving.render.tpu_startup import LAUNCHER, StartupSecrets, read_launch, render_metadata
from serving.render.vllm import render
from tests.support import discovery

HF_TOKEN = "hf_" + "T" * 34  # what the fake Secret Manager returns; never in the script
API_KEY = "key-" + "k" * 28
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
elif "metadata.google.internal" in url:
    assert "Metadata-Flavor: Google" in headers, headers
    print(json.dumps({"access_token": "ya29.node-token", "expires_in": 3599}))
elif "secretmanager.googleapis.com" in url:
    assert "Authorization: Bearer ya29.node-token" in headers, headers
    assert "/projects/my-project/secrets/" in url, url
    values = {"hf-token": "HF_TOKEN_VALUE", "vllm-api-key": "API_KEY_VALUE"}
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
        json.dump({"argv": sys.argv[1:], "HF_TOKEN": os.environ.get("HF_TOKEN"),
                   "VLLM_API_KEY": os.environ.get("VLLM_API_KEY")}, f)
"""


def metadata() -> dict[str, str]:
    settings = load_settings(TPU)
    command = render(settings, model_path=settings.model.model, port=8000)
    return render_metadata(
        command, settings.image, StartupSecrets("my-project", "hf-token", "vllm-api-key")
    )


def script() -> str:
    return metadata()["startup-script"]


def _write(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The launcher and its launch document on disk, and the stub environment."""
    (tmp_path / "launch.json").write_text(metadata()["vllm-launch"])
    path = tmp_path / "startup.sh"
    path.write_text(script())
    env = {
        **os.environ,
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "DOCKER_LOG": str(tmp_path / "docker.json"),
        "LAUNCH": str(tmp_path / "launch.json"),
    }
    return path, env


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
    which names the secrets but holds no value."""
    data = metadata()
    assert data["startup-script"] == LAUNCHER and set(data) == {"startup-script", "vllm-launch"}
    launch = read_launch(data["vllm-launch"])
    assert launch["secrets"] == {"HF_TOKEN": "hf-token", "VLLM_API_KEY": "vllm-api-key"}
    assert launch["command"] == ["vllm", "serve"] and launch["image"] == "vllm/vllm-tpu:v0.27.0"
    assert "hf_" not in data["vllm-launch"] and "hf_" not in LAUNCHER


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda d: d.update(command=["sh", "-c", "vllm serve"]), "'command'"),
        (lambda d: d.update(args="--port=1"), "'args'"),
        (lambda d: d["secrets"].update(HF_TOKEN="a/b"), "'secrets'"),
        (lambda d: d.update(extra=1), "has keys"),
        (lambda d: d.update(opsAgent={"version": "latest", "config": ""}), "'opsAgent'"),
    ],
)
def test_a_launch_of_another_shape_is_refused_by_key(edit: Any, named: str) -> None:
    document = json.loads(metadata()["vllm-launch"])
    edit(document)
    with pytest.raises(ValueError, match=named):
        read_launch(json.dumps(document))


def _stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text(body.replace("HF_TOKEN_VALUE", HF_TOKEN).replace("API_KEY_VALUE", API_KEY))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_boot_reads_secrets_and_starts_vllm_without_leaking_them(tmp_path: Path) -> None:
    _stub(tmp_path, "curl", CURL)
    _stub(tmp_path, "docker", DOCKER)
    log = tmp_path / "docker.json"
    path, env = _write(tmp_path)
    result = subprocess.run(
        ["bash", str(path)], capture_output=True, text=True, env=env, timeout=30
    )
    assert result.returncode == 0, result.stderr
    run = json.loads(log.read_text())
    # Secrets reach the container by environment, never by argument or output.
    assert run["HF_TOKEN"] == HF_TOKEN and run["VLLM_API_KEY"] == API_KEY
    assert "--env=HF_TOKEN" in run["argv"] and "--env=VLLM_API_KEY" in run["argv"]
    everything = result.stdout + result.stderr + json.dumps(run["argv"])
    assert HF_TOKEN not in everything and API_KEY not in everything
    # The arguments arrive intact: the image, then `serve`, and the JSON in one argument.
    argv = run["argv"]
    assert argv[
        argv.index("vllm/vllm-tpu:v0.27.0") + 1 : argv.index("vllm/vllm-tpu:v0.27.0") + 3
    ] == ["serve", "google/gemma-4-12B-it"]
    spec = [a for a in argv if a.startswith("--speculative-config=")]
    assert json.loads(spec[0].split("=", 1)[1])["num_speculative_tokens"] == 3
    assert "--tensor-parallel-size=1" in argv


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
    assert HF_TOKEN not in result.stdout + result.stderr
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
    assert len(urls) == 2
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
