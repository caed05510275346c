"""Every resource input of every shipped stack and variant, against the SDKs' own input types.

The oracle is pulumi-gcp's (and pulumi-docker's) generated `*Args` classes, read by
`tests.contracts.sdk_types`; TPU queued resources (a dynamic provider, no SDK type) are checked
against Google's TPU discovery document for the API version each request goes to.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.tpu_queued_resource import api_version, queued_resource_body
from tests.contracts.sdk_types import args_class_for, describe, input_errors
from tests.contracts.variants import VARIANTS, rendered
from tests.support import discovery

QUEUED = "pulumi-python:dynamic/gemma4:TpuQueuedResource"
SERVICE = "gcp:cloudrunv2/service:Service"


def sdk_resources(variant: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (d.type, d.name, d.inputs)
        for d in rendered(variant).resources
        if d.type.split(":")[0] in ("gcp", "docker")
    ]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_input_matches_the_sdk_input_types(variant: str) -> None:
    resources = sdk_resources(variant)
    assert resources
    problems = {
        f"{type_} {name}": errors
        for type_, name, inputs in resources
        if (errors := input_errors(type_, inputs))
    }
    assert problems == {}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_tpu_request_matches_the_discovery_document(variant: str) -> None:
    for node in rendered(variant).of_type(QUEUED):
        p = node.inputs
        version = api_version(p)
        parent = f"projects/{p['project']}/locations/{p['zone']}"
        doc = discovery.load("tpu", version)
        create = discovery.request_errors(
            doc,
            "tpu.projects.locations.queuedResources.create",
            http_method="POST",
            path=f"/{version}/{parent}/queuedResources",
            query={"queuedResourceId": [p["queuedResourceId"]]},
            body=queued_resource_body(p),
        )
        one = f"/{version}/{parent}/queuedResources/{p['queuedResourceId']}"
        get = discovery.request_errors(
            doc, "tpu.projects.locations.queuedResources.get", http_method="GET", path=one
        )
        delete = discovery.request_errors(
            doc,
            "tpu.projects.locations.queuedResources.delete",
            http_method="DELETE",
            path=one,
            query={"force": ["true"]},
        )
        node_get = discovery.request_errors(
            doc,
            "tpu.projects.locations.nodes.get",
            http_method="GET",
            path=f"/{version}/{parent}/nodes/{p['nodeId']}",
        )
        assert (create, get, delete, node_get) == ([], [], [], [])


def test_the_variants_switch_on_every_optional_resource() -> None:
    """A variant list that silently stopped covering a resource would prove nothing for it."""
    types: dict[str, int] = {}
    for variant in VARIANTS:
        for d in rendered(variant).resources:
            types[d.type] = max(types.get(d.type, 0), len(rendered(variant).of_type(d.type)))
    assert types["gcp:compute/firewall:Firewall"] >= 1
    assert types["gcp:cloudrunv2/serviceIamMember:ServiceIamMember"] >= 2
    assert types["gcp:artifactregistry/repository:Repository"] >= 1
    assert types["docker:index/image:Image"] >= 1
    assert types["docker:index/remoteImage:RemoteImage"] >= 1
    assert types[QUEUED] >= 2
    assert types["gcp:cloudrunv2/job:Job"] >= 2  # target and MTP drafter downloads


# The checker itself must refuse near misses (else the tests above prove nothing).


def service_inputs() -> dict[str, Any]:
    inputs = copy.deepcopy(rendered("l4").one(SERVICE).inputs)
    return inputs


def first_container(inputs: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = inputs["template"]["containers"][0]
    return container


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: first_container(s).update(startup_probe={}), "unknown input"),
        (lambda s: s["template"].update(startupProbe={}), "template.startupProbe: unknown input"),
        (lambda s: s.update(ingress="ALL"), "'ALL' is not one of INGRESS_TRAFFIC_ALL"),
        (lambda s: s["template"].update(executionEnvironment="GEN2"), "is not one of"),
        (lambda s: first_container(s)["startupProbe"].update(timeoutSeconds="30"), "expected int"),
        (lambda s: first_container(s)["startupProbe"].update(timeoutSeconds=2.5), "expected int"),
        (lambda s: first_container(s).update(args="--port=8080"), "expected a list"),
        (lambda s: first_container(s).update(ports=[first_container(s)["ports"]]), "expected an"),
        (lambda s: s["template"]["volumes"][0]["gcs"].update(readOnly="true"), "expected bool"),
        (lambda s: s.pop("location"), "location: required input of ServiceArgs"),
        (lambda s: s["template"]["volumes"][0].pop("name"), "required input"),
        (lambda s: s["template"].update(labels=["app=gemma"]), "expected a map"),
    ],
)
def test_the_sdk_checker_refuses_near_misses(change: Any, expected: str) -> None:
    inputs = service_inputs()
    assert input_errors(SERVICE, inputs) == []
    change(inputs)
    errors = input_errors(SERVICE, inputs)
    assert any(expected in e for e in errors), errors


def test_the_sdk_checker_reads_the_generated_classes() -> None:
    service = describe(args_class_for(SERVICE))
    assert service.fields["template"].required and service.fields["location"].required
    assert service.fields["invokerIamDisabled"].python_name == "invoker_iam_disabled"
    assert service.fields["ingress"].enum == (
        "INGRESS_TRAFFIC_ALL",
        "INGRESS_TRAFFIC_INTERNAL_ONLY",
        "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER",
    )
