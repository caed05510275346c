"""hooks-endpoint-own-gateway: the endpoint the stack publishes is its own Gateway.

The GKE stack writes where its Gateway answers into a ConfigMap (`data.endpointUrl`); clients
in the cluster read it, and the post-deploy checks send the vLLM API key to the URL the stack
names. A URL pointed elsewhere (the metadata server `169.254.169.254`, a host outside the
stack) hands the key to whoever answers there, so it must name a declared Gateway: its
listener's hostname, scheme and port, or its literal address (a private one when every
Gateway is internal). The rules in full: docs/policies.md.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pulumi_policy import ReportViolation, StackValidationArgs

from policies._config import setting_strings, stack_policy
from policies._gke import Manifest, manifests, where
from policies._wiring import UNKNOWN
from policies.public_gateway_https_only import CONFIG

URL_KEY = "endpointUrl"
_METADATA_NAMES = frozenset({"metadata.google.internal", "metadata", "metadata.goog"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _listeners(gateways: list[Manifest]) -> list[Mapping[str, Any]]:
    out = []
    for g in gateways:
        for listener in (g.get("spec") or {}).get("listeners") or []:
            if isinstance(listener, Mapping):
                out.append(listener)
    return out


#: The private ranges a VPC subnet's internal address comes from (RFC 1918). Python's
#: `is_private` also holds the documentation ranges (192.0.2.0/24, 203.0.113.0/24, ...), which
#: route to whoever announces them.
_RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def _literal_addresses(gateways: list[Manifest]) -> set[str]:
    found = set()
    for g in gateways:
        for address in (g.get("spec") or {}).get("addresses") or []:
            if isinstance(address, Mapping) and address.get("type") == "IPAddress":
                found.add(str(address.get("value")))
    return found


def url_problem(url: Any, gateways: list[Manifest], internal: list[str]) -> str | None:
    if not gateways:
        return "the stack declares no Gateway for it to name"
    if not isinstance(url, str):
        return f"{URL_KEY} is not a string"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"{URL_KEY} {url!r} is not a URL ({exc})"
    scheme, host = parts.scheme, (parts.hostname or "")
    if scheme not in _DEFAULT_PORTS or not host:
        return f"{URL_KEY} {url!r} is not an http(s) URL with a host"
    if parts.username is not None or parts.password is not None:
        return f"{URL_KEY} {url!r} carries user-info"
    port = port or _DEFAULT_PORTS[scheme]
    public = any((g.get("spec") or {}).get("gatewayClassName") not in internal for g in gateways)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None:
        if (
            ip.is_link_local
            or ip.is_loopback
            or ip.is_multicast
            or ip.is_unspecified
            or ip.is_reserved
        ):
            return (
                f"{URL_KEY} {url!r} is a link-local, loopback or reserved address (the metadata "
                "server answers on 169.254.169.254), not the stack's Gateway"
            )
        if host in _literal_addresses(gateways):
            return None
        if public:
            return (
                f"{URL_KEY} {url!r} is a bare address; the public Gateway is reached over "
                "https by its listener's name (the stack's gatewayDomain)"
            )
        if not any(ip in net for net in _RFC1918):
            return (
                f"{URL_KEY} {url!r} is not an RFC 1918 address (10.0.0.0/8, 172.16.0.0/12, "
                "192.168.0.0/16), where the internal Gateway's address comes from the VPC's "
                "subnet; documentation, shared and other special ranges are refused"
            )
        if scheme != "http" or port != 80:
            return f"{URL_KEY} {url!r}: the internal Gateway listens on http port 80"
        return None
    if host.lower().rstrip(".") in _METADATA_NAMES:
        return f"{URL_KEY} {url!r} is the metadata server, not the stack's Gateway"
    for listener in _listeners(gateways):
        if listener.get("hostname") != host:
            continue
        expected = "https" if listener.get("protocol") == "HTTPS" else "http"
        if scheme == expected and port == listener.get("port"):
            return None
        return (
            f"{URL_KEY} {url!r} names the Gateway's host with {scheme} port {port}, not its "
            f"listener's {expected} port {listener.get('port')}"
        )
    names = sorted(str(x.get("hostname")) for x in _listeners(gateways) if x.get("hostname"))
    return (
        f"{URL_KEY} {url!r} names host {host!r}, which is no listener of the stack's Gateways "
        f"({', '.join(names) or 'none has a hostname'}): an outside address would receive "
        "the API key"
    )


def validate_hooks_endpoint_own_gateway(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    internal = setting_strings(args, CONFIG, "internalClasses")
    found = manifests(args)
    gateways = [m for m in found if m.get("kind") == "Gateway"]
    for m in found:
        if m.get("kind") != "ConfigMap":
            continue
        data = m.get("data")
        if not isinstance(data, Mapping) or URL_KEY not in data:
            continue
        url = data[URL_KEY]
        if url == UNKNOWN:
            continue  # derived from the Gateway's address; judged when known
        problem = url_problem(url, gateways, internal)
        if problem:
            report_violation(
                f"{where(m)}: {problem}; the endpoint the stack publishes (and the post-deploy "
                "checks send the API key to) is the stack's own Gateway.",
                None,
            )


hooks_endpoint_own_gateway = stack_policy(
    "hooks-endpoint-own-gateway",
    "The endpoint ConfigMap's endpointUrl names the stack's own Gateway (its "
    "listener's hostname and scheme, or its internal private address), never the metadata "
    "server or an outside host.",
    validate_hooks_endpoint_own_gateway,
    config=CONFIG,
)
