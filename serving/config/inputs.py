"""Inputs within bounds: JSON files and regular files (number options: gemma4.options).

Python's `json` module recurses once per nesting level (a few thousand `[` end in
RecursionError), turns `1e400` into infinity and accepts `NaN`/`Infinity`, which JSON does not
have; it keeps the last of two equal keys without a word. Here a key given twice in one object
is refused, and a file is read only if it is a regular file of at most :data:`MAX_BYTES`, nested at
most :data:`MAX_DEPTH` levels (the decoder's own recursion guard stops deeper input cleanly; the
result is measured without recursion), and every number in it is finite.
Pure: the caller names the option in :class:`JsonInputError` messages.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

#: A number as the docs and the command lines write one: ASCII digits, no sign, no spaces
#: (``float`` alone would take " 8 ", "1_0", "٣", "+1" and "nan").
NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
#: A whole number the same way: ASCII digits only (``int`` would take " 8", "1_0" and "٨").
INTEGER = re.compile(r"[0-9]+")

MAX_BYTES = 16 << 20
"""Largest JSON input (a preview JSON of a large stack is well under 1 MiB)."""
MAX_DEPTH = 64
"""Deepest nesting of arrays and objects."""
MAX_DEADLINE_S = 7200.0
"""Longest deadline a health check takes (two hours; serving/capacity/start_budget.py's derived
waits are capped at it); the stack key healthCheckDeadlineSeconds has the same bound."""


class JsonInputError(ValueError):
    """A JSON input that is unreadable, too large, too deep or not JSON; one line."""


def _constant(name: str) -> Any:
    raise JsonInputError(f"holds {name}, which is not a JSON number; give a finite number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonInputError(f"holds the number {text[:40]}, beyond a finite double")
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object; a key given twice is refused (Python's decoder keeps the last silently,
    Go's the last too, other readers the first: the reader cannot know which was meant)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JsonInputError(f"gives the key {key[:60]!r} twice in one object")
        out[key] = value
    return out


def _depth(value: Any) -> int:
    """How deeply `value` nests lists and objects (iteratively, no recursion)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth + 1)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend(
                (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def parse_json(text: str) -> Any:
    """`text` parsed as strict JSON, with depth and numbers bounded."""
    try:
        value = json.loads(
            text, parse_constant=_constant, parse_float=_float, object_pairs_hook=_object
        )
    except json.JSONDecodeError as exc:
        raise JsonInputError(f"not valid JSON: {exc}") from None
    except RecursionError:  # the decoder counts its own nesting and stops cleanly
        raise JsonInputError(f"nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        if isinstance(exc, JsonInputError):
            raise
        raise JsonInputError(f"holds a number that is too long ({exc})") from None
    if _depth(value) > MAX_DEPTH:
        raise JsonInputError(f"nested more than {MAX_DEPTH} levels deep")
    return value


class NotRegularFileError(OSError):
    """A path that is a FIFO, a device, a socket or a folder."""


def read_regular(path: Path, limit: int) -> bytes:
    """At most `limit + 1` bytes of the regular file `path`. The file is opened without
    blocking and checked on the open descriptor, so a FIFO or device put in its place between a
    check and the read cannot hang the reader; NotRegularFileError otherwise."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(f"{path}: not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(path: Path, limit: int = MAX_BYTES) -> Any:
    """The JSON document in the regular file `path` (at most `limit` bytes)."""
    return parse_json(read_text(path, limit))


def read_text(path: Path, limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of the regular file `path` (at most `limit` bytes; a leading BOM
    dropped); JsonInputError saying why not."""
    try:
        data = read_regular(path, limit)
    except NotRegularFileError:
        raise JsonInputError("not a regular file") from None
    except OSError as exc:
        raise JsonInputError(f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
        raise JsonInputError(f"larger than {size}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise JsonInputError("not UTF-8 text") from None
