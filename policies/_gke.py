"""What the GKE policies share: a stack's Kubernetes objects as plain manifests, the workloads
among them that run vLLM (read by the one vLLM reader, `policies._server`, so a stack policy
judges exactly the servers the resource policies judge), and Kubernetes booleans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import StackValidationArgs

from policies._k8s import OPAQUE_PREFIXES, POD_TEMPLATES, is_kubernetes
from policies._resources import VllmServer
from policies._server import read_servers
from policies._wiring import (
    PATCH,
    manifest_from_engine,
    name,
    namespace,
    plain,
    pod_labels,
    type_token,
)

Manifest = dict[str, Any]


def manifests(args: StackValidationArgs) -> list[Manifest]:
    """Every Kubernetes object the stack declares, as plain manifests (Helm releases, whose
    objects the policies cannot see, are refused by `vllm-server-readable`)."""
    found: list[Manifest] = []
    for resource in args.resources:
        if not is_kubernetes(resource.resource_type) or resource.resource_type.startswith(
            OPAQUE_PREFIXES
        ):
            continue
        try:
            found.append(manifest_from_engine(resource.resource_type, plain(resource.props)))
        except ValueError:
            continue  # a provider or a component, not an object
    return [_patched(m, found) if m.get(PATCH) else m for m in found]


def _identity(m: Mapping[str, Any]) -> tuple[Any, ...]:
    return (m.get("apiVersion"), m.get("kind"), namespace(m), name(m))


def _overlay(base: Any, patch: Any) -> Any:
    """A patch over the object it patches, read so no field can hide: mappings merged, a
    list holding the object's items and the patch's (server-side apply merges lists such as
    listeners, metrics and containers by key, or replaces them; either way the policy judges
    every item that may be there), any other value the patch's."""
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        return {k: _overlay(base[k], v) if k in base else v for k, v in patch.items()} | {
            k: v for k, v in base.items() if k not in patch
        }
    if isinstance(base, list) and isinstance(patch, list):
        return [*base, *patch]
    return patch


def _patched(patch: Manifest, found: Sequence[Manifest]) -> Manifest:
    """A `<Kind>Patch` read as the object it leaves behind: the stack's own object of that
    name with the patch over it; alone (every field the patch does not set unknown to the
    policies) when the object is not in the stack."""
    bases = [m for m in found if not m.get(PATCH) and _identity(m) == _identity(patch)]
    return _overlay(bases[0], patch) if bases else patch


def where(m: Mapping[str, Any]) -> str:
    return f"{m.get('kind')} {namespace(m)}/{name(m)}"


@dataclass(frozen=True)
class VllmWorkload:
    """A Pod-running object whose Pods start vLLM: its manifest, Pod labels and servers."""

    manifest: Manifest
    labels: dict[str, str]
    servers: tuple[VllmServer, ...]


def vllm_workloads(found: Sequence[Manifest]) -> list[VllmWorkload]:
    """The workloads among `found` that start at least one vLLM server."""
    out = []
    for m in found:
        token = type_token(m)
        if token not in POD_TEMPLATES:
            continue
        servers = read_servers(token, m).servers
        if servers:
            out.append(VllmWorkload(m, pod_labels(m), tuple(servers)))
    return out


def strictly_false(value: Any) -> bool:
    """A Kubernetes boolean that is off: absent, `false`, or the string "false" in any case;
    anything else (true in any spelling, 1, "yes", a value unknown at preview) is not."""
    if value is None or value is False:
        return True
    return isinstance(value, str) and value.strip().lower() == "false"
