"""A front end in front of vLLM that has lost its backend: ``/health`` answers 200 (the front
end's own), every other request 502 with Google's HTML error page (tests/endpoint/
test_error_line.py), as Cloud Run's and a Google load balancer's front end serve it."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.endpoint.test_error_line import GOOGLE_502


class _FrontEnd(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        page = b"" if self.path == "/health" else GOOGLE_502.encode()
        self.send_response(502 if page else 200)
        self.send_header("Content-Type", "text/html; charset=UTF-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def front_end_502() -> Iterator[str]:
    """The front end's URL, on a loopback port of its own."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FrontEnd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
