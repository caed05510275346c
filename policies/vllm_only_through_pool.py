"""vllm-only-through-pool: nothing reaches the vLLM Pods except through the InferencePool.

The Gateway's guards (Cloud Armor's client ranges, TLS, the endpoint picker, the backend
policy's timeout and logging) hold only for traffic that goes Gateway -> HTTPRoute ->
InferencePool. A stack policy refusing every other path to the vLLM Pods: a Service selecting
them, manual Endpoints, a route backend other than the pool, a `RequestMirror` or
`ExtensionRef` filter, a non-HTTP route to them. The rules in full: docs/policies.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from policies._config import stack_policy
from policies._gke import Manifest, VllmWorkload, manifests, vllm_workloads, where
from policies._wiring import UNKNOWN, name, namespace, selects

POOL_GROUP = "inference.networking.k8s.io"
_OTHER_ROUTES = ("GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute")
_REFUSED_FILTERS = {
    "RequestMirror": "copies every request, its Authorization header included, to another "
    "backend, around the pool",
    "ExtensionRef": "runs an extension whose behaviour the policies cannot read",
}


def _selected(service: Manifest, workloads: list[VllmWorkload]) -> list[VllmWorkload]:
    selector = (service.get("spec") or {}).get("selector")
    if not isinstance(selector, Mapping) or not selector:
        return []
    return [
        w
        for w in workloads
        if namespace(w.manifest) == namespace(service)
        and selects({"matchLabels": selector}, w.labels)
    ]


def _service_problems(service: Manifest, workloads: list[VllmWorkload]) -> list[str]:
    spec = service.get("spec") or {}
    selector = spec.get("selector")
    namespaces = {namespace(w.manifest) for w in workloads}
    if selector == UNKNOWN or (isinstance(selector, Mapping) and UNKNOWN in selector.values()):
        if namespace(service) in namespaces:
            return [
                f"{where(service)}: its selector is not known at preview, so whether it reaches "
                "the vLLM Pods around the InferencePool cannot be told"
            ]
        return []
    found = _selected(service, workloads)
    if not found:
        return []
    kind = spec.get("type") or "ClusterIP"
    extra = []
    if spec.get("externalIPs"):
        extra.append("externalIPs")
    exposure = {
        "ClusterIP": "to every Pod of the cluster",
        "NodePort": "on every node's address",
        "LoadBalancer": "on a load balancer address",
    }.get(str(kind), f"as a {kind} Service")
    return [
        f"{where(service)} ({kind}{', ' + ', '.join(extra) if extra else ''}) selects the vLLM "
        f"Pods of {where(found[0].manifest)}, so it reaches vLLM {exposure}, around the "
        "InferencePool, its Gateway and their guards; serve only through the pool (delete the "
        "Service; PodMonitoring scrapes the Pods directly)"
    ]


def _backends(route: Manifest) -> list[Mapping[str, Any]]:
    out = []
    for rule in (route.get("spec") or {}).get("rules") or []:
        if isinstance(rule, Mapping):
            out += [b for b in rule.get("backendRefs") or [] if isinstance(b, Mapping)]
    return out


def _filters(route: Manifest) -> list[tuple[str, Mapping[str, Any]]]:
    out = []
    for index, rule in enumerate((route.get("spec") or {}).get("rules") or []):
        if not isinstance(rule, Mapping):
            continue
        for f in rule.get("filters") or []:
            out.append((f"rules[{index}].filters", f))
        for b_index, backend in enumerate(rule.get("backendRefs") or []):
            for f in (backend or {}).get("filters") or []:
                out.append((f"rules[{index}].backendRefs[{b_index}].filters", f))
    return out


def _is_pool(backend: Mapping[str, Any]) -> bool:
    return backend.get("kind") == "InferencePool" and backend.get("group") == POOL_GROUP


def _route_problems(
    route: Manifest, services: dict[tuple[str, str], Manifest], workloads: list[VllmWorkload]
) -> list[str]:
    problems = []
    for path, f in _filters(route):
        kind = f.get("type") if isinstance(f, Mapping) else UNKNOWN
        why = _REFUSED_FILTERS.get(str(kind))
        if kind == UNKNOWN:
            why = "is not known at preview"
        if why:
            problems.append(f"{where(route)}: a {kind} filter ({path}) {why}; remove it")
    for backend in _backends(route):
        if _is_pool(backend):
            if route.get("kind") in _OTHER_ROUTES:
                problems.append(
                    f"{where(route)} routes to the InferencePool {backend.get('name')!r} "
                    "outside HTTP (vLLM's API is HTTP: serve it through the HTTPRoute)"
                )
            continue
        kind = backend.get("kind") or "Service"
        group = backend.get("group") or ""
        target = services.get(
            (str(backend.get("namespace") or namespace(route)), str(backend.get("name")))
        )
        reaches = kind == "Service" and group == "" and target is not None
        if reaches and target is not None and _selected(target, workloads):
            problems.append(
                f"{where(route)}: backend {kind} {backend.get('name')!r} selects the vLLM Pods, "
                "so the route reaches vLLM around the InferencePool (no picker, no pool "
                "policies); route to the InferencePool only"
            )
        elif route.get("kind") == "HTTPRoute":
            problems.append(
                f"{where(route)}: backend {kind} {backend.get('name')!r} is not the "
                "InferencePool; a route of a vLLM stack sends requests to the pool only"
            )
    return problems


def validate_vllm_only_through_pool(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    found = manifests(args)
    workloads = vllm_workloads(found)
    if not workloads:
        return
    namespaces = {namespace(w.manifest) for w in workloads}
    services = {(namespace(s), name(s)): s for s in found if s.get("kind") == "Service"}
    problems: list[str] = []
    for m in found:
        kind = m.get("kind")
        if kind == "Service":
            problems += _service_problems(m, workloads)
        elif kind in ("Endpoints", "EndpointSlice") and namespace(m) in namespaces:
            problems.append(
                f"{where(m)}: manual endpoints in a namespace with vLLM Pods can point a "
                "Service at them around the InferencePool; let Kubernetes manage endpoints"
            )
        elif kind == "HTTPRoute" or kind in _OTHER_ROUTES:
            problems += _route_problems(m, services, workloads)
    for problem in dict.fromkeys(problems):
        report_violation(f"{problem}.", None)


vllm_only_through_pool = stack_policy(
    "vllm-only-through-pool",
    "No Service, manual endpoints, route backend or mirror filter reaches the vLLM "
    "Pods except through the InferencePool behind the stack's Gateway.",
    validate_vllm_only_through_pool,
)
