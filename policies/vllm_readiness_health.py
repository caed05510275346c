"""vllm-readiness-health: a vLLM Pod is ready only when vLLM's own `/health` answers.

The InferencePool sends requests to ready Pods only. vLLM 0.27.1 answers `GET /health` with
200 once the engine serves (503 while it starts or after the engine died); `/metrics` answers
as soon as the HTTP server is up, and a TCP or gRPC probe says only that the port is open.
Without a readiness probe a Pod is ready as soon as its containers start, and the Gateway
sends requests to a replica still loading weights. Accepted: `readinessProbe.httpGet` on
`/health` at vLLM's port, plain HTTP, no `host`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy
from policies._k8s import POD_TEMPLATES, pod_spec
from policies._props import get, items, read_field
from policies._resources import as_int
from policies._server import read_servers
from policies._wiring import listen_port, named_ports

HEALTH_PATH = "/health"


def _probe_problem(container: Mapping[str, Any], vllm_port: int) -> str | None:
    probe, unknown = read_field(container, "readinessProbe")
    fix = (
        f"give it readinessProbe.httpGet with path {HEALTH_PATH} and port {vllm_port} (vLLM's "
        "own health endpoint, 200 only once the engine serves)"
    )
    if unknown:
        return f"its readinessProbe is not known at preview; {fix}"
    if not isinstance(probe, Mapping):
        return (
            "it has no readinessProbe, so Kubernetes counts the Pod ready as soon as it starts "
            f"and the InferencePool sends requests to a replica still loading; {fix}"
        )
    http = get(probe, "httpGet")
    if not isinstance(http, Mapping):
        kind = next((k for k in ("tcpSocket", "grpc", "exec") if get(probe, k) is not None), None)
        return f"its readinessProbe is {kind or 'not an httpGet probe'}, not vLLM's /health; {fix}"
    path = get(http, "path")
    if path != HEALTH_PATH:
        return (
            f"its readinessProbe asks {path!r}, not {HEALTH_PATH} (/metrics and other paths "
            f"answer before the model has loaded and after the engine died); {fix}"
        )
    raw = get(http, "port")
    port: int | str | None = as_int(raw)
    if port is None and isinstance(raw, str):
        port = named_ports(container).get(raw)
    if port != vllm_port:
        return f"its readinessProbe asks port {raw!r}, not vLLM's port {vllm_port}; {fix}"
    scheme = get(http, "scheme")
    if scheme not in (None, "HTTP"):
        return f"its readinessProbe uses scheme {scheme!r}; vLLM serves plain HTTP; {fix}"
    if get(http, "host") is not None:
        return (
            f"its readinessProbe asks host {get(http, 'host')!r}, another machine than the "
            f"Pod; {fix}"
        )
    return None


def validate_vllm_readiness_health(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if args.resource_type not in POD_TEMPLATES:
        return
    servers = read_servers(args.resource_type, args.props).servers
    spec = pod_spec(args.resource_type, args.props)
    for list_key in ("initContainers", "containers"):
        value, _ = read_field(spec, list_key)
        for index, container in enumerate(items(value)):
            if not isinstance(container, Mapping):
                continue
            name = str(get(container, "name") or f"#{index}")
            where = f"container {name!r}"
            for server in [s for s in servers if s.where == where]:
                port = listen_port(server)
                if port is None:
                    continue  # vllm-server-readable and the wiring policy refuse it
                problem = _probe_problem(container, port)
                if problem:
                    report_violation(f"{args.name}: {where} runs vLLM, and {problem}.", None)
                break


vllm_readiness_health = resource_policy(
    "vllm-readiness-health",
    "Every Kubernetes container running vLLM has a readinessProbe httpGet on "
    "vLLM's /health at the port vLLM listens on (plain HTTP, no other host).",
    validate_vllm_readiness_health,
)
