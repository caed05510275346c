"""The provider key lists of `serving.config.stack_file`, read as text without importing Pulumi,
are the ones the installed SDKs' `config/vars.py` modules read; a package without that file is
refused by name."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from serving.config import stack_file
from serving.config.stack_file import PROVIDER_KEY, ProviderKeysError, provider_keys


@pytest.mark.parametrize("package", ["pulumi_gcp", "pulumi_docker"])
def test_the_key_sets_are_those_of_the_imported_sdk(package: str) -> None:
    """The old method (import `<package>.config.vars`, read its source) gives the same set."""
    # As the SDK's own package imports it (`pulumi_gcp.config` replaces itself on import).
    from pulumi_docker.config import vars as docker_vars
    from pulumi_gcp.config import vars as gcp_vars

    imported = {"pulumi_gcp": gcp_vars, "pulumi_docker": docker_vars}[package]
    expected = frozenset(re.findall(PROVIDER_KEY, inspect.getsource(imported)))
    assert len(expected) > 3
    assert provider_keys(package) == expected


def test_gcp_and_docker_keys_use_their_packages() -> None:
    assert stack_file.gcp_keys() == provider_keys("pulumi_gcp")
    assert stack_file.docker_keys() == provider_keys("pulumi_docker")
    assert "impersonateServiceAccount" in stack_file.gcp_keys()
    assert "registryAuth" in stack_file.docker_keys()


def test_reading_the_keys_imports_no_pulumi() -> None:
    code = (
        "import sys\n"
        "from serving.config.stack_file import provider_keys\n"
        "assert provider_keys('pulumi_gcp') and provider_keys('pulumi_docker')\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0].startswith('pulumi'))\n"
        "assert loaded == [], loaded\n"
    )
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True, timeout=60)


def make_package(root: Path, name: str, vars_text: str | None) -> None:
    (root / name / "config").mkdir(parents=True)
    (root / name / "__init__.py").write_text("raise ImportError('must not be imported')\n")
    if vars_text is not None:
        (root / name / "config" / "vars.py").write_text(vars_text)


def test_a_package_without_config_vars_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_package(tmp_path, "fake_provider_a", None)
    make_package(tmp_path, "fake_provider_b", "x = 1\n")
    make_package(tmp_path, "fake_provider_c", "def f():\n    return __config__.get('zone')\n")
    (tmp_path / "fake_module.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ProviderKeysError, match=r"fake_provider_a: config/vars\.py not found"):
        provider_keys("fake_provider_a")
    with pytest.raises(ProviderKeysError, match=r"fake_provider_b: config/vars\.py reads no"):
        provider_keys("fake_provider_b")
    with pytest.raises(ProviderKeysError, match="fake_module: not installed as a package"):
        provider_keys("fake_module")
    with pytest.raises(ProviderKeysError, match="no_such_provider_pkg: not installed"):
        provider_keys("no_such_provider_pkg")
    assert provider_keys("fake_provider_c") == frozenset({"zone"})
    assert "fake_provider_c" not in sys.modules
