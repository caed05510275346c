"""no-plaintext-secrets judges values, not names: encoded, split and unnamed credentials."""

from __future__ import annotations

import base64
import gzip
import random
import string
from collections.abc import Callable
from typing import Any

import pytest

from endpoint.redact import MASK, redact
from endpoint.secret_shapes import SHAPES, find_secret, find_split_secret
from policies.no_plaintext_secrets import no_plaintext_secrets
from tests.policies._fixtures import (
    ALL_STACKS,
    JOB,
    SERVICE,
    TPU_VM,
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
_ALNUM = string.ascii_letters + string.digits


def _random_keys(count: int, length: int) -> list[str]:
    """Random keys of credential length from a fixed seed (not real credentials)."""
    rng = random.Random(length)
    return ["".join(rng.choice(_ALNUM) for _ in range(length)) for _ in range(count)]


#: The first 40-character random key the entropy rule flags (most are; see the next test).
RANDOM_KEY = next(k for k in _random_keys(10, 40) if find_secret(k))


def _with_env(value: str, name: str = "MODEL_FLAVOUR") -> dict[str, Any]:
    props = service("l4")
    container(props)["envs"].append({"name": name, "value": value})
    return props


@pytest.mark.parametrize("label", sorted(SAMPLES))
def test_every_shape_is_found_under_any_name(label: str) -> None:
    messages = violations(no_plaintext_secrets, SERVICE, _with_env(SAMPLES[label]))
    assert any(f"contains a literal {label}" in m for m in messages), messages


@pytest.mark.parametrize(("length", "share"), [(24, 0.75), (40, 0.9), (64, 0.95)])
def test_most_random_keys_of_credential_length_are_found(length: int, share: float) -> None:
    keys = _random_keys(200, length)
    assert sum(1 for k in keys if find_secret(k)) >= share * len(keys)


def test_pgp_block_and_random_key() -> None:
    assert find_secret(PGP) == "private key"
    (message,) = violations(no_plaintext_secrets, SERVICE, _with_env(RANDOM_KEY))
    assert "high-entropy string of credential length" in message


def _wrapped(text: str, width: int = 16) -> str:
    """`text` in base64 wrapped over lines, as `base64 -w 16` prints it."""
    encoded = base64.b64encode(text.encode()).decode()
    return "\n".join(encoded[i : i + width] for i in range(0, len(encoded), width))


ENCODINGS: dict[str, Callable[[str], str]] = {
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "url-safe base64 without padding": lambda s: (
        base64.urlsafe_b64encode(s.encode()).decode().rstrip("=")
    ),
    "hex": lambda s: s.encode().hex(),
    "percent-encoding": lambda s: "".join(f"%{b:02X}" for b in s.encode()),
    "gzip+base64": lambda s: base64.b64encode(gzip.compress(s.encode())).decode(),
    "base64 of base64": lambda s: base64.b64encode(base64.b64encode(s.encode())).decode(),
    "base64 of a line": lambda s: base64.b64encode(f"HF_TOKEN={s}\n".encode()).decode(),
    "base32": lambda s: base64.b32encode(s.encode()).decode(),
    "base64 wrapped over lines": lambda s: _wrapped(f"# config\ntoken: {s}\n"),
    "printf hex escapes": lambda s: "printf '" + "".join(f"\\x{b:02x}" for b in s.encode()) + "'",
    "printf octal escapes": lambda s: "printf '" + "".join(f"\\{b:03o}" for b in s.encode()) + "'",
    "hex with colons": lambda s: ":".join(f"{b:02x}" for b in s.encode()),
    "hex with spaces": lambda s: " ".join(f"{b:02X}" for b in s.encode()),
    "hex with 0x prefixes": lambda s: ", ".join(f"0x{b:02x}" for b in s.encode()),
    "HTML entities": lambda s: "".join(f"&#{b};" for b in s.encode()),
}


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_encoded_tokens_are_decoded(encoding: str) -> None:
    encoded = ENCODINGS[encoding](HF)
    assert HF not in encoded
    messages = violations(no_plaintext_secrets, SERVICE, _with_env(encoded, "BLOB"))
    assert any("Hugging Face token (encoded)" in m for m in messages), messages


def test_encoded_token_in_a_tpu_startup_script() -> None:
    encoded = base64.b64encode(HF.encode()).decode()
    script = f"#!/bin/bash\nexport X=$(echo {encoded} | base64 -d)\nvllm serve m\n"
    props = {"acceleratorType": "v6e-1", "metadata": {"startup-script": script}}
    messages = violations(no_plaintext_secrets, TPU_VM, props, name="tpu")
    assert any(
        "startup-script contains a literal Hugging Face token (encoded)" in m for m in messages
    )


@pytest.mark.parametrize("cut", [3, 10, 20])
def test_token_split_across_two_env_values(cut: int) -> None:
    props = _with_env(HF[:cut], "PART_A")
    container(props)["envs"].append({"name": "PART_B", "value": HF[cut:]})
    messages = violations(no_plaintext_secrets, SERVICE, props)
    assert any("two literal values join into a Hugging Face token" in m for m in messages)
    assert all(HF[cut:] not in m for m in messages)  # the message does not reveal the halves


def test_token_split_across_script_assignments_and_reversed() -> None:
    token = SAMPLES["GitHub token"]
    script = f'#!/bin/bash\nB="{token[12:]}"\nexport A={token[:12]}\nexport T="$A$B"\n'
    props = {"acceleratorType": "v6e-1", "metadata": {"startup-script": script}}
    messages = violations(no_plaintext_secrets, TPU_VM, props, name="tpu")
    assert any("A, B join at run time into a GitHub token" in m for m in messages), messages


def test_split_base64_is_joined_then_decoded() -> None:
    encoded = base64.b64encode(HF.encode()).decode()
    found = find_split_secret([f"A='{encoded[:20]}'; B='{encoded[20:]}'", "unrelated text"])
    assert found is not None and found[0] == "Hugging Face token (encoded)"


def test_split_across_container_args() -> None:
    job = rendered("l4").of_type(JOB)[0].inputs
    args = job["template"]["template"]["containers"][0].setdefault("args", [])
    args += [SAMPLES["Google API key"][:15], SAMPLES["Google API key"][15:]]
    messages = violations(no_plaintext_secrets, JOB, job)
    assert any("join into a Google API key" in m for m in messages)


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
        base64.b64encode(b"#!/bin/bash\necho hello world\n").decode(),
    ]
    assert [b for b in benign if find_secret(b)] == []
    assert find_split_secret(benign) is None


def test_shipped_stacks_stay_clean() -> None:
    for stack in ALL_STACKS:
        for resource in rendered(stack).resources:
            assert violations(no_plaintext_secrets, resource.type, resource.inputs) == []


def test_ignore_patterns_exempt_a_value() -> None:
    props = _with_env(RANDOM_KEY)
    assert violations(no_plaintext_secrets, SERVICE, props, {"ignorePatterns": [RANDOM_KEY]}) == []


@pytest.mark.parametrize("label", sorted(SAMPLES))
def test_redaction_masks_every_shape_of_the_same_catalogue(label: str) -> None:
    shown = redact(f"upstream said: {SAMPLES[label]} (end)")
    assert MASK in shown
    secret = SAMPLES[label]
    assert secret not in shown and secret[-12:] not in shown
    assert any(label == s.label for s in SHAPES)


def test_token_joined_from_three_script_variables() -> None:
    script = (
        f"#!/bin/bash\nP1={HF[:8]}\nP2={HF[8:20]}\nP3={HF[20:]}\n"
        'export HF_TOKEN="${P1}${P2}$P3"\nvllm serve m\n'
    )
    props = {"acceleratorType": "v6e-1", "metadata": {"startup-script": script}}
    messages = violations(no_plaintext_secrets, TPU_VM, props, name="tpu")
    assert any("P1, P2, P3 join at run time into a Hugging Face token" in m for m in messages)


def test_literal_prefix_and_one_variable() -> None:
    script = f'#!/bin/bash\nREST={HF[3:]}\nexport T="hf_$REST"\n'
    props = {"acceleratorType": "v6e-1", "metadata": {"startup-script": script}}
    messages = violations(no_plaintext_secrets, TPU_VM, props, name="tpu")
    assert any("REST join at run time into a Hugging Face token" in m for m in messages)


def test_cloud_run_env_references_are_expanded() -> None:
    props = _with_env(HF[:5], "A")
    envs = container(props)["envs"]
    envs.append({"name": "B", "value": HF[5:15]})
    envs.append({"name": "C", "value": HF[15:]})
    envs.append({"name": "JOINED", "value": "$(A)$(B)$(C)"})
    messages = violations(no_plaintext_secrets, SERVICE, props)
    assert any("Hugging Face token" in m and "join" in m for m in messages)


def test_a_label_key_is_read() -> None:
    props = service("l4")
    props["annotations"] = {SAMPLES["GitHub token"]: "x"}
    messages = violations(no_plaintext_secrets, SERVICE, props)
    assert any("(key) contains a literal GitHub token" in m for m in messages)


def test_decoys_cannot_push_a_split_token_out() -> None:
    props = _with_env(HF[:3], "PART_A")
    envs = container(props)["envs"]
    envs += [{"name": f"D{i}", "value": f"decoy-{i:04d}-Zq9{i}"} for i in range(300)]
    envs.append({"name": "PART_B", "value": HF[3:]})
    messages = violations(no_plaintext_secrets, SERVICE, props)
    assert any("two literal values join into a Hugging Face token" in m for m in messages)


def test_more_fragments_than_can_be_paired_is_reported_not_half_checked() -> None:
    props = service("l4")
    envs = container(props)["envs"]
    envs += [{"name": f"D{i}", "value": f"v{i}"} for i in range(1100)]
    messages = violations(no_plaintext_secrets, SERVICE, props)
    assert any("could not be ruled out" in m and "at most 1024" in m for m in messages)


def test_token_split_across_three_env_values_joined_by_the_program() -> None:
    props = _with_env(HF[:9], "PART_A")
    container(props)["envs"] += [
        {"name": "PART_B", "value": HF[9:21]},
        {"name": "PART_C", "value": HF[21:]},
    ]
    messages = violations(no_plaintext_secrets, SERVICE, props)
    assert any("join into a Hugging Face token" in m for m in messages), messages
    assert all(HF[21:] not in m and HF[9:21] not in m for m in messages)


@pytest.mark.parametrize("arg", [f"--model-suffix={HF[14:]}", f"--x={HF[14:]}"])
def test_token_split_across_an_env_value_and_an_option_value(arg: str) -> None:
    props = _with_env(HF[:14], "PART_A")
    container(props).setdefault("args", []).append(arg)
    messages = violations(no_plaintext_secrets, SERVICE, props)
    assert any("join into a Hugging Face token" in m for m in messages), messages


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


@pytest.mark.parametrize("label", ["Hugging Face token", "GitHub token", "Google API key"])
def test_a_reversed_token_is_found_by_its_shape(label: str) -> None:
    assert find_secret(SAMPLES[label][::-1]) == f"{label} (reversed)"


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
