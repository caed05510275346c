"""Render the `config:` block of Pulumi.yaml from the settings (the one source of each key).

python scripts/config_schema.py yaml      # the config: block for Pulumi.yaml
python scripts/config_schema.py write     # rewrite Pulumi.yaml's config: block in place

The key table with types, defaults and allowed values is docs/reference/configuration.md
(scripts/gen_docs.py)."""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from serving.catalog.hardware import HARDWARE
from serving.config.settings import config_keys


def pulumi_type(info: FieldInfo) -> str:
    annotation = info.annotation
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):  # X | None
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if annotation is bool:
        return "boolean"
    if annotation is int:
        return "integer"
    return "array" if typing.get_origin(annotation) in (list, dict) else "string"


def allowed(info: FieldInfo) -> list[str]:
    annotation = info.annotation
    if typing.get_origin(annotation) is typing.Literal:
        return [str(a) for a in typing.get_args(annotation)]
    return []


def default(info: FieldInfo) -> Any:
    return None if info.is_required() else info.get_default(call_default_factory=True)


def description(key: str, info: FieldInfo) -> str:
    text = info.description or ""
    if key == "hardware":
        text += f" One of: {', '.join(HARDWARE)}."
    if allowed(info):
        text += f" One of: {', '.join(allowed(info))}."
    value = default(info)
    if info.is_required():
        text += " Required."
    elif value not in (None, [], {}):
        text += f" Default: {value}."
    return text


def yaml_block() -> str:
    lines = ["config:"]
    for key, (_, info) in config_keys().items():
        kind = pulumi_type(info)
        lines.append(f"  {key}:")
        lines.append(f"    type: {kind}")
        if kind == "array":
            lines.append("    items:")
            items = "integer" if "list[int]" in str(info.annotation) else "string"
            lines.append(f"      type: {items}")
        lines.append(f"    description: {_quote(description(key, info))}")
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


ROOT = Path(__file__).resolve().parent.parent


def write() -> None:
    project = ROOT / "Pulumi.yaml"
    text = project.read_text()
    project.write_text(text[: text.index("config:\n")] + yaml_block())


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "yaml"
    if which == "write":
        write()
    else:
        sys.stdout.write(yaml_block())
