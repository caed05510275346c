"""A private model bucket, and Cloud Run jobs that fill it from Hugging Face.

The Hugging Face token is read by the job from Secret Manager at run time: it is never in
config, arguments, environment values, logs or outputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
from pulumi_gcp import cloudrunv2, secretmanager, serviceaccount, storage

from components.naming import account_id, token

# The package's mount-owner contract (see serving.render.vllm.VLLM_UID for what the images run as).
from serving.render.vllm import FUSE_MOUNT_OPTIONS, MODEL_MOUNT_PATH

__all__ = ["FUSE_MOUNT_OPTIONS", "Checkpoint", "ModelBucket", "ModelBucketArgs"]


@dataclass(frozen=True)
class Checkpoint:
    """A Hugging Face checkpoint and the bucket folder it is downloaded into."""

    repo_id: str
    revision: str
    folder: str


@dataclass
class ModelBucketArgs:
    location: str
    labels: Mapping[str, str]
    force_destroy: bool
    #: Checkpoints to download with a Cloud Run job; empty declares no job.
    checkpoints: Sequence[Checkpoint]
    #: Region of the download jobs and image they run (needs the `hf` CLI).
    job_region: str
    job_image: str
    #: Secret Manager secret id that holds the Hugging Face token.
    hf_token_secret: str


class ModelBucket(pulumi.ComponentResource):
    """Bucket with uniform access and public access prevention, plus download jobs."""

    bucket_name: pulumi.Output[str]
    """The bucket's name."""
    model_prefix: pulumi.Output[str]
    """`gs://` prefix under which checkpoint folders live."""
    download_jobs: list[cloudrunv2.Job]
    """Jobs that have run to completion once weights are in place (dependency for servers)."""

    def __init__(
        self, name: str, args: ModelBucketArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma4:index:ModelBucket", name, None, opts)
        self._bucket = storage.Bucket(
            f"{name}-bucket",
            location=args.location,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            force_destroy=args.force_destroy,
            labels=dict(args.labels),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.bucket_name = self._bucket.name
        self.model_prefix = self._bucket.name.apply(lambda b: f"gs://{b}")
        self.download_jobs = self._create_download_jobs(name, args) if args.checkpoints else []
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

    def _create_download_jobs(self, name: str, args: ModelBucketArgs) -> list[cloudrunv2.Job]:
        image, region = args.job_image, args.job_region
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
            secret_id=args.hf_token_secret,
            role="roles/secretmanager.secretAccessor",
            member=member,
            opts=pulumi.ResourceOptions(parent=self),
        )
        jobs = []
        for index, ckpt in enumerate(args.checkpoints):
            jobs.append(
                cloudrunv2.Job(
                    f"{name}-download-{index}",
                    location=region,
                    deletion_protection=False,
                    labels=dict(args.labels),
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
                                    image=image,
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
                                                    secret=args.hf_token_secret,
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
