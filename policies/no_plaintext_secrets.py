"""no-plaintext-secrets: credentials come from Secret Manager, never as literals.

Values are judged, not names: every string among a resource's inputs is searched for the
credential shapes of :data:`endpoint.secret_shapes.SHAPES` (as their issuers issue them, so
`sk-learn-pipeline-v2` is a label, not a key); a Kubernetes Secret's `data` is base64-decoded
as the API server decodes it. A credential is also found by where it goes, whatever its shape
(`policies._sinks`). Launch shapes that could join or decode values at run time are refused by
`vllm-server-readable`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from endpoint.secret_shapes import find_secret
from policies._config import resource_policy, schema, setting_strings
from policies._k8s import SECRET
from policies._props import entries, get, is_list, items
from policies._resources import containers, walk_strings
from policies._server import vllm_servers
from policies._sinks import sink_problems

_SECRET_ENV = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_KEY|CREDENTIALS?)$", re.IGNORECASE
)

CONFIG = schema(
    {
        "ignorePatterns": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Regular expressions for literals that look random but are not "
            "credentials (a whole-value match exempts that value from the value checks).",
        },
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


def _keys(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Every mapping key inside a props tree (a label or annotation key can hold a token)."""
    found: list[tuple[str, str]] = []
    if isinstance(value, Mapping):
        for key, child in entries(value):
            if key.startswith("__"):
                continue
            where = f"{path}.{key}" if path else key
            found.append((f"{where} (key)", key))
            found += _keys(child, where)
    elif is_list(value):
        for index, child in enumerate(items(value)):
            found += _keys(child, f"{path}[{index}]")
    return found


def _base64_text(value: Any) -> str | None:
    """A Secret `data` value as the API server decodes it (standard base64), when text."""
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def validate_no_plaintext_secrets(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if args.resource_type in setting_strings(args, CONFIG, "exemptResourceTypes"):
        return
    extra = [re.compile(p) for p in setting_strings(args, CONFIG, "extraPatterns")]
    ignored = [re.compile(p) for p in setting_strings(args, CONFIG, "ignorePatterns")]
    allowed_env = set(setting_strings(args, CONFIG, "allowedEnvNames"))
    texts: list[str] = []
    for path, text in [*walk_strings(args.props), *_keys(args.props)]:
        if any(p.fullmatch(text) for p in ignored):
            continue
        if not path.endswith("(key)"):
            texts.append(text)
        label = find_secret(text) or next(("secret" for p in extra if p.search(text)), None)
        if label:
            report_violation(f"{args.name}: {path} contains a literal {label}; {_FIX}.", None)
    if args.resource_type.removesuffix("Patch") == SECRET:
        # The one decoding a destination does: a Secret's `data` values are base64.
        for field, encoded in entries(get(args.props, "data")):
            decoded = _base64_text(encoded)
            found = find_secret(decoded) if decoded is not None else None
            if found:
                report_violation(
                    f"{args.name}: data.{field} holds a literal {found} (base64); {_FIX}.", None
                )
    for container in containers(args.resource_type, args.props):
        for env in [*items(get(container, "envs")), *items(get(container, "env"))]:
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
    is_secret = args.resource_type.removesuffix("Patch") == SECRET
    # A Secret's `data` is judged decoded (above), not as the base64 text it is sent as.
    sink_props = {k: v for k, v in entries(args.props) if k != "data"} if is_secret else args.props
    for problem in sink_problems(sink_props):
        report_violation(f"{args.name}: {problem}; {_FIX}.", None)
    for server in vllm_servers(args.resource_type, args.props):
        key = server.args.get("api-key")
        keys = [key] if isinstance(key, str) else key if isinstance(key, list) else []
        if any(isinstance(k, str) and k and "$" not in k for k in keys):
            report_violation(
                f"{args.name}: {server.where} passes --api-key as a literal argument; set "
                f"VLLM_API_KEY from Secret Manager instead; {_FIX}.",
                None,
            )


no_plaintext_secrets = resource_policy(
    "no-plaintext-secrets",
    "No credential appears as a literal in environment, arguments, metadata or "
    "any other input; secrets are Secret Manager references.",
    validate_no_plaintext_secrets,
    config=CONFIG,
)
