"""Read a stack's settings from Pulumi config and declare its components."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config
from pulumi_gcp import projects

from bench.hook import BenchmarkHookConfig, benchmark_hook
from bench.load.sweep import Grid
from components.cloud_run_service import CloudRunGpuService, CloudRunGpuServiceArgs
from components.image_mirror import ImageMirror
from components.model_bucket import ModelBucket
from components.monitoring import VllmMonitoring, VllmMonitoringArgs
from endpoint.auth import AuthStrategy, GoogleIdTokenAuth, SecretManagerApiKeyAuth
from healthchecks.hook import AuthFactory, health_hook
from serving.capacity.perf_stack import benchmark_concurrency
from serving.capacity.start_budget import health_deadline_s
from serving.capacity.start_records import observed_times, start_block, start_line
from serving.catalog.hardware import Platform
from serving.config.checks import SettingsError, check_project_id
from serving.config.settings import Settings, load_settings
from serving.config.stack_config import ConfigKeyError, project_config, stack_name_problem
from serving.config.stack_file import namespaces
from serving.render import monitoring as monitoring_spec
from serving.render.compile_cache import cache_folder

CLOUD_RUN_APIS = (
    "run.googleapis.com",
    "artifactregistry.googleapis.com",
    "storage.googleapis.com",
    "secretmanager.googleapis.com",
    "iam.googleapis.com",
)


class ProjectApis(pulumi.ComponentResource):
    """Enables the Google APIs a stack needs (one `projects.Service` each), so an empty project
    works without hand steps; other components depend on this one."""

    services: list[projects.Service]

    def __init__(
        self, name: str, apis: Sequence[str], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma4:index:ProjectApis", name, None, opts)
        self.services = [
            projects.Service(
                f"{name}-{api.split('.')[0]}",
                service=api,
                # Other workloads in the project may use the same API: never disable it on destroy.
                disable_on_destroy=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for api in apis
        ]
        self.register_outputs({"apis": list(apis)})


def raw_stack_config(project: str) -> dict[str, Any]:
    """Every `<project>:<key>` value Pulumi passed to this program, keyed by `<key>`.

    Raises SettingsError for a key in a namespace nothing reads (`gemma4vllm:maxNumSeqs`) or a
    gcp key the provider does not have, naming the closest valid key."""
    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    try:
        return project_config(merged, project, namespaces())
    except ConfigKeyError as exc:
        raise SettingsError(str(exc)) from None


def read_settings() -> Settings:
    """Validate this stack's config and `gcp:project`; raises SettingsError before any
    resource is declared."""
    problem = stack_name_problem(pulumi.get_stack())
    if problem:
        raise SettingsError(problem)
    settings = load_settings(raw_stack_config(pulumi.get_project()))
    project_id()
    return settings


TPU_APIS = (
    "tpu.googleapis.com",
    "compute.googleapis.com",
    # The model bucket and its download job (a Cloud Run job), as on the other stacks.
    "run.googleapis.com",
    "storage.googleapis.com",
    "secretmanager.googleapis.com",
    "iam.googleapis.com",
)


GKE_APIS = (
    "container.googleapis.com",
    "compute.googleapis.com",
    "networkservices.googleapis.com",
    # The weights download job is a Cloud Run job, as on the other stacks.
    "run.googleapis.com",
    "storage.googleapis.com",
    "secretmanager.googleapis.com",
    "iam.googleapis.com",
)

CERTIFICATE_APIS = ("certificatemanager.googleapis.com",)

MONITORING_APIS = ("monitoring.googleapis.com",)


def with_monitoring_apis(settings: Settings, apis: tuple[str, ...]) -> tuple[str, ...]:
    """The stack's APIs, with Cloud Monitoring's when monitoring is on."""
    return (*apis, *MONITORING_APIS) if settings.monitoring.monitoring else apis


def project_id() -> str:
    return check_project_id(pulumi.Config("gcp").get("project"))


class StartClock:
    """The start of the instance the post-deploy hooks run after (docs/benchmark-reference.md,
    "Measured starts"): created and ready from the resource's outputs, the first token from the
    health check's chat (else the benchmark's first request) by the hook's clock, kept in the
    benchmark's run record (``recorded``: a benchmark runs)."""

    def __init__(self, platform: str, recorded: bool) -> None:
        self.platform = platform
        self.recorded = recorded
        self.first_tokens: dict[str, datetime] = {}  # by resource URN: TPU replicas share hooks

    def first_token(self, args: pulumi.ResourceHookArgs, at: datetime) -> None:
        self.first_tokens[args.urn] = at
        if not self.recorded:
            _, line = self.record(args, None)
            pulumi.log.info(f"{args.name}: {line} (in no run record: postDeployBenchmark is off)")

    def record(
        self, args: pulumi.ResourceHookArgs, probed: datetime | None
    ) -> tuple[dict[str, Any], str]:
        checked = self.first_tokens.pop(args.urn, None)
        first = (
            (checked, "the health check's streamed chat completion, by the hook's clock")
            if checked is not None
            else (probed, "the benchmark's first streamed completion, by the hook's clock")
            if probed is not None
            else None
        )
        found, missing = observed_times(self.platform, args.new_outputs, args.old_outputs)
        block, why = start_block(found, missing, first, datetime.now(UTC))
        return block, start_line(block, why)


def post_deploy_binding(
    settings: Settings,
    prefix: str,
    auth: AuthStrategy | AuthFactory,
    url_keys: tuple[str, ...],
    refused_grace_s: float = 10.0,
    url: str | None = None,
) -> pulumi.ResourceHookBinding | None:
    """Hooks run after the serving resource is created or updated: the health check, then a
    short benchmark held to the stack's SLOs. Either can be switched off in stack config.
    `url`: the endpoint the hooks call (and send the API key to) whatever the resource's
    outputs hold; otherwise the first of `url_keys` in them. The health check waits
    `healthCheckDeadlineSeconds`, by default what the cold start prediction derives
    (serving/capacity/start_budget.py)."""
    hooks: list[pulumi.ResourceHook | pulumi.ResourceHookFunction] = []
    clock = StartClock(settings.deploy_platform, settings.benchmark.post_deploy_benchmark)
    if settings.health.health_check:
        hooks.append(
            health_hook(
                f"{prefix}-health",
                served_model_name=settings.model.served_name,
                deadline_s=settings.health.health_check_deadline_seconds
                or health_deadline_s(settings),
                auth=auth,
                url=url,
                url_keys=url_keys,
                refused_grace_s=refused_grace_s,
                on_first_token=clock.first_token,
            )
        )
    b = settings.benchmark
    if b.post_deploy_benchmark:
        from bench.results.gate import target_identity

        config = BenchmarkHookConfig(
            stack=pulumi.get_stack(),
            served_model_name=settings.model.served_name,
            hardware=settings.hardware,
            grid=Grid(
                concurrency=tuple(benchmark_concurrency(settings)),
                prompt_tokens=(b.benchmark_prompt_tokens,),
                output_tokens=(b.benchmark_output_tokens,),
            ),
            budget_s=float(b.benchmark_budget_seconds),
            slo=settings.slo,
            fail_on_slo=b.benchmark_fail_on_slo,
            results_dir=Path(b.benchmark_results_dir),
            extra={
                "speculative_method": settings.model.speculative_method,
                # What one instance bills (a GKE node, a flex-start TPU): `bench compare`.
                "platform": settings.deploy_platform,
                "usd_per_hour": settings.price.usd_per_hour,
                # confirmed, estimate (a rate counted at a named source's quote) or
                # lower_bound (a rate with no figure anywhere: no price to cost a run at).
                "usd_per_hour_status": settings.price.status,
                "usd_per_hour_is_lower_bound": settings.price.is_lower_bound,
                "target": target_identity(settings),  # what `bench gate` matches the run by
            },
        )
        hooks.append(
            benchmark_hook(
                f"{prefix}-benchmark",
                config,
                auth=auth,
                url_keys=url_keys,
                fixed_url=url,
                start=clock.record,
            )
        )
    if not hooks:
        return None
    # Hooks run in list order: the benchmark only after the health check passed.
    return pulumi.ResourceHookBinding(after_create=hooks, after_update=hooks)


def watch(
    settings: Settings, prefix: str, project: str, apis: ProjectApis, **target: Any
) -> dict[str, pulumi.Input[Any]]:
    """The dashboard and alerts of `monitoring: true` on the serving `target`
    (:class:`VllmMonitoringArgs`); the stack output naming the dashboard."""
    board = VllmMonitoring(
        f"{prefix}-monitoring",
        VllmMonitoringArgs(settings=settings, project=project, depends_on=[apis], **target),
        opts=pulumi.ResourceOptions(depends_on=[apis]),
    )
    return {"dashboard_id": board.dashboard_id}


def cache_url(bucket: ModelBucket, key: pulumi.Input[str]) -> pulumi.Output[str]:
    """Where the serving resource keeps vLLM's compile cache: its key's folder of the bucket."""
    return pulumi.Output.all(bucket.bucket_name, key).apply(
        lambda v: f"gs://{v[0]}/{cache_folder(str(v[1]))}/"
    )


def build(settings: Settings, prefix: str) -> dict[str, pulumi.Input[Any]]:
    """Declare the stack's resources; returns the stack outputs."""
    if settings.deploy_platform == "gke":
        return build_gke(settings, prefix)
    if settings.profile.platform is Platform.TPU:
        return build_tpu(settings, prefix)
    return build_cloud_run(settings, prefix)


def build_tpu(settings: Settings, prefix: str) -> dict[str, pulumi.Input[Any]]:
    # Imported here: it loads pulumi_gcp.compute (~2 s), which the Cloud Run stacks never use.
    from components.tpu_nodes import TpuVllmNodes, TpuVllmNodesArgs

    project = project_id()
    apis = ProjectApis(f"{prefix}-apis", with_monitoring_apis(settings, TPU_APIS))
    job = monitoring_spec.scrape_job(prefix) if settings.monitoring.monitoring else None
    hooks = None
    if settings.tpu.source_ranges:
        hooks = post_deploy_binding(
            settings,
            prefix,
            SecretManagerApiKeyAuth(project, settings.tpu.api_key_secret),
            url_keys=("endpointUrl",),
            # vLLM opens its port only once the model has loaded: refused means "loading" here.
            refused_grace_s=float(health_deadline_s(settings)),
        )
    elif settings.health.health_check or settings.benchmark.post_deploy_benchmark:
        # Nothing outside the VPC can reach a closed port: checks would only time out.
        pulumi.log.warn(
            "sourceRanges is empty, so the serving port is closed: the post-deploy health "
            "check and benchmark are skipped. Add your CIDR to sourceRanges to run them."
        )
    bucket = ModelBucket(f"{prefix}-models", settings, pulumi.ResourceOptions(depends_on=[apis]))
    nodes = TpuVllmNodes(
        f"{prefix}-tpu",
        TpuVllmNodesArgs(
            settings=settings,
            project=project,
            tag=f"{prefix}-vllm",
            hooks=hooks,
            scrape_job=job,
            bucket=bucket,
            depends_on=list(bucket.download_jobs),
        ),
        opts=pulumi.ResourceOptions(depends_on=[apis]),
    )
    return {
        **(watch(settings, prefix, project, apis, scrape_job=job) if job else {}),
        "hardware": settings.hardware,
        "image_ref": settings.image,
        "source_image": settings.image,
        "endpoint_urls": nodes.endpoint_urls,
        "node_names": nodes.node_names,
        "states": nodes.states,
        "served_model_name": settings.model.served_name,
        "vllm_command_line": nodes.vllm_command_line,
        "compile_cache": cache_url(bucket, nodes.compile_cache_key),
        "api_key_secret": settings.tpu.api_key_secret,
        "bucket_name": bucket.bucket_name,
        "model_prefix": bucket.model_prefix,
    }


def build_cloud_run(settings: Settings, prefix: str) -> dict[str, pulumi.Input[Any]]:
    # Read before any resource: the collector's grant and the alerts need the project.
    project = project_id() if settings.monitoring.monitoring else None
    apis = ProjectApis(f"{prefix}-apis", with_monitoring_apis(settings, CLOUD_RUN_APIS))
    bucket = ModelBucket(f"{prefix}-models", settings, pulumi.ResourceOptions(depends_on=[apis]))
    image: pulumi.Input[str] = settings.image
    # image_ref: what the service runs; source_image: the upstream image promotion carries.
    outputs: dict[str, pulumi.Input[Any]] = {
        "image_ref": settings.image,
        "source_image": settings.image,
    }
    if settings.cloud_run.mirror_image:
        mirror = ImageMirror(
            f"{prefix}-image",
            settings,
            project=project_id(),
            repository_id=settings.cloud_run.artifact_repository or f"{prefix}-images",
            opts=pulumi.ResourceOptions(depends_on=[apis]),
        )
        image = mirror.image_ref
        outputs["image_ref"] = mirror.image_ref
        outputs["source_image"] = mirror.source_digest
    service = CloudRunGpuService(
        f"{prefix}-vllm",
        CloudRunGpuServiceArgs(
            settings=settings,
            image=image,
            bucket=bucket,
            depends_on=[apis, *bucket.download_jobs],
            hooks=post_deploy_binding(
                settings,
                prefix,
                lambda url: GoogleIdTokenAuth(
                    url, impersonate_service_account=settings.health.health_check_service_account
                ),
                url_keys=("uri",),
            ),
            monitoring_project=project,
        ),
    )
    if project is not None:
        outputs |= watch(settings, prefix, project, apis, cloud_run_service=service.service_name)
    return {
        **outputs,
        "hardware": settings.hardware,
        "service_url": service.url,
        "service_name": service.service_name,
        "served_model_name": settings.model.served_name,
        "vllm_command_line": service.vllm_command_line,
        "compile_cache": cache_url(bucket, service.compile_cache_key),
        "bucket_name": bucket.bucket_name,
        "model_prefix": bucket.model_prefix,
    }


def build_gke(settings: Settings, prefix: str) -> dict[str, pulumi.Input[Any]]:
    """A GKE cluster with an accelerator node pool, and vLLM replicas behind GKE Inference
    Gateway (docs/deploy/gke.md)."""
    # Imported here: pulumi_gcp.compute and pulumi_kubernetes load in seconds, which the
    # Cloud Run stacks never need.
    from components.gke_cluster import GkeCluster
    from components.gke_serving import GkeServing, GkeServingArgs
    from serving.render import gke as gke_objects

    project = project_id()
    # A public Gateway's certificate lives in Certificate Manager.
    needed = (*GKE_APIS, *(CERTIFICATE_APIS if settings.public else ()))
    apis = ProjectApis(f"{prefix}-apis", with_monitoring_apis(settings, needed))
    after_apis = pulumi.ResourceOptions(depends_on=[apis])
    bucket = ModelBucket(f"{prefix}-models", settings, after_apis)
    cluster = GkeCluster(f"{prefix}-gke", settings, project, opts=after_apis)
    hooks = None
    if settings.public:
        hooks = post_deploy_binding(
            settings,
            prefix,
            SecretManagerApiKeyAuth(project, settings.gke.api_key_secret),
            url_keys=("data.endpointUrl",),
            # The stack's own Gateway, over HTTPS, by the name its certificate is for: the key
            # goes there and nowhere else, whatever the endpoint ConfigMap says.
            url=gke_objects.endpoint_url(settings, ""),
            # The load balancer answers before any replica is ready: wait out the start-up
            # (a node to provision, the image to pull, the weights to read, the engine to
            # compile), as long as the health check's own deadline.
            refused_grace_s=float(health_deadline_s(settings)),
        )
    else:
        # A legitimate choice, said with what it costs.
        pulumi.log.warn(
            "the Gateway is internal (public is false): it serves plain HTTP on port 80 inside "
            "the VPC, so the API key travels unencrypted between clients in the VPC and the "
            "load balancer (a public Gateway serves HTTPS only: public: true with sourceRanges "
            "and gatewayDomain)."
        )
        if settings.health.health_check or settings.benchmark.post_deploy_benchmark:
            pulumi.log.warn(
                "the Gateway is internal (public is false): only clients in the VPC reach it, "
                "so the post-deploy health check and benchmark are skipped. Run `gemma4 "
                "health` from a machine in the VPC, or set public: true with sourceRanges and "
                "gatewayDomain."
            )
    serving = GkeServing(
        f"{prefix}-serving",
        GkeServingArgs(
            settings=settings,
            project=project,
            provider=cluster.provider,
            bucket=bucket,
            depends_on=[*bucket.download_jobs, cluster.accelerator_pool],
            hooks=hooks,
        ),
        opts=after_apis,
    )
    g = settings.gke
    return {
        **(
            watch(settings, prefix, project, apis, gke_namespace=g.namespace)
            if settings.monitoring.monitoring
            else {}
        ),
        "platform": "gke",
        "hardware": settings.hardware,
        "machine_type": settings.gke_shape.machine_type,
        "image_ref": settings.image,
        "source_image": settings.image,
        "picker_image": g.picker_image,
        "cluster_name": cluster.cluster_name,
        "namespace": g.namespace,
        "endpoint_url": serving.endpoint_url,
        # The one address clients use (the Gateway); `python -m healthchecks`, the benchmark
        # and the MCP server read it with the vLLM API key from apiKeySecret, as on TPU stacks.
        "endpoint_urls": serving.endpoint_url.apply(lambda url: [url]),
        "gateway_address": serving.gateway_address,
        # Public Gateway: the A record of gatewayDomain and the certificate's DNS authorization.
        "dns_records": serving.dns_records,
        "min_replicas": g.min_replicas,
        "max_replicas": g.max_replicas,
        "served_model_name": settings.model.served_name,
        "vllm_command_line": gke_objects.vllm_command(settings).command_line(),
        "compile_cache": cache_url(bucket, gke_objects.compile_cache_key(settings)),
        "api_key_secret": settings.gke.api_key_secret,
        # The vLLM Pods read the key from a Kubernetes Secret made from Secret Manager's.
        "api_key_setup": gke_objects.api_key_secret_command(settings),
        "bucket_name": bucket.bucket_name,
        "model_prefix": bucket.model_prefix,
    }
