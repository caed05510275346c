"""One redaction step for everything the server sends back.

Two kinds of secret are removed from text:

- values the process knows to be secret: every environment variable whose name says it holds a
  secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``) and any value
  registered with :func:`register_secret` (keys read from Secret Manager, access tokens);
- secrets by shape: ``Bearer`` credentials, Google OAuth access tokens (``ya29.``), JWTs,
  Hugging Face tokens (``hf_...``), PEM private keys, and ``key=``/``token=``/``password=``
  style assignments in URLs, headers and command lines.

:func:`redact` walks str/list/tuple/dict values and returns a copy with each secret replaced by
``[REDACTED]``.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "redact", "redact_text", "register_secret"]

REDACTED = "[REDACTED]"
_MIN_SECRET_LEN = 6
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# Environment variables whose names match but whose values are paths or ids, not secrets.
_NOT_SECRET_NAMES = frozenset({"GOOGLE_APPLICATION_CREDENTIALS"})

_NAMES = r"api[_-]?key|apikey|key|token|secret|password|passwd|sig|signature"
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        REDACTED,
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 " + REDACTED),
    (re.compile(r"\bya29\.[A-Za-z0-9._-]+"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),
    (re.compile(r"\bhf_[A-Za-z0-9]{8,}"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), REDACTED),
    (
        re.compile(
            r"(?i)\b((?:proxy-)?authorization|x-api-key|x-goog-api-key)([\"']?\s*[:=]\s*[\"']?)"
            r"([^\"'\r\n,}]+)"
        ),
        r"\1\2" + REDACTED,
    ),
    (
        re.compile(rf"(?i)\b([\w-]*(?:{_NAMES}))=(?!\[REDACTED\])([^\s\"'&,;}}<>]+)"),
        r"\1=" + REDACTED,
    ),
    (
        re.compile(
            rf"(?i)([\"'])([\w-]*(?:{_NAMES}))\1(\s*:\s*)([\"'])(?!\[REDACTED\])[^\"'\r\n]*\4"
        ),
        r"\1\2\1\3\4" + REDACTED + r"\4",
    ),
)

_registered: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a secret from now on (ignored when empty or very short)."""
    if value and len(value.strip()) >= _MIN_SECRET_LEN:
        with _lock:
            _registered.add(value.strip())


def _known_secrets(environ: Mapping[str, str]) -> list[str]:
    values = {
        value.strip()
        for name, value in environ.items()
        if _SECRET_NAME.search(name)
        and name not in _NOT_SECRET_NAMES
        and len(value.strip()) >= _MIN_SECRET_LEN
    }
    with _lock:
        values |= _registered
    # Longest first, so a secret that contains another is removed whole.
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, *, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every known and every recognisable secret replaced by ``[REDACTED]``."""
    for secret in _known_secrets(os.environ if environ is None else environ):
        text = text.replace(secret, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


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
