"""Which endpoint(s) to talk to, and with which credentials: from a URL given by hand or a
stack's outputs. Every problem is a :class:`TargetError` saying what to pass instead."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from .auth import ApiKeyAuth, AuthStrategy, GoogleIdTokenAuth, NoAuth
from .redact import redact

AuthFactory = Callable[[str], AuthStrategy]
"""Builds the auth strategy for the endpoint URL (e.g. a Google ID token with it as audience)."""

AuthMode = Literal["auto", "id-token", "api-key", "none"]
AUTH_MODES: tuple[AuthMode, ...] = ("auto", "id-token", "api-key", "none")


class TargetError(Exception):
    """No usable endpoint: bad URL, missing stack outputs or credentials settings."""


@dataclass(frozen=True)
class AuthOptions:
    """How to authenticate (the ``--auth``, ``--api-key-env`` and
    ``--impersonate-service-account`` flags of the CLIs)."""

    mode: AuthMode = "auto"
    api_key_env: str | None = None
    impersonate_service_account: str | None = None


@dataclass(frozen=True)
class Target:
    """One endpoint: base URL, served model name and credentials."""

    url: str
    served_model_name: str
    auth: AuthStrategy


_V1_SUFFIX = re.compile(r"/v1(/|$)", re.IGNORECASE)


def check_url(url: str, flag: str = "--url") -> str:
    """``url`` if it is a usable base URL; raises :class:`TargetError` naming ``flag``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetError(f"{flag} must be an http(s) URL with a host, got {redact(url)!r}")
    try:
        _ = parts.port
    except ValueError:
        raise TargetError(f"{flag} has an invalid port: {redact(url)!r}") from None
    if parts.username is not None or parts.password is not None:
        raise TargetError(
            f"{flag} must not carry credentials (user:password@); use --auth api-key with "
            "--api-key-env VAR instead"
        )
    if _V1_SUFFIX.search(parts.path):
        root = url[: url.lower().find("/v1")]
        raise TargetError(
            f"{flag} must be the server's root URL, without /v1 (the paths /v1/..., /health, "
            f"/metrics are added to it): use {redact(root)!r}"
        )
    if parts.query or parts.fragment:
        raise TargetError(f"{flag} must not carry a query or fragment: {redact(url)!r}")
    return url


def auth_for(url: str, options: AuthOptions, default: AuthMode) -> AuthStrategy:
    """The strategy for ``url``: ``options.mode``, or with ``auto`` an API key when
    ``api_key_env`` is set, a Google ID token for ``*.run.app`` URLs or when ``default`` says
    so, none otherwise."""
    mode = options.mode
    if mode == "auto":
        if options.api_key_env:
            mode = "api-key"
        elif default == "id-token" or (urlsplit(url).hostname or "").endswith(".run.app"):
            mode = "id-token"
        else:
            mode = "none"
    if mode == "api-key":
        if not options.api_key_env:
            raise TargetError("--auth api-key needs --api-key-env VAR")
        return ApiKeyAuth(options.api_key_env)
    if mode == "id-token":
        return GoogleIdTokenAuth(
            url, impersonate_service_account=options.impersonate_service_account
        )
    return NoAuth()


def read_stack_outputs(stack: str, cwd: str | None = None) -> dict[str, Any]:
    """``pulumi stack output --json --show-secrets=false -s STACK`` as a dict."""
    if shutil.which("pulumi") is None:
        raise TargetError(
            "the pulumi CLI was not found on PATH; install it "
            "(https://www.pulumi.com/docs/install/) or pass --url and --model instead of -s"
        )
    command = ["pulumi", "stack", "output", "--json", "--show-secrets=false", "-s", stack]
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"could not run {' '.join(command)}: {exc}") from exc
    if done.returncode != 0:
        raise TargetError(
            f"pulumi stack output failed for stack {stack!r}: {redact(done.stderr.strip())}"
        )
    try:
        outputs = json.loads(done.stdout or "{}")
    except ValueError as exc:
        raise TargetError(f"pulumi stack output printed no JSON: {exc}") from exc
    if not isinstance(outputs, dict):
        raise TargetError("pulumi stack output printed JSON that is not an object")
    return outputs


def targets_from_outputs(
    outputs: dict[str, Any], stack: str, options: AuthOptions, model: str | None = None
) -> list[Target]:
    """Targets from a stack's outputs: ``service_url`` (Cloud Run) or ``endpoint_urls`` (TPU)."""
    model = model or outputs.get("served_model_name")
    if not isinstance(model, str) or not model:
        raise TargetError(f"stack {stack!r} has no served_model_name output; pass --model NAME")
    service_url = outputs.get("service_url")
    if isinstance(service_url, str) and service_url:
        check_url(service_url, "the service_url output")
        return [Target(service_url, model, auth_for(service_url, options, default="id-token"))]
    endpoints = outputs.get("endpoint_urls")
    if isinstance(endpoints, list) and endpoints and all(isinstance(u, str) for u in endpoints):
        if options.mode in ("auto", "api-key") and not options.api_key_env:
            secret = outputs.get("api_key_secret", "<api_key_secret output>")
            raise TargetError(
                f"stack {stack!r} serves on TPU endpoints protected by a vLLM API key kept in "
                f"Secret Manager secret {secret!r}; export it into a variable, e.g. "
                f"VLLM_API_KEY=$(gcloud secrets versions access latest --secret={secret}), "
                "and pass --api-key-env VLLM_API_KEY"
            )
        for url in endpoints:
            check_url(url, "an endpoint_urls output")
        return [Target(url, model, auth_for(url, options, default="api-key")) for url in endpoints]
    raise TargetError(
        f"stack {stack!r} has neither a service_url nor an endpoint_urls output; "
        "has it been deployed? (or pass --url and --model)"
    )


def target_from_url(url: str, model: str | None, options: AuthOptions) -> Target:
    """The target for a URL given by hand (``--url``/``--model``)."""
    if not model:
        raise TargetError("--url needs --model NAME (the served model name)")
    check_url(url)
    return Target(url, model, auth_for(url, options, default="none"))


def url_from_outputs(outputs: Mapping[str, Any] | None, keys: Sequence[str]) -> str | None:
    """The first of ``keys`` in a resource's outputs that holds an http(s) URL. A key with dots
    (`data.endpointUrl`) follows nested mappings (a Kubernetes ConfigMap's `data`)."""
    for key in keys:
        value: Any = outputs or {}
        for part in key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            return value
    return None


def resolve_auth(auth: AuthStrategy | AuthFactory | None, url: str) -> AuthStrategy:
    """The strategy for ``url``: given, built by a factory, or a Google ID token (default)."""
    if isinstance(auth, AuthStrategy):
        return auth
    if auth is not None:
        return auth(url)
    return GoogleIdTokenAuth(url)
