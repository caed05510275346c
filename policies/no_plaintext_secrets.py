"""no-plaintext-secrets: credentials come from Secret Manager, never as literals."""

from __future__ import annotations

import base64
import binascii
import re

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from policies._config import schema, setting_strings
from policies._k8s import SECRET as K8S_SECRET
from policies._resources import (
    containers,
    entries,
    get,
    items,
    walk_strings,
)
from policies._server import vllm_servers
from serving.vllm_argv import literal_env

#: Credential formats (name, pattern). Matched anywhere in a resource's inputs.
SECRET_PATTERNS: tuple[tuple[str, str], ...] = (
    ("Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}\b"),
    ("Google API key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    ("private key", r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----"),
    ("OpenAI-style API key", r"\bsk-(?:proj-)?[A-Za-z0-9_\-]{20,}\b"),
    ("GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    ("AWS access key id", r"\bAKIA[0-9A-Z]{16}\b"),
    ("Google OAuth client secret", r"\bGOCSPX-[A-Za-z0-9_\-]{20,}\b"),
)

_SECRET_ENV = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_KEY|CREDENTIALS?)$", re.IGNORECASE
)

CONFIG = schema(
    {
        "extraPatterns": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "More regular expressions that mark a literal as a secret.",
        },
        "exemptResourceTypes": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["gcp:secretmanager/secretVersion:SecretVersion"],
            "description": "Resource types whose job is to hold a secret (Secret Manager "
            "versions written from a Pulumi secret).",
        },
        "allowedEnvNames": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Secret-sounding environment variables that may hold a literal.",
        },
    }
)

_FIX = (
    "store it in Secret Manager and reference it (env value_source.secret_key_ref; on a VM, "
    "read it at boot with the instance's service account; on GKE, through the Secret Manager "
    "add-on or a Secret written from a Pulumi secret), then rotate the exposed credential"
)


def _b64_text(value: object) -> str | None:
    """A Kubernetes Secret's `data` value decoded (None when it is not base64 text)."""
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return None


def validate_no_plaintext_secrets(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if args.resource_type in setting_strings(args, CONFIG, "exemptResourceTypes"):
        return
    patterns = [(label, re.compile(p)) for label, p in SECRET_PATTERNS]
    patterns += [("secret", re.compile(p)) for p in setting_strings(args, CONFIG, "extraPatterns")]
    allowed_env = set(setting_strings(args, CONFIG, "allowedEnvNames"))
    for path, text in walk_strings(args.props):
        for label, pattern in patterns:
            if pattern.search(text):
                report_violation(f"{args.name}: {path} contains a literal {label}; {_FIX}.", None)
                break
    if args.resource_type == K8S_SECRET:
        # `data` holds base64: the patterns are matched on the decoded value.
        for data_key, encoded in entries(get(args.props, "data")):
            decoded = _b64_text(encoded)
            if decoded is None:
                continue
            for label, pattern in patterns:
                if pattern.search(decoded):
                    report_violation(
                        f"{args.name}: data.{data_key} holds a literal {label} (base64); {_FIX}.",
                        None,
                    )
                    break
    for container in containers(args.resource_type, args.props):
        for env in items(get(container, "envs")):
            name, value = get(env, "name"), get(env, "value")
            if (
                isinstance(name, str)
                and name not in allowed_env
                and _SECRET_ENV.search(name)
                and isinstance(value, str)
                and value
            ):
                report_violation(
                    f"{args.name}: container {get(container, 'name') or ''!r} sets {name} to a "
                    f"literal value; {_FIX}.",
                    None,
                )
    for server in vllm_servers(args.resource_type, args.props):
        for name in literal_env(server.env):
            if name not in allowed_env and _SECRET_ENV.search(name):
                report_violation(
                    f"{args.name}: {server.where} sets {name} to a literal value on the "
                    f"command line that starts vLLM; {_FIX}.",
                    None,
                )
        key = server.args.get("api-key")
        keys = [key] if isinstance(key, str) else key if isinstance(key, list) else []
        if any(isinstance(k, str) and k and "$" not in k for k in keys):
            report_violation(
                f"{args.name}: {server.where} passes --api-key as a literal argument; set "
                f"VLLM_API_KEY from Secret Manager instead; {_FIX}.",
                None,
            )


no_plaintext_secrets = ResourceValidationPolicy(
    name="no-plaintext-secrets",
    description="No credential appears as a literal in environment, arguments, metadata or "
    "any other input; secrets are Secret Manager references.",
    validate=validate_no_plaintext_secrets,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=CONFIG,
)
