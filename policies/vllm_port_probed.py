"""vllm-port-probed: Cloud Run sends traffic and probes to the port vLLM listens on.

Cloud Run's contract (the run v2 discovery document): a probe's `port` defaults to
`container.ports[0].containerPort`, which defaults to 8080, and "The specified ports must be
listening on all interfaces (0.0.0.0) within the container". vLLM listens on its `--port`
(8000 when left out, vLLM 0.27.1's parser) and `--host` (every interface when left out). A
server elsewhere boots, and Cloud Run probes the container port for the whole probe budget,
then fails the revision. GKE probes and the project's TPU resource's `servingPort` are held
to the same port; the comparison is the one GKE's wiring uses (`policies._wiring`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies import _k8s
from policies._config import resource_policy
from policies._props import get, is_list, read_path
from policies._resources import (
    CLOUD_RUN_WORKLOADS,
    JOB,
    WORKER_POOL,
    as_int,
    containers,
)
from policies._server import vllm_servers
from policies._wiring import UNKNOWN, host_problem, listen_port, named_ports

#: Cloud Run's container port when none is declared ("If not present, it will default to
#: port 8080").
DEFAULT_CONTAINER_PORT = 8080
PROBES = ("startupProbe", "livenessProbe", "readinessProbe")
PROBE_ACTIONS = ("httpGet", "tcpSocket", "grpc")


def container_port(container: Mapping[str, Any]) -> tuple[int | str | None, str]:
    """The container's port (ports[0].containerPort, else Cloud Run's 8080) and how it was
    found; UNKNOWN when not known at preview, None when given but not a number."""
    ports, unknown = read_path(container, "ports")
    if not unknown and is_list(ports):
        raw, unknown = read_path(ports, 0, "containerPort")
    elif not unknown:
        raw, unknown = read_path(ports, "containerPort")
    if unknown:
        return UNKNOWN, f"its container port {UNKNOWN}"
    if raw is None:
        return (
            DEFAULT_CONTAINER_PORT,
            f"Cloud Run's default container port {DEFAULT_CONTAINER_PORT}",
        )
    number = as_int(raw)
    return number, f"its container port {number if number is not None else repr(raw)}"


def _declares_ports(container: Mapping[str, Any]) -> bool | None:
    """Whether a Cloud Run container declares a port (absent or an empty list: no); None
    when its ports are not known at preview."""
    ports, unknown = read_path(container, "ports")
    if unknown:
        return None
    return bool(ports)


def _probe_ports(
    container: Mapping[str, Any],
    own: int | str | None,
    named: Mapping[str, int | str] | None = None,
) -> list[tuple[str, int | str | None]]:
    """(probe, port it reaches) for every probe; an omitted port is the container port (Cloud
    Run); a named port is looked up in `named` (Kubernetes)."""
    found: list[tuple[str, int | str | None]] = []
    for probe in PROBES:
        if read_path(container, probe)[1]:
            # A probe unknown at preview may reach any port.
            found.append((probe, UNKNOWN))
            continue
        for action in PROBE_ACTIONS:
            spec, unknown = read_path(container, probe, action)
            if unknown:
                found.append((f"{probe}.{action}", UNKNOWN))
                continue
            if spec is None:
                continue
            raw, unknown = read_path(spec, "port")
            port: int | str | None = UNKNOWN if unknown else own if raw is None else as_int(raw)
            if port is None and isinstance(raw, str) and named is not None:
                # Kubernetes: a port name resolves through the container's own ports.
                port = named.get(raw, f"{raw!r} (a name none of its ports has)")
            found.append((f"{probe}.{action}", port))
    return found


#: The project's TPU resource (components/tpu_queued_resource.py): its `servingPort` is the
#: port of its endpoint URL, which the health checks and the firewall use.
TPU_RESOURCE = "pulumi-python:dynamic/gemma4:TpuQueuedResource"


def _validate_tpu_resource(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    raw = get(args.props, "servingPort")
    declared = as_int(raw)
    for server in vllm_servers(args.resource_type, args.props):
        problem = host_problem(server)
        if problem is not None:
            report_violation(f"{args.name}: {problem}", None)
        port = listen_port(server)
        shown = server.args.get("port")
        listens = f"--port={shown}" if shown is not None else f"vLLM's default port {port}"
        if declared is None or port != declared:
            report_violation(
                f"{args.name}: {server.where}: vLLM listens on {listens}, but the node's "
                f"servingPort (the port of its endpoint URL, health checks and firewall) is "
                f"{raw!r}; set --port to the servingPort",
                None,
            )


def validate_vllm_port_probed(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if args.resource_type == TPU_RESOURCE:
        _validate_tpu_resource(args, report_violation)
        return
    kubernetes = _k8s.is_kubernetes(args.resource_type)
    if args.resource_type not in CLOUD_RUN_WORKLOADS and not kubernetes:
        return
    # Jobs and worker pools receive no requests: only their probes reach the server. A
    # Kubernetes container port is informational; its probes name their own port.
    serves = args.resource_type not in (JOB, WORKER_POOL) and not kubernetes
    raw = containers(args.resource_type, args.props)
    for server in vllm_servers(args.resource_type, args.props):
        matches = [
            c
            for i, c in enumerate(raw)
            if server.where.startswith(f"container {str(get(c, 'name') or f'#{i}')!r}")
        ]
        if len(matches) != 1:
            report_violation(
                f"{args.name}: {server.where}: the container it runs in cannot be told apart "
                "(containers share a name), so its port and probes cannot be compared; give "
                "each container its own name",
                None,
            )
            continue
        container = matches[0]
        port = listen_port(server)
        # Cloud Run sends requests to the ingress container, the one that declares its port
        # ("If you deploy multiple containers to a service, this is the ingress container",
        # cloud.google.com/run/docs/configuring/containers); a sidecar without ports beside it
        # receives none, and only its probes reach it. Which one is the ingress must be known.
        others = [_declares_ports(c) for c in raw if c is not container]
        sidecar = (
            not kubernetes
            and _declares_ports(container) is False
            and any(o is not False for o in others)
        )
        if sidecar and None in others:
            report_violation(
                f"{args.name}: {server.where}: another container's ports are not known at "
                "preview, so which container receives Cloud Run's requests cannot be told; "
                "give ports as literals",
                None,
            )
            continue
        if kubernetes:
            own, how = None, "its probes"
            probes = _probe_ports(container, None, named_ports(container))
        elif sidecar:
            own, how = None, "no port (a sidecar: requests go to the container with ports)"
            probes = [
                (probe, "no port (a sidecar's probe must name one)" if reached is None else reached)
                for probe, reached in _probe_ports(container, None)
            ]
        else:
            own, how = container_port(container)
            probes = _probe_ports(container, own)
        shown = server.args.get("port")
        listens = f"--port={shown}" if shown is not None else f"vLLM's default port {port}"
        if port is None:
            report_violation(
                f"{args.name}: {server.where}: --port={shown!r} is not a port number; set "
                f"--port to {own if own is not None else 'the port its probes reach'}",
                None,
            )
            continue
        problem = host_problem(server)
        if problem is not None and (serves or probes):
            report_violation(f"{args.name}: {problem}", None)
        if kubernetes or sidecar:
            pass
        elif own == UNKNOWN:
            report_violation(
                f"{args.name}: {server.where}: its container port is not known at preview, "
                f"so whether Cloud Run reaches vLLM's {listens} cannot be told; give "
                "ports[0].containerPort as a literal",
                None,
            )
        elif serves and own != port:
            report_violation(
                f"{args.name}: {server.where}: vLLM listens on {listens}, but Cloud Run sends "
                f"requests and probes without a port to {how}, so the revision never becomes "
                f"ready; set --port={own} or the container port to {port}",
                None,
            )
        for probe, reached in probes:
            if reached != port and not (reached == UNKNOWN and own == UNKNOWN):
                report_violation(
                    f"{args.name}: {server.where}: its {probe} reaches port {reached}"
                    + ("" if kubernetes else " (an omitted port is the container port)")
                    + f", but vLLM listens on {listens}, so the probe fails for its whole "
                    f"budget; probe port {port}",
                    None,
                )


vllm_port_probed = resource_policy(
    "vllm-port-probed",
    "On Cloud Run, GKE and the project's TPU nodes, vLLM listens on every "
    "interface at the port its probes, requests and health checks reach.",
    validate_vllm_port_probed,
)
