"""endpoint.redact: credential shapes, secret command-line options, and secrets split by the
bounded scan never shown in part."""

from __future__ import annotations

import pytest

from endpoint.redact import MASK, redact, register_secret

SHAPED = {
    "github classic": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "github oauth": "gho_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "github fine-grained": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "gitlab": "glpat-AbCdEfGhIjKlMnOpQrSt",
    "slack bot": "xoxb-1234567890-0987654321-AbCdEfGhIjKl",
    "slack user": "xoxp-1234567890-0987654321-AbCdEfGhIjKl",
    "hugging face": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "aws key id": "AKIAIOSFODNN7EXAMPLE",
    "aws session key id": "ASIAIOSFODNN7EXAMPLE",
    "google api key": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "oauth access token": "ya29.a0AfH6SMBxyz0123456789abcdef",
    "jwt": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlMTIzNDU2Nzg5",
    "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAplantedbody\n"
    "-----END RSA PRIVATE KEY-----",
    "pem unterminated": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFplanted",
    "pgp": "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGVplantedPgp\n=Ab12\n"
    "-----END PGP PRIVATE KEY BLOCK-----",
    "pgp message": "-----BEGIN PGP MESSAGE-----\nhQEMAplantedMessage\n-----END PGP MESSAGE-----",
}


@pytest.mark.parametrize("name", sorted(SHAPED))
def test_credential_shapes_are_masked_in_context(name: str) -> None:
    secret = SHAPED[name]
    for text in (f"before {secret} after", f'{{"v": "{secret}"}}', f"x={secret}\n"):
        out = redact(text, limit=None)
        assert secret not in out and MASK in out
        assert secret[-8:] not in out


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("vllm serve m --api-key s3cretValue1 --port 8", "--port 8"),
        ("vllm serve m --api-key=s3cretValue1 --port 8", "--port 8"),
        ("vllm serve m --api_key 's3cret Value1' --port 8", "--port 8"),
        ('run --hf-token="hf_s3cretValue1" -x', "-x"),
        ("tool --password s3cretValue1 --token=s3cretValue1", "tool"),
        ("pulumi up --passphrase s3cretValue1", "pulumi up"),
        ('curl -H "Authorization: Bearer s3cretValue1" http://h/', "curl"),
        ("curl -H 'X-Api-Key: s3cretValue1' http://h/", "curl"),
        ("vllm serve m --vllm-api-key s3cretValue1 --port 8", "--port 8"),
        ("gh --github-token=s3cretValue1 -x", "-x"),
        ("env VLLM_API_KEY=s3cretValue1 vllm serve m", "vllm serve m"),
        ("HF_TOKEN='s3cret Value1' python x.py", "python x.py"),
        ("export PULUMI_CONFIG_PASSPHRASE=s3cretValue1; pulumi up", "pulumi up"),
    ],
)
def test_secret_options_in_command_lines(line: str, kept: str) -> None:
    out = redact(line, limit=None)
    assert "s3cret" not in out and kept in out


def test_ordinary_options_are_kept() -> None:
    line = (
        "vllm serve m --max-num-batched-tokens 8192 --tokenizer-mode auto --port 8000 "
        "--token-budget 5 MAX_TOKENS=128 --max-tokens 64"
    )
    assert redact(line, limit=None) == line


@pytest.mark.parametrize("limit", [50, 100, 300])
def test_a_secret_split_by_the_bounded_scan_never_shows_in_part(limit: int) -> None:
    passphrase = "pass phrase with spaces 0123456789 end"
    register_secret(passphrase)
    scan = limit * 4
    # A long secret before the split shrinks to a mask, pulling the split secret forward.
    pem = "-----BEGIN PRIVATE KEY-----\n" + "A" * (scan // 2) + "\n-----END PRIVATE KEY-----"
    for secret in (passphrase, SHAPED["github classic"], SHAPED["hugging face"]):
        for offset in (5, len(secret) // 2, len(secret) - 3):
            start = scan - offset  # the scan ends `offset` characters into the secret
            text = pem + "." * (start - len(pem)) + secret + " tail"
            assert text[start : start + 3] == secret[:3]
            out = redact(text, limit=limit)
            for i in range(len(secret) - 5):
                assert secret[i : i + 6] not in out, (secret, offset, out)
