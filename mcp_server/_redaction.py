"""The redaction step for everything the MCP server sends back: :func:`endpoint.redact.redact`,
with the secrets of the server's own environment (a variable named like a secret, or whose
value looks like a credential) registered at start, since an agent reads every answer
(docs/mcp.md, "Secrets and redaction")."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from endpoint.redact import MASK
from endpoint.redact import redact as _shared_redact
from endpoint.redact import register_secret as _shared_register

_MIN_SECRET_LEN = 6
_SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASS|(?<![A-Z])PW(?![A-Z])|CREDENTIAL|AUTH|PRIVATE|SESSION|COOKIE|"
    r"SIGNATURE|DSN|CONNECTION_STRING",
    re.IGNORECASE,
)
# Environment variables whose names match but whose values are paths or switches, not secrets.
_NOT_SECRET_NAMES = frozenset({"GOOGLE_APPLICATION_CREDENTIALS", "XAUTHORITY", "SSH_AUTH_SOCK"})
_SWITCH_WORDS = frozenset(
    {"enabled", "disabled", "enable", "disable", "true", "false", "always", "never", "default"}
)
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9_\-.+/=~:]{20,}")
_SECRET_OPTION = re.compile(
    r"(?i)--?(?:[a-z0-9]+[-_])*(?:api[-_]?key|(?:access[-_]|auth[-_]|id[-_])?token|password|"
    r"passphrase|client[-_]secret|secret)"
)


def _credential_shaped(value: str) -> bool:
    if _shared_redact(value, limit=None) != value:
        return True  # a recognised shape (a JWT, a PEM block, a ghp_ token, ...)
    if not _TOKEN_LIKE.fullmatch(value) or value.startswith(("/", "~", ".")):
        return False  # spaces or separators, or a path
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() for c in value)
    )


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The secret values of ``environ`` (default: this process's), longest first."""
    values = set()
    for name, raw in (os.environ if environ is None else environ).items():
        value = raw.strip()
        if (
            len(value) < _MIN_SECRET_LEN
            or name in _NOT_SECRET_NAMES
            or value.lower() in _SWITCH_WORDS
            or value.isdigit()
        ):
            continue  # a switch or a number, not a credential: masking it would garble text
        if _SECRET_NAME.search(name) or _credential_shaped(value):
            values.add(value)
    # Longest first, so a secret that contains another is removed whole.
    return sorted(values, key=len, reverse=True)


def register_environment_secrets(environ: Mapping[str, str] | None = None) -> None:
    """Register the environment's secrets with the shared registry, so that every redaction
    in this process (the benchmark store's, the health checks') removes them too."""
    for value in environment_secrets(environ):
        _shared_register(value)


def redact_text(text: str) -> str:
    """``text`` with every registered and every recognisable secret replaced by ``[REDACTED]``."""
    return _shared_redact(text, limit=None)


def redact_cut(text: object, limit: int) -> str:
    """``text`` redacted whole, then cut to ``limit`` characters (ending ``…`` when cut)."""
    return _shared_redact(text, limit=limit)


def redact(value: Any) -> Any:
    """A copy of ``value`` (str, list, tuple, dict, scalars) with secrets redacted in every
    string, dictionary keys included; in a list, the item after a secret option is masked."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {redact(k): redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        out = []
        after_option = False
        for item in value:
            out.append(MASK if after_option and isinstance(item, str) else redact(item))
            after_option = isinstance(item, str) and bool(_SECRET_OPTION.fullmatch(item))
        return type(value)(out)
    return value
