"""Pulumi component resources. Each imports only the pulumi-gcp modules it uses."""

from components.cloud_run_service import CloudRunGpuService, CloudRunGpuServiceArgs
from components.model_bucket import Checkpoint, ModelBucket, ModelBucketArgs
from components.project_apis import ProjectApis
from components.tpu_nodes import TpuVllmNodes, TpuVllmNodesArgs

__all__ = [
    "Checkpoint",
    "CloudRunGpuService",
    "CloudRunGpuServiceArgs",
    "ModelBucket",
    "ModelBucketArgs",
    "ProjectApis",
    "TpuVllmNodes",
    "TpuVllmNodesArgs",
]
