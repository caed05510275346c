"""Mirror the pinned vLLM image into an Artifact Registry repository in the serving region.

Cloud Run then pulls from the same region (faster cold starts, no Docker Hub rate limits), and
the pushed image's digest is the reference promotion carries from stack to stack. Built with
pulumi-docker from `image/Dockerfile` (`FROM` the pinned image, nothing added); needs a Docker
engine where `pulumi up` runs.
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_docker as docker
from pulumi_gcp import artifactregistry, organizations

from serving.config.settings import Settings

CONTEXT = Path(__file__).resolve().parent.parent / "image"


class ImageMirror(pulumi.ComponentResource):
    """An Artifact Registry Docker repository and the mirrored image in it."""

    image_ref: pulumi.Output[str]
    """`REGION-docker.pkg.dev/PROJECT/REPO/NAME@sha256:...`: what the service runs."""
    source_digest: pulumi.Output[str]
    """The upstream image by digest (`vllm/vllm-openai@sha256:...`): what promotion carries."""

    def __init__(
        self,
        name: str,
        settings: Settings,
        *,
        project: str,
        repository_id: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Mirror the settings' pinned image in their region, into `repository_id`."""
        super().__init__("gemma4:index:ImageMirror", name, None, opts)
        region, source_image = settings.region, settings.image
        repository = artifactregistry.Repository(
            f"{name}-repo",
            location=region,
            repository_id=repository_id,
            format="DOCKER",
            description="Mirrored vLLM serving images",
            labels=dict(settings.labels),
            opts=pulumi.ResourceOptions(parent=self),
        )
        server = f"{region}-docker.pkg.dev"
        base = source_image.split("@")[0].rsplit("/", 1)[-1]
        repo_name, _, tag = base.partition(":")
        # Resolve the pinned tag to the upstream digest once; the mirror is built FROM that
        # digest, and it is what promotion carries to the next stack (whatever its region).
        upstream = docker.RemoteImage(
            f"{name}-upstream",
            name=source_image,
            keep_locally=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        token: pulumi.Output[str] = pulumi.Output.secret(
            organizations.get_client_config_output().access_token
        )
        image = docker.Image(
            f"{name}-image",
            image_name=repository.repository_id.apply(
                lambda repo: f"{server}/{project}/{repo}/{repo_name}:{tag or 'pinned'}"
            ),
            build=docker.DockerBuildArgs(
                context=str(CONTEXT),
                dockerfile=str(CONTEXT / "Dockerfile"),
                args={"BASE_IMAGE": upstream.repo_digest},
                platform="linux/amd64",
            ),
            registry=docker.RegistryArgs(
                server=server, username="oauth2accesstoken", password=token
            ),
            # The access token changes on every run; it must not force a rebuild.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["registry"]),
        )
        self.image_ref = image.repo_digest
        self.source_digest = upstream.repo_digest
        self.register_outputs({"image_ref": self.image_ref, "source_digest": self.source_digest})
