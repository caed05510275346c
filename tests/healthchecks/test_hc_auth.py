"""Authentication: ID tokens from an injected provider, the vLLM API key, and their failures."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest

from endpoint.auth import ApiKeyAuth, AuthError, AuthStrategy, GoogleIdTokenAuth, NoAuth
from healthchecks.checks import Backoff
from healthchecks.runner import HealthReport, run_health_checks
from tests.healthchecks._helpers import MODEL, ServerFactory

FAST_BACKOFF = Backoff(initial_s=0.02, max_s=0.05)


def _jwt(exp: float) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'exp': exp, 'aud': 'x'})}.sig"


def _check(url: str, auth: AuthStrategy) -> HealthReport:
    return asyncio.run(
        run_health_checks(url, MODEL, auth=auth, deadline_s=300, backoff=FAST_BACKOFF)
    )


def test_id_token_is_sent_with_the_service_url_as_audience(fake_vllm: ServerFactory) -> None:
    token = _jwt(time.time() + 3600)
    server = fake_vllm(api_key=token)  # every path needs it, like a private Cloud Run service
    audiences: list[str] = []

    def provider(audience: str) -> str:
        audiences.append(audience)
        return token

    report = _check(server.url, GoogleIdTokenAuth(server.url + "/", token_provider=provider))
    assert report.ok, report.failure_summary()
    assert {r.authorization for r in server.requests} == {f"Bearer {token}"}
    assert audiences == [server.url]  # fetched once, cached, trailing slash dropped


def test_expiring_token_is_refreshed(fake_vllm: ServerFactory) -> None:
    calls: list[str] = []

    def provider(audience: str) -> str:
        calls.append(audience)
        return _jwt(time.time() + 60)  # inside the five-minute refresh margin

    auth = GoogleIdTokenAuth("https://svc.a.run.app", token_provider=provider)
    auth.headers()
    auth.headers()
    assert len(calls) == 2


def test_provider_failure_is_a_failed_check_and_nothing_is_sent(fake_vllm: ServerFactory) -> None:
    server = fake_vllm()

    def provider(audience: str) -> str:
        raise RuntimeError("Reauthentication is needed. Please run gcloud auth login")

    report = _check(server.url, GoogleIdTokenAuth(server.url, token_provider=provider))
    assert not report.ok
    readiness = report.results[0]
    assert readiness.detail == (
        "no credentials, request not sent: could not get an ID token: "
        "Reauthentication is needed. Please run gcloud auth login"
    )
    assert [r.detail for r in report.results[1:]] == ["not reached: readiness failed"] * 3
    assert server.requests == []


def test_rejected_token_is_a_failed_credentials_check(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(api_key="the-right-token")
    auth = GoogleIdTokenAuth(server.url, token_provider=lambda _: _jwt(time.time() + 3600))
    report = _check(server.url, auth)
    assert report.results[0].detail.startswith("credentials rejected (HTTP 401)")
    assert len(server.requests) == 1  # never retried


def test_api_key_from_env(fake_vllm: ServerFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    server = fake_vllm(api_key="k-123", auth_all_paths=False)  # vllm serve --api-key
    monkeypatch.setenv("HC_TEST_KEY", "k-123")
    auth = ApiKeyAuth("HC_TEST_KEY")
    report = _check(server.url, auth)
    assert report.ok, report.failure_summary()
    assert "k-123" not in json.dumps(report.as_dict())
    assert auth.description == "vLLM API key from $HC_TEST_KEY"


def test_missing_api_key_env_sends_nothing(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(api_key="k-123", auth_all_paths=False)
    report = _check(server.url, ApiKeyAuth("HC_TEST_KEY"))
    assert report.results[0].detail == (
        "no credentials, request not sent: environment variable HC_TEST_KEY is not set or empty; "
        "export the vLLM API key into it"
    )
    assert server.requests == []


def test_wrong_api_key_is_rejected_by_vllm(fake_vllm: ServerFactory) -> None:
    server = fake_vllm(api_key="k-123", auth_all_paths=False)
    report = _check(server.url, ApiKeyAuth("K", environ={"K": "wrong"}))
    assert report.results[0].ok  # /health is open with vllm --api-key
    assert report.results[1].detail == (
        "credentials rejected (HTTP 401) using vLLM API key from $K: Unauthorized"
    )


def test_no_auth_sends_no_header(fake_vllm: ServerFactory) -> None:
    server = fake_vllm()
    assert _check(server.url, NoAuth()).ok
    assert {r.authorization for r in server.requests} == {None}


def test_google_provider_without_credentials_raises_auth_error(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Credentials that cannot mint an ID token: a clear AuthError naming the remedies.
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    auth = GoogleIdTokenAuth("https://svc.a.run.app")
    with pytest.raises(AuthError, match="cannot mint an ID token") as caught:
        auth.headers()
    assert "--impersonate-service-account" in str(caught.value)


def test_impersonation_without_source_credentials_raises_auth_error(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    auth = GoogleIdTokenAuth(
        "https://svc.a.run.app", impersonate_service_account="hc@p.iam.gserviceaccount.com"
    )
    assert auth.description.endswith("as hc@p.iam.gserviceaccount.com")
    with pytest.raises(AuthError, match=r"could not get an ID token for https://svc\.a\.run\.app"):
        auth.headers()
