"""Promotion from stack to stack: what a verified deployment carries forward, and what never moves.

What moves is what was verified and does not depend on the hardware: the exact image (by
digest, when the target runs the same image repository), the model and drafter revisions (when
the target serves the same checkpoint), and the parsers. Everything else is the target stack's
own.

    gemma4 promote --from l4 --to rtx6000 --source-image REF [--write]

A promotion is refused, leaving the target file unchanged, unless the whole result is valid
(docs/promotion-ci.md): a digest-pinned image from an allowed registry, a file that reads back
as the old configuration plus the promoted keys, settings that load, and every mandatory
policy passed. Without `--write` the same edit and checks run and nothing is written."""

from __future__ import annotations

import fnmatch
import io
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RoundTripError

from serving.config.checks import SettingsError, check_text, image_registry, image_repository
from serving.config.settings import Settings, load_settings

PROJECT = "gemma4-vllm"
ROOT = Path(__file__).resolve().parent.parent

#: Keys that move when their condition holds (see `plan`); every other key is the stack's own.
PROMOTED = ("image", "modelRevision", "drafterRevision", "toolCallParser", "reasoningParser")


@dataclass(frozen=True)
class Promotion:
    source: str
    target: str
    #: key -> new value for the target stack file.
    changes: dict[str, str] = field(default_factory=dict)
    #: key -> why it was not carried.
    held: dict[str, str] = field(default_factory=dict)


def plan(
    source_stack: str,
    source: Settings,
    target_stack: str,
    target: Settings,
    deployed_image: str | None = None,
) -> Promotion:
    """What to change in the target stack so it runs what was verified on the source."""
    changes: dict[str, str] = {}
    held: dict[str, str] = {}
    image = deployed_image or source.image
    if image_repository(image) != image_repository(target.image):
        held["image"] = (
            f"{target_stack} runs {image_repository(target.image)}, not {image_repository(image)}"
        )
    elif image != target.image:
        changes["image"] = image
    if source.model.model != target.model.model:
        held["modelRevision"] = f"{target_stack} serves {target.model.model}"
    elif source.model.model_revision != target.model.model_revision:
        changes["modelRevision"] = source.model.model_revision
    if source.model.drafter is None and target.model.drafter is None:
        pass  # neither runs a drafter: nothing to carry or hold
    elif source.model.drafter != target.model.drafter or target.model.drafter is None:
        held["drafterRevision"] = f"{target_stack} has its own drafter setting"
    elif source.model.drafter_revision != target.model.drafter_revision:
        changes["drafterRevision"] = source.model.drafter_revision
    for key, value, current in (
        ("toolCallParser", source.vllm.tool_call_parser, target.vllm.tool_call_parser),
        ("reasoningParser", source.vllm.reasoning_parser, target.vllm.reasoning_parser),
    ):
        if value != current:
            changes[key] = value
    return Promotion(source_stack, target_stack, changes, held)


class PromotionError(ValueError):
    """A promotion that is refused; nothing was written."""


#: Checks the complete result before it is written: (project, stack, full config) -> reasons.
Validator = Callable[[str, str, Mapping[str, Any]], list[str]]

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def stack_path(stack: str, root: Path = ROOT) -> Path:
    from serving.config.stack_config import stack_name_problem

    problem = stack_name_problem(stack)
    if problem:
        raise PromotionError(problem)
    return root / f"Pulumi.{stack}.yaml"


def read_stack(stack: str, root: Path = ROOT) -> dict[str, Any]:
    """The project's keys of a stack file, without the prefix; a key held as `secure:` is
    refused (a promotion must check every value it carries or keeps)."""
    from serving.config.stack_file import StackFileError, config_block, secret_keys

    try:
        config = config_block(stack_path(stack, root), PROJECT)
    except StackFileError as exc:
        raise PromotionError(str(exc)) from None
    prefix = f"{PROJECT}:"
    values = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}
    hidden = secret_keys(values)
    if hidden:
        raise PromotionError(
            f"Pulumi.{stack}.yaml: config key(s) {', '.join(map(repr, hidden))} hold a secure: "
            "value, which only the Pulumi CLI can decrypt, so the promotion cannot check them; "
            "these settings are not secrets: set them in plain text"
        )
    return values


_NOT_REPRODUCIBLE = (
    "this file's layout cannot be reproduced exactly by the YAML editor, so it is not "
    "edited; apply the promotion by hand"
)


def _round_trip(text: str) -> YAML:
    """A round-trip YAML instance that reproduces `text` byte for byte, or PromotionError."""
    indents = [(2, 2, 0), (2, 4, 2), (4, 4, 0), (4, 6, 4), (4, 4, 2), (4, 6, 2), (3, 3, 0)]
    indents += [
        (m, s, o) for m in range(2, 9) for s in range(2, 11) for o in range(s - 1)
        if (m, s, o) not in indents
    ]  # fmt: skip
    for mapping, sequence, offset in indents:
        handler = YAML()
        handler.preserve_quotes = True
        handler.width = 1 << 16
        handler.indent(mapping=mapping, sequence=sequence, offset=offset)
        try:
            data = handler.load(text)
            out = io.StringIO()
            handler.dump(data, out)
        except RoundTripError as exc:
            raise PromotionError(f"not valid YAML ({exc})") from None
        if out.getvalue() == text:
            return handler
    raise PromotionError(_NOT_REPRODUCIBLE)


def _refuse_aliases(handler: YAML, text: str, changes: Mapping[str, str], name: str) -> None:
    """Refuse a promoted key whose value is a YAML anchor with an alias, or an alias: editing
    that one node would change every other place that shares it."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode

    root = handler.compose(text)
    config = next(
        (v for k, v in root.value if isinstance(k, ScalarNode) and k.value == "config"), None
    )
    for key, node in config.value if isinstance(config, MappingNode) else ():
        shared = node.anchor and f"*{node.anchor}" in text
        if str(key.value).removeprefix(f"{PROJECT}:") in changes and shared:
            raise PromotionError(
                f"{name}: {key.value} is the YAML anchor or alias &{node.anchor}, shared with "
                "another place; promotion edits only values written out in full. Break the "
                "alias by hand (write each value out), then promote again"
            )


def _styled(old: Any, value: str) -> Any:
    """`value` in the quoting style (and with the anchor) of the value it replaces."""
    from ruamel.yaml.scalarstring import ScalarString

    if not isinstance(old, ScalarString):
        return value
    new = type(old)(value)
    if (anchor := old.yaml_anchor()) is not None:
        new.yaml_set_anchor(anchor.value, always_dump=True)
    return new


def _comment_gaps(config: Any, keys: list[str], lines: list[str]) -> dict[int, tuple[str, int]]:
    """line index -> (end-of-line comment, spaces before it) for the keys about to change."""
    from ruamel.yaml.tokens import CommentToken

    gaps: dict[int, tuple[str, int]] = {}
    for key in keys:
        slots = config.ca.items.get(key) if hasattr(config, "ca") else None
        if not slots or len(slots) < 3 or not isinstance(slots[2], CommentToken):
            continue
        line = config.lc.key(key)[0]
        comment = slots[2].value.split("\n", 1)[0]
        text = lines[line] if line < len(lines) else ""
        if comment and text.endswith(comment):
            before = text[: -len(comment)]
            gaps[line] = (comment, len(before) - len(before.rstrip(" ")))
    return gaps


def edited_text(text: str, changes: Mapping[str, str], name: str = "stack file") -> str:
    """`text` with `<project>:<key>: value` set for each change, its layout kept."""
    if "\r" in text:
        raise PromotionError(f"{name}: {_NOT_REPRODUCIBLE} (it has CR line endings)")
    try:
        handler = _round_trip(text)
    except PromotionError as exc:
        raise PromotionError(f"{name}: {exc}") from None
    data = handler.load(text)
    if data is None or not isinstance(data, dict):
        raise PromotionError(f"{name}: expected a mapping with a 'config:' block")
    config = data.get("config")
    if not isinstance(config, dict):
        raise PromotionError(f"{name}: has no 'config:' mapping to promote into")
    _refuse_aliases(handler, text, changes, name)
    gaps = _comment_gaps(config, [f"{PROJECT}:{k}" for k in changes], text.splitlines())
    for key, value in changes.items():
        full = f"{PROJECT}:{key}"
        config[full] = _styled(config[full], value) if full in config else value
    out = io.StringIO()
    handler.dump(data, out)
    lines = out.getvalue().split("\n")
    for line, (comment, gap) in gaps.items():
        # The editor keeps a comment's column, or one space when the value grew past it:
        # keep the spaces the file had instead.
        if line < len(lines) and lines[line].endswith(comment):
            value_part = lines[line][: -len(comment)].rstrip(" ")
            lines[line] = value_part + " " * gap + comment
    return "\n".join(lines)


def check_source_image(image: str, stacks: Mapping[str, Settings]) -> None:
    """The image a source stack verified is pinned by a digest and comes from a registry that
    every stack involved allows (`registries`), whether it is then carried or held."""
    check_image(image)
    registry = image_registry(image)
    for name, settings in stacks.items():
        if not any(fnmatch.fnmatchcase(registry, pattern) for pattern in settings.registries):
            raise PromotionError(
                f"--source-image {image!r} comes from {registry!r}, which stack {name!r} does "
                f"not allow (config key 'registries': {', '.join(settings.registries) or 'empty'})"
                "; nothing is promoted from an image outside the allow-list"
            )


def check_image(image: str) -> None:
    """A promoted image is pinned by a sha256 digest and comes from an allowed registry."""
    if not _DIGEST.search(image):
        raise PromotionError(
            f"image {image!r} is not pinned by a digest: promotion carries only "
            "'@sha256:' followed by 64 lowercase hex digits (pass the source stack's "
            "source_image output)"
        )


_MISSING = object()


def _differences(old: Any, new: Any, where: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """(path, old, new) for every leaf where two YAML documents differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[tuple[Any, ...]] = []
        if list(old) != [k for k in new if k in old]:
            found.append((where, "key order", "changed"))
        for key in {**old, **new}:
            found += _differences(old.get(key, _MISSING), new.get(key, _MISSING), (*where, key))
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True)) for d in
                _differences(a, b, (*where, i))]  # fmt: skip
    if old == new and type(old) is type(new):
        return []
    return [(where, None if old is _MISSING else old, None if new is _MISSING else new)]


def validate_result(
    stack: str,
    before: str,
    after: str,
    changes: Mapping[str, str],
    validator: Validator | None,
) -> None:
    """Refuse (PromotionError) unless `after` is exactly `before` plus `changes`, loads as
    settings, and passes `validator` (the program and its mandatory policies)."""
    from serving.config.stack_yaml import StackYamlError, config_of, load_document

    name = f"Pulumi.{stack}.yaml"
    try:
        old = load_document(before.encode("utf-8")) or {}
    except StackYamlError as exc:
        raise PromotionError(f"{name}: {exc}") from None
    try:
        new = load_document(after.encode("utf-8")) or {}
    except StackYamlError as exc:
        raise PromotionError(
            f"{name}: the edit would not be read by the Pulumi CLI ({exc})"
        ) from None
    for where, was, now in _differences(old, new):
        key = where[1] if len(where) == 2 and where[0] == "config" else None
        promoted = (
            isinstance(key, str)
            and key.startswith(f"{PROJECT}:")
            and (key[len(PROJECT) + 1 :] in changes and now == changes[key[len(PROJECT) + 1 :]])
        )
        if not promoted:
            shown = ".".join(map(str, where))
            raise PromotionError(
                f"{name}: the edit would change {shown} ({was!r} -> {now!r}), which is not a "
                "promoted key"
            )
    try:
        config = config_of(new, PROJECT)
    except StackYamlError as exc:
        raise PromotionError(f"{name} after promotion: {exc}") from None
    prefix = f"{PROJECT}:"
    try:
        load_settings({k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)})
    except SettingsError as exc:
        raise PromotionError(f"{name} after promotion: {exc}") from None
    if validator is not None:
        reasons = validator(PROJECT, stack, config)
        if reasons:
            raise PromotionError(f"{name} after promotion is refused:\n  " + "\n  ".join(reasons))


def _read_bytes(path: Path) -> bytes:
    """The file's bytes; a symbolic link is refused rather than followed."""
    if path.is_symlink():
        raise PromotionError(
            f"{path.name} is a symbolic link (to {os.readlink(path)}); promotion does not edit "
            "through links, since replacing it would turn the link into a regular file; "
            "promote into the file it points to, or edit by hand"
        )
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise PromotionError(f"{path.name}: cannot be read ({exc.strerror or exc})") from None
    with os.fdopen(handle, "rb") as source:
        return source.read()


def write_atomically(path: Path, data: bytes, expected: bytes | None = None) -> None:
    """Replace `path` with `data`: a temporary file in the same folder, fsync, os.replace.
    With `expected`, the file must still hold exactly those bytes (and be no link) just before
    the replace, or PromotionError and nothing is written."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        if expected is not None and _read_bytes(path) != expected:
            raise PromotionError(
                f"{path.name} changed while the promotion was checked; run it again"
            )
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def prepare_changes(
    stack: str,
    changes: Mapping[str, str],
    root: Path = ROOT,
    validator: Validator | None = None,
) -> tuple[bytes, bytes]:
    """(the file's bytes, its bytes after the promotion) once the complete result is valid;
    PromotionError otherwise. Writes nothing: the dry run and `--write` both use it."""
    path = stack_path(stack, root)
    for key, value in changes.items():
        try:
            check_text(key, value)
        except SettingsError as exc:
            raise PromotionError(str(exc)) from None
    raw = _read_bytes(path)
    try:
        before = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PromotionError(f"{path.name}: not UTF-8 ({exc.reason})") from None
    if "image" in changes:
        check_image(changes["image"])
    after = edited_text(before, changes, path.name)
    validate_result(stack, before, after, changes, validator)
    return raw, after.encode("utf-8")


def check_distinct(source: str, target: str, root: Path) -> None:
    """Refuse a promotion of a stack onto itself: the same name twice, or two names whose
    stack files are one file (a hard or symbolic link), before anything is read or written."""
    if source == target:
        raise PromotionError(
            f"--to {target!r} names the stack that --from names: a promotion carries what one "
            "stack verified into another stack; name a different stack with --to"
        )
    source_file, target_file = stack_path(source, root), stack_path(target, root)
    try:
        same = os.path.samefile(source_file, target_file)
    except OSError:  # a missing file is reported by the read that follows
        same = False
    if same:
        raise PromotionError(
            f"--to {target!r}: {target_file.name} is the same file as {source_file.name} of "
            f"--from {source!r} (a link), so the promotion would carry a stack onto itself; "
            "name a different stack with --to"
        )
