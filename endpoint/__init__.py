"""Talking to a deployed vLLM endpoint: shared by the health checks, the benchmark and any other
client of a deployment (e.g. an MCP server).

Public surface (everything else is internal):

- targets: :class:`Target`, :class:`AuthOptions`, :class:`TargetError`, :func:`check_url`,
  :func:`auth_for`, :func:`read_stack_outputs`, :func:`targets_from_outputs`,
  :func:`target_from_url`; for a Pulumi hook, :func:`url_from_outputs` and :func:`resolve_auth`
  (an :class:`AuthStrategy` or an ``AuthFactory`` given the URL);
- credentials: :class:`AuthStrategy` and its :class:`ApiKeyAuth`, :class:`GoogleIdTokenAuth`,
  :class:`SecretManagerApiKeyAuth`, :class:`NoAuth`; :class:`AuthError` when none can be had;
- HTTP: :func:`make_client`, :func:`request_capped` (a whole answer up to a cap),
  :func:`read_capped`, :func:`iter_lines_capped`, :class:`Reply`, :class:`LimitExceeded`,
  :func:`retry_after_seconds`; the caps are in :mod:`endpoint.limits`;
- failures: :func:`classify_connection_error` gives a :class:`ConnectionProblem` (``kind``,
  ``detail``, ``hint``, ``not_listening``); :data:`TRANSPORT_ERRORS`;
- ``/metrics``: :func:`fetch_metrics`, :func:`parse_metrics`, :class:`MetricsSnapshot`,
  :func:`spec_decode_acceptance`, :class:`MetricsParseError`;
- :func:`redact`: the one redaction step for anything a server sent, a URL or an exception
  before it is shown or written (:func:`register_secret` adds a value to mask).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Bound now, not on first use: `redact` names a submodule as well as its function, and a
# package's attribute for a submodule is set when that submodule is imported, so a lazy
# `redact` would be the module once anything imported endpoint.redact.
from . import limits
from .redact import redact, register_secret

if TYPE_CHECKING:
    from .auth import (
        ApiKeyAuth,
        AuthError,
        AuthStrategy,
        GoogleIdTokenAuth,
        NoAuth,
        SecretManagerApiKeyAuth,
    )
    from .client import (
        LimitExceeded,
        Reply,
        iter_lines_capped,
        make_client,
        read_capped,
        request_capped,
        retry_after_seconds,
    )
    from .errors import TRANSPORT_ERRORS, ConnectionProblem, classify_connection_error
    from .metrics import (
        MetricsParseError,
        MetricsSnapshot,
        SpecDecodeAcceptance,
        fetch_metrics,
        parse_metrics,
        spec_decode_acceptance,
    )
    from .targets import (
        AuthFactory,
        AuthOptions,
        Target,
        TargetError,
        auth_for,
        check_url,
        read_stack_outputs,
        resolve_auth,
        target_from_url,
        targets_from_outputs,
        url_from_outputs,
    )

# The rest is imported on first use: the plan and the stack-file reader, which need only
# endpoint.limits and endpoint.redact, do not pay for httpx, aiohttp and google-auth.
_EXPORTS = {
    "ApiKeyAuth": "auth",
    "AuthError": "auth",
    "AuthStrategy": "auth",
    "GoogleIdTokenAuth": "auth",
    "NoAuth": "auth",
    "SecretManagerApiKeyAuth": "auth",
    "LimitExceeded": "client",
    "Reply": "client",
    "iter_lines_capped": "client",
    "make_client": "client",
    "read_capped": "client",
    "request_capped": "client",
    "retry_after_seconds": "client",
    "TRANSPORT_ERRORS": "errors",
    "ConnectionProblem": "errors",
    "classify_connection_error": "errors",
    "MetricsParseError": "metrics",
    "MetricsSnapshot": "metrics",
    "SpecDecodeAcceptance": "metrics",
    "fetch_metrics": "metrics",
    "parse_metrics": "metrics",
    "spec_decode_acceptance": "metrics",
    "AuthFactory": "targets",
    "AuthOptions": "targets",
    "Target": "targets",
    "TargetError": "targets",
    "auth_for": "targets",
    "check_url": "targets",
    "read_stack_outputs": "targets",
    "resolve_auth": "targets",
    "target_from_url": "targets",
    "targets_from_outputs": "targets",
    "url_from_outputs": "targets",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'endpoint' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "TRANSPORT_ERRORS",
    "ApiKeyAuth",
    "AuthError",
    "AuthFactory",
    "AuthOptions",
    "AuthStrategy",
    "ConnectionProblem",
    "GoogleIdTokenAuth",
    "LimitExceeded",
    "MetricsParseError",
    "MetricsSnapshot",
    "NoAuth",
    "Reply",
    "SecretManagerApiKeyAuth",
    "SpecDecodeAcceptance",
    "Target",
    "TargetError",
    "auth_for",
    "check_url",
    "classify_connection_error",
    "fetch_metrics",
    "iter_lines_capped",
    "limits",
    "make_client",
    "parse_metrics",
    "read_capped",
    "read_stack_outputs",
    "redact",
    "register_secret",
    "request_capped",
    "resolve_auth",
    "retry_after_seconds",
    "spec_decode_acceptance",
    "target_from_url",
    "targets_from_outputs",
    "url_from_outputs",
]
