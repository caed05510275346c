"""compile-cache-keyed: vLLM's compile cache is kept in its own key's folder, on a writable mount.

The cache holds code vLLM loads (torch.compile's and the TPU image's JAX artefacts, at
`VLLM_CACHE_ROOT` / `VLLM_XLA_CACHE_PATH`). A Cloud Storage folder shared by servers that
differ in image, command line, environment or hardware would hand one server artefacts
compiled for another, so a cache on a bucket mount must show exactly `compile-cache/<key>`
(gcsfuse `only-dir`), the key recomputed here from the container itself
(`serving/render/compile_cache.py`). Two resources declaring one folder with different keys
fail the same way: at most one of them matches it. vLLM 0.27.1 writes into its cache
directory at start-up (Inductor's cache dir points inside it), so a read-only mount there
fails the start: refused too. A cache in the container's own filesystem is vLLM's default,
neither shared nor kept: not judged. A TPU node running the package's launcher restores and
saves its XLA cache at the launch document's `cacheKey` (serving/render/tpu_startup.py): that
key must be the one recomputed from the document's image and command line and the node's TPU,
and the bucket it names in `model-bucket` one the launcher accepts.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy
from policies._props import get, items, read_field
from policies._resources import as_bool, containers, volumes
from policies._server import ContainerSpec, Workload, cache_only_dir, workload_of
from serving.render.compile_cache import CACHE_ENVS, cache_folder, cache_key
from serving.render.tpu_startup import (
    BUCKET_KEY,
    LAUNCHER,
    node_cache_key,
    read_bucket,
    read_launch,
)
from serving.render.vllm import VllmCommand


def _mount_of(spec: ContainerSpec, path: str) -> tuple[str, str] | None:
    """The (volume, mount path) that holds `path` in the container (the deepest one)."""
    holding = [
        (name, mount)
        for name, mount in spec.volume_mounts
        if path == mount or path.startswith(mount.rstrip("/") + "/")
    ]
    return max(holding, key=lambda m: len(m[1]), default=None)


def _read_only(name: str, volume: Any, raw_containers: list[Mapping[str, Any]]) -> bool:
    """The volume is mounted read-only: Cloud Run's `gcs.readOnly`, a CSI volume's
    `readOnly`, or a `readOnly` mount of it."""
    if as_bool(get(volume, "gcs", "readOnly")) or as_bool(get(volume, "csi", "readOnly")):
        return True
    return any(
        get(m, "name") == name and as_bool(get(m, "readOnly"))
        for c in raw_containers
        for m in items(get(c, "volumeMounts"))
    )


def _key(spec: ContainerSpec, accelerator: str | None) -> str | None:
    """The container's compile cache key, or None when part of it is not known."""
    count = spec.devices[0]
    if spec.unknown or spec.image is None or accelerator is None or count is None:
        return None
    return cache_key(
        image=spec.image,
        argv=[*(spec.command or []), *(spec.args or [])],
        env={k: v for k, v in spec.env.items() if v is not None},
        accelerator=accelerator,
        count=count,
    )


def launch_problems(workload: Workload, bucket: tuple[Any, bool]) -> list[str]:
    """A TPU launch whose `model-bucket` (value, unknown) the launcher refuses, or whose
    `cacheKey` is not its own node's key (a document the launcher cannot read is the reading
    policies' to refuse)."""
    if not any(script == LAUNCHER for _, script in workload.startup_scripts):
        return []
    problems = []
    name, unknown = bucket
    if not unknown:
        try:
            read_bucket(name)
        except ValueError as exc:
            problems.append(f"{exc}: the node's launcher stops before it copies the weights")
    count = workload.devices[0]
    if workload.launch is None or workload.accelerator is None or count is None:
        return problems
    try:
        launch = read_launch(workload.launch)
    except ValueError:
        return problems
    command = VllmCommand(tuple(launch["command"]), tuple(launch["args"]))
    key = node_cache_key(command, launch["image"], workload.accelerator, count)
    if launch["cacheKey"] != key:
        problems.append(
            f"its launch keeps the XLA cache at {cache_folder(launch['cacheKey'])}, but this "
            f"node's key (its image, command line and {workload.accelerator}) is {key}: nodes "
            "of other configurations may share that folder and load each other's compiled "
            f"code. Use cacheKey {key}"
        )
    return problems


def cache_problems(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """What is wrong with where each container of the resource keeps its compile cache."""
    workload = workload_of(resource_type, props)
    problems = launch_problems(workload, read_field(get(props, "metadata"), BUCKET_KEY))
    declared = {str(get(v, "name")): v for v in volumes(resource_type, props)}
    raw_containers = containers(resource_type, props)
    for spec in workload.containers:
        for variable in CACHE_ENVS:
            raw = spec.env.get(variable)
            # As the kernel resolves it: /mnt/compile-cache/../models is the weights' mount.
            path = posixpath.normpath(raw) if raw else None
            mount = _mount_of(spec, path) if path else None
            if mount is None:
                continue
            what, where = f"container {spec.name!r}: {variable}={raw}", mount[0]
            volume = declared.get(where)
            if _read_only(where, volume, raw_containers):
                problems.append(
                    f"{what} is on volume {where!r}, mounted read-only; vLLM 0.27.1 writes "
                    "into its cache directory at start-up, so the server fails to start. Mount "
                    "its own writable folder (compile-cache/<key>) there"
                )
                continue
            if where not in workload.gcs_volumes:
                continue
            key = _key(spec, workload.accelerator)
            folder = cache_only_dir(volume)
            if key is not None and folder != cache_folder(key):
                shown = f"folder {folder!r}" if folder else "the whole bucket"
                problems.append(
                    f"{what} is on Cloud Storage volume {where!r}, which shows {shown}: "
                    "servers of other images, command lines, environments or accelerators "
                    "may share it and load each other's compiled code. Mount it with "
                    f"only-dir={cache_folder(key)} (this container's key)"
                )
    return problems


def validate_compile_cache_keyed(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    for problem in cache_problems(args.resource_type, args.props):
        report_violation(f"{args.name}: {problem}", None)


compile_cache_keyed = resource_policy(
    "compile-cache-keyed",
    "vLLM's compile cache (VLLM_CACHE_ROOT, VLLM_XLA_CACHE_PATH) on a Cloud Storage mount "
    "shows only its own key's folder (compile-cache/<key>, from the container's image, command "
    "line, environment and accelerator), and is never on a read-only mount; a TPU node's "
    "launch keeps its XLA cache at its own key.",
    validate_compile_cache_keyed,
)
