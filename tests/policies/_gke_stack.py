"""The shipped GKE stacks as the policy engine sees them (rendered under Pulumi's mocks), for
the GKE stack policies' near variants: copy, change one object, judge."""

from __future__ import annotations

import copy
from typing import Any

from pulumi_policy import StackValidationPolicy

from tests.contracts.variants import rendered
from tests.policies._fixtures import stack_violations

Resource = tuple[str, dict[str, Any], str]


def resources(variant: str = "gke-l4") -> list[Resource]:
    """Every custom resource of a rendered stack: (type, inputs, name), deep-copied."""
    return [
        (d.type, copy.deepcopy(d.inputs), d.name) for d in rendered(variant).resources if d.custom
    ]


def find(found: list[Resource], kind: str, name: str | None = None) -> dict[str, Any]:
    (props,) = [
        p
        for t, p, _ in found
        if t.rsplit(":", 1)[-1] == kind and name in (None, (p.get("metadata") or {}).get("name"))
    ]
    return props


def vllm(found: list[Resource]) -> dict[str, Any]:
    return find(found, "Deployment", "vllm")


def add(found: list[Resource], manifest: dict[str, Any]) -> list[Resource]:
    api = manifest.pop("apiVersion")
    kind = manifest.pop("kind")
    token = f"kubernetes:{api if '/' in api else 'core/' + api}:{kind}"
    found.append((token, manifest, f"extra-{kind.lower()}-{len(found)}"))
    return found


def messages(policy: StackValidationPolicy, found: list[Resource]) -> list[str]:
    return [m for ms in stack_violations(policy, found).values() for m in ms]
