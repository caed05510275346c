"""endpoint.secret_shapes.SHAPES is the one catalogue of credential shapes: each states its
whole-token pattern and its prefix form; detection (`find_secret`, the no-plaintext-secrets
policy) and redaction (`endpoint.redact`) both derive from it."""

from __future__ import annotations

import re

import pytest

from endpoint.redact import MASK, redact
from endpoint.secret_shapes import SHAPES, Shape, find_secret

#: label -> (a whole token of that format, the same token cut after its start and a few
#: characters). Formats as their issuers document them (GitHub's `ghp_` + 36, npm's `npm_` + 36,
#: AWS's 20-character key id, PyPI's `pypi-AgEIcHlwaS5vcmc...` macaroon, Slack's
#: `xapp-1-A...-digits-hex`, GitLab's `glpat-` + 20).
SAMPLES: dict[str, tuple[str, str]] = {
    "private key": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAplantedbody\n"
        "-----END RSA PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAK",
    ),
    "service-account key": (
        '"private_key_id": "0123456789abcdef0123456789abcdef01234567"',
        '"private_key_id": "01234567',
    ),
    "JSON Web Token": (
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlMTIzNDU2Nzg5",
        "eyJhbGciOiJSUzI1",
    ),
    "Hugging Face token": ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "hf_AbCdEfGh"),
    "Google API key": ("AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "AIzaSyA1b2"),
    "Google OAuth access token": ("ya29.a0AfH6SMBxyz0123456789abcdef", "ya29.a0AfH6"),
    "Google OAuth refresh token": ("1//0gAbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "1//0gAbCdE"),
    "Google OAuth client secret": ("GOCSPX-AbCdEfGhIjKlMnOpQrStUvWx", "GOCSPX-AbCdE"),
    "OpenAI-style API key": ("sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123", "sk-proj-AbCdEfGhI"),
    "GitHub token": ("ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "ghp_a1B2c3"),
    "GitLab token": ("glpat-AbCdEfGhIjKlMnOpQrSt", "glpat-AbCdE"),
    "Slack token": ("xoxb-1234567890-0987654321-AbCdEfGhIjKl", "xoxb-12345"),
    "Slack app token": (
        "xapp-1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef",
        "xapp-1-A012",
    ),
    "Slack webhook": (
        "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/AbCdEfGhIjKlMnOpQrStUvWx",
        "https://hooks.slack.com/services/T0123ABC",
    ),
    "AWS access key id": ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN"),
    "Stripe key": ("sk_live_AbCdEfGhIjKlMnOpQrStUvWx", "sk_live_AbCdE"),
    "npm token": ("npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "npm_AbCdEfGhIjKlMnOp"),
    "PyPI token": (
        "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMAACKlsz",
        "pypi-AgEIcHlwaS5vcmcC",
    ),
    "password in a URL": ("https://deploy:hunter2Secret@db", ""),
}


def test_every_shape_has_a_sample_and_states_both_forms() -> None:
    assert set(SAMPLES) == {s.label for s in SHAPES}
    # Only a password in a URL has no prefix form: cut before its `@` it reads as host:port.
    assert [s.label for s in SHAPES if s.prefix is None] == ["password in a URL"]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.label)
def test_a_whole_token_is_detected_and_redacted(shape: Shape) -> None:
    label = shape.label
    token, _ = SAMPLES[label]
    assert re.search(shape.pattern, token)
    assert find_secret(token) == label
    assert find_secret(f'config: {{"value": "{token}"}}') == label
    for text in (f"before {token}host after", f'{{"v": "{token}"}}', f"x={token}\n", token):
        out = redact(text, limit=None)
        assert MASK in out
        assert token not in out and token[-8:] not in out


@pytest.mark.parametrize("shape", [s for s in SHAPES if s.prefix], ids=lambda s: s.label)
def test_a_token_cut_short_is_redacted(shape: Shape) -> None:
    label = shape.label
    token, cut = SAMPLES[label]
    assert token.startswith(cut)
    if label != "private key":  # a private key's whole pattern also spans an unended block
        assert re.search(shape.pattern, cut) is None  # truly cut short
    assert shape.prefix is not None and re.search(shape.prefix, cut)
    start = cut.split("//")[-1] if label == "Slack webhook" else cut
    for text in (f"body: {cut}", f'{{"v": "{cut}', f"{cut}\n", f"{cut} (cut)", cut):
        out = redact(text, limit=None)
        assert MASK in out, out
        assert start[-4:] not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "vllm serve google/gemma-4-12B-it --port 8000 --max-num-seqs 8 --task generate",
        "http://127.0.0.1:8000/v1/models https://example.com:8443/health",
        "image vllm/vllm-openai@sha256:" + "a" * 64,
        "gemma-l4-vllm-service in us-central1; disk-usage 80 %; sk-8 task-queue",
        "npm_config_cache=/tmp/npm pypi-simple-index xapp-1 AIza ya29 eyJ 1//",
        "-----BEGIN-----",
        "hooks.slack.com/services/",
        "AKIA12 ghp_ glpat- xoxb- GOCSPX- sk_live_",
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert redact(text, limit=None) == text
    assert find_secret(text) is None
