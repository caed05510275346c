"""Compatibility: the authentication strategies live in :mod:`endpoint.auth`."""

from endpoint.auth import (
    ApiKeyAuth,
    AuthError,
    AuthStrategy,
    GoogleIdTokenAuth,
    NoAuth,
    SecretManagerApiKeyAuth,
    TokenProvider,
    google_id_token_provider,
)

__all__ = [
    "ApiKeyAuth",
    "AuthError",
    "AuthStrategy",
    "GoogleIdTokenAuth",
    "NoAuth",
    "SecretManagerApiKeyAuth",
    "TokenProvider",
    "google_id_token_provider",
]
