"""How requests to a deployed model authenticate: :class:`httpx.Auth` strategies for a Google
ID token whose audience is the Cloud Run URL, the vLLM API key from an environment variable or
from Secret Manager, or none. A credential that cannot be obtained raises :class:`AuthError`
before the request is sent; every credential is registered for redaction."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator, Mapping

import httpx

from .redact import register_secret

TokenProvider = Callable[[str], str]
"""Returns an ID token for the given audience; raises :class:`AuthError` on failure."""

_REFRESH_MARGIN_S = 300.0
_DEFAULT_TOKEN_LIFETIME_S = 3600.0


class AuthError(Exception):
    """Credentials could not be obtained; the request was not sent."""


class AuthStrategy(httpx.Auth):
    """Base class: adds the headers from :meth:`headers` to every request."""

    description = "none"
    """Short human-readable description (never contains a secret)."""

    def headers(self) -> dict[str, str]:
        """The headers to send; may block (token fetch). Raises :class:`AuthError`."""
        return {}

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        request.headers.update(self.headers())
        yield request

    def cached_headers(self) -> dict[str, str] | None:
        """The headers if they are at hand without blocking, else None."""
        return self.headers()

    async def headers_async(self) -> dict[str, str]:
        """:meth:`headers`, with a token fetch (it blocks on the network) off the event loop."""
        headers = self.cached_headers()
        return dict(headers if headers is not None else await asyncio.to_thread(self.headers))

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers.update(await self.headers_async())
        yield request


class NoAuth(AuthStrategy):
    """No credentials (a public service, or a local server)."""

    description = "none"


class ApiKeyAuth(AuthStrategy):
    """``Authorization: Bearer <key>`` with the vLLM API key from an environment variable."""

    def __init__(self, env_var: str, *, environ: Mapping[str, str] | None = None) -> None:
        self.env_var = env_var
        self._environ = environ if environ is not None else os.environ
        self.description = f"vLLM API key from ${env_var}"

    def headers(self) -> dict[str, str]:
        key = self._environ.get(self.env_var, "").strip()
        if not key:
            raise AuthError(
                f"environment variable {self.env_var} is not set or empty; "
                "export the vLLM API key into it"
            )
        register_secret(key)
        return {"Authorization": f"Bearer {key}"}


def _token_expiry(token: str) -> float:
    """The ``exp`` claim of a JWT (unverified; only used to know when to refresh)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, KeyError, TypeError, ValueError):
        return time.time() + _DEFAULT_TOKEN_LIFETIME_S


class GoogleIdTokenAuth(AuthStrategy):
    """A Google ID token for ``audience`` (the Cloud Run service URL), cached until five minutes
    before expiry; ``token_provider`` replaces the Google call in tests."""

    def __init__(
        self,
        audience: str,
        *,
        impersonate_service_account: str | None = None,
        token_provider: TokenProvider | None = None,
    ) -> None:
        self.audience = audience.rstrip("/")
        self._provider = token_provider or google_id_token_provider(impersonate_service_account)
        via = f" as {impersonate_service_account}" if impersonate_service_account else ""
        self.description = f"Google ID token for {self.audience}{via}"
        self._token: str | None = None
        self._expires_at = 0.0
        self._lock = threading.Lock()

    def _fresh(self) -> bool:
        return self._token is not None and time.time() < self._expires_at - _REFRESH_MARGIN_S

    def cached_headers(self) -> dict[str, str] | None:
        # The fast path for every request while the cached token is fresh (no thread hop).
        token = self._token
        return {"Authorization": f"Bearer {token}"} if self._fresh() and token else None

    def headers(self) -> dict[str, str]:
        with self._lock:
            if not self._fresh():
                try:
                    token = self._provider(self.audience)
                except AuthError:
                    raise
                except Exception as exc:  # a provider's own failure, whatever its type
                    raise AuthError(f"could not get an ID token: {exc}") from exc
                if not token:
                    raise AuthError("could not get an ID token: the provider returned none")
                register_secret(token)
                self._token, self._expires_at = token, _token_expiry(token)
            return {"Authorization": f"Bearer {self._token}"}


def _user_id_token(request: object) -> str | None:
    """The ID token of `gcloud auth application-default login` user credentials, if any: Cloud
    Run accepts it for a principal with `roles/run.invoker`, though user credentials cannot mint
    one for an arbitrary audience."""
    import google.auth
    from google.auth import exceptions
    from google.oauth2 import credentials as user_credentials

    try:
        creds, _ = google.auth.default()
    except exceptions.DefaultCredentialsError:
        return None
    if not isinstance(creds, user_credentials.Credentials):
        return None
    try:
        creds.refresh(request)  # type: ignore[no-untyped-call]
    except exceptions.GoogleAuthError:
        return None
    token = creds.id_token
    return str(token) if token else None


def google_id_token_provider(impersonate_service_account: str | None = None) -> TokenProvider:
    """A :data:`TokenProvider` backed by google-auth: ``fetch_id_token`` (a service-account key
    or the metadata server), or the ADC impersonating ``impersonate_service_account``."""

    def provide(audience: str) -> str:
        import google.auth
        import google.auth.transport.requests
        from google.auth import exceptions, impersonated_credentials
        from google.oauth2 import id_token

        request = google.auth.transport.requests.Request()
        try:
            if impersonate_service_account is None:
                try:
                    return str(id_token.fetch_id_token(request, audience))  # type: ignore[no-untyped-call]
                except exceptions.DefaultCredentialsError as exc:
                    user_token = _user_id_token(request)
                    if user_token is not None:
                        return user_token
                    raise AuthError(
                        "application default credentials cannot mint an ID token "
                        f"({exc}) and carry no user ID token: pass "
                        "--impersonate-service-account SA (with "
                        "roles/iam.serviceAccountTokenCreator on SA) or point "
                        "GOOGLE_APPLICATION_CREDENTIALS at a service-account key"
                    ) from exc
            source, _ = google.auth.default(
                scopes=["https://www.googleapis.com/auth/cloud-platform"]
            )
            target = impersonated_credentials.Credentials(  # type: ignore[no-untyped-call]
                source_credentials=source,
                target_principal=impersonate_service_account,
                target_scopes=["https://www.googleapis.com/auth/cloud-platform"],
            )
            creds = impersonated_credentials.IDTokenCredentials(  # type: ignore[no-untyped-call]
                target, target_audience=audience, include_email=True
            )
            creds.refresh(request)
            return str(creds.token)
        except AuthError:
            raise
        except exceptions.GoogleAuthError as exc:
            raise AuthError(f"could not get an ID token for {audience}: {exc}") from exc

    return provide


AccessTokenProvider = Callable[[], str]
"""Returns an OAuth access token (cloud-platform scope); raises on failure."""


def _adc_access_token() -> str:
    import google.auth
    import google.auth.exceptions
    import google.auth.transport.requests

    try:
        credentials, _ = google.auth.default(
            scopes=["https://www.googleapis.com/auth/cloud-platform"]
        )
        credentials.refresh(google.auth.transport.requests.Request())  # type: ignore[no-untyped-call]
    except google.auth.exceptions.GoogleAuthError as exc:
        raise AuthError(f"no Google credentials for Secret Manager: {exc}") from None
    return str(credentials.token)


class SecretManagerApiKeyAuth(AuthStrategy):
    """``Authorization: Bearer <key>`` with the vLLM API key from a Secret Manager secret."""

    def __init__(
        self,
        project: str,
        secret_id: str,
        *,
        access_token: AccessTokenProvider | None = None,
        endpoint: str = "https://secretmanager.googleapis.com",
    ) -> None:
        base = endpoint.rstrip("/")
        self._url = f"{base}/v1/projects/{project}/secrets/{secret_id}/versions/latest:access"
        self._access_token = access_token or _adc_access_token
        self._key: str | None = None
        self._lock = threading.Lock()
        self.description = f"vLLM API key from Secret Manager secret {secret_id}"

    def cached_headers(self) -> dict[str, str] | None:
        return None if self._key is None else {"Authorization": f"Bearer {self._key}"}

    def headers(self) -> dict[str, str]:
        with self._lock:
            if self._key is None:
                self._key = self._fetch()
        return {"Authorization": f"Bearer {self._key}"}

    def _fetch(self) -> str:
        token = self._access_token()
        register_secret(token)
        try:
            response = httpx.get(
                self._url, headers={"Authorization": f"Bearer {token}"}, timeout=30
            )
        except httpx.HTTPError as exc:
            raise AuthError(f"Secret Manager unreachable: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise AuthError(
                f"cannot read the API key from Secret Manager (HTTP {response.status_code}); "
                "check the secret exists and you have roles/secretmanager.secretAccessor on it"
            )
        try:
            data = response.json()["payload"]["data"]
            key = base64.b64decode(data).decode().strip()
        except (KeyError, ValueError) as exc:
            raise AuthError(f"unexpected Secret Manager answer: {type(exc).__name__}") from None
        if not key:
            raise AuthError("the API key secret is empty")
        register_secret(key)
        return key
