"""mypy reads only the Pulumi SDK subpackages the code imports (pyproject.toml): every one the
code uses is in the list mypy follows, so none of them is silently seen as `Any`."""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SDKS = ("pulumi_gcp", "pulumi_kubernetes")


def _overrides() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    overrides: list[dict[str, Any]] = config["tool"]["mypy"]["overrides"]
    return overrides


def _followed() -> list[str]:
    return [
        str(module)
        for section in _overrides()
        if section.get("follow_imports") == "normal"
        for module in section["module"]
    ]


def _is_module(name: str) -> bool:
    """Whether `sdk.name` is a module or subpackage of the installed SDK (not a class or
    function its `__init__` exports, such as `pulumi_kubernetes.Provider`)."""
    sdk, _, rest = name.partition(".")
    spec = importlib.util.find_spec(sdk)
    assert spec is not None and spec.submodule_search_locations, sdk
    return any(
        (Path(folder) / rest).is_dir() or (Path(folder) / f"{rest}.py").is_file()
        for folder in spec.submodule_search_locations
    )


def _is_followed(module: str, patterns: list[str]) -> bool:
    return any(
        module == p or (p.endswith(".*") and (module + ".").startswith(p[:-1])) for p in patterns
    )


def used_subpackages(files: list[Path], root: Path = ROOT) -> dict[str, str]:
    """`sdk.subpackage` -> a file:line using it: `from sdk import sub`, `import sdk.sub`,
    `from sdk.sub... import x`, and `alias.sub` after `import sdk as alias`."""
    used: dict[str, str] = {}
    for path in files:
        text = path.read_text()
        if not any(sdk in text for sdk in SDKS):  # no import of either can be in it
            continue
        tree = ast.parse(text, str(path))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] in SDKS:
                        if len(parts) > 1:
                            used.setdefault(".".join(parts[:2]), where)
                        elif alias.asname:
                            aliases[alias.asname] = parts[0]
                        else:
                            aliases[parts[0]] = parts[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                parts = node.module.split(".")
                if parts[0] in SDKS:
                    if len(parts) > 1:
                        used.setdefault(".".join(parts[:2]), where)
                    else:
                        for alias in node.names:
                            used.setdefault(f"{parts[0]}.{alias.name}", where)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                where = f"{path.relative_to(root)}:{node.lineno}"
                used.setdefault(f"{aliases[node.value.id]}.{node.attr}", where)
    return used


def _python_files() -> list[Path]:
    """Every Python file of the repository outside hidden folders (`.venv`, `.git`) and
    build outputs."""
    skip = {"build", "site", "node_modules"}
    return [
        path
        for top in sorted(ROOT.iterdir())
        if not top.name.startswith(".") and top.name not in skip
        for path in ([top] if top.suffix == ".py" else sorted(top.rglob("*.py")))
    ]


def test_every_sdk_subpackage_the_code_uses_is_followed_by_mypy() -> None:
    skipped = [s for s in _overrides() if s.get("follow_imports") == "skip"]
    assert skipped and {f"{sdk}.*" for sdk in SDKS} <= set(skipped[0]["module"])
    followed = _followed()
    used = used_subpackages(_python_files())
    assert any(name.startswith("pulumi_gcp.") for name in used)
    missing = {
        name: where
        for name, where in used.items()
        if _is_module(name) and not _is_followed(name, followed)
    }
    assert missing == {}, (
        "add these to the follow_imports = 'normal' list of pyproject.toml, or mypy sees "
        f"them as Any: {missing}"
    )


def test_the_check_finds_a_subpackage_that_is_not_followed(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "import pulumi_kubernetes as k8s\nfrom pulumi_gcp import tpu\n\nk8s.batch.v1.Job\n"
    )
    used = used_subpackages([source], tmp_path)
    followed = _followed()
    assert _is_module("pulumi_gcp.tpu") and not _is_module("pulumi_kubernetes.Provider")
    assert not _is_followed("pulumi_gcp.tpu", followed) and "pulumi_gcp.tpu" in used
    assert (
        not _is_followed("pulumi_kubernetes.batch", followed) and "pulumi_kubernetes.batch" in used
    )
    assert _is_followed("pulumi_gcp.cloudrunv2", followed)
    assert _is_followed("pulumi_gcp", followed)
