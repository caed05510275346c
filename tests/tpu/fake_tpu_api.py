"""A local fake of the Cloud TPU REST endpoints the provider calls, on 127.0.0.1.

Every request is first checked against Google's discovery document for the version in its URL
(`tests.support.discovery`, documents bundled in google-api-python-client): an unknown path,
parameter, field, type or enum value gets a 400 INVALID_ARGUMENT in Google's error shape, as the
real service answers, and nothing is created. Each queued resource created walks through a
scripted list of states, one per GET. The fake's own answers are checked against the
document's response schemas too, so it cannot hand the provider fields the API never sends.
Every request is recorded for assertions.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.support import discovery

PATH = re.compile(
    r"^/(?P<version>v2(?:alpha1)?)/projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)"
    r"/(?P<kind>queuedResources|nodes)(?:/(?P<id>[^/?]+))?$"
)
_QR = "tpu.projects.locations.queuedResources"
#: (HTTP method, collection, has an id) -> (discovery method id, response schema).
METHODS = {
    ("POST", "queuedResources", False): (f"{_QR}.create", "Operation"),
    ("GET", "queuedResources", True): (f"{_QR}.get", "QueuedResource"),
    ("DELETE", "queuedResources", True): (f"{_QR}.delete", "Operation"),
    ("GET", "nodes", True): ("tpu.projects.locations.nodes.get", "Node"),
}


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: dict[str, Any] | None


@dataclass
class Scenario:
    #: States a new queued resource shows on successive GETs (the last one repeats).
    states: list[str] = field(
        default_factory=lambda: ["WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE"]
    )
    failure_message: str = "Insufficient capacity for v6e-1 in zone."
    #: An error the create call answers with: (HTTP status, Google status, message).
    create_error: tuple[int, str, str] | None = None
    external_ip: str = "203.0.113.7"


class FakeTpuApi:
    def __init__(self, scenario: Scenario | None = None) -> None:
        self.scenario = scenario or Scenario()
        self.requests: list[Recorded] = []
        self.queued: dict[str, dict[str, Any]] = {}
        self._polls: dict[str, int] = {}
        self._deleting: dict[str, int] = {}
        self.url = ""
        #: Requests the discovery document refused (method, path, errors).
        self.rejected: list[tuple[str, str, list[str]]] = []

    # Contract -----------------------------------------------------------------------

    def handle(
        self, method: str, path: str, body: dict[str, Any] | None, query: dict[str, list[str]]
    ) -> tuple[int, dict[str, Any]]:
        match = PATH.match(path)
        if not match:
            return 404, _error(404, "NOT_FOUND", f"unknown path {path}")
        known = METHODS.get((method, match["kind"], bool(match["id"])))
        if known is None:
            return 400, _error(400, "INVALID_ARGUMENT", f"{method} {path} not supported")
        method_id, response_schema = known
        doc = discovery.load("tpu", match["version"])
        errors = discovery.request_errors(
            doc, method_id, http_method=method, path=path, query=query, body=body
        )
        if errors:
            self.rejected.append((method, path, errors))
            return 400, discovery.bad_request(errors)
        status, payload = self._handle(method, body, query, match)
        if status == 200:
            wrong = discovery.schema_errors(doc, response_schema, payload, response=True)
            assert not wrong, f"the fake answers outside the document: {wrong}"
        return status, payload

    # State machine ------------------------------------------------------------------

    def _handle(
        self,
        method: str,
        body: dict[str, Any] | None,
        query: dict[str, list[str]],
        match: re.Match[str],
    ) -> tuple[int, dict[str, Any]]:
        kind, ident = match["kind"], match["id"]
        if kind == "nodes":
            return self._node(ident or "")
        if method == "POST":
            return self._create(query["queuedResourceId"][0], body or {}, match)
        if method == "GET" and ident:
            return self._get(ident)
        if method == "DELETE" and ident:
            if ident not in self.queued or ident in self._deleting:
                if ident in self._deleting:
                    return 200, {"name": f"operations/delete-{ident}", "done": False}
                return 404, _error(404, "NOT_FOUND", f"queued resource {ident} not found")
            self._deleting[ident] = 0
            return 200, {"name": f"operations/delete-{ident}", "done": False}
        return 400, _error(400, "INVALID_ARGUMENT", f"{method} {match[0]} not supported")

    def _create(
        self, qr_id: str, body: dict[str, Any], match: re.Match[str]
    ) -> tuple[int, dict[str, Any]]:
        if self.scenario.create_error:
            code, status, message = self.scenario.create_error
            return code, _error(code, status, message)
        if qr_id in self.queued:
            return 409, _error(409, "ALREADY_EXISTS", f"queued resource {qr_id} already exists")
        name = f"projects/{match['project']}/locations/{match['zone']}/queuedResources/{qr_id}"
        self.queued[qr_id] = {**body, "name": name}
        self._polls[qr_id] = 0
        return 200, {"name": f"operations/create-{qr_id}", "done": False}

    def _get(self, qr_id: str) -> tuple[int, dict[str, Any]]:
        if qr_id not in self.queued:
            return 404, _error(404, "NOT_FOUND", f"queued resource {qr_id} not found")
        if qr_id in self._deleting:
            self._deleting[qr_id] += 1
            if self._deleting[qr_id] > 1:
                del self.queued[qr_id]
                del self._deleting[qr_id]
                return 404, _error(404, "NOT_FOUND", f"queued resource {qr_id} not found")
            return 200, {**self.queued[qr_id], "state": {"state": "DELETING"}}
        states = self.scenario.states
        state = states[min(self._polls[qr_id], len(states) - 1)]
        self._polls[qr_id] += 1
        info: dict[str, Any] = {"state": state}
        if state == "FAILED":
            info["failedData"] = {"error": {"code": 8, "message": self.scenario.failure_message}}
        if state == "SUSPENDED":
            info["suspendedData"] = {}
            info["stateInitiator"] = "SERVICE"
        return 200, {**self.queued[qr_id], "state": info}

    def _node(self, node_id: str) -> tuple[int, dict[str, Any]]:
        for qr in self.queued.values():
            spec = qr["tpu"]["nodeSpec"][0]
            if spec["nodeId"] == node_id:
                return 200, {
                    "name": f"{spec['parent']}/nodes/{node_id}",
                    "state": "READY",
                    "networkEndpoints": [
                        {
                            "ipAddress": "10.128.0.5",
                            "port": 8470,
                            "accessConfig": {"externalIp": self.scenario.external_ip},
                        }
                    ],
                }
        return 404, _error(404, "NOT_FOUND", f"node {node_id} not found")


def _error(code: int, status: str, message: str) -> dict[str, Any]:
    return discovery.google_error(code, message, status)


@contextmanager
def serve(scenario: Scenario | None = None) -> Iterator[FakeTpuApi]:
    fake = FakeTpuApi(scenario)

    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            parsed = urlparse(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            query = parse_qs(parsed.query)
            fake.requests.append(
                Recorded(self.command, parsed.path, query, dict(self.headers.items()), body)
            )
            status, payload = fake.handle(self.command, parsed.path, body, query)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _any

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
