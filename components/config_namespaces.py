"""The config namespaces a stack may use, and the provider keys pulumi-gcp really reads."""

from __future__ import annotations

import inspect
import re
from collections.abc import Collection, Mapping
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from serving.config.inputs import NotRegularFileError, read_regular
from serving.config.stack_config import ConfigKeyError, project_config
from serving.config.stack_yaml import MAX_BYTES, Secure, StackYamlError, config_of, load_document


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
    """A stack file that cannot be read; the message names the file and the problem (redacted:
    a key or value it quotes may be a credential)."""

    def __init__(self, message: str) -> None:
        from endpoint.redact import redact

        super().__init__(redact(message, limit=None, by_name=False))


def read_bounded(path: Path, shown: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (a FIFO, a device or a folder is
    refused before it is opened), or StackFileError naming it as `shown`."""
    try:
        data = read_regular(path, limit)
    except NotRegularFileError:
        raise StackFileError(f"{shown}: not a regular file") from None
    except OSError as exc:
        raise StackFileError(f"{shown}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise StackFileError(f"{shown}: larger than {limit // 1024} KiB; not a stack file")
    return data


def parse_config(data: bytes, shown: str, project: str) -> dict[str, Any]:
    """The `config:` block of a stack file's bytes, read as the Pulumi CLI reads it
    (:mod:`serving.config.stack_yaml`): namespaced keys, values as the CLI hands them to the
    program,
    `secure:` values as :class:`serving.config.stack_yaml.Secure`."""
    try:
        return config_of(load_document(data), project)
    except StackYamlError as exc:
        raise StackFileError(f"{shown}: {exc}") from None


def config_block(path: Path, project: str, shown: str | None = None) -> dict[str, Any]:
    """The `config:` mapping of a stack file (namespaced keys), unvalidated. The one reader of
    stack files; raises StackFileError with one message naming the file as `shown`
    (default: its name)."""
    shown = shown or path.name
    return parse_config(read_bounded(path, shown), shown, project)


def secret_keys(config: Mapping[str, Any]) -> list[str]:
    """The keys whose values are `secure:` (only the Pulumi CLI can decrypt them)."""
    return sorted(k for k, v in config.items() if isinstance(v, Secure))


def read_stack_file(path: Path, project: str) -> dict[str, Any]:
    """The project's keys from `Pulumi.<stack>.yaml` (without the prefix), with every other
    namespace checked as the program checks it. A project key holding a `secure:` value is
    refused: what it holds cannot be checked without the CLI. Raises StackFileError."""
    config = config_block(path, project)
    try:
        values = project_config(config, project, namespaces())
    except ConfigKeyError as exc:
        raise StackFileError(f"{path.name}: {exc}") from None
    hidden = secret_keys(values)
    if hidden:
        raise StackFileError(
            f"{path.name}: config key(s) {', '.join(map(repr, hidden))} hold a secure: value, "
            "which only the Pulumi CLI can decrypt, so this command cannot check them; these "
            "settings are not secrets (credentials live in Secret Manager): set them in plain "
            "text"
        )
    return values
