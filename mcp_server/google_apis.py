"""Read-only calls to Google Cloud REST APIs (Cloud Run Admin v2, Cloud TPU v2, Cloud Logging
v2, GKE v1 and a cluster's Kubernetes API) with an access token from Application Default
Credentials; base URLs are injectable for the tests' loopback fakes. Nothing here writes."""

from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from endpoint.client import LimitExceeded, loads_json, read_capped
from endpoint.limits import MAX_ECHO_CHARS, MAX_ERROR_BODY_BYTES
from endpoint.redact import register_secret

from ._redaction import redact_cut

MAX_API_BODY_BYTES = 8 << 20
"""The most a Google API answer may weigh after decompression (a page of 100 log entries is a
few hundred KiB); a bigger one is refused, never held whole in memory."""
MAX_LOCATIONS = 200
"""The most TPU locations read (Google lists a few dozen): each is one more call."""
MAX_PAGES = 20


class GoogleApiError(Exception):
    """A Google API call failed; the message carries the API's reason."""


_SEGMENT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._~-]{0,126}[A-Za-z0-9])?")
"""One path segment of a Google resource name (a project, location, service, cluster, queued
resource or namespace id): letters, digits and ``._~-``, starting and ending with a letter or
digit, at most 128 characters. ``.``, ``..``, ``/``, ``%``, ``?``, ``#`` and ``@`` cannot pass,
so a value can never move a request that carries the access token to another path or host."""
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + f"... ({len(text)} characters)"


def segment(value: object, what: str) -> str:
    """``value`` when it is one safe resource-name segment (:data:`_SEGMENT`), else
    :class:`GoogleApiError` naming ``what`` and where it came from; checked before any URL that
    carries a token is built from it."""
    if isinstance(value, str) and _SEGMENT.fullmatch(value):
        return value
    raise GoogleApiError(
        f"{what} {_shown(value)} is not a valid resource id (letters, digits and ._~-, at most "
        "128 characters, no '/' or '..'); no request was sent"
    )


def cluster_host(value: object) -> str:
    """A GKE cluster's ``endpoint`` field (an IP address, or a host name): anything else (a
    path, a port, user info) is refused before the token is sent to it."""
    if isinstance(value, str) and value:
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            if _HOST.fullmatch(value):
                return value
        else:
            return f"[{address}]" if address.version == 6 else str(address)
    raise GoogleApiError(
        f"the GKE cluster's endpoint {_shown(value)} is not an IP address or host name; no "
        "request was sent to it"
    )


@dataclass(frozen=True)
class ApiUrls:
    """Base URLs (scheme and host, no version)."""

    run: str = "https://run.googleapis.com"
    tpu: str = "https://tpu.googleapis.com"
    logging: str = "https://logging.googleapis.com"
    container: str = "https://container.googleapis.com"
    #: A GKE cluster's Kubernetes API; None: `https://<the cluster's endpoint>` (tests point it
    #: at a loopback fake).
    kubernetes: str | None = None


def _hint(status: int, api: str) -> str:
    if status in (401, 403):
        return (
            f"; check `gcloud auth application-default login`, that the {api} is enabled in the "
            "project, and that your principal may read it"
        )
    if status == 404:
        return "; check the project, location and name (has the stack been deployed?)"
    if status == 429:
        return "; the API's rate limit was hit, try again shortly"
    return ""


class GoogleApis:
    """One async HTTP client and one token source for the read-only calls the tools make."""

    def __init__(
        self,
        token_source: Callable[[], Callable[[], str]],
        urls: ApiUrls | None = None,
        *,
        timeout_s: float = 30.0,
    ) -> None:
        self._make_token_source = token_source
        self._token: Callable[[], str] | None = None
        self.urls = urls or ApiUrls()
        self._timeout_s = timeout_s

    def token_source(self) -> Callable[[], str]:
        """The access-token source, created on first use (credentials are looked up then)."""
        if self._token is None:
            try:
                inner = self._make_token_source()
            except Exception as exc:  # google-auth's DefaultCredentialsError and friends
                raise GoogleApiError(
                    f"no Google credentials ({type(exc).__name__}: {exc}); run `gcloud auth "
                    "application-default login` or set GOOGLE_APPLICATION_CREDENTIALS"
                ) from None

            def token() -> str:
                value = inner()
                register_secret(value)  # redacted wherever it might come back
                return value

            self._token = token
        return self._token

    async def _access_token(self) -> str:
        source = self.token_source()
        try:
            return await asyncio.to_thread(source)
        except Exception as exc:
            raise GoogleApiError(
                f"could not get a Google access token ({type(exc).__name__}: {exc})"
            ) from None

    async def call(
        self,
        api: str,
        method: str,
        url: str,
        *,
        what: str,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> dict[str, Any]:
        """One request; the JSON object answered, or :class:`GoogleApiError`."""
        token = await self._access_token()
        headers = {"Authorization": f"Bearer {token}", "Accept-Encoding": "gzip, deflate"}
        try:
            async with (
                httpx.AsyncClient(
                    timeout=self._timeout_s, follow_redirects=False, verify=verify
                ) as c,
                c.stream(method, url, params=params, json=body, headers=headers) as response,
            ):
                cap = MAX_API_BODY_BYTES if response.is_success else MAX_ERROR_BODY_BYTES
                try:
                    content = await read_capped(response, cap, what=f"the {api}'s answer")
                except LimitExceeded as exc:
                    if response.is_success:
                        raise GoogleApiError(f"{what}: {exc}") from None
                    content = b""  # an error body too big to show: its status still tells
        except httpx.HTTPError as exc:
            raise GoogleApiError(f"{what}: the {api} is unreachable ({exc})") from None
        try:
            data = loads_json(content) if content else {}
        except ValueError:
            data = None
        if response.is_success:
            if not isinstance(data, dict):
                raise GoogleApiError(f"{what}: the {api} answered a body that is not JSON")
            return data
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict):
            message = redact_cut(str(error.get("message") or ""), MAX_ECHO_CHARS)
            status = redact_cut(str(error.get("status") or ""), 60)
        else:
            message, status = redact_cut(content.decode("utf-8", "replace"), MAX_ECHO_CHARS), ""
        reason = f"HTTP {response.status_code}{' ' + status if status else ''}: {message}"
        raise GoogleApiError(f"{what}: {reason}{_hint(response.status_code, api)}")

    # Cloud Run Admin API v2 ----------------------------------------------------------------

    async def get_service(self, project: str, region: str, service: str) -> dict[str, Any]:
        """``run.projects.locations.services.get``."""
        name = (
            f"projects/{segment(project, 'project')}/locations/{segment(region, 'region')}"
            f"/services/{segment(service, 'Cloud Run service')}"
        )
        return await self.call(
            "Cloud Run Admin API",
            "GET",
            f"{self.urls.run.rstrip('/')}/v2/{name}",
            what=f"read Cloud Run service {service} in {region}",
        )

    # Cloud TPU API v2 ----------------------------------------------------------------------

    async def _tpu_list(self, path: str, field: str, what: str) -> list[dict[str, Any]]:
        """Every item of ``field`` over the pages of a Cloud TPU API list (at most
        :data:`MAX_PAGES` pages)."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"pageSize": 100}
        for _ in range(MAX_PAGES):
            url = f"{self.urls.tpu.rstrip('/')}/v2/{path}"
            data = await self.call("Cloud TPU API", "GET", url, what=what, params=params)
            items += [item for item in data.get(field) or [] if isinstance(item, dict)]
            if not data.get("nextPageToken"):
                break
            params = {"pageSize": 100, "pageToken": data["nextPageToken"]}
        return items

    async def list_locations(self, project: str) -> list[str]:
        """Location ids from ``tpu.projects.locations.list``."""
        path = f"projects/{segment(project, 'project')}/locations"
        found = await self._tpu_list(path, "locations", "list TPU locations")
        ids = [loc.get("locationId") or str(loc.get("name", "")).split("/")[-1] for loc in found]
        if len(ids) > MAX_LOCATIONS:
            raise GoogleApiError(
                f"list TPU locations: the Cloud TPU API listed more than {MAX_LOCATIONS} "
                "locations; refused (Google lists a few dozen)"
            )
        # An id from the answer goes into the next URL (with the token): checked.
        return [segment(i, "a TPU location id in the API's answer") for i in ids if i]

    async def list_accelerator_types(self, project: str, zone: str) -> list[dict[str, Any]]:
        """``tpu.projects.locations.acceleratorTypes.list``."""
        path = f"projects/{segment(project, 'project')}/locations/{segment(zone, 'zone')}"
        what = f"list TPU accelerator types in {zone}"
        return await self._tpu_list(f"{path}/acceleratorTypes", "acceleratorTypes", what)

    # Cloud Logging API v2 ------------------------------------------------------------------

    async def list_log_entries(
        self, project: str, log_filter: str, page_size: int
    ) -> list[dict[str, Any]]:
        """``logging.entries.list``: the newest ``page_size`` entries matching ``log_filter``."""
        data = await self.call(
            "Cloud Logging API",
            "POST",
            f"{self.urls.logging.rstrip('/')}/v2/entries:list",
            what="read Cloud Logging entries",
            body={
                "resourceNames": [f"projects/{segment(project, 'project')}"],
                "filter": log_filter,
                "orderBy": "timestamp desc",
                "pageSize": page_size,
            },
        )
        return [e for e in data.get("entries") or [] if isinstance(e, dict)][:page_size]

    # Kubernetes Engine API v1, and the cluster's Kubernetes API -------------------------------

    async def get_cluster(self, project: str, location: str, cluster: str) -> dict[str, Any]:
        """``container.projects.locations.clusters.get``."""
        name = (
            f"projects/{segment(project, 'project')}/locations/{segment(location, 'location')}"
            f"/clusters/{segment(cluster, 'GKE cluster')}"
        )
        return await self.call(
            "Kubernetes Engine API",
            "GET",
            f"{self.urls.container.rstrip('/')}/v1/{name}",
            what=f"read GKE cluster {cluster} in {location}",
        )

    async def kubernetes_get(
        self, cluster: dict[str, Any], path: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A GET on the cluster's Kubernetes API (`path` from `/api` or `/apis`), with the
        Google access token GKE accepts, verifying the server with the cluster's own CA."""
        verify: ssl.SSLContext | bool = True
        if self.urls.kubernetes is not None:
            base = self.urls.kubernetes
        else:
            endpoint = cluster.get("endpoint") or ""
            ca = str((cluster.get("masterAuth") or {}).get("clusterCaCertificate") or "")
            if not endpoint or not ca:
                raise GoogleApiError(
                    "the GKE cluster has no endpoint or CA certificate yet (still provisioning?)"
                )
            try:
                pem = base64.b64decode(ca, validate=True).decode("ascii")
                verify = ssl.create_default_context(cadata=pem)
            except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError) as exc:
                raise GoogleApiError(
                    f"the GKE cluster's CA certificate is unreadable ({exc})"
                ) from None
            base = f"https://{cluster_host(endpoint)}"
        return await self.call(
            "Kubernetes API",
            "GET",
            f"{base.rstrip('/')}{path}",
            what=f"read {path} from the cluster",
            params=params,
            verify=verify,
        )
