"""A GKE serving stack as plain manifests, for the contract and policy tests' near variants.

The vLLM command line comes from `serving.render.vllm.render` with a shipped stack's settings (the
same code every stack uses); the object shapes follow GKE Inference Gateway's documented
deployment (Gateway -> HTTPRoute -> InferencePool -> endpoint picker, HealthCheckPolicy,
GCPBackendPolicy, PodMonitoring, an autoscaling/v2 HPA on `vllm:num_requests_waiting`
through the Custom Metrics Stackdriver Adapter). Every test starts from these and changes one
thing.
"""

from __future__ import annotations

import copy
from typing import Any

from serving.config.settings import load_settings
from serving.render.vllm import MODEL_MOUNT_PATH, VLLM_GID, VLLM_UID, render
from tests.pulumi_harness import stack_config

NAMESPACE = "gemma4"
POOL = "gemma4-pool"
PICKER = "gemma4-epp"
PICKER_IMAGE = "registry.k8s.io/gateway-api-inference-extension/epp:v1.6.0"
PICKER_PORT = 9002
VLLM_PORT = 8000
LABELS = {"app.kubernetes.io/name": "gemma4-vllm", "gemma4.dev/pool": POOL}

#: (stack, image, node selector, accelerator resource, machine type) per accelerator pool.
POOLS: dict[str, dict[str, Any]] = {
    "l4": {
        "stack": "l4",
        "image": "vllm/vllm-openai:v0.27.1",
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
        "resource": "nvidia.com/gpu",
        "machineType": "g2-standard-8",
        "cpu": "6",
        "memory": "24Gi",
    },
    "tpu-v6e": {
        "stack": "tpu-v6e1",
        "image": "vllm/vllm-tpu:0.27.0",
        "nodeSelector": {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "1x1",
        },
        "resource": "google.com/tpu",
        "machineType": "ct6e-standard-1t",
        "cpu": "40",
        "memory": "160Gi",
    },
}


def vllm_deployment(kind: str = "l4") -> dict[str, Any]:
    pool = POOLS[kind]
    settings = load_settings(stack_config(pool["stack"]))
    command = render(
        settings,
        model_path=f"{MODEL_MOUNT_PATH}/{settings.model.card.folder}",
        port=VLLM_PORT,
    )
    limits = {pool["resource"]: "1", "cpu": pool["cpu"], "memory": pool["memory"]}
    probe_get = {"path": "/health", "port": VLLM_PORT}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gemma4-vllm", "namespace": NAMESPACE, "labels": dict(LABELS)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(LABELS)},
            "template": {
                "metadata": {
                    "labels": dict(LABELS),
                    "annotations": {"gke-gcsfuse/volumes": "true"},
                },
                "spec": {
                    "serviceAccountName": "gemma4-vllm",
                    "nodeSelector": dict(pool["nodeSelector"]),
                    "containers": [
                        {
                            "name": "vllm",
                            "image": pool["image"],
                            "command": list(command.command),
                            "args": list(command.args),
                            "env": [
                                *({"name": k, "value": v} for k, v in command.env.items()),
                                {
                                    "name": "VLLM_API_KEY",
                                    "valueFrom": {
                                        "secretKeyRef": {"name": "gemma4-api-key", "key": "key"}
                                    },
                                },
                            ],
                            "ports": [{"name": "http", "containerPort": VLLM_PORT}],
                            "resources": {"requests": dict(limits), "limits": dict(limits)},
                            "startupProbe": {
                                "httpGet": dict(probe_get),
                                "periodSeconds": 30,
                                "failureThreshold": 120,
                            },
                            "readinessProbe": {"httpGet": dict(probe_get), "periodSeconds": 5},
                            "livenessProbe": {"httpGet": dict(probe_get), "periodSeconds": 30},
                            "volumeMounts": [
                                {"name": "models", "mountPath": MODEL_MOUNT_PATH, "readOnly": True}
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "models",
                            "csi": {
                                "driver": "gcsfuse.csi.storage.gke.io",
                                "readOnly": True,
                                "volumeAttributes": {
                                    "bucketName": "gemma-models-bucket",
                                    "mountOptions": f"implicit-dirs,uid={VLLM_UID},gid={VLLM_GID}",
                                },
                            },
                        }
                    ],
                },
            },
        },
    }


def picker() -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": PICKER}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": PICKER, "namespace": NAMESPACE, "labels": dict(labels)},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": dict(labels)},
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {
                        "containers": [
                            {
                                "name": "epp",
                                "image": PICKER_IMAGE,
                                "args": [f"--pool-name={POOL}", f"--pool-namespace={NAMESPACE}"],
                                "ports": [{"name": "grpc", "containerPort": PICKER_PORT}],
                            }
                        ]
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": PICKER, "namespace": NAMESPACE},
            "spec": {
                "selector": dict(labels),
                "ports": [
                    {
                        "name": "grpc",
                        "port": PICKER_PORT,
                        "targetPort": PICKER_PORT,
                        "appProtocol": "http2",
                    }
                ],
            },
        },
    ]


def routing(gateway_class: str = "gke-l7-rilb") -> list[dict[str, Any]]:
    pool_ref = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": POOL}
    return [
        {
            "apiVersion": "inference.networking.k8s.io/v1",
            "kind": "InferencePool",
            "metadata": {"name": POOL, "namespace": NAMESPACE},
            "spec": {
                "selector": {"matchLabels": dict(LABELS)},
                "targetPorts": [{"number": VLLM_PORT}],
                "endpointPickerRef": {
                    "name": PICKER,
                    "port": {"number": PICKER_PORT},
                    "failureMode": "FailOpen",
                },
            },
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "gemma4", "namespace": NAMESPACE},
            "spec": {
                "gatewayClassName": gateway_class,
                "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}],
            },
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "gemma4", "namespace": NAMESPACE},
            "spec": {
                "parentRefs": [{"name": "gemma4"}],
                "rules": [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                        "backendRefs": [dict(pool_ref)],
                    }
                ],
            },
        },
        {
            "apiVersion": "networking.gke.io/v1",
            "kind": "HealthCheckPolicy",
            "metadata": {"name": "gemma4", "namespace": NAMESPACE},
            "spec": {
                "targetRef": dict(pool_ref),
                "default": {
                    "config": {
                        "type": "HTTP",
                        "httpHealthCheck": {"requestPath": "/health", "port": VLLM_PORT},
                    }
                },
            },
        },
        {
            "apiVersion": "networking.gke.io/v1",
            "kind": "GCPBackendPolicy",
            "metadata": {"name": "gemma4", "namespace": NAMESPACE},
            "spec": {"targetRef": dict(pool_ref), "default": {"timeoutSec": 3600}},
        },
    ]


def monitoring() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "monitoring.googleapis.com/v1",
            "kind": "PodMonitoring",
            "metadata": {"name": "gemma4-vllm", "namespace": NAMESPACE},
            "spec": {
                "selector": {"matchLabels": dict(LABELS)},
                "endpoints": [{"port": VLLM_PORT, "path": "/metrics", "interval": "15s"}],
            },
        },
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "gemma4-vllm", "namespace": NAMESPACE},
            "spec": {
                "scaleTargetRef": {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "gemma4-vllm",
                },
                "minReplicas": 1,
                "maxReplicas": 4,
                "metrics": [
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {
                                "name": "prometheus.googleapis.com|vllm:num_requests_waiting|gauge"
                            },
                            "target": {"type": "AverageValue", "averageValue": "5"},
                        },
                    }
                ],
            },
        },
    ]


def stack(kind: str = "l4", gateway_class: str = "gke-l7-rilb") -> list[dict[str, Any]]:
    """Every Kubernetes object of one accelerator pool's serving stack (deep copies)."""
    return copy.deepcopy([vllm_deployment(kind), *picker(), *routing(gateway_class), *monitoring()])


def find(manifests: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one manifest of `kind` (and `name`)."""
    found = [
        m
        for m in manifests
        if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]
