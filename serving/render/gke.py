"""The Kubernetes objects of a GKE stack, as plain manifests rendered from typed settings.

Pure: no Pulumi. Every function returns one manifest as a dict, exactly what `kubectl apply`
would take; the Pulumi component (`components/gke_serving.py`) declares each with
pulumi-kubernetes, so the props a policy or a test sees are these fields. What only the cloud
knows (a bucket, an account, an address) is a parameter, placed as given.
docs/deploy/gke-reference.md says what serves what: the Gateway and its HTTPRoute, the
InferencePool, llm-d-router's endpoint picker (written out field by field after its v0.10.0
Helm chart, not rendered by Helm), GKE's backend policies, PodMonitoring and the autoscaler.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Final

from serving.capacity.coldstart import file_cache
from serving.capacity.idle import GKE_SCALE_DOWN_S
from serving.capacity.perf_stack import scale_up_waiting_requests
from serving.capacity.start_budget import startup_probe
from serving.catalog.hardware import Platform
from serving.config.settings import Settings
from serving.render import compile_cache
from serving.render.monitoring import Vllm
from serving.render.vllm import FUSE_MOUNT_OPTIONS, MODEL_MOUNT_PATH, VllmCommand, mounted

Manifest = dict[str, Any]
#: A value only the cloud knows (the model bucket, a Google account, the Gateway's address or
#: URL): a string, or a deferred one (a Pulumi Output) that the deployment tool resolves where
#: it stands. The renderer only places it, never reads it.
CloudValue = object

INFERENCE_API: Final = "inference.networking.k8s.io"
INFERENCE_POOL_API: Final = f"{INFERENCE_API}/v1"
GATEWAY_API: Final = "gateway.networking.k8s.io/v1"
GKE_POLICY_API: Final = "networking.gke.io/v1"
MONITORING_API: Final = "monitoring.googleapis.com/v1"

#: Gateway classes of GKE's regional Application Load Balancers (both need a proxy-only subnet).
GATEWAY_CLASS_INTERNAL: Final = "gke-l7-rilb"
GATEWAY_CLASS_EXTERNAL: Final = "gke-l7-regional-external-managed"
#: The internal Gateway's one listener: plain HTTP inside the VPC (the regional internal load
#: balancer is reachable from the VPC only; the API key still guards vLLM).
GATEWAY_PORT: Final = 80
#: The public Gateway's one listener: HTTPS, TLS terminated by the load balancer with a
#: Certificate Manager certificate. There is no HTTP listener at all, so nothing (the key
#: included) crosses the internet in clear text, and there is nothing to redirect.
GATEWAY_HTTPS_PORT: Final = 443
#: GKE's listener option naming regional Certificate Manager certificates (comma-separated),
#: the way a regional Gateway takes them (GKE's "Secure a Gateway": certificate maps, the
#: `networking.gke.io/certmap` annotation, serve global Gateways only).
CERT_MANAGER_CERTS: Final = "networking.gke.io/cert-manager-certs"
#: Annotation on a Gateway the stack made public (`public: true`), read by the policy pack.
PUBLIC_ANNOTATION: Final = "gemma4.dev/public"

#: Object names inside the stack's namespace.
VLLM_NAME: Final = "vllm"
POOL_NAME: Final = "vllm"
PICKER_NAME: Final = "vllm-epp"
GATEWAY_NAME: Final = "inference-gateway"
ROUTE_NAME: Final = "vllm"

#: The picker's ports (chart defaults: ext-proc gRPC, gRPC health, Prometheus metrics).
PICKER_EXT_PROC_PORT: Final = 9002
PICKER_HEALTH_PORT: Final = 9003
PICKER_METRICS_PORT: Final = 9090
PICKER_REPLICAS: Final = 2
PICKER_CONFIG_FILE: Final = "default-plugins.yaml"

#: Key, inside the Kubernetes Secret named after `apiKeySecret`, that holds the vLLM API key.
API_KEY_SECRET_KEY: Final = "api-key"
GCSFUSE_DRIVER: Final = "gcsfuse.csi.storage.gke.io"
#: The volume the GCS FUSE CSI driver's sidecar keeps gcsfuse's file cache on when the Pod
#: declares it (gcs-fuse-csi-driver pkg/webhook: SidecarContainerCacheVolumeName).
GCSFUSE_CACHE_VOLUME: Final = "gke-gcsfuse-cache"
#: gcsfuse's option that downloads each file with several workers into the file cache
#: (cfg/params.yaml: `file-cache.enable-parallel-downloads`, default false), and the one that
#: fetches a whole file on a first read at an offset (`file-cache.cache-file-for-range-read`,
#: true in gcsfuse's own aiml-serving profile). The CSI form: "section:key:value".
PARALLEL_DOWNLOADS: Final = "file-cache:enable-parallel-downloads:true"
WHOLE_FILE_ON_RANGE_READ: Final = "file-cache:cache-file-for-range-read:true"
#: The queue metric the autoscaler follows, as the Custom Metrics Stackdriver Adapter names a
#: Managed Service for Prometheus metric (`prometheus.googleapis.com|<name>|<kind>`).
HPA_METRIC: Final = f"prometheus.googleapis.com|{Vllm.WAITING}|gauge"

#: Labels every vLLM Pod carries; the pool selects exactly these.
POOL_LABELS: Final = {"app.kubernetes.io/name": VLLM_NAME, "app.kubernetes.io/part-of": "gemma4"}
PICKER_LABELS: Final = {
    "app.kubernetes.io/name": PICKER_NAME,
    "app.kubernetes.io/part-of": "gemma4",
}


def _meta(settings: Settings, name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": settings.gke.namespace, **extra}


def vllm_command(settings: Settings) -> VllmCommand:
    """vLLM's command line on GKE: the bucket mounted as on Cloud Run, vLLM on `servingPort`."""
    return mounted(settings, port=settings.gke.serving_port)


def vllm_env(settings: Settings) -> dict[str, str]:
    """The vLLM container's literal environment (the API key comes from a Secret besides)."""
    return {
        **vllm_command(settings).env,
        "HF_HUB_OFFLINE": "1",
        **compile_cache.cache_env(settings.profile.platform is Platform.TPU),
    }


def compile_cache_key(settings: Settings) -> str:
    """The key of the vLLM Pods' compile cache, from what they run and where."""
    return compile_cache.cache_key(
        image=settings.image,
        argv=vllm_command(settings).argv,
        env=vllm_env(settings),
        accelerator=settings.profile.accelerator,
        count=settings.profile.accelerator_count,
    )


def namespace(settings: Settings) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": settings.gke.namespace},
    }


def vllm_service_account(settings: Settings, gcp_service_account: CloudValue) -> Manifest:
    """The vLLM Pods' identity; Workload Identity maps it to a Google service account that may
    read the model bucket (and nothing else)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(
            settings,
            VLLM_NAME,
            annotations={"iam.gke.io/gcp-service-account": gcp_service_account},
        ),
    }


def model_mount_options(settings: Settings) -> list[str]:
    """The model volume's gcsfuse options: the owner contract, and gcsfuse's file cache with
    parallel downloads where the node's memory holds it (serving.capacity.coldstart.file_cache),
    its size explicit and below the cache volume's, so gcsfuse evicts before the tmpfs fills."""
    cache = file_cache(settings)
    if cache is None:
        return list(FUSE_MOUNT_OPTIONS)
    return [
        *FUSE_MOUNT_OPTIONS,
        f"file-cache:max-size-mb:{cache.max_size_mib}",
        PARALLEL_DOWNLOADS,
        WHOLE_FILE_ON_RANGE_READ,
    ]


def vllm_deployment(settings: Settings, *, bucket: CloudValue) -> Manifest:
    """vLLM on one accelerator per Pod (one Pod per node), weights from the model bucket."""
    shape = settings.gke_shape
    hw = settings.profile
    port = settings.gke.serving_port
    command = vllm_command(settings)
    probe = startup_probe(settings)
    assert probe is not None  # a GKE stack
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in vllm_env(settings).items()]
    env.append(
        {
            "name": "VLLM_API_KEY",
            "valueFrom": {
                "secretKeyRef": {"name": settings.gke.api_key_secret, "key": API_KEY_SECRET_KEY}
            },
        }
    )
    accelerators = str(hw.accelerator_count)
    health = {"path": "/health", "port": port}
    node_selector = dict(shape.node_selector)
    provisioning = settings.gke.node_provisioning
    if provisioning == "spot":
        node_selector["cloud.google.com/gke-spot"] = "true"
    elif provisioning == "flex-start":
        node_selector["cloud.google.com/gke-flex-start"] = "true"
    container: dict[str, Any] = {
        "name": "vllm",
        "image": settings.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(command.command),
        "args": list(command.args),
        "env": env,
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "resources": {
            "requests": {
                "cpu": shape.pod_cpu,
                "memory": shape.pod_memory,
                shape.accelerator_resource: accelerators,
            },
            "limits": {"memory": shape.pod_memory, shape.accelerator_resource: accelerators},
        },
        "startupProbe": {
            "httpGet": health,
            "initialDelaySeconds": probe.initial_delay_seconds,
            "periodSeconds": probe.period_seconds,
            "timeoutSeconds": probe.timeout_seconds,
            "failureThreshold": probe.failure_threshold,
        },
        "readinessProbe": {
            "httpGet": health,
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": health,
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 3,
        },
        "volumeMounts": [
            {"name": "models", "mountPath": MODEL_MOUNT_PATH, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": compile_cache.CACHE_VOLUME, "mountPath": compile_cache.CACHE_MOUNT_PATH},
        ],
    }
    key = compile_cache_key(settings)
    cache = file_cache(settings)
    # The GCS FUSE CSI driver injects its sidecar into annotated Pods only; with the file
    # cache, the sidecar asks for the memory its cache takes (pkg/webhook/config.go: a request
    # or a limit alone sets both).
    annotations = {"gke-gcsfuse/volumes": "true"}
    cache_volumes: list[dict[str, Any]] = []
    if cache is not None:
        memory = f"{cache.sidecar_memory_gib}Gi"
        annotations |= {"gke-gcsfuse/memory-request": memory, "gke-gcsfuse/memory-limit": memory}
        cache_volumes.append(
            {
                "name": GCSFUSE_CACHE_VOLUME,
                "emptyDir": {"medium": "Memory", "sizeLimit": f"{cache.volume_gib}Gi"},
            }
        )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(settings, VLLM_NAME, labels=dict(POOL_LABELS)),
        "spec": {
            # No `replicas`: the autoscaler owns the count. With it, every apply would reset the
            # Deployment to that number (Kubernetes' HorizontalPodAutoscaler docs: remove
            # spec.replicas from a Deployment an autoscaler scales).
            "selector": {"matchLabels": dict(POOL_LABELS)},
            # One accelerator node per Pod: a new Pod comes up before an old one goes.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": dict(POOL_LABELS), "annotations": annotations},
                "spec": {
                    "serviceAccountName": VLLM_NAME,
                    "terminationGracePeriodSeconds": 130,
                    "nodeSelector": node_selector,
                    "tolerations": [
                        {
                            "key": shape.accelerator_resource,
                            "operator": "Exists",
                            "effect": "NoSchedule",
                        }
                    ],
                    "containers": [container],
                    "volumes": [
                        {
                            "name": "models",
                            "csi": {
                                "driver": GCSFUSE_DRIVER,
                                "readOnly": True,
                                "volumeAttributes": {
                                    "bucketName": bucket,
                                    "mountOptions": ",".join(model_mount_options(settings)),
                                },
                            },
                        },
                        *cache_volumes,
                        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                        {
                            # Writable, and only this key's folder of the bucket (only-dir).
                            "name": compile_cache.CACHE_VOLUME,
                            "csi": {
                                "driver": GCSFUSE_DRIVER,
                                "volumeAttributes": {
                                    "bucketName": bucket,
                                    "mountOptions": ",".join(compile_cache.mount_options(key)),
                                },
                            },
                        },
                    ],
                },
            },
        },
    }


def inference_pool(settings: Settings) -> Manifest:
    """The vLLM Pods as one backend of the Gateway, with the picker choosing among them."""
    return {
        "apiVersion": INFERENCE_POOL_API,
        "kind": "InferencePool",
        "metadata": _meta(settings, POOL_NAME),
        "spec": {
            "selector": {"matchLabels": dict(POOL_LABELS)},
            "targetPorts": [{"number": settings.gke.serving_port}],
            "appProtocol": "http",
            "endpointPickerRef": {
                "name": PICKER_NAME,
                "port": {"number": PICKER_EXT_PROC_PORT},
                # Chosen on purpose (docs/deploy/gke-reference.md): with both picker replicas
                # down the Gateway keeps serving, load-unaware, instead of refusing every request.
                "failureMode": settings.gke.picker_failure_mode,
            },
        },
    }


def gateway_class(settings: Settings) -> str:
    """Internal unless the stack says `public: true`."""
    return GATEWAY_CLASS_EXTERNAL if settings.public else GATEWAY_CLASS_INTERNAL


def listeners(settings: Settings, *, certificate: str) -> list[dict[str, Any]]:
    """Internal: one HTTP listener on port 80 (inside the VPC). Public: one HTTPS listener on
    443 for `gatewayDomain` only, TLS terminated with `certificate` (a regional Certificate
    Manager certificate), and no HTTP listener."""
    if not settings.public:
        return [{"name": "http", "protocol": "HTTP", "port": GATEWAY_PORT}]
    # Settings refuse `public: true` without gatewayDomain.
    return [
        {
            "name": "https",
            "protocol": "HTTPS",
            "port": GATEWAY_HTTPS_PORT,
            "hostname": settings.gke.gateway_domain,
            "tls": {"mode": "Terminate", "options": {CERT_MANAGER_CERTS: certificate}},
        }
    ]


def gateway(settings: Settings, *, address_name: CloudValue, certificate: str) -> Manifest:
    """The regional Gateway; `address_name`: a reserved regional address (Compute Engine name)
    the Gateway takes (GKE's `NamedAddress`), so its IP is known before it exists;
    `certificate`: the Google-managed certificate the stack creates for a public Gateway,
    unless the user names their own (`gatewayCertificate`)."""
    spec = {
        "gatewayClassName": gateway_class(settings),
        "listeners": listeners(
            settings, certificate=settings.gke.gateway_certificate or certificate
        ),
        "addresses": [{"type": "NamedAddress", "value": address_name}],
    }
    metadata = _meta(settings, GATEWAY_NAME)
    if settings.public:
        # The stack's decision, for the no-public-gateway policy to read.
        metadata["annotations"] = {PUBLIC_ANNOTATION: "true"}
    return {"apiVersion": GATEWAY_API, "kind": "Gateway", "metadata": metadata, "spec": spec}


def api_key_secret_command(settings: Settings) -> str:
    """How the operator creates the Kubernetes Secret the vLLM Pods read their API key from,
    out of the Secret Manager secret `apiKeySecret` (the value never passes through Pulumi)."""
    secret, namespace = settings.gke.api_key_secret, settings.gke.namespace
    return (
        f"kubectl create secret generic {secret} -n {namespace} "
        f'--from-literal={API_KEY_SECRET_KEY}="$(gcloud secrets versions access latest '
        f'--secret={secret})"'
    )


def endpoint_url(settings: Settings, ip: str) -> str:
    """The Gateway's base URL (the OpenAI API is under `/v1`): `https://<gatewayDomain>` for a
    public Gateway (the name its certificate is for), `http://<address>` inside the VPC."""
    if settings.public and settings.gke.gateway_domain:
        return f"https://{settings.gke.gateway_domain}"
    return f"http://{ip}"


def dns_records(settings: Settings, ip: str, authorization: list[Any]) -> list[dict[str, str]]:
    """The DNS records a public Gateway needs (none inside the VPC): `gatewayDomain`'s A record
    at the Gateway's address, and the CNAME records of the certificate's DNS authorization
    (Certificate Manager's `dnsResourceRecords`: name, type, data)."""
    domain = settings.gke.gateway_domain
    if not settings.public or domain is None:
        return []
    records = [{"name": f"{domain}.", "type": "A", "data": ip}]
    for record in authorization:
        records.append({key: str(record.get(key, "")) for key in ("name", "type", "data")})
    return records


def endpoint_config_map(settings: Settings, *, url: CloudValue) -> Manifest:
    """Where the Gateway answers, for clients in the cluster and for the post-deploy checks
    (which read `data.endpointUrl` of this object once it exists, and send the API key there:
    the `hooks-endpoint-own-gateway` policy holds it to the stack's own Gateway)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(settings, "gemma4-endpoint"),
        "data": {
            "endpointUrl": url,
            "servedModelName": settings.model.served_name,
            "gatewayClass": gateway_class(settings),
            # Changes with whatever the replicas run (image, command line, resources, probes,
            # picker), so a `pulumi up` that changes them updates this object and runs the
            # post-deploy checks again.
            "servingRevision": serving_revision(settings),
        },
    }


def serving_revision(settings: Settings) -> str:
    """A short digest of the vLLM Deployment, the pool and the picker as rendered."""
    rendered = [
        vllm_deployment(settings, bucket="-"),
        inference_pool(settings),
        picker_deployment(settings),
        autoscaler(settings),
    ]
    digest = hashlib.sha256(json.dumps(rendered, sort_keys=True).encode()).hexdigest()
    return digest[:16]


def http_route(settings: Settings) -> Manifest:
    """Every path of the Gateway to the InferencePool (and to nothing else)."""
    return {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": _meta(settings, ROUTE_NAME),
        "spec": {
            "parentRefs": [{"name": GATEWAY_NAME}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [_pool_ref()],
                }
            ],
        },
    }


def _pool_ref() -> dict[str, str]:
    return {"group": INFERENCE_API, "kind": "InferencePool", "name": POOL_NAME}


def health_check_policy(settings: Settings) -> Manifest:
    """GKE's load balancer health check of the pool's endpoints: vLLM's `/health`."""
    return {
        "apiVersion": GKE_POLICY_API,
        "kind": "HealthCheckPolicy",
        "metadata": _meta(settings, POOL_NAME),
        "spec": {
            "targetRef": _pool_ref(),
            "default": {
                "timeoutSec": 2,
                "checkIntervalSec": 5,
                "config": {
                    "type": "HTTP",
                    "httpHealthCheck": {
                        "requestPath": "/health",
                        "port": settings.gke.serving_port,
                    },
                },
            },
        },
    }


def backend_policy(settings: Settings, *, security_policy: CloudValue | None) -> Manifest:
    """GKE's backend settings for the pool: a timeout long enough for long generations, request
    logging, and (external Gateway) the Cloud Armor policy that admits `sourceRanges` only."""
    default: dict[str, Any] = {
        "timeoutSec": settings.gke.backend_timeout_seconds,
        "logging": {"enabled": True},
    }
    if security_policy is not None:
        default["securityPolicy"] = security_policy
    return {
        "apiVersion": GKE_POLICY_API,
        "kind": "GCPBackendPolicy",
        "metadata": _meta(settings, POOL_NAME),
        "spec": {"targetRef": _pool_ref(), "default": default},
    }


# --- the endpoint picker (llm-d-router v0.10.0 chart shapes) ---------------------------------


def _picker_object(
    settings: Settings, api_version: str, kind: str, name: str, **fields: Any
) -> Manifest:
    metadata = _meta(settings, name, labels=dict(PICKER_LABELS))
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}


def _binding(settings: Settings, name: str, role: str) -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(settings, name),
        "subjects": [
            {"kind": "ServiceAccount", "name": PICKER_NAME, "namespace": settings.gke.namespace}
        ],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
    }


#: The chart's default scheduling profile for vLLM over HTTP (queue, KV cache and prefix cache
#: scorers; weights 2, 2, 3), at llm-d-router v0.10.0 (`routerlib/templates/_config.yaml`).
PICKER_PLUGINS = """\
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
- type: metrics-data-source
  parameters:
    scheme: "http"
    path: "/metrics"
    insecureSkipVerify: true
- type: core-metrics-extractor
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
"""


def picker_args(settings: Settings) -> list[str]:
    """The picker's flags as the v0.10.0 chart renders them for an InferencePool, two replicas
    (leader election on), tracing off, and an unauthenticated `/metrics` (scraped in-cluster
    by Managed Service for Prometheus, which sends no bearer token)."""
    return [
        "--pool-name",
        POOL_NAME,
        "--pool-namespace",
        settings.gke.namespace,
        "--pool-group",
        INFERENCE_API,
        "--zap-encoder",
        "json",
        "--config-file",
        f"/config/{PICKER_CONFIG_FILE}",
        "--ha-enable-leader-election",
        "--grpc-health-port",
        str(PICKER_HEALTH_PORT),
        "--tracing=false",
        "--metrics-endpoint-auth=false",
    ]


def picker_deployment(settings: Settings) -> Manifest:
    """Two picker replicas, one leader (chart: `_deployment.yaml`, `Recreate` as the chart
    explains: a rolling update would keep the old leader alive)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(settings, PICKER_NAME, labels=dict(PICKER_LABELS)),
        "spec": {
            "replicas": PICKER_REPLICAS,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(PICKER_LABELS)},
            "template": {
                "metadata": {"labels": dict(PICKER_LABELS)},
                "spec": {
                    "serviceAccountName": PICKER_NAME,
                    "terminationGracePeriodSeconds": 130,
                    "containers": [
                        {
                            "name": "epp",
                            "image": settings.gke.picker_image,
                            "imagePullPolicy": "IfNotPresent",
                            "args": picker_args(settings),
                            # The chart asks 8 CPUs and 8 GiB for large fleets; this pool has
                            # at most 64 endpoints.
                            "resources": {
                                "requests": {"cpu": "1", "memory": "2Gi"},
                                "limits": {"memory": "4Gi"},
                            },
                            "ports": [
                                {"name": "grpc", "containerPort": PICKER_EXT_PROC_PORT},
                                {"name": "grpc-health", "containerPort": PICKER_HEALTH_PORT},
                                {"name": "metrics", "containerPort": PICKER_METRICS_PORT},
                            ],
                            "livenessProbe": {
                                "grpc": {"port": PICKER_HEALTH_PORT, "service": "liveness"},
                                "initialDelaySeconds": 5,
                                "periodSeconds": 10,
                            },
                            "readinessProbe": {
                                "grpc": {"port": PICKER_HEALTH_PORT, "service": "readiness"},
                                "periodSeconds": 2,
                            },
                            "env": [
                                {
                                    "name": "NAMESPACE",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                },
                                {
                                    "name": "POD_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                },
                            ],
                            "volumeMounts": [
                                {"name": "plugins-config-volume", "mountPath": "/config"}
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "plugins-config-volume", "configMap": {"name": PICKER_NAME}}
                    ],
                },
            },
        },
    }


def picker_service(settings: Settings) -> Manifest:
    """The Service the pool's `endpointPickerRef` names (chart: `_service.yaml`)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(settings, PICKER_NAME, labels=dict(PICKER_LABELS)),
        "spec": {
            "type": "ClusterIP",
            "selector": dict(PICKER_LABELS),
            "ports": [
                {
                    "name": "grpc-ext-proc",
                    "protocol": "TCP",
                    "port": PICKER_EXT_PROC_PORT,
                    "appProtocol": "kubernetes.io/h2c",
                },
                {"name": "http-metrics", "protocol": "TCP", "port": PICKER_METRICS_PORT},
            ],
        },
    }


def picker(settings: Settings) -> list[Manifest]:
    """Every object of the endpoint picker, in apply order."""
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        _picker_object(settings, "v1", "ServiceAccount", PICKER_NAME),
        # Read the Pods it picks among (chart: `_rbac.yaml`).
        _picker_object(
            settings,
            rbac,
            "Role",
            f"{PICKER_NAME}-sa",
            rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]}],
        ),
        _binding(settings, f"{PICKER_NAME}-sa", f"{PICKER_NAME}-sa"),
        # Leases for leader election between the two replicas (chart: `_leader-election-rbac`).
        _picker_object(
            settings,
            rbac,
            "Role",
            f"{PICKER_NAME}-leader-election",
            rules=[
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                },
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            ],
        ),
        _binding(
            settings, f"{PICKER_NAME}-leader-election-binding", f"{PICKER_NAME}-leader-election"
        ),
        _picker_object(
            settings, "v1", "ConfigMap", PICKER_NAME, data={PICKER_CONFIG_FILE: PICKER_PLUGINS}
        ),
        picker_deployment(settings),
        picker_service(settings),
    ]


# --- monitoring and autoscaling --------------------------------------------------------------


def pod_monitoring(settings: Settings, name: str, labels: dict[str, str], port: str) -> Manifest:
    """Managed Service for Prometheus scrapes `/metrics` of the Pods with `labels` (vLLM's, or
    the picker's own: its view of the pool, scheduling latency, queue)."""
    interval = f"{settings.monitoring.monitoring_scrape_interval_seconds}s"
    return {
        "apiVersion": MONITORING_API,
        "kind": "PodMonitoring",
        "metadata": _meta(settings, name),
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "endpoints": [{"port": port, "path": "/metrics", "interval": interval}],
        },
    }


def autoscaler(settings: Settings) -> Manifest:
    """Scale vLLM between minReplicas and maxReplicas on its own queue: the average number of
    requests waiting per replica (Managed Prometheus -> Custom Metrics Stackdriver Adapter)."""
    g = settings.gke
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(settings, VLLM_NAME),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": VLLM_NAME},
            "minReplicas": g.min_replicas,
            "maxReplicas": g.max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": HPA_METRIC},
                        "target": {
                            "type": "AverageValue",
                            "averageValue": str(scale_up_waiting_requests(settings)),
                        },
                    },
                }
            ],
            # A new replica costs a node and minutes of start-up: scale down slowly.
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0},
                "scaleDown": {"stabilizationWindowSeconds": GKE_SCALE_DOWN_S},
            },
        },
    }


#: The Custom Metrics Stackdriver Adapter, as data: Google's deployment of it for the new
#: resource model (GoogleCloudPlatform/k8s-stackdriver, `custom-metrics-stackdriver-adapter/
#: deploy/production/adapter_new_resource_model.yaml`), image pinned to the tag that file names.
ADAPTER_FILE: Final = Path(__file__).resolve().parents[1] / "data" / "gke-metrics-adapter.json"
ADAPTER_NAMESPACE: Final = "custom-metrics"
ADAPTER_NAME: Final = "custom-metrics-stackdriver-adapter"


def metrics_adapter(gcp_service_account: CloudValue) -> list[Manifest]:
    """The adapter that serves Managed Prometheus metrics to the autoscaler as custom metrics;
    Workload Identity maps its ServiceAccount to a Google service account with
    `roles/monitoring.viewer`."""
    found: list[Manifest] = json.loads(ADAPTER_FILE.read_text())
    for manifest in found:
        if manifest["kind"] == "ServiceAccount":
            manifest["metadata"]["annotations"] = {
                "iam.gke.io/gcp-service-account": gcp_service_account
            }
    return found
