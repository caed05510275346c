"""Find the Pulumi project a `-s STACK` means, the way the `pulumi` CLI does.

`pulumi -s STACK` reads the project file (`Pulumi.yaml` or `Pulumi.yml`) of the current
directory or, failing that, of the nearest parent that has one, and the stack's settings from
`Pulumi.<stack>.<ext>` beside it (the project file's own extension). Every `gemma4` command
that takes `-s` resolves it here, so `gemma4 preview -s l4` run inside another checkout (or
your own copy of the project) reads that project's stack file, not the one of the directory
the package was installed from. A project file that moves its stack files elsewhere
(`stackConfigDir`) is refused by name rather than guessed at. Pure: no Pulumi import.
"""

from __future__ import annotations

import shlex
from pathlib import Path

#: The project file names the Pulumi CLI looks for, in its order.
PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")
#: This program's Pulumi project name: its stack keys are `gemma4-vllm:KEY`.
PROJECT = "gemma4-vllm"
#: How far up from the start directory the search goes (the file system's depth is bounded
#: anyway; this keeps a pathological path from turning into a long walk).
MAX_PARENTS = 64
#: A project file larger than this is not read (a Pulumi.yaml is a few KiB).
MAX_PROJECT_FILE_BYTES = 1 << 20


#: What a project file's `config:` entry may hold here: a declaration, no value (Pulumi's
#: project-level `value:`/`default:` and plain values apply to every stack and are refused).
_SCHEMA_FIELDS = frozenset({"type", "description", "items", "secret"})


class ProjectError(ValueError):
    """No Pulumi project where one was looked for, or one this reader cannot follow."""


def project_file(directory: Path) -> Path | None:
    """The project file in `directory` (`Pulumi.yaml` before `Pulumi.yml`), or None. A project
    file that is there but is not a regular file (a FIFO, a device, a folder) is refused: the
    Pulumi CLI would try to read it, so skipping it would read another project's stacks."""
    for name in PROJECT_FILES:
        candidate = directory / name
        if candidate.is_file():
            _check_layout(candidate)
            return candidate
        if candidate.exists() or candidate.is_symlink():
            raise ProjectError(f"{candidate}: not a regular file; not read")
    return None


def find_project_file(start: Path | None = None) -> Path | None:
    """The project file of `start` (default: the current directory) or its nearest parent."""
    here = (start or Path.cwd()).resolve()
    for depth, directory in enumerate((here, *here.parents)):
        if depth > MAX_PARENTS:
            break
        found = project_file(directory)
        if found is not None:
            return found
    return None


def _check_layout(path: Path) -> None:
    """Refuse a project file that keeps its stack files somewhere this reader does not follow."""
    # Read as the stack files are (serving.config.stack_yaml: the CLI's YAML, bounded in size, depth
    # and alias expansion), so a hostile project file ends in one message, not a RecursionError.
    from serving.config.inputs import NotRegularFileError, read_regular
    from serving.config.stack_yaml import StackYamlError, load_document

    try:
        raw = read_regular(path, MAX_PROJECT_FILE_BYTES)
        if len(raw) > MAX_PROJECT_FILE_BYTES:
            raise ProjectError(f"{path}: larger than {MAX_PROJECT_FILE_BYTES} bytes; not read")
        data = load_document(raw)
    except NotRegularFileError:
        raise ProjectError(f"{path}: not a regular file") from None
    except (OSError, StackYamlError) as exc:
        raise ProjectError(f"{path}: not a readable project file ({exc})") from None
    if isinstance(data, dict) and ("stackConfigDir" in data or isinstance(data.get("config"), str)):
        key = "stackConfigDir" if "stackConfigDir" in data else "config"
        raise ProjectError(
            f"{path}: '{key}' moves the stack files out of the project directory, which this "
            "command does not follow; pass --stack-file PATH"
        )
    config = data.get("config") if isinstance(data, dict) else None
    for key, entry in (config or {}).items() if isinstance(config, dict) else ():
        extra = sorted(set(entry) - _SCHEMA_FIELDS) if isinstance(entry, dict) else None
        if extra is None or extra:
            what = f"sets {', '.join(extra)}" if extra else "sets a value"
            raise ProjectError(
                f"{path}: config key {key!r} {what} in the project file; the Pulumi CLI "
                "applies a project-level value to every stack that does not set the key, which "
                "this command does not follow. Set it in Pulumi.<stack>.yaml (the project file "
                f"may only declare keys: {', '.join(sorted(_SCHEMA_FIELDS))})"
            )
    name = data.get("name") if isinstance(data, dict) else None
    if name != PROJECT:
        shown = repr(name) if len(repr(name)) <= 80 else repr(name)[:60] + "..."
        raise ProjectError(
            f"{path} is the Pulumi project {shown}, not {PROJECT}: its stacks are another "
            f"program's; run from a {PROJECT} project folder, or pass --project-dir DIR"
        )


def stack_file(
    stack: str,
    project_dir: Path | None = None,
    *,
    start: Path | None = None,
    offers_stack_file: bool = True,
) -> Path:
    """The stack file `pulumi -s stack` would read.

    With `project_dir` (`--project-dir`), `Pulumi.<stack>.yaml` there (or `.yml` when the
    project file there is `Pulumi.yml`); without it, the project found from `start` (default:
    the current directory) upward. Raises :class:`ProjectError` with what was looked for (and,
    when the command has one, `offers_stack_file`, naming its `--stack-file` option).
    """
    # A stack name is lowercase letters, digits and hyphens: no path, so the file found is
    # Pulumi.<stack>.yaml in the project's folder; anything else is answered with what it likely
    # meant (a file's name, capitals), as every command taking a stack answers it.
    problem = named_stack_problem(
        stack, "-s", project_dir, stack_file=offers_stack_file, start=start
    )
    if problem:
        raise ProjectError(problem)
    if project_dir is not None:
        found = project_file(project_dir)
        directory = project_dir
    else:
        found = find_project_file(start)
        if found is None:
            where = (start or Path.cwd()).resolve()
            raise ProjectError(
                f"no Pulumi project (Pulumi.yaml) in {where} or its parents; run from a Pulumi "
                "project directory, or pass --project-dir DIR"
                + (" or --stack-file PATH" if offers_stack_file else "")
            )
        directory = found.parent
    suffix = found.suffix if found is not None else ".yaml"
    path = directory / f"Pulumi.{stack}{suffix}"
    if not path.is_file():
        there = ", ".join(stack_names(directory)) or "none"
        raise ProjectError(
            f"unknown stack {stack!r}: no {path.name} in {directory}; stacks there: {there}"
            + (" (or pass --stack-file PATH)" if offers_stack_file else "")
        )
    return path


def _folder(project: Path | None) -> Path | None:
    return project.parent if project is not None else None


def named_stack_problem(
    stack: str,
    option: str,
    project_dir: str | Path | None = None,
    *,
    stack_file: bool = False,
    start: Path | None = None,
) -> str | None:
    """Why `option`'s `stack` cannot be a stack's name (None when it can), a slip in capitals
    offered as a stack only when the project has it: the project's stacks are read only for a
    name already refused, from `project_dir` or the project found from `start` (default: here)
    upward; none found, or another program's, and the name is judged on its own."""
    from serving.config.stack_config import stack_name_problem

    if stack_name_problem(stack) is None:
        return None
    try:
        where = Path(project_dir) if project_dir is not None else _folder(find_project_file(start))
        known = stack_names(where) if where is not None and where.is_dir() else None
    except (ProjectError, OSError):
        known = None
    return stack_name_problem(stack, option, stack_file=stack_file, known=known)


def stack_names(directory: Path) -> list[str]:
    """The stacks whose files are in `directory` (`Pulumi.<stack>.yaml` / `.yml`)."""
    names = {
        p.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
        for pattern in ("Pulumi.*.yaml", "Pulumi.*.yml")
        for p in directory.glob(pattern)
    }
    return sorted(names)


def missing_stack_file_meant(path: Path, project_dir: Path | None = None) -> str:
    """For a `--stack-file PATH` that does not exist, what was likely meant, as `; did you mean
    ...?` (or ''): a stack's name (`--stack-file l4`: `-s l4`, when the project, in
    `project_dir` or found from here, has that stack) or a file that differs in case only
    (`Pulumi.L4.yaml`: the `Pulumi.l4.yaml` beside it)."""
    text = str(path)
    if "/" not in text and "\\" not in text and "." not in text:
        try:
            where = project_dir if project_dir is not None else _folder(find_project_file())
            known = stack_names(where) if where is not None and where.is_dir() else []
        except (ProjectError, OSError):
            known = []
        for meant in (text.strip().lower(), text.strip().lower().replace("_", "-")):
            if meant in known:
                return f"; did you mean -s {meant}?"
        return ""
    try:
        same = [p for p in path.parent.iterdir() if p.name.lower() == path.name.lower()]
    except OSError:
        return ""
    files = [p for p in same if p.is_file()]
    return f"; did you mean --stack-file {shlex.quote(str(files[0]))}?" if len(files) == 1 else ""
