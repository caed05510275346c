"""model-volume-read-only: the model bucket is mounted read-only, readable by the image's user.

The package mounts the bucket with `uid=1001;gid=1001` (the reference deployment). What the
container really runs as decides whether it can read: vLLM 0.27.1's `vllm/vllm-openai` keeps
`USER root` (docker/Dockerfile), its `vllm-openai-nonroot` target runs as uid 2000, gid 0, and
gcsfuse shows files 0644 and directories 0755 unless `file-mode`/`dir-mode` say otherwise
(gcsfuse docs/semantics.md). Images in `imageUsers` are checked against the mount's options;
any other image may run as any user, so the mount must be readable by every user.

A GCS FUSE CSI volume that turns on gcsfuse's file cache needs the Pod's own `gke-gcsfuse-cache`
volume: without one the driver's webhook adds an emptyDir of that name on the node's disk,
bounded by the sidecar's ephemeral storage (5Gi by the driver's default request and limit,
cmd/webhook/main.go), too small for a checkpoint, and a cache larger than that volume's
`sizeLimit` fills it before gcsfuse evicts (docs/cold-start-evidence.md, "Levers not taken, and
why"). As the driver reads a volume (gcs-fuse-csi-driver pkg/csi_driver/utils.go,
pkg/sidecar_mounter/sidecar_mounter_config.go): the cache is on when a config option
`file-cache:max-size-mb:N` other than 0 gives gcsfuse a cache directory, the `fileCacheCapacity`
attribute being turned into that option (a binary quantity in MiB, a decimal one in MB); the
flag `file-cache-max-size-mb=N` gives no directory, so alone it leaves the cache off, but it
overrides the size. Every size given is judged, the largest of each volume, and the Pod's
volumes together (each keeps its cache in its own folder of the one cache volume) against its
`sizeLimit`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting, setting_int
from policies._k8s import GCSFUSE_DRIVER, GPU_RESOURCE, POD_TEMPLATES, TPU_RESOURCE
from policies._k8s import accelerator as k8s_accelerator
from policies._props import get, items, strings
from policies._resources import (
    JOB,
    SERVICE,
    WORKER_POOL,
    as_bool,
    containers,
    is_gpu_service,
    volumes,
)
from policies._server import is_cache_volume
from serving.render.gke import GCSFUSE_CACHE_VOLUME as CACHE_VOLUME
from serving.render.vllm import VLLM_GID, VLLM_UID

CONFIG = schema(
    {
        "uid": {
            "type": "integer",
            "default": VLLM_UID,
            "description": "uid the package's contract gives the model mount.",
        },
        "gid": {
            "type": "integer",
            "default": VLLM_GID,
            "description": "gid the package's contract gives the model mount.",
        },
        "imageUsers": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "default": {"vllm:openai-nonroot": "2000:0"},
            "description": "Images that run as a non-root user, as 'uid:gid' (matched on the "
            "reference or its last path segment, any registry, tag or digest). Default: vLLM's "
            "non-root target as its Dockerfile tags it (uid 2000, gid 0). An image not listed "
            "may run as any user: the mount must then be readable by every user.",
        },
    }
)
#: gcsfuse's permission bits when the mount options set none (docs/semantics.md).
GCSFUSE_FILE_MODE, GCSFUSE_DIR_MODE = 0o644, 0o755
#: gcsfuse's `file-cache.max-size-mb` as a CSI config option (`file-cache:max-size-mb:N`), which
#: turns the cache on, and as a flag (`file-cache-max-size-mb=N`), which only sizes it.
_MAX_SIZE_OPTION = re.compile(r"file-cache:max-size-mb:(-?\d+)")
_MAX_SIZE_FLAG = re.compile(r"-*file-cache-max-size-mb=(-?\d+)")
#: A config option written with a flag's '=' (`file-cache:max-size-mb=N`): the driver passes an
#: option with '=' to gcsfuse as a flag (`--file-cache:max-size-mb=N`), one gcsfuse has not.
_MIXED = re.compile(r"(file-cache:[a-z0-9-]+)=(.*)")
#: A Kubernetes quantity: a decimal number, then a binary or decimal suffix or an exponent.
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def quantity_bytes(raw: object) -> tuple[float, bool] | None:
    """A Kubernetes quantity in bytes, and whether its suffix is binary; None if not one."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        return None
    found = _QUANTITY.fullmatch(str(raw).strip())
    if not found:
        return None
    number, suffix = float(found[1]), found[2] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix], True
    if suffix in _DECIMAL or not suffix:
        return number * _DECIMAL.get(suffix, 1), False
    return number * 10 ** int(suffix[1:]), False  # an exponent: e3, E-2


def _mount_options(raw: object) -> set[str]:
    """gcsfuse options of Cloud Run's `gcs.mountOptions` list or a CSI volume's string."""
    parts = [raw] if isinstance(raw, str) else strings(raw)
    return {o.strip().replace(" ", "") for p in parts for o in re.split(r"[;,]", p) if o.strip()}


def _option(options: set[str], key: str) -> str | None:
    for option in options:
        name, _, value = option.partition("=")
        if name.replace("_", "-") == key:
            return value
    return None


def file_cache_mib(options: set[str], attributes: object) -> int | None:
    """The file cache's size a CSI volume asks for, in gcsfuse's MiB: the largest it gives
    (-1: the cache volume's whole capacity, when that is all it gives); None when the cache is
    off. ValueError for a `fileCacheCapacity` that is not a quantity (the driver refuses the
    volume: gcs-fuse-csi-driver pkg/csi_driver/utils.go)."""
    sizes: list[int] = []
    on = False
    for option in options:
        normal = option.replace("_", "-").lower()
        if found := _MAX_SIZE_OPTION.fullmatch(normal):
            sizes.append(int(found[1]))
            on = on or int(found[1]) != 0
        elif found := _MAX_SIZE_FLAG.fullmatch(normal):
            sizes.append(int(found[1]))
    capacity = get(attributes, "fileCacheCapacity")
    if capacity is not None:
        size = quantity_bytes(capacity)
        if size is None:
            raise ValueError(
                f"fileCacheCapacity {capacity!r} is not a Kubernetes quantity (500Mi, 10Gi, -1 "
                "or 0), so the CSI driver refuses to mount the volume"
            )
        count, binary = size
        sizes.append(-1 if count < 0 else int(count // (2**20 if binary else 10**6)))
        on = on or count != 0
    if not on:
        return None
    return max(sizes) if any(s > 0 for s in sizes) else -1


def cache_volume_problem(resource_type: str, props: Mapping[str, Any], size_mib: int) -> str | None:
    """Why a Pod cannot hold a file cache of ``size_mib`` MiB, or None when it can."""
    declared = [v for v in volumes(resource_type, props) if get(v, "name") == CACHE_VOLUME]
    if not declared:
        return (
            f"the Pod declares no {CACHE_VOLUME!r} volume, so the CSI driver's sidecar keeps the "
            "cache in its own ephemeral storage (5Gi by the driver's default), too small for a "
            f"checkpoint. Declare {CACHE_VOLUME!r} (an emptyDir of medium Memory, with a "
            "sizeLimit above the cache)"
        )
    empty_dir = get(declared[0], "emptyDir")
    if empty_dir is None:
        return None  # a disk the Pod claims: its size is the claim's
    limit = get(empty_dir, "sizeLimit")
    if limit is None:
        if get(empty_dir, "medium") != "Memory":
            return None  # the node's disk, bounded by its ephemeral storage
        return (
            f"{CACHE_VOLUME!r} is an emptyDir of medium Memory without a sizeLimit, so the "
            "cache can take the Pod's memory until it is killed. Give it a sizeLimit above "
            "file-cache:max-size-mb"
        )
    size = quantity_bytes(limit)
    if size is None:
        return f"{CACHE_VOLUME!r}'s sizeLimit {limit!r} is not a Kubernetes quantity"
    if size_mib > size[0] / 2**20:
        return (
            f"{size_mib} MiB of file cache (file-cache:max-size-mb, every volume's together) "
            f"is larger than {CACHE_VOLUME!r}'s sizeLimit "
            f"{limit} ({size[0] / 2**20:.0f} MiB), so the volume fills before gcsfuse evicts. "
            "Keep max-size-mb below it"
        )
    return None


def _user_of(image: object, users: dict[str, str]) -> tuple[int, int] | None:
    """The configured non-root 'uid:gid' an image runs as, or None (root or not known)."""
    if not isinstance(image, str):
        return None
    last = image.rsplit("/", 1)[-1]
    for key, user in users.items():
        if image.startswith(key) or last.startswith(key):
            uid, _, gid = user.partition(":")
            if not uid.isdigit() or not (gid or uid).isdigit():
                raise ValueError(f"policy config imageUsers[{key!r}] = {user!r} is not 'uid:gid'")
            return int(uid), int(gid or uid)
    return None


def unreadable_reason(options: set[str], uid: int, gid: int) -> str | None:
    """Why uid:gid cannot read a gcsfuse mount with these options, or None when it can."""
    if uid == 0:
        return None  # root reads whatever the modes say
    owner, group = _option(options, "uid"), _option(options, "gid")
    modes = {
        "file-mode": (_option(options, "file-mode"), GCSFUSE_FILE_MODE, 0o4),
        "dir-mode": (_option(options, "dir-mode"), GCSFUSE_DIR_MODE, 0o5),
    }
    for name, (raw, default, needed) in modes.items():
        try:
            mode = int(raw, 8) if raw else default
        except ValueError:
            return f"{name}={raw!r} is not an octal mode"
        if owner == str(uid):
            bits = mode >> 6
        elif group == str(gid):
            bits = mode >> 3
        else:
            bits = mode
        if bits & needed != needed:
            return (
                f"{name} {mode:o} with owner uid={owner or '(the mounting process)'} "
                f"gid={group or '(the mounting process)'} gives uid {uid} gid {gid} no "
                f"{'read' if needed == 0o4 else 'read and search'} access"
            )
    return None


def _judged(resource_type: str, props: Mapping[str, Any]) -> bool:
    """A Cloud Run GPU workload, or a Kubernetes Pod template on an accelerator."""
    if resource_type in (SERVICE, JOB, WORKER_POOL):
        return is_gpu_service(resource_type, props)
    if resource_type in POD_TEMPLATES:
        return k8s_accelerator(resource_type, props) is not None or any(
            get(c, "resources", "limits", r)
            for c in containers(resource_type, props)
            for r in (GPU_RESOURCE, TPU_RESOURCE)
        )
    return False


def _bucket_volumes(
    resource_type: str, props: Mapping[str, Any]
) -> list[tuple[object, bool, set[str], str]]:
    """(name, read-only, mount options, what) of every Cloud Storage volume: Cloud Run's
    `gcs` volumes, and Kubernetes' GCS FUSE CSI ephemeral volumes (read-only only when the
    volume and every mount of it say so; options from volumeAttributes.mountOptions)."""
    found: list[tuple[object, bool, set[str], str]] = []
    for volume in volumes(resource_type, props):
        name = get(volume, "name")
        if is_cache_volume(volume):
            continue  # the compile cache, written by the server: compile-cache-keyed judges it
        if get(volume, "gcs") is not None:
            read_only = as_bool(get(volume, "gcs", "readOnly")) is True
            options = _mount_options(get(volume, "gcs", "mountOptions"))
            found.append((name, read_only, options, "gcs.read_only=True"))
        elif get(volume, "csi", "driver") == GCSFUSE_DRIVER:
            mounts = [
                m
                for c in containers(resource_type, props)
                for m in items(get(c, "volumeMounts"))
                if get(m, "name") == name
            ]
            read_only = as_bool(get(volume, "csi", "readOnly")) is True and all(
                as_bool(get(m, "readOnly")) is True for m in mounts
            )
            options = _mount_options(get(volume, "csi", "volumeAttributes", "mountOptions"))
            found.append((name, read_only, options, "csi.readOnly: true and readOnly mounts"))
    return found


def validate_model_volume_read_only(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    if not _judged(args.resource_type, args.props):
        return
    image_users = {str(k): str(v) for k, v in dict(setting(args, CONFIG, "imageUsers")).items()}
    uid = setting_int(args, CONFIG, "uid")
    gid = setting_int(args, CONFIG, "gid")
    all_containers = containers(args.resource_type, args.props)
    if args.resource_type in POD_TEMPLATES:
        # Every GCS FUSE volume of the Pod keeps its cache in its own folder of the one cache
        # volume (the sidecar's CacheDir, .volumes/<name>): their sizes add up.
        cached: dict[str, int] = {}
        for volume in volumes(args.resource_type, args.props):
            if get(volume, "csi", "driver") != GCSFUSE_DRIVER:
                continue
            attributes = get(volume, "csi", "volumeAttributes")
            options = _mount_options(get(attributes, "mountOptions"))
            for option in sorted(options):
                if mixed := _MIXED.fullmatch(option.lower()):
                    report_violation(
                        f"{args.name}: Cloud Storage volume {get(volume, 'name')!r}: mount option "
                        f"{option!r} has a flag's '=' in gcsfuse's config form, so the CSI driver "
                        f"passes it to gcsfuse as the flag --{mixed[1]}, which gcsfuse does not "
                        f"know. Write {mixed[1]}:{mixed[2]}.",
                        None,
                    )
            try:
                size_mib = file_cache_mib(options, attributes)
            except ValueError as exc:
                report_violation(
                    f"{args.name}: Cloud Storage volume {get(volume, 'name')!r}: {exc}.", None
                )
                continue
            if size_mib is not None:
                cached[str(get(volume, "name"))] = size_mib
        total = sum(s for s in cached.values() if s > 0) or -1
        problem = cache_volume_problem(args.resource_type, args.props, total) if cached else None
        if problem is not None:
            which = ", ".join(repr(n) for n in cached)
            report_violation(
                f"{args.name}: Cloud Storage volume{'s' * (len(cached) > 1)} {which} "
                f"turn{'s' * (len(cached) == 1)} on gcsfuse's file cache, but {problem}.",
                None,
            )
    for name, read_only, options, how in _bucket_volumes(args.resource_type, args.props):
        users = [
            c
            for c in all_containers
            if any(get(m, "name") == name for m in items(get(c, "volumeMounts")))
        ]
        if not read_only:
            report_violation(
                f"{args.name}: Cloud Storage volume {name!r} is not read-only; the serving "
                f"container only reads weights, so mount it with {how} (only the "
                "download job writes).",
                None,
            )
        for c in users:
            try:
                user = _user_of(get(c, "image"), image_users)
            except ValueError as exc:
                report_violation(f"{args.name}: {exc}", None)
                continue
            if user is None:
                # What user an image runs as is not known from its name: any user must read.
                reason = unreadable_reason(options, -1, -1)
                if reason is not None:
                    report_violation(
                        f"{args.name}: Cloud Storage volume {name!r} is mounted into "
                        f"{get(c, 'image')!r}, whose user is not known (it may run as any "
                        f"user): {reason.replace('uid -1 gid -1', 'other users')}. Leave "
                        "file-mode/dir-mode at gcsfuse's defaults (0644/0755), or list the "
                        "image's user in the policy's imageUsers.",
                        None,
                    )
                continue
            reason = unreadable_reason(options, *user)
            if reason is not None:
                report_violation(
                    f"{args.name}: Cloud Storage volume {name!r} is mounted into "
                    f"{get(c, 'image')!r}, which runs as uid {user[0]} gid {user[1]}: {reason}. "
                    f"Add mount options uid={user[0]}, or gid={user[1]} with group read, or "
                    "leave file-mode/dir-mode at gcsfuse's defaults (0644/0755).",
                    None,
                )
        # Every image that mounts the volume, judged by what it mounts, not by its name.
        contract = [str(get(c, "image") or "<image not known at preview>") for c in users]
        if not contract:
            continue
        missing = [o for o in (f"uid={uid}", f"gid={gid}") if o not in options]
        if missing:
            report_violation(
                f"{args.name}: Cloud Storage volume {name!r} is mounted into {contract[0]!r} "
                f"without {' and '.join(missing)}, the owner this package's contract gives the "
                "model mount (the reference deployment reported 'Permission denied' without "
                "it). vLLM 0.27.1's own image runs as root and reads either way; the owner "
                f"matters for images that run as uid {uid}. "
                f"Add mount_options ['uid={uid}', 'gid={gid}'].",
                None,
            )


model_volume_read_only = resource_policy(
    "model-volume-read-only",
    "GPU services and accelerator Pods mount Cloud Storage volumes (Cloud Run "
    "gcs, GKE's GCS FUSE CSI driver) read-only, with the package's uid/gid contract (1001) on "
    "vLLM images, readable by the user each image runs as, and a gcsfuse file cache on a "
    "gke-gcsfuse-cache volume that holds it; a compile cache folder "
    "(only-dir=compile-cache/...) is compile-cache-keyed's.",
    validate_model_volume_read_only,
    config=CONFIG,
)
