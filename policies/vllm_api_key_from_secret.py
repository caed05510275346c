"""vllm-api-key-from-secret: vLLM's API key comes only from a secret that must exist.

vLLM 0.27.1 authenticates requests only with a non-empty key, `--api-key` or `VLLM_API_KEY`
(entrypoints/openai/api_server.py keeps `[key for key in ... if key]`: an empty one switches
authentication off). Where a key is set, and wherever vLLM answers the network without IAM in
front (GKE, TPU VMs), where it must be, it comes from a secret store read where the platform
fails the start when the secret is missing: a required Kubernetes `secretKeyRef` (an optional
one to a missing Secret starts vLLM open; a ConfigMap is no secret store), a Cloud Run Secret
Manager reference, or the package's TPU launcher. `--api-key` is refused everywhere: the key
would be part of the resource and of the process list. The rules in full: docs/policies.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy
from policies._gke import strictly_false
from policies._k8s import POD_TEMPLATES, pod_spec
from policies._props import get, items, read_field
from policies._resources import CLOUD_RUN_WORKLOADS, containers
from policies._server import (
    ContainerSpec,
    Reading,
    Workload,
    read_workload,
    workload_of,
)
from serving.launch.vllm_args import is_vllm_image, mentions_vllm
from serving.render.tpu_startup import LAUNCHER

KEY = "VLLM_API_KEY"
#: Kubernetes' sources of an environment value other than a Secret.
_OTHER_SOURCES = {
    "configMapKeyRef": "a ConfigMap, which is not a secret store (whoever reads ConfigMaps "
    "reads the key)",
    "fieldRef": "a field of the Pod (a label or annotation, readable with the Pod spec)",
    "resourceFieldRef": "a resource field of the container",
    "fileKeyRef": "a file of a volume the policies do not read",
}
_FIX = (
    f"set {KEY} from a Secret that must exist: valueFrom.secretKeyRef with name and key, "
    "without optional: true (the stack's apiKeySecret; docs/deploy/gke.md shows the kubectl "
    "command that makes it from Secret Manager)"
)


def _may_run_vllm(spec: ContainerSpec, reading: Reading) -> bool:
    if any(s.where == f"container {spec.name!r}" for s in reading.servers):
        return True
    argv = [*(spec.command or []), *(spec.args or [])]
    return (
        spec.holds_accelerator
        or (spec.image is not None and is_vllm_image(spec.image))
        or mentions_vllm(argv)
    )


def _kubernetes_entry_problems(container: Mapping[str, Any], name: str) -> list[str]:
    """Every `VLLM_API_KEY` entry of a Kubernetes container, and `envFrom` when none."""
    where = f"container {name!r}"
    entries = [e for e in items(get(container, "env")) if get(e, "name") == KEY]
    if not entries:
        if items(get(container, "envFrom")):
            return [
                f"{where} takes its environment from envFrom, whose names the policies cannot "
                f"see, and sets no {KEY} of its own, so vLLM's key (if any) comes from where "
                f"they cannot prove it is a Secret; {_FIX}"
            ]
        return [
            f"{where} runs vLLM without {KEY}, so vLLM serves every request without "
            f"authentication; {_FIX}"
        ]
    problems = []
    for entry in entries:
        value, value_unknown = read_field(entry, "value")
        source, source_unknown = read_field(entry, "valueFrom")
        if value is not None or value_unknown:
            shown = "an empty value" if value == "" else "a literal value"
            problems.append(
                f"{where} sets {KEY} to {shown} (vLLM skips authentication when it is empty, "
                f"and a literal is readable by whoever reads the Pod spec); {_FIX}"
            )
            continue
        if source_unknown or not isinstance(source, Mapping):
            problems.append(f"{where}: {KEY}'s valueFrom is not known at preview; {_FIX}")
            continue
        for other, why in _OTHER_SOURCES.items():
            if get(source, other) is not None:
                problems.append(f"{where} reads {KEY} from {why}; {_FIX}")
        ref, ref_unknown = read_field(source, "secretKeyRef")
        if ref is None and not ref_unknown:
            if not any(get(source, other) is not None for other in _OTHER_SOURCES):
                problems.append(f"{where}: {KEY} has no secretKeyRef; {_FIX}")
            continue
        secret, secret_unknown = read_field(ref, "name")
        key, key_unknown = read_field(ref, "key")
        optional, optional_unknown = read_field(ref, "optional")
        if secret_unknown or key_unknown or not secret or not key:
            problems.append(
                f"{where}: {KEY}'s secretKeyRef names no literal Secret and key, so which "
                f"secret vLLM reads cannot be proved; {_FIX}"
            )
        if optional_unknown or not strictly_false(optional):
            problems.append(
                f"{where}: {KEY}'s secretKeyRef is optional ({optional!r}), so a missing "
                f"Secret starts vLLM with no key, serving every request; {_FIX}"
            )
    return problems


def _kubernetes(resource_type: str, props: Mapping[str, Any], reading: Reading) -> list[str]:
    spec = pod_spec(resource_type, props)
    workload = workload_of(resource_type, props)
    raw: dict[str, Mapping[str, Any]] = {}
    for list_key in ("initContainers", "containers"):
        value, _ = read_field(spec, list_key)
        for index, container in enumerate(items(value)):
            if isinstance(container, Mapping):
                raw[str(get(container, "name") or f"#{index}")] = container
    problems = []
    for container_spec in workload.containers:
        container = raw.get(container_spec.name)
        if container is not None and _may_run_vllm(container_spec, reading):
            problems += _kubernetes_entry_problems(container, container_spec.name)
    return problems


def _cloud_run(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    problems = []
    for index, container in enumerate(containers(resource_type, props)):
        where = f"container {get(container, 'name') or f'#{index}'!r}"
        for entry in items(get(container, "envs")):
            if get(entry, "name") != KEY:
                continue
            value, value_unknown = read_field(entry, "value")
            if value is not None or value_unknown:
                problems.append(
                    f"{where} sets {KEY} to a literal value (an empty one switches vLLM's "
                    f"authentication off); reference a Secret Manager secret (env "
                    "value_source.secret_key_ref with secret and version)"
                )
                continue
            ref = get(entry, "valueSource", "secretKeyRef")
            if not (get(ref, "secret") and get(ref, "version")):
                problems.append(
                    f"{where}: {KEY} names no Secret Manager secret and version, so its value "
                    "cannot be proved to come from one; reference a secret (env "
                    "value_source.secret_key_ref with secret and version)"
                )
    return problems


def _machine(workload: Workload) -> list[str]:
    """A machine that starts vLLM, or may, runs the package's launcher, which reads
    VLLM_API_KEY from the Secret Manager secret its launch document names (a document without
    that secret is refused by the reader) and stops the boot when the key is empty."""
    return [
        f"startup script ({key}) is not the package's TPU launcher "
        "(serving/render/tpu_startup.py), the one proved to read VLLM_API_KEY from Secret "
        "Manager and to stop the boot when it is empty; where this one's key comes from (if "
        "anywhere) cannot be proved. Use the stack's rendered launcher"
        for key, script in workload.startup_scripts
        if script != LAUNCHER and (workload.runs_accelerator or mentions_vllm([script]))
    ]


def validate_vllm_api_key_from_secret(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    workload = workload_of(args.resource_type, args.props)
    reading = read_workload(workload)
    problems = [
        f"{server.where} passes --api-key on vLLM's command line, where the key is part of the "
        f"resource and of the process list; {_FIX}"
        for server in reading.servers
        if server.args.get("api-key") is not None
    ]
    if args.resource_type in POD_TEMPLATES:
        problems += _kubernetes(args.resource_type, args.props, reading)
    elif args.resource_type in CLOUD_RUN_WORKLOADS:
        problems += _cloud_run(args.resource_type, args.props)
    elif workload.startup_scripts:
        problems += _machine(workload)
    for problem in dict.fromkeys(problems):
        report_violation(f"{args.name}: {problem}.", None)


vllm_api_key_from_secret = resource_policy(
    "vllm-api-key-from-secret",
    "vLLM's API key comes only from a secret that must exist (Kubernetes: a "
    "required secretKeyRef; Cloud Run: a Secret Manager reference; TPU and Compute Engine: the "
    "rendered startup script), never a literal, an empty value, a ConfigMap, a Pod field or "
    "--api-key; GKE and VM servers must have one.",
    validate_vllm_api_key_from_secret,
)
