"""Names Google Cloud accepts, derived from Pulumi resource names."""

from __future__ import annotations

import hashlib
import re


def account_id(name: str, role: str) -> str:
    """A service-account id (6-30 chars, lowercase, starts with a letter) for `name`-`role`.

    Long names are shortened with a stable hash suffix, so two stacks never collide.
    """
    raw = re.sub(r"[^a-z0-9-]", "-", f"{name}-{role}".lower()).strip("-")
    if not raw[:1].isalpha():
        raw = f"sa-{raw}"
    if len(raw) <= 30:
        return raw.ljust(6, "0")
    digest = hashlib.sha256(raw.encode()).hexdigest()[:6]
    return f"{raw[:23].rstrip('-')}-{digest}"


def token(*parts: str) -> str:
    """A short lowercase token that changes whenever any part changes."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]
