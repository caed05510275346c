"""model-volume-read-only: the model bucket is mounted read-only, as the image's user."""

from __future__ import annotations

import re

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from policies._config import schema, setting_int, setting_strings
from policies._resources import (
    JOB,
    SERVICE,
    WORKER_POOL,
    as_bool,
    containers,
    get,
    is_gpu_service,
    items,
    strings,
    volumes,
)
from serving.vllm import VLLM_GID, VLLM_UID

CONFIG = schema(
    {
        "nonRootImagePrefixes": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["vllm/vllm-openai", "docker.io/vllm/vllm-openai"],
            "description": "Images that run as vLLM's non-root user (any tag or digest).",
        },
        "uid": {"type": "integer", "default": VLLM_UID, "description": "That user's uid."},
        "gid": {"type": "integer", "default": VLLM_GID, "description": "That user's gid."},
    }
)


def _mount_options(volume: object) -> set[str]:
    raw = get(volume, "gcs", "mountOptions")
    parts = [raw] if isinstance(raw, str) else strings(raw)
    options: set[str] = set()
    for part in parts:
        options.update(p.strip().replace(" ", "") for p in re.split(r"[;,]", part) if p.strip())
    return options


def _repository(image: str) -> str:
    """`.../vllm-openai:tag` or `...@sha256:...` -> `vllm-openai`."""
    return image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]


def _runs_as_non_root(image: object, prefixes: list[str]) -> bool:
    """A listed image, a mirror of one (same repository name in another registry), or an
    image not known yet at preview (a mirror's digest): assume the non-root vLLM user."""
    if not isinstance(image, str) or not image:
        return True
    return any(image.startswith(p) or _repository(image) == _repository(p) for p in prefixes)


def validate_model_volume_read_only(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if args.resource_type not in (SERVICE, JOB, WORKER_POOL) or not is_gpu_service(
        args.resource_type, args.props
    ):
        return
    prefixes = setting_strings(args, CONFIG, "nonRootImagePrefixes")
    uid = setting_int(args, CONFIG, "uid")
    gid = setting_int(args, CONFIG, "gid")
    all_containers = containers(args.resource_type, args.props)
    for volume in volumes(args.resource_type, args.props):
        if get(volume, "gcs") is None:
            continue
        name = get(volume, "name")
        users = [
            c
            for c in all_containers
            if any(get(m, "name") == name for m in items(get(c, "volumeMounts")))
        ]
        if as_bool(get(volume, "gcs", "readOnly")) is not True:
            report_violation(
                f"{args.name}: Cloud Storage volume {name!r} is not read-only; the serving "
                "container only reads weights, so mount it with gcs.read_only=True (only the "
                "download job writes).",
                None,
            )
        non_root = [
            str(get(c, "image") or "<image not known at preview>")
            for c in users
            if _runs_as_non_root(get(c, "image"), prefixes)
        ]
        if not non_root:
            continue
        options = _mount_options(volume)
        missing = [o for o in (f"uid={uid}", f"gid={gid}") if o not in options]
        if missing:
            report_violation(
                f"{args.name}: Cloud Storage volume {name!r} is mounted into {non_root[0]!r}, "
                f"which runs as the non-root vLLM user ({uid}:{gid}), without "
                f"{' and '.join(missing)}: the container fails with 'Permission denied' "
                f"reading the weights. Add mount_options ['uid={uid}', 'gid={gid}'].",
                None,
            )


model_volume_read_only = ResourceValidationPolicy(
    name="model-volume-read-only",
    description="GPU services mount Cloud Storage volumes read-only, owned by the image's "
    "non-root user (uid/gid 1001 for vLLM images).",
    validate=validate_model_volume_read_only,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=CONFIG,
)
