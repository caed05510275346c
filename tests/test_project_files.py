"""Project files agree with the settings model: no key, type or default written twice by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from scripts import config_schema
from serving.config.settings import config_keys, load_settings
from tests.pulumi_harness import ROOT, stack_config


def test_pulumi_yaml_config_schema_is_generated_from_settings() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    generated = yaml.safe_load(config_schema.yaml_block())["config"]
    assert project["config"] == generated
    assert set(project["config"]) == set(config_keys())
    for key, schema in project["config"].items():
        assert schema["type"] in {"string", "integer", "boolean", "array"}, key
        assert schema["description"], key
    assert project["runtime"]["options"]["virtualenv"] == ".venv"
    assert "backend" not in project  # `pulumi login --local` here, a GCS bucket in CI


def test_the_docs_document_every_key() -> None:
    reference = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    for key in config_keys():
        assert f"| `{key}` |" in reference, key


def test_stack_files_validate() -> None:
    for path in ROOT.glob("Pulumi.*.yaml"):
        stack = path.name.split(".")[1]
        settings = load_settings(stack_config(stack))
        assert settings.hardware


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/setup\nscripts/check" in ci
    assert "scripts/setup" in readme and "scripts/check" in readme
    assert "requirements.lock" in (ROOT / "scripts" / "setup").read_text()


def test_lock_pins_the_direct_dependencies() -> None:
    lock = (ROOT / "requirements.lock").read_text().splitlines()
    pinned = {line.split("==")[0].lower() for line in lock if "==" in line}
    for name in [
        "pulumi",
        "pulumi-gcp",
        "pulumi-docker",
        "pulumi-policy",
        "httpx",
        "pydantic",
        "pytest",
        "google-auth",
        "prometheus-client",
        "rich",
        "matplotlib",
        "numpy",
    ]:
        assert name in pinned, name


def test_config_schema_script_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "config_schema.py"), "yaml"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert out.stdout.startswith("config:\n")
    assert Path(ROOT / "Pulumi.yaml").exists()
