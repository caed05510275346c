"""Security policies: public invokers, plaintext secrets, serving ports open to the world."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.no_plaintext_secrets import no_plaintext_secrets
from policies.no_public_invoker import no_public_invoker
from policies.serving_port_not_public import serving_port_not_public
from tests.policies._fixtures import (
    ALL_STACKS,
    FIREWALL,
    IAM_BINDING,
    IAM_MEMBER,
    IAM_POLICY,
    JOB,
    SERVICE,
    STACKS,
    TPU_VM,
    container,
    edit_args,
    rendered,
    service,
    violations,
)

# A made-up token in Hugging Face's format (hf_ + 34 letters); not a real credential.
FAKE_HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
FAKE_PRIVATE_KEY = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\n"


def invoker(member: str) -> dict[str, Any]:
    return {"location": "us-east4", "name": "svc", "role": "roles/run.invoker", "member": member}


# --- no-public-invoker -------------------------------------------------------------------


def test_invoker_compliant() -> None:
    assert violations(no_public_invoker, IAM_MEMBER, invoker("group:ml@example.com")) == []
    for stack in STACKS:
        assert violations(no_public_invoker, SERVICE, service(stack)) == []


@pytest.mark.parametrize("member", ["allUsers", "allAuthenticatedUsers"])
def test_invoker_public_member(member: str) -> None:
    (message,) = violations(no_public_invoker, IAM_MEMBER, invoker(member))
    assert f"grants roles/run.invoker to {member!r}" in message
    assert "'invokers'" in message
    assert "'allowPublic' to true" in message


def test_invoker_public_binding_and_policy() -> None:
    binding = {"role": "roles/run.invoker", "members": ["user:a@example.com", "allUsers"]}
    (message,) = violations(no_public_invoker, IAM_BINDING, binding)
    assert "to 'allUsers'" in message
    policy_data = json.dumps(
        {"bindings": [{"role": "roles/run.invoker", "members": ["allAuthenticatedUsers"]}]}
    )
    (message,) = violations(no_public_invoker, IAM_POLICY, {"policyData": policy_data})
    assert "'allAuthenticatedUsers'" in message


def test_invoker_iam_disabled_service() -> None:
    props = service("l4")
    props["invokerIamDisabled"] = True
    (message,) = violations(no_public_invoker, SERVICE, props)
    assert "invokerIamDisabled is true" in message
    assert "invoker_iam_disabled=False" in message


def test_invoker_public_allowed_by_config() -> None:
    assert (
        violations(no_public_invoker, IAM_MEMBER, invoker("allUsers"), {"allowPublic": True}) == []
    )


def test_invoker_from_the_rendered_public_stack() -> None:
    from tests.pulumi_harness import render, stack_config

    public = render({**stack_config("l4"), "public": True}, "l4")
    members = public.of_type(IAM_MEMBER)
    assert [len(violations(no_public_invoker, IAM_MEMBER, m.inputs)) for m in members] == [1]


# --- no-plaintext-secrets ----------------------------------------------------------------


def test_secrets_compliant() -> None:
    for stack in ALL_STACKS:
        r = rendered(stack)
        for resource in r.resources:
            assert violations(no_plaintext_secrets, resource.type, resource.inputs) == []


def test_secrets_hf_token_in_env() -> None:
    props = service("l4")
    container(props)["envs"].append({"name": "HUGGING_FACE_HUB_TOKEN", "value": FAKE_HF_TOKEN})
    messages = violations(no_plaintext_secrets, SERVICE, props)
    assert any("template.containers[0].envs[" in m and "Hugging Face token" in m for m in messages)
    assert any("sets HUGGING_FACE_HUB_TOKEN to a literal value" in m for m in messages)
    assert all("Secret Manager" in m for m in messages)


def test_secrets_token_in_tpu_startup_script_metadata() -> None:
    """Reference defect 3: the HF token pasted into TPU startup-script metadata."""
    script = (
        "#!/bin/bash\n"
        f"export HF_TOKEN={FAKE_HF_TOKEN}\n"
        "docker run --privileged --net=host -e HF_TOKEN vllm/vllm-tpu:v0.27.0 \\\n"
        "  vllm serve google/gemma-4-12B-it --max-model-len 4096\n"
    )
    props = {"acceleratorType": "v6e-1", "metadata": {"startup-script": script}}
    (message,) = violations(no_plaintext_secrets, TPU_VM, props, name="tpu")
    assert message.startswith("tpu: metadata.startup-script contains a literal Hugging Face token")
    assert "rotate" in message


def test_secrets_private_key_and_api_key_argument() -> None:
    props = service("l4")
    props["labels"]["note"] = "x"
    props["annotations"] = {"key": FAKE_PRIVATE_KEY}
    messages = violations(no_plaintext_secrets, SERVICE, props)
    assert ["annotations.key contains a literal private key" in m for m in messages] == [True]
    props = edit_args(service("l4"), set_={"api-key": "not-so-secret"})
    (message,) = violations(no_plaintext_secrets, SERVICE, props)
    assert "passes --api-key as a literal argument" in message
    assert "VLLM_API_KEY" in message


def test_secrets_secret_manager_versions_are_exempt() -> None:
    version = "gcp:secretmanager/secretVersion:SecretVersion"
    props = {"secret": "hf-token", "secretData": FAKE_HF_TOKEN}
    assert violations(no_plaintext_secrets, version, props) == []
    (message,) = violations(no_plaintext_secrets, version, props, {"exemptResourceTypes": []})
    assert "secretData contains a literal Hugging Face token" in message


def test_secrets_config_patterns_and_allowed_env() -> None:
    job = rendered("l4").of_type(JOB)[0].inputs
    envs = job["template"]["template"]["containers"][0]["envs"]
    envs.append({"name": "DB_PASSWORD", "value": "corp-1234"})
    (message,) = violations(no_plaintext_secrets, JOB, job)
    assert "sets DB_PASSWORD to a literal value" in message
    assert violations(no_plaintext_secrets, JOB, job, {"allowedEnvNames": ["DB_PASSWORD"]}) == []
    custom = {"allowedEnvNames": ["DB_PASSWORD"], "extraPatterns": [r"corp-\d{4}"]}
    (message,) = violations(no_plaintext_secrets, JOB, job, custom)
    assert "contains a literal secret" in message


# --- serving-port-not-public -------------------------------------------------------------


def firewall(**overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "network": "default",
        "direction": "INGRESS",
        "sourceRanges": ["0.0.0.0/0"],
        "allows": [{"protocol": "tcp", "ports": ["8000"]}],
        "targetTags": ["vllm-tpu"],
    }
    props.update(overrides)
    return props


def test_firewall_serving_port_open_to_the_world() -> None:
    """Reference defect 4: plain HTTP on an external IP with no authentication."""
    (message,) = violations(serving_port_not_public, FIREWALL, firewall(), name="tpu-fw")
    assert "tpu-fw: allows TCP port(s) 8000 from 0.0.0.0/0" in message
    assert "Restrict sourceRanges" in message


def test_firewall_all_ports_and_ranges() -> None:
    (message,) = violations(
        serving_port_not_public,
        FIREWALL,
        firewall(allows=[{"protocol": "all"}], sourceRanges=["::/0"]),
    )
    assert "port(s) 8000, 8080 from ::/0" in message
    ranged = firewall(allows=[{"protocol": "tcp", "ports": ["7000-9000"]}])
    assert len(violations(serving_port_not_public, FIREWALL, ranged)) == 1


def test_firewall_compliant() -> None:
    for props in (
        firewall(sourceRanges=["35.191.0.0/16", "130.211.0.0/22"]),
        firewall(allows=[{"protocol": "tcp", "ports": ["22"]}]),
        firewall(direction="EGRESS"),
        firewall(disabled=True),
    ):
        assert violations(serving_port_not_public, FIREWALL, props) == []
    assert violations(serving_port_not_public, FIREWALL, firewall(), {"servingPorts": [9000]}) == []
