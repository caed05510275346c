"""The one reader of stack files: the config namespaces a stack may use, and the provider keys
pulumi-gcp and pulumi-docker really read (from their `config/vars.py`, read as text: no Pulumi
import)."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Collection, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from serving.config.inputs import NotRegularFileError, read_regular
from serving.config.stack_config import ConfigKeyError, project_config
from serving.config.stack_yaml import MAX_BYTES, Secure, StackYamlError, config_of, load_document

#: How a generated SDK's `config/vars.py` reads a key: `__config__.get...('key')`.
PROVIDER_KEY = r"__config__\.get\w*\('(\w+)'\)"
#: The largest `config/vars.py` read (pulumi-gcp's is some tens of KiB).
PROVIDER_VARS_MAX_BYTES = 4 * 1024 * 1024


class ProviderKeysError(RuntimeError):
    """A Pulumi provider package whose config key list cannot be read; the message names the
    package and the file."""


def provider_keys(package: str) -> frozenset[str]:
    """The config keys a generated Pulumi SDK reads (`__config__.get...('key')` in its
    `config/vars.py`, found with :func:`importlib.util.find_spec`: a top-level spec imports
    nothing, so the domain imports no Pulumi), or ProviderKeysError naming the package and what
    is missing. A file naming no key is refused: it is not the file the reader knows."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError) as exc:
        raise ProviderKeysError(f"{package}: cannot be located ({exc})") from None
    if spec is None or not spec.submodule_search_locations:
        raise ProviderKeysError(
            f"{package}: not installed as a package; its config keys cannot be read"
        )
    for location in spec.submodule_search_locations:
        source = Path(location) / "config" / "vars.py"
        if not source.is_file():
            continue
        try:
            data = read_regular(source, PROVIDER_VARS_MAX_BYTES)
        except OSError as exc:
            raise ProviderKeysError(f"{source}: cannot be read ({exc})") from None
        if len(data) > PROVIDER_VARS_MAX_BYTES:
            raise ProviderKeysError(
                f"{source}: larger than {PROVIDER_VARS_MAX_BYTES // 1024} KiB; "
                "not a generated config/vars.py"
            )
        keys = frozenset(re.findall(PROVIDER_KEY, data.decode("utf-8", errors="replace")))
        if not keys:
            raise ProviderKeysError(
                f"{package}: config/vars.py reads no config key this reader recognises "
                f"(pattern {PROVIDER_KEY}); its config keys cannot be read"
            )
        return keys
    raise ProviderKeysError(
        f"{package}: config/vars.py not found under "
        f"{', '.join(map(str, spec.submodule_search_locations))}; its config keys cannot be read"
    )


@cache
def gcp_keys() -> frozenset[str]:
    """Every `gcp:` config key of the installed pulumi-gcp provider (its `config/vars.py`)."""
    return provider_keys("pulumi_gcp")


@cache
def docker_keys() -> frozenset[str]:
    """Every `docker:` config key of the installed pulumi-docker provider (its
    `config/vars.py`)."""
    return provider_keys("pulumi_docker")


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


def config_block(path: Path, project: str, shown: str | None = None) -> dict[str, Any]:
    """The `config:` mapping of a stack file, unvalidated, read as the Pulumi CLI reads it
    (:mod:`serving.config.stack_yaml`): namespaced keys, values as the CLI hands them to the
    program, `secure:` values as :class:`serving.config.stack_yaml.Secure`. The one reader of
    stack files; raises StackFileError with one message naming the file as `shown`
    (default: its name)."""
    shown = shown or path.name
    try:
        return config_of(load_document(read_bounded(path, shown)), project)
    except StackYamlError as exc:
        raise StackFileError(f"{shown}: {exc}") from None


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
