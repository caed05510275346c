"""Detection and redaction agree, and neither fires on ordinary text: a credential shape is
what its issuer issues, a URL password needs a real authority, digests are not keys, and
what `find_secret` finds `redact` masks whole."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from endpoint.redact import MASK, redact
from endpoint.secret_shapes import find_secret
from tests.endpoint.test_secret_catalogue import SAMPLES

HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"  # made up, in Hugging Face's format
#: OpenAI's formats: `sk-` + 20 + `T3BlbkFJ` + 20 (user keys), `sk-proj-`/`sk-svcacct-`/
#: `sk-admin-` + a long `[A-Za-z0-9_-]` body (made up, none is a real key).
OPENAI = [
    "sk-" + "a1B2c3D4e5F6g7H8i9J0" + "T3BlbkFJ" + "k1L2m3N4o5P6q7R8s9T0",
    "sk-proj-" + "Ab1_Cd2-Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3" + "T3BlbkFJ" + "aB1cD2eF3gH4iJ5kL6mN7",
    "sk-svcacct-" + "Zy9Xw8_Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba7",
    "sk-admin-" + "Q1w2E3r4T5y6U7i8O9p0-A1s2D3f4G5h6J7k8L9",
]

ORDINARY_VALUES = [
    "sk-learn-pipeline-v2",
    "team=sk-learn-pipeline-v2",
    "sk-learn",
    "sk-proj-roadmap-notes-for-q3-planning",
    "docker://vllm-openai:v0.27.1@sha256",
    "docker://vllm-openai:v0.27.1@sha256:" + "0f" * 32,
    "oci://registry:v1.2@sha512:" + "ab" * 64,
    "https://mirror.example/simple@latest",
    "pypi-internal-mirror-east",
    "https://pypi-internal-mirror-east.example/simple",
    "pip install hf_transfer",
    "{'hf_overrides': {}, 'hf_config_path': None}",
    "HF_HUB_ENABLE_HF_TRANSFER=1 hf_hub_download api_org_settings_page",
    "data: " + base64.b64encode(json.dumps({"log_level": "info", "workers": 4}).encode()).decode(),
    # base64 of JSON with dots in it is not a JWT unless its first part is a header with `alg`
    ".".join(
        base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")
        for part in ({"typ": "log"}, {"sub": "1234567890"}, "signature12345")
    ),
]


def _sri(algorithm: str, urlsafe: bool = False) -> str:
    digest = hashlib.new(algorithm, b"the model's config.json").digest()
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return f"{algorithm}-{encode(digest).decode()}"


DIGESTS = [
    "sha256-n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sF2s5V1o=",
    _sri("sha256"),
    _sri("sha384"),
    _sri("sha512"),
    _sri("sha512", urlsafe=True),
    "sha256:" + hashlib.sha256(b"layer").hexdigest(),
    "vllm/vllm-openai@sha256:" + hashlib.sha256(b"image").hexdigest(),
]


@pytest.mark.parametrize("text", ORDINARY_VALUES + DIGESTS)
def test_ordinary_values_are_neither_found_nor_masked(text: str) -> None:
    assert find_secret(text) is None
    assert redact(text, limit=None) == text


@pytest.mark.parametrize("key", OPENAI)
def test_openai_keys_in_their_issued_formats_are_found_and_masked(key: str) -> None:
    assert find_secret(f"team={key}") == "OpenAI-style API key"
    out = redact(f"key {key} end", limit=None)
    assert out == f"key {MASK} end"


@pytest.mark.parametrize(
    "url",
    [
        "postgres://admin:CorrectHorse42@db.internal:5432/app",
        "https://u:p@proxy:3128/",
        "redis://:x@10.0.0.3",
        "amqp://guest:guest@[::1]:5672",
        "docker://vllm-openai:v0.27.1@registry.example.com/x",
    ],
)
def test_a_password_with_a_real_host_is_found(url: str) -> None:
    assert find_secret(url) == "password in a URL"
    password = url.split("@")[0].split(":")[-1]
    assert MASK in redact(url) and f":{password}@" not in redact(url)


@pytest.mark.parametrize(
    "cut", ["hf_AbCdEfGh", "hf_Ab1Cd2Ef", "sk-proj-AbCdEfGhI", "sk-a1B2c3D4e5", "pypi-AgEIcHlwaS5"]
)
def test_a_token_cut_short_is_masked(cut: str) -> None:
    assert redact(f"log: {cut}", limit=None) == f"log: {MASK}"


@pytest.mark.parametrize(
    ("text", "literal"),
    [
        ('-H "Authorization: Bearer ${token}"', '-H "Authorization: Bearer abc123def456"'),
        ("Authorization: $(ACCESS_TOKEN)", "Authorization: abc123def456"),
        ("x-goog-api-key: ${API_KEY}", "x-goog-api-key: abc123def456"),
    ],
)
def test_a_header_naming_a_reference_is_kept(text: str, literal: str) -> None:
    assert redact(text, limit=None) == text
    out = redact(literal, limit=None)
    assert MASK in out and "abc123def456" not in out


def test_by_name_false_judges_values_by_what_they_are() -> None:
    text = '{"key": "nvidia.com/gpu", "secret": "hf-token", "labels": ["team=' + HF + '"]}'
    assert redact(text, limit=None, by_name=False) == text.replace(HF, MASK)
    assert "nvidia.com/gpu" not in redact(text, limit=None)  # by name: log text


GLUED = [label for label in SAMPLES if label not in ("private key", "service-account key")]


@pytest.mark.parametrize("label", GLUED)
@pytest.mark.parametrize("glue", ["team_", "cfg_", "a.b_"])
def test_a_token_glued_to_a_word_is_found_and_masked(label: str, glue: str) -> None:
    # A token starts wherever the character before it cannot be part of it (`team_AKIA...`,
    # `cfg_postgres://u:pw@db`), not only at a word boundary.
    token, _ = SAMPLES[label]
    text = f"value={glue}{token}"
    assert find_secret(text) is not None, (label, glue)
    assert token not in redact(text), (label, glue)


def test_an_aws_key_id_followed_by_an_underscore_is_found() -> None:
    assert find_secret("AKIA" + "0123456789ABCDEF" + "_suffix") is not None


@pytest.mark.parametrize(
    "name",
    ["gemma-4-12B-it-W4A16-g128-v2", "Gemma4-12B-QAT-w4A16-v2", "Gemma4-12B-it-L4-Prod-v3",
     "acme/Gemma4-12B-FT-v2-Q4K"],
)  # fmt: skip
def test_a_served_model_name_of_short_tags_is_not_a_credential(name: str) -> None:
    assert find_secret(f"--served-model-name={name}") is None
    assert redact(f"model {name}") == f"model {name}"
