"""The config namespaces a stack may use, and the provider keys pulumi-gcp really reads."""

from __future__ import annotations

import inspect
import re
from collections.abc import Collection
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from serving.stack_config import ConfigKeyError, project_config


def _provider_keys(vars_module: ModuleType) -> frozenset[str]:
    """The config keys a generated Pulumi SDK reads (`__config__.get...('key')` in its
    `config/vars.py`)."""
    return frozenset(re.findall(r"__config__\.get\w*\('(\w+)'\)", inspect.getsource(vars_module)))


@cache
def gcp_keys() -> frozenset[str]:
    """Every `gcp:` config key of the installed pulumi-gcp provider (its `config/vars.py`)."""
    from pulumi_gcp.config import vars as gcp_vars

    return _provider_keys(gcp_vars)


@cache
def docker_keys() -> frozenset[str]:
    """Every `docker:` config key of the installed pulumi-docker provider (its
    `config/vars.py`)."""
    from pulumi_docker.config import vars as docker_vars

    return _provider_keys(docker_vars)


def namespaces() -> dict[str, Collection[str] | None]:
    """Namespaces other than the project's: the gcp and docker providers (their keys) and
    Pulumi's own (any key)."""
    return {"gcp": gcp_keys(), "pulumi": None, "docker": docker_keys()}


class StackFileError(ValueError):
    """A stack file that cannot be read; the message names the file and the problem."""


def config_block(path: Path, shown: str | None = None) -> dict[str, Any]:
    """The `config:` mapping of a stack file (namespaced keys), unvalidated. The one reader of
    stack files' YAML; raises StackFileError with one message naming the file as `shown`
    (default: its name)."""
    shown = shown or path.name
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise StackFileError(f"{shown}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise StackFileError(f"{shown}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise StackFileError(f"{shown}: not valid YAML{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise StackFileError(f"{shown}: expected a mapping with a 'config:' block")
    config = data.get("config") or {}
    if not isinstance(config, dict):
        raise StackFileError(f"{shown}: 'config:' must be a mapping of keys to values")
    return {str(key): value for key, value in config.items()}


def read_stack_file(path: Path, project: str) -> dict[str, Any]:
    """The project's keys from `Pulumi.<stack>.yaml` (without the prefix), with every other
    namespace checked as the program checks it. Raises StackFileError with one message."""
    config = config_block(path)
    try:
        return project_config(config, project, namespaces())
    except ConfigKeyError as exc:
        raise StackFileError(f"{path.name}: {exc}") from None
