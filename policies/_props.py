"""Walk resource props as the Pulumi engine sends them to a policy.

Props may be plain dicts and lists (tests, mocks) or pulumi-policy's read-only proxies (the
engine), which raise `UnknownValueError` for values unknown during preview. These helpers
accept both and treat an unknown value as absent.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy.proxy import UnknownValueError


def read_path(value: Any, *path: str | int) -> tuple[Any, bool]:
    """Follow `path` (keys, list indexes): (None, False) when absent, (None, True) when a step
    is unknown at preview."""
    current = value
    for step in path:
        try:
            if isinstance(step, int):
                if not is_list(current) or step >= len(current):
                    return None, False
            elif not isinstance(current, Mapping) or step not in current:
                return None, False
            current = current[step]
        except UnknownValueError:
            return None, True
    return current, False


def read_field(mapping: Any, key: str) -> tuple[Any, bool]:
    return read_path(mapping, key)


def get(value: Any, *path: str | int) -> Any:
    """Follow `path` through mappings and sequences; None when absent or unknown."""
    return read_path(value, *path)[0]


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def read_list(value: Any) -> tuple[list[Any], bool]:
    """Elements of a list-like value ([] for anything else), and whether any is unknown."""
    out: list[Any] = []
    unknown = False
    for index in range(len(value) if is_list(value) else 0):
        try:
            out.append(value[index])
        except UnknownValueError:
            unknown = True
    return out, unknown


def items(value: Any) -> list[Any]:
    """Elements of a list-like value (unknown elements skipped); [] for anything else."""
    return read_list(value)[0]


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


#: How deep :func:`walk` goes into a props tree.
MAX_DEPTH = 24


def walk(
    value: Any, skip: Container[str] = (), path: str = "", depth: int = 0
) -> Iterator[tuple[str, str | int, Any, bool]]:
    """(path, key or list index, child, unknown at preview) of every entry of a props tree,
    parents first; the entries under a key in `skip` are not entered (bounded depth)."""
    if depth > MAX_DEPTH:
        return
    keys: list[str | int]
    if is_list(value):
        keys = list(range(len(value)))
    elif isinstance(value, Mapping):
        keys = [str(k) for k in value]
    else:
        return
    for key in keys:
        child, unknown = read_path(value, key)
        where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key
        yield where, key, child, unknown
        if not unknown and key not in skip:
            yield from walk(child, skip, where, depth + 1)
