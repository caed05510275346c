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

from . import limits
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
from .redact import redact, register_secret
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
