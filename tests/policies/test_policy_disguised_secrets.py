"""no-plaintext-secrets: credentials of every issuer's shape under any name, as written; a
Kubernetes Secret's `data` decoded as its API server decodes it (base64), nothing else."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from endpoint.redact import MASK, redact
from endpoint.secret_shapes import SHAPES, find_secret
from policies.no_plaintext_secrets import no_plaintext_secrets
from tests.policies._fixtures import (
    ALL_STACKS,
    SERVICE,
    container,
    rendered,
    service,
    violations,
)

# Made-up values in each credential's published format; none is a real credential.
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
SAMPLES = {
    "Hugging Face token": HF,
    "Google API key": "AIza" + "SyA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tUvW",
    "Google OAuth access token": "ya29." + "a0AfB_byC1d2E3f4G5h6I7j8K9l0",
    "Google OAuth refresh token": "1//0" + "gAbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "GitHub token": "ghp_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    "Slack token": "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl",
    "AWS access key id": "AKIA" + "IOSFODNN7EXAMPLE",
    "private key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n"
    "-----END RSA PRIVATE KEY-----",
    "service-account key": '{"type": "service_account", "private_key_id": "0123456789abcdef"}',
}
PGP = "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGN\n-----END PGP PRIVATE KEY BLOCK-----"
SECRET = "kubernetes:core/v1:Secret"


def _with_env(value: str, name: str = "MODEL_FLAVOUR") -> dict[str, Any]:
    props = service("l4")
    container(props)["envs"].append({"name": name, "value": value})
    return props


@pytest.mark.parametrize("label", sorted(SAMPLES))
def test_every_shape_is_found_under_any_name(label: str) -> None:
    messages = violations(no_plaintext_secrets, SERVICE, _with_env(SAMPLES[label]))
    assert any(f"contains a literal {label}" in m for m in messages), messages


@pytest.mark.parametrize(
    ("value", "label"),
    [
        ("hf_" + "aB3" * 10, "Hugging Face token"),  # 30 letters and digits: the shape
        ("hf_" + "aB3" * 9 + "a1", None),  # 29: too short for an issued token
        ("HF_" + "aB3" * 10, None),  # the issuer's prefix is lower case
        ("AIza" + "Sy" + "a1B2c3" * 5 + "dE3", "Google API key"),
        ("AIz" + "Sy" + "a1B2c3" * 5 + "dE3", None),
        ("ghp_" + "a1B2c3" * 5 + "dE", "GitHub token"),
        ("ghx_" + "a1B2c3" * 5 + "dE", None),
    ],
)
def test_a_shape_and_its_near_variants(value: str, label: str | None) -> None:
    assert find_secret(value) == label


def test_a_pgp_private_key_block_is_a_private_key() -> None:
    assert find_secret(PGP) == "private key"


@pytest.mark.parametrize("field", ["data", "stringData"])
def test_a_kubernetes_secret_holding_a_token_is_refused(field: str) -> None:
    value = base64.b64encode(HF.encode()).decode() if field == "data" else HF
    props = {"metadata": {"name": "hf"}, field: {"token": value}}
    messages = violations(no_plaintext_secrets, SECRET, props)
    assert any("Hugging Face token" in m for m in messages), messages


def test_base64_outside_a_secret_is_read_as_written() -> None:
    # An env value is not decoded by its destination; only what a resource decodes is.
    encoded = base64.b64encode(HF.encode()).decode()
    messages = violations(no_plaintext_secrets, SERVICE, _with_env(encoded))
    assert not any("Hugging Face token" in m for m in messages), messages


@pytest.mark.parametrize("where", ["labels", "annotations"])
def test_labels_and_annotations_are_read(where: str) -> None:
    props = service("l4")
    props.setdefault(where, {})["build"] = SAMPLES["Slack token"]
    messages = violations(no_plaintext_secrets, SERVICE, props)
    assert any(f"{where}.build contains a literal Slack token" in m for m in messages)


def test_project_values_do_not_trigger() -> None:
    """Digests, revisions, bucket names, UUIDs and model ids are not credentials."""
    benign = [
        "sha256:" + "0f" * 32,
        "vllm/vllm-openai@sha256:" + "ab12" * 16,
        "8ec720d565c8" * 3 + "abcd",
        "550e8400-e29b-41d4-a716-446655440000",
        "gs://gemma-l4-models-8ec720d565c8/gemma-4-12B-it-qat-w4a16-ct",
        "google/gemma-4-12B-it-qat-w4a16-ct",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "projects/my-project-123/secrets/hf-token/versions/latest",
        "us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/cloud-run-gmp-sidecar:1.2.0",
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
    ]
    assert [b for b in benign if find_secret(b)] == []


def test_shipped_stacks_stay_clean() -> None:
    for stack in ALL_STACKS:
        for resource in rendered(stack).resources:
            assert violations(no_plaintext_secrets, resource.type, resource.inputs) == []


def test_ignore_patterns_exempt_a_value() -> None:
    token = SAMPLES["GitHub token"]
    props = _with_env(token)
    assert violations(no_plaintext_secrets, SERVICE, props)
    assert violations(no_plaintext_secrets, SERVICE, props, {"ignorePatterns": [token]}) == []


@pytest.mark.parametrize("label", sorted(SAMPLES))
def test_redaction_masks_every_shape_of_the_same_catalogue(label: str) -> None:
    shown = redact(f"upstream said: {SAMPLES[label]} (end)")
    assert MASK in shown
    secret = SAMPLES[label]
    assert secret not in shown and secret[-12:] not in shown
    assert any(label == s.label for s in SHAPES)


@pytest.mark.parametrize(
    "url",
    [
        "postgres://admin:CorrectHorse42@db.internal:5432/app",
        "https://user:hunter2hunter2@proxy.example.com:3128",
        "redis://:s3cr3t-pass@10.0.0.3:6379/0",
    ],
)
def test_a_password_in_a_url_is_found(url: str) -> None:
    assert find_secret(url) == "password in a URL"
    messages = violations(no_plaintext_secrets, SERVICE, _with_env(url, "DATABASE"))
    assert any("password in a URL" in m for m in messages), messages
    assert MASK in redact(url) and url.split("@")[0].split(":")[-1] not in redact(url)


@pytest.mark.parametrize(
    "text",
    [
        "https://example.com/a@b",
        "gs://bucket/path",
        "user@example.com",
        "ssh://git@host/x",
        'psql "postgres://app:${DB_PASSWORD}@db/app"',  # a reference, not a literal
        "https://u:$(PROXY_PASSWORD)@proxy:3128",
    ],
)
def test_urls_without_a_password_are_not_secrets(text: str) -> None:
    assert find_secret(text) is None


@pytest.mark.parametrize(
    "value",
    [
        "sk-learn-pipeline-v2",
        "hf_transfer",
        "pypi-internal-mirror-east",
        "docker://vllm-openai:v0.27.1@sha256",
        "sha256-n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sF2s5V1o=",
        "sha512-" + base64.b64encode(bytes(range(64))).decode(),
    ],
)
@pytest.mark.parametrize("where", ["labels", "env"])
def test_identifiers_and_digests_do_not_block_a_deploy(value: str, where: str) -> None:
    props = _with_env(value) if where == "env" else service("l4")
    if where == "labels":
        props.setdefault("labels", {})["team"] = value
    assert violations(no_plaintext_secrets, SERVICE, props) == []
