"""Validate REST requests and bodies against Google's own API discovery documents.

The documents come from google-api-python-client, which bundles them unchanged under
`googleapiclient/discovery_cache/documents/{api}.{version}.json` (pinned in the `dev` extra).
Nothing here encodes our own belief about an API: field names, nesting, JSON types, formats,
enums, paths and parameters are read from the document.

What the documents do not mark reliably is "required": a schema field counts as required when
its description starts with "Required." (Google's convention, e.g. `NodeSpec.parent`,
`NodeSpec.node`); a path or query parameter when the document says `"required": true`.
:func:`required_fields` lists them, so a test can show exactly which fields that rule found.

Output-only fields (`readOnly` in the document, "Output only." in the description) are refused
in request bodies: the service ignores them at best, so sending one is a defect of the caller.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

_INT64 = re.compile(r"^-?\d+$")
_DURATION = re.compile(r"^-?\d+(\.\d{1,9})?s$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/_-]*={0,2}$")
_INT32 = (-(2**31), 2**31 - 1)
_UINT32 = (0, 2**32 - 1)


@functools.cache
def _load(api: str, version: str) -> str:
    documents = resources.files("googleapiclient") / "discovery_cache" / "documents"
    return (documents / f"{api}.{version}.json").read_text(encoding="utf-8")


def load(api: str, version: str) -> dict[str, Any]:
    """Google's discovery document for `api` `version` (a fresh copy each call)."""
    document: dict[str, Any] = json.loads(_load(api, version))
    return document


def google_error(
    code: int, message: str, status: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Google's JSON error body (`google.rpc.Status` as the JSON APIs return it)."""
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = details
    return {"error": error}


def bad_request(violations: list[str]) -> dict[str, Any]:
    """A 400 INVALID_ARGUMENT body with one `google.rpc.BadRequest` field violation each."""
    return google_error(
        400,
        "Invalid JSON payload received. " + "; ".join(violations),
        "INVALID_ARGUMENT",
        [
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [
                    {"field": v.split(":", 1)[0], "description": v} for v in violations
                ],
            }
        ],
    )


def _is_required(prop: Mapping[str, Any]) -> bool:
    return str(prop.get("description", "")).lstrip().startswith("Required.")


def _is_output_only(prop: Mapping[str, Any]) -> bool:
    return bool(prop.get("readOnly")) or str(prop.get("description", "")).lstrip().startswith(
        "Output only."
    )


_STATED_REGEX = re.compile(r"follow the `(\^[^`]+\$)` regex")


def described_pattern(spec: Mapping[str, Any]) -> str | None:
    """A regex a description states in words ("Should follow the `^...$` regex format")."""
    match = _STATED_REGEX.search(str(spec.get("description", "")))
    return match[1] if match else None


def required_fields(doc: Mapping[str, Any], schema_name: str) -> list[str]:
    """Fields of one schema whose description says "Required." (the document's own words)."""
    props = doc["schemas"][schema_name].get("properties", {})
    return sorted(name for name, prop in props.items() if _is_required(prop))


def schema_errors(
    doc: Mapping[str, Any], schema_name: str, value: Any, *, response: bool = False
) -> list[str]:
    """Everything in `value` that the document's schema `schema_name` does not allow.

    With `response=True` the value is what the service sends back: output-only fields are
    allowed and "Required." is not enforced (a fake's answers are checked that way).

    Checks unknown keys, missing "Required." fields, output-only fields, JSON types (int64 and
    uint64 as decimal strings, google-duration as `"<seconds>s"`, google-datetime as RFC 3339,
    int32 ranges), enums, arrays and maps (`additionalProperties`), resolving `$ref` throughout.
    Each error starts with the field path (`tpu.nodeSpec[0].node.schedulingConfig`).
    """
    if schema_name not in doc["schemas"]:
        raise KeyError(f"schema {schema_name!r} not in {doc.get('id')}")
    errors: list[str] = []
    _check(doc, {"$ref": schema_name}, value, schema_name, "", errors, response)
    return errors


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check(
    doc: Mapping[str, Any],
    spec: Mapping[str, Any],
    value: Any,
    where: str,
    path: str,
    errors: list[str],
    response: bool = False,
) -> None:
    label = path or "(body)"
    if "$ref" in spec:
        name = spec["$ref"]
        schema = doc["schemas"][name]
        _check(doc, schema, value, name, path, errors, response)
        return
    kind = spec.get("type")
    if kind == "object" or "properties" in spec or "additionalProperties" in spec:
        if not isinstance(value, dict):
            errors.append(f"{label}: expected an object ({where}), got {_kind(value)}")
            return
        props: Mapping[str, Any] = spec.get("properties", {})
        extra = spec.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                prop = props[key]
                if _is_output_only(prop) and not response:
                    errors.append(f"{_join(path, key)}: output-only field of {where}")
                    continue
                _check(doc, prop, item, where, _join(path, key), errors, response)
            elif extra is not None:
                _check(doc, extra, item, where, _join(path, key), errors, response)
            else:
                allowed = ", ".join(sorted(props)) or "none"
                errors.append(
                    f"{_join(path, key)}: unknown field {key!r} of {where} (allowed: {allowed})"
                )
        for key, prop in props.items():
            if _is_required(prop) and key not in value and not response:
                errors.append(f"{_join(path, key)}: required field of {where} is missing")
        return
    if kind == "array":
        if not isinstance(value, list):
            errors.append(f"{label}: expected an array, got {_kind(value)}")
            return
        for index, item in enumerate(value):
            _check(doc, spec.get("items", {}), item, where, f"{path}[{index}]", errors, response)
        return
    _scalar(spec, value, label, errors)


def _scalar(spec: Mapping[str, Any], value: Any, label: str, errors: list[str]) -> None:
    kind, fmt = spec.get("type"), spec.get("format")
    if kind == "any":
        return
    if kind == "boolean":
        if not isinstance(value, bool):
            errors.append(f"{label}: expected a boolean, got {_kind(value)}")
        return
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(f"{label}: expected an integer, got {_kind(value)}")
            return
        low, high = _UINT32 if fmt == "uint32" else _INT32
        if not low <= value <= high:
            errors.append(f"{label}: {value} is out of range for {fmt or 'int32'}")
        return
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.append(f"{label}: expected a number, got {_kind(value)}")
        return
    if kind == "string":
        if not isinstance(value, str):
            errors.append(f"{label}: expected a string ({fmt or 'string'}), got {_kind(value)}")
            return
        if fmt in ("int64", "uint64") and not _INT64.match(value):
            errors.append(f"{label}: {value!r} is not a decimal {fmt} string")
        elif fmt == "google-duration" and not _DURATION.match(value):
            errors.append(f"{label}: {value!r} is not a duration such as '3.5s'")
        elif fmt == "byte" and not _BASE64.match(value):
            errors.append(f"{label}: {value!r} is not base64")
        elif fmt == "google-datetime" and not _DATETIME.match(value):
            errors.append(f"{label}: {value!r} is not an RFC 3339 timestamp")
        enum = spec.get("enum")
        if enum is not None and value not in enum:
            errors.append(f"{label}: {value!r} is not one of {', '.join(enum)}")
        stated = described_pattern(spec)
        if stated and not re.match(stated, value):
            errors.append(f"{label}: {value!r} does not follow {stated} (the field's description)")
        return
    errors.append(f"{label}: the document gives no usable type ({spec})")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def find_method(doc: Mapping[str, Any], method_id: str) -> dict[str, Any]:
    """The method with this id (`tpu.projects.locations.queuedResources.create`)."""

    def walk(node: Mapping[str, Any]) -> dict[str, Any] | None:
        for method in node.get("methods", {}).values():
            if method.get("id") == method_id:
                return dict(method)
        for child in node.get("resources", {}).values():
            found = walk(child)
            if found is not None:
                return found
        return None

    method = walk(doc)
    if method is None:
        raise KeyError(f"method {method_id!r} not in {doc.get('id')}")
    return method


def _template_regex(template: str) -> re.Pattern[str]:
    """`v2/{+parent}/queuedResources` -> a regex with one named group per variable."""
    pattern, last = "", 0
    for match in re.finditer(r"\{(\+?)([A-Za-z0-9_]+)\}", template):
        pattern += re.escape(template[last : match.start()])
        body = ".+" if match[1] else "[^/]+"
        pattern += f"(?P<{match[2]}>{body})"
        last = match.end()
    pattern += re.escape(template[last:])
    return re.compile(f"^{pattern}$")


def _query_value_errors(name: str, spec: Mapping[str, Any], values: list[str]) -> list[str]:
    errors: list[str] = []
    if len(values) > 1 and not spec.get("repeated"):
        errors.append(f"query parameter {name!r} given {len(values)} times")
    for raw in values:
        kind = spec.get("type")
        if kind == "boolean" and raw not in ("true", "false"):
            errors.append(f"query parameter {name!r}: {raw!r} is not true or false")
        elif kind == "integer" and not _INT64.match(raw):
            errors.append(f"query parameter {name!r}: {raw!r} is not an integer")
        enum = spec.get("enum")
        if enum is not None and raw not in enum:
            errors.append(f"query parameter {name!r}: {raw!r} is not one of {', '.join(enum)}")
        pattern = spec.get("pattern") or described_pattern(spec)
        if pattern and not re.match(pattern, raw):
            errors.append(f"query parameter {name!r}: {raw!r} does not match {pattern}")
    return errors


def request_errors(
    doc: Mapping[str, Any],
    method_id: str,
    *,
    http_method: str,
    path: str,
    query: Mapping[str, list[str]] | None = None,
    body: Any = None,
) -> list[str]:
    """What is wrong with one HTTP request for the method `method_id` of this document.

    `path` is the URL path (`/v2alpha1/projects/p/locations/z/queuedResources`), relative to the
    document's `rootUrl`; `query` maps each query parameter to its values (`parse_qs`). Checks
    the HTTP verb, the path against the method's template and each path parameter's `pattern`,
    query parameters (known, typed, required), and the body against the request schema (a body
    where the method takes none is an error).
    """
    method = find_method(doc, method_id)
    errors: list[str] = []
    if http_method.upper() != method["httpMethod"]:
        errors.append(f"{method_id} is {method['httpMethod']}, not {http_method.upper()}")
    service = str(doc.get("servicePath", ""))
    template = service + method["path"]
    match = _template_regex(template).match(path.lstrip("/"))
    params: Mapping[str, Any] = method.get("parameters", {})
    if match is None:
        errors.append(f"path {path!r} does not match {method_id}'s template {template!r}")
    else:
        for name, raw in match.groupdict().items():
            pattern = params.get(name, {}).get("pattern")
            if pattern and not re.match(pattern, raw):
                errors.append(f"path parameter {name!r}: {raw!r} does not match {pattern}")
    given = dict(query or {})
    standard: Mapping[str, Any] = doc.get("parameters", {})
    for name, values in given.items():
        spec = params.get(name) or standard.get(name)
        if spec is None or spec.get("location") == "path":
            known = sorted(k for k, v in params.items() if v.get("location") == "query")
            errors.append(
                f"unknown query parameter {name!r} for {method_id} (allowed: "
                f"{', '.join(known) or 'none'}, and the standard parameters)"
            )
            continue
        errors.extend(_query_value_errors(name, spec, values))
    for name, spec in params.items():
        if spec.get("location") == "query" and spec.get("required") and name not in given:
            errors.append(f"required query parameter {name!r} is missing")
    request = method.get("request")
    if request is None:
        if body not in (None, {}):
            errors.append(f"{method_id} takes no request body")
    elif body is None:
        errors.append(f"{method_id} needs a {request['$ref']} body")
    else:
        errors.extend(schema_errors(doc, request["$ref"], body))
    return errors
