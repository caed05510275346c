"""The discovery-document validator must refuse what Google's documents refuse.

Each case is a near miss of a valid TPU or Cloud Run body: a misspelt or misplaced field, a
wrong JSON type, an enum value the document does not list, a missing "Required." field.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support import discovery

TPU = discovery.load("tpu", "v2alpha1")
RUN = discovery.load("run", "v2")
CREATE = "tpu.projects.locations.queuedResources.create"
PATH = "/v2alpha1/projects/p/locations/us-east5-b/queuedResources"

VALID: dict[str, Any] = {
    "tpu": {
        "nodeSpec": [
            {
                "parent": "projects/p/locations/us-east5-b",
                "nodeId": "gemma-0-node",
                "node": {
                    "acceleratorType": "v6e-1",
                    "runtimeVersion": "v2-alpha-tpuv6e",
                    "networkConfig": {"network": "default", "enableExternalIps": True},
                    "serviceAccount": {"email": "sa@p.iam.gserviceaccount.com", "scope": ["x"]},
                    "metadata": {"startup-script": "#!/bin/bash\n"},
                    "labels": {"app": "gemma"},
                    "tags": ["gemma"],
                },
            }
        ]
    },
    "provisioningModel": "FLEX_START",
    "runDuration": {"maxRunDuration": "14400s"},
    "queueingPolicy": {"validUntilDuration": "3600s"},
}


def errors_after(change: Any) -> list[str]:
    body = copy.deepcopy(VALID)
    change(body)
    return discovery.schema_errors(TPU, "QueuedResource", body)


def node(body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = body["tpu"]["nodeSpec"][0]["node"]
    return result


def test_documents_are_the_pinned_revisions() -> None:
    assert (TPU["id"], TPU["revision"]) == ("tpu:v2alpha1", "20261001")
    assert discovery.load("tpu", "v2")["revision"] == "20261001"
    assert RUN["id"] == "run:v2"


def test_a_valid_body_passes() -> None:
    assert discovery.schema_errors(TPU, "QueuedResource", VALID) == []
    assert (
        discovery.request_errors(
            TPU,
            CREATE,
            http_method="POST",
            path=PATH,
            query={"queuedResourceId": ["q"]},
            body=VALID,
        )
        == []
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # Wrong names and wrong nesting.
        (lambda b: b.update(provisioning_model="SPOT"), "unknown field 'provisioning_model'"),
        (lambda b: node(b).update(schedulingConfig={"maxRunDuration": "1s"}),
         "schedulingConfig.maxRunDuration: unknown field 'maxRunDuration' of SchedulingConfig"),
        (lambda b: b["tpu"].update(node={}), "tpu.node: unknown field 'node' of Tpu"),
        (lambda b: node(b)["networkConfig"].update(externalIps=True),
         "unknown field 'externalIps'"),
        # Types, including int64-as-string, durations and booleans.
        (lambda b: b["runDuration"].update(maxRunDuration=14400), "expected a string"),
        (lambda b: b["runDuration"].update(maxRunDuration="4h"), "is not a duration"),
        (lambda b: node(b)["networkConfig"].update(enableExternalIps="true"), "expected a boolean"),
        (lambda b: node(b)["networkConfig"].update(queueCount="2"), "expected an integer"),
        (lambda b: node(b)["networkConfig"].update(queueCount=2**31), "out of range"),
        (lambda b: b["queueingPolicy"].update(validUntilTime="tomorrow"), "not an RFC 3339"),
        # Enums.
        (lambda b: b.update(provisioningModel="FLEX"), "'FLEX' is not one of"),
        (lambda b: node(b).update(schedulingConfig={"provisioningModel": "FLEX_START"}),
         "'FLEX_START' is not one of PROVISIONING_MODEL_UNSPECIFIED, STANDARD, SPOT"),
        # Arrays and maps.
        (lambda b: b["tpu"].update(nodeSpec={}), "tpu.nodeSpec: expected an array"),
        (lambda b: node(b).update(tags="gemma"), "expected an array"),
        (lambda b: node(b)["tags"].append(3), "tags[1]: expected a string"),
        (lambda b: node(b)["metadata"].update(count=1), "metadata.count: expected a string"),
        (lambda b: node(b).update(labels=["app=gemma"]), "labels: expected an object"),
        # Required (from "Required." in the description), output-only, stated regexes.
        (lambda b: b["tpu"]["nodeSpec"][0].pop("node"), "nodeSpec[0].node: required field"),
        (lambda b: b.update(state={"state": "ACTIVE"}), "state: output-only field"),
        (lambda b: b["tpu"]["nodeSpec"][0].update(nodeId="a/b"), "does not follow"),
    ],
)  # fmt: skip
def test_near_misses_are_refused(change: Any, expected: str) -> None:
    errors = errors_after(change)
    assert any(expected in e for e in errors), errors


def test_required_fields_come_from_the_documents_words() -> None:
    assert discovery.required_fields(TPU, "NodeSpec") == ["node", "parent"]
    assert "image" in discovery.required_fields(RUN, "GoogleCloudRunV2Container")


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"http_method": "PUT"}, "is POST, not PUT"),
        ({"path": "/v2alpha1/projects/p/queuedResources"}, "does not match"),
        ({"path": "/v2alpha1/projects/p/locations/z/nodes"}, "does not match"),
        ({"query": {"queuedResourceId": ["a b"]}}, "queuedResourceId"),
        ({"query": {"queuedResourceId": ["q"], "force": ["true"]}}, "unknown query parameter"),
        ({"body": None}, "needs a QueuedResource body"),
        ({"body": {"tpu": {"nodeSpec": "x"}}}, "expected an array"),
    ],
)
def test_request_errors(kwargs: dict[str, Any], expected: str) -> None:
    request: dict[str, Any] = {
        "http_method": "POST",
        "path": PATH,
        "query": {"queuedResourceId": ["q"]},
        "body": VALID,
        **kwargs,
    }
    errors = discovery.request_errors(TPU, CREATE, **request)
    assert any(expected in e for e in errors), errors


def test_delete_parameters() -> None:
    delete = "tpu.projects.locations.queuedResources.delete"
    path = "/v2/projects/p/locations/z/queuedResources/q"
    doc = discovery.load("tpu", "v2")
    ok = discovery.request_errors(doc, delete, http_method="DELETE", path=path,
                                  query={"force": ["true"]})  # fmt: skip
    assert ok == []
    bad = discovery.request_errors(doc, delete, http_method="DELETE", path=path,
                                   query={"force": ["1"]}, body={"x": 1})  # fmt: skip
    assert any("not true or false" in e for e in bad)
    assert any("takes no request body" in e for e in bad)


def test_google_error_shape() -> None:
    assert discovery.google_error(404, "gone", "NOT_FOUND") == {
        "error": {"code": 404, "message": "gone", "status": "NOT_FOUND"}
    }
    shaped = discovery.bad_request(["a.b: unknown field 'b' of A"])["error"]
    assert shaped["code"] == 400 and shaped["status"] == "INVALID_ARGUMENT"
    assert shaped["details"][0]["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert shaped["details"][0]["fieldViolations"][0]["field"] == "a.b"


def test_unknown_schema_or_method_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        discovery.schema_errors(TPU, "NoSuchSchema", {})
    with pytest.raises(KeyError):
        discovery.find_method(TPU, "tpu.projects.nothing")


def test_bytes_and_int64_strings() -> None:
    secrets = discovery.load("secretmanager", "v1")
    ok = {"data": "aGVsbG8=", "dataCrc32c": "907060870"}
    assert discovery.schema_errors(secrets, "SecretPayload", ok) == []
    bad = {"data": "not base64!", "dataCrc32c": 907060870}
    errors = discovery.schema_errors(secrets, "SecretPayload", bad)
    assert any("is not base64" in e for e in errors)
    assert any("dataCrc32c: expected a string (int64)" in e for e in errors)
