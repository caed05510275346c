"""Kubernetes objects as the policies read them: Pod templates and the containers they run.

pulumi-kubernetes sends an object's manifest fields as its props (`metadata`, `spec`, ...).
This module finds the Pod spec in every kind that runs Pods (Deployment, StatefulSet,
DaemonSet, ReplicaSet, Job, CronJob, Pod, PodTemplate) and its containers, which the vLLM
reader (`policies._server`) reads. A `$(VAR)` in `command`/`args` is not
expanded: the reader refuses it by name (docs/accepted-shapes.md).

What runs Pods but cannot be read here is reported by :func:`unreadable`: a custom resource
(or any other object) holding a container list or a Pod template, a Helm release (its
manifests are rendered inside the provider), a kind this module does not know. The
`vllm-server-readable` policy refuses those.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from policies._props import get, is_list, items, read_field, read_path

#: Pod-running kinds and where their Pod template (or, for a Pod, its spec's parent) is.
POD_TEMPLATES: dict[str, tuple[str, ...]] = {
    "kubernetes:apps/v1:Deployment": ("spec", "template"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template"),
    "kubernetes:core/v1:ReplicationController": ("spec", "template"),
    "kubernetes:batch/v1:Job": ("spec", "template"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template"),
    "kubernetes:core/v1:PodTemplate": ("template",),
    "kubernetes:core/v1:Pod": (),
}
#: pulumi-kubernetes' Patch variants read like the kinds they patch.
POD_TEMPLATES.update({f"{k}Patch": v for k, v in list(POD_TEMPLATES.items())})

SECRET = "kubernetes:core/v1:Secret"
#: Resource types that install manifests the policies cannot see (rendered by the provider).
OPAQUE_PREFIXES = ("kubernetes:helm.sh/",)

#: GKE's node labels for accelerators (cloud.google.com/kubernetes-engine/docs/how-to/gpus,
#: .../how-to/tpus).
GPU_LABEL = "cloud.google.com/gke-accelerator"
TPU_LABEL = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
GPU_RESOURCE = "nvidia.com/gpu"
TPU_RESOURCE = "google.com/tpu"
#: GKE's Cloud Storage FUSE CSI driver (a Cloud Storage volume of a Pod).
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"

#: Keys that hold containers or a Pod template in any object (Kubernetes' conventions).
_RUNS_CONTAINERS = ("containers", "initContainers", "ephemeralContainers")
#: Keys by which custom resources run code or models without a container list: Argo's
#: `container`/`script`, Pod specs under other names, KServe's `model` with `storageUri` or
#: `runtime` (a serving runtime installed outside the stack, vLLM among them), an `image`
#: or a command line anywhere. A custom resource holding any of them is refused.
_RUNS_CODE = (
    "container",
    "script",
    "podSpec",
    "podTemplate",
    "image",
    "command",
    "args",
    "storageUri",
    "runtime",
    "modelFormat",
)
#: Kinds that describe other objects' fields rather than run anything.
SCHEMA_KINDS = frozenset(
    {
        "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
        "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinitionPatch",
    }
)
#: Accelerator resource names: a custom resource asking for them runs accelerators.
_ACCELERATOR_WORDS = ("nvidia.com/gpu", "google.com/tpu", GPU_LABEL, TPU_LABEL)
#: Keys whose entries are the user's own strings (a ConfigMap key named `containers`).
_OPAQUE_KEYS = ("data", "stringData", "binaryData", "labels", "annotations")


def is_kubernetes(resource_type: str) -> bool:
    return resource_type.startswith("kubernetes:")


def pod_spec(resource_type: str, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Pod spec of a Pod-running kind (None for any other type or when absent)."""
    path = POD_TEMPLATES.get(resource_type)
    if path is None:
        return None
    spec = get(props, *path, "spec")
    return spec if isinstance(spec, Mapping) else None


def node_selector(resource_type: str, props: Mapping[str, Any]) -> dict[str, str]:
    """The Pod's literal node selector."""
    out: dict[str, str] = {}
    selector, _ = read_field(pod_spec(resource_type, props), "nodeSelector")
    if isinstance(selector, Mapping):
        for key in list(selector):
            value, _ = read_field(selector, str(key))
            if isinstance(value, str):
                out[str(key)] = value
    return out


def tpu_chips(topology: str) -> int | None:
    """Chips of a TPU slice topology ("1x1" -> 1, "2x4" -> 8)."""
    if not re.fullmatch(r"\d+(x\d+){1,2}", topology):
        return None
    return math.prod(int(part) for part in topology.split("x"))


def accelerator(resource_type: str, props: Mapping[str, Any]) -> str | None:
    """The accelerator a Pod is scheduled on, in the hardware catalog's terms: the GPU type
    (`nvidia-l4`), or a TPU slice as `v6e-<chips>` (`tpu-v6e-slice` with topology 1x1 ->
    `v6e-1`); a TPU whose topology is absent or unreadable keeps GKE's name."""
    selector = node_selector(resource_type, props)
    if selector.get(GPU_LABEL):
        return selector[GPU_LABEL]
    tpu = selector.get(TPU_LABEL)
    if not tpu:
        return None
    match = re.fullmatch(r"tpu-(v\d+[a-z]*)-(slice|lite-podslice|podslice|lite-device|device)", tpu)
    chips = tpu_chips(selector.get(TPU_TOPOLOGY_LABEL, ""))
    if match and chips is not None:
        return f"{match.group(1)}-{chips}"
    return tpu


def container_env(container: Mapping[str, Any]) -> dict[str, str | None]:
    """The container's variables for `$(VAR)` expansion: literal values, or None where the
    value comes from elsewhere (valueFrom, or unknown at preview)."""
    env: dict[str, str | None] = {}
    for item in items(get(container, "env")):
        name, _ = read_field(item, "name")
        if not isinstance(name, str):
            continue
        value, unknown = read_field(item, "value")
        source, _ = read_field(item, "valueFrom")
        if source is not None or unknown:
            env[name] = None
        elif isinstance(value, str):
            env[name] = value
        else:
            env[name] = ""
    return env


def containers(resource_type: str, props: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every container of the Pod template (init containers too: a sidecar runs all along)."""
    spec = pod_spec(resource_type, props)
    found: list[Mapping[str, Any]] = []
    for key in ("initContainers", "containers"):
        value, _ = read_field(spec, key)
        found += [c for c in items(value) if isinstance(c, Mapping)]
    return found


def volumes(resource_type: str, props: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    value, _ = read_field(pod_spec(resource_type, props), "volumes")
    return [v for v in items(value) if isinstance(v, Mapping)]


def _holds_containers(value: Any, depth: int = 0) -> str | None:
    """The path of a container list or Pod template inside a props tree (bounded depth)."""
    if depth > 12:
        return "(nested deeper than 12 levels)"
    if isinstance(value, Mapping):
        for key in list(value):
            if str(key) in _OPAQUE_KEYS:
                continue
            child, _ = read_field(value, str(key))
            if str(key) in _RUNS_CONTAINERS or str(key) in _RUNS_CODE:
                return str(key)
            if str(key) in _ACCELERATOR_WORDS:
                return f"{key} (an accelerator)"
            if str(key) == "template" and isinstance(child, Mapping) and "spec" in child:
                return "template.spec"
            found = _holds_containers(child, depth + 1)
            if found:
                return f"{key}.{found}"
    elif is_list(value):
        for index, child in enumerate(items(value)):
            found = _holds_containers(child, depth + 1)
            if found:
                return f"[{index}].{found}"
    return None


def _template_unknowns(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Parts of a Pod template unknown at preview that the policies need."""
    path = ".".join((*POD_TEMPLATES[resource_type], "spec"))
    spec, unknown = read_path(props, *path.split("."))
    if unknown:
        return [f"{path} is not known (a value unknown at preview)"]
    problems = []
    for key in ("containers", "initContainers", "nodeSelector"):
        if read_field(spec, key)[1]:
            what = "the accelerator" if key == "nodeSelector" else "the containers"
            problems.append(
                f"{path}.{key} is not known (a value unknown at preview), so {what} cannot be read"
            )
    return problems


def unreadable(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Why a Kubernetes object that may run containers cannot be read (fail closed)."""
    if resource_type in POD_TEMPLATES:
        return _template_unknowns(resource_type, props)
    if not is_kubernetes(resource_type):
        return []
    if resource_type.startswith(OPAQUE_PREFIXES):
        return [
            f"{resource_type} installs manifests rendered inside the provider, which the "
            "policies cannot see; render the chart into the repository and declare its objects"
        ]
    if resource_type in SCHEMA_KINDS:
        return []  # a schema names fields (`containers`, `image`), it runs nothing
    where = _holds_containers(props)
    if where is None:
        return []
    return [
        f"this {resource_type.rsplit(':', 1)[-1]} ({resource_type}) holds containers or a Pod "
        f"template at {where}, a kind the policies cannot read; declare the workload as a "
        "Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob or Pod"
    ]
