"""A front end in front of vLLM that has lost its backend: ``/health`` answers 200 (the front
end's own), every other request an error status with a body of its own: by default 502 with
Google's HTML error page (tests/endpoint/test_error_line.py), as Cloud Run's and a Google load
balancer's front end serve it."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.endpoint.test_error_line import GOOGLE_502, TOKEN

#: Google's front end's 503 page (a Cloud Run service with no instance able to serve), as served.
GOOGLE_503 = GOOGLE_502.replace("502", "503").replace(
    "The server encountered a temporary error and could not complete your request.",
    "The service you requested is not available at this time.",
)

#: Error answers a front end or vLLM sends, each: status, body, content type, and the start of
#: the one line that says what the body says (a body over a read cap may be refused instead).
ERROR_ANSWERS: dict[str, tuple[int, str, str, str]] = {
    "google 502 page": (502, GOOGLE_502, "text/html; charset=UTF-8", "Error 502 (Server Error)!!1"),
    "google 503 page": (503, GOOGLE_503, "text/html; charset=UTF-8", "Error 503 (Server Error)!!1"),
    "json error": (
        503,
        '{"error": {"code": 503, "message": "The service is currently unavailable.\\nRetry.", '
        '"status": "UNAVAILABLE"}}',
        "application/json",
        "The service is currently unavailable.",
    ),
    "a reflected bearer token": (
        500,
        f"upstream refused Authorization: Bearer {TOKEN}\nat proxy.go:12\n",
        "text/plain",
        "upstream refused Authorization: [REDACTED]",
    ),
    "a huge page": (
        503,
        "<html><title>" + "Overloaded " * 200_000 + "</title>",
        "text/html",
        "Overloaded Overloaded",
    ),
}


@contextmanager
def front_end(
    status: int = 502,
    body: str = GOOGLE_502,
    content_type: str = "text/html; charset=UTF-8",
    *,
    health_too: bool = False,
) -> Iterator[str]:
    """The front end's URL, on a loopback port of its own, answering ``status`` and ``body``
    (to ``/health`` too with ``health_too``: no backend has come up yet)."""
    page = body.encode()

    class FrontEnd(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            health = self.path == "/health" and not health_too
            self.send_response(200 if health else status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", "0" if health else str(len(page)))
            self.end_headers()
            if not health:
                self.wfile.write(page)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, *args: object) -> None:
            pass  # a client that stops reading a huge body early: not this test's output

    server = Server(("127.0.0.1", 0), FrontEnd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
