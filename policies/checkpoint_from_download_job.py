"""checkpoint-from-download-job: a served bucket folder is one this stack's download job writes.

A stack policy. The launch reader resolves a served path to a catalogue folder under a Cloud
Storage mount (`serving.catalog.checkpoints`); this policy proves where that folder's files
come from: a Cloud Run job of the same stack running exactly `hf download REPO
--revision=REV --local-dir=MOUNT/FOLDER` for that folder's catalogue repository. A stack that
downloads weights some other way (`downloadWeights: false`) can set it to advisory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from policies._config import stack_policy
from policies._props import get, items, strings
from policies._resources import JOB, SERVICE, WORKER_POOL, containers, volumes
from policies._server import is_cache_volume, read_servers, remaps_root
from serving.catalog.checkpoints import revision_problem


@dataclass(frozen=True)
class Download:
    """What one download job writes: a repository at a revision into bucket/folder."""

    bucket: str | None
    folder: str
    repo: str
    revision: str | None


def _option(args: list[str], name: str) -> str | None:
    """`--name=value` (the one form a download job may give)."""
    return next((a.split("=", 1)[1] for a in args if a.startswith(name + "=")), None)


def _buckets(resource_type: str, props: Mapping[str, Any], container: Any) -> dict[str, str | None]:
    """Mount path -> bucket name (None when unknown at preview) of a container's GCS mounts."""
    by_volume = {
        str(get(v, "name")): get(v, "gcs", "bucket")
        for v in volumes(resource_type, props)
        # A volume mounted with gcsfuse's only-dir shows a folder of the bucket, not its root.
        if get(v, "gcs") is not None and not remaps_root(v)
    }
    found: dict[str, str | None] = {}
    for mount in items(get(container, "volumeMounts")):
        name, path = get(mount, "name"), get(mount, "mountPath")
        if get(mount, "subPath") or get(mount, "subPathExpr"):
            continue  # the mount's root is a folder of the bucket: files land elsewhere
        if isinstance(name, str) and isinstance(path, str) and name in by_volume:
            bucket = by_volume[name]
            found[path.rstrip("/")] = bucket if isinstance(bucket, str) else None
    return found


#: `hf download` options a download job may give, each as `--option=value`.
_JOB_OPTIONS = frozenset({"--revision", "--local-dir"})


def _download_of(resource_type: str, props: Mapping[str, Any], container: Any) -> Download | None:
    """What a container writes when it is exactly a download job's `hf download`."""
    if resource_type != JOB:
        return None
    argv = strings(get(container, "commands")) + strings(get(container, "args"))
    if argv[:2] not in (["hf", "download"], ["huggingface-cli", "download"]):
        return None
    # Only a command line read exactly counts: an option not listed here (an abbreviation
    # `--rev`, `--repo-type dataset`, `--cache-dir`) may download something else, so such a
    # job vouches for no folder.
    options = [a.split("=", 1)[0] for a in argv[2:] if a.startswith("-")]
    if any(o not in _JOB_OPTIONS for o in options):
        return None
    if any(a in _JOB_OPTIONS and "=" not in a for a in argv[2:]):
        return None  # `--revision X` (two words): the stack writes `--revision=X`
    positional = [a for a in argv[2:] if not a.startswith("-")]
    local = _option(argv, "--local-dir")
    if len(positional) != 1 or local is None:
        return None  # `hf download REPO FILE...` writes only some files
    parent, _, folder = local.rstrip("/").rpartition("/")
    buckets = _buckets(resource_type, props, container)
    if parent not in buckets:
        return None
    return Download(buckets[parent], folder, positional[0], _option(argv, "--revision"))


def downloads(resources: list[tuple[str, Mapping[str, Any]]]) -> list[Download]:
    """Every checkpoint the stack's download jobs write."""
    found: list[Download] = []
    for resource_type, props in resources:
        for container in containers(resource_type, props):
            download = _download_of(resource_type, props, container)
            if download is not None:
                found.append(download)
    return found


def bucket_writers(resources: list[tuple[str, Mapping[str, Any]]]) -> list[tuple[str | None, str]]:
    """(bucket, which container) of every Cloud Run container of the stack that mounts a
    Cloud Storage volume writable and is not exactly a download job: it may write any file
    into any folder of that bucket."""
    found: list[tuple[str | None, str]] = []
    for resource_type, props in resources:
        if resource_type not in (SERVICE, JOB, WORKER_POOL):
            continue
        writable = {
            str(get(v, "name")): get(v, "gcs", "bucket")
            for v in volumes(resource_type, props)
            if get(v, "gcs") is not None
            and get(v, "gcs", "readOnly") is not True
            # A compile cache shows only its compile-cache/ folder: no checkpoint's.
            and not is_cache_volume(v)
        }
        for index, container in enumerate(containers(resource_type, props)):
            mounted = [
                writable[str(get(m, "name"))]
                for m in items(get(container, "volumeMounts"))
                if str(get(m, "name")) in writable
            ]
            if not mounted or _download_of(resource_type, props, container) is not None:
                continue
            name = get(container, "name") or f"#{index}"
            for bucket in mounted:
                found.append((bucket if isinstance(bucket, str) else None, f"container {name!r}"))
    return found


#: pulumi-gcp's resource that writes one object into a bucket.
BUCKET_OBJECT = "gcp:storage/bucketObject:BucketObject"


def bucket_objects(resources: list[tuple[str, Mapping[str, Any]]]) -> list[tuple[str | None, str]]:
    """(bucket, object name) of every object the stack writes itself (an unknown bucket is
    None; an unknown name is taken as the whole bucket, "")."""
    found: list[tuple[str | None, str]] = []
    for resource_type, props in resources:
        if resource_type != BUCKET_OBJECT:
            continue
        bucket, name = get(props, "bucket"), get(props, "name")
        # gcsfuse shows `a//b` and `./a` as written: only a name that is a plain path of
        # the folder can be compared, anything else is taken as writing into every folder.
        text = name if isinstance(name, str) else ""
        parts = text.split("/")
        if not text or any(p in ("", ".", "..") for p in parts[:-1]):
            text = ""
        found.append((bucket if isinstance(bucket, str) else None, text))
    return found


def validate_checkpoint_from_download_job(
    args: StackValidationArgs, report_violation: ReportViolation
) -> None:
    resources = [(r.resource_type, r.props) for r in args.resources]
    written = downloads(resources)
    written_objects = bucket_objects(resources)
    writers = bucket_writers(resources)
    for resource in args.resources:
        for server in read_servers(resource.resource_type, resource.props).servers:
            for role, checkpoint in (
                ("serves", server.checkpoint),
                ("drafts with", server.drafter_checkpoint),
            ):
                if checkpoint is None or checkpoint.origin != "model bucket":
                    continue
                bucket = _served_bucket(resource.resource_type, resource.props, checkpoint.mount)
                folder = checkpoint.card.folder
                matches = [
                    d
                    for d in written
                    if d.folder == folder
                    and (d.bucket is None or bucket is None or d.bucket == bucket)
                ]
                others = [
                    d
                    for d in matches
                    if d.repo != checkpoint.card.repo_id
                    or (d.revision is not None and revision_problem(d.revision) is not None)
                ]
                objects = [
                    o
                    for o in written_objects
                    if (o[1] == "" or o[1].startswith(folder + "/"))
                    and (o[0] is None or bucket is None or o[0] == bucket)
                ]
                by_hand = [w for w in writers if w[0] is None or bucket is None or w[0] == bucket]
                if matches and not others and not objects and not by_hand:
                    continue
                if by_hand and not objects:
                    why = (
                        f"{by_hand[0][1]} of this stack mounts its bucket writable and is not "
                        "a download job, so it may write into the folder"
                    )
                elif objects:
                    why = (
                        f"the stack also writes the object {objects[0][1]!r} into it (a "
                        "BucketObject), so its files are not only what the download job wrote"
                    )
                elif others and others[0].repo == checkpoint.card.repo_id:
                    why = f"a download job writing it: {revision_problem(others[0].revision or '')}"
                elif others:
                    # Every job writing the folder must download the folder's repository: a
                    # second job writing another repository over it changes its files.
                    why = (
                        f"a download job writing it downloads {others[0].repo!r}, not "
                        f"{checkpoint.card.repo_id!r}"
                    )
                else:
                    where = f"bucket {bucket!r}" if bucket else "its bucket"
                    why = f"no download job of this stack writes {folder!r} to {where}"
                report_violation(
                    f"{resource.name}: {server.where} {role} {checkpoint.served_as!r}, but {why}, "
                    "so where its weights come from is not known. Let the stack download it "
                    "(stack key 'downloadWeights'), or set this policy to advisory for a bucket "
                    "filled another way.",
                    resource.urn,
                )


def _served_bucket(resource_type: str, props: Mapping[str, Any], mount: str | None) -> str | None:
    for container in containers(resource_type, props):
        bucket = _buckets(resource_type, props, container).get((mount or "").rstrip("/"))
        if bucket is not None:
            return bucket
    return None


checkpoint_from_download_job = stack_policy(
    "checkpoint-from-download-job",
    "A served model-bucket folder is written by a download job of the same stack, "
    "for the catalogue repository of that folder.",
    validate_checkpoint_from_download_job,
)
