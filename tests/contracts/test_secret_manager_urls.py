"""Every Secret Manager call this package makes, against Google's secretmanager v1 document.

The TPU node's calls are checked in tests/tpu/test_tpu_startup.py (the script is run); this
file covers the post-deploy checks' API-key reader (endpoint.auth).
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from endpoint.auth import SecretManagerApiKeyAuth
from tests.support import discovery

DOC = discovery.load("secretmanager", "v1")
ACCESS = "secretmanager.projects.secrets.versions.access"


def test_health_check_api_key_read_matches_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    payload = {
        "name": "projects/p/secrets/vllm-api-key/versions/3",
        "payload": {"data": base64.b64encode(b"key").decode(), "dataCrc32c": "1"},
    }
    assert discovery.schema_errors(DOC, "AccessSecretVersionResponse", payload, response=True) == []

    def fake_get(url: str, **_: Any) -> httpx.Response:
        calls.append(url)
        return httpx.Response(200, json=payload, request=httpx.Request("GET", url))

    monkeypatch.setattr(httpx, "get", fake_get)
    auth = SecretManagerApiKeyAuth("my-project", "vllm-api-key", access_token=lambda: "t")
    assert auth.headers() == {"Authorization": "Bearer key"}
    (url,) = calls
    parsed = urlparse(url)
    assert f"{parsed.scheme}://{parsed.netloc}/" == DOC["rootUrl"]
    assert discovery.request_errors(DOC, ACCESS, http_method="GET", path=parsed.path) == []
