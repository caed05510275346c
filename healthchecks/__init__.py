"""Post-deploy health checks for a vLLM endpoint: readiness, served model, a chat smoke test and
a ``/metrics`` summary, with Google ID-token or vLLM API-key authentication.

The Pulumi resource hook lives in :mod:`healthchecks.hook` (the only module importing pulumi).
The code that talks to an endpoint (targets, credentials, the HTTP client, ``/metrics``,
redaction) lives in :mod:`endpoint`; the names below are re-exported from it.
"""

from endpoint.auth import ApiKeyAuth, AuthError, AuthStrategy, GoogleIdTokenAuth, NoAuth
from endpoint.client import make_client
from endpoint.metrics import (
    MetricsParseError,
    MetricsSnapshot,
    SpecDecodeAcceptance,
    parse_metrics,
    spec_decode_acceptance,
)

from .checks import Backoff, CheckResult
from .runner import HealthReport, run_health_checks, run_health_checks_sync

__all__ = [
    "ApiKeyAuth",
    "AuthError",
    "AuthStrategy",
    "Backoff",
    "CheckResult",
    "GoogleIdTokenAuth",
    "HealthReport",
    "MetricsParseError",
    "MetricsSnapshot",
    "NoAuth",
    "SpecDecodeAcceptance",
    "make_client",
    "parse_metrics",
    "run_health_checks",
    "run_health_checks_sync",
    "spec_decode_acceptance",
]
