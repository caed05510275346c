"""A private model bucket, and Cloud Run jobs that fill it from Hugging Face.

The Hugging Face token is read by the job from Secret Manager at run time: it is never in
config, arguments, environment values, logs or outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_gcp import cloudrunv2, secretmanager, serviceaccount, storage

from components.naming import account_id, token
from serving.config.settings import Settings
from serving.render.compile_cache import cache_folder
from serving.render.vllm import FUSE_MOUNT_OPTIONS, MODEL_MOUNT_PATH


@dataclass(frozen=True)
class Checkpoint:
    """A Hugging Face checkpoint and the bucket folder it is downloaded into."""

    repo_id: str
    revision: str
    folder: str


def checkpoints(settings: Settings) -> list[Checkpoint]:
    """The checkpoints a stack serves: the target and, with MTP, its drafter."""
    m = settings.model
    found = [Checkpoint(m.model, m.model_revision, m.card.folder)]
    if m.drafter_card is not None:
        found.append(Checkpoint(m.drafter_card.repo_id, m.drafter_revision, m.drafter_card.folder))
    return found


class ModelBucket(pulumi.ComponentResource):
    """Bucket with uniform access and public access prevention, plus download jobs."""

    bucket_name: pulumi.Output[str]
    """The bucket's name."""
    model_prefix: pulumi.Output[str]
    """`gs://` prefix under which checkpoint folders live."""
    download_jobs: list[cloudrunv2.Job]
    """Jobs that have run to completion once weights are in place (dependency for servers)."""

    def __init__(
        self, name: str, settings: Settings, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma4:index:ModelBucket", name, None, opts)
        self._bucket = storage.Bucket(
            f"{name}-bucket",
            location=settings.bucket.bucket_location or settings.region,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            force_destroy=settings.bucket.force_destroy_bucket,
            labels=dict(settings.labels),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.bucket_name = self._bucket.name
        self.model_prefix = self._bucket.name.apply(lambda b: f"gs://{b}")
        self.download_jobs = (
            self._create_download_jobs(name, settings) if settings.bucket.download_weights else []
        )
        self.register_outputs({"bucket_name": self.bucket_name, "model_prefix": self.model_prefix})

    def grant_read(self, name: str, member: pulumi.Input[str]) -> storage.BucketIAMMember:
        """Read access to this bucket only (no project-wide storage role)."""
        return storage.BucketIAMMember(
            name,
            bucket=self._bucket.name,
            role="roles/storage.objectViewer",
            member=member,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def grant_cache_write(
        self, name: str, member: pulumi.Input[str], key: pulumi.Input[str]
    ) -> storage.BucketIAMMember:
        """Write access to one compile cache folder (`compile-cache/<key>/`) and nothing else
        of the bucket: an IAM condition on the object's name, so the server can change neither
        the weights nor another key's cache (reading stays :meth:`grant_read`'s)."""
        folder = pulumi.Output.all(self._bucket.name, key).apply(
            lambda v: f"projects/_/buckets/{v[0]}/objects/{cache_folder(str(v[1]))}/"
        )
        return storage.BucketIAMMember(
            name,
            bucket=self._bucket.name,
            role="roles/storage.objectUser",
            member=member,
            condition=storage.BucketIAMMemberConditionArgs(
                title="compile cache of one key",
                expression=folder.apply(lambda f: f'resource.name.startsWith("{f}")'),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _create_download_jobs(self, name: str, settings: Settings) -> list[cloudrunv2.Job]:
        """Cloud Run jobs in the serving region, running the serving image (it has the `hf`
        CLI)."""
        account = serviceaccount.Account(
            f"{name}-downloader",
            account_id=account_id(name, "dl"),
            display_name="Downloads model checkpoints into the model bucket",
            opts=pulumi.ResourceOptions(parent=self),
        )
        member = account.email.apply(lambda e: f"serviceAccount:{e}")
        writer = storage.BucketIAMMember(
            f"{name}-downloader-write",
            bucket=self._bucket.name,
            role="roles/storage.objectUser",
            member=member,
            opts=pulumi.ResourceOptions(parent=self),
        )
        secret_access = secretmanager.SecretIamMember(
            f"{name}-downloader-hf-token",
            secret_id=settings.weights.hf_token_secret,
            role="roles/secretmanager.secretAccessor",
            member=member,
            opts=pulumi.ResourceOptions(parent=self),
        )
        jobs = []
        for index, ckpt in enumerate(checkpoints(settings)):
            jobs.append(
                cloudrunv2.Job(
                    f"{name}-download-{index}",
                    location=settings.region,
                    deletion_protection=False,
                    labels=dict(settings.labels),
                    # A new execution runs (and must succeed) whenever repo or revision changes.
                    run_execution_token=token(ckpt.repo_id, ckpt.revision, ckpt.folder),
                    template=cloudrunv2.JobTemplateArgs(
                        task_count=1,
                        template=cloudrunv2.JobTemplateTemplateArgs(
                            service_account=account.email,
                            max_retries=2,
                            timeout="3600s",
                            execution_environment="EXECUTION_ENVIRONMENT_GEN2",
                            volumes=[
                                cloudrunv2.JobTemplateTemplateVolumeArgs(
                                    name="models",
                                    gcs=cloudrunv2.JobTemplateTemplateVolumeGcsArgs(
                                        bucket=self._bucket.name,
                                        read_only=False,
                                        mount_options=list(FUSE_MOUNT_OPTIONS),
                                    ),
                                )
                            ],
                            containers=[
                                cloudrunv2.JobTemplateTemplateContainerArgs(
                                    image=settings.image,
                                    commands=["hf"],
                                    args=[
                                        "download",
                                        ckpt.repo_id,
                                        f"--revision={ckpt.revision}",
                                        f"--local-dir={MODEL_MOUNT_PATH}/{ckpt.folder}",
                                    ],
                                    envs=[
                                        cloudrunv2.JobTemplateTemplateContainerEnvArgs(
                                            name="HF_TOKEN",
                                            value_source=cloudrunv2.JobTemplateTemplateContainerEnvValueSourceArgs(
                                                secret_key_ref=cloudrunv2.JobTemplateTemplateContainerEnvValueSourceSecretKeyRefArgs(
                                                    secret=settings.weights.hf_token_secret,
                                                    version="latest",
                                                )
                                            ),
                                        ),
                                        cloudrunv2.JobTemplateTemplateContainerEnvArgs(
                                            name="HF_HOME", value="/tmp/hf-home"
                                        ),
                                    ],
                                    resources=cloudrunv2.JobTemplateTemplateContainerResourcesArgs(
                                        limits={"cpu": "4", "memory": "8Gi"}
                                    ),
                                    volume_mounts=[
                                        cloudrunv2.JobTemplateTemplateContainerVolumeMountArgs(
                                            name="models", mount_path=MODEL_MOUNT_PATH
                                        )
                                    ],
                                )
                            ],
                        ),
                    ),
                    opts=pulumi.ResourceOptions(
                        parent=self,
                        depends_on=[writer, secret_access],
                        # Create waits for the download (image pull + checkpoint): up to the
                        # task timeout of one hour, with room for a retry's start.
                        custom_timeouts=pulumi.CustomTimeouts(create="90m", update="90m"),
                    ),
                )
            )
        return jobs
