"""Check request bodies against Google's discovery documents, as shipped in
google-api-python-client (`googleapiclient/discovery_cache/documents/<api>.<version>.json`).

A small walker: it resolves `$ref`, refuses keys the schema does not have, checks each value's
JSON type (int64 fields are strings in JSON, but numbers are accepted too) and `enum`
membership. Required fields are not marked reliably in the documents; tests check those they
depend on themselves.
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any


def _documents() -> Path:
    spec = importlib.util.find_spec("googleapiclient")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("google-api-python-client is not installed (dev extra)")
    return Path(next(iter(spec.submodule_search_locations))) / "discovery_cache" / "documents"


@cache
def load(api: str, version: str) -> dict[str, Any]:
    """The discovery document of `api` at `version` (for example "monitoring", "v3")."""
    path = _documents() / f"{api}.{version}.json"
    document: dict[str, Any] = json.loads(path.read_text())
    return document


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "object": (dict,),
    "array": (list,),
    "any": (object,),
}


def schema_errors(doc: dict[str, Any], schema_name: str, value: Any) -> list[str]:
    """Every way `value` does not fit the schema `schema_name` of `doc`; empty when it fits."""
    errors: list[str] = []
    _check(doc, {"$ref": schema_name}, value, schema_name, errors)
    return errors


def _check(
    doc: dict[str, Any], schema: dict[str, Any], value: Any, where: str, out: list[str]
) -> None:
    if "$ref" in schema:
        name = schema["$ref"]
        if name not in doc["schemas"]:
            out.append(f"{where}: unknown schema {name}")
            return
        schema = doc["schemas"][name]
    kind = schema.get("type", "object")
    if kind == "string" and schema.get("format") in ("int64", "uint64") and isinstance(value, int):
        kind = "integer"
    if kind in ("integer", "number") and isinstance(value, bool):
        out.append(f"{where}: expected {kind}, got a boolean")
        return
    if not isinstance(value, _JSON_TYPES.get(kind, (object,))):
        out.append(f"{where}: expected {kind}, got {type(value).__name__}")
        return
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check(doc, schema.get("items", {}), item, f"{where}[{index}]", out)
    elif isinstance(value, dict):
        properties = schema.get("properties")
        if properties is None:
            extra = schema.get("additionalProperties")
            if extra is not None:
                for key, item in value.items():
                    _check(doc, extra, item, f"{where}.{key}", out)
            return
        for key, item in value.items():
            if key not in properties:
                out.append(f"{where}: unknown field {key!r}")
                continue
            _check(doc, properties[key], item, f"{where}.{key}", out)
