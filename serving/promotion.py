"""Promotion from stack to stack: what a verified deployment carries forward, and what never moves.

A change is proven on `l4` first, then promoted to `rtx6000`, then `tpu-v6e1`. What moves is
what was verified and does not depend on the hardware: the exact image (by digest, when the
target runs the same image repository), the model and drafter revisions (when the target
serves the same checkpoint), and the parsers. Everything else is the target stack's own:
hardware, placement, memory and batching, speculative decoding, scaling, access.

    python -m serving.promotion --from l4 --to rtx6000 --source-image REF [--write]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from serving.settings import Settings, config_keys, load_settings

PROJECT = "gemma4-vllm"
ROOT = Path(__file__).resolve().parent.parent

#: Keys that move when their condition holds (see `plan`).
PROMOTED = ("image", "modelRevision", "drafterRevision", "toolCallParser", "reasoningParser")
#: Keys that are each stack's own, whatever was verified upstream.
STACK_OWN = frozenset(config_keys()) - frozenset(PROMOTED)


@dataclass(frozen=True)
class Promotion:
    source: str
    target: str
    #: key -> new value for the target stack file.
    changes: dict[str, str] = field(default_factory=dict)
    #: key -> why it was not carried.
    held: dict[str, str] = field(default_factory=dict)


def image_repository(image: str) -> str:
    """`vllm/vllm-openai:v1` and `.../vllm-openai@sha256:...` -> `vllm-openai`."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


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
    if source.model.drafter != target.model.drafter or target.model.drafter is None:
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


def read_stack(stack: str, root: Path = ROOT) -> dict[str, Any]:
    data = yaml.safe_load((root / f"Pulumi.{stack}.yaml").read_text()) or {}
    prefix = f"{PROJECT}:"
    config: Mapping[str, Any] = data.get("config") or {}
    return {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}


def write_changes(stack: str, changes: Mapping[str, str], root: Path = ROOT) -> None:
    """Edit `Pulumi.<stack>.yaml` in place, keeping its comments and order."""
    path = root / f"Pulumi.{stack}.yaml"
    text = path.read_text()
    for key, value in changes.items():
        line = f"  {PROJECT}:{key}: {yaml.safe_dump(value, default_style=None).strip()}"
        if line.endswith("\n..."):
            line = line[: -len("\n...")]
        pattern = re.compile(rf"^  {re.escape(PROJECT)}:{re.escape(key)}:.*$", re.MULTILINE)
        text, count = pattern.subn(line, text)
        if count == 0:
            text = text.rstrip("\n") + "\n" + line + "\n"
    path.write_text(text)
    load_settings(read_stack(stack, root))  # the result must still be a valid stack


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m serving.promotion",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--from", dest="source", required=True, help="verified stack")
    parser.add_argument("--to", dest="target", required=True, help="stack to promote into")
    parser.add_argument(
        "--source-image", help="upstream image the source stack verified (its source_image output)"
    )
    parser.add_argument("--write", action="store_true", help="edit Pulumi.<to>.yaml in place")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        source = load_settings(read_stack(args.source))
        target = load_settings(read_stack(args.target))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = plan(args.source, source, args.target, target, args.source_image)
    for key, value in result.changes.items():
        print(f"promote {key}: {value}")
    for key, why in result.held.items():
        print(f"hold    {key}: {why}")
    if not result.changes:
        print(f"{args.target} already runs what {args.source} verified")
    if args.write and result.changes:
        write_changes(args.target, result.changes)
        print(f"wrote Pulumi.{args.target}.yaml")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
