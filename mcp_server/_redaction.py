"""The redaction step for everything the MCP server sends back.

Text goes through :func:`endpoint.redact`, the same step as the health checks' and the
benchmark's output (every credential registered with :func:`endpoint.register_secret`,
``Bearer`` values, ``key=``/``token=`` assignments, JWTs, ``ya29.`` tokens, ``AIza`` keys),
with two additions an operator's agent session needs:

- the values of environment variables whose names say they hold a secret (``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``), such as an ``HF_TOKEN`` exported
  in the shell that started the server;
- Hugging Face tokens (``hf_...``) and PEM private keys by shape.

:func:`redact` walks str/list/tuple/dict values (keys included) and returns a redacted copy.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from endpoint import redact as _shared_redact
from endpoint import register_secret as _shared_register
from endpoint.redact import MASK

__all__ = ["REDACTED", "redact", "redact_text", "register_secret"]

REDACTED = MASK
_MIN_SECRET_LEN = 6
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# Environment variables whose names match but whose values are paths, not secrets.
_NOT_SECRET_NAMES = frozenset({"GOOGLE_APPLICATION_CREDENTIALS"})

_EXTRA: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        REDACTED,
    ),
    (re.compile(r"\bhf_[A-Za-z0-9]{8,}"), REDACTED),
)


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a secret from now on (the registry the CLIs' credentials use)."""
    _shared_register(value)


def _environment_secrets(environ: Mapping[str, str]) -> list[str]:
    values = {
        value.strip()
        for name, value in environ.items()
        if _SECRET_NAME.search(name)
        and name not in _NOT_SECRET_NAMES
        and len(value.strip()) >= _MIN_SECRET_LEN
    }
    # Longest first, so a secret that contains another is removed whole.
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, *, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every known and every recognisable secret replaced by ``[REDACTED]``."""
    for secret in _environment_secrets(os.environ if environ is None else environ):
        text = text.replace(secret, REDACTED)
    for pattern, replacement in _EXTRA:
        text = pattern.sub(replacement, text)
    return _shared_redact(text, limit=None)


def redact(value: Any) -> Any:
    """A copy of ``value`` (str, list, tuple, dict, scalars) with secrets redacted in every
    string, dictionary keys included."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {redact(k): redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    return value
