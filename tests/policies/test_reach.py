"""The same exposure through another resource shape or spelling is still refused."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policies.no_public_invoker import no_public_invoker
from policies.serving_port_not_public import serving_port_not_public
from serving.config.checks import SettingsError
from serving.config.netrange import source_range_problems
from serving.config.settings import load_settings
from tests.policies._fixtures import FIREWALL, violations

# --- IAM: every Cloud Run shape (type tokens from pulumi-gcp 10.2) ------------------------

MEMBER_TYPES = [
    "gcp:cloudrunv2/serviceIamMember:ServiceIamMember",
    "gcp:cloudrunv2/jobIamMember:JobIamMember",
    "gcp:cloudrunv2/workerPoolIamMember:WorkerPoolIamMember",
    "gcp:cloudrun/iamMember:IamMember",
]
BINDING_TYPES = [t.replace("Member", "Binding").replace("member", "binding") for t in MEMBER_TYPES]
POLICY_TYPES = [t.replace("Member", "Policy").replace("member", "policy") for t in MEMBER_TYPES]
PUBLIC = ["allUsers", "allAuthenticatedUsers", "principalSet://goog/public:all"]


def test_type_tokens_are_the_sdks() -> None:
    import pulumi_gcp.cloudrun as v1
    import pulumi_gcp.cloudrunv2 as v2

    classes = [
        v2.ServiceIamMember, v2.JobIamMember, v2.WorkerPoolIamMember, v1.IamMember,
        v2.ServiceIamBinding, v2.JobIamBinding, v2.WorkerPoolIamBinding, v1.IamBinding,
        v2.ServiceIamPolicy, v2.JobIamPolicy, v2.WorkerPoolIamPolicy, v1.IamPolicy,
    ]  # fmt: skip
    for cls, token in zip(classes, MEMBER_TYPES + BINDING_TYPES + POLICY_TYPES, strict=True):
        assert f"'{token}'" in inspect.getsource(cls)


@pytest.mark.parametrize("type_", MEMBER_TYPES)
@pytest.mark.parametrize("member", PUBLIC)
def test_public_member_on_every_shape(type_: str, member: str) -> None:
    (message,) = violations(
        no_public_invoker, type_, {"role": "roles/run.invoker", "member": member}
    )
    assert repr(member) in message and "public" in message


@pytest.mark.parametrize("type_", BINDING_TYPES)
def test_public_binding_on_every_shape(type_: str) -> None:
    props = {"role": "roles/run.developer", "members": ["user:a@example.com", "allUsers"]}
    (message,) = violations(no_public_invoker, type_, props)
    assert "roles/run.developer" in message


@pytest.mark.parametrize("type_", POLICY_TYPES)
def test_public_policy_data_on_every_shape(type_: str) -> None:
    data = {"bindings": [{"role": "roles/run.invoker", "members": ["allAuthenticatedUsers"]}]}
    (message,) = violations(no_public_invoker, type_, {"policyData": json.dumps(data)})
    assert "allAuthenticatedUsers" in message


@pytest.mark.parametrize("type_", POLICY_TYPES)
def test_unreadable_policy_data_fails_closed(type_: str) -> None:
    (message,) = violations(no_public_invoker, type_, {"policyData": "{not json"})
    assert "cannot tell who this grants access to" in message


def test_member_unknown_at_preview_fails_closed() -> None:
    props = unknown_checking_proxy({"role": "roles/run.invoker", "member": UNKNOWN_STRING_VALUE})
    (message,) = violations(no_public_invoker, MEMBER_TYPES[3], props)
    assert "unknown at preview" in message


@pytest.mark.parametrize(
    "type_",
    ["gcp:projects/iAMMember:IAMMember", "gcp:projects/iAMBinding:IAMBinding"],
)
def test_project_level_public_grant_is_refused(type_: str) -> None:
    props = {
        "project": "p",
        "role": "roles/run.invoker",
        "member": "allUsers",
        "members": ["allUsers"],
    }
    assert violations(no_public_invoker, type_, props)


def test_project_level_member_unknown_at_preview_is_a_service_account_to_come() -> None:
    props = unknown_checking_proxy(
        {"project": "p", "role": "roles/monitoring.metricWriter", "member": UNKNOWN_STRING_VALUE}
    )
    assert violations(no_public_invoker, "gcp:projects/iAMMember:IAMMember", props) == []


def test_v1_service_invoker_iam_disabled_annotation() -> None:
    props = {"metadata": {"annotations": {"run.googleapis.com/invoker-iam-disabled": "true"}}}
    (message,) = violations(no_public_invoker, "gcp:cloudrun/service:Service", props)
    assert "invoker-iam-disabled" in message


def test_named_members_pass() -> None:
    for type_ in MEMBER_TYPES:
        props = {
            "role": "roles/run.invoker",
            "member": "serviceAccount:x@p.iam.gserviceaccount.com",
        }
        assert violations(no_public_invoker, type_, props) == []


# --- firewalls: every form ------------------------------------------------------------------


def rule(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "network": "default",
        "direction": "INGRESS",
        "sourceRanges": ["203.0.113.0/24"],
        "allows": [{"protocol": "tcp", "ports": ["8000"]}],
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


WIDE_SOURCES = [
    ["0.0.0.0/0"],
    ["::/0"],
    ["0.0.0.0/1", "128.0.0.0/1"],
    ["2000::/3"],
    ["2000::/4", "3000::/4"],
    ["8.0.0.0/9", "8.128.0.0/9"],  # a /8 split in two
    ["1.0.0.0/8"],
    ["203.0.113.0/24", "0.0.0.0/0"],
    ["::ffff:0:0/96"],  # every IPv4 address, IPv4-mapped
]


@pytest.mark.parametrize("sources", WIDE_SOURCES)
def test_wide_or_covering_sources_are_refused(sources: list[str]) -> None:
    (message,) = violations(serving_port_not_public, FIREWALL, rule(sourceRanges=sources))
    assert "allows TCP port(s) 8000" in message


@pytest.mark.parametrize(
    "allows",
    [
        [{"protocol": "6", "ports": ["8000"]}],
        [{"protocol": "all"}],
        [{"protocol": "TCP"}],
        [{"protocol": "tcp", "ports": ["7000-9000"]}],
        [{"protocol": "udp", "ports": ["8000"]}, {"protocol": "tcp", "ports": [8000.0]}],
    ],
)
def test_every_protocol_and_port_spelling(allows: list[dict[str, Any]]) -> None:
    assert violations(
        serving_port_not_public, FIREWALL, rule(sourceRanges=["0.0.0.0/0"], allows=allows)
    )


def test_no_source_at_all_means_everywhere() -> None:
    (message,) = violations(serving_port_not_public, FIREWALL, rule(sourceRanges=None))
    assert "0.0.0.0/0" in message
    assert (
        violations(serving_port_not_public, FIREWALL, rule(sourceRanges=None, sourceTags=["lb"]))
        == []
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"direction": "EGRESS", "sourceRanges": None, "destinationRanges": ["0.0.0.0/0"]},
        {"disabled": True, "sourceRanges": ["0.0.0.0/0"]},
        {"allows": [{"protocol": "udp"}], "sourceRanges": ["0.0.0.0/0"]},
        {"allows": [{"protocol": "17", "ports": ["8000"]}], "sourceRanges": ["0.0.0.0/0"]},
        {"allows": [{"protocol": "tcp", "ports": ["22"]}], "sourceRanges": ["0.0.0.0/0"]},
        {"sourceRanges": ["10.0.0.0/8", "35.191.0.0/16", "2001:db8:1::/48"]},
    ],
)
def test_rules_that_do_not_expose_a_serving_port(overrides: dict[str, Any]) -> None:
    assert violations(serving_port_not_public, FIREWALL, rule(**overrides)) == []


def test_prefix_is_configurable() -> None:
    config = {"minPublicPrefixV4": 8}
    assert (
        violations(serving_port_not_public, FIREWALL, rule(sourceRanges=["1.0.0.0/8"]), config)
        == []
    )
    # The internet as a whole is refused whatever the prefix.
    assert violations(
        serving_port_not_public,
        FIREWALL,
        rule(sourceRanges=["0.0.0.0/1", "128.0.0.0/1"]),
        {"minPublicPrefixV4": 0},
    )


def test_unknown_sources_fail_closed() -> None:
    props = unknown_checking_proxy(rule(sourceRanges=UNKNOWN_ARRAY_VALUE))
    (message,) = violations(serving_port_not_public, FIREWALL, props)
    assert "cannot tell who this firewall lets in" in message


@pytest.mark.parametrize(
    "type_",
    [
        "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule",
        "gcp:compute/networkFirewallPolicyWithRules:NetworkFirewallPolicyWithRules",
    ],
)
def test_firewall_policy_rules_are_refused_by_name(type_: str) -> None:
    rule_ = {"action": "allow", "direction": "INGRESS", "match": {"srcIpRanges": ["0.0.0.0/0"]}}
    (message,) = violations(serving_port_not_public, type_, rule_)
    assert "is a firewall policy rule, which the package never renders" in message


# --- the same rule in settings --------------------------------------------------------------

TPU = {"hardware": "tpu-v6e-1", "image": "vllm/vllm-tpu:v0.27.0", "zone": "us-east5-b",
       "model": "google/gemma-4-12B-it"}  # fmt: skip


@pytest.mark.parametrize("sources", WIDE_SOURCES)
def test_settings_refuse_what_the_policy_refuses(sources: list[str]) -> None:
    assert source_range_problems(sources)
    with pytest.raises(SettingsError, match="sourceRanges"):
        load_settings({**TPU, "sourceRanges": json.dumps(sources)})


def test_settings_accept_narrow_and_private_ranges() -> None:
    settings = load_settings({**TPU, "sourceRanges": ["203.0.113.7/32", "10.0.0.0/8"]})
    assert settings.tpu.source_ranges == ["203.0.113.7/32", "10.0.0.0/8"]
