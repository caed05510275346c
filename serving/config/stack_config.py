"""Split a stack's whole config into this project's keys, refusing keys nothing reads.

Pulumi hands a program every `namespace:key` of the stack. A key in a misspelled namespace
(`gemma4vllm:maxNumSeqs`) or a misspelled provider key (`gcp:projet`) would otherwise be
ignored without a word; here it is refused, naming the closest valid key. Pure: the caller
says which namespaces exist and, where it knows them, their keys.
"""

from __future__ import annotations

import difflib
import re
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


def stack_name_hint(stack: str) -> str:
    """What a name that cannot be a stack's likely meant, as the tail of a message: the stack
    a file name names (`Pulumi.l4.yaml`, a path) or the name in lower case (`L4`); empty when
    nothing fits."""
    base = stack.replace("\\", "/").rsplit("/", 1)[-1]
    file = re.fullmatch(r"Pulumi\.(.+)\.ya?ml", base)
    if file or base.endswith((".yaml", ".yml")) or "/" in stack:
        named = file.group(1).lower() if file else ""
        guess = f"the stack {named!r}, or " if named and _is_name(named) else ""
        return f"; a file, not a stack name: did you mean {guess}--stack-file PATH (preview, plan)?"
    if _is_name(stack.lower()):
        return f"; did you mean {stack.lower()!r}? (stack names are lowercase)"
    return ""


def stack_name_problem(stack: str) -> str | None:
    """Why `stack` cannot name this project's resources (None when it can): resource names are
    `gemma-<stack>-...`, and Cloud Run service ids take lowercase letters, digits and hyphens,
    begin with a letter, do not end with a hyphen and have fewer than 50 characters."""
    if _is_name(stack):
        return None
    return (
        f"stack name {shown_stack(stack)} cannot become resource names (gemma-<stack>-...): use "
        "lowercase letters, digits and hyphens, starting with a letter, not ending with a "
        f"hyphen, at most {MAX_STACK_NAME} characters (a Cloud Run service id has fewer than 50)"
        + stack_name_hint(stack)
    )
