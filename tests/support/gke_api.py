"""pulumi-gcp's GKE cluster and node pool inputs as the container.v1 request bodies.

The provider sends a `gcp:container/cluster:Cluster` as `projects.locations.clusters.create`
and a `gcp:container/nodePool:NodePool` as `...clusters.nodePools.create`; the field names of
its inputs follow Terraform's schema, not the API's. This module renames them into the API's
body the way the provider's expanders do (terraform-provider-google
`resource_container_cluster.go`, `node_config.go`, `resource_container_node_pool.go`), so the
body can be checked against Google's own container.v1 discovery document
(`tests.support.discovery.schema_errors`): field names, JSON types, int64-as-string, enums.

A field this module has no rule for is reported (fail closed), so a new input is mapped, and
then checked, before it is trusted. Inputs that never reach the body (the path's project,
location and cluster; provider-only switches such as `deletionProtection`) are listed in
`_PROVIDER_ONLY`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Inputs that are path parameters or provider behaviour, not body fields.
_PROVIDER_ONLY = {
    "cluster": {"location", "project", "deletionProtection", "removeDefaultNodePool"},
    "nodePool": {"cluster", "location", "project", "namePrefix"},
}

#: Renames inside the body, per pulumi path (".": top level); None drops a Terraform-only
#: expression of something the API derives.
_CLUSTER_RENAMES: dict[str, dict[str, str | None]] = {
    ".": {
        "minMasterVersion": "initialClusterVersion",
        "nodeLocations": "locations",
        # VPC_NATIVE is expressed as ipAllocationPolicy.useIpAliases (see below).
        "networkingMode": None,
        "gatewayApiConfig": "networkConfig.gatewayApiConfig",
    },
    "monitoringConfig": {
        "enableComponents": "componentConfig.enableComponents",
        "managedPrometheus": "managedPrometheusConfig",
    },
    "loggingConfig": {"enableComponents": "componentConfig.enableComponents"},
    "nodeConfig": {"guestAccelerators": "accelerators"},
    "nodeConfig.accelerators[]": {"type": "acceleratorType", "count": "acceleratorCount"},
}
_NODE_POOL_RENAMES: dict[str, dict[str, str | None]] = {
    ".": {"nodeConfig": "config", "nodeLocations": "locations"},
    "config": {"guestAccelerators": "accelerators"},
    "config.accelerators[]": {"type": "acceleratorType", "count": "acceleratorCount"},
}


def _set(target: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value


def _rename(value: Any, path: str, renames: Mapping[str, Mapping[str, str | None]]) -> Any:
    if isinstance(value, list):
        return [_rename(item, f"{path}[]", renames) for item in value]
    if not isinstance(value, Mapping):
        return value
    rules = renames.get(path or ".", {})
    out: dict[str, Any] = {}
    for key, item in value.items():
        new = rules.get(key, key)
        if new is None:
            continue
        child_path = f"{path}.{new}" if path else new
        _set(out, new, _rename(item, child_path, renames))
    return out


def _coerce(doc: Mapping[str, Any], spec: Mapping[str, Any], value: Any) -> Any:
    """Numbers as the API's JSON wants them: int64/uint64 as decimal strings, int32 as ints
    (the provider sends integers; Pulumi's mocks hand them over as floats)."""
    if "$ref" in spec:
        return _coerce(doc, doc["schemas"][spec["$ref"]], value)
    if isinstance(value, Mapping):
        props = spec.get("properties") or {}
        extra = spec.get("additionalProperties")
        return {
            k: _coerce(doc, props.get(k) or (extra if isinstance(extra, Mapping) else {}), v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_coerce(doc, spec.get("items") or {}, v) for v in value]
    if isinstance(value, float) and value.is_integer():
        if spec.get("format") in ("int64", "uint64"):
            return str(int(value))
        if spec.get("type") == "integer":
            return int(value)
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and spec.get("format") in ("int64", "uint64")
    ):
        return str(value)
    return value


def cluster_body(doc: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The `Cluster` of a clusters.create request, from pulumi-gcp Cluster inputs."""
    kept = {k: v for k, v in inputs.items() if k not in _PROVIDER_ONLY["cluster"]}
    body: dict[str, Any] = _rename(kept, "", _CLUSTER_RENAMES)
    if inputs.get("networkingMode") == "VPC_NATIVE":
        body.setdefault("ipAllocationPolicy", {})["useIpAliases"] = True
    coerced: dict[str, Any] = _coerce(doc, {"$ref": "Cluster"}, body)
    return coerced


def node_pool_body(doc: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The `NodePool` of a nodePools.create request, from pulumi-gcp NodePool inputs."""
    kept = {k: v for k, v in inputs.items() if k not in _PROVIDER_ONLY["nodePool"]}
    body: dict[str, Any] = _rename(kept, "", _NODE_POOL_RENAMES)
    if "autoscaling" in body:
        # The provider sends `enabled: true` whenever the autoscaling block is set.
        body["autoscaling"] = {"enabled": True, **body["autoscaling"]}
    coerced: dict[str, Any] = _coerce(doc, {"$ref": "NodePool"}, body)
    return coerced
