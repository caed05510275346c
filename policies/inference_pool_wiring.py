"""inference-pool-wiring: the Gateway's objects reach the vLLM Pods they are meant to.

A stack policy over the Kubernetes objects a stack declares, resolved as Kubernetes and GKE
resolve them at run time (`policies._wiring`): pool, picker Service, routes, backend policies,
autoscaler, PodMonitoring and probes. Each object may be valid alone and the Gateway still
answer "no healthy upstream"; this refuses that before anything is created. A value unknown
at preview matches nothing (fail closed).
"""

from __future__ import annotations

from pulumi_policy import ReportViolation, StackValidationArgs

from policies._config import stack_policy
from policies._gke import manifests as stack_manifests
from policies._wiring import check

#: Kinds the references run between; a stack without an InferencePool is not judged.
_KINDS = (
    "InferencePool",
    "Service",
    "HTTPRoute",
    "Gateway",
    "HealthCheckPolicy",
    "GCPBackendPolicy",
    "HorizontalPodAutoscaler",
    "PodMonitoring",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
)


def validate_inference_pool_wiring(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    manifests = [m for m in stack_manifests(args) if m["kind"] in _KINDS]
    if not any(m["kind"] == "InferencePool" for m in manifests):
        return
    try:
        problems = check(manifests)
    except (AttributeError, TypeError, KeyError) as exc:
        # A part of an object the references run through is not of its type (a value
        # unknown at preview where a map or list belongs): it cannot be proved, so refused.
        problems = [
            f"the InferencePool's references cannot be followed ({type(exc).__name__}: a "
            "value unknown at preview, or a field of the wrong type)"
        ]
    for problem in problems:
        report_violation(f"{problem}.", None)


inference_pool_wiring = stack_policy(
    "inference-pool-wiring",
    "The InferencePool selects the vLLM Pods on their ports, names a declared picker "
    "Service, and the route, GKE policies, autoscaler and PodMonitoring reach them.",
    validate_inference_pool_wiring,
)
