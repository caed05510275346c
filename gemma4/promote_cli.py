"""`gemma4 promote`: the command line of a promotion (:mod:`serving.promotion`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

import serving.promotion
from endpoint.redact import redact
from gemma4.options import add_project_options, found_project_dir
from serving.config.checks import SettingsError, check_text
from serving.config.project import ProjectError, named_stack_problem
from serving.config.settings import load_settings
from serving.promotion import (
    PromotionError,
    Validator,
    check_distinct,
    check_image,
    check_source_image,
    plan,
    prepare_changes,
    read_stack,
    stack_path,
    write_atomically,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gemma4 promote",
        description=serving.promotion.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--from", dest="source", required=True, help="verified stack")
    parser.add_argument("--to", dest="target", required=True, help="stack to promote into")
    parser.add_argument(
        "--source-image", help="upstream image the source stack verified (its source_image output)"
    )
    parser.add_argument("--write", action="store_true", help="edit Pulumi.<to>.yaml in place")
    add_project_options(parser, stack_file=False)
    return parser


def default_validator() -> Validator:
    """What `gemma4 preview` judges: the program under Pulumi's mocks, the pack's mandatory
    policies at their configured levels and the capacity plan. Ctrl-C while it runs ends the
    command (status 130), never reads as a refused stack."""
    from gemma4.guard import interrupts_win
    from preview.build import promotion_check

    def check(project: str, stack: str, config: Mapping[str, Any]) -> list[str]:
        with interrupts_win():
            return promotion_check(project, stack, config)

    return check


def main(argv: list[str] | None = None, validator: Validator | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        for option, stack in (("--from", args.source), ("--to", args.target)):
            problem = named_stack_problem(stack, option, args.project_dir)
            if problem:
                raise PromotionError(problem)
        args.root = found_project_dir(args.project_dir)
        check_distinct(args.source, args.target, args.root)
        source = load_settings(read_stack(args.source, args.root))
        target = load_settings(read_stack(args.target, args.root))
        if args.source_image is not None:
            check_text("image", args.source_image)
            check_source_image(args.source_image, {args.source: source, args.target: target})
        result = plan(args.source, source, args.target, target, args.source_image)
        if "image" in result.changes:
            check_image(result.changes["image"])
            load_settings({**read_stack(args.target, args.root), "image": result.changes["image"]})
        # Which files were read, as the report's first line (stderr holds only the one
        # message of a refusal, which names the file).
        print(
            f"stack files: {stack_path(args.source, args.root).resolve()} -> "
            f"{stack_path(args.target, args.root).resolve()}"
        )
        for key, value in result.changes.items():
            print(redact(f"promote {key}: {value}", limit=None, by_name=False))
        for key, why in result.held.items():
            print(redact(f"hold    {key}: {why}", limit=None, by_name=False))
        if not result.changes and not result.held:
            print(f"{args.target} already runs what {args.source} verified")
        elif not result.changes:
            print(
                f"nothing promoted: {args.target} runs what {args.source} verified except the "
                f"held keys ({', '.join(result.held)}), which stay {args.target}'s own"
            )
        if result.changes:
            # The same edit and checks with or without --write: a dry run that passes is a
            # promotion that --write performs, and one that --write refuses fails here too.
            check = validator or default_validator()
            before, after = prepare_changes(args.target, result.changes, args.root, check)
            name = f"Pulumi.{args.target}.yaml"
            if args.write:
                try:
                    write_atomically(stack_path(args.target, args.root), after, expected=before)
                except OSError as exc:  # a read-only folder, a full disk: said, not a traceback
                    raise PromotionError(
                        f"cannot write {name} in {args.root}: {exc.strerror or exc}; it was "
                        "not changed"
                    ) from None
                print(f"wrote {name}")
            else:
                print(f"{name} would pass every check; run again with --write to edit it")
    except (PromotionError, SettingsError, ProjectError) as exc:
        print(redact(f"gemma4 promote: error: {exc}", limit=None, by_name=False), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
