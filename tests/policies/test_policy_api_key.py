"""vllm-api-key-from-secret on every platform, and credentials found by where they go
(no-plaintext-secrets' `policies._sinks`), on near variants of the shipped stacks."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from policies.no_plaintext_secrets import no_plaintext_secrets
from policies.vllm_api_key_from_secret import vllm_api_key_from_secret
from policies.vllm_server_readable import vllm_server_readable
from tests.contracts import gke_fixtures as g
from tests.policies._fixtures import SERVICE, TPU_DYNAMIC, container, service, violations
from tests.pulumi_harness import render, stack_config

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
POD = "kubernetes:core/v1:Pod"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
#: What `openssl rand -hex 32` prints: the key format the docs suggest.
HEX_KEY = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


def vllm() -> dict[str, Any]:
    return g.vllm_deployment("l4")


def env_of(d: dict[str, Any]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = d["spec"]["template"]["spec"]["containers"][0]["env"]
    return env


def with_key(d: dict[str, Any], entry: dict[str, Any] | None) -> dict[str, Any]:
    """The vLLM container's VLLM_API_KEY replaced by `entry` (None: removed)."""
    env = [e for e in env_of(d) if e["name"] != "VLLM_API_KEY"]
    if entry is not None:
        env.append({"name": "VLLM_API_KEY", **entry})
    d["spec"]["template"]["spec"]["containers"][0]["env"] = env
    return d


def key_messages(type_: str, props: dict[str, Any]) -> list[str]:
    return violations(vllm_api_key_from_secret, type_, props)


def test_the_shipped_stacks_pass() -> None:
    for stack in ("gke-l4", "gke-tpu-v6e", "l4", "rtx6000", "tpu-v6e1"):
        for d in render(stack_config(stack), stack).resources:
            assert key_messages(d.type, d.inputs) == [], (stack, d.name)
    assert key_messages(DEPLOYMENT, vllm()) == []


SECRET_REF = {"secretKeyRef": {"name": "vllm-api-key", "key": "api-key"}}


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        (None, "without VLLM_API_KEY"),
        ({"value": ""}, "an empty value"),
        ({"value": HEX_KEY}, "a literal value"),
        ({"value": "$(OTHER_KEY)"}, "a literal value"),
        ({"valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}}, "a ConfigMap"),
        (
            {"valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['api-key']"}}},
            "a label or annotation",
        ),
        ({"valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}, "resource field"),
        ({"valueFrom": {"fileKeyRef": {"path": "k", "key": "k", "volumeName": "v"}}}, "a file"),
        ({"valueFrom": {}}, "no secretKeyRef"),
        ({"valueFrom": {"secretKeyRef": {"name": "vllm-api-key"}}}, "no literal Secret"),
        ({"valueFrom": {"secretKeyRef": {"key": "api-key"}}}, "no literal Secret"),
        (
            {"valueFrom": {"secretKeyRef": {**SECRET_REF["secretKeyRef"], "optional": True}}},
            "optional",
        ),
        (
            {"valueFrom": {"secretKeyRef": {**SECRET_REF["secretKeyRef"], "optional": "true"}}},
            "optional",
        ),
        (
            {"valueFrom": {"secretKeyRef": {**SECRET_REF["secretKeyRef"], "optional": "True"}}},
            "optional",
        ),
        (
            {"valueFrom": {"secretKeyRef": {**SECRET_REF["secretKeyRef"], "optional": 1}}},
            "optional",
        ),
        (
            {"valueFrom": {"secretKeyRef": {**SECRET_REF["secretKeyRef"], "optional": "yes"}}},
            "optional",
        ),
    ],
)
def test_a_key_not_from_a_required_secret_is_refused(
    entry: dict[str, Any] | None, words: str
) -> None:
    messages = key_messages(DEPLOYMENT, with_key(vllm(), entry))
    assert any(words in m for m in messages), messages


@pytest.mark.parametrize("optional", [False, "false", "False", None])
def test_a_required_secret_passes(optional: Any) -> None:
    ref = dict(SECRET_REF["secretKeyRef"])
    if optional is not None:
        ref["optional"] = optional
    assert key_messages(DEPLOYMENT, with_key(vllm(), {"valueFrom": {"secretKeyRef": ref}})) == []


def test_a_second_entry_that_overrides_the_secret_is_refused() -> None:
    d = vllm()
    env_of(d).append({"name": "VLLM_API_KEY", "value": ""})
    assert any("an empty value" in m for m in key_messages(DEPLOYMENT, d))


def test_env_from_a_config_map_without_the_key_is_refused() -> None:
    d = with_key(vllm(), None)
    d["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "c"}}]
    assert any("envFrom" in m for m in key_messages(DEPLOYMENT, d))


def test_the_same_rules_hold_for_a_bare_pod_and_an_init_container() -> None:
    template = with_key(vllm(), {"value": ""})["spec"]["template"]
    assert any("an empty value" in m for m in key_messages(POD, copy.deepcopy(template)))
    d = vllm()
    spec = d["spec"]["template"]["spec"]
    spec["initContainers"] = [copy.deepcopy(spec["containers"][0])]
    spec["initContainers"][0]["name"] = "warm"
    spec["initContainers"][0]["env"] = [e for e in env_of(d) if e["name"] != "VLLM_API_KEY"]
    assert any("'warm' runs vLLM without" in m for m in key_messages(DEPLOYMENT, d))


def test_api_key_on_the_command_line_is_refused() -> None:
    d = vllm()
    c = d["spec"]["template"]["spec"]["containers"][0]
    c["args"] = [*c["args"], "--api-key=" + HEX_KEY]
    assert any("--api-key on vLLM's command line" in m for m in key_messages(DEPLOYMENT, d))
    # `$(VLLM_API_KEY)` in the arguments is not the accepted shape: the reader refuses it.
    c["args"][-1] = "--api-key=$(VLLM_API_KEY)"
    (message,) = violations(vllm_server_readable, DEPLOYMENT, d)
    assert "`$(...)` in its command or arguments" in message


# --- Cloud Run: optional (IAM guards the service), from Secret Manager when set ----------


def test_cloud_run_key_from_secret_manager_passes_and_a_literal_is_refused() -> None:
    props = service("l4")
    envs = container(props).setdefault("envs", [])
    envs.append(
        {"name": "VLLM_API_KEY", "valueSource": {"secretKeyRef": {"secret": "k", "version": "1"}}}
    )
    assert key_messages(SERVICE, props) == []
    envs[-1] = {"name": "VLLM_API_KEY", "value": ""}
    assert any("literal value" in m for m in key_messages(SERVICE, props))
    envs[-1] = {"name": "VLLM_API_KEY", "valueSource": {"secretKeyRef": {"secret": "k"}}}
    assert any("no Secret Manager secret and version" in m for m in key_messages(SERVICE, props))


# --- TPU: only the rendered startup script, passing the key by name ----------------------


def tpu() -> dict[str, Any]:
    return render(stack_config("tpu-v6e1"), "tpu-v6e1").one(TPU_DYNAMIC).inputs


def test_a_tpu_node_not_running_the_package_launcher_is_refused() -> None:
    props = tpu()
    props["metadata"]["startup-script"] += "export VLLM_API_KEY=\n"
    (message,) = key_messages(TPU_DYNAMIC, props)
    assert "is not the package's TPU launcher" in message


def test_a_tpu_launch_without_the_api_key_secret_is_refused() -> None:
    props = tpu()
    launch = json.loads(props["metadata"]["vllm-launch"])
    del launch["secrets"]["VLLM_API_KEY"]
    props["metadata"]["vllm-launch"] = json.dumps(launch)
    found = violations(vllm_server_readable, TPU_DYNAMIC, props)
    assert any("vllm-launch key 'secrets'" in m and "VLLM_API_KEY" in m for m in found), found


# --- credentials found by where they go, whatever their shape ----------------------------


def secret_messages(type_: str, props: dict[str, Any]) -> list[str]:
    return violations(no_plaintext_secrets, type_, props)


@pytest.mark.parametrize(
    "props",
    [
        {"metadata": {"name": "cfg"}, "data": {"api-key": HEX_KEY}},
        {"metadata": {"name": "cfg"}, "data": {"VLLM_API_KEY": HEX_KEY}},
        {"metadata": {"name": "cfg"}, "data": {"apiKey": HEX_KEY.upper()}},
        {"metadata": {"name": "cfg"}, "data": {"hf-token": HEX_KEY[:32]}},
        {"metadata": {"name": "cfg", "annotations": {"gemma4.dev/api-key": HEX_KEY}}},
        {"metadata": {"name": "cfg", "labels": {"token": HEX_KEY[:40]}}},
        {
            "metadata": {"name": "cfg"},
            "data": {"client.sh": f"curl -H 'Authorization: Bearer {HEX_KEY}' x"},
        },
        {"metadata": {"name": "cfg"}, "data": {"h": f"authorization=Basic {HEX_KEY}"}},
    ],
)
def test_a_hex_key_is_found_by_where_it_goes(props: dict[str, Any]) -> None:
    assert secret_messages(CONFIG_MAP, props), props


@pytest.mark.parametrize(
    "script",
    [
        "export VLLM_API_KEY=letmein",  # a short word: where it goes makes it the key
        "VLLM_API_KEY='letmein' vllm serve /m",
        f"docker run -e VLLM_API_KEY={HEX_KEY} img",
        "vllm serve /m --api-key letmein",
        f"vllm serve /m --api-key={HEX_KEY}",
        f"API_TOKEN={HEX_KEY[:20]}",
    ],
)
def test_a_literal_assigned_where_the_key_is_read_is_found(script: str) -> None:
    props = {"metadata": {"name": "cfg"}, "data": {"start.sh": script}}
    assert secret_messages(CONFIG_MAP, props), script


def test_an_authorization_header_of_a_probe_is_a_credential() -> None:
    d = vllm()
    c = d["spec"]["template"]["spec"]["containers"][0]
    c["readinessProbe"]["httpGet"]["httpHeaders"] = [
        {"name": "Authorization", "value": "Bearer x1"}
    ]
    assert any("Authorization header" in m for m in secret_messages(DEPLOYMENT, d))


@pytest.mark.parametrize(
    "data",
    [
        {"apiKeySecret": "vllm-api-key"},  # a secret's name
        {"token": "$(VLLM_API_KEY)"},  # a reference resolved at run time
        {"digest": HEX_KEY},  # a digest under a digest's name
        {"checksum/secret": HEX_KEY},  # a digest of a Secret, under a credential's name
        {"token-sha256": HEX_KEY},
        {"client.sh": 'curl -H "Authorization: Bearer ${TOKEN}" x'},
        {"client.sh": 'curl -H "Authorization: Bearer $(gcloud auth print-access-token)" x'},
        {"servedModelName": "gemma-4-12b-it"},
        {"start.sh": 'VLLM_API_KEY="$(read_secret vllm-api-key)"; vllm serve /m'},
        {"start.sh": 'vllm serve /m --api-key "$VLLM_API_KEY"'},
        {"start.sh": "PORT=8000 MODEL=google/gemma-4-12B-it vllm serve"},
    ],
)
def test_names_references_and_digests_are_not_credentials(data: dict[str, str]) -> None:
    assert secret_messages(CONFIG_MAP, {"metadata": {"name": "cfg"}, "data": data}) == []
