"""vLLM on TPU v6e-1 nodes: queued resources, the nodes' own identity, and a narrow firewall."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pulumi
from pulumi_gcp import compute, projects, secretmanager, serviceaccount

from components.naming import account_id
from components.tpu_queued_resource import QueuedResource
from serving.catalog.hardware import Platform
from serving.config.settings import Settings
from serving.render import monitoring as monitoring_spec
from serving.render.tpu_startup import OpsAgent, StartupSecrets, render_metadata
from serving.render.vllm import render

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


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

    def __init__(
        self, name: str, args: TpuVllmNodesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma4:index:TpuVllmNodes", name, None, opts)
        s = args.settings
        if s.profile.platform is not Platform.TPU:
            raise ValueError(f"hardware {s.hardware!r} is not a TPU")
        tpu = s.tpu
        # The node downloads the checkpoint from Hugging Face at boot: pin its revision.
        command = render(s, model_path=s.model.model, port=tpu.serving_port, from_hub=True)
        floating = [
            f"{key}={value!r}"
            for key, value in (
                ("modelRevision", s.model.model_revision),
                ("drafterRevision", s.model.drafter_revision if s.model.drafter else None),
            )
            if value is not None and not _COMMIT.match(value)
        ]
        if floating:
            pulumi.log.warn(
                f"{', '.join(floating)}: a branch or tag is resolved again at every node boot, "
                "so a reboot or another replica can load newer weights; set a 40-character "
                "commit sha to pin them."
            )
        metadata = render_metadata(
            command,
            s.image,
            StartupSecrets(args.project, s.weights.hf_token_secret, tpu.api_key_secret),
            OpsAgent(
                version=s.monitoring.monitoring_ops_agent_version,
                config_yaml=monitoring_spec.ops_agent_config(
                    tpu.serving_port, args.scrape_job, s.monitoring
                ),
            )
            if args.scrape_job is not None
            else None,
        )

        account = serviceaccount.Account(
            f"{name}-sa",
            account_id=account_id(name, "tpu"),
            display_name=f"vLLM TPU nodes {name}",
            opts=pulumi.ResourceOptions(parent=self),
        )
        member = account.email.apply(lambda e: f"serviceAccount:{e}")
        grants: list[pulumi.Resource] = [
            secretmanager.SecretIamMember(
                f"{name}-sa-{role}",
                secret_id=secret,
                role="roles/secretmanager.secretAccessor",
                member=member,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for role, secret in (
                ("hf-token", s.weights.hf_token_secret),
                ("api-key", tpu.api_key_secret),
            )
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
                # The node reads both secrets at boot: grant access before it exists.
                opts=pulumi.ResourceOptions(parent=self, depends_on=grants, hooks=args.hooks),
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
