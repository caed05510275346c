"""Post-deploy health checks for a vLLM endpoint: readiness, served model, a chat smoke test and
a ``/metrics`` summary, with Google ID-token or vLLM API-key authentication.

The Pulumi resource hook lives in :mod:`healthchecks.hook` (the only module importing pulumi).
:func:`make_client` and :mod:`healthchecks.auth` are shared with the benchmark package.
"""

from .auth import ApiKeyAuth, AuthError, AuthStrategy, GoogleIdTokenAuth, NoAuth
from .checks import Backoff, CheckResult
from .client import make_client
from .metrics import (
    MetricsParseError,
    MetricsSnapshot,
    SpecDecodeAcceptance,
    parse_metrics,
    spec_decode_acceptance,
)
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
