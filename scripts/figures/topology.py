"""A stack's topology, drawn from what the Pulumi program declares for it under Pulumi's mocks:
the boxes are the declared resources, every arrow a reference one resource's inputs make to
another, resolved the way the cluster or Cloud Run resolves it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scripts.figures.draw import Arrow, Box, Diagram

Resource = Any  # preview.harness.Declared: .type, .name, .inputs

K8S = "kubernetes:"
BUCKET = "gcp:storage/bucket:Bucket"
JOB = "gcp:cloudrunv2/job:Job"
RUN_SERVICE = "gcp:cloudrunv2/service:Service"
NODE_POOL = "gcp:container/nodePool:NodePool"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
ALERT = "gcp:monitoring/alertPolicy:AlertPolicy"


def render(stack: str, root: Path) -> list[Resource]:
    """The resources the program in ``root`` declares for ``stack`` (its stack file there)."""
    from preview.harness import render as run_program
    from preview.harness import stack_config

    return list(run_program(stack_config(stack, root), stack, root=root).resources)


def _compile_cache(volume: Mapping[str, Any]) -> bool:
    """The server's compile cache folder of the bucket (not drawn: the weights' path is)."""
    from policies._server import is_cache_volume

    return is_cache_volume(volume)


def _kind(r: Resource) -> str:
    return str(r.type).rsplit(":", 1)[-1] if str(r.type).startswith(K8S) else ""


def _meta(r: Resource) -> dict[str, Any]:
    return dict(r.inputs.get("metadata") or {})


def _spec(r: Resource) -> dict[str, Any]:
    return dict(r.inputs.get("spec") or {})


def _matches(selector: Mapping[str, Any] | None, labels: Mapping[str, Any] | None) -> bool:
    return bool(selector) and all((labels or {}).get(k) == v for k, v in (selector or {}).items())


def _bucket_for(name: str, buckets: Sequence[Resource]) -> Resource | None:
    """The declared bucket a volume names: the provider gives a bucket ``<resource>-<suffix>``."""
    for b in buckets:
        if name == b.name or name.startswith(f"{b.name}-"):
            return b
    return None


def _is_accelerator_pool(pool: Resource) -> bool:
    config = pool.inputs.get("nodeConfig") or {}
    # GPU pools attach guest accelerators; TPU pools are TPU machine types (ct5lp-, ct6e-...).
    return bool(config.get("guestAccelerators")) or str(config.get("machineType", "")).startswith(
        "ct"
    )


def _pool_box(pool: Resource) -> Box:
    config = pool.inputs.get("nodeConfig") or {}
    scaling = pool.inputs.get("autoscaling") or {}
    lines = [str(config.get("machineType", ""))]
    accelerators = config.get("guestAccelerators") or []
    if accelerators:
        lines[0] += f" + {int(accelerators[0].get('count', 1))} x {accelerators[0].get('type')}"
    lo = scaling.get("totalMinNodeCount", scaling.get("minNodeCount"))
    hi = scaling.get("totalMaxNodeCount", scaling.get("maxNodeCount"))
    if hi is not None:
        lines.append(f"autoscaled {int(lo or 0)}-{int(hi)} nodes")
    title = "accelerator node pool" if _is_accelerator_pool(pool) else "system node pool"
    return Box(pool.name, title, tuple(lines), "compute")


def gke_diagram(stack: str, resources: Sequence[Resource]) -> Diagram:
    """Gateway, HTTPRoute, InferencePool, endpoint picker, vLLM Pods, HPA, node pools, the
    weights' bucket and download job, monitoring: as declared, linked by their references."""
    k8s: dict[str, list[Resource]] = {}
    for r in resources:
        k8s.setdefault(_kind(r), []).append(r)
    deployments = k8s.get("Deployment", [])
    services = k8s.get("Service", [])
    buckets = [r for r in resources if r.type == BUCKET]
    pools = [r for r in resources if r.type == NODE_POOL]
    boxes: dict[str, Box] = {}
    arrows: list[Arrow] = []

    def deployment_of(selector: Mapping[str, Any] | None) -> Resource | None:
        for d in deployments:
            labels = ((_spec(d).get("template") or {}).get("metadata") or {}).get("labels")
            if _matches(selector, labels):
                return d
        return None

    def add_deployment(d: Resource, title: str) -> None:
        spec = _spec(d)
        pod = (spec.get("template") or {}).get("spec") or {}
        containers = ", ".join(c.get("name", "") for c in pod.get("containers", []))
        replicas = spec.get("replicas")
        lines = [f"Deployment {_meta(d).get('name')}", f"containers: {containers}"]
        if replicas is not None:
            lines.append(f"{int(replicas)} replicas")
        boxes[d.name] = Box(d.name, title, tuple(lines), "compute")
        wants_accelerator = any(
            "gke-accelerator" in k or "gke-tpu-accelerator" in k
            for k in (pod.get("nodeSelector") or {})
        )
        for pool in pools:
            if _is_accelerator_pool(pool) == wants_accelerator:
                boxes.setdefault(pool.name, _pool_box(pool))
                arrows.append(Arrow(d.name, pool.name, "runs on"))
        for volume in pod.get("volumes", []):
            if _compile_cache(volume):
                continue
            attrs = (volume.get("csi") or {}).get("volumeAttributes") or {}
            bucket = _bucket_for(str(attrs.get("bucketName", "")), buckets)
            if bucket is not None:
                boxes.setdefault(bucket.name, Box(bucket.name, "model bucket", (), "storage"))
                read_only = (volume.get("csi") or {}).get("readOnly")
                arrows.append(
                    Arrow(d.name, bucket.name, "reads weights" + (" (ro)" * bool(read_only)))
                )

    for gw in k8s.get("Gateway", []):
        spec = _spec(gw)
        boxes[gw.name] = Box(
            gw.name,
            "Gateway",
            (str(_meta(gw).get("name")), f"class {spec.get('gatewayClassName')}"),
            "network",
        )
        boxes["client"] = Box("client", "clients", ("OpenAI API",), "input")
        listeners = [
            f"{x.get('protocol')} :{int(x.get('port', 0))}" for x in spec.get("listeners", [])
        ]
        arrows.append(Arrow("client", gw.name, ", ".join(listeners)))
    for route in k8s.get("HTTPRoute", []):
        spec = _spec(route)
        boxes[route.name] = Box(
            route.name, "HTTPRoute", (str(_meta(route).get("name")),), "network"
        )
        paths = [
            f"{(m.get('path') or {}).get('type')} {(m.get('path') or {}).get('value')}"
            for rule in spec.get("rules", [])
            for m in rule.get("matches", [])
        ]
        for ref in spec.get("parentRefs", []):
            for gw in k8s.get("Gateway", []):
                if _meta(gw).get("name") == ref.get("name"):
                    arrows.append(Arrow(gw.name, route.name, ", ".join(paths) or "every path"))
        for rule in spec.get("rules", []):
            for ref in rule.get("backendRefs", []):
                for pool in k8s.get("InferencePool", []):
                    if ref.get("kind") == "InferencePool" and _meta(pool).get("name") == ref.get(
                        "name"
                    ):
                        arrows.append(Arrow(route.name, pool.name, "backend"))
    for pool in k8s.get("InferencePool", []):
        spec = _spec(pool)
        ports = ", ".join(str(int(p["number"])) for p in spec.get("targetPorts", []))
        boxes[pool.name] = Box(
            pool.name, "InferencePool", (str(_meta(pool).get("name")), f"port {ports}"), "network"
        )
        served = deployment_of((spec.get("selector") or {}).get("matchLabels"))
        if served is not None:
            add_deployment(served, "vLLM Pods")
            arrows.append(Arrow(pool.name, served.name, "routes to"))
        picker_ref = spec.get("endpointPickerRef") or {}
        for svc in services:
            if _meta(svc).get("name") == picker_ref.get("name"):
                picker = deployment_of(_spec(svc).get("selector"))
                if picker is not None:
                    add_deployment(picker, "endpoint picker")
                    arrows.append(Arrow(pool.name, picker.name, "which Pod?", dashed=True))
    for hpa in k8s.get("HorizontalPodAutoscaler", []):
        spec = _spec(hpa)
        target = spec.get("scaleTargetRef") or {}
        metric = ""
        for m in spec.get("metrics", []):
            name = str(((m.get("pods") or {}).get("metric") or {}).get("name", ""))
            metric = name.split("|")[1] if "|" in name else name
        lo, hi = spec.get("minReplicas"), spec.get("maxReplicas")
        boxes[hpa.name] = Box(
            hpa.name,
            "HorizontalPodAutoscaler",
            (f"{int(lo or 1)}-{int(hi or 0)} replicas", f"on {metric}"),
            "control",
        )
        for d in deployments:
            if target.get("kind") == "Deployment" and _meta(d).get("name") == target.get("name"):
                arrows.append(Arrow(hpa.name, d.name, "scales", dashed=True))
    monitors = k8s.get("PodMonitoring", [])
    if monitors:
        boxes["podmonitoring"] = Box(
            "podmonitoring",
            "PodMonitoring",
            (", ".join(str(_meta(m).get("name")) for m in monitors),),
            "watch",
        )
        for m in monitors:
            d = deployment_of((_spec(m).get("selector") or {}).get("matchLabels"))
            if d is not None and d.name in boxes:
                arrows.append(Arrow(d.name, "podmonitoring", "/metrics", dashed=True))
    _add_jobs(resources, buckets, boxes, arrows)
    _add_monitoring(resources, ["podmonitoring"] if monitors else [], boxes, arrows)
    return Diagram(
        f"GKE stack {stack}: what the program declares",
        list(boxes.values()),
        arrows,
        caption="solid: requests and data; dashed: control (picking, scaling) and metrics",
    )


def _add_jobs(
    resources: Sequence[Resource],
    buckets: Sequence[Resource],
    boxes: dict[str, Box],
    arrows: list[Arrow],
) -> None:
    for job in (r for r in resources if r.type == JOB):
        # A Cloud Run v2 job: template (the execution) -> template (the task).
        task = ((job.inputs.get("template") or {}).get("template")) or {}
        containers = task.get("containers") or []
        args = [a for c in containers for a in c.get("args", [])]
        repo = next((a for a in args if "/" in a and not a.startswith("-")), "")
        boxes[job.name] = Box(
            job.name, "download job (Cloud Run)", (f"hf download {repo}",), "control"
        )
        for volume in task.get("volumes") or []:
            bucket = _bucket_for(str((volume.get("gcs") or {}).get("bucket", "")), buckets)
            if bucket is not None:
                boxes.setdefault(bucket.name, Box(bucket.name, "model bucket", (), "storage"))
                arrows.append(Arrow(job.name, bucket.name, "writes weights"))


def _add_monitoring(
    resources: Sequence[Resource],
    writers: Sequence[str],
    boxes: dict[str, Box],
    arrows: list[Arrow],
) -> None:
    monitoring = [r for r in resources if r.type in (DASHBOARD, ALERT)]
    if monitoring:
        kinds = sorted({str(r.type).rsplit(":", 1)[-1] for r in monitoring})
        boxes["monitoring"] = Box("monitoring", "Cloud Monitoring", (", ".join(kinds),), "watch")
        for key in writers:
            arrows.append(Arrow(key, "monitoring", "writes metrics"))


def cloud_run_diagram(stack: str, resources: Sequence[Resource]) -> Diagram:
    """The bucket, its download job, the Cloud Run service with its containers (vLLM and the
    metrics sidecar), and monitoring: as declared, linked by their references."""
    buckets = [r for r in resources if r.type == BUCKET]
    boxes: dict[str, Box] = {}
    arrows: list[Arrow] = []
    for svc in (r for r in resources if r.type == RUN_SERVICE):
        template = svc.inputs.get("template") or {}
        scaling = template.get("scaling") or {}
        boxes["client"] = Box("client", "clients", ("OpenAI API over HTTPS",), "input")
        ingress = str(svc.inputs.get("ingress", "")).removeprefix("INGRESS_TRAFFIC_").lower()
        boxes[svc.name] = Box(
            svc.name,
            "Cloud Run service",
            (
                f"{int(scaling.get('minInstanceCount', 0))}-"
                f"{int(scaling.get('maxInstanceCount', 0))} instances",
                *([f"ingress {ingress}"] if ingress else []),
            ),
            "network",
        )
        arrows.append(Arrow("client", svc.name, "IAM invoker"))
        containers = template.get("containers") or []
        volumes = {v.get("name"): v for v in template.get("volumes") or []}
        for c in containers:
            key = f"{svc.name}/{c.get('name')}"
            image = str(c.get("image", "")).rsplit("/", 1)[-1]
            sidecar = bool(c.get("ports")) is False
            title = "sidecar " + str(c.get("name")) if sidecar else f"container {c.get('name')}"
            boxes[key] = Box(key, title, (image,), "watch" if sidecar else "compute")
            after = ", ".join(c.get("dependsOns") or [])
            label = (f"starts after {after}" if after else "no port") if sidecar else _port(c)
            arrows.append(Arrow(svc.name, key, label))
            for dep in c.get("dependsOns") or []:
                arrows.append(Arrow(f"{svc.name}/{dep}", key, "/metrics", dashed=True))
            for mount in c.get("volumeMounts") or []:
                volume = volumes.get(mount.get("name")) or {}
                if _compile_cache(volume):
                    continue
                bucket = _bucket_for(str((volume.get("gcs") or {}).get("bucket", "")), buckets)
                if bucket is not None:
                    boxes.setdefault(bucket.name, Box(bucket.name, "model bucket", (), "storage"))
                    ro = (volume.get("gcs") or {}).get("readOnly")
                    arrows.append(Arrow(key, bucket.name, "reads weights" + " (ro)" * bool(ro)))
    _add_jobs(resources, buckets, boxes, arrows)
    sidecars = [k for k, b in boxes.items() if b.title.startswith("sidecar")]
    _add_monitoring(resources, sidecars, boxes, arrows)
    return Diagram(
        f"Cloud Run stack {stack}: what the program declares",
        list(boxes.values()),
        arrows,
        caption="solid: requests and data; dashed: vLLM's metrics, read by the sidecar",
    )


def _port(container: Mapping[str, Any]) -> str:
    ports = container.get("ports") or {}
    if isinstance(ports, list):
        ports = ports[0] if ports else {}
    return f"port {int(ports.get('containerPort', 0))}"
