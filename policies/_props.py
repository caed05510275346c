"""Walk resource props as the Pulumi engine sends them to a policy.

Props may be plain dicts and lists (tests, mocks) or pulumi-policy's read-only proxies (the
engine), which raise `UnknownValueError` for values unknown during preview. These helpers
accept both and treat an unknown value as absent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy.proxy import UnknownValueError


def read_field(mapping: Any, key: str) -> tuple[Any, bool]:
    """`mapping[key]` (None when absent or not a mapping) and whether it is unknown at preview."""
    if not isinstance(mapping, Mapping):
        return None, False
    try:
        return mapping[key], False
    except KeyError:
        return None, False
    except UnknownValueError:
        return None, True


def get(value: Any, *path: str | int) -> Any:
    """Follow `path` through mappings and sequences; None when absent or unknown."""
    current = value
    for step in path:
        try:
            if isinstance(step, int):
                if not is_list(current) or step >= len(current):
                    return None
                current = current[step]
            else:
                if not isinstance(current, Mapping) or step not in current:
                    return None
                current = current[step]
        except UnknownValueError:
            return None
    return current


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def items(value: Any) -> list[Any]:
    """Elements of a list-like value (unknown elements skipped); [] for anything else."""
    if not is_list(value):
        return []
    out = []
    for index in range(len(value)):
        try:
            out.append(value[index])
        except UnknownValueError:
            continue
    return out


def entries(value: Any) -> Iterator[tuple[str, Any]]:
    """Key/value pairs of a mapping, skipping unknown values."""
    if not isinstance(value, Mapping):
        return
    for key in list(value):
        try:
            yield str(key), value[key]
        except UnknownValueError:
            continue


def strings(value: Any) -> list[str]:
    return [v for v in items(value) if isinstance(v, str)]
