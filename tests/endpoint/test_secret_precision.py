"""Detection and redaction agree, and neither fires on ordinary text: a credential shape is
what its issuer issues, a URL password needs a real authority, digests are not random keys,
and what `find_secret` finds in any form `redact` masks whole."""

from __future__ import annotations

import base64
import hashlib
import json
from urllib.parse import quote

import pytest

from endpoint.redact import MASK, redact
from endpoint.secret_shapes import find_secret, is_digest
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


@pytest.mark.parametrize("digest", DIGESTS[:5])
def test_sri_digests_are_digests_only_at_their_algorithms_length(digest: str) -> None:
    assert is_digest(digest)
    algorithm, body = digest.split("-", 1)
    assert not is_digest(f"{algorithm}-{body[:-8]}")  # a digest cut short is not exempt
    assert not is_digest(f"sha1-{body}")  # nor one whose length is another algorithm's


def test_a_random_key_behind_a_digest_name_is_still_found() -> None:
    key = "Q7vR2xK9mP4wL8nT3yB6cF1hJ5sD0gZa"
    assert find_secret(f"sha256-{key}") == "high-entropy string of credential length"
    assert key not in redact(f"integrity sha256-{key}", limit=None)


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


def _variants(token: str) -> dict[str, str]:
    return {
        "as written": token,
        "base64": base64.b64encode(token.encode()).decode(),
        "urlsafe base64": base64.urlsafe_b64encode(f"x {token}".encode()).decode(),
        "hex": token.encode().hex(),
        "separated hex": ":".join(f"{b:02x}" for b in token.encode()),
        "reversed": token[::-1],
        "percent-encoded": "".join(f"%{b:02x}" for b in token[:2].encode()) + token[2:],
        "percent-encoded whole": quote(token, safe=""),
        "JSON-escaped": token.replace("_", "\\u005f"),
        "C-escaped": "".join(f"\\x{b:02x}" for b in token.encode()),
        "HTML reference": token.replace("_", "&#95;"),
        "upper-case start": token[:3].upper() + token[3:],
        "underscore inside": token[:17] + "_" + token[17:],
    }


@pytest.mark.parametrize("form", list(_variants(HF)))
@pytest.mark.parametrize("token", [HF, "glpat-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn", OPENAI[0]])
def test_what_detection_finds_redaction_masks_whole(token: str, form: str) -> None:
    shown = _variants(token)[form]
    for text in (shown, f"GET /x?a={shown}&b=1", f'{{"v": "{shown}"}}', f"key {shown}\n"):
        assert find_secret(text) is not None, text
        out = redact(text, limit=None)
        assert MASK in out, out
        core = token[3:]  # no part of the token's random body is shown, in any form
        for shown_part in {shown, shown[-10:], core[-8:], core[:8], core[::-1][:8]}:
            assert shown_part not in out, (shown_part, out)


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


@pytest.mark.parametrize("form", list(_variants(HF)))
@pytest.mark.parametrize("label", [label for label in SAMPLES if label != "private key"])
def test_every_shape_found_in_any_form_is_masked_where_it_is_written(label: str, form: str) -> None:
    token = SAMPLES[label][0]
    shown = _variants(token)[form]
    for text in (shown, f"GET /x?a={shown}&b=1", f'{{"v": "{shown}"}}'):
        if find_secret(text) is None:
            continue  # a form that is no credential (an upper-cased JWT start)
        out = redact(text, limit=None)
        assert MASK in out, out
        if not (label == "JSON Web Token" and form in ("upper-case start", "underscore inside")):
            assert shown[-10:] not in out, out  # the found run goes whole


def test_a_percent_encoded_url_password_is_masked() -> None:
    text = "GET /x?next=%68%74tps://deploy:hunter2Secret@db.internal/ HTTP/1.1"
    assert find_secret(text) == "password in a URL (encoded)"
    assert "hunter2Secret" not in redact(text, limit=None)


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


@pytest.mark.parametrize("key", ["X9kQ-7Zp2-Lm4R-8vTn-Qw3E", "aB3dE5gH7jK9mN1pQ3sT5vX7"])
def test_grouped_and_plain_random_keys_are_still_found(key: str) -> None:
    assert find_secret(f"key={key}") == "high-entropy string of credential length"
