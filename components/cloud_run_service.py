"""vLLM on a Cloud Run GPU: its own service account, the model bucket mounted read-only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
from pulumi_gcp import cloudrunv2, serviceaccount

from components.model_bucket import ModelBucket
from components.monitoring import CollectorSidecar, cloud_run_collector
from components.naming import account_id
from serving.capacity.start_budget import startup_probe
from serving.catalog.hardware import Platform
from serving.config.settings import Settings
from serving.render import compile_cache
from serving.render.vllm import CLOUD_RUN_PORT, FUSE_MOUNT_OPTIONS, MODEL_MOUNT_PATH, mounted


@dataclass
class CloudRunGpuServiceArgs:
    settings: Settings
    bucket: ModelBucket
    #: The image to run: the settings' pinned image, or the mirror's digest.
    image: pulumi.Input[str]
    #: Resources that must exist first (weights download jobs, enabled APIs).
    depends_on: Sequence[pulumi.Resource]
    #: Resource hooks for the service (post-deploy health checks).
    hooks: pulumi.ResourceHookBinding | None
    #: Project of the metrics collector's grant; the collector runs when this is set and
    #: the settings' `monitoring` is on.
    monitoring_project: str | None


class CloudRunGpuService(pulumi.ComponentResource):
    """A private Cloud Run v2 service running the vLLM OpenAI server on one GPU."""

    url: pulumi.Output[str]
    """HTTPS URL of the service (needs an identity token unless public)."""
    service_name: pulumi.Output[str]
    vllm_command_line: pulumi.Output[str]
    """The rendered vLLM command line, for review in `pulumi preview`."""
    compile_cache_key: pulumi.Output[str]
    """The key of the compile cache folder (`compile-cache/<key>/` in the model bucket)."""

    def __init__(
        self, name: str, args: CloudRunGpuServiceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma4:index:CloudRunGpuService", name, None, opts)
        settings = args.settings
        if settings.profile.platform is not Platform.CLOUD_RUN:
            raise ValueError(f"hardware {settings.hardware!r} is not a Cloud Run GPU")
        self._command = mounted(settings, port=CLOUD_RUN_PORT)
        self._env = {**self._command.env, **compile_cache.cache_env(tpu=False)}
        hw = settings.profile
        self.compile_cache_key = pulumi.Output.from_input(args.image).apply(
            lambda image: compile_cache.cache_key(
                image=image,
                argv=self._command.argv,
                env=self._env,
                accelerator=hw.accelerator,
                count=hw.accelerator_count,
            )
        )

        account = serviceaccount.Account(
            f"{name}-sa",
            account_id=account_id(name, "vllm"),
            display_name=f"vLLM server {name}",
            opts=pulumi.ResourceOptions(parent=self),
        )
        member = account.email.apply(lambda e: f"serviceAccount:{e}")
        reader = args.bucket.grant_read(f"{name}-sa-read-models", member)
        cache_writer = args.bucket.grant_cache_write(
            f"{name}-sa-write-cache", member, self.compile_cache_key
        )
        collector = None
        if settings.monitoring.monitoring and args.monitoring_project is not None:
            collector = cloud_run_collector(
                name,
                settings,
                project=args.monitoring_project,
                ingress_container="vllm",
                port=CLOUD_RUN_PORT,
                account_email=account.email,
                parent=self,
                after=args.depends_on,
            )
        service = self._create_service(
            name,
            args,
            account,
            [reader, cache_writer, *(collector.depends_on if collector else []), *args.depends_on],
            collector,
        )
        self._create_invokers(name, settings, service)

        self.url = service.uri
        self.service_name = service.name
        self.vllm_command_line = pulumi.Output.from_input(self._command.command_line())
        self.register_outputs(
            {
                "url": self.url,
                "service_name": self.service_name,
                "vllm_command_line": self.vllm_command_line,
            }
        )

    def _create_service(
        self,
        name: str,
        args: CloudRunGpuServiceArgs,
        account: serviceaccount.Account,
        depends_on: Sequence[pulumi.Resource],
        collector: CollectorSidecar | None,
    ) -> cloudrunv2.Service:
        s = args.settings
        hw = s.profile
        probe = startup_probe(s)
        assert probe is not None  # Cloud Run probes every service
        deploy_timeout = f"{probe.budget_seconds + 600}s"
        return cloudrunv2.Service(
            f"{name}-service",
            location=s.region,
            labels=dict(s.labels),
            ingress="INGRESS_TRAFFIC_ALL",
            invoker_iam_disabled=False,
            # Stateless: `pulumi destroy` must be able to remove it (weights stay in the bucket).
            deletion_protection=False,
            scaling=cloudrunv2.ServiceScalingArgs(
                min_instance_count=s.cloud_run.min_instances,
            ),
            template=cloudrunv2.ServiceTemplateArgs(
                service_account=account.email,
                execution_environment="EXECUTION_ENVIRONMENT_GEN2",
                gpu_zonal_redundancy_disabled=not s.cloud_run.gpu_zonal_redundancy,
                node_selector=cloudrunv2.ServiceTemplateNodeSelectorArgs(
                    accelerator=hw.accelerator
                ),
                max_instance_request_concurrency=s.instance_concurrency,
                timeout=f"{s.cloud_run.request_timeout_seconds}s",
                labels=dict(s.labels),
                scaling=cloudrunv2.ServiceTemplateScalingArgs(
                    min_instance_count=s.cloud_run.min_instances,
                    max_instance_count=s.cloud_run.max_instances,
                ),
                volumes=[
                    cloudrunv2.ServiceTemplateVolumeArgs(
                        name="models",
                        gcs=cloudrunv2.ServiceTemplateVolumeGcsArgs(
                            bucket=args.bucket.bucket_name,
                            read_only=True,
                            mount_options=list(FUSE_MOUNT_OPTIONS),
                        ),
                    ),
                    cloudrunv2.ServiceTemplateVolumeArgs(
                        name=compile_cache.CACHE_VOLUME,
                        gcs=cloudrunv2.ServiceTemplateVolumeGcsArgs(
                            bucket=args.bucket.bucket_name,
                            read_only=False,
                            mount_options=self.compile_cache_key.apply(compile_cache.mount_options),
                        ),
                    ),
                    *([collector.volume] if collector else []),
                ],
                containers=[
                    cloudrunv2.ServiceTemplateContainerArgs(
                        name="vllm",
                        image=args.image,
                        commands=list(self._command.command),
                        args=list(self._command.args),
                        envs=[
                            cloudrunv2.ServiceTemplateContainerEnvArgs(name=k, value=v)
                            for k, v in self._env.items()
                        ],
                        ports=cloudrunv2.ServiceTemplateContainerPortsArgs(
                            name="http1", container_port=CLOUD_RUN_PORT
                        ),
                        resources=cloudrunv2.ServiceTemplateContainerResourcesArgs(
                            limits={
                                "cpu": str(s.cpu),
                                "memory": f"{s.memory_gib}Gi",
                                "nvidia.com/gpu": str(hw.accelerator_count),
                            },
                            # GPU services need CPU always allocated (no throttling).
                            cpu_idle=False,
                            startup_cpu_boost=s.cloud_run.startup_cpu_boost,
                        ),
                        volume_mounts=[
                            cloudrunv2.ServiceTemplateContainerVolumeMountArgs(
                                name="models", mount_path=MODEL_MOUNT_PATH
                            ),
                            cloudrunv2.ServiceTemplateContainerVolumeMountArgs(
                                name=compile_cache.CACHE_VOLUME,
                                mount_path=compile_cache.CACHE_MOUNT_PATH,
                            ),
                        ],
                        startup_probe=cloudrunv2.ServiceTemplateContainerStartupProbeArgs(
                            http_get=cloudrunv2.ServiceTemplateContainerStartupProbeHttpGetArgs(
                                path="/health", port=CLOUD_RUN_PORT
                            ),
                            initial_delay_seconds=probe.initial_delay_seconds,
                            period_seconds=probe.period_seconds,
                            timeout_seconds=probe.timeout_seconds,
                            failure_threshold=probe.failure_threshold,
                        ),
                        liveness_probe=cloudrunv2.ServiceTemplateContainerLivenessProbeArgs(
                            http_get=cloudrunv2.ServiceTemplateContainerLivenessProbeHttpGetArgs(
                                path="/health", port=CLOUD_RUN_PORT
                            ),
                            period_seconds=30,
                            timeout_seconds=10,
                            failure_threshold=3,
                        ),
                    ),
                    # The metrics collector starts after vLLM's startup probe passes.
                    *([collector.container] if collector else []),
                ],
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                # Weights must be in the bucket and the reader role granted before boot.
                depends_on=list(depends_on),
                hooks=args.hooks,
                # A revision is ready only after the model loads: allow the whole probe budget.
                custom_timeouts=pulumi.CustomTimeouts(create=deploy_timeout, update=deploy_timeout),
            ),
        )

    def _create_invokers(
        self, name: str, settings: Settings, service: cloudrunv2.Service
    ) -> list[cloudrunv2.ServiceIamMember]:
        members = list(settings.cloud_run.invokers)
        checker = settings.health.health_check_service_account
        if checker and f"serviceAccount:{checker}" not in members:
            # The post-deploy checks call the service as this account.
            members.append(f"serviceAccount:{checker}")
        if settings.public:
            members.append("allUsers")
        return [
            cloudrunv2.ServiceIamMember(
                f"{name}-invoker-{index}",
                location=service.location,
                name=service.name,
                role="roles/run.invoker",
                member=member,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for index, member in enumerate(members)
        ]
