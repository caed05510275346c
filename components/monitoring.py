"""vLLM's metrics in Cloud Monitoring: the Cloud Run collector sidecar, a dashboard and alerts.

The bodies come from `serving.render.monitoring` (pure, tested against the API's discovery
documents); this module only declares them as Pulumi resources.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi_gcp import cloudrunv2, monitoring, projects, secretmanager

from serving.config.settings import Settings
from serving.render import monitoring as spec
from serving.render.gke import gateway_class

METRIC_WRITER = "roles/monitoring.metricWriter"
SECRET_ACCESSOR = "roles/secretmanager.secretAccessor"


@dataclass
class CollectorSidecar:
    """What a Cloud Run service needs to run the Managed Prometheus collector beside vLLM."""

    container: cloudrunv2.ServiceTemplateContainerArgs
    volume: cloudrunv2.ServiceTemplateVolumeArgs
    #: The config secret's version and the grants: the revision must not start before them.
    depends_on: list[pulumi.Resource] = field(default_factory=list)


def cloud_run_collector(
    name: str,
    settings: Settings,
    *,
    project: str,
    ingress_container: str,
    port: int,
    account_email: pulumi.Output[str],
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource] = (),
) -> CollectorSidecar:
    """Declare the collector's config secret and its identity's two grants; return the sidecar.

    The sidecar starts only after vLLM's startup probe has passed (`depends_on` on the vLLM
    container), so it can neither delay nor fail vLLM's start; it has no probes of its own, so
    Cloud Run never restarts an instance because of the collector.
    """
    m = settings.monitoring
    # `after`: the enabled APIs (Secret Manager, Cloud Monitoring) on an empty project.
    opts = pulumi.ResourceOptions(parent=parent, depends_on=list(after))
    member = account_email.apply(lambda e: f"serviceAccount:{e}")
    secret = secretmanager.Secret(
        f"{name}-collector-config",
        # Secret ids take letters, digits, '-' and '_' (a stack name may also hold '.').
        secret_id=re.sub(r"[^A-Za-z0-9_-]", "-", f"{name}-collector-config")[:255],
        replication=secretmanager.SecretReplicationArgs(
            auto=secretmanager.SecretReplicationAutoArgs()
        ),
        labels=dict(settings.labels),
        opts=opts,
    )
    version = secretmanager.SecretVersion(
        f"{name}-collector-config",
        secret=secret.id,
        secret_data=spec.run_monitoring_config(port, m),
        opts=opts,
    )
    reader = secretmanager.SecretIamMember(
        f"{name}-collector-config-read",
        secret_id=secret.secret_id,
        role=SECRET_ACCESSOR,
        member=member,
        opts=opts,
    )
    # Writing time series is granted per project only; this is the role Google names for it.
    writer = projects.IAMMember(
        f"{name}-metric-writer",
        project=project,
        role=METRIC_WRITER,
        member=member,
        opts=opts,
    )
    container = cloudrunv2.ServiceTemplateContainerArgs(
        name=spec.SIDECAR_NAME,
        image=m.monitoring_sidecar_image,
        depends_ons=[ingress_container],
        resources=cloudrunv2.ServiceTemplateContainerResourcesArgs(
            limits={"cpu": spec.SIDECAR_CPU, "memory": spec.SIDECAR_MEMORY},
            cpu_idle=False,
            startup_cpu_boost=False,
        ),
        volume_mounts=[
            cloudrunv2.ServiceTemplateContainerVolumeMountArgs(
                name="collector-config", mount_path=spec.SIDECAR_CONFIG_DIR
            )
        ],
    )
    volume = cloudrunv2.ServiceTemplateVolumeArgs(
        name="collector-config",
        secret=cloudrunv2.ServiceTemplateVolumeSecretArgs(
            secret=secret.secret_id,
            items=[
                cloudrunv2.ServiceTemplateVolumeSecretItemArgs(
                    path=spec.SIDECAR_CONFIG_FILE, version=version.version
                )
            ],
        ),
    )
    return CollectorSidecar(container, volume, [version, reader, writer])


@dataclass
class VllmMonitoringArgs:
    settings: Settings
    project: str
    #: Cloud Run: the service's name (the sidecar labels series with it).
    cloud_run_service: pulumi.Input[str] | None = None
    #: TPU: the Ops Agent scrape job's name.
    scrape_job: str | None = None
    #: GKE: the namespace of the serving objects (PodMonitoring series carry it).
    gke_namespace: str | None = None
    #: Resources that must exist first (the enabled Cloud Monitoring API).
    depends_on: Sequence[pulumi.Resource] = field(default_factory=list)


class VllmMonitoring(pulumi.ComponentResource):
    """A Cloud Monitoring dashboard and one alert policy per SLO and saturation signal."""

    dashboard_id: pulumi.Output[str]
    """The dashboard's resource name."""
    alert_policy_names: pulumi.Output[list[str]]
    """The alert policies' resource names."""

    def __init__(
        self, name: str, args: VllmMonitoringArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma4:index:VllmMonitoring", name, None, opts)
        s = args.settings
        m = s.monitoring
        stack = pulumi.get_stack()
        mtp = s.model.drafter_card is not None
        platform: spec.Platform
        if args.cloud_run_service is not None:
            platform = "cloud_run"
            target: pulumi.Output[spec.Target] = pulumi.Output.from_input(
                args.cloud_run_service
            ).apply(lambda service: spec.cloud_run_target(stack, s.hardware, service, mtp=mtp))
        elif args.scrape_job is not None:
            platform = "tpu"
            target = pulumi.Output.from_input(
                spec.tpu_target(stack, s.hardware, args.scrape_job, mtp=mtp)
            )
        elif args.gke_namespace is not None:
            platform = "gke"
            target = pulumi.Output.from_input(
                spec.gke_target(
                    stack,
                    s.hardware,
                    args.gke_namespace,
                    mtp=mtp,
                    gateway_class=gateway_class(s),
                )
            )
        else:
            raise ValueError(
                "VllmMonitoring needs a Cloud Run service, a scrape job or a namespace"
            )
        if not m.monitoring_notification_channels:
            # An alert that notifies nobody is an incident nobody sees: none is declared.
            pulumi.log.warn(
                "monitoringNotificationChannels is empty: no alert policy is declared (the "
                "dashboard is). Add channel names (projects/<id>/notificationChannels/<n>) to "
                "get the SLO and saturation alerts.",
            )

        board = monitoring.Dashboard(
            f"{name}-dashboard",
            project=args.project,
            dashboard_json=target.apply(
                lambda t: json.dumps(spec.dashboard(t, m, s.slo), sort_keys=True)
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)),
        )
        keys = spec.alert_keys(platform, m, s.slo) if m.monitoring_notification_channels else []

        def body_of(key: str) -> pulumi.Output[dict[str, Any]]:
            return target.apply(lambda t: spec.alert_policies(t, m, s.slo)[key])

        policies = [
            _alert_policy(f"{name}-alert-{key}", args.project, body_of(key), self, args.depends_on)
            for key in keys
        ]
        self.dashboard_id = board.id
        self.alert_policy_names = pulumi.Output.all(*[p.name for p in policies])
        self.register_outputs(
            {"dashboard_id": self.dashboard_id, "alert_policy_names": self.alert_policy_names}
        )


def _alert_policy(
    name: str,
    project: str,
    body: pulumi.Output[dict[str, Any]],
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource],
) -> monitoring.AlertPolicy:
    """Declare one API AlertPolicy body through pulumi-gcp's typed inputs."""

    def field_of(key: str) -> pulumi.Output[Any]:
        return body.apply(lambda b: b.get(key))

    def condition(b: dict[str, Any]) -> list[monitoring.AlertPolicyConditionArgs]:
        found = []
        for c in b["conditions"]:
            p = c["conditionPrometheusQueryLanguage"]
            found.append(
                monitoring.AlertPolicyConditionArgs(
                    display_name=c["displayName"],
                    condition_prometheus_query_language=monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                        query=p["query"],
                        duration=p["duration"],
                        evaluation_interval=p["evaluationInterval"],
                        rule_group=p["ruleGroup"],
                        alert_rule=p["alertRule"],
                        disable_metric_validation=p["disableMetricValidation"],
                    ),
                )
            )
        return found

    return monitoring.AlertPolicy(
        name,
        project=project,
        display_name=field_of("displayName"),
        combiner=field_of("combiner"),
        severity=field_of("severity"),
        enabled=field_of("enabled"),
        user_labels=field_of("userLabels"),
        notification_channels=field_of("notificationChannels"),
        documentation=body.apply(
            lambda b: monitoring.AlertPolicyDocumentationArgs(
                subject=b["documentation"]["subject"],
                content=b["documentation"]["content"],
                mime_type=b["documentation"]["mimeType"],
            )
        ),
        alert_strategy=body.apply(
            lambda b: monitoring.AlertPolicyAlertStrategyArgs(
                auto_close=b["alertStrategy"]["autoClose"]
            )
        ),
        conditions=body.apply(condition),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(after)),
    )
