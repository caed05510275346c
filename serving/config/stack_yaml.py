"""Read a Pulumi stack file the way the Pulumi CLI reads it, within bounds.

docs/inputs.md is the reference: how the CLI (`LoadProjectStackBytes`, `MarshalString`) and
gopkg.in/yaml.v3 turn each value into the text the program receives, and what this reader
refuses, naming the construct and its line (exit 2 in every command): oversized or non-UTF-8
files, several documents, deep nesting, too many values (counted again once aliases are
expanded: an alias bomb stops there), duplicate keys, merge keys, tags other than `!!str`,
non-scalar keys, timestamps, `null` and non-finite config values. Anchors and aliases are
followed as yaml.v3 follows them. Pure: only the YAML event parser; no Pulumi.
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import yaml

MAX_BYTES = 1 << 20
"""Largest stack file read (the shipped ones are about 2 KiB)."""
MAX_DEPTH = 32
"""Deepest nesting of lists and mappings, aliases expanded."""
MAX_VALUES = 20_000
"""Most values in a file, aliases expanded (a YAML alias bomb stops here)."""
_MAX_EVENTS = 2 * MAX_VALUES + 16
"""Parser events read (each value is one or two events: a file holding more values than
:data:`MAX_VALUES` stops here, before aliases are expanded)."""


class StackYamlError(ValueError):
    """A stack file the CLI would refuse or this reader cannot follow; one line, no file name."""


@dataclass(frozen=True)
class Secure:
    """A `secure:` config value: ciphertext only the Pulumi CLI can decrypt. Never shown."""

    ciphertext: str = field(repr=False)

    def __str__(self) -> str:
        return "[secret]"

    def __repr__(self) -> str:
        return "Secure([secret])"


@dataclass
class _Scalar:
    value: str
    plain: bool
    tag: str | None
    line: int


@dataclass
class _Seq:
    items: list[Any]
    line: int


@dataclass
class _Map:
    pairs: list[tuple[_Scalar, Any]]
    line: int
    seen: dict[str, int] = field(default_factory=dict)


_Node = _Scalar | _Seq | _Map
_STR = "tag:yaml.org,2002:str"


def _line(event: Any) -> int:
    mark = getattr(event, "start_mark", None)
    return int(mark.line) + 1 if mark is not None else 0


def _tree(text: str) -> _Node | None:
    """The document's node tree built from the parser's events, iteratively (no recursion), with
    depth and size bounded before anything is expanded."""
    anchors: dict[str, _Node] = {}
    stack: list[_Seq | _Map] = []
    pending_key: list[_Scalar | None] = []
    root: _Node | None = None
    documents = 0
    events = 0

    def attach(node: _Node, line: int) -> None:
        nonlocal root
        if not stack:
            root = node
            return
        parent = stack[-1]
        if isinstance(parent, _Seq):
            parent.items.append(node)
            return
        key = pending_key[-1]
        if key is None:
            if not isinstance(node, _Scalar):
                raise StackYamlError(f"line {line}: a mapping key must be a plain value")
            if node.plain and node.tag is None and node.value == "<<":
                raise StackYamlError(
                    f"line {line}: merge keys (<<) are not accepted in a stack file; write "
                    "the keys out"
                )
            if node.value in parent.seen:
                raise StackYamlError(
                    f"line {line}: mapping key {node.value!r} already defined at line "
                    f"{parent.seen[node.value]} (the Pulumi CLI refuses duplicate keys)"
                )
            parent.seen[node.value] = node.line
            pending_key[-1] = node
        else:
            parent.pairs.append((key, node))
            pending_key[-1] = None

    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            events += 1
            if events > _MAX_EVENTS:
                raise StackYamlError(f"more than {MAX_VALUES} values; not a stack file")
            line = _line(event)
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise StackYamlError(
                        f"line {line}: a second YAML document (---); a stack file is one document"
                    )
                continue
            if isinstance(event, yaml.AliasEvent):
                if event.anchor not in anchors:
                    raise StackYamlError(f"line {line}: alias *{event.anchor} has no anchor")
                attach(anchors[event.anchor], line)
                continue
            if isinstance(
                event, (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)
            ):
                tag = getattr(event, "tag", None)
                if tag is not None and not (isinstance(event, yaml.ScalarEvent) and tag == _STR):
                    raise StackYamlError(
                        f"line {line}: the YAML tag {tag} is not accepted in a stack file "
                        "(only !!str); write the value plainly"
                    )
            if isinstance(event, yaml.ScalarEvent):
                node: _Node = _Scalar(event.value, event.style is None, tag, line)
                if event.anchor:
                    anchors[event.anchor] = node
                attach(node, line)
            elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                if len(stack) >= MAX_DEPTH:
                    raise StackYamlError(
                        f"line {line}: nested more than {MAX_DEPTH} levels deep; not a stack file"
                    )
                node = (
                    _Seq([], line) if isinstance(event, yaml.SequenceStartEvent) else _Map([], line)
                )
                if event.anchor:
                    anchors[event.anchor] = node
                attach(node, line)
                stack.append(node)
                pending_key.append(None)
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                stack.pop()
                pending_key.pop()
    except yaml.reader.ReaderError as exc:  # a control character: one line, not PyYAML's two
        line = text.count("\n", 0, exc.position) + 1
        raise StackYamlError(
            f"not valid YAML at line {line}: the control character U+{exc.character:04X} is not "
            "allowed in YAML text"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise StackYamlError(f"not valid YAML{where}: {problem}") from None
    return root


class _Budget:
    def __init__(self) -> None:
        self.left = MAX_VALUES


def _value(node: _Node, depth: int, budget: _Budget) -> Any:
    budget.left -= 1
    if budget.left < 0:
        raise StackYamlError(
            f"more than {MAX_VALUES} values once aliases are expanded (an alias bomb?)"
        )
    if depth > MAX_DEPTH:
        raise StackYamlError(
            f"line {node.line}: nested more than {MAX_DEPTH} levels deep once aliases are expanded"
        )
    if isinstance(node, _Scalar):
        return _resolve(node)
    if isinstance(node, _Seq):
        return [_value(item, depth + 1, budget) for item in node.items]
    out: dict[str, Any] = {}
    for key, child in node.pairs:
        name = _key_text(key)
        if name in out:
            raise StackYamlError(
                f"line {key.line}: mapping key {key.value!r} is the key {name!r} again once "
                "read (the Pulumi CLI would keep only one of them)"
            )
        out[name] = _value(child, depth + 1, budget)
    if set(out) == {"secure"} and isinstance(out["secure"], str):
        return Secure(out["secure"])
    return out


def _key_text(key: _Scalar) -> str:
    """A mapping key as yaml.v3 then Pulumi make it a string (`fmt.Sprintf("%v", k)`)."""
    value = _resolve(key)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, float):
        return _go_float(value)
    return str(value)


_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_MAP: dict[str, Any] = {
    **dict.fromkeys(("true", "True", "TRUE"), True),
    **dict.fromkeys(("false", "False", "FALSE"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_INT64 = 1 << 63
_GO_INT = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[oO]?[0-7]+|0[bB][01]+|[1-9][0-9]*|0)")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt ][0-9:.]+(?:Z|[+-][0-9:]+)?)?")


def _go_int(text: str) -> int | None:
    """Go's `strconv.ParseInt(text, 0, 64)`, then `ParseUint` (yaml.v3 tries both)."""
    match = _GO_INT.fullmatch(text)
    if match is None:
        return None
    sign, digits = match.groups()
    # Python's base-0 int() reads 0x, 0o and 0b; Go's `0100` (octal) it refuses.
    legacy_octal = len(digits) > 1 and digits[0] == "0" and digits[1].isdigit()
    value = int(digits[1:], 8) if legacy_octal else int(digits, 0)
    if sign == "-":
        return -value if value <= _INT64 else None
    if value < _INT64 or (not sign and value < 2 * _INT64):
        return value
    return None


def _resolve(node: _Scalar) -> Any:
    """The value yaml.v3 decodes a scalar to (its `resolve`), for an untyped target."""
    text = node.value
    if not node.plain or node.tag == _STR:
        return text
    if text in _MAP:
        return _MAP[text]
    if not text or text[0] not in "+-0123456789.":
        return text
    if text[0] == ".":
        return float(text) if _YAML_FLOAT.fullmatch(text) else text
    if _TIMESTAMP.fullmatch(text) and _is_date(text):
        raise StackYamlError(
            f"line {node.line}: {text!r} is read by the Pulumi CLI as a timestamp (and handed "
            "over in Go's date format); quote it if it is text"
        )
    plain = text.replace("_", "")
    number = _go_int(plain)
    if number is not None:
        return number
    if _YAML_FLOAT.fullmatch(plain):
        value = float(plain)
        return value if math.isfinite(value) else text  # Go's ParseFloat refuses overflow
    return text


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text[:10])
    except ValueError:
        return False
    return True


def _go_float(value: float) -> str:
    """Go's JSON encoding of a finite float64 (`encoding/json`: shortest digits, `e` notation
    below 1e-6 and from 1e21, a negative exponent without a leading zero)."""
    shortest = repr(value)
    if value == 0 or 1e-6 <= abs(value) < 1e21:
        text = format(Decimal(shortest), "f")
        return text[:-2] if text.endswith(".0") else text
    mantissa, _, exponent = shortest.partition("e")
    exp = int(exponent)
    return f"{mantissa}e+{exp:02d}" if exp >= 0 else f"{mantissa}e-{-exp}"


def cli_text(key: str, value: Any) -> str | Secure:
    """A top-level config value as the CLI hands it to the program (see the module text)."""
    if isinstance(value, Secure):
        return value
    if value is None:
        raise StackYamlError(f"config key {key!r} has no value")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise StackYamlError(
                f"config key {key!r} is {value} (YAML .inf/.nan), which the Pulumi CLI cannot "
                "encode; give a finite number"
            )
        return _go_float(value)
    if isinstance(value, str):
        return value
    _check_object(key, value)
    return value  # type: ignore[no-any-return]


def _check_object(key: str, value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise StackYamlError(
            f"config key {key!r} holds {value} (YAML .inf/.nan), which the Pulumi CLI cannot "
            "encode; give a finite number"
        )
    if isinstance(value, list):
        for item in value:
            _check_object(key, item)
    elif isinstance(value, dict):
        for item in value.values():
            _check_object(key, item)


def load_document(data: bytes) -> Any:
    """The whole stack file as yaml.v3 decodes it (None for an empty file), bounded."""
    if len(data) > MAX_BYTES:
        raise StackYamlError(f"larger than {MAX_BYTES // 1024} KiB; not a stack file")
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise StackYamlError("not UTF-8 text") from None
    root = _tree(text)
    if root is None:
        return None
    return _value(root, 0, _Budget())


def config_of(document: Any, project: str) -> dict[str, Any]:
    """The `config:` block of a decoded stack file: every key namespaced (a key without `:` is
    the project's, as the CLI rewrites it) and every value as :func:`cli_text` hands it over
    (lists and mappings stay structured; the caller encodes them as JSON)."""
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise StackYamlError("expected a mapping with a 'config:' block")
    config = document.get("config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise StackYamlError("'config:' must be a mapping of keys to values")
    out: dict[str, Any] = {}
    for key, value in config.items():
        full = key if ":" in key else f"{project}:{key}"
        if full in out:
            raise StackYamlError(f"config key {full!r} is given twice (with and without namespace)")
        out[full] = cli_text(full, value)
    return out
