"""A Pulumi dynamic provider for TPU queued resources over the TPU REST API (v2; v2alpha1 for
flex-start, whose fields only that version has: see `API_VERSIONS`).

pulumi-gcp's `tpu.V2QueuedResource` cannot set node metadata (the startup script), the node's
service account, the spot/guaranteed tier or valid-until; the REST API can, so this provider
calls it. Create waits for ACTIVE with a deadline and reports progress; a request that FAILS,
is SUSPENDED or misses the deadline is deleted again before the error is raised, so nothing is
left half-created. Any change to the node is a replacement (the API has no update), shown as
such by `pulumi preview`. Delete is idempotent and never touches other queued resources.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.tpu_api import DEFAULT_ENDPOINT, SCOPES, TpuApi, TpuApiError, adc_token_source

#: Properties that define the node; changing any of them needs a new queued resource.
REPLACE_KEYS = (
    "project", "zone", "queuedResourceId", "nodeId", "acceleratorType", "runtimeVersion",
    "serviceAccountEmail", "metadata", "labels", "tags", "network", "enableExternalIps",
    "provisioning", "maxRunDurationSeconds", "validUntilSeconds",
)  # fmt: skip
FAILED_STATES = frozenset({"FAILED", "SUSPENDING", "SUSPENDED"})


def queued_resource_body(props: dict[str, Any]) -> dict[str, Any]:
    """The REST body for one single-node queued resource."""
    node: dict[str, Any] = {
        "acceleratorType": props["acceleratorType"],
        "runtimeVersion": props["runtimeVersion"],
        "networkConfig": {
            "network": props["network"],
            "enableExternalIps": bool(props["enableExternalIps"]),
        },
        "serviceAccount": {"email": props["serviceAccountEmail"], "scope": list(SCOPES)},
        "metadata": dict(props.get("metadata") or {}),
        "labels": dict(props.get("labels") or {}),
        "tags": list(props.get("tags") or []),
    }
    body: dict[str, Any] = {
        "tpu": {
            "nodeSpec": [
                {
                    "parent": f"projects/{props['project']}/locations/{props['zone']}",
                    "nodeId": props["nodeId"],
                    "node": node,
                }
            ]
        }
    }
    provisioning = props["provisioning"]
    if provisioning not in API_VERSIONS:
        raise ValueError(
            f"provisioning {provisioning!r} is not one of {', '.join(sorted(API_VERSIONS))}"
        )
    if provisioning == "spot":
        body["spot"] = {}
    elif provisioning == "guaranteed":
        body["guaranteed"] = {}
    elif provisioning == "flex-start":
        # QueuedResource fields, only in v2alpha1 (`SchedulingConfig.provisioningModel` has no
        # FLEX_START and `SchedulingConfig` no run duration).
        body["provisioningModel"] = "FLEX_START"
        body["runDuration"] = {"maxRunDuration": f"{int(props['maxRunDurationSeconds'])}s"}
    if props.get("validUntilSeconds") is not None:
        body["queueingPolicy"] = {"validUntilDuration": f"{int(props['validUntilSeconds'])}s"}
    return body


#: The API version each provisioning mode is sent to. Flex-start's `provisioningModel` and
#: `runDuration` exist only on v2alpha1's QueuedResource (discovery document revision 20261001);
#: everything the other modes send is in v2, the stable API.
API_VERSIONS: dict[str, str] = {
    "flex-start": "v2alpha1",
    "spot": "v2",
    "guaranteed": "v2",
    "on-demand": "v2",
}


def api_version(props: dict[str, Any]) -> str:
    """The API version for every call about this queued resource (create, get, delete, node)."""
    return API_VERSIONS[props["provisioning"]]


class QueuedResourceProvider(ResourceProvider):
    """CRUD for one queued resource. Injected hooks make it testable without Google."""

    def __init__(
        self,
        token_source: Callable[[], str] | None = None,
        # Pulumi's log: the engine's when there is one, stderr otherwise.
        log: Callable[[str], None] = pulumi.log.info,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._token_source = token_source
        self._log = log
        self._sleep = sleep
        self._clock = clock

    def _api(self, props: dict[str, Any]) -> TpuApi:
        tokens = self._token_source or adc_token_source()
        return TpuApi(tokens, props.get("apiEndpoint") or DEFAULT_ENDPOINT, api_version(props))

    # CRUD -------------------------------------------------------------------------------

    def create(self, props: dict[str, Any]) -> CreateResult:
        api = self._api(props)
        project, zone, qr_id = props["project"], props["zone"], props["queuedResourceId"]
        try:
            api.create_queued_resource(project, zone, qr_id, queued_resource_body(props))
            self._log(
                f"{qr_id}: requested {props['acceleratorType']} in {zone} ({props['provisioning']})"
            )
            try:
                resource = self._wait_active(api, props)
            except TpuApiError:
                self._log(f"{qr_id}: deleting the request so nothing is left half-created")
                api.delete_queued_resource(project, zone, qr_id)
                raise
            return CreateResult(qr_id, {**props, **self._observed(api, props, resource)})
        finally:
            api.close()

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        api = self._api(props)
        try:
            resource = api.get_queued_resource(props["project"], props["zone"], id_)
            if resource is None:
                return ReadResult(None, {})
            return ReadResult(id_, {**props, **self._observed(api, props, resource)})
        finally:
            api.close()

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        outputs = ("state", "nodeName", "externalIp", "internalIp", "endpointUrl", "createTime")
        # A key present on either side counts: removing a setting (e.g. validUntilSeconds) is a
        # change too, never silently ignored.
        changed = sorted(
            k
            for k in set(olds) | set(news)
            if not k.startswith("__") and k not in outputs and olds.get(k) != news.get(k)
        )
        replaces = [k for k in changed if k in REPLACE_KEYS]
        # The same queued-resource and node ids are reused, so the old one must go first.
        return DiffResult(
            changes=bool(changed),
            replaces=replaces,
            stables=["project"],
            delete_before_replace=True,
        )

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        # Only non-node settings (API endpoint, timeouts) reach here; nothing to call.
        return UpdateResult({**olds, **news})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        api = self._api(props)
        project, zone = props["project"], props["zone"]
        try:
            if not api.delete_queued_resource(project, zone, id_):
                self._log(f"{id_}: already gone")
                return
            deadline = self._clock() + 900
            while api.get_queued_resource(project, zone, id_) is not None:
                if self._clock() > deadline:
                    raise TpuApiError(f"{id_}: still deleting after 15 minutes")
                self._log(f"{id_}: deleting")
                self._sleep(float(props.get("pollSeconds", 15)))
        finally:
            api.close()

    # Helpers ----------------------------------------------------------------------------

    def _wait_active(self, api: TpuApi, props: dict[str, Any]) -> dict[str, Any]:
        qr_id, zone = props["queuedResourceId"], props["zone"]
        started = self._clock()
        deadline = started + float(props["createTimeoutSeconds"])
        last = ""
        while True:
            resource = api.get_queued_resource(props["project"], zone, qr_id) or {}
            state_info = resource.get("state", {})
            state = state_info.get("state", "CREATING")
            if state != last:
                self._log(f"{qr_id}: {state} after {self._clock() - started:.0f}s")
                last = state
            if state == "ACTIVE":
                return resource
            if state in FAILED_STATES:
                raise TpuApiError(f"{qr_id} in {zone} is {state}: {failure_reason(state_info)}")
            if self._clock() > deadline:
                raise TpuApiError(
                    f"{qr_id} in {zone} still {state} after {props['createTimeoutSeconds']}s "
                    "(createTimeoutMinutes); capacity may be short: retry later, raise the "
                    "timeout, or choose another zone or provisioning model"
                )
            self._sleep(float(props.get("pollSeconds", 15)))

    def _observed(
        self, api: TpuApi, props: dict[str, Any], resource: dict[str, Any]
    ) -> dict[str, Any]:
        state = resource.get("state", {}).get("state", "STATE_UNSPECIFIED")
        node = api.get_node(props["project"], props["zone"], props["nodeId"]) or {}
        endpoints = node.get("networkEndpoints") or [{}]
        internal_ip = endpoints[0].get("ipAddress", "")
        external_ip = endpoints[0].get("accessConfig", {}).get("externalIp", "")
        host = external_ip or internal_ip
        return {
            "state": state,
            "nodeName": node.get("name", ""),
            "internalIp": internal_ip,
            "externalIp": external_ip,
            "endpointUrl": f"http://{host}:{props['servingPort']}" if host else "",
            # When the request was queued: the post-deploy hook's start (components/stack.py).
            "createTime": resource.get("createTime"),
        }


def failure_reason(state_info: dict[str, Any]) -> str:
    """The API's own reason for a failed or suspended request."""
    for key in ("failedData", "suspendedData", "suspendingData"):
        data = state_info.get(key) or {}
        error = data.get("error") or {}
        if error.get("message"):
            return str(error["message"])
    initiator = state_info.get("stateInitiator")
    return "no reason given by the API" + (f" (initiator: {initiator})" if initiator else "")


class QueuedResource(pulumi.dynamic.Resource, module="gemma4", name="TpuQueuedResource"):
    """One TPU queued resource (one node). Outputs: state, nodeName, endpointUrl, IPs, createTime
    (when the request was made)."""

    # Output attributes carry the provider's property names.
    state: pulumi.Output[str]
    nodeName: pulumi.Output[str]
    endpointUrl: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        props: dict[str, Any],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        outputs = {
            "state": None,
            "nodeName": None,
            "endpointUrl": None,
            "internalIp": None,
            "externalIp": None,
            "createTime": None,
        }
        super().__init__(QueuedResourceProvider(), name, {**props, **outputs}, opts)
