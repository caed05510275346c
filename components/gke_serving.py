"""vLLM replicas behind GKE Inference Gateway: the Kubernetes objects of `serving.render.gke`,
declared with pulumi-kubernetes, and the Google Cloud pieces they need (identities, the
Gateway's address, the Cloud Armor policy of a public Gateway)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_gcp import certificatemanager, compute, projects, serviceaccount

from components.model_bucket import ModelBucket
from components.naming import account_id, token
from serving.capacity.start_budget import startup_probe
from serving.config.settings import Settings
from serving.render import gke
from serving.render.gke import Manifest

#: Cloud Armor takes at most 10 source ranges per rule (`srcIpRanges`, pulumi-gcp's docs).
ARMOR_RANGES_PER_RULE = 10
_DEFAULT_RULE_PRIORITY = 2147483647

#: Kubernetes kinds with a typed class in pulumi-kubernetes; every other kind (the custom
#: resources) is declared as `apiextensions.CustomResource`.
_TYPED: dict[tuple[str, str], Callable[..., pulumi.CustomResource]] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Service"): k8s.core.v1.Service,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("autoscaling/v2", "HorizontalPodAutoscaler"): k8s.autoscaling.v2.HorizontalPodAutoscaler,
    ("apiregistration.k8s.io/v1", "APIService"): k8s.apiregistration.v1.APIService,
}
#: Top-level manifest fields beside apiVersion/kind/metadata, and their keyword arguments.
_FIELDS = {
    "spec": "spec",
    "data": "data",
    "rules": "rules",
    "subjects": "subjects",
    "roleRef": "role_ref",
}


def declare(name: str, manifest: Manifest, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One manifest as a pulumi-kubernetes resource: its typed class where pulumi-kubernetes
    has one, `apiextensions.CustomResource` otherwise; the props are the manifest's fields,
    Outputs among them resolved by Pulumi where they stand."""
    kwargs = {arg: manifest[key] for key, arg in _FIELDS.items() if key in manifest}
    typed = _TYPED.get((manifest["apiVersion"], manifest["kind"]))
    if typed is not None:
        return typed(name, metadata=manifest["metadata"], opts=opts, **kwargs)
    return k8s.apiextensions.CustomResource(
        name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        opts=opts,
        **kwargs,
    )


@dataclass
class GkeServingArgs:
    settings: Settings
    project: str
    provider: k8s.Provider
    bucket: ModelBucket
    #: Resources the vLLM Pods need first (weights download jobs, node pools).
    depends_on: Sequence[pulumi.Resource]
    #: Post-deploy checks, run once the endpoint ConfigMap (the Gateway's URL) exists.
    hooks: pulumi.ResourceHookBinding | None


class GkeServing(pulumi.ComponentResource):
    """vLLM Deployment, InferencePool, endpoint picker, Gateway and route, GKE's policies,
    monitoring and the autoscaler, on an existing cluster."""

    endpoint_url: pulumi.Output[str]
    """`https://<gatewayDomain>` (public) or `http://<Gateway address>` (internal); the OpenAI
    API is under /v1."""
    dns_records: pulumi.Output[list[dict[str, str]]]
    """DNS records the user creates for a public Gateway (none for an internal one)."""
    gateway_address: pulumi.Output[str]

    def __init__(
        self, name: str, args: GkeServingArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma4:index:GkeServing", name, None, opts)
        s = args.settings
        child = pulumi.ResourceOptions(parent=self)

        vllm_account = self._workload_account(name, args, "vllm", gke.VLLM_NAME)
        member = vllm_account.email.apply(lambda e: f"serviceAccount:{e}")
        reader = args.bucket.grant_read(f"{name}-vllm-read-models", member)
        cache_writer = args.bucket.grant_cache_write(
            f"{name}-vllm-write-cache", member, gke.compile_cache_key(s)
        )
        adapter_account = self._workload_account(
            name, args, "metrics", gke.ADAPTER_NAME, namespace=gke.ADAPTER_NAMESPACE
        )
        viewer = projects.IAMMember(
            f"{name}-metrics-viewer",
            project=args.project,
            role="roles/monitoring.viewer",
            member=adapter_account.email.apply(lambda e: f"serviceAccount:{e}"),
            opts=child,
        )
        public = s.public
        address = compute.Address(
            f"{name}-gateway-ip",
            region=s.region,
            address_type="EXTERNAL" if public else "INTERNAL",
            # An internal Gateway's address comes from the nodes' subnet (the network's
            # subnet in this region).
            subnetwork=None if public else s.gke.network,
            labels=dict(s.labels),
            opts=child,
        )
        security_policy = self._armor(name, s) if public else None
        certificate, authorization = self._certificate(name, s) if public else (None, None)

        endpoint_url = address.address.apply(lambda ip: gke.endpoint_url(s, ip))

        # What only the cloud knows stands in the objects as the Outputs themselves, so kinds
        # and names are known at preview and Pulumi resolves the values.
        def kube(*after: pulumi.Resource, **extra: Any) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self, provider=args.provider, depends_on=list(after), **extra
            )

        # The metrics adapter (cluster-wide, its own namespace).
        adapter: list[pulumi.CustomResource] = []
        for manifest in gke.metrics_adapter(adapter_account.email):
            adapter.append(
                declare(f"{name}-{_ident(manifest)}", manifest, kube(viewer, *adapter[:1]))
            )

        ns = declare(f"{name}-namespace", gke.namespace(s), kube())
        vllm_sa = declare(
            f"{name}-vllm-ksa", gke.vllm_service_account(s, vllm_account.email), kube(ns)
        )
        picker = [declare(f"{name}-{_ident(p)}", p, kube(ns)) for p in gke.picker(s)]
        probe = startup_probe(s)
        assert probe is not None  # GKE probes every Pod
        rollout = f"{(probe.budget_seconds + 900) // 60}m"
        deployment = declare(
            f"{name}-vllm",
            gke.vllm_deployment(s, bucket=args.bucket.bucket_name),
            kube(
                ns,
                vllm_sa,
                reader,
                cache_writer,
                *args.depends_on,
                # pulumi-kubernetes waits for the rollout: allow the whole startup probe.
                custom_timeouts=pulumi.CustomTimeouts(create=rollout, update=rollout),
            ),
        )
        pool = declare(f"{name}-pool", gke.inference_pool(s), kube(ns, *picker))
        gateway = declare(
            f"{name}-gateway",
            # The certificate is named by the stack, so known before it exists.
            gke.gateway(s, address_name=address.name, certificate=cloud_name(name, "gateway")),
            kube(ns, *([certificate] if certificate else [])),
        )
        on_pool = kube(ns, pool, gateway)
        route = declare(f"{name}-route", gke.http_route(s), on_pool)
        armor = security_policy.name if security_policy is not None else None
        policies = [
            declare(f"{name}-health-check-policy", gke.health_check_policy(s), on_pool),
            declare(
                f"{name}-backend-policy", gke.backend_policy(s, security_policy=armor), on_pool
            ),
        ]
        declare(f"{name}-autoscaler", gke.autoscaler(s), kube(deployment, *adapter))
        # vLLM's metrics feed the autoscaler: scraped whether or not `monitoring` is on.
        declare(
            f"{name}-vllm-monitoring",
            gke.pod_monitoring(s, gke.VLLM_NAME, gke.POOL_LABELS, "http"),
            kube(ns),
        )
        if s.monitoring.monitoring:
            declare(
                f"{name}-picker-monitoring",
                gke.pod_monitoring(s, gke.PICKER_NAME, gke.PICKER_LABELS, "metrics"),
                kube(ns),
            )
        # Created last: its hooks (health checks, benchmark) call the Gateway's address.
        declare(
            f"{name}-endpoint",
            gke.endpoint_config_map(s, url=endpoint_url),
            kube(deployment, route, *policies, hooks=args.hooks),
        )

        self.gateway_address = address.address
        self.endpoint_url = endpoint_url
        #: DNS records to create: the domain's A record, and (a Google-managed certificate)
        #: the DNS authorization's CNAME (None until it exists), without which the certificate is
        #: never issued.
        self.dns_records = pulumi.Output.all(
            address.address,
            authorization.dns_resource_records if authorization is not None else [],
        ).apply(lambda found: gke.dns_records(s, found[0], found[1] or []))
        self.register_outputs(
            {
                "endpoint_url": self.endpoint_url,
                "gateway_address": self.gateway_address,
                "dns_records": self.dns_records,
            }
        )

    def _workload_account(
        self,
        name: str,
        args: GkeServingArgs,
        role: str,
        ksa: str,
        *,
        namespace: str | None = None,
    ) -> serviceaccount.Account:
        """A Google service account that the Kubernetes ServiceAccount `ksa` acts as
        (Workload Identity: `roles/iam.workloadIdentityUser` for that one subject)."""
        account = serviceaccount.Account(
            f"{name}-{role}",
            account_id=account_id(name, role),
            display_name=f"GKE {role} {name}",
            opts=pulumi.ResourceOptions(parent=self),
        )
        subject = f"{namespace or args.settings.gke.namespace}/{ksa}"
        serviceaccount.IAMMember(
            f"{name}-{role}-workload-identity",
            service_account_id=account.name,
            role="roles/iam.workloadIdentityUser",
            member=f"serviceAccount:{args.project}.svc.id.goog[{subject}]",
            opts=pulumi.ResourceOptions(parent=self),
        )
        return account

    def _certificate(
        self, name: str, s: Settings
    ) -> tuple[certificatemanager.Certificate | None, certificatemanager.DnsAuthorization | None]:
        """The public Gateway's certificate: None when the stack names one of the user's
        (`gatewayCertificate`); otherwise a regional Google-managed Certificate Manager
        certificate for `gatewayDomain`, authorized by DNS (a per-project CNAME record, the
        kind regional certificates take), so it is issued before any traffic arrives."""
        domain = s.gke.gateway_domain
        if s.gke.gateway_certificate is not None or domain is None:
            return None, None
        authorization = certificatemanager.DnsAuthorization(
            f"{name}-dns-authorization",
            domain=domain,
            location=s.region,
            type="PER_PROJECT_RECORD",
            labels=dict(s.labels),
            description=f"Proves control of {domain} for the Gateway's certificate",
            opts=pulumi.ResourceOptions(parent=self),
        )
        certificate = certificatemanager.Certificate(
            f"{name}-certificate",
            # Named, not auto-named: the Gateway's listener refers to it by this name.
            name=cloud_name(name, "gateway"),
            location=s.region,
            labels=dict(s.labels),
            description=f"Google-managed certificate of the Gateway for {domain}",
            managed=certificatemanager.CertificateManagedArgs(
                domains=[domain], dns_authorizations=[authorization.id]
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return certificate, authorization

    def _armor(self, name: str, s: Settings) -> compute.RegionSecurityPolicy:
        """Cloud Armor for the external Gateway: `sourceRanges` allowed, everything else 403."""

        def rule(
            action: str, priority: int, description: str, ranges: list[str]
        ) -> compute.RegionSecurityPolicyRuleArgs:
            return compute.RegionSecurityPolicyRuleArgs(
                action=action,
                priority=priority,
                description=description,
                match=compute.RegionSecurityPolicyRuleMatchArgs(
                    versioned_expr="SRC_IPS_V1",
                    config=compute.RegionSecurityPolicyRuleMatchConfigArgs(src_ip_ranges=ranges),
                ),
            )

        ranges = list(s.gke.source_ranges)
        step = ARMOR_RANGES_PER_RULE
        rules = [
            rule("allow", 1000 + n, "sourceRanges of the stack", ranges[i : i + step])
            for n, i in enumerate(range(0, len(ranges), step))
        ]
        rules.append(rule("deny(403)", _DEFAULT_RULE_PRIORITY, "everyone else", ["*"]))
        return compute.RegionSecurityPolicy(
            f"{name}-armor",
            # Named, not auto-named: the GCPBackendPolicy refers to it by this name.
            name=cloud_name(name, "clients"),
            region=s.region,
            type="CLOUD_ARMOR",
            description="Clients allowed to reach the vLLM Gateway",
            rules=rules,
            opts=pulumi.ResourceOptions(parent=self),
        )


def cloud_name(name: str, suffix: str) -> str:
    """A Compute Engine or Certificate Manager resource name for `name`-`suffix` (lowercase
    letters, digits, hyphens; at most 63 characters)."""
    raw = re.sub(r"[^a-z0-9-]", "-", f"{name}-{suffix}".lower()).strip("-")
    return raw if len(raw) <= 63 else f"{raw[:50].rstrip('-')}-{token(raw)}"


def _ident(manifest: Manifest) -> str:
    """A Pulumi name part for a manifest: kind and object name, lowercase."""
    return f"{manifest['kind'].lower()}-{manifest['metadata']['name']}".replace(":", "-")
