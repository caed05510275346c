"""A served checkpoint is known by where it comes from, never by how its path is spelled.

Pure: no Pulumi import. The model bucket holds exactly what the stack's download job writes:
`hf download REPO --revision=REV --local-dir=/mnt/models/<folder>` (components/model_bucket.py),
one folder per catalogue checkpoint (:mod:`serving.catalog.models`), folder = the repository's own
name.
A path vLLM is given resolves to such a checkpoint only when it is, exactly, a Cloud Storage
mount of the container (or the TPU node's copy of the bucket) followed by one catalogue
folder. Anything else (another case, `..`, `.`, `//`, globs, `~`,
variables, a Hugging Face cache snapshot, another folder) is refused with the reason, and the
identity (repository, quantisation, QAT) comes from the catalogue, not from the spelling.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from serving.catalog.models import MODELS, ModelCard


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint the stack produces, and how it was reached."""

    card: ModelCard
    #: The path or id vLLM is given.
    served_as: str
    #: "model bucket" (written by the download job) or "Hugging Face" (downloaded at boot).
    origin: str
    #: The Hugging Face revision vLLM is given (None: a mounted folder, fixed by the job).
    revision: str | None = None
    #: The mount path the folder is under (a model bucket checkpoint).
    mount: str | None = None


def revision_problem(revision: str) -> str | None:
    """Why a Hugging Face revision does not name the publisher's own files, or None.

    The Hub serves `refs/pr/N` (a pull request anyone with access may open on the repository)
    and `refs/convert/...` (files converted by a bot) under the repository's id: the same id
    at such a revision is someone else's checkpoint. Branch and tag names and commit shas
    are accepted."""
    if revision.lower().startswith("refs/") or "%" in revision:
        return (
            f"the revision {revision!r} names a pull request or conversion ref, whose files are "
            "not the publisher's; give a branch, tag or commit of the repository"
        )
    return None


def resolve_checkpoint(
    model: object, mount_paths: Iterable[str]
) -> tuple[Checkpoint | None, str | None]:
    """(checkpoint, None), or (None, why the served model is not a known checkpoint)."""
    if not isinstance(model, str) or not model:
        return None, "no model is given (vLLM would serve its own default model)"
    folders = {card.folder: card for card in MODELS.values()}
    expected = sorted(f"<model mount>/{folder}" for folder in folders)
    shown = repr(model)
    bad = sorted({c for c in model if c in "*?[]{}~$`\\" or c.isspace() or ord(c) < 32})
    if bad:
        return None, (
            f"the served model {shown} holds {' '.join(bad)!r}: a glob, expansion or escape "
            "is not a path the reader can resolve"
        )
    if not model.startswith("/"):
        if model in MODELS:
            return None, (
                f"the served model {shown} is a Hugging Face id: a Cloud Run service serves "
                f"the folder the download job writes to its model mount ({', '.join(expected)})"
            )
        lower = {k.lower(): k for k in MODELS}
        hint = (
            f" (the catalogue spells it {lower[model.lower()]!r})" if model.lower() in lower else ""
        )
        return None, (
            f"the served model {shown} is not a checkpoint of the model catalogue{hint}; "
            f"allowed: {', '.join(sorted(MODELS))}"
        )
    path = model[:-1] if model.endswith("/") and len(model) > 1 else model
    parts = path.split("/")[1:]
    if any(p in ("", ".", "..") for p in parts):
        return None, (
            f"the served model path {shown} is not normalised (an empty, `.` or `..` "
            "component); give the checkpoint folder itself"
        )
    if "snapshots" in parts or any(p.startswith("models--") for p in parts):
        return None, (
            f"the served model path {shown} is a Hugging Face cache snapshot, not a folder "
            "the stack's download job writes"
        )
    parent, folder = "/" + "/".join(parts[:-1]), parts[-1]
    mounts = {m.rstrip("/") or "/" for m in mount_paths}
    if parent in mounts and folder in folders:
        return Checkpoint(folders[folder], model, "model bucket", mount=parent), None
    case = {f.lower(): f for f in folders}
    if parent in mounts and folder.lower() in case:
        return None, (
            f"the served model path {shown} differs in case from the folder the download job "
            f"writes ({parent}/{case[folder.lower()]}); Cloud Storage names are case-sensitive"
        )
    where = (
        f"one of {', '.join(sorted(f'{m}/{f}' for m in mounts for f in folders))}"
        if mounts
        else "a folder of a Cloud Storage volume mounted into the container (none is)"
    )
    return None, (
        f"the served model path {shown} is not a checkpoint this stack's download job "
        f"produces; serve {where}"
    )
