"""public-gateway-https-only and hooks-endpoint-own-gateway on near variants of the shipped
GKE stacks, internal and public (rendered under mocks)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.hooks_endpoint_own_gateway import hooks_endpoint_own_gateway
from policies.public_gateway_https_only import public_gateway_https_only
from serving.render import gke
from tests.policies._gke_stack import add, find, messages, resources

PUBLIC = "gke-l4-public-spot"
DOMAIN = "llm.example.com"


def listeners(found: list[Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = find(found, "Gateway")["spec"]["listeners"]
    return items


@pytest.mark.parametrize("variant", ["gke-l4", "gke-tpu-v6e", PUBLIC])
def test_the_shipped_gateways_pass(variant: str) -> None:
    assert messages(public_gateway_https_only, resources(variant)) == []
    assert messages(hooks_endpoint_own_gateway, resources(variant)) == []


def test_the_public_stacks_listener_is_https_with_its_certificate() -> None:
    (listener,) = listeners(resources(PUBLIC))
    assert listener["protocol"] == "HTTPS" and listener["port"] == 443
    assert listener["tls"]["options"][gke.CERT_MANAGER_CERTS]


def test_the_internal_gateway_may_serve_http_inside_the_vpc() -> None:
    (listener,) = listeners(resources("gke-l4"))
    assert listener["protocol"] == "HTTP"
    assert messages(public_gateway_https_only, resources("gke-l4")) == []


def test_a_public_gateway_over_plain_http_is_refused() -> None:
    """The issue's case: public: true gave an external Gateway with one HTTP listener."""
    found = resources(PUBLIC)
    find(found, "Gateway")["spec"]["listeners"] = [{"name": "http", "protocol": "HTTP", "port": 80}]
    (message,) = messages(public_gateway_https_only, found)
    assert "plain HTTP on port 80" in message and "clear text" in message


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"tls": None}, "without TLS termination"),
        ({"tls": {"mode": "Passthrough"}}, "'Passthrough'"),
        ({"tls": {"mode": "Terminate"}}, "without a certificate"),
        (
            {"tls": {"mode": "Terminate", "options": {gke.CERT_MANAGER_CERTS: ""}}},
            "without a certificate",
        ),
        (
            {"tls": {"mode": "Terminate", "options": {"other.example/certs": "c"}}},
            "without a certificate",
        ),
        ({"protocol": "TLS"}, "protocol 'TLS'"),
        ({"protocol": "TCP"}, "protocol 'TCP'"),
    ],
)
def test_https_without_a_certificate_or_another_protocol_is_refused(
    change: dict[str, Any], words: str
) -> None:
    found = resources(PUBLIC)
    (listener,) = listeners(found)
    listener.update(change)
    if listener.get("tls") is None:
        listener.pop("tls")
    (message,) = messages(public_gateway_https_only, found)
    assert words in message


@pytest.mark.parametrize(
    "tls",
    [
        {"certificateRefs": [{"name": "llm-tls"}]},
        {"options": {"networking.gke.io/pre-shared-certs": "llm-cert"}},
        {"options": {gke.CERT_MANAGER_CERTS: "a,b"}},
    ],
)
def test_every_documented_certificate_source_passes(tls: dict[str, Any]) -> None:
    found = resources(PUBLIC)
    (listener,) = listeners(found)
    listener["tls"] = tls
    assert messages(public_gateway_https_only, found) == []


def http_listener(found: list[Any]) -> None:
    listeners(found).append({"name": "http", "protocol": "HTTP", "port": 80})


def test_an_http_listener_that_only_redirects_passes_and_one_that_serves_is_refused() -> None:
    redirect = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "to-https", "namespace": "gemma4"},
        "spec": {
            "parentRefs": [{"name": gke.GATEWAY_NAME, "sectionName": "http"}],
            "rules": [
                {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]}
            ],
        },
    }
    found = resources(PUBLIC)
    http_listener(found)
    # The vLLM route attaches to every listener (no sectionName): it serves over HTTP.
    assert any("plain HTTP" in m for m in messages(public_gateway_https_only, found))
    find(found, "HTTPRoute", "vllm")["spec"]["parentRefs"][0]["sectionName"] = "https"
    assert any("plain HTTP" in m for m in messages(public_gateway_https_only, found))  # nothing
    add(found, redirect)
    assert messages(public_gateway_https_only, found) == []
    find(found, "HTTPRoute", "to-https")["spec"]["rules"][0]["filters"][0]["requestRedirect"][
        "scheme"
    ] = "http"
    assert messages(public_gateway_https_only, found)


# --- the endpoint the stack publishes -----------------------------------------------------


def endpoint(found: list[Any]) -> dict[str, Any]:
    data: dict[str, Any] = find(found, "ConfigMap", "gemma4-endpoint")["data"]
    return data


@pytest.mark.parametrize("variant", ["gke-l4", PUBLIC])
@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254",
        "http://169.254.169.254/computeMetadata/v1/",
        "http://[fe80::1]",
        "http://127.0.0.1:8000",
        "http://metadata.google.internal",
        "https://attacker.example.net",
        "https://llm.example.com.attacker.example.net",
        "http://34.120.0.7",  # a public address
        f"https://user:pw@{DOMAIN}",
        "ftp://10.0.0.2",
    ],
)
def test_an_endpoint_elsewhere_is_refused(variant: str, url: str) -> None:
    found = resources(variant)
    endpoint(found)["endpointUrl"] = url
    (message,) = messages(hooks_endpoint_own_gateway, found)
    assert "own Gateway" in message


@pytest.mark.parametrize("url", [f"http://{DOMAIN}", f"https://{DOMAIN}:8443", "http://10.0.0.9"])
def test_the_public_gateway_is_reached_over_https_by_its_name(url: str) -> None:
    found = resources(PUBLIC)
    endpoint(found)["endpointUrl"] = url
    assert messages(hooks_endpoint_own_gateway, found)


def test_the_internal_gateway_is_a_private_address_on_http() -> None:
    found = resources("gke-l4")
    endpoint(found)["endpointUrl"] = "http://10.128.0.40"
    assert messages(hooks_endpoint_own_gateway, found) == []
    endpoint(found)["endpointUrl"] = "https://10.128.0.40"
    assert messages(hooks_endpoint_own_gateway, found)
