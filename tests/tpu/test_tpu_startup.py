"""The TPU startup script: shellcheck-clean, no secret in it, and it really works when run.

The script is executed with stub `curl` and `docker` on PATH that play the metadata server,
Secret Manager and the Docker engine, so the test sees exactly what a node would do.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from serving.config.settings import load_settings
from serving.render.tpu_startup import StartupSecrets, render_startup_script
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
if "metadata.google.internal" in url:
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


def script() -> str:
    settings = load_settings(TPU)
    command = render(settings, model_path=settings.model.model, port=8000)
    return render_startup_script(
        command, settings.image, StartupSecrets("my-project", "hf-token", "vllm-api-key")
    )


def test_shellcheck_passes(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is installed by .ci/run (Debian package shellcheck)"
    path = tmp_path / "startup.sh"
    path.write_text(script())
    result = subprocess.run(
        [shellcheck, "--severity=style", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_script_names_secrets_but_holds_no_value() -> None:
    text = script()
    assert "secrets/$1/versions/latest:access" in text
    assert "read_secret hf-token" in text and "read_secret vllm-api-key" in text
    assert "hf_" not in text and "set -x" not in text
    assert 'echo "$HF_TOKEN' not in text and "${HF_TOKEN}" not in text


def _stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text(body.replace("HF_TOKEN_VALUE", HF_TOKEN).replace("API_KEY_VALUE", API_KEY))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_boot_reads_secrets_and_starts_vllm_without_leaking_them(tmp_path: Path) -> None:
    _stub(tmp_path, "curl", CURL)
    _stub(tmp_path, "docker", DOCKER)
    log = tmp_path / "docker.json"
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "DOCKER_LOG": str(log)}
    path = tmp_path / "startup.sh"
    path.write_text(script())
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
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "DOCKER_LOG": str(log)}
    path = tmp_path / "startup.sh"
    path.write_text(script())
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
    env = {
        **os.environ,
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "DOCKER_LOG": str(tmp_path / "docker.json"),
        "CURL_LOG": str(calls),
    }
    path = tmp_path / "startup.sh"
    path.write_text(script())
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
