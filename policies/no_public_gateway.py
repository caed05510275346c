"""no-public-gateway: nothing in the cluster takes traffic from the internet unless asked.

A GKE Gateway is internal only with an internal class (GKE's "GatewayClass capabilities"); a
class not known here is external (fail closed), as are a `LoadBalancer` Service without GKE's
internal annotation and a `gce` Ingress. A public endpoint is a decision (the stack's
`public: true` annotation, or `allowPublic`), and what it reaches must be guarded too: Cloud
Armor on each pool behind it and an API key on its vLLM Pods. The rules in full:
docs/policies.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from policies._config import schema, setting_bool, setting_strings, stack_policy
from policies._gke import manifests as stack_manifests
from policies._props import get, items
from policies._resources import as_bool
from policies._server import read_servers
from policies._wiring import pod_labels, selects, type_token

GATEWAY_KINDS = (
    "kubernetes:gateway.networking.k8s.io/v1:Gateway",
    "kubernetes:gateway.networking.k8s.io/v1beta1:Gateway",
)
ROUTE_KINDS = (
    "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute",
    "kubernetes:gateway.networking.k8s.io/v1beta1:HTTPRoute",
    "kubernetes:gateway.networking.k8s.io/v1:GRPCRoute",
)
SERVICE = "kubernetes:core/v1:Service"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
#: The annotation the program puts on a Gateway when the stack says `public: true`.
PUBLIC_ANNOTATION = "gemma4.dev/public"
#: GKE's annotation for an internal passthrough load balancer Service.
INTERNAL_LB_ANNOTATIONS = (
    "networking.gke.io/load-balancer-type",
    "cloud.google.com/load-balancer-type",
)
#: GKE's Gateway classes that give a public address.
EXTERNAL_CLASSES = (
    "gke-l7-global-external-managed",
    "gke-l7-global-external-managed-mc",
    "gke-l7-regional-external-managed",
    "gke-l7-regional-external-managed-mc",
    "gke-l7-gxlb",
    "gke-l7-gxlb-mc",
)

CONFIG = schema(
    {
        "allowPublic": {
            "type": "boolean",
            "default": False,
            "description": "Allow every external Gateway, LoadBalancer Service and Ingress "
            "(not only those the stack marks public).",
        },
        "internalClasses": {
            "type": "array",
            "items": {"type": "string"},
            "default": [
                "gke-l7-rilb",
                "gke-l7-rilb-mc",
                "gke-l7-cross-regional-internal-managed-mc",
            ],
            "description": "Gateway classes that give an internal address only.",
        },
    }
)

_FIX = (
    "use the internal class gke-l7-rilb (the default), or set 'public: true' in the stack "
    "config, which marks the Gateway public and requires the vLLM API key and client source "
    "ranges"
)


def _marked_public(props: object) -> bool:
    return as_bool(get(props, "metadata", "annotations", PUBLIC_ANNOTATION)) is True


def _namespace(props: object) -> str:
    value = get(props, "metadata", "namespace")
    return value if isinstance(value, str) and value else "default"


def _route_problems(props: Mapping[str, Any], gateways: set[tuple[str, str]]) -> list[str]:
    """Parents of a route that are not Gateways of this stack (one elsewhere may be public)."""
    problems = []
    for parent in items(get(props, "spec", "parentRefs")):
        kind = get(parent, "kind") or "Gateway"
        name = get(parent, "name")
        namespace = get(parent, "namespace") or _namespace(props)
        if kind == "Gateway" and (namespace, name) not in gateways:
            problems.append(
                f"attaches to Gateway {namespace}/{name}, which this stack does not declare, so "
                "the policies cannot tell whether it is internal; route through the stack's "
                "own Gateway."
            )
    return problems


def validate_no_public_gateway(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    if setting_bool(args, CONFIG, "allowPublic"):
        return
    gateways = {
        (_namespace(r.props), str(get(r.props, "metadata", "name")))
        for r in args.resources
        if r.resource_type in GATEWAY_KINDS
    }
    internal = setting_strings(args, CONFIG, "internalClasses")
    for resource in args.resources:
        for problem in _problems(resource.resource_type, resource.props, internal, gateways):
            report_violation(f"{resource.name}: {problem}", resource.urn)
    for problem in public_requirements(args, internal):
        report_violation(problem, None)


def public_requirements(args: StackValidationArgs, internal: list[str]) -> list[str]:
    """A public Gateway's pools need a Cloud Armor policy (the client ranges) in their
    GCPBackendPolicy and a vLLM that requires an API key."""
    manifests = stack_manifests(args)
    external = {
        (_namespace(g), str(get(g, "metadata", "name")))
        for g in manifests
        if g.get("kind") == "Gateway" and get(g, "spec", "gatewayClassName") not in internal
    }
    pools: set[tuple[str, str]] = set()
    for route in manifests:
        if route.get("kind") not in ("HTTPRoute", "GRPCRoute"):
            continue
        parents = {
            (get(p, "namespace") or _namespace(route), get(p, "name"))
            for p in items(get(route, "spec", "parentRefs"))
        }
        if not parents & external:
            continue
        for rule in items(get(route, "spec", "rules")):
            for backend in items(get(rule, "backendRefs")):
                if get(backend, "kind") == "InferencePool":
                    pools.add(
                        (get(backend, "namespace") or _namespace(route), get(backend, "name"))
                    )
    problems: list[str] = []
    for namespace, name in sorted(pools, key=str):
        armored = [
            b
            for b in manifests
            if b.get("kind") == "GCPBackendPolicy"
            and get(b, "spec", "targetRef", "kind") == "InferencePool"
            and get(b, "spec", "targetRef", "name") == name
            and (get(b, "spec", "targetRef", "namespace") or _namespace(b)) == namespace
            and get(b, "spec", "default", "securityPolicy")
        ]
        if not armored:
            problems.append(
                f"InferencePool {namespace}/{name} is behind a public Gateway without a "
                "GCPBackendPolicy naming a Cloud Armor securityPolicy, so any client on the "
                "internet reaches it; set the stack's 'sourceRanges'."
            )
        pool = next(
            (
                p
                for p in manifests
                if p.get("kind") == "InferencePool"
                and (_namespace(p), get(p, "metadata", "name")) == (namespace, name)
            ),
            None,
        )
        selector = get(pool, "spec", "selector")
        for workload in manifests:
            if pool is None or not selects(selector, pod_labels(workload)):
                continue
            for server in read_servers(type_token(workload), workload).servers:
                env_key = any(
                    get(e, "name") == "VLLM_API_KEY"
                    for c in items(get(workload, "spec", "template", "spec", "containers"))
                    for e in items(get(c, "env"))
                )
                if not (env_key or server.args.get("api-key")):
                    problems.append(
                        f"{workload.get('kind')} {get(workload, 'metadata', 'name')}: vLLM "
                        f"({server.where}) serves behind a public Gateway without an API key; "
                        "set VLLM_API_KEY from a Secret (stack key 'apiKeySecret')."
                    )
    return problems


def _problems(
    resource_type: str,
    props: Mapping[str, Any],
    internal: list[str],
    gateways: set[tuple[str, str]],
) -> list[str]:
    if resource_type in ROUTE_KINDS:
        return _route_problems(props, gateways)
    if resource_type in GATEWAY_KINDS:
        if _marked_public(props):
            return []
        name = get(props, "spec", "gatewayClassName")
        if not isinstance(name, str):
            return [
                "the Gateway's class is not known at preview, so it may be external; give "
                f"spec.gatewayClassName literally ({', '.join(internal)})."
            ]
        if name not in internal:
            what = "is external" if name in EXTERNAL_CLASSES else "is not a known internal class"
            return [
                f"Gateway class {name!r} {what}, so the model would be reachable from the "
                f"internet; {_FIX}. Internal classes: {', '.join(internal)}."
            ]
        return []
    if resource_type == SERVICE:
        if get(props, "spec", "type") != "LoadBalancer" or _marked_public(props):
            return []
        annotations = [get(props, "metadata", "annotations", a) for a in INTERNAL_LB_ANNOTATIONS]
        if any(isinstance(a, str) and a.lower() == "internal" for a in annotations):
            return []
        return [
            f"a LoadBalancer Service without the annotation {INTERNAL_LB_ANNOTATIONS[0]}: "
            f'"Internal" gets a public address; serve through the stack\'s Gateway, or annotate '
            f"it internal; {_FIX}."
        ]
    if resource_type == INGRESS and not _marked_public(props):
        cls = get(props, "spec", "ingressClassName") or get(
            props, "metadata", "annotations", "kubernetes.io/ingress.class"
        )
        if cls != "gce-internal":
            return [
                f"an Ingress of class {cls or 'gce (the default)'!r} gets a public address on "
                f"GKE; use class gce-internal or the stack's Gateway; {_FIX}."
            ]
    return []


no_public_gateway = stack_policy(
    "no-public-gateway",
    "Gateways, LoadBalancer Services and Ingresses are internal unless the stack "
    "sets 'public: true' (unknown Gateway classes count as external; a public one needs client "
    "ranges and an API key), and routes attach only to the stack's own Gateways.",
    validate_no_public_gateway,
    config=CONFIG,
)
