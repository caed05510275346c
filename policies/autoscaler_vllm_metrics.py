"""autoscaler-vllm-metrics: the autoscaler of vLLM follows a gauge vLLM exports.

An accelerator server's queue grows while its CPU idles, so CPU and memory (and Kubernetes'
default of 80% CPU) do not follow its load. Metrics are read against the metric families of
the vLLM release the image runs (`serving.launch.vllm_contract`, from
`vllm/v1/metrics/loggers.py`): a family that does not exist scales on nothing, a counter only
grows (the autoscaler goes to maxReplicas and stays), a histogram is not one number. The
rules in full: docs/policies.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from policies._config import stack_policy
from policies._gke import Manifest, VllmWorkload, manifests, vllm_workloads
from policies._wiring import name, namespace
from serving.launch.vllm_contract import UnknownVersion, for_image, load

#: The vLLM release this project pins (the Cloud Run and GKE GPU image): its metrics are read
#: when the image names no release the policies have a snapshot of (a digest, another tag).
PINNED = ("vllm", "0.27.1")

#: The adapter's name of a Managed Service for Prometheus metric.
_ADAPTER = re.compile(r"prometheus\.googleapis\.com\|([^|]+)\|([a-z]+)")
_HPA_KINDS = ("HorizontalPodAutoscaler",)


def _gauges(workload: VllmWorkload) -> tuple[dict[str, str], str]:
    """{family: type} of the vLLM release the workload's image runs, and its version."""
    image = next((s.image for s in workload.servers if s.image), None)
    try:
        snapshot = for_image(image or "")
    except UnknownVersion:
        snapshot = load(*PINNED)
    families = {str(m["name"]): str(m["type"]) for m in snapshot.metrics}
    for m in snapshot.metrics:
        for exposed in m["exposed"]:
            families.setdefault(str(exposed), str(m["type"]))
    return families, f"{snapshot.data['package']} {snapshot.data['version']}"


def _metric_problem(
    metric: Mapping[str, Any], families: dict[str, str], release: str
) -> str | None:
    kind = metric.get("type")
    if kind in ("Resource", "ContainerResource"):
        what = (metric.get("resource") or metric.get("containerResource") or {}).get("name")
        return (
            f"it scales on {kind} {what!r}: the CPU and memory of an accelerator server do not "
            "follow its load (the queue grows while the CPU idles); scale on "
            "vllm:num_requests_waiting"
        )
    key = {"Pods": "pods", "Object": "object", "External": "external"}.get(str(kind))
    if key is None:
        return f"metric type {kind!r} is not one the policies read (Pods, Object, External)"
    if ((metric.get(key) or {}).get("metric") or {}).get("selector") is not None:
        return (
            f"its {kind} metric has a label selector: the series vLLM exports carry the "
            "labels the stack's own autoscaler reads with none, and a selector no series "
            "matches leaves the autoscaler without a value (it never scales); remove it"
        )
    raw = ((metric.get(key) or {}).get("metric") or {}).get("name")
    if not isinstance(raw, str):
        return f"its {kind} metric name is not known at preview"
    match = _ADAPTER.fullmatch(raw)
    family, read_as = (match.group(1), match.group(2)) if match else (raw, None)
    found = families.get(family)
    gauges = sorted(f for f, t in families.items() if t == "gauge")
    if found is None:
        return (
            f"it scales on {raw!r}, and {family!r} is not a metric {release} exports (so "
            f"the autoscaler never moves); its gauges: {', '.join(gauges)}"
        )
    if found != "gauge":
        return (
            f"it scales on {family!r}, a {found}: a {found} does not go down when the load "
            f"does, so the autoscaler climbs to maxReplicas; scale on a gauge: {', '.join(gauges)}"
        )
    if read_as is not None and read_as != "gauge":
        return (
            f"it reads the gauge {family!r} as a {read_as} ({raw!r}), a series Managed Service "
            f"for Prometheus does not have; name it prometheus.googleapis.com|{family}|gauge"
        )
    return None


def _target(hpa: Manifest, found: list[Manifest]) -> Manifest | None:
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    return next(
        (
            m
            for m in found
            if m.get("kind") == ref.get("kind")
            and name(m) == ref.get("name")
            and namespace(m) == namespace(hpa)
        ),
        None,
    )


def _shape_problems(hpa: Manifest, target: Manifest) -> list[str]:
    """What keeps an autoscaler from scaling vLLM, in the shapes the package never renders:
    a scaling direction switched off, and a replica count fixed on the workload it scales
    (every apply of the workload sets it back, against the autoscaler)."""
    problems = []
    behavior = (hpa.get("spec") or {}).get("behavior") or {}
    for direction in ("scaleUp", "scaleDown"):
        rules = behavior.get(direction) if isinstance(behavior, Mapping) else None
        if isinstance(rules, Mapping) and rules.get("selectPolicy") not in (None, "Max", "Min"):
            problems.append(
                f"behavior.{direction}.selectPolicy is {rules.get('selectPolicy')!r}: the "
                f"autoscaler would never {'add' if direction == 'scaleUp' else 'remove'} a "
                "replica; leave it out (Max)"
            )
    if (target.get("spec") or {}).get("replicas") is not None:
        problems.append(
            f"{target.get('kind')} {namespace(target)}/{name(target)} sets spec.replicas "
            f"({target['spec']['replicas']}) beside the autoscaler: each apply resets the count "
            "the autoscaler chose; leave spec.replicas out and set minReplicas/maxReplicas"
        )
    return problems


def validate_autoscaler_vllm_metrics(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    found = manifests(args)
    workloads = {id(w.manifest): w for w in vllm_workloads(found)}
    for hpa in found:
        if hpa.get("kind") not in _HPA_KINDS:
            continue
        target = _target(hpa, found)
        workload = workloads.get(id(target)) if target is not None else None
        if workload is None:
            continue  # not vLLM's (the wiring policy judges what it scales)
        where = f"HorizontalPodAutoscaler {namespace(hpa)}/{name(hpa)}"
        if hpa.get("apiVersion") == "autoscaling/v1":
            report_violation(
                f"{where}: autoscaling/v1 scales on CPU only, which does not follow vLLM's load; "
                "use autoscaling/v2 with vllm:num_requests_waiting.",
                None,
            )
            continue
        for shape in _shape_problems(hpa, workload.manifest):
            report_violation(f"{where} of vLLM: {shape}.", None)
        metrics = (hpa.get("spec") or {}).get("metrics")
        if not isinstance(metrics, list) or not metrics:
            report_violation(
                f"{where}: it names no metrics, so Kubernetes scales it on 80% CPU, which does not "
                "follow vLLM's load; scale on vllm:num_requests_waiting.",
                None,
            )
            continue
        families, release = _gauges(workload)
        for metric in metrics:
            problem = (
                _metric_problem(metric, families, release)
                if isinstance(metric, Mapping)
                else "a metric is not known at preview"
            )
            if problem:
                report_violation(f"{where} of vLLM: {problem}.", None)


autoscaler_vllm_metrics = stack_policy(
    "autoscaler-vllm-metrics",
    "An autoscaler of vLLM scales on gauges the workload's vLLM release exports "
    "(read from its source), named with their type; never on CPU or memory.",
    validate_autoscaler_vllm_metrics,
)
