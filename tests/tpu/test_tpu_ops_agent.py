"""The Ops Agent step of the TPU launcher: pinned, installed after vLLM, harmless to vLLM.

The launcher runs with stub `curl`, `docker`, `dpkg-query` and `systemctl` on PATH; the stub
`curl` serves the metadata server (the launch document), Secret Manager and Google's Ops Agent
repository script (which here only records how it was called). The config path is moved into
the test's folder by editing the launcher's text.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from serving.config.settings import load_settings
from serving.render import monitoring as spec
from serving.render.tpu_startup import FromBucket, OpsAgent, StartupSecrets, render_metadata
from serving.render.vllm import mounted

TPU = {"hardware": "tpu-v6e-1", "image": "vllm/vllm-tpu:v0.27.0", "zone": "us-east5-b"}

CURL = r"""#!/usr/bin/env python3
import base64, json, os, sys
args = sys.argv[1:]
url = [a for a in args if a.startswith("http")][0]
if url.endswith("/attributes/vllm-launch"):
    print(open(os.environ["LAUNCH"]).read())
elif url.endswith("/attributes/model-bucket"):
    print("models-bucket")
elif url.endswith("/health"):
    pass
elif "metadata.google.internal" in url:
    print(json.dumps({"access_token": "ya29.node-token"}))
elif "secretmanager.googleapis.com" in url:
    print(json.dumps({"payload": {"data": base64.b64encode(b"value").decode()}}))
elif url.endswith("add-google-cloud-ops-agent-repo.sh"):
    if os.environ.get("REPO_DOWN"):
        sys.exit(22)
    target = args[args.index("-o") + 1]
    with open(target, "w") as f:
        f.write('echo "repo-script $*" >> "$STEPS"\n')
else:
    sys.exit(22)
"""
DOCKER = """#!/bin/bash
if [[ "$1" == inspect ]]; then exit 1; fi
if [[ "$1" == run ]]; then echo "docker-run" >> "$STEPS"; fi
"""
GCLOUD = """#!/bin/bash
if [[ "$2" == ls ]]; then exit 1; fi
"""
DPKG_QUERY = """#!/bin/bash
if [[ -n "${INSTALLED:-}" ]]; then printf '%s' "$INSTALLED"; else exit 1; fi
"""
SYSTEMCTL = """#!/bin/bash
echo "systemctl $*" >> "$STEPS"
"""


def settings_and_metadata(config_path: Path) -> tuple[str, dict[str, str]]:
    s = load_settings(TPU)
    command = mounted(s, port=s.tpu.serving_port)
    config = spec.ops_agent_config(s.tpu.serving_port, "gemma-tpu-vllm", s.monitoring)
    agent = OpsAgent(version=s.monitoring.monitoring_ops_agent_version, config_yaml=config)
    weights = FromBucket(("gemma-4-12B-it",), "0" * 16)
    metadata = render_metadata(
        command, s.image, StartupSecrets("my-project", "vllm-api-key"), weights, agent
    )
    script = metadata["startup-script"].replace(spec.OPS_AGENT_CONFIG, str(config_path))
    # The node's local directories, moved into the test's folder.
    script = script.replace('"/mnt/', f'"{config_path.parent.parent}/mnt/')
    return config, {**metadata, "startup-script": script}


def run(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str], str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {
        "curl": CURL,
        "docker": DOCKER,
        "gcloud": GCLOUD,
        "dpkg-query": DPKG_QUERY,
        "systemctl": SYSTEMCTL,
    }.items():
        path = bin_dir / name
        path.write_text(body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    steps = tmp_path / "steps.log"
    steps.touch()
    config_path = tmp_path / "etc" / "google-cloud-ops-agent" / "config.yaml"
    config, metadata = settings_and_metadata(config_path)
    (tmp_path / "startup.sh").write_text(metadata["startup-script"])
    (tmp_path / "launch.json").write_text(metadata["vllm-launch"])
    result = subprocess.run(
        ["bash", str(tmp_path / "startup.sh")],
        capture_output=True,
        text=True,
        timeout=30,
        env={
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "STEPS": str(steps),
            "LAUNCH": str(tmp_path / "launch.json"),
            **env,
        },
    )
    written = config_path.read_text() if config_path.exists() else ""
    assert not written or written == config
    return result, steps.read_text().splitlines(), written


def test_shellcheck_passes(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is installed by .ci/run (Debian package shellcheck)"
    _, metadata = settings_and_metadata(tmp_path / "config.yaml")
    path = tmp_path / "startup.sh"
    path.write_text(metadata["startup-script"])
    result = subprocess.run(
        [shellcheck, "--severity=style", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_installs_the_pinned_version_after_vllm_started(tmp_path: Path) -> None:
    result, steps, written = run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert steps == [
        "docker-run",
        "repo-script --also-install --version=2.70.0",
        "systemctl restart google-cloud-ops-agent",
    ]
    receiver = yaml.safe_load(written)["metrics"]["receivers"]["vllm"]
    assert receiver["config"]["scrape_configs"][0]["static_configs"] == [
        {"targets": ["localhost:8000"]}
    ]
    assert "Ops Agent 2.70.0" in result.stdout


def test_the_installed_version_is_not_downloaded_again(tmp_path: Path) -> None:
    result, steps, written = run(tmp_path, INSTALLED="2.70.0~ubuntu22.04")
    assert result.returncode == 0, result.stderr
    assert steps == ["docker-run", "systemctl restart google-cloud-ops-agent"]
    assert written


def test_another_installed_version_is_replaced_by_the_pinned_one(tmp_path: Path) -> None:
    _, steps, _ = run(tmp_path, INSTALLED="2.69.0~ubuntu22.04")
    assert "repo-script --also-install --version=2.70.0" in steps


def test_a_failed_install_leaves_vllm_serving(tmp_path: Path) -> None:
    result, steps, written = run(tmp_path, REPO_DOWN="1")
    assert result.returncode == 0, result.stderr
    assert steps == ["docker-run"]
    assert written == ""
    assert "Ops Agent setup failed: vLLM serves" in result.stderr


@pytest.mark.parametrize("version", ["2.*.*", "latest", "2.70", "2.70.0; rm -rf /"])
def test_only_an_exact_version_is_rendered(version: str) -> None:
    s = load_settings(TPU)
    command = mounted(s, port=s.tpu.serving_port)
    weights = FromBucket(("gemma-4-12B-it",), "0" * 16)
    with pytest.raises(ValueError, match=r"MAJOR\.MINOR\.PATCH"):
        render_metadata(
            command, s.image, StartupSecrets("my-project", "b"), weights, OpsAgent(version, "x")
        )
