"""Credentials found by where they go, whatever their shape.

:mod:`endpoint.secret_shapes` finds a credential by its shape; a key made with `openssl rand
-hex 32` has none (hexadecimal is what digests look like, so it is exempt). What a value is
used as tells instead: sent as an `Authorization` header, or stored under a credential's name
in any map, a value that reads as a generated key is a credential. A value the shape check
already finds is left to it (one message per credential).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from endpoint.secret_shapes import find_secret, high_entropy
from policies._props import read_field, walk

#: Names a credential goes by (a map key, an env or header name), matched at the end of the
#: key after a separator: `VLLM_API_KEY`, `gemma4.dev/api-key`, `apiKey`, `hf-token`.
_SINK_NAME = re.compile(
    r"(?:^|[-_./:])(?:api[-_]?key|apikey|token|secret|secret[-_]?key|password|passwd|bearer|"
    r"authorization|credentials?|access[-_]?key)$|[a-z0-9](?:ApiKey|Token|Password|Secret)$",
    re.IGNORECASE,
)
#: Names of digests, which are hexadecimal by nature (`checksum/secret`, `token-sha256`).
_DIGEST_NAME = re.compile(r"checksum|digest|hash|sha\d*|fingerprint|revision|etag", re.IGNORECASE)
#: A run of hexadecimal digits as long as a generated key (`openssl rand -hex 8` and up).
_HEX_KEY = re.compile(r"[0-9a-fA-F]{16,}")
#: `Authorization: Bearer <credential>` (any scheme) written in a string.
_AUTH_HEADER = re.compile(
    r"\bauthorization\b[\"']?\s*[:=]\s*[\"']?\s*(?:bearer|basic|token|apikey)\s+([^\s\"',;}]+)",
    re.IGNORECASE,
)
#: A value that is a reference resolved at run time, not the credential (`$VAR`, `${VAR}`,
#: `$(VAR)`, `{{ ... }}`).
_REFERENCE = re.compile(r"^\$[({]?[A-Za-z_][A-Za-z0-9_.-]*[)}]?$|^\{\{.*\}\}$")


def reads_as_key(value: str) -> bool:
    """A value that looks generated: 16+ hex digits, a random string, a credential shape."""
    text = value.strip()
    if not text or _REFERENCE.match(text):
        return False
    return bool(_HEX_KEY.search(text) or high_entropy(text) or find_secret(text))


#: `NAME=value` in a script or command string (shell, `env`, `docker run -e`).
_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)=([\"']?)([^\s\"'`;&|()]+)")
#: Where vLLM and its clients read the API key: a literal there is a credential whatever it
#: looks like (a short word included).
_KEY_VARIABLES = frozenset({"VLLM_API_KEY"})
_API_KEY_OPTION = re.compile(r"(?<![\w-])--api-key(?:=|\s+)([\"']?)([^\s\"'`;&|()]+)")


def _assignment_problems(path: str, text: str) -> list[str]:
    problems = []
    for match in _ASSIGNMENT.finditer(text):
        name, value = match.group(1), match.group(3)
        if value.startswith(("$", "{{")) or find_secret(value):
            continue
        if name in _KEY_VARIABLES or (_SINK_NAME.search(name) and reads_as_key(value)):
            problems.append(
                f"{path} assigns a literal to {name} (where the API key is read from), "
                "whatever its shape"
            )
    for match in _API_KEY_OPTION.finditer(text):
        value = match.group(2)
        if not value.startswith(("$", "{{")) and not find_secret(value):
            problems.append(f"{path} passes a literal --api-key, whatever its shape")
    return problems


def _header_problem(path: str, text: str) -> str | None:
    match = _AUTH_HEADER.search(text)
    # `$token`, `${TOKEN}`, `$(gcloud auth print-access-token)`: expanded at run time.
    if match and not match.group(1).startswith(("$", "{{")) and not find_secret(text):
        return (
            f"{path} sends an Authorization header with a literal credential; the client "
            "reads the key from Secret Manager (or a Secret) at run time"
        )
    return None


#: A ConfigMap value or an annotation read as the JSON or YAML document it holds (a client's
#: `config.json`, `client.yaml`): at most this many characters and nodes.
_MAX_DOCUMENT_CHARS = 1 << 20
_MAX_DOCUMENT_NODES = 10_000


def _document(text: str) -> Any:
    """The mapping or list a JSON or YAML string holds, or None (a plain string, a document
    too large, or one whose aliases expand beyond the node bound)."""
    if len(text) > _MAX_DOCUMENT_CHARS or not re.search(r"[:{\[]", text):
        return None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(document, Mapping | list):
        return None
    nodes, stack = 0, [document]
    while stack:
        node = stack.pop()
        nodes += 1
        if nodes > _MAX_DOCUMENT_NODES:
            return None
        if isinstance(node, Mapping):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return document


def sink_problems(props: Any, depth: int = 0) -> list[str]:
    """Literal credentials by where they go, one message per path; a string value that is a
    JSON or YAML document is read as one (two documents deep)."""
    problems: list[str] = []
    roots = [("", props)] if isinstance(props, Mapping) else []
    for path, mapping in roots + [(p, c) for p, _, c, _ in walk(props) if isinstance(c, Mapping)]:
        # A {name, value} pair (an env entry, an HTTP header of a probe).
        name, _ = read_field(mapping, "name")
        value, _ = read_field(mapping, "value")
        if isinstance(name, str) and isinstance(value, str) and value.strip():
            if find_secret(value):
                pass  # reported by its shape
            elif name.strip().lower() == "authorization":
                if not _REFERENCE.match(value.strip()):
                    problems.append(
                        f"{path} is an Authorization header with a literal value; the client "
                        "reads the key from Secret Manager (or a Secret) at run time"
                    )
            elif _SINK_NAME.search(name) and not _DIGEST_NAME.search(name) and reads_as_key(value):
                problems.append(f"{path} ({name}) holds a literal key")
        for key in list(mapping):
            text = str(key)
            child, unknown = read_field(mapping, text)
            if unknown or not isinstance(child, str):
                continue
            where = f"{path}.{text}" if path else text
            document = _document(child) if depth < 2 else None
            if document is not None:  # and as text too: a script may read as YAML
                problems += [f"{where} ({p})" for p in sink_problems(document, depth + 1)]
            header = _header_problem(where, child)
            problems += _assignment_problems(where, child)
            if header:
                problems.append(header)
            elif (
                text not in ("name", "value")
                and _SINK_NAME.search(text)
                and not _DIGEST_NAME.search(text)
                and reads_as_key(child)
                and not find_secret(child)
            ):
                problems.append(
                    f"{where} holds a literal key under a credential's name (a generated key, "
                    "hexadecimal or random, is a credential whatever its shape)"
                )
    return list(dict.fromkeys(problems))
