"""What a failed connection means, and what to check. The aiohttp transport surfaces errors
loosely through httpx, so the cause chain decides. ``refused``, ``dns`` and ``tls`` mean
nothing usable listens there (not a server still loading); ``timeout``, ``dropped`` and
``other`` may be transient."""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import aiohttp
import httpx

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
