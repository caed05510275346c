"""A server's error body shown as one line (endpoint.errors.error_line), as the health checks, the
benchmark and the MCP server print it: the shapes the servers in front of vLLM really send."""

from __future__ import annotations

import json

import pytest

from endpoint.errors import error_line
from endpoint.limits import MAX_ECHO_CHARS

TOKEN = "hf_" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"

#: Google's front end's error page (Cloud Run, a Google load balancer), as it is served.
GOOGLE_502 = """<!DOCTYPE html>
<html lang=en>
  <meta charset=utf-8>
  <meta name=viewport content="initial-scale=1, minimum-scale=1, width=device-width">
  <title>Error 502 (Server Error)!!1</title>
  <style>*{margin:0;padding:0}html,code{font:15px/22px arial,sans-serif}</style>
  <a href=//www.google.com/><span id=logo aria-label=Google></span></a>
  <p><b>502.</b> <ins>That\u2019s an error.</ins>
  <p>The server encountered a temporary error and could not complete your request.<p>Please try
  again in 30 seconds.  <ins>That\u2019s all we know.</ins>
"""


@pytest.mark.parametrize(
    ("body", "line"),
    [
        # vLLM's ErrorResponse (vllm/entrypoints/openai/engine/protocol.py).
        (
            {"error": {"message": "The model `m` does not exist.", "type": "NotFoundError"}},
            "The model `m` does not exist.",
        ),
        ({"message": "Service Unavailable"}, "Service Unavailable"),
        ({"detail": "Not Found"}, "Not Found"),  # FastAPI's answer for an unknown route
        # FastAPI's 422: the first entry's path into the request and its message
        (
            {"detail": [{"loc": ["body", "messages", 0], "msg": "field required", "type": "x"}]},
            "body.messages.0: field required",
        ),
        ({"detail": [{"loc": [{"a": 1}], "msg": "bad"}]}, "bad"),  # a loc of other things
        ({"detail": [{"loc": ["body"] * 50, "msg": "m"}]}, ".".join(["body"] * 8) + ": m"),
        ({"detail": [{"msg": 3}]}, '{"detail": [{"msg": 3}]}'),  # no message: the body's line
        ({"error": {"message": "first line\nsecond line"}}, "first line"),
        ({"data": [1, 2]}, '{"data": [1, 2]}'),  # JSON that names no error: its first line
    ],
)
def test_json_errors_show_their_message(body: dict[str, object], line: str) -> None:
    assert error_line(json.dumps(body)) == line


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (GOOGLE_502, "Error 502 (Server Error)!!1"),
        (
            "<html><head><style>p{}</style><script>var t=1</script></head>"
            "<body><h1>502 Bad Gateway</h1><hr><center>nginx</center></body></html>",
            "502 Bad Gateway",
        ),
        (
            "<html><title>  </title><body><p>\n  Service &amp; more\n</p></body></html>",
            "Service & more",
        ),
        ("<html></html>", ""),
        ("\ufeff\n<html><title>Service Unavailable</title></html>", "Service Unavailable"),
    ],
)
def test_an_html_page_shows_its_title_or_first_text(body: str, line: str) -> None:
    assert error_line(body) == line


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (
            "upstream connect error or disconnect/reset before headers. reset reason: "
            "connection termination",
            "upstream connect error or disconnect/reset before headers. reset reason: "
            "connection termination",
        ),  # Envoy, in front of GKE Gateway backends
        (
            "\n\n   Internal Server Error  \nTraceback (most recent call last):\n",
            "Internal Server Error",
        ),
        ("no  healthy\tupstream", "no healthy upstream"),
        ("", ""),
        ("   \n\n", ""),
        (b"\xff\xfebad bytes", "\ufffd\ufffdbad bytes"),
    ],
)
def test_text_shows_its_first_non_blank_line(body: str | bytes, line: str) -> None:
    assert error_line(body) == line


@pytest.mark.parametrize(
    "body",
    [
        f"<title>token {TOKEN}</title>",
        f"<p>token {TOKEN[:10]}<b></b>{TOKEN[10:]}</p>",  # split by markup the line joins
        json.dumps({"error": {"message": f"bad key {TOKEN}"}}),
        f"bad key {TOKEN}",
    ],
)
def test_the_line_is_redacted_whatever_the_shape(body: str) -> None:
    line = error_line(body)
    assert TOKEN not in line and TOKEN[:12] not in line and "[REDACTED]" in line


def test_the_line_is_bounded() -> None:
    assert len(error_line("word " * 100_000)) == MAX_ECHO_CHARS
    # One unbroken run longer than the bound may be a secret the cut would halve: dropped.
    assert len(error_line("x" * 100_000)) <= MAX_ECHO_CHARS
    assert len(error_line("<title>" + "y " * 100_000 + "</title>")) == MAX_ECHO_CHARS
    assert len(error_line("z " * 1000, limit=40)) == 40


@pytest.mark.parametrize("body", ["[" * 200_000, '{"error": ' * 50_000])
def test_json_nested_past_the_parsers_depth_is_shown_as_text(body: str) -> None:
    """A hostile body that makes Python's JSON parser recurse past its limit is text: its first
    line, cut, and no RecursionError."""
    line = error_line(body)
    assert 0 < len(line) <= MAX_ECHO_CHARS and body.startswith(line[:50])


def test_a_status_with_an_empty_body_is_the_status_alone() -> None:
    from endpoint.errors import status_line

    assert status_line(502, GOOGLE_502) == "HTTP 502: Error 502 (Server Error)!!1"
    assert status_line(500, b"") == "HTTP 500"
    assert status_line(503, "<html></html>") == "HTTP 503"
