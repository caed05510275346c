"""The one redaction step: every credential form is masked, ordinary text is left alone."""

from __future__ import annotations

import pytest

from endpoint.redact import MASK, redact, register_secret


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
        ("{'authorization': 'Bearer xyz123'}", "xyz123"),
        ('{"headers": {"Authorization": "Basic dXNlcjpwYXNzd29yZA=="}}', "dXNlcjpwYXNzd29yZA"),
        ("proxy-authorization=Token k1k2k3k4", "k1k2k3k4"),
        ("x-api-key: 0123456789abcdef", "0123456789abcdef"),
        ("GET /metrics?key=s3cr3tvalue&x=1", "s3cr3tvalue"),
        ("https://h/v1?api_key=s3cr3tvalue", "s3cr3tvalue"),
        ("https://h/v1?access_token=ya29.a0AfH6SMBx", "a0AfH6SMBx"),
        ("https://h/?token=tok3nvalue#x", "tok3nvalue"),
        ('{"api_key": "zz-top-secret", "n": 1}', "zz-top-secret"),
        ("http://user:pa55word@host:8000/v1", "pa55word"),
        ("https://only-user@host/", "only-user"),
        ("id token eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJ4In0.c2lnbmF0dXJl here", "eyJhdWQiOiJ4In0"),
        ("key AIzaSyA1234567890123456789012345678901 here", "AIzaSyA12345678901234"),
        ("sk-abcdefghijklmnopqrstuvwx", "abcdefghijklmnop"),
    ],
)
def test_every_credential_form_is_masked(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert MASK in out
    assert redact(out) == out  # idempotent


def test_a_registered_secret_is_masked_wherever_it_is_reflected() -> None:
    register_secret("reflected-key-0451")
    assert redact("echo: reflected-key-0451!") == f"echo: {MASK}!"
    assert "reflected-key-0451" not in redact('{"detail": "bad key reflected-key-0451"}')


@pytest.mark.parametrize(
    "text",
    [
        "could not get an ID token: Reauthentication is needed",
        "the basic setup works",
        '{"usage": {"completion_tokens": 16, "max_tokens": 32}}',
        "The model `google/gemma-4-12B-it` does not exist.",
        "http://127.0.0.1:8000/health",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_output_is_bounded_and_printable() -> None:
    out = redact("A" * 1_000_000 + " Bearer tail", limit=300)
    assert len(out) <= 300
    assert redact("\x1b[2J\x07bell", limit=None) == "?[2J?bell"


@pytest.mark.parametrize(
    "shown",
    [
        "p%40ss%20w0rd%2F%2Bx%22y",  # a URL path or query (percent-encoded)
        "p%40ss+w0rd%2F%2Bx%22y",  # a form body (quote_plus)
        'p@ss w0rd/+x\\"y',  # inside a JSON string (escaped quote)
        "cEBzcyB3MHJkLytYInk=",  # base64 of a different value: must stay
    ],
)
def test_a_registered_secret_is_masked_in_its_encoded_forms(shown: str) -> None:
    secret = 'p@ss w0rd/+x"y'
    register_secret(secret)
    out = redact(f"upstream said: {shown} (end)")
    if shown.startswith("cEBz"):
        assert shown in out
    else:
        assert MASK in out and "w0rd" not in out, out


def test_a_registered_secret_is_masked_as_go_json_escapes_it() -> None:
    register_secret("a&b<c>d-0453-long")
    out = redact('{"error": "bad key a\\u0026b\\u003cc\\u003ed-0453-long"}')
    assert "0453" not in out and MASK in out, out


def test_a_registered_secret_is_masked_in_base64() -> None:
    import base64

    secret = "Zq81-reflected-0452"
    register_secret(secret)
    for encoded in (
        base64.b64encode(secret.encode()).decode(),
        base64.urlsafe_b64encode(secret.encode()).decode().rstrip("="),
        base64.b64encode(f"user:{secret}".encode()).decode(),  # HTTP Basic credentials
    ):
        out = redact(f"echo {encoded} done")
        assert encoded not in out, out
