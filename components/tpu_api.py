"""A small client for the Cloud TPU REST API's queued resources and nodes (httpx).

One client talks to one API version (`v2`, or `v2alpha1` for what only the alpha API has);
paths and query parameters follow Google's discovery documents for both (checked in
tests/tpu and tests/contracts against google-api-python-client's bundled copies).

No Pulumi import: the dynamic provider in `components.tpu_queued_resource` drives it, and the
tests drive it against a local fake of the same endpoints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

DEFAULT_ENDPOINT = "https://tpu.googleapis.com"
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)


MAX_BODY_BYTES = 8 << 20
"""The most a TPU API answer may weigh after decoding (a queued resource is a few KiB)."""


class TpuApiError(RuntimeError):
    """The TPU API refused a call; the message says what to change."""


class QuotaError(TpuApiError):
    """Not enough TPU quota in the zone."""


class ZoneError(TpuApiError):
    """The zone does not exist or does not offer the accelerator."""


class AlreadyExistsError(TpuApiError):
    """A queued resource of that name exists already (this tool never deletes it for you)."""


def adc_token_source() -> Callable[[], str]:
    """Access tokens from Application Default Credentials (google-auth), refreshed on demand."""
    import google.auth
    import google.auth.transport.requests

    credentials, _ = google.auth.default(scopes=list(SCOPES))

    def token() -> str:
        if not credentials.valid:
            credentials.refresh(google.auth.transport.requests.Request())  # type: ignore[no-untyped-call]
        return str(credentials.token)

    return token


class TpuApi:
    def __init__(
        self,
        token_source: Callable[[], str],
        endpoint: str = DEFAULT_ENDPOINT,
        version: str = "v2",
        timeout_s: float = 60.0,
    ) -> None:
        self._token = token_source
        self._base = f"{endpoint.rstrip('/')}/{version}"
        self._http = httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    # Queued resources -------------------------------------------------------------------

    def create_queued_resource(
        self, project: str, zone: str, queued_resource_id: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        url = f"{self._parent(project, zone)}/queuedResources"
        response = self._call(
            "POST", url, params={"queuedResourceId": queued_resource_id}, json=body
        )
        if response.status_code == 409:
            raise AlreadyExistsError(
                f"queued resource {queued_resource_id!r} already exists in {zone}; import it "
                f"(`pulumi import`) or pick another stack name. Nothing was deleted."
            )
        return self._json(response, f"create queued resource {queued_resource_id} in {zone}", zone)

    def get_queued_resource(
        self, project: str, zone: str, queued_resource_id: str
    ) -> dict[str, Any] | None:
        url = f"{self._parent(project, zone)}/queuedResources/{queued_resource_id}"
        response = self._call("GET", url)
        if response.status_code == 404:
            return None
        return self._json(response, f"read queued resource {queued_resource_id}", zone)

    def delete_queued_resource(self, project: str, zone: str, queued_resource_id: str) -> bool:
        """Delete one queued resource and its node; False when it was already gone."""
        url = f"{self._parent(project, zone)}/queuedResources/{queued_resource_id}"
        response = self._call("DELETE", url, params={"force": "true"})
        if response.status_code == 404:
            return False
        self._json(response, f"delete queued resource {queued_resource_id}", zone)
        return True

    def get_node(self, project: str, zone: str, node_id: str) -> dict[str, Any] | None:
        response = self._call("GET", f"{self._parent(project, zone)}/nodes/{node_id}")
        if response.status_code == 404:
            return None
        return self._json(response, f"read node {node_id}", zone)

    # Plumbing ---------------------------------------------------------------------------

    def _parent(self, project: str, zone: str) -> str:
        # Each segment escaped: a value can never step into another resource's path.
        return f"{self._base}/projects/{quote(project, safe=':')}/locations/{quote(zone, safe='')}"

    def _call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One request; its answer read whole up to :data:`MAX_BODY_BYTES` after decoding (a
        bigger or endless body is a TpuApiError, never held in memory)."""
        headers = {"Authorization": f"Bearer {self._token()}"}
        try:
            with self._http.stream(method, url, headers=headers, **kwargs) as response:
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_BODY_BYTES:
                        raise TpuApiError(
                            f"the TPU API's answer to {method} {url} is larger than "
                            f"{MAX_BODY_BYTES} bytes; refused"
                        )
                kept = [
                    (k, v) for k, v in response.headers.multi_items() if k != "content-encoding"
                ]
                return httpx.Response(
                    response.status_code,
                    headers=kept,
                    content=bytes(body),
                    request=response.request,
                )
        except httpx.HTTPError as exc:
            raise TpuApiError(f"TPU API unreachable ({method} {url}): {exc}") from None

    @staticmethod
    def _json(response: httpx.Response, what: str, zone: str) -> dict[str, Any]:
        if response.is_success:
            data: dict[str, Any] = response.json() if response.content else {}
            return data
        raise error_for(response, what, zone)


def error_for(response: httpx.Response, what: str, zone: str) -> TpuApiError:
    """Turn a Google API error body into a message that says what to change."""
    try:
        error = response.json().get("error", {})
    except ValueError:
        error = {}
    message = str(error.get("message") or response.text[:300] or response.reason_phrase)
    status = str(error.get("status", ""))
    lowered = message.lower()
    if status == "RESOURCE_EXHAUSTED" or "quota" in lowered:
        return QuotaError(
            f"{what}: TPU quota exhausted in {zone} ({message}). Request quota for the "
            "accelerator in this zone, or set `zone` to another zone that offers it."
        )
    if "location" in lowered or "zone" in lowered or "not supported" in lowered:
        return ZoneError(
            f"{what}: {zone} cannot host this TPU ({message}). Set `zone` to a zone that offers "
            "the accelerator."
        )
    if response.status_code in (401, 403):
        return TpuApiError(
            f"{what}: permission denied ({message}). Check `gcloud auth application-default "
            "login` and that the TPU API is enabled."
        )
    return TpuApiError(f"{what}: HTTP {response.status_code} {status} {message}".strip())
