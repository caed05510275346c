"""no-host-network: an accelerator Pod does not share the node's network.

`hostNetwork: true` opens vLLM's port on the node's address, to everything that reaches the
node, beside the InferencePool and its Gateway (with the node's view of the metadata server
and the kubelet); a `hostPort` does the same for one port. Neither is needed to serve through
GKE Inference Gateway: both are refused wherever a Pod spec can be, on every object that asks
for an accelerator or runs vLLM. A Kubernetes boolean is off only when absent or false.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy
from policies._gke import strictly_false
from policies._k8s import SCHEMA_KINDS, is_kubernetes
from policies._props import walk
from policies._server import read_workload, workload_of

#: Keys whose entries are the user's own strings, never a Pod spec.
_OPAQUE_KEYS = frozenset({"data", "stringData", "binaryData", "labels", "annotations"})
#: Keys that mark an object as asking for an accelerator.
_ACCELERATOR_KEYS = frozenset(
    {
        "nvidia.com/gpu",
        "google.com/tpu",
        "cloud.google.com/gke-accelerator",
        "cloud.google.com/gke-tpu-accelerator",
    }
)


def _host_problems(props: Any) -> list[str]:
    problems = []
    for path, key, value, unknown in walk(props, _OPAQUE_KEYS):
        if key == "hostNetwork" and (unknown or not strictly_false(value)):
            shown = "a value unknown at preview" if unknown else repr(value)
            problems.append(
                f"{path} is {shown}: the Pod shares the node's network, so vLLM's port opens on "
                "the node's address beside the InferencePool; remove hostNetwork"
            )
        elif key == "hostPort" and (unknown or value not in (None, 0, "0")):
            shown = "a value unknown at preview" if unknown else repr(value)
            problems.append(
                f"{path} is {shown}: the node forwards that port to the container, beside the "
                "InferencePool; remove hostPort (the Gateway reaches the Pods through the pool)"
            )
    return problems


def validate_no_host_network(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if not is_kubernetes(args.resource_type) or args.resource_type in SCHEMA_KINDS:
        return  # a CRD's schema names hostNetwork and hostPort, it sets neither
    problems = _host_problems(args.props)
    if not problems:
        return
    workload = workload_of(args.resource_type, args.props)
    accelerated = workload.runs_accelerator or any(
        key in _ACCELERATOR_KEYS for _, key, _, _ in walk(args.props, _OPAQUE_KEYS)
    )
    if not accelerated:
        accelerated = bool(read_workload(workload).servers)
    if accelerated:
        for problem in problems:
            report_violation(f"{args.name}: {problem}.", None)


no_host_network = resource_policy(
    "no-host-network",
    "Pods that run accelerators or vLLM use neither hostNetwork nor a hostPort, "
    "in any kind that holds a Pod template.",
    validate_no_host_network,
)
