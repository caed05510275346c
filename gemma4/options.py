"""Options and messages the command lines share: the Pulumi project options
(`--project-dir`, `--stack-file`), bounded number types for argparse, and the stderr lines
that say which stack file or stack outputs a command reads."""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from gemma4.guard import shown
from serving.config.groups import MAX_REQUESTS_PER_SECOND, MIN_REQUESTS_PER_SECOND
from serving.config.inputs import INTEGER, NUMBER
from serving.config.project import ProjectError, find_project_file, stack_names


def bounded_int(option: str, low: int, high: int) -> Callable[[str], int]:
    """An argparse `type` taking an integer from `low` to `high`, refused naming the option
    and the range otherwise."""

    def parse(text: str) -> int:
        value = int(text) if INTEGER.fullmatch(text) and len(text) <= 18 else low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{option} must be an integer from {low} to {high}, got {text[:40]!r}"
            )
        return value

    return parse


def bounded_number(option: str, low: float, high: float) -> Callable[[str], float]:
    """An argparse `type` taking a finite number from `low` to `high` written as the docs write
    one (nan, inf, `1e-320`, " 1 ", "1_0", non-ASCII digits and values outside the range are
    refused naming the option and the range)."""

    def parse(text: str) -> float:
        value = float(text) if NUMBER.fullmatch(text) else math.nan
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(
                f"{option} must be a number from {low:g} to {high:g}, got {text[:40]!r}"
            )
        return value

    return parse


def found_project_dir(given: Path | None) -> Path:
    """`--project-dir`, else the Pulumi project of the current directory or its nearest parent
    (as `pulumi -s` finds it), never the checkout the package was installed from."""
    if given is not None:
        return given
    found = find_project_file()
    if found is None:
        raise ProjectError(
            f"no Pulumi project (Pulumi.yaml) in {Path.cwd()} or its parents; run from a "
            "Pulumi project directory, or pass --project-dir DIR"
        )
    return found.parent


def say_read(command: str, path: Path) -> None:
    """Tell the user, on stderr, which stack file a command read (as `pulumi` names its stack)."""
    print(f"{command}: reading {path}", file=sys.stderr)


def say_outputs(command: str, stack: str, project_dir: Path | str | None) -> None:
    """Tell the user, on stderr, in which Pulumi project `pulumi stack output -s STACK` runs
    (`--project-dir`, else the project of the current directory or its nearest parent, as the
    CLI finds it)."""
    if project_dir is not None:
        where = f"in {Path(project_dir).resolve()}"
    else:
        found = find_project_file()
        where = (
            f"in {found.parent}"
            if found is not None
            else f"in {Path.cwd()} (no Pulumi.yaml here or above; pulumi resolves the stack)"
        )
    print(
        f"{command}: reading stack {stack}'s outputs with `pulumi stack output` {where}",
        file=sys.stderr,
    )


def refuse_unknown_subcommand(
    parser: argparse.ArgumentParser,
    args: Sequence[str],
    names: Sequence[str],
    *,
    stack_option: str | None = None,
) -> None:
    """Exit 2 with one line when ``args`` starts with a word that is none of the subcommands
    ``names``, offering the one it likely meant (in capitals, with blanks, misspelt), as the
    `gemma4` command itself answers an unknown command, or, for a command whose stack is an
    option (``stack_option``), that option with a stack of the project here (`plan l4`: `-s
    l4`); nothing when it is a subcommand or an option."""
    if not args or args[0].startswith("-") or args[0] in names:
        return
    typed = args[0].strip().lower()
    close = [typed] if typed in names else []
    close = close or difflib.get_close_matches(typed, list(names), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    if not close and stack_option is not None:
        try:
            found = find_project_file()
            known = stack_names(found.parent) if found is not None else []
        except (ProjectError, OSError):
            known = []
        if typed in known:
            hint = f"; did you mean {stack_option} {typed}?"
    parser.error(f"unknown subcommand {shown(args[0])}{hint} (subcommands: {', '.join(names)})")


#: The option names older versions used for the project directory; still accepted, not shown.
OLD_PROJECT_DIR_OPTIONS = ("--root", "--cwd")


def project_dir(text: str) -> Path:
    """argparse type of ``--project-dir``: a folder that holds a Pulumi project file
    (``Pulumi.yaml`` or ``Pulumi.yml``), as every command reads one there; ``''`` is refused (it
    would silently mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "an empty path; name the Pulumi project folder (. for the current one)"
        )
    path = Path(text)
    try:
        is_dir = path.is_dir()
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise argparse.ArgumentTypeError(f"{shown(text)}: {exc.strerror}") from None
    if not is_dir:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a folder")
    if not any((path / name).is_file() for name in ("Pulumi.yaml", "Pulumi.yml")):
        raise argparse.ArgumentTypeError(
            f"{shown(text)} holds no Pulumi.yaml (or Pulumi.yml): not a Pulumi project folder"
        )
    return path


def stack_file_path(text: str) -> Path:
    """argparse type of ``--stack-file``: a path the system can look up (a name too long or a
    loop of links is refused here in one short line, not echoed whole by the error that would
    follow); whether a file is there is the command's to say, with what was meant."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name a stack file (Pulumi.<stack>.yaml)")
    path = Path(text)
    try:
        path.exists()
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{shown(text)}: {exc.strerror}") from None
    return path


def add_project_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, stack_file: bool = True
) -> None:
    """The options every command that reads stacks shares: `--project-dir DIR` (the Pulumi
    project; `--root` and `--cwd` are its old names, accepted and hidden) and, where the command
    reads one stack file, `-s STACK` and `--stack-file PATH` (a stack file anywhere)."""
    if stack_file:
        parser.add_argument(
            "-s",
            "--stack",
            default="",
            help="stack name: Pulumi.<stack>.yaml of the Pulumi project in the current "
            "directory or its nearest parent, as `pulumi -s` finds it",
        )
    parser.add_argument(
        "--project-dir",
        type=project_dir,
        metavar="DIR",
        help="the Pulumi project directory (Pulumi.yaml and its Pulumi.<stack>.yaml files); "
        "default: the current directory or its nearest parent with a Pulumi.yaml",
    )
    parser.add_argument(
        *OLD_PROJECT_DIR_OPTIONS, dest="project_dir", type=project_dir, help=argparse.SUPPRESS
    )
    if stack_file:
        parser.add_argument(
            "--stack-file",
            type=stack_file_path,
            metavar="PATH",
            help="one stack file anywhere (your own), read instead of -s's "
            "Pulumi.<stack>.yaml; its stack name is -s, or taken from the file name",
        )


RATE_OPTIONS = ("-r", "--requests-per-second", "--rate")


def add_rate_option(
    parser: argparse.ArgumentParser, *, dest: str, help: str, required: bool = False
) -> None:
    """The one request-rate option of plan, plan search and preview: the load offered to the
    whole endpoint, with one spelling, one metavar and one bound."""
    parser.add_argument(
        *RATE_OPTIONS,
        dest=dest,
        metavar="R",
        type=bounded_number(
            "/".join(RATE_OPTIONS), MIN_REQUESTS_PER_SECOND, MAX_REQUESTS_PER_SECOND
        ),
        required=required,
        default=None,
        help=help,
    )


def add_mtp_option(parser: argparse.ArgumentParser, *, calibration_run: bool = False) -> None:
    """``--mtp-acceptance F``: the per-draft-token acceptance MTP stacks are predicted with;
    ``calibration_run``: the command also takes ``--calibration-run``, whose counters come first."""
    measured = (
        "what --calibration-run's spec-decode counters measured, else " if calibration_run else ""
    )
    parser.add_argument(
        "--mtp-acceptance",
        type=bounded_number("--mtp-acceptance", 0.0, 1.0),
        default=None,
        metavar="F",
        help="per-draft-token MTP acceptance in [0, 1] for stacks with speculative decoding "
        f"(default: {measured}a calibration's measured figure, else the median of published "
        "Gemma 4 MTP figures)",
    )
