""":class:`Deployments` resolves a stack to its settings, its outputs and its endpoints with
their credentials, as ``gemma4 health -s STACK`` does."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from endpoint.auth import (
    ApiKeyAuth,
    AuthStrategy,
    GoogleIdTokenAuth,
    NoAuth,
    SecretManagerApiKeyAuth,
)
from endpoint.targets import Target, TargetError, check_url, read_stack_outputs
from serving.capacity.plan import (
    ROOT,
    PlanError,
    load_stack_settings,
    raw_stack_settings,
    stack_config,
    stack_names,
)
from serving.config.checks import SettingsError
from serving.config.inputs import JsonInputError, read_json
from serving.config.settings import Settings, load_settings

MAX_OUTPUTS_BYTES = 1 << 20
"""A saved ``pulumi stack output --json`` document (a few KiB)."""


class DeploymentError(Exception):
    """A stack, its outputs or its endpoint cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class EndpointOptions:
    """How the server authenticates to the deployed endpoints (as ``python -m healthchecks``)."""

    auth: Literal["auto", "none"] = "auto"
    """auto: each target's own credential; none: no credential (a local or public server)."""
    api_key_env: str | None = None
    impersonate_service_account: str | None = None
    secretmanager_url: str = "https://secretmanager.googleapis.com"


class Deployments:
    """The stacks this server answers for, read from the stack files and their outputs."""

    def __init__(
        self,
        stacks: Sequence[str] = (),
        *,
        root: Path = ROOT,
        outputs_dir: Path | None = None,
        project: str | None = None,
        endpoint: EndpointOptions | None = None,
        token_source: Callable[[], str] | None = None,
        runs_dirs: Sequence[str] = ("runs",),
    ) -> None:
        self.root = root
        known = stack_names(root)
        unknown = [s for s in stacks if s not in known]
        if unknown:
            raise DeploymentError(
                f"unknown stack(s) {', '.join(unknown)}; stacks here: {', '.join(known) or 'none'}"
            )
        self.stacks: tuple[str, ...] = tuple(stacks) or tuple(known)
        self.outputs_dir = outputs_dir
        self._project = project
        self.endpoint = endpoint or EndpointOptions()
        self._token_source = token_source
        self.runs_dirs: tuple[Path, ...] = tuple(_inside(root, r) for r in runs_dirs)

    # Stack files ----------------------------------------------------------------------------

    def check_stack(self, stack: str) -> str:
        if stack not in self.stacks:
            raise DeploymentError(
                f"stack {stack!r} is not served here; allowed: {', '.join(self.stacks)}"
            )
        return stack

    def settings(self, stack: str) -> Settings:
        self.check_stack(stack)
        try:
            return load_stack_settings(stack, self.root)
        except PlanError as exc:
            raise DeploymentError(str(exc)) from None
        except (yaml.YAMLError, OSError, AttributeError) as exc:
            raise DeploymentError(f"Pulumi.{stack}.yaml cannot be read: {exc}") from None

    def project(self, stack: str) -> str:
        """The Google Cloud project: the server's --project, the stack's ``gcp:project``, or
        ``GOOGLE_CLOUD_PROJECT``."""
        if self._project:
            return self._project
        try:
            value = stack_config(stack, self.root).get("gcp:project")
        except (PlanError, yaml.YAMLError, OSError, AttributeError):
            value = None
        value = value or os.environ.get("GOOGLE_CLOUD_PROJECT")
        if not isinstance(value, str) or not value:
            raise DeploymentError(
                f"no Google Cloud project for stack {stack!r}: set it with `pulumi config set "
                f"gcp:project <id> -s {stack}`, export GOOGLE_CLOUD_PROJECT, or start the server "
                "with --project"
            )
        return value

    # Stack outputs --------------------------------------------------------------------------

    def outputs(self, stack: str) -> dict[str, Any]:
        """The stack outputs (read afresh each time: a deploy may change them):
        ``<outputs-dir>/<stack>.json`` when the server was given a folder
        of saved ``pulumi stack output --json`` documents, else the Pulumi CLI."""
        self.check_stack(stack)
        data: dict[str, Any]
        if self.outputs_dir is not None:
            path = self.outputs_dir / f"{stack}.json"
            if not path.exists():
                raise DeploymentError(
                    f"no saved outputs for stack {stack!r} ({path}); write them with "
                    f"`pulumi stack output --json -s {stack} > {path}`"
                )
            try:
                loaded = read_json(path, MAX_OUTPUTS_BYTES)
            except JsonInputError as exc:
                raise DeploymentError(f"{path}: {exc}") from None
            if not isinstance(loaded, dict):
                raise DeploymentError(f"{path} holds JSON that is not an object")
            data = loaded
        else:  # a missing CLI's message is told as this server's option by Tools.localize
            try:
                data = read_stack_outputs(stack, str(self.root))
            except TargetError as exc:
                raise DeploymentError(str(exc)) from None
        return data

    def targets(self, stack: str) -> list[Target]:
        """The stack's endpoints, each with the credential its platform (the stack file's, never
        the shape of its outputs) takes: Cloud Run an ID token for its ``service_url``, a TPU VM
        or a GKE Gateway the vLLM API key. Outputs of the other platform's shape are refused, so
        the key never goes to a Cloud Run service, nor an ID token to a node or a Gateway."""
        settings = self.settings(stack)
        outputs = self.outputs(stack)
        model = outputs.get("served_model_name") or settings.model.served_name
        if not isinstance(model, str) or not model or len(model) > 256:
            raise DeploymentError(
                f"stack {stack!r}: the served_model_name output is not a model name"
            )
        cloud_run = settings.deploy_platform == "cloud-run"
        key, other = (
            ("service_url", "endpoint_urls") if cloud_run else ("endpoint_urls", "service_url")
        )
        value = outputs.get(key)
        if value in (None, "", []):
            stray = (
                f" (its outputs hold {other}, the other platform's)" if outputs.get(other) else ""
            )
            raise DeploymentError(
                f"stack {stack!r} runs on {settings.deploy_platform} and has no {key} "
                f"output{stray}; has it been deployed? (`pulumi up -s {stack}`)"
            )
        urls = [value] if cloud_run else value
        if not isinstance(urls, list) or not all(isinstance(u, str) and u for u in urls):
            raise DeploymentError(f"stack {stack!r}: the {key} output is not a list of URLs")
        try:
            for url in urls:
                check_url(url, f"stack {stack!r}: the {key} output")
        except TargetError as exc:
            raise DeploymentError(str(exc)) from None
        if cloud_run:
            return [Target(urls[0], model, self._cloud_run_auth(urls[0], settings))]
        return [Target(url, model, self._tpu_auth(stack, outputs, settings)) for url in urls]

    def _cloud_run_auth(self, url: str, settings: Settings) -> AuthStrategy:
        if self.endpoint.auth == "none":
            return NoAuth()
        return GoogleIdTokenAuth(
            url,
            impersonate_service_account=self.endpoint.impersonate_service_account
            or settings.health.health_check_service_account,
        )

    def _tpu_auth(self, stack: str, outputs: dict[str, Any], settings: Settings) -> AuthStrategy:
        if self.endpoint.auth == "none":
            return NoAuth()
        if self.endpoint.api_key_env:
            return ApiKeyAuth(self.endpoint.api_key_env)
        secret = str(outputs.get("api_key_secret") or settings.network.api_key_secret)
        return SecretManagerApiKeyAuth(
            self.project(stack),
            secret,
            access_token=self._token_source,
            endpoint=self.endpoint.secretmanager_url,
        )

    def target(self, stack: str, index: int = 0) -> Target:
        targets = self.targets(stack)
        if not 0 <= index < len(targets):
            raise DeploymentError(
                f"stack {stack!r} has {len(targets)} endpoint(s); endpoint index must be "
                f"0..{len(targets) - 1}"
            )
        return targets[index]

    # Benchmark runs -------------------------------------------------------------------------

    def results_dir(self, stack: str) -> Path:
        """``<benchmarkResultsDir>/<stack>``, inside the project folder."""
        folder = self.settings(stack).benchmark.benchmark_results_dir
        try:
            return _inside(self.root, folder) / stack
        except DeploymentError as exc:
            raise DeploymentError(f"stack {stack!r}: benchmarkResultsDir {exc}") from None


def _inside(root: Path, folder: str) -> Path:
    """``root / folder`` when ``folder`` is a relative path that stays inside ``root``."""
    path = Path(folder)
    if path.is_absolute() or ".." in path.parts or not folder.strip():
        raise DeploymentError(
            f"{folder!r} must be a folder relative to the project folder, without '..'"
        )
    return root / path


def what_if_settings(deployments: Deployments, stack: str, changes: dict[str, Any]) -> Settings:
    """The stack's settings with each config key of ``changes`` set to its value, validated by
    the settings themselves (an unknown key or a bad value gets their own message)."""
    deployments.check_stack(stack)
    try:
        raw = raw_stack_settings(stack, deployments.root)
    except PlanError as exc:
        raise DeploymentError(str(exc)) from None
    raw.update(changes)
    try:
        return load_settings(raw)
    except SettingsError as exc:
        shown = ", ".join(f"{k}={v!r}" for k, v in changes.items())
        raise DeploymentError(f"what-if {shown}: {exc}") from None


def queued_resource_ids(stack: str, outputs: dict[str, Any], settings: Settings) -> list[str]:
    """The stack's TPU queued-resource ids: from its ``node_names`` output (node id is the
    queued-resource id + ``-node``), else the names ``components.stack`` gives them
    (``gemma-<stack>-tpu-<i>``)."""
    names = outputs.get("node_names")
    if isinstance(names, list) and names and all(isinstance(n, str) and n for n in names):
        return [n.rstrip("/").rsplit("/", 1)[-1].removesuffix("-node") for n in names]
    return [f"gemma-{stack}-tpu-{i}" for i in range(settings.tpu.replicas)]
