"""What a failed connection means, and what to check. The aiohttp transport surfaces errors
loosely through httpx, so the cause chain decides. ``refused``, ``dns`` and ``tls`` mean
nothing usable listens there (not a server still loading); ``timeout``, ``dropped`` and
``other`` may be transient."""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
import httpx

from .client import loads_json
from .limits import MAX_ECHO_CHARS, MAX_ERROR_BODY_BYTES
from .redact import redact

ProblemKind = Literal["refused", "dns", "tls", "timeout", "dropped", "other"]

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.TransportError,
    aiohttp.ClientError,
    OSError,
    asyncio.TimeoutError,
)
"""Transport-level failures as they surface through httpx on the aiohttp transport."""


@dataclass(frozen=True)
class ConnectionProblem:
    """A classified connection failure."""

    kind: ProblemKind
    detail: str
    """One line: the kind and the underlying error (redacted)."""
    hint: str
    """What to check."""

    @property
    def not_listening(self) -> bool:
        """Nothing usable listens at the address: waiting will not help (see module doc)."""
        return self.kind in ("refused", "dns", "tls")

    def message(self) -> str:
        return f"{self.detail}; {self.hint}" if self.hint else self.detail


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 12:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def _kind(chain: list[BaseException]) -> ProblemKind:
    for item in chain:
        if isinstance(item, aiohttp.ClientConnectorDNSError | socket.gaierror):
            return "dns"
        if isinstance(
            item,
            aiohttp.ClientConnectorCertificateError
            | aiohttp.ClientConnectorSSLError
            | aiohttp.ClientSSLError
            | ssl.SSLError,
        ):
            return "tls"
        if isinstance(item, ConnectionRefusedError):
            return "refused"
        if isinstance(item, aiohttp.ClientConnectorError) and isinstance(
            item.os_error, ConnectionRefusedError
        ):
            return "refused"
    for item in chain:
        if isinstance(
            item,
            aiohttp.ServerTimeoutError
            | aiohttp.SocketTimeoutError
            | asyncio.TimeoutError
            | httpx.TimeoutException,
        ) and not isinstance(item, httpx.ConnectTimeout):
            return "timeout"
        if isinstance(
            item,
            aiohttp.ServerDisconnectedError
            | aiohttp.ClientPayloadError
            | ConnectionResetError
            | BrokenPipeError,
        ):
            return "dropped"
    for item in chain:
        if isinstance(item, httpx.ConnectTimeout):
            return "timeout"
    return "other"


def _hint(kind: ProblemKind, url: str | None) -> str:
    parts = urlsplit(url or "")
    host = parts.hostname or "the host"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    where = f"{host}:{port}" if port else host
    if kind == "refused":
        return (
            f"nothing accepts connections at {where}: check the port in the URL and that the "
            "server is running (a TPU VM's port stays closed until vLLM has loaded)"
        )
    if kind == "dns":
        return f"the host name {host!r} does not resolve: check the URL for a typo"
    if kind == "tls":
        other = "http" if parts.scheme == "https" else "https"
        return (
            f"the TLS handshake with {where} failed: if the server speaks plain HTTP use "
            f"{other}:// (or check its certificate)"
        )
    if kind == "timeout":
        return "no answer in time: check the server's load and the timeouts"
    if kind == "dropped":
        hint = "the server closed the connection"
        if parts.scheme == "http":
            hint += " (a TLS port answers plain HTTP this way: use https://?)"
        return hint + "; check the server's logs"
    return "check the URL and the network path to it"


def classify_connection_error(exc: BaseException, url: str | None = None) -> ConnectionProblem:
    """The kind of a transport failure, a redacted one-line detail and what to check."""
    chain = _chain(exc)
    kind = _kind(chain)
    root = chain[-1] if len(chain) > 1 else exc
    message = str(exc).strip() or str(root).strip()
    name = type(root).__name__
    connector = next(
        (
            item
            for item in chain
            if type(item) in (aiohttp.ClientConnectorError, aiohttp.ClientConnectorDNSError)
        ),
        None,
    )
    if isinstance(connector, aiohttp.ClientConnectorError):
        # aiohttp's own text names its TLS setting ("ssl:default"), even for plain HTTP: say
        # what failed in words instead.
        reason = connector.os_error.strerror or str(connector.os_error) or "failed"
        message = f"cannot connect to {connector.host}:{connector.port}: {reason}"
    label = {
        "refused": "connection refused",
        "dns": "DNS lookup failed",
        "tls": "TLS handshake failed",
        "timeout": "timed out",
        "dropped": "connection dropped",
        "other": "connection error",
    }[kind]
    detail = f"{label} ({name}{': ' + message if message else ''})"
    return ConnectionProblem(kind, redact(detail, limit=300), _hint(kind, url))


class _PageText(HTMLParser):
    """An HTML error page's title and visible text (scripts and styles left out); every tag but
    the inline ones starts a new line."""

    _INLINE = frozenset(
        {"a", "abbr", "b", "code", "em", "font", "i", "ins", "small", "span", "strong", "u"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.text: list[str] = []
        self._hidden = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self._tag(tag, opening=True)

    def handle_endtag(self, tag: str) -> None:
        self._tag(tag, opening=False)

    def _tag(self, tag: str, *, opening: bool) -> None:
        if tag in ("script", "style"):
            self._hidden = max(0, self._hidden + (1 if opening else -1))
        elif tag == "title":
            self._in_title = opening
        if tag not in self._INLINE:
            self.text.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            (self.title if self._in_title else self.text).append(data)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


#: The most of a validation error's ``loc`` shown: its path into the request, not the request.
_MAX_LOC = 8


def _validation(entry: dict[str, Any]) -> str | None:
    """FastAPI's 422 entry ``{"loc": [...], "msg": ...}`` as ``loc.path: msg``; None when its
    ``msg`` is no string. A ``loc`` of anything but names and indexes is left out."""
    msg, loc = entry.get("msg"), entry.get("loc")
    if not isinstance(msg, str):
        return None
    if isinstance(loc, list) and loc and all(isinstance(x, str | int) for x in loc[:_MAX_LOC]):
        return f"{'.'.join(str(x) for x in loc[:_MAX_LOC])}: {msg}"
    return msg


def _said(body: str) -> str:
    """What the body says, before redaction (:func:`error_line`): ``{"error": {"message"}}``,
    ``{"message"}``, ``{"detail"}`` (a string, or FastAPI's validation list: its first entry's
    ``loc`` and ``msg``), an HTML page (a byte order mark before it too) or text."""
    text = body.strip().removeprefix("\ufeff").lstrip()
    try:
        data = loads_json(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error", data.get("message", data.get("detail")))
        if isinstance(error, dict):
            error = error.get("message")
        if isinstance(error, list) and error and isinstance(error[0], dict):
            error = _validation(error[0])
        if isinstance(error, str):
            return _first_line(error)
    if text.startswith("<"):
        page = _PageText()
        page.feed(text[:MAX_ERROR_BODY_BYTES])
        page.close()
        return _first_line("".join(page.title)) or _first_line("".join(page.text))
    return _first_line(text)


def error_line(body: str | bytes, limit: int = MAX_ECHO_CHARS) -> str:
    """A server's error body as one line: an OpenAI/vLLM or FastAPI error's message, an HTML
    page's title or first text (a front end's page), else the first non-blank line; whitespace
    collapsed, redacted, then cut to ``limit`` characters. Empty when the body says nothing."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return redact(" ".join(_said(text).split()), limit=limit)


def status_line(status: int, body: str | bytes) -> str:
    """``HTTP <status>``, then what the body says (:func:`error_line`) when it says anything."""
    said = error_line(body)
    return f"HTTP {status}: {said}" if said else f"HTTP {status}"
