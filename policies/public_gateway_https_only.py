"""public-gateway-https-only: a Gateway on the internet serves HTTPS, never plain HTTP.

Clients send vLLM's API key in every request's Authorization header; over plain HTTP it
crosses the internet in clear text. A Gateway whose class is not internal has HTTPS listeners
that terminate TLS with a certificate (the Gateway API's listener fields, the v1.5.1 CRD in
tests/data/k8s/crds, and GKE's "Secure a Gateway" options), HTTP listeners only for routes
that redirect to https, and no passthrough, TCP or UDP listener (vLLM terminates no TLS).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from policies._config import schema, setting_strings, stack_policy
from policies._gke import Manifest, manifests, where
from policies._wiring import name, namespace
from policies.no_public_gateway import CONFIG as GATEWAY_CONFIG

CONFIG = schema({"internalClasses": GATEWAY_CONFIG.properties["internalClasses"]})

CERT_OPTIONS = ("networking.gke.io/cert-manager-certs", "networking.gke.io/pre-shared-certs")
CERT_MAP = "networking.gke.io/certmap"


def _nonempty(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _has_certificate(gateway: Manifest, tls: Mapping[str, Any]) -> bool:
    refs = tls.get("certificateRefs")
    if isinstance(refs, list) and any(
        isinstance(r, Mapping) and _nonempty(r.get("name")) for r in refs
    ):
        return True
    options = tls.get("options")
    if isinstance(options, Mapping) and any(_nonempty(options.get(k)) for k in CERT_OPTIONS):
        return True
    annotations = (gateway.get("metadata") or {}).get("annotations") or {}
    return isinstance(annotations, Mapping) and _nonempty(annotations.get(CERT_MAP))


def _attached(route: Manifest, gateway: Manifest, listener: Mapping[str, Any]) -> bool:
    for parent in (route.get("spec") or {}).get("parentRefs") or []:
        if not isinstance(parent, Mapping) or (parent.get("kind") or "Gateway") != "Gateway":
            continue
        if (parent.get("namespace") or namespace(route), parent.get("name")) != (
            namespace(gateway),
            name(gateway),
        ):
            continue
        section, port = parent.get("sectionName"), parent.get("port")
        if section not in (None, listener.get("name")):
            continue
        if port not in (None, listener.get("port")):
            continue
        return True
    return False


def _redirects_only(route: Manifest) -> bool:
    rules = (route.get("spec") or {}).get("rules") or []
    if not rules:
        return False
    for rule in rules:
        if not isinstance(rule, Mapping) or rule.get("backendRefs"):
            return False
        filters = rule.get("filters") or []
        if not any(
            isinstance(f, Mapping)
            and f.get("type") == "RequestRedirect"
            and (f.get("requestRedirect") or {}).get("scheme") == "https"
            for f in filters
        ):
            return False
    return True


def listener_problems(gateway: Manifest, found: list[Manifest]) -> list[str]:
    problems = []
    routes = [m for m in found if m.get("kind") in ("HTTPRoute", "GRPCRoute")]
    listeners = (gateway.get("spec") or {}).get("listeners")
    if not isinstance(listeners, list):
        return [f"{where(gateway)}: its listeners are not known at preview"]
    for listener in listeners:
        if not isinstance(listener, Mapping):
            problems.append(f"{where(gateway)}: a listener is not known at preview")
            continue
        label = f"{where(gateway)} listener {listener.get('name')!r}"
        protocol = listener.get("protocol")
        if protocol == "HTTPS":
            tls = listener.get("tls")
            mode = (tls or {}).get("mode", "Terminate") if isinstance(tls, Mapping) else None
            if not isinstance(tls, Mapping) or mode != "Terminate":
                problems.append(f"{label}: HTTPS without TLS termination (tls.mode {mode!r})")
            elif not _has_certificate(gateway, tls):
                problems.append(
                    f"{label}: HTTPS without a certificate (tls.certificateRefs, tls.options "
                    f"{' or '.join(CERT_OPTIONS)}, or the {CERT_MAP} annotation)"
                )
        elif protocol == "HTTP":
            attached = [r for r in routes if _attached(r, gateway, listener)]
            if not attached or not all(_redirects_only(r) for r in attached):
                problems.append(
                    f"{label} serves plain HTTP on port {listener.get('port')} of a public "
                    "Gateway: clients' API keys would cross the internet in clear text; serve "
                    "HTTPS only (the stack's gatewayDomain), or attach only a route that "
                    "redirects to https"
                )
        else:
            problems.append(
                f"{label}: protocol {protocol!r} on a public Gateway (vLLM serves HTTP behind "
                "a TLS-terminating HTTPS listener only)"
            )
    return problems


def validate_public_gateway_https_only(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    internal = setting_strings(args, CONFIG, "internalClasses")
    found = manifests(args)
    for gateway in found:
        if gateway.get("kind") != "Gateway":
            continue
        if (gateway.get("spec") or {}).get("gatewayClassName") in internal:
            continue
        for problem in listener_problems(gateway, found):
            report_violation(f"{problem}.", None)


public_gateway_https_only = stack_policy(
    "public-gateway-https-only",
    "A Gateway that is not internal serves HTTPS with a certificate (Secret, "
    "Certificate Manager, pre-shared or certificate map); HTTP only to redirect to https.",
    validate_public_gateway_https_only,
    config=CONFIG,
)
