"""The queued-resource provider against a local fake of the TPU REST API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from components.tpu_api import AlreadyExistsError, QuotaError, TpuApiError, ZoneError
from components.tpu_queued_resource import QueuedResourceProvider, api_version, queued_resource_body
from tests.support import discovery
from tests.tpu.fake_tpu_api import FakeTpuApi, Scenario, serve


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def make_provider(log: list[str], clock: FakeClock | None = None) -> QueuedResourceProvider:
    clock = clock or FakeClock()
    return QueuedResourceProvider(
        token_source=lambda: "test-access-token", log=log.append, sleep=clock.sleep, clock=clock
    )


def props(fake: FakeTpuApi, **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "project": "my-project",
        "zone": "us-east5-b",
        "queuedResourceId": "gemma-tpu-0",
        "nodeId": "gemma-tpu-0-node",
        "acceleratorType": "v6e-1",
        "runtimeVersion": "v2-alpha-tpuv6e",
        "serviceAccountEmail": "tpu@my-project.iam.gserviceaccount.com",
        "metadata": {"startup-script": "#!/bin/bash\necho hi\n"},
        "labels": {"app": "gemma4-vllm"},
        "tags": ["gemma-vllm"],
        "network": "default",
        "enableExternalIps": True,
        "provisioning": "flex-start",
        "maxRunDurationSeconds": 14400,
        "validUntilSeconds": 14400,
        "servingPort": 8000,
        "createTimeoutSeconds": 600,
        "pollSeconds": 15,
        "apiEndpoint": fake.url,
    }
    return {**base, **overrides}


@pytest.fixture
def fake() -> Iterator[FakeTpuApi]:
    with serve() as api:
        yield api


def methods(fake: FakeTpuApi) -> list[str]:
    return [f"{r.method} {r.path.rsplit('/', 1)[-1]}" for r in fake.requests]


def test_create_waits_through_the_states_to_active(fake: FakeTpuApi) -> None:
    log: list[str] = []
    result = make_provider(log).create(props(fake))
    assert result.id == "gemma-tpu-0"
    assert result.outs is not None
    assert result.outs["state"] == "ACTIVE"
    assert result.outs["endpointUrl"] == "http://203.0.113.7:8000"
    assert result.outs["nodeName"].endswith("/nodes/gemma-tpu-0-node")
    progress = "\n".join(log)
    for state in ("WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE"):
        assert state in progress
    create = fake.requests[0]
    assert create.method == "POST" and create.query == {"queuedResourceId": ["gemma-tpu-0"]}
    assert create.headers["Authorization"] == "Bearer test-access-token"


def test_request_body_carries_what_the_pulumi_gcp_resource_cannot(fake: FakeTpuApi) -> None:
    make_provider([]).create(props(fake))
    create = fake.requests[0]
    assert create.path.startswith("/v2alpha1/projects/my-project/locations/us-east5-b/")
    assert create.body is not None
    spec = create.body["tpu"]["nodeSpec"][0]
    node = spec["node"]
    assert spec["parent"] == "projects/my-project/locations/us-east5-b"
    assert node["metadata"] == {"startup-script": "#!/bin/bash\necho hi\n"}
    assert node["serviceAccount"]["email"] == "tpu@my-project.iam.gserviceaccount.com"
    assert node["tags"] == ["gemma-vllm"]
    # Flex-start lives on the QueuedResource (v2alpha1), not in the node's schedulingConfig.
    assert "schedulingConfig" not in node
    assert create.body["provisioningModel"] == "FLEX_START"
    assert create.body["runDuration"] == {"maxRunDuration": "14400s"}
    assert create.body["queueingPolicy"] == {"validUntilDuration": "14400s"}
    assert fake.rejected == []


MODES = {
    # provisioning: (API version, the QueuedResource keys that say which tier)
    "flex-start": ("v2alpha1", {"provisioningModel", "runDuration"}),
    "spot": ("v2", {"spot"}),
    "guaranteed": ("v2", {"guaranteed"}),
    "on-demand": ("v2", set()),
}
TIER_KEYS = {"provisioningModel", "runDuration", "spot", "guaranteed", "bestEffort"}


@pytest.mark.parametrize("valid_until", [14400, None])
@pytest.mark.parametrize("provisioning", sorted(MODES))
def test_every_provisioning_mode_passes_the_api_contract(
    fake: FakeTpuApi, provisioning: str, valid_until: int | None
) -> None:
    """Create, get, node get and delete, each validated by the fake against the discovery
    document of the version it is sent to."""
    version, tier = MODES[provisioning]
    provider = make_provider([])
    p = props(fake, provisioning=provisioning, validUntilSeconds=valid_until)
    if provisioning != "flex-start":
        p["maxRunDurationSeconds"] = None
    created = provider.create(p)
    assert created.outs is not None and created.outs["state"] == "ACTIVE"
    provider.delete("gemma-tpu-0", p)
    assert fake.rejected == []
    assert {r.path.split("/")[1] for r in fake.requests} == {version}
    body = fake.requests[0].body
    assert body is not None and TIER_KEYS & set(body) == tier
    assert ("queueingPolicy" in body) is (valid_until is not None)
    deletes = [r for r in fake.requests if r.method == "DELETE"]
    assert deletes and all(r.query == {"force": ["true"]} for r in deletes)


@pytest.mark.parametrize("provisioning", ["spot", "guaranteed", "on-demand"])
def test_v2_bodies_also_validate_against_v2alpha1(provisioning: str) -> None:
    """Only flex-start needs the alpha API; the other bodies are valid in both versions."""
    body = queued_resource_body({**props(FakeTpuApi()), "provisioning": provisioning})
    for version in ("v2", "v2alpha1"):
        assert discovery.schema_errors(discovery.load("tpu", version), "QueuedResource", body) == []


def test_flex_start_is_refused_by_the_v2_document() -> None:
    """Why flex-start goes to v2alpha1: v2's QueuedResource has neither field."""
    body = queued_resource_body(props(FakeTpuApi()))
    errors = discovery.schema_errors(discovery.load("tpu", "v2"), "QueuedResource", body)
    assert any("unknown field 'provisioningModel'" in e for e in errors)
    assert any("unknown field 'runDuration'" in e for e in errors)
    assert api_version(props(FakeTpuApi())) == "v2alpha1"


def test_fake_answers_400_like_google_to_the_old_flex_start_shape(fake: FakeTpuApi) -> None:
    """The shape this provider used to send: FLEX_START and maxRunDuration inside the node's
    schedulingConfig. The document refuses both; so must the fake, before creating anything."""
    body = queued_resource_body(props(fake, provisioning="on-demand"))
    body["tpu"]["nodeSpec"][0]["node"]["schedulingConfig"] = {
        "provisioningModel": "FLEX_START",
        "maxRunDuration": "14400s",
    }
    response = httpx.post(
        f"{fake.url}/v2alpha1/projects/my-project/locations/us-east5-b/queuedResources",
        params={"queuedResourceId": "gemma-tpu-0"},
        json=body,
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
    violations = {v["field"] for v in error["details"][0]["fieldViolations"]}
    assert violations == {
        "tpu.nodeSpec[0].node.schedulingConfig.provisioningModel",
        "tpu.nodeSpec[0].node.schedulingConfig.maxRunDuration",
    }
    assert "'FLEX_START' is not one of PROVISIONING_MODEL_UNSPECIFIED" in error["message"]
    assert fake.queued == {}


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b.update(spot=True), "spot"),
        (lambda b: b["runDuration"].update(maxRunDuration=14400), "runDuration.maxRunDuration"),
        (lambda b: b.update(provisioningModel="FLEXSTART"), "provisioningModel"),
        (lambda b: b["tpu"]["nodeSpec"][0].pop("parent"), "tpu.nodeSpec[0].parent"),
        (lambda b: b["tpu"]["nodeSpec"][0].update(nodeId="bad/id"), "tpu.nodeSpec[0].nodeId"),
        (lambda b: b["tpu"].update(nodeSpec={}), "tpu.nodeSpec"),
        (lambda b: b.update(state={"state": "ACTIVE"}), "state"),
    ],
)
def test_provider_reports_what_the_api_refuses(
    fake: FakeTpuApi, monkeypatch: pytest.MonkeyPatch, mutate: Any, field: str
) -> None:
    """A body the document refuses never gets past the fake, and the provider's error names
    the field (the message is Google's own)."""
    import components.tpu_queued_resource as qr

    original = qr.queued_resource_body

    def broken(p: dict[str, Any]) -> dict[str, Any]:
        body = original(p)
        mutate(body)
        return body

    monkeypatch.setattr(qr, "queued_resource_body", broken)
    with pytest.raises(TpuApiError, match="HTTP 400 INVALID_ARGUMENT") as info:
        make_provider([]).create(props(fake))
    assert field in str(info.value)
    assert fake.queued == {} and [r.method for r in fake.requests] == ["POST"]


def test_query_parameters_and_urls_are_checked(fake: FakeTpuApi) -> None:
    base = f"{fake.url}/v2/projects/my-project/locations/us-east5-b/queuedResources"
    assert httpx.delete(f"{base}/qr", params={"force": "yes"}).status_code == 400
    assert httpx.delete(f"{base}/qr", params={"purge": "true"}).status_code == 400
    assert httpx.get(f"{base}/qr/extra").status_code == 404
    bad_id = httpx.post(base, params={"queuedResourceId": "a b"}, json={})
    assert bad_id.status_code == 400 and "queuedResourceId" in bad_id.json()["error"]["message"]
    assert httpx.delete(f"{base}/qr", params={"force": "true"}).status_code == 404


def test_failed_request_ends_with_the_api_reason_and_is_deleted() -> None:
    with serve(Scenario(states=["WAITING_FOR_RESOURCES", "FAILED"])) as fake:
        with pytest.raises(TpuApiError, match="is FAILED: Insufficient capacity for v6e-1"):
            make_provider([]).create(props(fake))
        assert "DELETE gemma-tpu-0" in methods(fake)


def test_suspended_request_is_reported() -> None:
    with (
        serve(Scenario(states=["SUSPENDED"])) as fake,
        pytest.raises(TpuApiError, match="is SUSPENDED: no reason given by the API"),
    ):
        make_provider([]).create(props(fake))


def test_quota_error_is_a_clear_message_and_nothing_else_is_called() -> None:
    scenario = Scenario(
        create_error=(
            429,
            "RESOURCE_EXHAUSTED",
            "Quota 'TPUV6E_LITEPOD_PER_PROJECT_PER_ZONE' exceeded.",
        )
    )
    with serve(scenario) as fake:
        with pytest.raises(QuotaError) as info:
            make_provider([]).create(props(fake))
        assert "TPU quota exhausted in us-east5-b" in str(info.value)
        assert "set `zone` to another zone" in str(info.value)
        assert methods(fake) == ["POST queuedResources"]


def test_zone_error() -> None:
    scenario = Scenario(
        create_error=(
            400,
            "INVALID_ARGUMENT",
            "Location us-west9-z is not found or access is unauthorized.",
        )
    )
    with (
        serve(scenario) as fake,
        pytest.raises(ZoneError, match="Set `zone` to a zone that offers"),
    ):
        make_provider([]).create(props(fake, zone="us-west9-z"))


def test_deadline_deletes_the_queued_request() -> None:
    clock = FakeClock()
    with serve(Scenario(states=["WAITING_FOR_RESOURCES"])) as fake:
        with pytest.raises(TpuApiError, match="still WAITING_FOR_RESOURCES after 60s"):
            make_provider([], clock).create(props(fake, createTimeoutSeconds=60))
        assert clock.now >= 60
        assert "DELETE gemma-tpu-0" in methods(fake)


def test_existing_queued_resource_is_never_deleted(fake: FakeTpuApi) -> None:
    make_provider([]).create(props(fake))
    before = len(fake.requests)
    with pytest.raises(AlreadyExistsError, match="Nothing was deleted"):
        make_provider([]).create(props(fake))
    assert [r.method for r in fake.requests[before:]] == ["POST"]
    assert "gemma-tpu-0" in fake.queued


def test_read_refreshes_and_reports_a_vanished_resource(fake: FakeTpuApi) -> None:
    provider = make_provider([])
    created = provider.create(props(fake))
    assert created.outs is not None
    read = provider.read("gemma-tpu-0", created.outs)
    assert read.id == "gemma-tpu-0"
    assert read.outs is not None and read.outs["state"] == "ACTIVE"
    gone = provider.read("other-qr", props(fake))
    assert gone.id is None


def test_delete_twice_is_idempotent(fake: FakeTpuApi) -> None:
    log: list[str] = []
    provider = make_provider(log)
    provider.create(props(fake))
    provider.delete("gemma-tpu-0", props(fake))
    assert fake.queued == {}
    provider.delete("gemma-tpu-0", props(fake))
    assert log[-1] == "gemma-tpu-0: already gone"


def test_node_changes_are_replacements_and_timeouts_are_not(fake: FakeTpuApi) -> None:
    provider = make_provider([])
    old = props(fake)
    script = provider.diff("id", old, {**old, "metadata": {"startup-script": "#!/bin/bash\n"}})
    assert script.replaces == ["metadata"] and script.delete_before_replace is True
    timeout = provider.diff("id", old, {**old, "createTimeoutSeconds": 1200})
    assert timeout.changes is True and timeout.replaces == []
    same = provider.diff("id", {**old, "state": "ACTIVE"}, old)
    assert same.changes is False
    unset = {k: v for k, v in old.items() if k != "validUntilSeconds"}
    removed = provider.diff("id", old, unset)
    assert removed.replaces == ["validUntilSeconds"]


def test_provider_survives_the_engine_round_trip() -> None:
    """Pulumi ships the provider to its own process serialized; it must come back working."""
    import base64

    import dill  # type: ignore[import-untyped]
    from pulumi.dynamic.dynamic import serialize_provider

    restored = dill.loads(base64.b64decode(serialize_provider(QueuedResourceProvider())))
    assert isinstance(restored, QueuedResourceProvider)
    assert restored.diff("id", {"zone": "a"}, {"zone": "b"}).replaces == ["zone"]
