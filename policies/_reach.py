"""Who can reach this: IAM grants and firewall rules, read as pulumi-gcp 10.2 sends them.

IAM: Cloud Run v1 and v2 member/binding/policy resources (`policyData` JSON) and project-level
grants, which reach every service of the project. Firewalls: `gcp:compute/firewall`, the one
kind the package renders (an absent `sourceRanges` with no source tags or service accounts is
0.0.0.0/0); a firewall policy rule is refused by name. Source ranges are judged by
:func:`serving.config.netrange.source_range_problems`, the rule stack settings use too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policies._props import is_list, read_field, read_list
from policies._resources import as_bool, as_int
from serving.config.netrange import RangeError, source_range_problems

IAM_MEMBERS = frozenset(
    {
        "gcp:cloudrunv2/serviceIamMember:ServiceIamMember",
        "gcp:cloudrunv2/jobIamMember:JobIamMember",
        "gcp:cloudrunv2/workerPoolIamMember:WorkerPoolIamMember",
        "gcp:cloudrun/iamMember:IamMember",
        # Project-level grants reach every service of the project.
        "gcp:projects/iAMMember:IAMMember",
    }
)
IAM_BINDINGS = frozenset(
    {
        "gcp:cloudrunv2/serviceIamBinding:ServiceIamBinding",
        "gcp:cloudrunv2/jobIamBinding:JobIamBinding",
        "gcp:cloudrunv2/workerPoolIamBinding:WorkerPoolIamBinding",
        "gcp:cloudrun/iamBinding:IamBinding",
        "gcp:projects/iAMBinding:IAMBinding",
    }
)
IAM_POLICIES = frozenset(
    {
        "gcp:cloudrunv2/serviceIamPolicy:ServiceIamPolicy",
        "gcp:cloudrunv2/jobIamPolicy:JobIamPolicy",
        "gcp:cloudrunv2/workerPoolIamPolicy:WorkerPoolIamPolicy",
        "gcp:cloudrun/iamPolicy:IamPolicy",
        "gcp:projects/iAMPolicy:IAMPolicy",
    }
)
PROJECT_IAM = frozenset(
    {
        "gcp:projects/iAMMember:IAMMember",
        "gcp:projects/iAMBinding:IAMBinding",
        "gcp:projects/iAMPolicy:IAMPolicy",
    }
)
#: Principals that stand for everyone (IAM's v1 names and the principal-identifier form).
PUBLIC_PRINCIPALS = frozenset(
    {"allusers", "allauthenticatedusers", "principalset://goog/public:all"}
)

FIREWALL = "gcp:compute/firewall:Firewall"
#: Firewall policy rules, alone or in a policy: refused by name.
POLICY_RULES = frozenset(
    {
        "gcp:compute/firewallPolicyRule:FirewallPolicyRule",
        "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule",
        "gcp:compute/regionNetworkFirewallPolicyRule:RegionNetworkFirewallPolicyRule",
        "gcp:compute/firewallPolicyWithRules:FirewallPolicyWithRules",
        "gcp:compute/networkFirewallPolicyWithRules:NetworkFirewallPolicyWithRules",
        "gcp:compute/regionNetworkFirewallPolicyWithRules:RegionNetworkFirewallPolicyWithRules",
    }
)
#: IANA protocol numbers that carry TCP traffic to a port ("all" too).
_TCP = frozenset({"tcp", "6", "all"})


def _list(value: Any) -> tuple[list[Any], bool]:
    """A list field's elements (a lone string as one), and whether any part is unknown."""
    if isinstance(value, str):
        return [value], False
    out, unknown = read_list(value)
    return out, unknown or not (value is None or is_list(value))


@dataclass
class Grants:
    """(role, member) pairs an IAM resource grants, and what could not be read."""

    pairs: list[tuple[str, str]] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def public(self) -> list[tuple[str, str]]:
        return [(r, m) for r, m in self.pairs if m.strip().lower() in PUBLIC_PRINCIPALS]


def iam_grants(resource_type: str, props: Mapping[str, Any]) -> Grants | None:
    """The grants of a Cloud Run IAM resource; None for other resource types."""
    grants = Grants()
    role, _ = read_field(props, "role")
    role_text = role if isinstance(role, str) else "(role unknown at preview)"
    if resource_type in IAM_MEMBERS:
        member, unknown = read_field(props, "member")
        if unknown or not isinstance(member, str):
            grants.unreadable.append("member is not known (a value unknown at preview)")
        else:
            grants.pairs.append((role_text, member))
    elif resource_type in IAM_BINDINGS:
        raw, unknown = read_field(props, "members")
        members, some_unknown = _list(raw)
        if unknown or some_unknown:
            grants.unreadable.append("members are not known (a value unknown at preview)")
        grants.pairs += [(role_text, m) for m in members if isinstance(m, str)]
    elif resource_type in IAM_POLICIES:
        raw, unknown = read_field(props, "policyData")
        if unknown or not isinstance(raw, str):
            grants.unreadable.append("policyData is not known (a value unknown at preview)")
            return grants
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            grants.unreadable.append(f"policyData is not JSON ({exc.msg})")
            return grants
        bindings = data.get("bindings") if isinstance(data, dict) else None
        if not isinstance(bindings, list):
            if not (isinstance(data, dict) and bindings is None):
                grants.unreadable.append("policyData has no list of bindings")
            return grants
        for binding in bindings:
            if not isinstance(binding, dict) or not isinstance(binding.get("members"), list):
                grants.unreadable.append(f"policyData binding {binding!r} has no member list")
                continue
            grant_role = str(binding.get("role") or "(no role)")
            grants.pairs += [(grant_role, m) for m in binding["members"] if isinstance(m, str)]
    else:
        return None
    if resource_type in PROJECT_IAM:
        # Project-level grants name service accounts this stack creates (emails unknown until
        # they exist); a public principal is always a literal, so only those are judged here.
        grants.unreadable = [u for u in grants.unreadable if "policyData" in u]
    return grants


@dataclass
class Exposure:
    """Ports a firewall rule opens too widely, why, and what could not be read."""

    ports: list[int] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def _port_covered(spec: Any, port: int) -> bool:
    text = str(spec).strip()
    low, _, high = text.partition("-")
    start, end = as_int(low), as_int(high or low)
    return start is not None and end is not None and start <= port <= end


def _known_list(props: Any, key: str, exposure: Exposure) -> list[Any] | None:
    """The list field `key` (a lone string as one); None, noted, where any of it is unknown."""
    raw, unknown = read_field(props, key)
    values, some_unknown = _list(raw)
    if unknown or some_unknown:
        exposure.unreadable.append(f"{key} are not known (a value unknown at preview)")
        return None
    return values


def _ports_opened(l4: list[Any], ports: list[int], exposure: Exposure) -> None:
    for rule in l4:
        protocol, unknown = read_field(rule, "protocol")
        if unknown:
            exposure.unreadable.append("a protocol is not known (a value unknown at preview)")
            continue
        if str(protocol or "").strip().lower() not in _TCP:
            continue
        specs = _known_list(rule, "ports", exposure)
        if specs is None:
            continue
        for port in ports:
            if (not specs or any(_port_covered(s, port) for s in specs)) and (
                port not in exposure.ports
            ):
                exposure.ports.append(port)


def firewall_exposure(
    resource_type: str,
    props: Mapping[str, Any],
    ports: list[int],
    *,
    min_prefix_v4: int,
    min_prefix_v6: int,
) -> Exposure | None:
    """What a firewall resource opens to whom; None for other resource types."""
    if resource_type in POLICY_RULES:
        what = (
            f"{resource_type.rsplit(':', 1)[-1]} is a firewall policy rule, which the package "
            f"never renders; declare the rule as a {FIREWALL}"
        )
        return Exposure(unreadable=[what])
    if resource_type != FIREWALL:
        return None
    exposure = Exposure()
    if not _is_ingress(props, exposure):
        return exposure
    raw, unknown = read_field(props, "allows")
    allows, some_unknown = _list(raw)
    if unknown or some_unknown:
        exposure.unreadable.append("allows are not known (a value unknown at preview)")
    _ports_opened(allows, ports, exposure)
    if not exposure.ports:
        return exposure
    ranges = _known_list(props, "sourceRanges", exposure)
    if ranges is None:
        return exposure
    tags, _ = _list(read_field(props, "sourceTags")[0])
    accounts, _ = _list(read_field(props, "sourceServiceAccounts")[0])
    if not ranges and not tags and not accounts:
        # Compute Engine: an ingress rule with no source at all applies to 0.0.0.0/0.
        ranges = ["0.0.0.0/0"]
    exposure.sources = [str(r) for r in ranges]
    try:
        exposure.problems += source_range_problems(
            exposure.sources, min_prefix_v4=min_prefix_v4, min_prefix_v6=min_prefix_v6
        )
    except RangeError as exc:
        exposure.unreadable.append(str(exc))
    return exposure


def _is_ingress(props: Any, exposure: Exposure) -> bool:
    direction, unknown = read_field(props, "direction")
    if unknown:
        exposure.unreadable.append("direction is not known (a value unknown at preview)")
        return True
    disabled, unknown = read_field(props, "disabled")
    if unknown:
        exposure.unreadable.append("disabled is not known (a value unknown at preview)")
    elif as_bool(disabled) is True:
        return False
    return str(direction or "INGRESS").strip().upper() == "INGRESS"
