"""Loopback fakes of the Google APIs the MCP server reads: OAuth token endpoint, Cloud Run Admin
v2 (services.get), Cloud TPU v2/v2alpha1 (locations.list, acceleratorTypes.list,
queuedResources.get), Cloud Logging v2 (entries.list), Secret Manager v1 (versions.access) and
Kubernetes Engine v1 (clusters.get); plus, under `/k8s`, a GKE cluster's Kubernetes API for
the GETs the server makes (objects served as given; no discovery document covers them).

Every request is checked against Google's discovery document of the API (``tests.support.
discovery.request_errors``: verb, path template and its patterns, query parameters, body schema)
and refused with Google's 400 INVALID_ARGUMENT body when the document refuses it; every answer
is checked against the method's response schema before it is sent (a fixture that Google could
not have sent fails the test). A request without the access token the fake issued gets 401
UNAUTHENTICATED, an unknown resource 404 NOT_FOUND, both as Google's JSON error bodies.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web

from tests.support.discovery import bad_request, google_error, load, schema_errors
from tests.support.discovery import request_errors as discovery_request_errors

__all__ = ["FakeGoogle", "Route"]


@dataclass(frozen=True)
class Route:
    method_id: str
    api: str
    version: str
    http_method: str
    pattern: re.Pattern[str]


_SEG = r"[^/]+"
ROUTES = (
    Route(
        "run.projects.locations.services.get",
        "run",
        "v2",
        "GET",
        re.compile(rf"^/v2/projects/{_SEG}/locations/{_SEG}/services/{_SEG}$"),
    ),
    Route(
        "tpu.projects.locations.list",
        "tpu",
        "*",
        "GET",
        re.compile(rf"^/(?P<v>v2|v2alpha1)/projects/{_SEG}/locations$"),
    ),
    Route(
        "tpu.projects.locations.acceleratorTypes.list",
        "tpu",
        "*",
        "GET",
        re.compile(rf"^/(?P<v>v2|v2alpha1)/projects/{_SEG}/locations/{_SEG}/acceleratorTypes$"),
    ),
    Route(
        "tpu.projects.locations.queuedResources.get",
        "tpu",
        "*",
        "GET",
        re.compile(
            rf"^/(?P<v>v2|v2alpha1)/projects/{_SEG}/locations/{_SEG}/queuedResources/{_SEG}$"
        ),
    ),
    Route("logging.entries.list", "logging", "v2", "POST", re.compile(r"^/v2/entries:list$")),
    Route(
        "container.projects.locations.clusters.get",
        "container",
        "v1",
        "GET",
        re.compile(rf"^/v1/projects/{_SEG}/locations/{_SEG}/clusters/{_SEG}$"),
    ),
    Route(
        "secretmanager.projects.secrets.versions.access",
        "secretmanager",
        "v1",
        "GET",
        re.compile(rf"^/v1/projects/{_SEG}/secrets/{_SEG}/versions/{_SEG}:access$"),
    ),
)


@dataclass
class Recorded:
    method_id: str
    path: str
    query: dict[str, list[str]]
    body: Any
    errors: list[str]


@dataclass
class FakeGoogle:
    """The fake's state: what each resource is, and what to fail."""

    access_token: str
    id_token: str = ""
    services: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Cloud Run services by full name (projects/p/locations/r/services/s)."""
    queued_resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Queued resources by full name."""
    locations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """TPU location id -> its accelerator types."""
    log_entries: list[dict[str, Any]] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)
    """Secret Manager secret names (projects/p/secrets/s) -> value."""
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    """GKE clusters by full name (projects/p/locations/l/clusters/c)."""
    kubernetes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Kubernetes API objects by path (`/apis/apps/v1/namespaces/n/deployments/d`), served
    under `/k8s`; a list path answers `{"items": [...]}` filtered by `labelSelector`."""
    failures: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    """method id -> (HTTP code, status, message) answered instead."""
    requests: list[Recorded] = field(default_factory=list)
    token_requests: int = 0

    def __post_init__(self) -> None:
        self.port = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._started = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ----- serving -----------------------------------------------------------------------

    def _doc(self, route: Route, path: str) -> dict[str, Any]:
        version = route.version
        if version == "*":
            version = path.split("/")[1]
        return load(route.api, version)

    async def _token(self, request: web.Request) -> web.Response:
        """OAuth 2.0 token endpoint: the JWT-bearer grant of a service-account key (an
        assertion with ``target_audience`` asks for an ID token) and the refresh-token grant."""
        form = await request.post()
        self.token_requests += 1
        grant = form.get("grant_type")
        if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer" and form.get("assertion"):
            claims = _jwt_claims(str(form["assertion"]))
            if claims is None:
                return web.json_response(
                    {"error": "invalid_grant", "error_description": "Invalid JWT"}, status=400
                )
            if "target_audience" in claims:
                return web.json_response({"id_token": self.id_token})
        elif grant != "refresh_token" or not form.get("refresh_token"):
            return web.json_response(
                {"error": "unsupported_grant_type", "error_description": "Bad Request"}, status=400
            )
        return web.json_response(
            {"access_token": self.access_token, "expires_in": 3600, "token_type": "Bearer"}
        )

    async def _handle(self, request: web.Request) -> web.Response:
        path = request.path
        if path == "/token" and request.method == "POST":
            return await self._token(request)
        if path.startswith("/k8s/"):
            return self._kubernetes(request, path.removeprefix("/k8s"))
        route = next((r for r in ROUTES if r.pattern.match(path)), None)
        if route is None:
            return web.json_response(
                google_error(404, f"The requested URL {path} was not found.", "NOT_FOUND"),
                status=404,
            )
        query = parse_qs(request.query_string, keep_blank_values=True)
        body: Any = None
        if request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                return web.json_response(bad_request(["(body): not JSON"]), status=400)
        doc = self._doc(route, path)
        errors = discovery_request_errors(
            doc, route.method_id, http_method=request.method, path=path, query=query, body=body
        )
        self.requests.append(Recorded(route.method_id, path, query, body, errors))
        if request.headers.get("Authorization") != f"Bearer {self.access_token}":
            return web.json_response(
                google_error(
                    401,
                    "Request had invalid authentication credentials. Expected OAuth 2 access "
                    "token, login cookie or other valid authentication credential.",
                    "UNAUTHENTICATED",
                ),
                status=401,
            )
        if errors:
            return web.json_response(bad_request(errors), status=400)
        if route.method_id in self.failures:
            code, status, message = self.failures[route.method_id]
            return web.json_response(google_error(code, message, status), status=code)
        answer = self._answer(route, path, body or {}, query)
        if isinstance(answer, web.Response):
            return answer
        method = _find(doc, route.method_id)
        problems = schema_errors(doc, method["response"]["$ref"], answer, response=True)
        if problems:
            return web.json_response(
                google_error(
                    500, "fake fixture is not Google-shaped: " + "; ".join(problems), "INTERNAL"
                ),
                status=500,
            )
        return web.json_response(answer)

    def _answer(
        self, route: Route, path: str, body: dict[str, Any], query: dict[str, list[str]]
    ) -> dict[str, Any] | web.Response:
        name = path.split("/", 2)[2]  # drop the version
        not_found = web.json_response(
            google_error(404, f"Resource '{name}' was not found", "NOT_FOUND"), status=404
        )
        if route.method_id == "run.projects.locations.services.get":
            return self.services.get(name) or not_found
        if route.method_id == "container.projects.locations.clusters.get":
            return self.clusters.get(name) or not_found
        if route.method_id == "tpu.projects.locations.queuedResources.get":
            return self.queued_resources.get(name) or not_found
        if route.method_id == "tpu.projects.locations.list":
            project = name.split("/")[1]
            return {
                "locations": [
                    {"name": f"projects/{project}/locations/{z}", "locationId": z}
                    for z in sorted(self.locations)
                ]
            }
        if route.method_id == "tpu.projects.locations.acceleratorTypes.list":
            zone = name.split("/")[3]
            if zone not in self.locations:
                return not_found
            return {"acceleratorTypes": self.locations[zone]}
        if route.method_id == "logging.entries.list":
            size = int(body.get("pageSize") or 50)
            return {"entries": self.log_entries[:size]}
        if route.method_id == "secretmanager.projects.secrets.versions.access":
            secret = name.rsplit("/versions/", 1)[0]
            value = self.secrets.get(secret)
            if value is None:
                return not_found
            return {
                "name": f"{secret}/versions/1",
                "payload": {"data": base64.b64encode(value.encode()).decode()},
            }
        return not_found

    # ----- lifecycle ---------------------------------------------------------------------

    def _kubernetes(self, request: web.Request, path: str) -> web.Response:
        """The Kubernetes API's GETs: 401 without the token, 404 Status for an unknown path."""
        self.requests.append(Recorded("kubernetes", path, parse_qs(request.query_string), None, []))
        if request.headers.get("Authorization") != f"Bearer {self.access_token}":
            return web.json_response(
                {"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401},
                status=401,
            )
        if request.method != "GET":
            return web.json_response(
                {"kind": "Status", "status": "Failure", "reason": "MethodNotAllowed", "code": 405},
                status=405,
            )
        if path in self.kubernetes:
            return web.json_response(self.kubernetes[path])
        prefix = path.rstrip("/") + "/"
        items = [obj for key, obj in sorted(self.kubernetes.items()) if key.startswith(prefix)]
        if items:
            wanted = dict(
                pair.split("=", 1)
                for pair in request.query.get("labelSelector", "").split(",")
                if "=" in pair
            )
            return web.json_response(
                {
                    "items": [
                        obj
                        for obj in items
                        if wanted.items()
                        <= ((obj.get("metadata") or {}).get("labels") or {}).items()
                    ]
                }
            )
        return web.json_response(
            {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404},
            status=404,
        )

    def start(self) -> FakeGoogle:
        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            server = site._server
            assert server is not None
            self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
            self._started.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=main, name="fake-google", daemon=True)
        self._thread.start()
        self._started.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def calls(self, method_id: str) -> list[Recorded]:
        return [r for r in self.requests if r.method_id == method_id]


def _jwt_claims(token: str) -> dict[str, Any] | None:
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None
    return claims if isinstance(claims, dict) else None


def _find(doc: dict[str, Any], method_id: str) -> dict[str, Any]:
    from tests.support.discovery import find_method

    return find_method(doc, method_id)


Factory = Callable[..., FakeGoogle]
