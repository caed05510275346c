"""no-public-gateway: nothing in the cluster takes traffic from the internet unless asked.

A GKE Gateway is internal only with an internal class (`gke-l7-rilb`, and the multi-cluster
internal classes); `gke-l7-global-external-managed`, `gke-l7-regional-external-managed`,
`gke-l7-gxlb` and their `-mc` variants give it a public address (GKE's "GatewayClass
capabilities" page), and a class this policy does not know is treated as external (fail
closed). The same holds for the other ways a cluster exposes Pods: a `LoadBalancer` Service
without GKE's internal annotation, and an Ingress of the `gce` class.

A public endpoint is a decision: the stack's `public: true` puts the
`gemma4.dev/public: "true"` annotation on the Gateway it declares (and requires the vLLM API
key and client source ranges there), or this policy's `allowPublic` allows every one.
"""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from policies._config import schema, setting_bool, setting_strings
from policies._resources import as_bool, get

GATEWAY_KINDS = (
    "kubernetes:gateway.networking.k8s.io/v1:Gateway",
    "kubernetes:gateway.networking.k8s.io/v1beta1:Gateway",
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


def validate_no_public_gateway(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if setting_bool(args, CONFIG, "allowPublic"):
        return
    props = args.props
    if args.resource_type in GATEWAY_KINDS:
        if _marked_public(props):
            return
        internal = setting_strings(args, CONFIG, "internalClasses")
        name = get(props, "spec", "gatewayClassName")
        if not isinstance(name, str):
            report_violation(
                f"{args.name}: the Gateway's class is not known at preview, so it may be "
                f"external; give spec.gatewayClassName literally ({', '.join(internal)}).",
                None,
            )
        elif name not in internal:
            what = "is external" if name in EXTERNAL_CLASSES else "is not a known internal class"
            report_violation(
                f"{args.name}: Gateway class {name!r} {what}, so the model would be reachable "
                f"from the internet; {_FIX}. Internal classes: {', '.join(internal)}.",
                None,
            )
    elif args.resource_type == SERVICE:
        if get(props, "spec", "type") != "LoadBalancer" or _marked_public(props):
            return
        annotations = [get(props, "metadata", "annotations", a) for a in INTERNAL_LB_ANNOTATIONS]
        if not any(isinstance(a, str) and a.lower() == "internal" for a in annotations):
            report_violation(
                f"{args.name}: a LoadBalancer Service without the annotation "
                f'{INTERNAL_LB_ANNOTATIONS[0]}: "Internal" gets a public address; serve '
                f"through the stack's Gateway, or annotate it internal; {_FIX}.",
                None,
            )
    elif args.resource_type == INGRESS:
        if _marked_public(props):
            return
        cls = get(props, "spec", "ingressClassName") or get(
            props, "metadata", "annotations", "kubernetes.io/ingress.class"
        )
        if cls != "gce-internal":
            report_violation(
                f"{args.name}: an Ingress of class {cls or 'gce (the default)'!r} gets a public "
                f"address on GKE; use class gce-internal or the stack's Gateway; {_FIX}.",
                None,
            )


no_public_gateway = ResourceValidationPolicy(
    name="no-public-gateway",
    description="Gateways, LoadBalancer Services and Ingresses are internal unless the stack "
    "sets 'public: true' (unknown Gateway classes count as external).",
    validate=validate_no_public_gateway,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=CONFIG,
)
