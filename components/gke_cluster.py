"""A GKE Standard cluster for the Inference Gateway: Gateway API, Managed Service for
Prometheus, Workload Identity, the GCS FUSE CSI driver, a proxy-only subnet for the regional
Gateway classes, a small system node pool and one autoscaled accelerator node pool."""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s
from pulumi_gcp import compute, container, projects, serviceaccount

from components.naming import account_id
from serving.config.platforms import EXISTING_PROXY_SUBNET
from serving.config.settings import Settings

#: The roles GKE documents for a node service account with least privilege.
NODE_ROLES = ("roles/container.defaultNodeServiceAccount",)
#: Disk of each accelerator node (the vLLM images are tens of GB).
ACCELERATOR_DISK_GB = 200


def kubeconfig(name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig for the cluster that authenticates with `gke-gcloud-auth-plugin` (the
    credentials of whoever runs `pulumi up`; nothing secret is stored)."""
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "installHint": "Install gke-gcloud-auth-plugin: "
            "https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl",
            "provideClusterInfo": True,
        }
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": name,
                    "cluster": {
                        "server": f"https://{endpoint}",
                        "certificate-authority-data": ca_certificate,
                    },
                }
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [{"name": name, "user": user}],
        }
    )


class GkeCluster(pulumi.ComponentResource):
    """The cluster, its node pools and the proxy-only subnet; `provider` talks to it."""

    cluster_name: pulumi.Output[str]
    provider: k8s.Provider
    accelerator_pool: container.NodePool

    def __init__(
        self,
        name: str,
        settings: Settings,
        project: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gemma4:index:GkeCluster", name, None, opts)
        s = settings
        g = s.gke
        region, zone = s.region, s.gke.zone
        assert zone is not None  # settings require it on platform gke
        child = pulumi.ResourceOptions(parent=self)

        # Regional Application Load Balancers (the gke-l7-rilb and regional external Gateway
        # classes) run their proxies in this subnet; one per region and network
        # (proxySubnetRange `existing`: the one the region already has).
        proxy_subnet: list[pulumi.Resource] = []
        if g.proxy_subnet_range != EXISTING_PROXY_SUBNET:
            proxy_subnet = [
                compute.Subnetwork(
                    f"{name}-proxy-only",
                    region=region,
                    network=s.gke.network,
                    ip_cidr_range=g.proxy_subnet_range,
                    purpose="REGIONAL_MANAGED_PROXY",
                    role="ACTIVE",
                    opts=child,
                )
            ]
        self.node_account = serviceaccount.Account(
            f"{name}-nodes",
            account_id=account_id(name, "nodes"),
            display_name=f"GKE nodes {name}",
            opts=child,
        )
        node_roles = [
            projects.IAMMember(
                f"{name}-nodes-{role.rsplit('.', 1)[-1]}",
                project=project,
                role=role,
                member=self.node_account.email.apply(lambda e: f"serviceAccount:{e}"),
                opts=child,
            )
            for role in NODE_ROLES
        ]
        cluster = container.Cluster(
            f"{name}-cluster",
            location=region,
            node_locations=[zone],
            network=s.gke.network,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=container.ClusterIpAllocationPolicyArgs(),
            # Node pools are declared below; the default pool is removed at creation.
            remove_default_node_pool=True,
            initial_node_count=1,
            deletion_protection=False,
            release_channel=container.ClusterReleaseChannelArgs(channel=g.release_channel),
            min_master_version=g.cluster_version,
            gateway_api_config=container.ClusterGatewayApiConfigArgs(channel="CHANNEL_STANDARD"),
            workload_identity_config=container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{project}.svc.id.goog"
            ),
            monitoring_config=container.ClusterMonitoringConfigArgs(
                enable_components=["SYSTEM_COMPONENTS"],
                managed_prometheus=container.ClusterMonitoringConfigManagedPrometheusArgs(
                    enabled=True
                ),
            ),
            addons_config=container.ClusterAddonsConfigArgs(
                gcs_fuse_csi_driver_config=container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(
                    enabled=True
                ),
                http_load_balancing=container.ClusterAddonsConfigHttpLoadBalancingArgs(
                    disabled=False
                ),
            ),
            resource_labels=dict(s.labels),
            opts=pulumi.ResourceOptions(parent=self, depends_on=proxy_subnet),
        )
        node_metadata = container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA")
        scopes = ["https://www.googleapis.com/auth/cloud-platform"]
        system_pool = container.NodePool(
            f"{name}-system",
            cluster=cluster.id,
            location=region,
            node_locations=[zone],
            autoscaling=container.NodePoolAutoscalingArgs(
                total_min_node_count=1, total_max_node_count=3
            ),
            node_config=container.NodePoolNodeConfigArgs(
                machine_type=g.system_machine_type,
                service_account=self.node_account.email,
                oauth_scopes=scopes,
                workload_metadata_config=node_metadata,
                resource_labels=dict(s.labels),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=node_roles),
        )
        self.accelerator_pool = self._accelerator_pool(
            name, s, cluster, node_metadata, scopes, node_roles
        )
        self.cluster_name = cluster.name
        ca = cluster.master_auth.apply(lambda auth: auth.cluster_ca_certificate if auth else "")
        config = pulumi.Output.all(cluster.name, cluster.endpoint, ca).apply(
            lambda v: kubeconfig(str(v[0]), str(v[1] or ""), str(v[2] or ""))
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=config,
            # Server-side apply, so fields GKE's controllers own are not fought over.
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[system_pool, self.accelerator_pool]
            ),
        )
        self.register_outputs({"cluster_name": self.cluster_name, "endpoint": cluster.endpoint})

    def _accelerator_pool(
        self,
        name: str,
        s: Settings,
        cluster: container.Cluster,
        node_metadata: container.NodePoolNodeConfigWorkloadMetadataConfigArgs,
        scopes: list[str],
        node_roles: list[projects.IAMMember],
    ) -> container.NodePool:
        g = s.gke
        shape = s.gke_shape
        provisioning = g.node_provisioning
        accelerators = None
        if shape.gpu_type is not None:
            accelerators = [
                container.NodePoolNodeConfigGuestAcceleratorArgs(
                    type=shape.gpu_type,
                    count=s.profile.accelerator_count,
                    gpu_driver_installation_config=(
                        container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                            gpu_driver_version="LATEST"
                        )
                    ),
                )
            ]
        affinity = None
        if provisioning == "reservation":
            affinity = container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="SPECIFIC_RESERVATION",
                key="compute.googleapis.com/reservation-name",
                values=[str(g.reservation_name)],
            )
        elif provisioning in ("spot", "flex-start"):
            # Flex-start needs NO_RESERVATION; spot VMs do not consume reservations.
            affinity = container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="NO_RESERVATION"
            )
        return container.NodePool(
            f"{name}-accelerators",
            cluster=cluster.id,
            location=s.region,
            node_locations=[str(s.gke.zone)],
            # One replica per node; one node more than maxReplicas for a rolling update's surge.
            autoscaling=container.NodePoolAutoscalingArgs(
                total_min_node_count=0,
                total_max_node_count=g.max_replicas + 1,
                location_policy="ANY" if provisioning in ("spot", "flex-start") else "BALANCED",
            ),
            node_config=container.NodePoolNodeConfigArgs(
                machine_type=shape.machine_type,
                disk_size_gb=ACCELERATOR_DISK_GB,
                spot=provisioning == "spot",
                flex_start=True if provisioning == "flex-start" else None,
                reservation_affinity=affinity,
                guest_accelerators=accelerators,
                service_account=self.node_account.email,
                oauth_scopes=scopes,
                workload_metadata_config=node_metadata,
                resource_labels=dict(s.labels),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=node_roles),
        )
