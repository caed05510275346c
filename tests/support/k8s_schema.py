"""Validate Kubernetes objects offline against the schemas the API server uses.

Built-in kinds (Deployment, Service, HorizontalPodAutoscaler, ...) are checked against the
strict JSON schemas of the cluster's minor version that the `kubernetes-validate` package ships
(generated from Kubernetes' own OpenAPI documents; unknown fields refused). Custom resources
(Gateway, HTTPRoute, InferencePool, HealthCheckPolicy, GCPBackendPolicy, PodMonitoring) are
checked against their CRD's own `openAPIV3Schema`, vendored byte for byte from the pinned
releases under `tests/data/k8s/crds/` (`provenance.json` names repository, ref, path and
sha256), the way the API server treats a structural schema:

1. defaults from the schema are applied first (`default:` at every level, as the server does
   before validation);
2. the OpenAPI v3 value validations are checked (types, `enum`, `required`, bounds, patterns,
   `nullable`, `x-kubernetes-int-or-string`), and a field the schema does not declare is
   refused unless the schema preserves unknown fields (the server prunes it silently, or
   refuses it under `fieldValidation=Strict`; either way the field does nothing);
3. the CEL rules (`x-kubernetes-validations`) are evaluated with `cel-python` where it can; a
   rule it cannot evaluate (a Kubernetes CEL extension such as `isURL`, or a transition rule on
   `oldSelf`) is reported in :attr:`Report.unchecked`, never silently passed;
4. `metadata` is checked against Kubernetes' ObjectMeta, and names, label keys and values and
   resource quantities against the API server's own syntax rules.

An object whose `apiVersion`/`kind` is neither a built-in of that Kubernetes version nor a
vendored CRD version is refused (this is how the removed `inference.networking.x-k8s.io/
v1alpha2` pool is refused).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml
from celpy.adapter import json_to_cel
from referencing import Registry, Resource

#: The cluster's Kubernetes minor version: GKE installs the GA Gateway API and InferencePool
#: CRDs itself from 1.34.0-gke.1626000 on (docs/contracts-kubernetes.md).
CLUSTER_MINOR = "1.34"

CRD_DIR = Path(__file__).resolve().parent.parent / "data" / "k8s" / "crds"
_DEFS_ID = "https://kubernetes.io/api/_definitions.json"
_OBJECT_META = f"{_DEFS_ID}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
#: resource.Quantity's syntax (k8s.io/apimachinery/pkg/api/resource/quantity.go).
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?\d+))?$")
#: Kinds whose names the API server checks as DNS-1035 labels (Service) or DNS-1123 labels.
_DNS1035_KINDS = {"Service"}
#: Kinds whose names are path segments, not DNS names (RBAC: `system:auth-delegator`).
_PATH_SEGMENT_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}


@dataclass
class Report:
    """What the API server would say about one object."""

    #: Refusals: "<path>: <reason>".
    errors: list[str] = field(default_factory=list)
    #: CEL rules that apply to the object but could not be evaluated offline: "<path>: <rule>".
    unchecked: list[str] = field(default_factory=list)
    #: The object after the schema's defaults were applied (custom resources).
    defaulted: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors


# --- vendored CRDs -------------------------------------------------------------------------


@dataclass(frozen=True)
class CrdVersion:
    group: str
    version: str
    kind: str
    schema: dict[str, Any]
    source: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


@functools.cache
def provenance() -> list[dict[str, str]]:
    files: list[dict[str, str]] = json.loads((CRD_DIR / "provenance.json").read_text())["files"]
    return files


@functools.cache
def crds() -> dict[tuple[str, str], CrdVersion]:
    """Every served version of every vendored CRD, by (apiVersion, kind)."""
    found: dict[tuple[str, str], CrdVersion] = {}
    for entry in provenance():
        path = CRD_DIR / entry["file"]
        if path.suffix == ".json":
            # The GKE policies: the served openAPIV3Schema (group/version/kind from its name).
            schema = json.loads(path.read_text())
            group = entry["file"].split("_", 1)[0]
            kind = {
                "gcpbackendpolicy": "GCPBackendPolicy",
                "healthcheckpolicy": "HealthCheckPolicy",
            }[entry["file"].split("_")[1]]
            found[(f"{group}/v1", kind)] = CrdVersion(group, "v1", kind, schema, entry["file"])
            continue
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        for version in spec["versions"]:
            if not version.get("served", False):
                continue
            item = CrdVersion(
                spec["group"],
                version["name"],
                spec["names"]["kind"],
                version["schema"]["openAPIV3Schema"],
                entry["file"],
            )
            found[(item.api_version, item.kind)] = item
    return found


# --- built-in kinds (kubernetes-validate's schemas) ------------------------------------------


def _schema_dir(minor: str) -> Any:
    root = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema")
    folder = root.joinpath(f"v{minor}.0-local-strict")
    if not folder.is_dir():
        versions = sorted(p.name for p in root.iterdir() if p.name.endswith("-local-strict"))
        raise ValueError(f"kubernetes-validate has no schemas for {minor}; it has {versions}")
    return folder


@functools.cache
def _registry(minor: str) -> Registry[Any]:
    defs = json.loads(_schema_dir(minor).joinpath("_definitions.json").read_text())
    registry: Registry[Any] = Resource.from_contents(defs) @ Registry()
    return registry


@functools.cache
def _builtin_validator(minor: str, api_version: str, kind: str) -> Any:
    """A validator for a built-in kind, or None when Kubernetes `minor` has no such kind."""
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    target = _schema_dir(minor).joinpath(f"{kind.lower()}-{group_version}.json")
    if not target.is_file():
        return None
    schema = json.loads(target.read_text())
    if api_version not in (schema.get("properties", {}).get("apiVersion", {}).get("enum") or []):
        return None  # a file of another group that shares the first name segment
    return jsonschema.Draft202012Validator(schema, registry=_registry(minor))


@functools.cache
def _meta_validator(minor: str) -> Any:
    return jsonschema.Draft202012Validator({"$ref": _OBJECT_META}, registry=_registry(minor))


def builtin_kinds(minor: str = CLUSTER_MINOR) -> set[tuple[str, str]]:
    """(apiVersion, kind) of every built-in kind of Kubernetes `minor`."""
    out: set[tuple[str, str]] = set()
    for path in _schema_dir(minor).iterdir():
        if not path.name.endswith(".json") or path.name.startswith("_"):
            continue
        schema = json.loads(path.read_text())
        props = schema.get("properties", {})
        kinds = props.get("kind", {}).get("enum") or []
        for api_version in props.get("apiVersion", {}).get("enum") or []:
            out.update((api_version, kind) for kind in kinds)
    return out


# --- structural schema -> JSON schema -------------------------------------------------------

_COPIED = (
    "enum",
    "required",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "multipleOf",
)


def to_json_schema(node: Mapping[str, Any], *, structural: bool = True) -> dict[str, Any]:
    """The JSON Schema (2020-12) that checks what a CRD's structural schema node checks.

    `structural` is False inside `allOf`/`anyOf`/`oneOf`/`not`, where a structural schema holds
    value validations only (no pruning there)."""
    out: dict[str, Any] = {}
    for key in _COPIED:
        if key in node:
            out[key] = copy.deepcopy(node[key])
    if node.get("exclusiveMinimum") is True and "minimum" in out:
        out["exclusiveMinimum"] = out.pop("minimum")
    if node.get("exclusiveMaximum") is True and "maximum" in out:
        out["exclusiveMaximum"] = out.pop("maximum")
    kind = node.get("type")
    if node.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        kind = None
    if kind is not None:
        out["type"] = [kind, "null"] if node.get("nullable") else kind
    if "properties" in node:
        out["properties"] = {
            name: to_json_schema(child, structural=structural)
            for name, child in node["properties"].items()
        }
    if isinstance(node.get("items"), Mapping):
        out["items"] = to_json_schema(node["items"], structural=structural)
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        out["additionalProperties"] = to_json_schema(extra, structural=structural)
    elif isinstance(extra, bool):
        out["additionalProperties"] = extra
    elif (
        structural
        and kind == "object"
        and "properties" in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    for combinator in ("allOf", "anyOf", "oneOf"):
        if combinator in node:
            converted = [to_json_schema(s, structural=False) for s in node[combinator]]
            if combinator == "anyOf" and "anyOf" in out:
                out["allOf"] = [{"anyOf": out.pop("anyOf")}, {"anyOf": converted}]
            else:
                out[combinator] = converted
    if "not" in node:
        out["not"] = to_json_schema(node["not"], structural=False)
    return out


def apply_defaults(node: Mapping[str, Any], value: Any) -> Any:
    """`value` with the structural schema's defaults filled in (the API server's defaulting)."""
    if isinstance(value, dict):
        props = node.get("properties") or {}
        for name, child in props.items():
            if name not in value and "default" in child:
                value[name] = copy.deepcopy(child["default"])
        for name, item in list(value.items()):
            if name in props:
                value[name] = apply_defaults(props[name], item)
            elif isinstance(node.get("additionalProperties"), Mapping):
                value[name] = apply_defaults(node["additionalProperties"], item)
    elif isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [apply_defaults(node["items"], item) for item in value]
    return value


# --- CEL ------------------------------------------------------------------------------------


@functools.cache
def _cel_program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def _cel_rules(
    node: Mapping[str, Any], value: Any, path: str
) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """(path, value, rule) for every x-kubernetes-validations rule that applies to `value`."""
    if value is None:
        return
    for rule in node.get("x-kubernetes-validations") or []:
        yield path, value, rule
    if isinstance(value, Mapping):
        props = node.get("properties") or {}
        for name, item in value.items():
            if name in props:
                yield from _cel_rules(props[name], item, f"{path}.{name}" if path else name)
            elif isinstance(node.get("additionalProperties"), Mapping):
                yield from _cel_rules(node["additionalProperties"], item, f"{path}.{name}")
    elif isinstance(value, list) and isinstance(node.get("items"), Mapping):
        for index, item in enumerate(value):
            yield from _cel_rules(node["items"], item, f"{path}[{index}]")


def check_cel(schema: Mapping[str, Any], value: Any, report: Report) -> None:
    for path, item, rule in _cel_rules(schema, value, ""):
        text = str(rule.get("rule", ""))
        shown = path or "(object)"
        if re.search(r"\boldSelf\b", text):
            report.unchecked.append(f"{shown}: transition rule (update only): {text}")
            continue
        try:
            result = _cel_program(text).evaluate({"self": json_to_cel(item)})
        except Exception as exc:  # celpy raises its own errors and KeyError for extensions
            reason = type(exc).__name__
            report.unchecked.append(f"{shown}: not evaluated offline ({reason}): {text}")
            continue
        if isinstance(result, Exception):
            report.unchecked.append(f"{shown}: not evaluated offline ({result!r}): {text}")
        elif not bool(result):
            report.errors.append(f"{shown}: {rule.get('message') or 'CEL rule failed'} ({text})")


# --- syntax rules the API server applies outside the schema --------------------------------


def _path(error: jsonschema.ValidationError) -> str:
    out = ""
    for step in error.absolute_path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "(object)"


def _check_labels(labels: Any, where: str, report: Report) -> None:
    if not isinstance(labels, Mapping):
        return
    for key, value in labels.items():
        name = str(key).rsplit("/", 1)[-1]
        prefix = str(key)[: -len(name) - 1] if "/" in str(key) else ""
        if len(name) > 63 or not _LABEL_NAME.match(name):
            report.errors.append(f"{where}: label key {key!r} is not a valid label name")
        if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
            report.errors.append(f"{where}: label key prefix {prefix!r} is not a DNS subdomain")
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            report.errors.append(
                f"{where}: label {key}={value!r} is not a valid label value (63 characters of "
                "[A-Za-z0-9_.-], alphanumeric at both ends)"
            )


#: Fields of type resource.Quantity outside `resources` (MetricTarget, emptyDir, PVC).
_QUANTITY_FIELDS = {"averageValue", "sizeLimit", "storage"}


def _check_quantity(quantity: Any, path: str, report: Report) -> None:
    text = str(quantity) if isinstance(quantity, (int, float)) else quantity
    if not isinstance(text, str) or not _QUANTITY.match(text):
        report.errors.append(f"{path}: {quantity!r} is not a quantity")


_SUFFIXES: dict[str, Decimal | int] = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}  # fmt: skip
#: Resources Kubernetes lets a container overcommit (requests below limits).
_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def quantity(value: Any) -> Decimal | None:
    """A resource.Quantity's value (None when it is not one)."""
    text = str(value) if isinstance(value, (int, float)) else value
    if not isinstance(text, str) or not _QUANTITY.match(text):
        return None
    match = re.fullmatch(r"([+-]?[0-9.]+)([eE][+-]?\d+|[A-Za-z]*)", text)
    if match is None:
        return None
    number, suffix = Decimal(match.group(1)), match.group(2)
    if suffix[:1] in ("e", "E"):
        return number * Decimal(10) ** int(suffix[1:])
    return number * Decimal(_SUFFIXES[suffix])


def _is_iana_svc_name(name: str) -> bool:
    """validation.IsValidPortName."""
    return (
        0 < len(name) <= 15
        and re.fullmatch(r"[-a-z0-9]+", name) is not None
        and re.search(r"[a-z]", name) is not None
        and "--" not in name
        and not name.startswith("-")
        and not name.endswith("-")
    )


def _check_requirements(value: Mapping[str, Any], path: str, report: Report) -> None:
    """ValidateResourceRequirements: requests <= limits; an extended resource (nvidia.com/gpu,
    google.com/tpu) is a whole number, has a limit, and its request equals it."""
    limits = value.get("limits") or {}
    requests = value.get("requests") or {}
    for name in sorted(set(limits) | set(requests)):
        limit, request = quantity(limits.get(name)), quantity(requests.get(name))
        standard = name in _STANDARD_RESOURCES or name.startswith(("hugepages-", "kubernetes.io/"))
        for which, amount in (("limits", limit), ("requests", request)):
            if amount is not None and amount < 0:
                report.errors.append(f"{path}.{which}.{name}: must be greater than or equal to 0")
            if amount is not None and not standard and amount != amount.to_integral_value():
                report.errors.append(f"{path}.{which}.{name}: must be an integer")
        if limit is not None and request is not None and request > limit:
            report.errors.append(
                f"{path}.requests.{name}: must be less than or equal to {name} limit"
            )
        if not standard and request is not None:
            if limit is None:
                report.errors.append(
                    f"{path}.limits.{name}: Limit must be set for non overcommitable resources"
                )
            elif request != limit:
                report.errors.append(
                    f"{path}.requests.{name}: must be equal to {name} limit (not overcommitable)"
                )


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path, value
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")


def _check_syntax(manifest: Mapping[str, Any], report: Report) -> None:
    meta = manifest.get("metadata")
    if not isinstance(meta, Mapping) or not (meta.get("name") or meta.get("generateName")):
        report.errors.append("metadata.name: required (name or generateName)")
    else:
        name = meta.get("name")
        if isinstance(name, str) and manifest.get("kind") in _PATH_SEGMENT_KINDS:
            # RBAC names are path segments (ValidateRBACName): anything but "/", "%", ".", "..".
            if name in (".", "..") or "/" in name or "%" in name:
                report.errors.append(f"metadata.name: {name!r} is not a path segment name")
        elif isinstance(name, str):
            rule, what = (
                (_DNS1035_LABEL, "a DNS-1035 label")
                if manifest.get("kind") in _DNS1035_KINDS
                else (_DNS1123_SUBDOMAIN, "a DNS-1123 subdomain")
            )
            limit = 63 if manifest.get("kind") in _DNS1035_KINDS else 253
            if len(name) > limit or not rule.match(name):
                report.errors.append(f"metadata.name: {name!r} is not {what}")
        namespace = meta.get("namespace")
        if isinstance(namespace, str) and not _DNS1123_LABEL.match(namespace):
            report.errors.append(f"metadata.namespace: {namespace!r} is not a DNS-1123 label")
    for path, value in _walk(manifest):
        last = path.rsplit(".", 1)[-1]
        if last in ("labels", "matchLabels") and not path.endswith("fromPod.labels"):
            _check_labels(value, path, report)
        if re.search(r"resources\.(limits|requests)$", path) and isinstance(value, Mapping):
            for resource, quantity in value.items():
                _check_quantity(quantity, f"{path}.{resource}", report)
        elif last in _QUANTITY_FIELDS or re.search(r"\.target\.value$", path):
            _check_quantity(value, path, report)
        if last == "resources" and isinstance(value, Mapping) and path.endswith("].resources"):
            _check_requirements(value, path, report)
        port_name = re.search(r"(containers|initContainers)\[\d+\]\.ports\[\d+\]\.name$", path)
        if port_name and not (isinstance(value, str) and _is_iana_svc_name(value)):
            report.errors.append(
                f"{path}: {value!r} is not a port name (IANA_SVC_NAME: at most 15 "
                "characters of a-z0-9-, a letter, no leading, trailing or double '-')"
            )


# --- the entry point ------------------------------------------------------------------------


def validate(manifest: Mapping[str, Any], minor: str = CLUSTER_MINOR) -> Report:
    """What the API server of Kubernetes `minor` (with the vendored CRDs) says of `manifest`."""
    report = Report(defaulted=copy.deepcopy(dict(manifest)))
    api_version = manifest.get("apiVersion")
    kind = manifest.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        report.errors.append("apiVersion and kind: required strings")
        return report
    crd = crds().get((api_version, kind))
    if crd is not None:
        schema = crd.schema
        report.defaulted = apply_defaults(schema, report.defaulted)
        checker = jsonschema.Draft202012Validator(to_json_schema(schema))
        for error in checker.iter_errors(report.defaulted):
            report.errors.append(f"{_path(error)}: {error.message}")
        for error in _meta_validator(minor).iter_errors(report.defaulted.get("metadata") or {}):
            report.errors.append(f"metadata.{_path(error)}: {error.message}")
        check_cel(schema, report.defaulted, report)
    else:
        validator = _builtin_validator(minor, api_version, kind)
        if validator is None:
            known = sorted(
                {a for a, k in crds() if k == kind}
                | {a for a, k in builtin_kinds(minor) if k == kind}
            )
            report.errors.append(
                f"{api_version} {kind}: no such kind in Kubernetes {minor} or in the vendored "
                f"CRDs (served versions of {kind}: {known or 'none'})"
            )
            return report
        for error in validator.iter_errors(report.defaulted):
            report.errors.append(f"{_path(error)}: {error.message}")
    _check_syntax(report.defaulted, report)
    return report


def validate_all(
    manifests: Sequence[Mapping[str, Any]], minor: str = CLUSTER_MINOR
) -> dict[str, Report]:
    """Every manifest's report, keyed "<kind>/<name>"."""
    out: dict[str, Report] = {}
    for manifest in manifests:
        meta = manifest.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        out[f"{manifest.get('kind')}/{name}"] = validate(manifest, minor)
    return out
