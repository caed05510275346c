"""Split a stack's whole config into this project's keys, refusing keys nothing reads.

Pulumi hands a program every `namespace:key` of the stack. A key in a misspelled namespace
(`gemma4vllm:maxNumSeqs`) or a misspelled provider key (`gcp:projet`) would otherwise be
ignored without a word; here it is refused, naming the closest valid key. Pure: the caller
says which namespaces exist and, where it knows them, their keys.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Collection, Mapping
from typing import Any


class ConfigKeyError(ValueError):
    """A config key in a namespace or with a name nothing reads."""


def closest(word: str, candidates: Collection[str]) -> str | None:
    """The candidate a misspelled ``word`` means (difflib's closest, else the one equal but
    for case, `-` and `_`), or None."""
    match = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    if match:
        return match[0]
    lowered = {c.lower().replace("-", "").replace("_", ""): c for c in candidates}
    return lowered.get(word.lower().replace("-", "").replace("_", ""))


def project_config(
    config: Mapping[str, Any],
    project: str,
    namespaces: Mapping[str, Collection[str] | None],
) -> dict[str, Any]:
    """The `<project>:<key>` values keyed by `<key>`; refuses keys in unknown namespaces and
    unknown keys of namespaces whose keys are listed (`None`: any key)."""
    known = {project: None, **namespaces}
    problems: list[str] = []
    out: dict[str, Any] = {}
    for full in sorted(config):
        namespace, sep, key = str(full).partition(":")
        if not sep:
            namespace, key = project, namespace
        if namespace == project:
            out[key] = config[full]
            continue
        if namespace not in known:
            near = closest(namespace, list(known))
            hint = f"; did you mean '{near}:{key}'?" if near else ""
            problems.append(
                f"config key '{full}' is in namespace '{namespace}', which nothing in this "
                f"program reads (namespaces: {', '.join(sorted(known))}){hint}"
            )
            continue
        keys = known[namespace]
        if keys is not None and key not in keys:
            near = closest(key, keys)
            hint = f"; did you mean '{namespace}:{near}'?" if near else ""
            problems.append(f"config key '{full}' is not a {namespace} setting{hint}")
    if problems:
        raise ConfigKeyError("\n".join(problems))
    return out


#: Longest stack name: `gemma-<stack>-vllm-service` plus Pulumi's autoname suffix (`-` and 7
#: hex digits) must stay a Cloud Run service id, which "must contain fewer than 50 characters"
#: (run v2 discovery document, services.create serviceId).
MAX_STACK_NAME = 49 - len("gemma-") - len("-vllm-service") - 8
_STACK_NAME = re.compile(r"[a-z](?:[a-z0-9-]*[a-z0-9])?")


def _is_name(stack: str) -> bool:
    return bool(_STACK_NAME.fullmatch(stack)) and len(stack) <= MAX_STACK_NAME


def shown_stack(stack: str) -> str:
    """`stack` quoted, or its start and length when it is longer than any stack name."""
    return repr(stack) if len(stack) <= 64 else f"{stack[:40]!r}... ({len(stack)} characters)"


def stack_name_meant(
    stack: str, option: str, *, stack_file: bool = False, known: Collection[str] | None = None
) -> str | None:
    """What `option`'s `stack`, which cannot be a stack's name, likely meant, as one line: a
    stack file's name (`Pulumi.l4.yaml`, with or without a path: that stack, or `--stack-file`
    where the command has it, `stack_file`), a stack in capitals or with blanks around it
    (`L4`, `' l4'`), or one with `_` for `-` (`gke_l4`: offered only when the project has
    it). A stack is offered only when it is among the project's stacks, `known`, where the
    caller knows them; None when nothing fits."""
    shown = shown_stack(stack)
    if not stack.strip():
        return f"{option}: the stack name {shown + ' is blank' if stack else 'is empty'}"
    here = f"; stacks here: {', '.join(sorted(known)) or 'none'}" if known is not None else ""
    base = stack.replace("\\", "/").rsplit("/", 1)[-1]
    if base.endswith((".yaml", ".yml")):
        file = re.fullmatch(r"Pulumi\.(.+)\.ya?ml", base)
        named = file.group(1).lower() if file else ""
        path = shlex.quote(stack) if len(stack) <= 64 and stack.isprintable() else "PATH"
        unknown = _is_name(named) and known is not None and named not in known
        ways = [f"{option} {named}"] if _is_name(named) and not unknown else []
        if stack_file and base not in ("Pulumi.yaml", "Pulumi.yml"):
            ways.append(f"--stack-file {path}")
        if not ways:
            takes = f"{option} takes a stack's name (Pulumi.<stack>.yaml)"
            return f"{option}: {shown} names a file; {takes}{here if unknown else ''}"
        also = f" (or {ways[1]})" if len(ways) > 1 else ""
        return f"{option}: {shown} names a file: did you mean {ways[0]}{also}?"
    plain = stack.strip().lower()
    if _is_name(plain):
        if known is not None and plain not in known:
            why = "are lowercase" if stack != stack.lower() else "have no blanks"
            return f"{option}: no stack {shown} (stack names {why}){here}"
        return f"{option}: no stack {shown}; did you mean {plain!r}?"
    hyphened = plain.replace("_", "-")
    if _is_name(hyphened) and known is not None and hyphened in known:
        return f"{option}: no stack {shown}; did you mean {hyphened!r}?"
    return None


def stack_name_problem(
    stack: str,
    option: str | None = None,
    *,
    stack_file: bool = False,
    known: Collection[str] | None = None,
) -> str | None:
    """Why `stack` cannot name this project's resources (None when it can): resource names are
    `gemma-<stack>-...`, and Cloud Run service ids take lowercase letters, digits and hyphens,
    begin with a letter, do not end with a hyphen and have fewer than 50 characters.

    Given by a command's `option` (`-s`, `--from`), a name that is likely a slip (a file's
    name, capitals) is answered with what it meant (:func:`stack_name_meant`)."""
    if _is_name(stack):
        return None
    meant = stack_name_meant(stack, option, stack_file=stack_file, known=known) if option else None
    return meant or (
        f"{option + ': ' if option else ''}stack name {shown_stack(stack)} cannot become "
        "resource names (gemma-<stack>-...): use lowercase letters, digits and hyphens, starting "
        f"with a letter, not ending with a hyphen, at most {MAX_STACK_NAME} characters (a Cloud "
        "Run service id has fewer than 50)"
    )
