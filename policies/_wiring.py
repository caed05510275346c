"""Cross-object references of a GKE serving stack, over its manifests and node pools.

Each object can be valid on its own and the stack still serve nothing: a pool whose selector
matches no Pod ("no healthy upstream"), a route to another pool, an autoscaler of another
Deployment, a TPU request on a GPU node pool. :func:`check` resolves those references the way
Kubernetes and GKE do (label selectors, a Service's `targetPort` defaulting to its `port`,
named ports, a reference's namespace defaulting to the referrer's) and returns one message per
broken one; `plain` turns a value unknown at preview into `UNKNOWN`, which matches nothing.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from policies._props import is_list, read_path
from policies._resources import as_int

#: What a value unknown at preview becomes in `plain` (it selects and equals nothing).
UNKNOWN = "(unknown at preview)"

Manifest = Mapping[str, Any]

POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}

#: The InferencePool API GKE installs (GA); `inference.networking.x-k8s.io/v1alpha2` is removed.
INFERENCE_POOL_API = "inference.networking.k8s.io/v1"
#: InferencePool v1's spec fields: the CRD's own openAPIV3Schema (gateway-api-inference-extension
#: v1.0, vendored in tests/data/k8s/crds, which a test compares with this).
POOL_SPEC_FIELDS = frozenset({"selector", "targetPorts", "endpointPickerRef", "appProtocol"})
#: v1alpha2 pool fields and their v1 names.
REMOVED_POOL_FIELDS = {"targetPortNumber": "targetPorts", "extensionRef": "endpointPickerRef"}


def _pool_shape_problems(pool: Manifest, where: str) -> list[str]:
    """A pool of another API version, or a field InferencePool v1 does not have (the API
    server refuses it; a v1alpha2 field left in a v1 pool is the common case)."""
    problems = []
    api = pool.get("apiVersion")
    if api != INFERENCE_POOL_API:
        problems.append(
            f"{where}: apiVersion {api!r} is not served by GKE's Inference Gateway; allowed: "
            f"{INFERENCE_POOL_API} (inference.networking.x-k8s.io/v1alpha2 is removed)"
        )
    spec = pool.get("spec")
    if isinstance(spec, Mapping):
        for key in sorted(set(map(str, spec)) - POOL_SPEC_FIELDS):
            renamed = REMOVED_POOL_FIELDS.get(key)
            problems.append(
                f"{where}: spec.{key} is not a field of InferencePool v1"
                + (f" (v1alpha2's; v1 names it {renamed})" if renamed else "")
                + f"; allowed: {', '.join(sorted(POOL_SPEC_FIELDS))}"
            )
    return problems


def plain(value: Any, depth: int = 0) -> Any:
    """A props tree as plain dicts and lists; unknown values become `UNKNOWN` (depth-bounded)."""
    if depth > 40:
        return UNKNOWN
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in list(value):
            try:
                item = value[key]
            except UnknownValueError:
                out[str(key)] = UNKNOWN
                continue
            out[str(key)] = plain(item, depth + 1)
        return out
    if is_list(value):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                items.append(plain(value[index], depth + 1))
            except UnknownValueError:
                items.append(UNKNOWN)
        return items
    return value


def namespace(m: Mapping[str, Any]) -> str:
    value = (m.get("metadata") or {}).get("namespace")
    return value if isinstance(value, str) and value else "default"


def name(m: Mapping[str, Any]) -> str:
    return str((m.get("metadata") or {}).get("name"))


def _of(manifests: Sequence[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m.get("kind") == kind]


def _template(m: Manifest) -> Mapping[str, Any]:
    template: Mapping[str, Any] = (m.get("spec") or {}).get("template") or {}
    return template


def pod_labels(m: Manifest) -> dict[str, str]:
    labels = (_template(m).get("metadata") or {}).get("labels") or {}
    return dict(labels) if isinstance(labels, Mapping) else {}


def _containers(m: Manifest) -> list[Mapping[str, Any]]:
    spec = _template(m).get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """Kubernetes' LabelSelector semantics (an empty selector matches everything; a missing
    one, or one that is not a selector (a value unknown at preview), matches nothing)."""
    if not isinstance(selector, Mapping):
        return False
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        return False
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    for expr in expressions:
        if not isinstance(expr, Mapping):
            return False
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if not isinstance(key, str) or not isinstance(values, list):
            return False
        if op == "In":
            if labels.get(key) not in values:
                return False
        elif op == "NotIn":
            if key in labels and labels[key] in values:
                return False
        elif op == "Exists":
            if key not in labels:
                return False
        elif op == "DoesNotExist":
            if key in labels:
                return False
        else:
            return False  # not an operator Kubernetes knows
    return True


def _workloads(manifests: Sequence[Manifest], ns: str) -> list[Manifest]:
    return [m for m in manifests if m.get("kind") in POD_TEMPLATE_KINDS and namespace(m) == ns]


def _ports(m: Manifest) -> dict[str, int]:
    """Container ports of a workload's Pods, by name and by number."""
    out: dict[str, int] = {}
    for c in _containers(m):
        for port in c.get("ports") or []:
            number = as_int(port.get("containerPort"))
            if number is None:
                continue
            out[str(number)] = number
            if port.get("name"):
                out[str(port["name"])] = number
    return out


def named_ports(container: Mapping[str, Any]) -> dict[str, int | str]:
    """A Kubernetes container's port names and their numbers (`UNKNOWN` when unknown at
    preview, the value as written when not a number)."""
    out: dict[str, int | str] = {}
    ports, unknown = read_path(container, "ports")
    for index in range(len(ports) if is_list(ports) and not unknown else 0):
        name, _ = read_path(ports, index, "name")
        number, unknown = read_path(ports, index, "containerPort")
        if isinstance(name, str):
            out[name] = UNKNOWN if unknown else as_int(number) or f"{number!r}"
    return out


def _serves(m: Manifest, port: Any) -> bool:
    number = as_int(port)
    return str(number if number is not None else port) in _ports(m)


def listen_port(server: Any) -> int | None:
    """The TCP port a vLLM server listens on, read as vLLM 0.27.1 reads it (argparse
    `type=int`: Python's int(), so `08080`, `+8080` and `80_80` are 8080, `8080.0` and
    `0x1f90` refuse to start) and bound (1 to 65535; 0 binds a random port); vLLM's parser
    default 8000 from the release snapshot when --port is left out; None when vLLM would not
    listen on a known port."""
    from serving.launch.vllm_args import DEFAULT_PORT

    raw = server.args.get("port", DEFAULT_PORT)
    if isinstance(raw, bool):
        return None
    try:
        port = int(raw) if isinstance(raw, (int, str)) else None
    except ValueError:
        return None
    return port if port is not None and 0 < port < 65536 else None


def host_problem(server: Any) -> str | None:
    """Why a server cannot be reached from outside its container, or None. vLLM 0.27.1's
    api_server binds `(args.host or "", args.port)`, IPv6 when the host is an IPv6 address:
    no --host, `--host=`, `--host=None` and an unspecified address (0.0.0.0, ::,
    0:0:0:0:0:0:0:0) listen on every interface (:: as a dual-stack socket on Linux); anything
    else (127.0.0.1, localhost, ::1, one address, a name) listens on one address only."""
    host = server.args.get("host")
    # `--host` is `optional_type(str)` (vllm/engine/arg_utils.py): "" and "None" are None.
    if host is None or host in ("", "None"):
        return None
    if isinstance(host, str):
        try:
            if ipaddress.ip_address(host).is_unspecified:
                return None
        except ValueError:
            pass
    return (
        f"{server.where}: vLLM listens on --host={host}, not on every interface, so nothing "
        "outside the container (probes, the load balancer, the pool) reaches it; accepted: "
        "--host=0.0.0.0, --host=::, or no --host"
    )


def _vllm_servers(m: Manifest) -> list[Any]:
    from policies._server import read_servers

    return read_servers(type_token(m), m).servers


def _probe_problems(m: Manifest) -> list[str]:
    problems = []
    for c in _containers(m):
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            port = ((c.get(probe) or {}).get("httpGet") or {}).get("port")
            if port is not None and not _serves(m, port):
                problems.append(
                    f"{m['kind']} {name(m)}: container {c.get('name')!r} {probe} port {port} "
                    "is not one of its container ports"
                )
    return problems


def check(manifests: Sequence[Manifest]) -> list[str]:
    """Every broken reference (the `accelerator-pool-match` policy judges the accelerators)."""
    problems: list[str] = []
    for w in manifests:
        if w.get("kind") in POD_TEMPLATE_KINDS:
            problems += _probe_problems(w)
    for d in _of(manifests, "Deployment") + _of(manifests, "StatefulSet"):
        selector = (d.get("spec") or {}).get("selector")
        if not selects(selector, pod_labels(d)):
            problems.append(f"{d['kind']} {name(d)}: spec.selector does not match its Pod labels")
    pools = {(namespace(p), name(p)): p for p in _of(manifests, "InferencePool")}
    services = {(namespace(s), name(s)): s for s in _of(manifests, "Service")}
    for pool in pools.values():
        spec = pool.get("spec") or {}
        where = f"InferencePool {name(pool)}"
        problems += _pool_shape_problems(pool, where)
        selected = [
            w
            for w in _workloads(manifests, namespace(pool))
            if selects(spec.get("selector"), pod_labels(w))
        ]
        if not selected:
            problems.append(f"{where}: its selector {spec.get('selector')} matches no Pod template")
        numbers = {t.get("number") for t in spec.get("targetPorts") or []}
        for w in selected:
            for server in _vllm_servers(w):
                problem = host_problem(server)
                if problem is not None:
                    problems.append(f"{where}: {w['kind']} {name(w)} {problem}")
                port = listen_port(server)
                if port is not None and port not in numbers:
                    problems.append(
                        f"{where}: vLLM in {w['kind']} {name(w)} listens on --port={port}, not "
                        f"on the pool's target ports {sorted(numbers)}"
                    )
        for target in spec.get("targetPorts") or []:
            for w in selected:
                if not _serves(w, target.get("number")):
                    problems.append(
                        f"{where}: target port {target.get('number')} is not a container port "
                        f"of {w['kind']} {name(w)} ({sorted(set(_ports(w).values()))})"
                    )
        ref = spec.get("endpointPickerRef") or {}
        if (ref.get("kind") or "Service") != "Service" or ref.get("group") not in (None, ""):
            problems.append(f"{where}: endpointPickerRef is not a core Service")
            continue
        svc = services.get((namespace(pool), str(ref.get("name"))))
        if svc is None:
            problems.append(
                f"{where}: endpointPickerRef names Service {ref.get('name')!r}, not declared"
            )
            continue
        number = (ref.get("port") or {}).get("number")
        svc_ports = [
            p for p in (svc.get("spec") or {}).get("ports") or [] if p.get("port") == number
        ]
        if not svc_ports:
            problems.append(f"{where}: the picker Service {name(svc)} has no port {number}")
            continue
        service_selector = (svc.get("spec") or {}).get("selector")
        # A Service selects by a plain label map (no matchExpressions); none: no Pods.
        pickers = [
            w
            for w in _workloads(manifests, namespace(svc))
            if service_selector and selects({"matchLabels": service_selector}, pod_labels(w))
        ]
        if not pickers:
            problems.append(f"Service {name(svc)}: its selector matches no Pod template")
        for w in pickers:
            target = svc_ports[0].get("targetPort", svc_ports[0].get("port"))
            if not _serves(w, target):
                problems.append(
                    f"Service {name(svc)}: targetPort {target} is not a container port of "
                    f"{w['kind']} {name(w)}"
                )
        if any(selects(spec.get("selector"), pod_labels(w)) for w in pickers):
            problems.append(f"{where}: selects the picker's own Pods")
    for route in _of(manifests, "HTTPRoute"):
        spec = route.get("spec") or {}
        gateways = {(namespace(g), name(g)) for g in _of(manifests, "Gateway")}
        for parent in spec.get("parentRefs") or []:
            if (parent.get("namespace") or namespace(route), parent.get("name")) not in gateways:
                problems.append(
                    f"HTTPRoute {name(route)}: parent Gateway {parent.get('name')!r} not declared"
                )
        for rule in spec.get("rules") or []:
            for backend in rule.get("backendRefs") or []:
                key = (backend.get("namespace") or namespace(route), str(backend.get("name")))
                if (
                    backend.get("kind") != "InferencePool"
                    or backend.get("group") != "inference.networking.k8s.io"
                ):
                    problems.append(
                        f"HTTPRoute {name(route)}: backend {backend.get('name')!r} is not an "
                        "InferencePool"
                    )
                elif key not in pools:
                    problems.append(
                        f"HTTPRoute {name(route)}: backend pool {key[1]!r} not declared"
                    )
    for kind in ("HealthCheckPolicy", "GCPBackendPolicy"):
        for policy in _of(manifests, kind):
            ref = (policy.get("spec") or {}).get("targetRef") or {}
            key = (ref.get("namespace") or namespace(policy), str(ref.get("name")))
            if ref.get("kind") != "InferencePool" or key not in pools:
                problems.append(f"{kind} {name(policy)}: targetRef {ref} is not a declared pool")
            port = (
                ((policy.get("spec") or {}).get("default") or {})
                .get("config", {})
                .get("httpHealthCheck", {})
                .get("port")
            )
            if port is not None and key in pools:
                pool_ports = [t.get("number") for t in pools[key]["spec"].get("targetPorts") or []]
                if port not in pool_ports:
                    problems.append(
                        f"{kind} {name(policy)}: health check port {port} is not the pool's "
                        f"{pool_ports}"
                    )
    for hpa in _of(manifests, "HorizontalPodAutoscaler"):
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        targets = [
            m
            for m in manifests
            if m.get("kind") == ref.get("kind")
            and m.get("apiVersion") == ref.get("apiVersion")
            and name(m) == ref.get("name")
            and namespace(m) == namespace(hpa)
        ]
        if not targets:
            problems.append(
                f"HorizontalPodAutoscaler {name(hpa)}: scaleTargetRef {ref} not declared"
            )
        elif not any(
            selects((p.get("spec") or {}).get("selector"), pod_labels(t))
            for t in targets
            for p in pools.values()
        ):
            problems.append(
                f"HorizontalPodAutoscaler {name(hpa)}: scales {ref.get('name')!r}, whose Pods "
                "no InferencePool serves (the autoscaler follows vLLM's queue)"
            )
        low, high = as_int(spec.get("minReplicas", 1)), as_int(spec.get("maxReplicas"))
        if low is not None and high is not None and low > high:
            problems.append(f"HorizontalPodAutoscaler {name(hpa)}: minReplicas > maxReplicas")
    for monitor in _of(manifests, "PodMonitoring"):
        spec = monitor.get("spec") or {}
        selected = [
            w
            for w in _workloads(manifests, namespace(monitor))
            if selects(spec.get("selector"), pod_labels(w))
        ]
        if not selected:
            problems.append(f"PodMonitoring {name(monitor)}: its selector matches no Pod template")
        for endpoint in spec.get("endpoints") or []:
            for w in selected:
                if not _serves(w, endpoint.get("port")):
                    problems.append(
                        f"PodMonitoring {name(monitor)}: port {endpoint.get('port')!r} is not a "
                        f"container port of {w['kind']} {name(w)}"
                    )
    return problems


def type_token(m: Manifest) -> str:
    """pulumi-kubernetes' type token of a manifest (`kubernetes:apps/v1:Deployment`)."""
    api = str(m.get("apiVersion"))
    return f"kubernetes:{api if '/' in api else 'core/' + api}:{m.get('kind')}"


#: Marks a manifest read from a pulumi-kubernetes `<Kind>Patch` resource (server-side apply of
#: some fields of an object that exists): the policies read it as an object of `<Kind>`.
PATCH = "x-gemma4-patch"


def normalized_kind(kind: str) -> tuple[str, bool]:
    """`GatewayPatch` -> (`Gateway`, True): the one place a Patch kind becomes its kind, so
    every policy that guards a kind sees the patches that change it."""
    return (
        (kind[: -len("Patch")], True)
        if kind.endswith("Patch") and kind != "Patch"
        else (kind, False)
    )


def manifest_from_engine(resource_type: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A pulumi-kubernetes resource's inputs as its manifest (apiVersion/kind from the type)."""
    match = re.fullmatch(r"kubernetes:([^:]+):(\w+)", resource_type)
    if not match:
        raise ValueError(f"not a Kubernetes type token: {resource_type}")
    group_version = match.group(1)
    api_version = (
        group_version[len("core/") :] if group_version.startswith("core/") else group_version
    )
    kind, patch = normalized_kind(match.group(2))
    return {**inputs, "apiVersion": api_version, "kind": kind, **({PATCH: True} if patch else {})}
