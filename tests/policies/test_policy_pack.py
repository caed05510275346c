"""The pack as a whole: registry, config file, shipped stacks, and pulumi-policy's own path."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import struct_pb2
from pulumi.runtime.proto import analyzer_pb2
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    ResourceValidationPolicy,
    StackValidationPolicy,
)
from pulumi_policy.policy import _PolicyAnalyzerServicer
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from policies.registry import ALL, BY_NAME, PACK_ENFORCEMENT_LEVEL, PACK_NAME
from tests.policies._fixtures import (
    ALL_STACKS,
    SERVICE,
    edit_args,
    rendered,
    service,
    stack_violations,
    violations,
)

ROOT = Path(__file__).resolve().parents[2]
POLICY_DIR = ROOT / "policies"
NOT_POLICIES = {"__init__", "__main__", "registry", "plan", "offline"}
MANDATORY = [p for p in ALL if p.enforcement_level is EnforcementLevel.MANDATORY]
ADVISORY = [p for p in ALL if p.enforcement_level is EnforcementLevel.ADVISORY]


def resource_policies(policies: list[Policy]) -> list[ResourceValidationPolicy]:
    assert all(isinstance(p, (ResourceValidationPolicy, StackValidationPolicy)) for p in policies)
    return [p for p in policies if isinstance(p, ResourceValidationPolicy)]


def stack_policies(policies: list[Policy]) -> list[StackValidationPolicy]:
    return [p for p in policies if isinstance(p, StackValidationPolicy)]


def test_one_policy_per_module_and_all_registered() -> None:
    modules = sorted(
        p.stem
        for p in POLICY_DIR.glob("*.py")
        if not p.stem.startswith("_") and p.stem not in NOT_POLICIES
    )
    found: list[Policy] = []
    for stem in modules:
        module = importlib.import_module(f"policies.{stem}")
        policies = [v for v in vars(module).values() if isinstance(v, Policy)]
        assert len(policies) == 1, f"policies/{stem}.py must export exactly one policy"
        found += policies
    assert {p.name for p in found} == {p.name for p in ALL}
    assert len(BY_NAME) == len(ALL)


@pytest.mark.parametrize("policy", ALL, ids=lambda p: p.name)
def test_policy_metadata(policy: Policy) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", policy.name)
    assert policy.description[0].isupper() or policy.description.startswith("vLLM")
    assert policy.description.endswith(".")
    assert policy.enforcement_level in (EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY)
    for key, spec in (policy.config_schema.properties if policy.config_schema else {}).items():
        assert "default" in spec and spec.get("description"), key


def test_levels_match_the_issue() -> None:
    assert {p.name for p in ADVISORY} == {
        "mtp-max-num-seqs",
        "min-instances-cost",
        "max-instances-cap",
        "tpu-run-duration-limit",
    }
    # + checkpoint-from-download-job; no-public-gateway, accelerator-pool-match,
    # inference-pool-wiring (GKE); vllm-port-probed (Cloud Run); vllm-api-key-from-secret,
    # no-host-network, accelerators-match-parallelism, vllm-readiness-health,
    # autoscaler-vllm-metrics, max-replicas-node-pool, public-gateway-https-only,
    # vllm-only-through-pool, hooks-endpoint-own-gateway, compile-cache-keyed
    assert len(MANDATORY) == 29


def test_config_file_lists_every_policy_with_its_defaults() -> None:
    shipped = json.loads((POLICY_DIR / "config.json").read_text())
    expected: dict[str, dict[str, object]] = {}
    for policy in ALL:
        level = policy.enforcement_level or PACK_ENFORCEMENT_LEVEL
        expected[policy.name] = {"enforcementLevel": level.value}
        if policy.config_schema is not None:
            expected[policy.name].update(
                {k: v["default"] for k, v in policy.config_schema.properties.items()}
            )
    assert shipped == expected


def test_main_only_assembles_the_pack() -> None:
    tree = ast.parse((POLICY_DIR / "__main__.py").read_text())
    calls = [
        n.value.func.id
        for n in tree.body
        if isinstance(n, ast.Expr)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Name)
    ]
    assert calls == ["PolicyPack"]
    assert not [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Assign))]
    yaml_text = (POLICY_DIR / "PulumiPolicy.yaml").read_text()
    assert "name: python" in yaml_text


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_shipped_stacks_pass_every_policy(stack: str) -> None:
    r = rendered(stack)
    assert r.resources
    failures = {
        (policy.name, resource.name): messages
        for resource in r.resources
        for policy in resource_policies(ALL)
        if (messages := violations(policy, resource.type, resource.inputs, name=resource.name))
    }
    assert failures == {}
    whole = [(resource.type, resource.inputs, resource.name) for resource in r.resources]
    assert stack_policies(ALL)
    assert {
        p.name: found for p in stack_policies(ALL) if (found := stack_violations(p, whole))
    } == {}


# --- pulumi-policy's analyzer path (what the engine calls), offline ----------------------


def struct(props: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(props)  # numbers become floats, as the engine sends them
    return message


def analyze(servicer: Any, type_: str, props: dict[str, Any]) -> list[Any]:
    request = analyzer_pb2.AnalyzeRequest(
        type=type_,
        properties=struct(props),
        urn=f"urn:pulumi:l4::gemma4-vllm::{type_}::svc",
        name="svc",
    )
    return list(servicer.Analyze(request, None).diagnostics)


@pytest.fixture()
def servicer() -> Any:
    """pulumi-policy's private servicer: the code path the engine drives over gRPC."""
    return _PolicyAnalyzerServicer(PACK_NAME, "0.1.0", ALL, PACK_ENFORCEMENT_LEVEL)


def test_analyzer_info_lists_policies_levels_and_schemas(servicer: Any) -> None:
    info = servicer.GetAnalyzerInfo(None, None)
    assert info.name == "gemma4-vllm"
    by_name = {p.name: p for p in info.policies}
    assert set(by_name) == set(BY_NAME)
    assert by_name["l4-qat-checkpoint"].enforcementLevel == analyzer_pb2.MANDATORY
    assert by_name["min-instances-cost"].enforcementLevel == analyzer_pb2.ADVISORY
    schema = by_name["max-model-len-cap"].configSchema.properties["maxModelLen"]
    assert schema["default"] == 32768


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_analyze_every_resource_of_a_shipped_stack(servicer: Any, stack: str) -> None:
    diagnostics = {
        resource.name: analyze(servicer, resource.type, resource.inputs)
        for resource in rendered(stack).resources
    }
    assert {name: d for name, d in diagnostics.items() if d} == {}


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_analyze_stack_of_a_shipped_stack(servicer: Any, stack: str) -> None:
    request = analyzer_pb2.AnalyzeStackRequest(
        resources=[
            analyzer_pb2.AnalyzerResource(
                type=resource.type,
                properties=struct(resource.inputs),
                urn=f"urn:pulumi:{stack}::gemma4-vllm::{resource.type}::{resource.name}",
                name=resource.name,
            )
            for resource in rendered(stack).resources
        ]
    )
    assert list(servicer.AnalyzeStack(request, None).diagnostics) == []
    firewall = "gcp:compute/firewall:Firewall"
    urn = f"urn:pulumi:{stack}::gemma4-vllm::{firewall}::open"
    request.resources.append(
        analyzer_pb2.AnalyzerResource(
            type=firewall,
            properties=struct({"allows": [{"protocol": "tcp"}], "sourceRanges": ["0.0.0.0/0"]}),
            urn=urn,
            name="open",
        )
    )
    (diagnostic,) = servicer.AnalyzeStack(request, None).diagnostics
    assert diagnostic.policyName == "serving-port-not-public" and diagnostic.urn == urn
    assert diagnostic.enforcementLevel == analyzer_pb2.MANDATORY


def test_analyze_passes_the_l4_service_even_with_preview_unknowns(
    servicer: Any,
) -> None:
    props = service("l4")
    props["template"]["volumes"][0]["gcs"]["bucket"] = UNKNOWN_STRING_VALUE
    props["template"]["serviceAccount"] = UNKNOWN_STRING_VALUE
    assert analyze(servicer, SERVICE, props) == []


def test_analyze_reports_with_enforcement_levels_and_configure(
    servicer: Any,
) -> None:
    bad = edit_args(
        service("l4"), set_={"max-model-len": "65536", "max-num-batched-tokens": "2048"}
    )
    bad["template"]["scaling"]["minInstanceCount"] = 1
    levels = {d.policyName: d.enforcementLevel for d in analyze(servicer, SERVICE, bad)}
    assert levels == {
        "max-model-len-cap": analyzer_pb2.MANDATORY,
        "multimodal-batched-tokens": analyzer_pb2.MANDATORY,
        "min-instances-cost": analyzer_pb2.ADVISORY,
        # The edited command line no longer has the key of the cache folder it mounts.
        "compile-cache-keyed": analyzer_pb2.MANDATORY,
    }
    # The pack config (what --policy-pack-config sends): raise a threshold, demote and disable.
    properties = struct_pb2.Struct()
    properties.update({"maxModelLen": 65536})
    servicer.Configure(
        analyzer_pb2.ConfigureAnalyzerRequest(
            policyConfig={
                "max-model-len-cap": analyzer_pb2.PolicyConfig(
                    enforcementLevel=analyzer_pb2.MANDATORY, properties=properties
                ),
                "multimodal-batched-tokens": analyzer_pb2.PolicyConfig(
                    enforcementLevel=analyzer_pb2.ADVISORY
                ),
                "min-instances-cost": analyzer_pb2.PolicyConfig(
                    enforcementLevel=analyzer_pb2.DISABLED
                ),
                "compile-cache-keyed": analyzer_pb2.PolicyConfig(
                    enforcementLevel=analyzer_pb2.DISABLED
                ),
            }
        ),
        None,
    )
    diagnostics = analyze(servicer, SERVICE, bad)
    assert {d.policyName: d.enforcementLevel for d in diagnostics} == {
        "multimodal-batched-tokens": analyzer_pb2.ADVISORY
    }
    (diagnostic,) = diagnostics
    assert diagnostic.message.startswith(BY_NAME["multimodal-batched-tokens"].description)
    assert "at least 2496" in diagnostic.message


# --- the documentation page ---------------------------------------------------------------

DOC = ROOT / "docs" / "policies.md"


def test_doc_table_lists_every_policy_with_its_level() -> None:
    text = DOC.read_text()
    for policy in ALL:
        level = (policy.enforcement_level or PACK_ENFORCEMENT_LEVEL).value
        assert f"| `{policy.name}` | {level} |" in text


def test_doc_config_example_names_real_policies_and_keys() -> None:
    text = (ROOT / "docs" / "policy-pack.md").read_text()
    block = text.split("```json\n", 1)[1].split("```", 1)[0]
    example = json.loads(block)
    for name, value in example.items():
        policy = BY_NAME[name]
        if isinstance(value, str):
            assert value in ("mandatory", "advisory", "disabled")
            continue
        schema = policy.config_schema.properties if policy.config_schema else {}
        assert set(value) - {"enforcementLevel"} <= set(schema), name


def test_doc_sample_output_is_current() -> None:
    from serving.capacity.plan import load_stack_settings, report

    r = report("l4", load_stack_settings("l4"), 0.4)
    text = (ROOT / "docs" / "capacity-planner.md").read_text()
    assert f"{r['kv_tokens']:,}" in text
    assert f"{r['full_length_sequences']:.2f}x" in text
    assert f"${r['usd_per_million_requests']:,.2f}" in text
