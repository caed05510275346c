"""Read "the vLLM server this command starts" from any spelling of its command line.

Pure: no Pulumi import. The policy pack feeds it container commands and arguments and TPU
startup scripts; it answers with the `vllm serve` options that will really be in effect, or
says what it could not read. It understands:

- `vllm serve ...`, `python[3] -m vllm.entrypoints.openai.api_server ...`,
  `python[3] -m vllm.entrypoints.cli.main serve ...`;
- wrappers in front of those: `sh|bash|dash|zsh -c 'script'` (any option cluster holding `c`:
  `-lc`, `-ec`, `-euxc`), `exec`, `env [-i] [-u NAME] [-S 'command line'] NAME=value ...`,
  `NAME=value ...`, `nohup`, `time`, `command`, `nice`, `tini --`, `dumb-init`;
- shell scripts: backslash continuations, `;`, `&&`, `||`, `|`, `&`, newlines, comments,
  redirections, `if/then/do` keywords, `export NAME=value`;
- `docker run [options] IMAGE [args]` with or without `--entrypoint` (and `podman run`);
- every vLLM spelling of an option: `--x=v`, `--x v`, `--x_y`, `--no-x`, short aliases
  (`-tp 2`, `-q fp8`, `-tp=2`), dotted JSON fields (`--speculative-config.method=mtp`),
  a JSON object (`--speculative-config '{...}'`), boolean flags before the positional model,
  the last occurrence winning, and `--config FILE` (a file the reader cannot see: reported).

Which options exist, which take a value (and how many: `--served-model-name a b` takes both,
as argparse's `nargs="+"` does), which are `--no-` negations and which short aliases exist is
vLLM's own parser's knowledge, read from a snapshot of vLLM 0.27.1's `make_arg_parser`
(`serving/data/vllm-0.27.1.json`). An option vLLM does not have, or an abbreviation that
matches several, is reported instead of guessed.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

#: vLLM's own `vllm serve` parser, captured from vLLM 0.27.1 (`serving/data/`): every option
#: string, its destination, whether it takes a value, how many, and `--no-` negations.
SNAPSHOT = Path(__file__).resolve().parent / "data" / "vllm-0.27.1.json"


@dataclass(frozen=True)
class Option:
    """One option string of `vllm serve`."""

    #: Canonical long name (the destination, dashes): `tensor-parallel-size` for `-tp`.
    name: str
    takes_value: bool
    #: argparse nargs: None (one value), "+" (one or more), "?" (zero or one), 0 (a flag).
    nargs: str | int | None
    #: `--no-x`: sets the destination to False.
    negation: bool
    type: str | None


def _load_options() -> dict[str, Option]:
    data = json.loads(SNAPSHOT.read_text())
    options: dict[str, Option] = {}
    for string, spec in data["serve_options"].items():
        options[string] = Option(
            name=str(spec["dest"]).replace("_", "-"),
            takes_value=bool(spec["takes_value"]),
            nargs=spec["nargs"],
            negation=bool(spec.get("negation")),
            type=spec.get("type"),
        )
    return options


OPTIONS: dict[str, Option] = _load_options()
#: Canonical names of the options that take no value (flags and BooleanOptionalAction).
BOOLEAN_OPTIONS = frozenset(o.name for o in OPTIONS.values() if not o.takes_value)
#: Short option strings and the canonical long name they stand for (`-tp`, `-q`, `-sc`...).
SHORT_ALIASES: dict[str, str] = {k: o.name for k, o in OPTIONS.items() if not k.startswith("--")}
#: Options whose value is a JSON object (and so may be given field by field, dotted).
JSON_OPTIONS = frozenset(
    o.name
    for o in OPTIONS.values()
    if o.type in ("union_dict_and_str", "parse_dataclass", "loads") or o.name.endswith("config")
)
#: Options a non-vLLM program is likely to share: they alone do not make a command vLLM.
_GENERIC = frozenset(
    {"host", "port", "model", "config", "dtype", "seed", "revision", "tokenizer", "api-key",
     "help", "version", "headless", "quantization", "uds", "root-path", "ssl-keyfile",
     "ssl-certfile", "allowed-origins", "log-level", "hf-token", "download-dir", "task"}
)  # fmt: skip
#: Options that say "vLLM" on their own (an unknown image whose args carry one runs vLLM).
VLLM_SPECIFIC = frozenset(o.name for o in OPTIONS.values()) - _GENERIC
_LONG: dict[str, Option] = {k: o for k, o in OPTIONS.items() if k.startswith("--")}
#: The model vLLM serves when none is given (its `--model` default).
DEFAULT_MODEL = str(json.loads(SNAPSHOT.read_text())["serve_options"]["--model"]["default"])
#: The port vLLM listens on when given no `--port` (its `--port` default).
DEFAULT_PORT = int(json.loads(SNAPSHOT.read_text())["serve_options"]["--port"]["default"])

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh", "busybox"})
PYTHONS = re.compile(r"^python(\d+(\.\d+)?)?$")
OPENAI_MODULES = frozenset({"vllm.entrypoints.openai.api_server"})
CLI_MODULES = frozenset({"vllm.entrypoints.cli.main", "vllm"})
#: Commands that run another: (options that take a value, positionals before the command).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "taskset": (frozenset(), 1),
    "numactl": (frozenset({"-N", "-m", "-C", "-p", "-i", "-l"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
}
_PREFIX_COMMANDS = frozenset({"exec", "nohup", "time", "command", "builtin", "dumb-init"})
_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}"})
_OPERATORS = frozenset({";", ";;", "&&", "||", "|", "|&", "&", "\n", "(", ")"})
_REDIRECT = re.compile(r"^\d*(>>?|<<?<?|>&|<&|&>>?|>\|)$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: `docker run` options that take no value; every other `-x`/`--xx` option takes one.
_DOCKER_FLAGS = frozenset(
    {
        "-d", "--detach", "-i", "--interactive", "-t", "--tty", "--rm", "--privileged",
        "--init", "-P", "--publish-all", "--read-only", "--sig-proxy", "--no-healthcheck",
        "--oom-kill-disable", "-q", "--quiet", "--disable-content-trust", "--help",
    }
)  # fmt: skip
_DOCKER_SHORT_FLAGS = frozenset("ditP")


class ReadError(ValueError):
    """The command line cannot be read with certainty; the message says what."""


@dataclass(frozen=True)
class ServeArgs:
    """The options one `vllm serve` gets, as vLLM will see them."""

    #: Canonical long option name (dashes) -> value: a string, True/False, or a dict for
    #: JSON options given field by field or as a JSON object.
    options: dict[str, Any]
    model: str | None
    #: Literal environment the command line sets (`env X=Y`, `docker run -e X=Y`, `export`).
    env: dict[str, str] = field(default_factory=dict)
    #: What could not be read with certainty (a `--config` file, an ambiguous option).
    problems: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """`{"model": ..., "option-name": value}` (the shape the policies read)."""
        out = dict(self.options)
        if self.model is not None:
            out["model"] = self.model
        return out


def canonical(option: str) -> str:
    """`--max_model_len` -> `max-model-len` (vLLM's parser turns `_` into `-`)."""
    return option.lstrip("-").replace("_", "-")


def _is_value(token: str) -> bool:
    """A token that is a value, not an option: anything not starting with `-`, or a number."""
    if not token.startswith("-") or token == "-":
        return True
    try:
        float(token)
    except ValueError:
        return False
    return True


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _set_dotted(options: dict[str, Any], name: str, path: list[str], value: str) -> str | None:
    current = options.get(name)
    if isinstance(current, str):
        parsed = _json_value(current)
        current = parsed if isinstance(parsed, dict) else None
        if current is None:
            return f"--{name} is given both as text and field by field"
    if not isinstance(current, dict):
        current = {}
    options[name] = current
    node = current
    for step in path[:-1]:
        child = node.get(step)
        if not isinstance(child, dict):
            child = {}
            node[step] = child
        node = child
    node[path[-1].replace("-", "_")] = _json_value(value)
    return None


def lookup(raw: str) -> tuple[Option | None, str | None]:
    """The option an option string means to vLLM's parser (`--x_y` is `--x-y`; a unique
    abbreviation is its option, as argparse reads it), or why there is none."""
    if raw in SHORT_ALIASES:
        return OPTIONS[raw], None
    if raw.startswith("--"):
        key = "--" + raw[2:].replace("_", "-")
        if key in _LONG:
            return _LONG[key], None
        matches = sorted(k for k in _LONG if k.startswith(key))
        meanings = {(_LONG[k].name, _LONG[k].negation) for k in matches}
        if len(meanings) == 1:
            return _LONG[matches[0]], None
        if matches:
            return None, f"{raw} abbreviates several options ({', '.join(matches[:4])})"
    return None, f"an option vLLM 0.27.1 does not have ({raw})"


def parse_serve_args(argv: Sequence[str], env: dict[str, str] | None = None) -> ServeArgs:
    """Read `vllm serve` arguments (what follows `serve`) the way vLLM's parser does."""
    tokens = list(argv)
    options: dict[str, Any] = {}
    problems: list[str] = []
    positional: str | None = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if _is_value(token):
            if positional is None:
                positional = token
            else:
                problems.append(f"a second positional argument {token!r} (vLLM refuses it)")
            continue
        raw, eq, value = token.partition("=")
        if raw.startswith("-O") and not raw.startswith("--"):
            # vLLM's parser reads -O3 / -O.mode=3 / -O 3 as the compilation config.
            raw, eq, value = "--compilation-config", eq or "=", value or raw[2:].lstrip(".")
        head, dot, rest = raw.partition(".")
        option, problem = lookup(head)
        if option is None:
            problems.append(problem or f"cannot read {token!r}")
            continue
        name = option.name
        if dot:
            if not eq:
                if i >= len(tokens):
                    problems.append(f"{token} has no value")
                    break
                value, i = tokens[i], i + 1
            error = _set_dotted(options, name, rest.split("."), value)
            if error:
                problems.append(error)
            continue
        if not option.takes_value:
            if eq:
                problems.append(f"{head} takes no value, got {token!r} (vLLM refuses it)")
            options[name] = not option.negation
            continue
        if eq:
            options[name] = [value] if option.nargs == "+" else value
            continue
        if option.nargs == "+":
            values: list[str] = []
            while i < len(tokens) and _is_value(tokens[i]):
                values.append(tokens[i])
                i += 1
            if not values:
                problems.append(f"{head} has no value")
            options[name] = values
        elif i < len(tokens) and _is_value(tokens[i]):
            options[name] = tokens[i]
            i += 1
        elif option.nargs == "?":
            options[name] = True
        else:
            problems.append(f"{head} has no value")
    if "config" in options:
        problems.append(f"--config {options['config']!r}: options in a file the policy cannot read")
    model = positional
    if model is None and isinstance(options.get("model"), str):
        model = options["model"]
    options.pop("model", None)
    if model is None:
        model = DEFAULT_MODEL  # what vLLM serves when it is given no model
    return ServeArgs(options=options, model=model, env=dict(env or {}), problems=tuple(problems))


def looks_like_vllm_args(argv: Sequence[str]) -> bool:
    """Arguments that carry at least one option only vLLM has."""
    for token in argv:
        if token.startswith("--") or token in SHORT_ALIASES:
            option = OPTIONS.get("--" + canonical(token.partition("=")[0]).partition(".")[0])
            option = option or OPTIONS.get(token)
            if option is not None and option.name in VLLM_SPECIFIC:
                return True
    return False


def mentions_vllm(tokens: Sequence[str]) -> bool:
    """Words that start vLLM somewhere: `vllm serve`, a vLLM entry-point module, vLLM options."""
    words = list(tokens)
    for index, word in enumerate(words):
        if "vllm.entrypoints" in word or re.search(r"(^|[\s/])vllm\s+serve(\s|$)", word):
            return True
        if _basename(word) == "vllm" and index + 1 < len(words) and words[index + 1] == "serve":
            return True
    return looks_like_vllm_args(words)


def _basename(token: str) -> str:
    return token.rsplit("/", 1)[-1]


def _strip_prefixes(argv: list[str], env: dict[str, str]) -> list[str]:
    """Drop `exec`, `env X=Y`, `X=Y`, `nohup`, `nice -n 5`, `tini --` in front of a command."""
    args = list(argv)
    while args:
        head = _basename(args[0])
        if _ASSIGNMENT.match(args[0]):
            name, _, value = args[0].partition("=")
            env[name] = value
            args = args[1:]
        elif head == "env":
            args = _env(args[1:], env)
        elif head in _PREFIX_COMMANDS:
            args = args[1:]
            while args and args[0].startswith("-") and head in ("exec", "time", "command"):
                args = args[2:] if args[0] == "-a" else args[1:]
        elif head == "nice":
            args = args[1:]
            if args and args[0] == "-n":
                args = args[2:]
            elif args and args[0].startswith("-"):
                args = args[1:]
        elif head in _WRAPPERS:
            # `sudo -u vllm`, `timeout 1h`, `taskset -c 0-3`, `numactl -N 0`, `stdbuf -oL`:
            # options (with their values), then the wrapped command.
            takes_value, positionals = _WRAPPERS[head]
            args = args[1:]
            while args and args[0].startswith("-"):
                option = args[0]
                args = args[1:]
                if option == "--":
                    break
                if option in takes_value and "=" not in option:
                    args = args[1:]
            args = args[positionals:]
        elif head in ("tini", "tini-static"):
            args = args[1:]
            while args and args[0].startswith("-"):
                done = args[0] == "--"
                args = args[1:]
                if done:
                    break
        else:
            break
    return args


#: GNU env's options that take a value (`-u NAME`, `-C DIR`, `-a ARG0`); `-S` is read apart.
_ENV_VALUE_SHORT = frozenset("uCa")
_ENV_VALUE_LONG = frozenset({"--unset", "--chdir", "--argv0"})


def _env(args: list[str], env: dict[str, str]) -> list[str]:
    """What `env [OPTION]... [NAME=VALUE]... COMMAND` runs, its assignments put in `env`.

    `-S STRING` / `-SSTRING` / `--split-string=STRING` (also inside a cluster: `-iS`) is a
    command line: it is split into words as a shell splits a `sh -c` script and put back in
    front of the remaining arguments, where env goes on reading options and assignments.
    """
    while args:
        token = args[0]
        if _ASSIGNMENT.match(token):
            name, _, value = token.partition("=")
            env[name] = value
            args = args[1:]
            continue
        if token == "--":
            return args[1:]
        if token == "-" or not token.startswith("-"):
            return args
        args = args[1:]
        split: str | None = None
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            if len(name) >= 3 and "--split-string".startswith(name):
                if not eq:
                    if not args:
                        raise ReadError(f"env {token} without a string")
                    value, args = args[0], args[1:]
                split = value
            elif not eq and len(name) >= 3 and any(o.startswith(name) for o in _ENV_VALUE_LONG):
                args = args[1:]
        else:
            for index, letter in enumerate(token[1:], start=2):
                if letter == "S" or letter in _ENV_VALUE_SHORT:
                    attached = token[index:]
                    if not attached:
                        if not args:
                            raise ReadError(f"env {token} without a value")
                        attached, args = args[0], args[1:]
                    if letter == "S":
                        split = attached
                    break
        if split is not None:
            args = [*_split_string(split, env), *args]
    return args


def _split_string(text: str, env: Mapping[str, str]) -> list[str]:
    """The words of an `env -S` string (one simple command; `${NAME}` from the env)."""
    if "\\" in text:
        # env's own escapes (`\_` separates words, `\c` ends the string) are not a shell's.
        raise ReadError(f"env -S {text!r} uses escape sequences the reader does not interpret")
    commands = split_script(text)
    if len(commands) > 1:
        raise ReadError(f"env -S {text!r} holds shell operators env does not interpret")
    words = [_expand(w, env) for w in (commands[0] if commands else [])]
    unresolved = [w for w in words if "$" in w or "`" in w]
    if unresolved:
        raise ReadError(f"env -S {text!r} uses variables the reader cannot resolve")
    return words


#: Programs that download or inspect a model and start no server (`hf download ...`).
NON_SERVING_PROGRAMS = frozenset({"hf", "huggingface-cli"})


def runs_non_serving_program(argv: Sequence[str]) -> bool:
    """A command vector whose program (past `env`, `exec`, `nohup`... wrappers) is one that
    starts no server (NON_SERVING_PROGRAMS); a shell or anything unknown is not."""
    try:
        args = _strip_prefixes(list(argv), {})
    except ReadError:
        return False
    return bool(args) and _basename(args[0]) in NON_SERVING_PROGRAMS


@dataclass(frozen=True)
class Launch:
    """A `vllm serve` found in a command: its arguments and the literal env it was given."""

    argv: list[str]
    env: dict[str, str]
    #: The container image a `docker run` starts it in (None: not started by `docker run`).
    image: str | None = None


def find_launches(
    argv: Sequence[str], *, image_runs_vllm: bool = False, env: Mapping[str, str] | None = None
) -> list[Launch]:
    """Every `vllm serve` a command vector starts (a container's command + args).

    `image_runs_vllm`: the argv is the arguments to an image's default entrypoint (no
    command given) and that image is known to run `vllm serve`.
    Raises ReadError when the command mentions vLLM but cannot be read with certainty.
    """
    return _launches(list(argv), dict(env or {}), image_runs_vllm=image_runs_vllm, depth=0)


def _launches(
    argv: list[str], env: dict[str, str], *, image_runs_vllm: bool, depth: int
) -> list[Launch]:
    if depth > 8:
        raise ReadError("commands nested more than 8 deep")
    env = dict(env)
    if image_runs_vllm:
        return [Launch(argv[1:] if argv[:1] == ["serve"] else list(argv), env)]
    args = _strip_prefixes(argv, env)
    if not args:
        return []
    head = _basename(args[0])
    if head == "vllm":
        if len(args) > 1 and args[1] == "serve":
            return [Launch(args[2:], env)]
        if len(args) == 1 or args[1] in ("--help", "-h", "--version", "-v"):
            return []
        return _not_serve(args)
    if PYTHONS.match(head):
        return _python(args, env)
    if head in SHELLS:
        return _shell(args, env, depth)
    if head in ("docker", "podman"):
        return _docker(args, env, depth)
    if mentions_vllm(args):
        raise ReadError(
            f"a command that mentions vLLM but is not one the reader knows: {args[0]!r}"
        )
    return []


def _not_serve(args: list[str]) -> list[Launch]:
    sub = args[1]
    if sub in ("bench", "collect-env", "chat", "complete", "run-batch") and not (
        looks_like_vllm_args(args[2:]) and sub == "run-batch"
    ):
        return []
    raise ReadError(f"`vllm {sub}` is not `vllm serve`")


def _python(args: list[str], env: dict[str, str]) -> list[Launch]:
    i = 1
    while i < len(args) and args[i].startswith("-") and args[i] not in ("-m", "-c"):
        i += 1
    if i >= len(args):
        return []
    if args[i] == "-m" and i + 1 < len(args):
        module = args[i + 1]
        rest = args[i + 2 :]
        if module in OPENAI_MODULES:
            return [Launch(rest, env)]
        if module in CLI_MODULES:
            if rest and rest[0] == "serve":
                return [Launch(rest[1:], env)]
            if mentions_vllm(rest):
                raise ReadError(f"`python -m {module}` without `serve`")
            return []
        if module.startswith("vllm") or looks_like_vllm_args(rest):
            raise ReadError(f"`python -m {module}` is not an entry point the reader knows")
        return []
    if args[i] == "-c" and i + 1 < len(args):
        if mentions_vllm([args[i + 1], *args[i + 2 :]]):
            raise ReadError("Python code (`python -c`) that mentions vLLM")
        return []
    if mentions_vllm(args[i:]):
        raise ReadError(f"a Python script {args[i]!r} with vLLM arguments")
    return []


def _shell(args: list[str], env: dict[str, str], depth: int) -> list[Launch]:
    i = 1
    script: str | None = None
    while i < len(args):
        token = args[i]
        if token in ("-o", "+o", "-O", "+O"):
            i += 2
            continue
        if token == "--":
            i += 1
            break
        if token.startswith(("-", "+")) and len(token) > 1:
            if "c" in token[1:] and not token.startswith("--"):
                if i + 1 >= len(args):
                    raise ReadError(f"{args[0]} {token} without a script")
                following = args[i + 1 :]
                if following[:1] == ["--"]:
                    following = following[1:]
                if not following:
                    raise ReadError(f"{args[0]} {token} without a script")
                script = following[0]
                break
            i += 1
            continue
        break
    if script is None:
        if mentions_vllm(args[i:]):
            raise ReadError(
                f"a shell script file ({' '.join(args[i : i + 1])}) the reader cannot see"
            )
        return []
    return _script(script, env, depth + 1)


def _docker(args: list[str], env: dict[str, str], depth: int) -> list[Launch]:
    i = 1
    if i < len(args) and args[i] == "container":
        i += 1
    if i >= len(args) or args[i] not in ("run", "create"):
        return []  # pull, inspect, rm, logs...: nothing starts
    i += 1
    entrypoint: str | None = None
    env = dict(env)
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        token = args[i]
        if token == "--":
            i += 1
            break
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            takes_value = name not in _DOCKER_FLAGS
        elif all(c in _DOCKER_SHORT_FLAGS for c in token[1:]):
            name, eq, value, takes_value = token, "", "", False
        elif len(token) > 2:
            # `-eNAME=value`, `-p8000:8000`: a short option with its value attached.
            name, eq, value, takes_value = token[:2], "=", token[2:].removeprefix("="), True
        else:
            name, eq, value, takes_value = token, "", "", True
        if takes_value and not eq:
            if i + 1 >= len(args):
                raise ReadError(f"docker run {token} has no value")
            value = args[i + 1]
            i += 1
        if name in ("-e", "--env"):
            key, sep, literal = value.partition("=")
            if sep:
                env[key] = literal
        elif name == "--entrypoint":
            entrypoint = value
        i += 1
    if i >= len(args):
        raise ReadError("docker run without an image")
    image = args[i]
    rest = args[i + 1 :]
    return [
        replace(launch, image=launch.image or image)
        for launch in _in_image(image, rest, entrypoint, env, depth)
    ]


def _in_image(
    image: str, rest: list[str], entrypoint: str | None, env: dict[str, str], depth: int
) -> list[Launch]:
    if entrypoint is not None:
        command = shlex.split(entrypoint) if " " in entrypoint else [entrypoint]
        return _launches([*command, *rest], env, image_runs_vllm=False, depth=depth + 1)
    known = is_vllm_image(image)
    if known or looks_like_vllm_args(rest):
        if rest and _basename(rest[0]) in ("vllm", "python", "python3", *SHELLS):
            return _launches(rest, env, image_runs_vllm=False, depth=depth + 1)
        return _launches(rest or [], env, image_runs_vllm=True, depth=depth + 1) or (
            [Launch([], env)] if known else []
        )
    if mentions_vllm(rest):
        return _launches(rest, env, image_runs_vllm=False, depth=depth + 1)
    return []


def is_vllm_image(image: str) -> bool:
    """An image whose default entrypoint is vLLM's OpenAI server: the official images."""
    repository = image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
    return repository in ("vllm-openai", "vllm-tpu")


def split_script(script: str) -> list[list[str]]:
    """A shell script's simple commands, each as its words (quotes removed).

    Raises ReadError for what a POSIX shell reader cannot split with certainty: unbalanced
    quotes, control characters other than tab and newline, here-documents.
    """
    if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", script.replace("\r\n", "\n")):
        raise ReadError("the script contains control characters")
    text = re.sub(r"\\\r?\n", " ", script)
    # A file descriptor before a redirection (`2>&1`, ` 1>log`): the lexer would split it off
    # as a word of its own.
    text = re.sub(r"(?<=\s)\d(?=[<>])", "", text)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"
    lexer.commenters = "#"
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:
        raise ReadError(f"the script cannot be split into words ({exc})") from None
    commands: list[list[str]] = []
    current: list[str] = []
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
            continue
        if token.startswith("<<"):
            raise ReadError("a here-document")
        if token in _OPERATORS or set(token) <= set(";&|()\n"):
            if current:
                commands.append(current)
            current = []
            continue
        if _REDIRECT.match(token) or set(token) <= set("<>&"):
            skip_next = True  # every redirection names its target next
            continue
        if not current and token in _KEYWORDS:
            continue
        current.append(token)
    if current:
        commands.append(current)
    return commands


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _expand(word: str, env: Mapping[str, str]) -> str:
    """`$NAME` and `${NAME}` replaced from what the script (or container) set; others kept."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return env.get(name, match.group(0))

    return _VARIABLE.sub(value, word)


def _script(script: str, env: dict[str, str], depth: int) -> list[Launch]:
    env = dict(env)
    found: list[Launch] = []
    for raw_words in split_script(script):
        words = [_expand(w, env) for w in raw_words]
        if _basename(words[0]) in ("export", "readonly", "declare", "local") or all(
            _ASSIGNMENT.match(w) for w in words
        ):
            for word in words:
                if _ASSIGNMENT.match(word):
                    name, _, value = word.partition("=")
                    env[name] = value
            continue
        launches = _launches(words, env, image_runs_vllm=False, depth=depth)
        for launch in launches:
            unresolved = [t for t in launch.argv if "$" in t or "`" in t]
            if unresolved:
                raise ReadError(
                    f"vLLM arguments use shell expansions the reader cannot resolve: "
                    f"{', '.join(unresolved)}"
                )
        found += launches
    return found


def script_launches(script: str) -> list[Launch]:
    """Every `vllm serve` a startup script starts (directly or through `docker run`)."""
    return _script(script, {}, 0)


def literal_env(env: dict[str, str]) -> dict[str, str]:
    """Environment values that are literals (no `$` expansion: not read at run time)."""
    return {k: v for k, v in env.items() if v and "$" not in v and "`" not in v}


#: vLLM's spellings of "the model's own context length" for --max-model-len.
AUTO_LENGTHS = frozenset({"auto", "-1"})


def human_int(value: Any) -> int | None:
    """vLLM's `human_readable_int`: `32768`, `32k` (x1000), `32K`/`32Ki` (x1024), `1.5m`.

    Upper-case suffixes are read as binary (the larger value), so a cap cannot be slipped
    under by choosing the smaller reading of an ambiguous suffix.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(?:([kmgt])|([KMGT])i?)?", text)
    if not match:
        try:
            plain = float(text)
        except ValueError:
            return None
        return int(plain) if plain.is_integer() else None
    digits, decimal, binary = match.groups()
    if decimal:
        return int(float(digits) * 10 ** (3 * "kmgt".index(decimal) + 3))
    if binary:
        # vLLM refuses decimals with a binary suffix.
        return None if "." in digits else int(digits) * 2 ** (10 * "KMGT".index(binary) + 10)
    return int(float(digits)) if float(digits).is_integer() else None
