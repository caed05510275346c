"""vLLM on TPU v6e-1 nodes: queued resources, the nodes' own identity, and a narrow firewall.

Each node copies the checkpoint from the stack's model bucket to its disk and keeps its XLA
cache in the bucket under its key (serving/render/tpu_startup.py); a new checkpoint revision
replaces the nodes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi
from pulumi_gcp import compute, projects, secretmanager, serviceaccount

from components.model_bucket import ModelBucket, checkpoints
from components.naming import account_id
from components.tpu_queued_resource import QueuedResource
from serving.catalog.hardware import Platform
from serving.config.settings import Settings
from serving.render import monitoring as monitoring_spec
from serving.render.tpu_startup import (
    BUCKET_KEY,
    FromBucket,
    OpsAgent,
    StartupSecrets,
    node_cache_key,
    render_metadata,
)
from serving.render.vllm import mounted

#: The node metadata key naming the checkpoint revisions its bucket folders hold.
REVISIONS_KEY = "model-revisions"


@dataclass
class TpuVllmNodesArgs:
    settings: Settings
    project: str
    #: Network tag that the firewall rule targets.
    tag: str
    #: Resource hooks for each queued resource (post-deploy health checks).
    hooks: pulumi.ResourceHookBinding | None
    #: With a job name, each node runs the Ops Agent scraping vLLM's /metrics under it.
    scrape_job: str | None
    #: The model bucket the nodes copy the weights from and keep their XLA cache in.
    bucket: ModelBucket
    #: What must exist before a node boots (the bucket's download jobs).
    depends_on: list[pulumi.Resource]


class TpuVllmNodes(pulumi.ComponentResource):
    """`replicas` independent single-chip TPU nodes, each serving the model on its own."""

    endpoint_urls: pulumi.Output[list[str]]
    """One `http://IP:PORT` per node (requests need the vLLM API key)."""
    node_names: pulumi.Output[list[str]]
    """Full TPU node names."""
    states: pulumi.Output[list[str]]
    """Queued-resource state of each node (ACTIVE once serving hardware is up)."""
    vllm_command_line: pulumi.Output[str]
    """The vLLM command line every node runs."""
    compile_cache_key: str
    """The key of the nodes' XLA cache folder (`compile-cache/<key>/` in the model bucket)."""

    def __init__(
        self, name: str, args: TpuVllmNodesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma4:index:TpuVllmNodes", name, None, opts)
        s = args.settings
        if s.profile.platform is not Platform.TPU:
            raise ValueError(f"hardware {s.hardware!r} is not a TPU")
        tpu = s.tpu
        # The weights are the bucket's folders, copied to the node's disk at the mount path.
        command = mounted(s, port=tpu.serving_port)
        self.compile_cache_key = node_cache_key(
            command, s.image, s.profile.accelerator, s.profile.accelerator_count
        )
        launch = render_metadata(
            command,
            s.image,
            StartupSecrets(args.project, tpu.api_key_secret),
            FromBucket(tuple(c.folder for c in checkpoints(s)), self.compile_cache_key),
            OpsAgent(
                version=s.monitoring.monitoring_ops_agent_version,
                config_yaml=monitoring_spec.ops_agent_config(
                    tpu.serving_port, args.scrape_job, s.monitoring
                ),
            )
            if args.scrape_job is not None
            else None,
        )
        # The revisions are read by no one on the node: a new one (downloaded into the same
        # folders) changes the node, so every node is replaced and copies it, instead of each
        # serving whichever copy it made at its last boot.
        revisions = " ".join(f"{c.folder}@{c.revision}" for c in checkpoints(s))
        metadata = {**launch, BUCKET_KEY: args.bucket.bucket_name, REVISIONS_KEY: revisions}

        account = serviceaccount.Account(
            f"{name}-sa",
            account_id=account_id(name, "tpu"),
            display_name=f"vLLM TPU nodes {name}",
            opts=pulumi.ResourceOptions(parent=self),
        )
        member = account.email.apply(lambda e: f"serviceAccount:{e}")
        grants: list[pulumi.Resource] = [
            secretmanager.SecretIamMember(
                f"{name}-sa-api-key",
                secret_id=tpu.api_key_secret,
                role="roles/secretmanager.secretAccessor",
                member=member,
                opts=pulumi.ResourceOptions(parent=self),
            ),
            args.bucket.grant_read(f"{name}-sa-read-models", member),
            args.bucket.grant_cache_write(f"{name}-sa-write-cache", member, self.compile_cache_key),
        ]
        if args.scrape_job is not None:
            # The Ops Agent writes vLLM's metrics as the node's identity (a project-level role).
            grants.append(
                projects.IAMMember(
                    f"{name}-sa-metric-writer",
                    project=args.project,
                    role="roles/monitoring.metricWriter",
                    member=member,
                    opts=pulumi.ResourceOptions(parent=self),
                )
            )
        if tpu.source_ranges:
            compute.Firewall(
                f"{name}-serving",
                network=tpu.network,
                direction="INGRESS",
                source_ranges=list(tpu.source_ranges),
                target_tags=[args.tag],
                allows=[compute.FirewallAllowArgs(protocol="tcp", ports=[str(tpu.serving_port)])],
                description="vLLM serving port, only from the configured source ranges",
                opts=pulumi.ResourceOptions(parent=self),
            )
        nodes = [
            QueuedResource(
                f"{name}-{index}",
                {
                    "project": args.project,
                    "zone": tpu.zone,
                    "queuedResourceId": f"{name}-{index}",
                    "nodeId": f"{name}-{index}-node",
                    "acceleratorType": s.profile.accelerator,
                    "runtimeVersion": tpu.tpu_runtime_version,
                    "serviceAccountEmail": account.email,
                    "metadata": metadata,
                    "labels": dict(s.labels),
                    "tags": [args.tag],
                    "network": tpu.network,
                    "enableExternalIps": tpu.external_ips,
                    "provisioning": tpu.provisioning,
                    # Only flex-start has a run duration; elsewhere it would be a guard never sent.
                    "maxRunDurationSeconds": _seconds(tpu.max_run_hours)
                    if tpu.provisioning == "flex-start"
                    else None,
                    "validUntilSeconds": _seconds(tpu.valid_until_hours),
                    "servingPort": tpu.serving_port,
                    "createTimeoutSeconds": tpu.create_timeout_minutes * 60,
                    "pollSeconds": 15,
                },
                # The node reads the secret and the bucket at boot: grants and weights first.
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=[*grants, *args.depends_on], hooks=args.hooks
                ),
            )
            for index in range(tpu.replicas)
        ]
        self.endpoint_urls = pulumi.Output.all(*[n.endpointUrl for n in nodes])
        self.node_names = pulumi.Output.all(*[n.nodeName for n in nodes])
        self.states = pulumi.Output.all(*[n.state for n in nodes])
        self.vllm_command_line = pulumi.Output.from_input(command.command_line())
        self.register_outputs(
            {
                "endpoint_urls": self.endpoint_urls,
                "node_names": self.node_names,
                "states": self.states,
                "vllm_command_line": self.vllm_command_line,
            }
        )


def _seconds(hours: float | None) -> int | None:
    return None if hours is None else math.ceil(hours * 3600)
