"""Read "the vLLM server this command starts" from a command line or a script, or refuse.

Pure: no Pulumi import. The policy pack feeds it container commands and arguments and
startup scripts; it answers with the `vllm serve` launches that will really run, or raises
ReadError naming what it cannot follow. What it accepts is stated in docs/reader-grammar.md:

- programs: `vllm serve ...`, `python[3] -m vllm.entrypoints.openai.api_server ...`,
  `python[3] -m vllm.entrypoints.cli.main serve ...`, `docker|podman run IMAGE ...` (with or
  without `--entrypoint`), behind wrappers (`exec`, `env`, `NAME=value`, `nohup`, `nice`,
  `tini --`, `sudo`, `timeout`, ...) and `sh -c 'SCRIPT'`;
- scripts, split by :mod:`serving.launch.shell_words` (words keep their quoting): simple commands,
  `;`, `&`, pipelines, `&&`/`||` between commands that start no server, redirections, literal
  assignments, `export`/`readonly`/`unset`, `set` options, `exec`, `exit`, and a short list of
  programs that start no server. Everything else (conditionals, loops, functions, command
  substitution, value-changing builtins, unknown programs, unquoted expansions that split or
  glob, code after `exec`) is refused by name.

Arguments are read as vLLM 0.27.1's parser reads them (:func:`parse_serve_args`): which
options exist, which take a value (and how many: `--served-model-name a b` takes both, as
argparse's `nargs="+"` does), which are `--no-` negations, short aliases and append actions
come from a snapshot of its `make_arg_parser` (`serving/data/vllm-0.27.1.json`), and its own
preprocessing (the first `--model` moved to the front, dotted options merged and given last,
`-O3`) is applied before. An option vLLM does not have, or an abbreviation that matches
several, is reported instead of guessed.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from serving.catalog.models import KV_DTYPE_BYTES
from serving.launch.shell_words import GLOB_CHARS, Command, Part, ShellError, Word, lex

#: vLLM's own `vllm serve` parser, captured from vLLM 0.27.1 (`serving/data/`): every option
#: string, its destination, whether it takes a value, how many, and `--no-` negations.
SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "vllm-0.27.1.json"


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
    #: argparse's append action: every occurrence adds a value.
    append: bool = False


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
            append="Append" in str(spec.get("action")),
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
#: Modules `python -m` can run as vLLM's CLI. vLLM 0.27.1 ships no `vllm/__main__.py`, so
#: `python -m vllm serve ...` exits at once ("cannot be directly executed"): not a server.
CLI_MODULES = frozenset({"vllm.entrypoints.cli.main"})
#: Python options that take the next word as their value (`-W -m` is a warning filter "-m").
_PYTHON_VALUE_OPTIONS = frozenset({"-W", "-X", "--check-hash-based-pycs"})
#: Commands that run another: (options that take a value, positionals before the command).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "taskset": (frozenset(), 1),
    "numactl": (frozenset({"-N", "-m", "-C", "-p", "-i", "-l"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
}
_PREFIX_COMMANDS = frozenset({"exec", "nohup", "time", "command", "dumb-init"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: `docker run` options that take no value; every other `-x`/`--xx` option takes one.
_DOCKER_FLAGS = frozenset(
    {
        "-d", "--detach", "-i", "--interactive", "-t", "--tty", "--rm", "--privileged",
        "--init", "-P", "--publish-all", "--read-only", "--sig-proxy", "--no-healthcheck",
        "--oom-kill-disable", "-q", "--quiet", "--disable-content-trust", "--help",
    }
)  # fmt: skip
#: Every short option of `docker run` / `docker container create` (Docker's CLI reference)
#: and `podman run` (the same letters), and whether it takes a value: True for `-a`
#: (--attach), `-c` (--cpu-shares), `-e` (--env), `-h` (--hostname), `-l` (--label), `-m`
#: (--memory), `-p` (--publish), `-u` (--user), `-v` (--volume), `-w` (--workdir); False for
#: `-d` (--detach), `-i` (--interactive), `-P` (--publish-all), `-q` (--quiet), `-t` (--tty).
#: A cluster is read as Docker's pflag reads it: flags, then at most one option that takes
#: the rest of the word (`-e=` or `-e` attached) or the next word as its value. A letter not
#: listed here is refused, never guessed.
DOCKER_SHORT_OPTIONS: dict[str, bool] = {
    **dict.fromkeys("acehlmpuvw", True),
    **dict.fromkeys("diPqt", False),
}
#: `docker run` options the reader accepts: they give the container no host files, host
#: namespaces, devices, capabilities or name resolution. `--privileged` is accepted here and
#: judged by the platform (policies._server): a TPU VM's container needs it to reach the TPU
#: devices (vLLM's TPU guide: `docker run --privileged --net host --shm-size=16G`), nothing
#: else does. `-p` and friends, `-v` and friends are refused with their own messages; every
#: other option (`--pid`, `--ipc`, `--cap-add`, `--device`, `--security-opt`, `--userns`,
#: `--add-host`, `--dns`, `--workdir`, `--tmpfs`, `--cgroup-parent`, `--log-driver` and
#: `--log-opt`, which may ship the server's output to an address they name, ...) is refused
#: by name.
DOCKER_OPTIONS = frozenset(
    {
        "-d", "--detach", "-i", "--interactive", "-t", "--tty", "--rm", "--init",
        "--read-only", "--sig-proxy", "--no-healthcheck", "-q", "--quiet",
        "--disable-content-trust", "--privileged", "--name", "--restart", "--net",
        "--network", "--shm-size", "-e", "--env", "--entrypoint",
        "--stop-timeout", "--stop-signal", "-l", "--label", "--pull", "--platform", "--gpus",
        "-m", "--memory", "--cpus", "-u", "--user", "--ulimit",
    }
)  # fmt: skip
#: `docker run --net` values: the host's network, where vLLM's --port is the host's port.
DOCKER_NETWORKS = frozenset({"host"})


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
    #: Options (and "model") given a value not known at preview that are not decided
    #: harmless whatever their value (each is also a problem).
    unseen: tuple[str, ...] = ()

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


def _dotted_value(text: str) -> Any:
    """A dotted option's value as vLLM 0.27.1 reads it: JSON, else a human-readable int,
    else the text (`FlexibleArgumentParser.parse_args`)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        number = human_int(text)
        return number if number is not None and not isinstance(number, bool) else text


def _merge(original: dict[str, Any], update: dict[str, Any]) -> None:
    """vLLM's `recursive_dict_update`: nested dicts merge, lists extend, the rest replaces."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(original.get(key), dict):
            _merge(original[key], value)
        elif isinstance(value, list) and isinstance(original.get(key), list):
            original[key] = original[key] + value
        else:
            original[key] = value


def _preprocess(
    tokens: list[str], serve: bool = True
) -> tuple[list[str], dict[str, dict[str, Any]], list[str]]:
    """What vLLM 0.27.1's `FlexibleArgumentParser.parse_args` does before argparse runs:
    the first `--model`/`--model=` is moved to the front as the positional model (later
    ones stay options and lose to it); `_` becomes `-` in option names; `-O3` becomes
    `--optimization-level 3`; every dotted option (`--x.y=v`, `--x.y v`) is removed and
    merged into one JSON object per option, given after all other arguments (so it
    replaces a JSON object given for the same option anywhere on the line)."""
    problems: list[str] = []
    model_index = next(
        (i for i, t in enumerate(tokens) if re.match(r"^--model(=.+|$)", t, re.S)), None
    )
    if not serve:
        model_index = None  # only `vllm serve ...` gets the --model move
    if model_index is not None:
        if tokens[model_index] == "--model":
            if model_index + 1 >= len(tokens):
                return [], {}, ["--model has no value (vLLM fails)"]
            tag, rest = tokens[model_index + 1], model_index + 2
        else:
            tag, rest = tokens[model_index].removeprefix("--model="), model_index + 1
        tokens = [tag, *tokens[:model_index], *tokens[rest:]]
    if (
        serve
        and tokens
        and tokens[0].startswith("-")
        and not any(re.match(r"^--config(=.+|$)", t) for t in tokens)
        and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", t) for t in tokens)
    ):
        problems.append("--served-model-name without a positional model (vLLM refuses it)")
    processed: list[str] = []
    for index, token in enumerate(tokens):
        if token.startswith("--"):
            key, eq, value = token.partition("=")
            head, dot, tail = key[2:].partition(".")
            processed.append("--" + head.replace("_", "-") + dot + tail + eq + value)
        elif token.startswith("-O") and token != "-O":
            processed += ["--optimization-level", token[3:] if token[2] == "=" else token[2:]]
        elif token == "-O" and index + 1 < len(tokens) and tokens[index + 1] in "0123":
            processed.append("--optimization-level")
        else:
            processed.append(token)
    dotted: dict[str, dict[str, Any]] = {}
    kept: list[str] = []
    skip = False
    for index, token in enumerate(processed):
        if skip:
            skip = False
            continue
        if not (token.startswith("-") and "." in token):
            kept.append(token)
            continue
        key, eq, value = token.partition("=")
        if eq and "." not in key:
            kept.append(token)  # the dot was in the value
            continue
        if not eq:
            if index + 1 >= len(processed):
                problems.append(f"{token} has no value (vLLM fails)")
                continue
            value, skip = processed[index + 1], True
        parsed: Any
        if key.endswith("+"):
            key, parsed = key[:-1], value.split(",")
        else:
            parsed = _dotted_value(value)
        name, *path = key.split(".")
        nested: Any = parsed
        for step in reversed(path):
            nested = {step: nested}
        _merge(dotted.setdefault(name, {}), nested)
    return kept, dotted, problems


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
    return None, (
        f"{raw} is not an option of vLLM 0.27.1's parser (vLLM refuses unknown options at "
        "start: `unrecognized arguments`); remove it"
    )


#: `--load-format` values that read the served checkpoint's own files.
LOAD_FORMATS = frozenset({"auto", "safetensors", "runai_streamer"})
#: Options that bring code or models the reader cannot judge into the server: refused.
CODE_OPTIONS: dict[str, str] = {
    "middleware": "imports Python middleware",
    "tool-parser-plugin": "imports a tool-parser plugin file",
    "worker-extension-cls": "imports a worker extension class",
    "worker-cls": "imports a worker class",
    "logits-processors": "imports logits processors",
    "lora-modules": "serves LoRA adapters the catalogue does not know",
    "hf-config-path": "reads the model's config from another path",
    "model-loader-extra-config": "changes how the weights are loaded",
    "config": "reads options from a file the reader cannot see",
    "trust-remote-code": "runs Python code shipped with the checkpoint",
    "hf-overrides": "changes the checkpoint's config, so it is no longer the catalogue's",
    "quantization-config": "changes how the checkpoint's weights are quantised",
    "model-class-overrides": "replaces the model's implementation class",
    "io-processor-plugin": "loads an input/output processor plugin",
    "reasoning-parser-plugin": "imports a reasoning-parser plugin file",
    "kv-transfer-config": "loads a KV connector (a module it names) that moves the KV cache",
    "ec-transfer-config": "loads an encoder-cache connector (a module it names)",
    "weight-transfer-config": "replaces the weights while the server runs",
    "additional-config": "passes platform plugins a configuration the reader cannot judge",
    "download-dir": "resolves Hugging Face ids from another cache (as HF_HUB_CACHE does)",
    "allowed-local-media-path": "lets every client read the container's files (file:// media)",
    "trust-request-chat-template": "renders chat templates the clients send",
    "default-mm-loras": "serves LoRA adapters (paths it names) for multimodal requests",
    "log-config-file": "configures Python's logging from a file, which may instantiate any class",
    "mm-encoder-fp8-scale-path": "reads encoder scales from a file outside the checkpoint",
    "mm-encoder-fp8-scale-save-path": "writes a file a later start may read back",
    "otlp-traces-endpoint": "sends request traces to an endpoint the policies cannot judge",
    "tool-server": "makes the server call tool servers at the addresses it names",
    "kv-events-config": "publishes KV-cache events to an endpoint it names",
    "scheduler-cls": "imports a scheduler class",
    "profiler-config": "writes profiler traces into a folder it names",
    "compilation-config": "names compiler cache and dump folders (read back at the next start) "
    "and compiler passes",
    "structured-outputs-config": "may import a reasoning-parser plugin file",
    "num-gpu-blocks-override": "sizes the KV cache whatever the memory budget says",
    "spec-model": "names a drafter outside --speculative-config, where the policies read it",
    "spec-method": "changes the speculative method outside --speculative-config, where the "
    "policies read it",
    "spec-tokens": "changes the speculative token count outside --speculative-config, where "
    "the policies read it",
    "ssl-keyfile": "serves HTTPS with a key from a file, while Cloud Run, the probes and the "
    "port policies speak HTTP to the port",
    "ssl-certfile": "serves HTTPS with a certificate from a file, while Cloud Run, the probes "
    "and the port policies speak HTTP to the port",
    "ssl-ca-certs": "asks clients for certificates from a file the policies cannot see",
    "enable-prompt-embeds": "deserialises tensors the clients send",
    "enable-mm-embeds": "deserialises tensors the clients send",
}
#: Options after which the server does not serve the OpenAI HTTP API on the one TCP port
#: `--port` names (the port, firewall and health policies and Cloud Run's probes assume it
#: does; vLLM 0.27.1's `vllm/entrypoints/cli/serve.py` runs headless, gRPC or a per-rank
#: supervisor instead): refused.
NO_HTTP_OPTIONS: dict[str, str] = {
    "headless": "starts the engine without an API server, so nothing listens on the port",
    "uds": "serves on a Unix socket, not on the TCP port the policies and probes check",
    "grpc": "serves gRPC instead of the OpenAI HTTP API the probes and clients call",
    "data-parallel-multi-port-external-lb": "starts a supervisor that serves one API server "
    "per data-parallel rank, each on a port of its own",
}
#: Options judged against a fixed set of values: vLLM's own spellings that load nothing from
#: elsewhere. Any other value is refused, naming the accepted ones.
CHOICE_OPTIONS: dict[str, frozenset[str]] = {
    "tokenizer-mode": frozenset({"auto", "hf", "slow"}),
    "model-impl": frozenset({"auto", "vllm"}),
    "distributed-executor-backend": frozenset({"mp", "uni"}),
    "data-parallel-backend": frozenset({"mp"}),
    "safetensors-load-strategy": frozenset({"eager", "lazy", "prefetch"}),
    "runner": frozenset({"auto", "generate"}),
    "convert": frozenset({"auto", "none"}),
    # the memory policy counts these KV cache element sizes (serving.catalog.models.KV_DTYPE_BYTES)
    "kv-cache-dtype": frozenset({"auto", *KV_DTYPE_BYTES}),
    # `lmcache` loads LMCache, which reads its own configuration (remote backends included)
    "kv-offloading-backend": frozenset({"native"}),
}
#: Options judged against the served checkpoint (policies._server, the memory policy):
#: the model and its revision, the drafter, the file-reading options that may only name the
#: checkpoint's own files, the quantisation, how the weights are read and the KV cache size.
CHECKPOINT_OPTIONS: dict[str, str] = {
    "model": "must resolve to a checkpoint the download job produces",
    "revision": "a branch, tag or commit of the catalogue repository, never a refs/ ref",
    "tokenizer": "only the served model's own path (a trailing `/` and `./` aside)",
    "tokenizer-revision": "only the served checkpoint's own revision",
    "speculative-config": "the drafter resolves like the model; its fields are listed",
    "chat-template": "only a file inside the served checkpoint's folder",
    "generation-config": "`auto`, `vllm` or the served checkpoint's own folder",
    "quantization": "only the catalogue's quantisation of the served checkpoint",
    "load-format": "`auto`, `safetensors` or `runai_streamer`",
    "kv-cache-memory-bytes": "counted by the memory policy",
}
#: Options that take text and are harmless: they name nothing that is loaded, imported,
#: fetched or written, or only matter with an option that is refused.
HARMLESS_OPTIONS: dict[str, str] = {
    "allowed-headers": "CORS",
    "allowed-methods": "CORS",
    "allowed-origins": "CORS",
    "allowed-media-domains": "narrows where media may come from",
    "api-key": "authentication",
    "hf-token": "a Hugging Face credential (what is downloaded is judged by --model)",
    "served-model-name": "the name clients use",
    "host": "the address the port is bound on",
    "root-path": "a URL prefix behind a proxy",
    "response-role": "the role name in responses",
    "cohere-format": "output format of one model family",
    "config-format": "how the checkpoint's own config files are read",
    "code-revision": "only read with --trust-remote-code, which is refused",
    "attention-backend": "a built-in attention backend (vLLM refuses other names)",
    "mm-encoder-attn-backend": "a built-in attention backend",
    "mamba-backend": "a built-in kernel",
    "attention-config": "tunes built-in kernels",
    "kernel-config": "tunes built-in kernels",
    "ir-op-priority": "tunes built-in kernels",
    "eplb-config": "expert load balancing (mixture-of-experts models only)",
    "fault-tolerance-config": "engine recovery timeout",
    "optimization-level": "compilation effort",
    "override-attention-dtype": "attention precision",
    "cpu-distributed-timeout-seconds": "a timeout",
    "distributed-timeout-seconds": "a timeout",
    "cpu-offload-params": "which parameters are offloaded (memory only)",
    "offload-params": "which parameters are offloaded (memory only)",
    "data-parallel-address": "the address of the server's own data-parallel group",
    "master-addr": "the address of the server's own torch.distributed group",
    "device-ids": "which local devices are used",
    "diffusion-config": "diffusion models only",
    "pooler-config": "pooling models only (--runner is judged)",
    "disable-access-log-for-endpoints": "logging",
    "max-log-len": "logging",
    "show-hidden-metrics-for-version": "metrics",
    "fingerprint-value": "a cache fingerprint",
    "ignore-patterns": "files skipped when downloading",
    "kv-cache-dtype-skip-layers": "layers kept at the model's precision",
    "kv-offloading-size": "CPU memory for offloaded KV blocks",
    "limit-mm-per-prompt": (
        "bounds multimodal items (the multimodal policy budgets one whole image regardless)"
    ),
    "lora-target-modules": "only read with --enable-lora, which is refused",
    "max-cpu-loras": "only read with --enable-lora, which is refused",
    "mamba-block-size": "mamba models only",
    "max-num-scheduled-tokens": "a scheduler bound",
    "max-parallel-loading-workers": "loading concurrency",
    "prefix-match-unit": "a cache granularity",
    "video-pruning-rate": "video token pruning",
    "numa-bind-cpus": "CPU placement",
    "numa-bind-nodes": "CPU placement",
    "media-io-kwargs": "media decoding settings",
    "mm-processor-kwargs": (
        "the checkpoint's processor settings (refused by the multimodal policy where images "
        "are not chunked)"
    ),
    "override-generation-config": "sampling defaults given in the launch itself",
    "default-chat-template-kwargs": "arguments to the checkpoint's own chat template",
    "pt-load-map-location": "where .pt weights are mapped while loading",
    "reasoning-config": "reasoning markers of the checkpoint's own parser",
    "reasoning-parser": "a built-in parser (vLLM refuses other names)",
    "tool-call-parser": "a built-in parser (vLLM refuses other names)",
    "ssl-ciphers": "only read with --ssl-certfile, which is refused",
    # flags (vLLM 0.27.1's help and config docstrings say what each does)
    "aggregate-engine-logging": "logging",
    "allow-deprecated-quantization": "only matters with --quantization, which is judged",
    "async-scheduling": "scheduler overlap",
    "cohere-is-reasoning-model": "one model family",
    "cudagraph-metrics": "metrics",
    "disable-cascade-attn": "a kernel choice",
    "disable-custom-all-reduce": "a collective kernel choice",
    "disable-fastapi-docs": "hides the API docs pages",
    "disable-nccl-for-dp-synchronization": "data-parallel synchronisation",
    "disable-uvicorn-access-log": "logging",
    "enable-auto-tool-choice": "tool calls parsed by a built-in parser (vLLM refuses it "
    "without --tool-call-parser)",
    "enable-bf16x3-router-gemm": "mixture-of-experts models only",
    "calculate-kv-scales": "fp8 KV cache scales computed at run time (precision only)",
    "enable-cumem-allocator": "how device memory is allocated",
    "enable-dbo": "micro-batch overlap",
    "enable-ep-weight-filter": "mixture-of-experts models only",
    "enable-eplb": "mixture-of-experts models only",
    "enable-expert-parallel": "mixture-of-experts models only",
    "enable-fault-tolerance": "engine recovery",
    "enable-flash-late-interaction": "pooling models only (--runner is judged)",
    "enable-flashinfer-autotune": "kernel tuning at start-up",
    "enable-force-include-usage": "adds token usage to every response",
    "enable-layerwise-nvtx-tracing": "profiler markers",
    "enable-log-deltas": "only read with --enable-log-outputs, which is refused",
    "enable-logging-iteration-details": "logging of step sizes",
    "enable-mamba-cache-stochastic-rounding": "mamba models only",
    "enable-mfu-metrics": "metrics",
    "enable-mixed-moe-lora-format": "only read with --enable-lora, which is refused",
    "enable-moe-shared-loras": "only read with --enable-lora, which is refused",
    "enable-offline-docs": "serves the API docs without a CDN",
    "enable-per-request-metrics": "metrics",
    "enable-prefix-caching": "reuses KV blocks within the same KV cache",
    "enable-prompt-tokens-details": "adds cached-token counts to usage",
    "enable-request-id-headers": "adds a request id header to responses",
    "enable-return-routed-experts": "mixture-of-experts models only",
    "enable-server-load-tracking": "counts requests in flight",
    "enable-ssl-refresh": "only read with --ssl-certfile, which is refused",
    "enable-tokenizer-info-endpoint": "serves the checkpoint's own tokenizer configuration",
    "enable-tower-connector-lora": "only read with --enable-lora, which is refused",
    "enforce-eager": "captures no CUDA graphs, which uses less memory than the memory "
    "policy counts",
    "exclude-tools-when-tool-choice-none": "prompt rendering of tools",
    "fail-on-environ-validation": "start-up checks of VLLM_* variables",
    "fully-sharded-loras": "only read with --enable-lora, which is refused",
    "interleave-mm-strings": "prompt rendering of multimodal items",
    "jit-monitor-verbose": "logging",
    "kv-cache-metrics": "metrics",
    "kv-sharing-fast-prefill": "models with cross-layer KV sharing only",
    "language-model-only": "serves text only (less memory than the memory policy counts)",
    "log-error-stack": "logging",
    "numa-bind": "CPU placement",
    "ray-workers-use-nsight": "only read with the ray backend, which is refused",
    "return-tokens-as-token-ids": "an output format",
    "scheduler-reserve-full-isl": "a scheduler admission rule",
    "specialize-active-lora": "only read with --enable-lora, which is refused",
    "use-fp64-gumbel": "sampling precision",
    "use-replayssm": "mamba models only",
    "use-tqdm-on-load": "a progress bar",
    # numbers and vLLM's own fixed choices (argparse refuses other values)
    "block-size": "the KV block granularity",
    "cpu-offload-gb": "moves weights to host memory (less device memory than counted)",
    "cp-kv-cache-interleave-size": "context-parallel layout",
    "cudagraph-capture-sizes": "CUDA graph batch sizes",
    "max-cudagraph-capture-size": "CUDA graph batch sizes",
    "data-parallel-rpc-port": "a port inside the server's own data-parallel group",
    "data-parallel-supervisor-port": "a port inside the server's own data-parallel group",
    "master-port": "a port inside the server's own torch.distributed group",
    "dbo-decode-token-threshold": "micro-batch overlap",
    "dbo-prefill-token-threshold": "micro-batch overlap",
    "dcp-kv-cache-interleave-size": "context-parallel layout",
    "dp-supervisor-probe-failure-threshold": "data-parallel supervision",
    "dp-supervisor-probe-interval-s": "data-parallel supervision",
    "dp-supervisor-probe-timeout-s": "data-parallel supervision",
    "h11-max-header-count": "bounds request headers",
    "h11-max-incomplete-event-size": "bounds request headers",
    "kv-cache-metrics-sample": "metrics",
    "long-prefill-token-threshold": "a scheduler bound",
    "mamba-cache-philox-rounds": "mamba models only",
    "max-logprobs": "bounds logprobs per request",
    "max-lora-rank": "only read with --enable-lora, which is refused",
    "max-loras": "only read with --enable-lora, which is refused",
    "mm-encoder-fp8-scale-save-margin": "only read with a scale file, which is refused",
    "mm-ipc-gpu-memory-gb": "multimodal tensor transfer",
    "mm-processor-cache-gb": "host memory for processed media",
    "mm-shm-cache-max-object-size-mb": "host memory for processed media",
    "offload-group-size": "which layers are offloaded (memory only)",
    "offload-num-in-group": "which layers are offloaded (memory only)",
    "offload-prefetch-step": "offload prefetching",
    "prefill-schedule-interval": "a scheduler interval",
    "renderer-num-workers": "prompt rendering threads",
    "replayssm-buffer-len": "mamba models only",
    "safetensors-prefetch-block-size": "loading read size",
    "safetensors-prefetch-num-threads": "loading concurrency",
    "seed": "the sampling seed",
    "shutdown-timeout": "how long requests may finish at shutdown",
    "ssl-cert-reqs": "only read with --ssl-certfile, which is refused",
    "stream-interval": "streaming granularity",
    "ubatch-size": "micro-batch size",
    "watermark": "a KV block admission margin",
    "all2all-backend": "mixture-of-experts models only",
    "chat-template-content-format": "how the checkpoint's chat template receives content",
    "collect-detailed-traces": "only read with --otlp-traces-endpoint, which is refused",
    "dcp-comm-backend": "context-parallel communication",
    "expert-placement-strategy": "mixture-of-experts models only",
    "fingerprint-mode": "a cache fingerprint",
    "gdn-prefill-backend": "a built-in kernel",
    "jit-monitor-mode": "logging",
    "kda-prefill-backend": "a built-in kernel",
    "linear-backend": "a built-in kernel",
    "logprobs-mode": "which logprobs are returned",
    "lora-dtype": "only read with --enable-lora, which is refused",
    "mamba-cache-dtype": "mamba models only",
    "mamba-cache-mode": "mamba models only",
    "mamba-ssm-cache-dtype": "mamba models only",
    "mamba-ssu-algorithm": "mamba models only",
    "mm-encoder-attn-dtype": "vision encoder attention precision",
    "mm-encoder-tp-mode": "how the vision encoder is split over devices",
    "mm-hasher-algorithm": "a cache key hash",
    "mm-processor-cache-type": "host memory for processed media",
    "mm-tensor-ipc": "multimodal tensor transfer",
    "moe-backend": "mixture-of-experts models only",
    "offload-backend": "how offloaded layers are read",
    "prefix-caching-hash-algo": "a cache key hash",
    "scheduling-policy": "request order",
    "uvicorn-log-level": "logging",
    "video-pruning-method": "video token pruning",
}
#: Flags and numbers after which the server is not the one the policies judge: refused when
#: set (a `--no-` negation, or the flag's default, is accepted).
REFUSED_OPTIONS: dict[str, str] = {
    "skip-tokenizer-init": "starts no tokenizer, so the server answers no text requests",
    "tokens-only": "serves only the tokens-in/tokens-out endpoint, not the OpenAI API",
    "mm-encoder-only": "runs only the vision encoder, so no text is generated",
    "enable-log-requests": "logs every request's parameters (and its prompt at DEBUG), which "
    "keeps what users send in the logs",
    "enable-log-outputs": "logs every response's text, which keeps what users receive in the logs",
    "disable-log-stats": "stops the engine's stat loggers, so /metrics no longer reports the "
    "series the monitoring alerts read",
    "enable-sleep-mode": "lets the server release its weights and KV cache at run time "
    "(/sleep with VLLM_SERVER_DEV_MODE)",
    "allow-credentials": "lets web pages of every allowed origin (all, by default) send "
    "credentialed cross-origin requests",
    "disable-hybrid-kv-cache-manager": "gives sliding-window layers a full-length KV cache, "
    "which the memory policy does not count",
    "disable-sliding-window": "runs sliding-window layers as full attention and caps the "
    "context, which the memory and context policies do not count",
    "skip-mm-profiling": "sizes the KV cache without the vision encoder's peak memory, which "
    "the memory policy counts",
    "data-parallel-external-lb": "expects an external load balancer in front of one API "
    "server per data-parallel rank",
    "data-parallel-hybrid-lb": "expects an external load balancer across nodes",
    "data-parallel-rank": "runs one rank of a data-parallel group started elsewhere",
    "data-parallel-start-rank": "runs part of a data-parallel group started elsewhere",
    "enable-elastic-ep": "lets the data-parallel group be rescaled at run time",
    "enable-lora": "serves LoRA adapters the catalogue does not know",
}
#: Numbers judged by the reader: a whole number within (lowest, highest). The device count
#: the parallel sizes multiply to is judged against the resource's accelerators
#: (policies._server).
INT_OPTIONS: dict[str, tuple[int, int]] = {
    "tensor-parallel-size": (1, 64),
    "pipeline-parallel-size": (1, 64),
    "data-parallel-size": (1, 64),
    "data-parallel-size-local": (1, 64),
    "prefill-context-parallel-size": (1, 64),
    "decode-context-parallel-size": (1, 64),
    "nnodes": (1, 1),
    "node-rank": (0, 0),
}
#: Options whose value a policy judges (the reason names it).
JUDGED_OPTIONS: dict[str, str] = {
    "port": "the port policies and the probes",
    "api-server-count": "the reader: 1 or more",
    "max-model-len": "max-model-len-cap and gpu-memory-budget",
    "max-num-batched-tokens": "gpu-memory-budget and multimodal-batched-tokens",
    "max-num-seqs": "mtp-max-num-seqs, and vLLM's start-up default of --max-num-batched-tokens",
    "gpu-memory-utilization": "gpu-memory-utilization-range and gpu-memory-budget",
    "dtype": "the reader: `auto` or `bfloat16` (the memory policy counts bf16 weights)",
    "enable-chunked-prefill": "vLLM's start-up default of --max-num-batched-tokens",
    "performance-mode": "vLLM's start-up defaults (`throughput` doubles them)",
    "disable-chunked-mm-input": "multimodal-batched-tokens",
}
#: `--speculative-config` fields the reader accounts for; every other field (the drafter's
#: own model, load or parallel configuration objects) is refused.
SPECULATIVE_FIELDS = frozenset(
    {"method", "model", "revision", "num_speculative_tokens", "quantization", "max_model_len",
     "draft_tensor_parallel_size", "tensor_parallel_size", "enforce_eager",
     "attention_backend", "moe_backend", "kv_cache_dtype", "prompt_lookup_max",
     "prompt_lookup_min", "disable_padded_drafter_batch", "parallel_drafting",
     "draft_sample_method", "rejection_sample_method", "use_local_argmax_reduction"}
)  # fmt: skip
#: `--dtype` values the memory policy accounts for: the catalogue checkpoints' own bf16.
DTYPES = frozenset({"auto", "bfloat16"})


def parse_serve_args(
    argv: Sequence[str], env: dict[str, str] | None = None, *, entry: str = "serve"
) -> ServeArgs:
    """Read `vllm serve` arguments (what follows `serve`) the way vLLM 0.27.1's parser does:
    its own preprocessing (:func:`_preprocess`), then argparse (unique abbreviations, the
    last value of a store option wins, append options accumulate, `None`/"" clear an
    optional value).

    `entry="api_server"` reads `python -m vllm.entrypoints.openai.api_server` arguments:
    FlexibleArgumentParser moves `--model` only after `serve`, and only the `serve`
    subcommand copies the positional model over `--model`, so there the last `--model` is
    the model and a positional one is ignored."""
    tokens, dotted, problems = _preprocess(list(argv), serve=entry == "serve")
    options: dict[str, Any] = {}
    positional: str | None = None
    #: An option vLLM lacks was just read: the words after it are its value or refused with it.
    unknown = False
    extra_positionals: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if _is_value(token):
            if positional is None:
                positional = token
            else:
                extra_positionals.append(token)
                if not unknown:
                    problems.append(f"a second positional argument {token!r} (vLLM refuses it)")
            continue
        raw, eq, value = token.partition("=")
        option, problem = lookup(raw)
        unknown = option is None and not eq
        if option is None:
            problems.append(problem or f"cannot read {token!r}")
            continue
        name = option.name
        if not option.takes_value:
            if eq:
                problems.append(f"{raw} takes no value, got {token!r} (vLLM refuses it)")
            options[name] = not option.negation
            continue
        given: Any
        if eq:
            given = [value] if option.nargs == "+" else value
        elif option.nargs == "+":
            values: list[str] = []
            while i < len(tokens) and _is_value(tokens[i]):
                values.append(tokens[i])
                i += 1
            if not values:
                problems.append(f"{raw} has no value")
            given = values
        elif i < len(tokens) and _is_value(tokens[i]):
            given = tokens[i]
            i += 1
        elif option.nargs == "?":
            given = True
        else:
            problems.append(f"{raw} has no value")
            continue
        if option.type == "_optional_type" and given in ("", "None"):
            options.pop(name, None)  # vLLM's optional_type: "" and "None" mean unset
        elif option.append:
            options[name] = [*options.get(name, []), given]
        else:
            options[name] = given
    for key, fields in dotted.items():
        option, problem = lookup(key)
        if option is None:
            problems.append(problem or f"cannot read {key}")
            continue
        options[option.name] = fields  # given last: replaces a JSON object given earlier
    refused_unseen: list[str] = []
    if any(UNSEEN in token for token in extra_positionals):
        refused_unseen.append("positional")
    for name in [name for name, value in options.items() if _holds_unseen(value)]:
        if name not in HARMLESS_OPTIONS:
            refused_unseen.append(name)
            shown = str(options.pop(name)).replace(UNSEEN, "")
            problems.append(
                f"--{name} {shown}, whose value is not known at preview (a secret or a value "
                "set at run time): only an option decided harmless whatever its value may take "
                "one (docs/reader-grammar.md lists them)"
            )
    if positional is not None and UNSEEN in positional:
        refused_unseen.append("model")
        problems.append(
            f"the model is {positional.replace(UNSEEN, '')}, whose value is not known at "
            "preview: the policies judge the model by its value"
        )
        positional = None
    load_format = options.get("load-format")
    if load_format is not None and load_format not in LOAD_FORMATS:
        problems.append(
            f"--load-format {load_format!r} loads weights another way than from the served "
            f"path (accepted: {', '.join(sorted(LOAD_FORMATS))})"
        )
    dtype = options.get("dtype")
    if dtype is not None and dtype not in DTYPES:
        problems.append(
            f"--dtype {dtype!r} holds the weights in another precision than the checkpoint's "
            "bf16, which the memory policy counts (accepted: "
            f"{', '.join(sorted(DTYPES))})"
        )
    for name, why in CODE_OPTIONS.items():
        if name in options and options[name] not in (False, None):
            shown = options[name]
            problems.append(
                f"--{name} {shown!r}: it {why}, which the policies cannot judge; remove it "
                "(docs/reader-grammar.md lists how each vLLM option is decided)"
            )
    for name, why in NO_HTTP_OPTIONS.items():
        if name in options and options[name] not in (False, None):
            problems.append(
                f"--{name}: it {why}; remove it: the server must serve the OpenAI HTTP API on "
                "its --port"
            )
    for name, why in REFUSED_OPTIONS.items():
        if name in options and options[name] not in (False, None):
            negation = f", or --no-{name}" if f"--no-{name}" in OPTIONS else ""
            problems.append(
                f"--{name}: it {why}; remove it (accepted: leaving it out{negation}; "
                "docs/reader-grammar.md lists how each vLLM option is decided)"
            )
    for name, (lowest, highest) in INT_OPTIONS.items():
        if name in options:
            number = _whole(options[name])
            if number is None or not lowest <= number <= highest:
                allowed = str(lowest) if lowest == highest else f"{lowest} to {highest}"
                problems.append(
                    f"--{name} {options[name]!r}: the policies judge one server on the "
                    f"resource's own accelerators (accepted: a whole number, {allowed})"
                )
    size, local = options.get("data-parallel-size"), options.get("data-parallel-size-local")
    if local is not None and _whole(local) != _whole(size or "1"):
        problems.append(
            f"--data-parallel-size-local {local!r} with --data-parallel-size {size or '1'!r}: "
            "the server waits for data-parallel ranks started elsewhere (accepted: the local "
            "size equal to --data-parallel-size)"
        )
    count = options.get("api-server-count")
    if count is not None and (human_int(count) is None or (human_int(count) or 0) < 1):
        problems.append(
            f"--api-server-count {count!r}: fewer than one API server runs the engine headless, "
            "so nothing listens on the port (accepted: a whole number of 1 or more)"
        )
    for name, accepted in CHOICE_OPTIONS.items():
        chosen = options.get(name)
        if chosen is not None and chosen not in accepted:
            problems.append(
                f"--{name} {chosen!r} loads or serves something the policies do not judge "
                f"(accepted: {', '.join(sorted(accepted))})"
            )
    problems += _speculative_problems(options.get("speculative-config"))
    if entry == "serve":
        model = positional
        options.pop("model", None)  # after the first --model, a later one loses to it
    else:
        given = options.pop("model", None)
        model = given if isinstance(given, str) else None
        if positional is not None:
            problems.append(
                f"a positional model {positional!r}, which the api_server entry point ignores "
                "(it serves --model); give --model"
            )
    if model is None:
        model = DEFAULT_MODEL  # what vLLM serves when it is given no model
    tokenizer = options.get("tokenizer")
    if tokenizer is not None and not (isinstance(tokenizer, str) and same_path(tokenizer, model)):
        problems.append(
            f"--tokenizer {tokenizer!r}: it reads a tokenizer from another path than the "
            f"served model {model!r}, which the policies cannot judge (accepted: leaving it "
            "out, or the served model's own path)"
        )
    cleaned = (p.replace(UNSEEN, "").replace(repr(UNSEEN)[1:-1], "") for p in problems)
    return ServeArgs(
        options=options,
        model=model,
        env=dict(env or {}),
        problems=tuple(dict.fromkeys(cleaned)),
        unseen=tuple(refused_unseen),
    )


def _holds_unseen(value: Any) -> bool:
    if isinstance(value, str):
        return UNSEEN in value
    if isinstance(value, Mapping):
        return any(_holds_unseen(k) or _holds_unseen(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_unseen(v) for v in value)
    return False


def same_path(a: str, b: str) -> bool:
    """Two spellings of one path or Hugging Face id: equal once empty and `.` segments are
    dropped (`/mnt/models/x/`, `/mnt/models/./x`); a `..` is never taken as equal (it
    depends on what the folders are)."""

    def segments(text: str) -> tuple[bool, list[str]] | None:
        parts = [part for part in text.split("/") if part not in ("", ".")]
        if ".." in parts or not parts:
            return None
        return text.startswith("/"), parts

    first = segments(a)
    return first is not None and first == segments(b)


def _whole(value: Any) -> int | None:
    """An `int` option as argparse's `int` reads it (`" 2"`, `"+2"`, `"0_2"`), else None."""
    if not isinstance(value, str):
        return None
    try:
        return int(value)
    except ValueError:
        return None


def device_count(options: Mapping[str, Any]) -> int | None:
    """The devices one server of these options uses on its node (vLLM 0.27.1: tensor x
    pipeline x prefill-context parallel per data-parallel rank, times the local ranks);
    None when a size is not a whole number."""
    sizes = []
    for name in ("tensor-parallel-size", "pipeline-parallel-size",
                 "prefill-context-parallel-size"):  # fmt: skip
        sizes.append(_whole(options[name]) if name in options else 1)
    local = options.get("data-parallel-size-local", options.get("data-parallel-size"))
    sizes.append(1 if local is None else _whole(local))
    if any(size is None for size in sizes):
        return None
    total = 1
    for size in sizes:
        total *= size or 0
    return total


def _speculative_problems(raw: Any) -> list[str]:
    spec = _json_value(raw) if isinstance(raw, str) else raw
    if not isinstance(spec, Mapping):
        return []  # not a JSON object: speculative-config-valid says so
    return [
        f"--speculative-config field {key!r} is not one the policies read (accepted: "
        f"{', '.join(sorted(SPECULATIVE_FIELDS))})"
        for key in spec
        if key not in SPECULATIVE_FIELDS
    ]


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


#: Folders a program may be named in: the image's own system folders. A program named by
#: another path (`/tmp/vllm`, `./vllm`, `/mnt/models/bin/vllm`) is whatever was put there,
#: not the `vllm` (or shell, or Python) its name says.
SYSTEM_BIN_DIRS = frozenset(
    {"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"}
)


def _program(token: str) -> str:
    """The name of the program a command word runs: a bare name (found on PATH, which the
    reader does not let a script change), or a path in :data:`SYSTEM_BIN_DIRS`."""
    folder, sep, name = token.rpartition("/")
    known = (
        name in ("vllm", "env", "nice", "tini", "tini-static", "docker", "podman", "printf")
        or name in SHELLS
        or PYTHONS.match(name) is not None
        or name in _WRAPPERS
        or name in _PREFIX_COMMANDS
        or name in NON_SERVING_PROGRAMS
        or name in _HARMLESS
    )
    # A name the reader does not interpret is refused (or ignored) as an unknown program.
    if sep and known and folder not in SYSTEM_BIN_DIRS:
        raise ReadError(
            f"the program {token!r} is named by a path outside the system folders "
            f"({', '.join(sorted(SYSTEM_BIN_DIRS))}), so what it is cannot be known from its "
            "name; name it without a path"
        )
    return name


def _strip_prefixes(argv: list[str], env: dict[str, str]) -> list[str]:
    """Drop `exec`, `env X=Y`, `X=Y`, `nohup`, `nice -n 5`, `tini --` in front of a command."""
    args = list(argv)
    while args:
        head = _program(args[0])
        if _ASSIGNMENT.match(args[0]):
            name, _, value = args[0].partition("=")
            env[name] = value
            args = args[1:]
        elif head == "env":
            args = _env(args[1:], env)
        elif head == "builtin":
            raise ReadError(
                f"`builtin {' '.join(args[1:2])}` runs only a shell builtin: `builtin vllm` runs "
                "nothing, so a server behind it never starts"
            )
        elif head in _PREFIX_COMMANDS:
            args = args[1:]
            while args and args[0].startswith("-") and head in ("exec", "time", "command"):
                if head == "command" and re.fullmatch(r"-[pvV]*[vV][pvV]*", args[0]):
                    raise ReadError(
                        f"`command {args[0]}` prints how a name would be found and runs "
                        "nothing, so a server behind it never starts"
                    )
                if args[0] == "--":
                    args = args[1:]
                    break
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
                if head == "sudo" and (
                    option in ("--login", "--shell")
                    or re.fullmatch(r"-[A-Za-z]*[is][A-Za-z]*", option)
                ):
                    raise ReadError(
                        f"sudo {option} runs the command through a shell that reads start-up "
                        "files the reader cannot see"
                    )
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
        if token == "-":  # GNU env: `-` is `-i`
            env.clear()
            args = args[1:]
            continue
        if not token.startswith("-"):
            return args
        args = args[1:]
        split: str | None = None
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            if len(name) >= 3 and "--ignore-environment".startswith(name):
                env.clear()
            elif len(name) >= 4 and "--unset".startswith(name):
                if not eq:
                    if not args:
                        raise ReadError(f"env {token} without a name")
                    value, args = args[0], args[1:]
                env.pop(value, None)
            elif len(name) >= 3 and "--split-string".startswith(name):
                if not eq:
                    if not args:
                        raise ReadError(f"env {token} without a string")
                    value, args = args[0], args[1:]
                split = value
            elif not eq and len(name) >= 3 and any(o.startswith(name) for o in _ENV_VALUE_LONG):
                args = args[1:]
        else:
            for index, letter in enumerate(token[1:], start=2):
                if letter == "i":
                    env.clear()
                if letter == "S" or letter in _ENV_VALUE_SHORT:
                    attached = token[index:]
                    if not attached:
                        if not args:
                            raise ReadError(f"env {token} without a value")
                        attached, args = args[0], args[1:]
                    if letter == "S":
                        split = attached
                    elif letter == "u":
                        env.pop(attached, None)
                    break
        if split is not None:
            args = [*_split_string(split, env), *args]
    return args


def _split_string(text: str, env: Mapping[str, str]) -> list[str]:
    """The words of an `env -S` string (one simple command; `${NAME}` from the env)."""
    if "\\" in text:
        # env's own escapes (`\_` separates words, `\c` ends the string) are not a shell's.
        raise ReadError(f"env -S {text!r} uses escape sequences the reader does not interpret")
    try:
        commands = lex(text)
    except ShellError as exc:
        raise ReadError(f"env -S {text!r}: {exc}") from None
    if len(commands) > 1 or (commands and commands[0].redirections):
        raise ReadError(f"env -S {text!r} holds shell operators env does not interpret")
    try:
        return [_resolve(w, env, strict=True) for w in (commands[0].words if commands else [])]
    except ReadError:
        raise ReadError(f"env -S {text!r} uses variables the reader cannot resolve") from None


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
    #: Environment variables with values the reader knows (literal).
    env: dict[str, str]
    #: The container image a `docker run` starts it in (None: not started by `docker run`).
    image: str | None = None
    #: Every environment variable vLLM is given, values known or not (`docker run -e NAME`).
    env_names: frozenset[str] = frozenset()
    #: Host ports a `docker run` publishes (`-p 80:8000`), as written.
    published: tuple[str, ...] = ()
    #: Started by `docker run --privileged` (every device and capability of the host).
    privileged: bool = False
    #: "serve" (`vllm serve`, `vllm.entrypoints.cli.main serve`) or "api_server"
    #: (`python -m vllm.entrypoints.openai.api_server`), whose parsing differs.
    entry: str = "serve"


def _launch(argv: list[str], env: Mapping[str, str]) -> Launch:
    known = {k: v for k, v in env.items() if v != UNKNOWN}
    return Launch(list(argv), known, env_names=frozenset(env))


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
        if argv and (argv[0] == "serve" or _runs_program(argv[0])):
            # Docker and Kubernetes append the arguments to the ENTRYPOINT.
            raise ReadError(
                f"arguments starting with {argv[0]!r} given to an official vLLM image's "
                "entrypoint, which is `vllm serve` (vLLM 0.27.1's docker/Dockerfile: "
                f'`ENTRYPOINT ["vllm", "serve"]`): vLLM would run `vllm serve {argv[0]} '
                "...` and refuse it; give only vLLM's arguments, or the command itself "
                "(`vllm serve ...` as the command, `--entrypoint=vllm` for docker run)"
            )
        return [_launch(list(argv), env)]
    args = _strip_prefixes(argv, env)
    if not args:
        return []
    head = _program(args[0])
    if head == "vllm":
        if len(args) > 1 and args[1] == "serve":
            return [_launch(args[2:], env)]
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
        i += 2 if args[i] in _PYTHON_VALUE_OPTIONS else 1
    if i >= len(args):
        return []
    if args[i] == "-m" and i + 1 < len(args):
        module = args[i + 1]
        rest = args[i + 2 :]
        if module in OPENAI_MODULES:
            return [replace(_launch(rest, env), entry="api_server")]
        if module in CLI_MODULES:
            if rest and rest[0] == "serve":
                return [_launch(rest[1:], env)]
            if mentions_vllm(rest):
                raise ReadError(f"`python -m {module}` without `serve`")
            return []
        if module == "vllm":
            raise ReadError(
                "`python -m vllm` runs nothing: vLLM 0.27.1 has no vllm/__main__.py; use "
                "`vllm serve` or `python -m vllm.entrypoints.cli.main serve`"
            )
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
        if depth > 0 and (
            token in ("--login", "--rcfile", "--init-file")
            or re.fullmatch(r"-[a-zA-Z]*[li][a-zA-Z]*", token)
        ):
            raise ReadError(
                f"{args[0]} {token}: a login or interactive shell reads start-up files "
                "the reader cannot see"
            )
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
        if depth > 0:
            raise ReadError(
                f"a shell that reads its script from a file or its input "
                f"({shlex.join(args[: i + 1])}), which the reader cannot see"
            )
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
    privileged = False
    host_network = False
    host = dict(env)
    env = {}
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        token = args[i]
        if token == "--":
            i += 1
            break
        items: list[tuple[str, str, str]]
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            takes_value = name not in _DOCKER_FLAGS
            if takes_value and not eq:
                if i + 1 >= len(args):
                    raise ReadError(f"docker run {token} has no value")
                value = args[i + 1]
                i += 1
            items = [(name, value, token if eq or not takes_value else f"{token} {value}")]
        else:
            items, i = _docker_cluster(args, i)
        for name, value, shown in items:
            _docker_option(name, value, shown, env, host)
            if name == "--privileged":
                privileged = True
            elif name == "--entrypoint":
                entrypoint = value
            elif name in ("--net", "--network"):
                host_network = True  # _docker_option accepts only the host's network
        i += 1
    if i >= len(args):
        raise ReadError("docker run without an image")
    image = args[i]
    rest = args[i + 1 :]
    launches = _in_image(image, rest, entrypoint, env, depth)
    if launches and not host_network:
        # Docker's default is its bridge network: without a published port (refused above)
        # nothing on the host's port reaches the server.
        raise ReadError(
            f"docker run of {image} without --net=host: on Docker's default bridge network "
            "vLLM's --port is not a port of the host, so the endpoint, health checks and "
            "firewall reach nothing (accepted: --net=host)"
        )
    return [
        replace(launch, image=launch.image or image, privileged=launch.privileged or privileged)
        for launch in launches
    ]


def _docker_cluster(args: list[str], i: int) -> tuple[list[tuple[str, str, str]], int]:
    """A short-option word of `docker run` as Docker's pflag reads it: `-dit` (three
    flags), `-dp 80:8000`, `-itp80:8000`, `-eNAME=value`, `-e=NAME=value` (flags, then one
    option whose value is the rest of the word or the next word). Returns (option, value,
    as written) per option and the index of the word last consumed."""
    token = args[i]
    items: list[tuple[str, str, str]] = []
    k = 1
    while k < len(token):
        letter = token[k]
        takes_value = DOCKER_SHORT_OPTIONS.get(letter)
        if takes_value is None:
            raise ReadError(
                f"docker run {token}: -{letter} is not a `docker run` short option the reader "
                f"knows (Docker's: {' '.join('-' + c for c in sorted(DOCKER_SHORT_OPTIONS))})"
            )
        if not takes_value:
            if token[k + 1 : k + 2] == "=":
                raise ReadError(
                    f"docker run {token}: a value given to the flag -{letter}; write -{letter} "
                    "alone"
                )
            items.append(("-" + letter, "", token))
            k += 1
            continue
        attached = token[k + 1 :]
        if attached:
            value = attached[1:] if attached.startswith("=") else attached
            items.append(("-" + letter, value, token))
        else:
            if i + 1 >= len(args):
                raise ReadError(f"docker run {token} has no value")
            i += 1
            items.append(("-" + letter, args[i], f"{token} {args[i]}"))
        break
    return items, i


def _docker_option(
    name: str, value: str, shown: str, env: dict[str, str], host: dict[str, str]
) -> None:
    """Judge one `docker run` option (Docker's short options spelt as written)."""
    refused_host = ("--env-file", "-v", "--volume", "--mount", "--volumes-from")
    publishing = ("-p", "--publish", "-P", "--publish-all", "--expose")
    if name in publishing:
        raise ReadError(
            f"docker run {shown} publishes a container port on the host, which the firewall "
            "policy does not follow; run with --net=host and vLLM's --port"
        )
    if name in refused_host:
        raise ReadError(
            f"docker run {name}: environment or files from the host the reader cannot see"
        )
    if name not in DOCKER_OPTIONS:
        raise ReadError(
            f"docker run {name}: an option the reader does not accept (it may give the "
            "container host files, namespaces, devices, capabilities or name resolution); "
            f"accepted: {', '.join(sorted(DOCKER_OPTIONS))}"
        )
    if name in ("--net", "--network") and value not in DOCKER_NETWORKS:
        raise ReadError(
            f"docker run {name}={value}: the port policies read vLLM's --port as the host's "
            "port, which holds only on the host's network (accepted: --net=host)"
        )
    if name in ("-e", "--env"):
        key, sep, literal = value.partition("=")
        env[key] = literal if sep else host.get(key, UNKNOWN)
    elif name == "--entrypoint" and re.search(r"\s", value):
        raise ReadError(f"docker run --entrypoint {value!r}: one program, no arguments")


def _in_image(
    image: str, rest: list[str], entrypoint: str | None, env: dict[str, str], depth: int
) -> list[Launch]:
    if entrypoint is not None:
        return _launches([entrypoint, *rest], env, image_runs_vllm=False, depth=depth + 1)
    if is_vllm_image(image):
        # vllm-openai: Docker appends what follows the image to its ENTRYPOINT, `vllm serve`
        # (a program or `serve` there is refused). vllm-tpu: what follows is a command.
        if image_runs_vllm_serve(image):
            return _launches(rest, env, image_runs_vllm=True, depth=depth + 1)
        if rest and _runs_program(rest[0]):
            return _launches(rest, env, image_runs_vllm=False, depth=depth + 1)
        raise ReadError(
            f"docker run {image}: this image has no `vllm serve` entrypoint (tpu-inference's "
            'docker/Dockerfile ends with CMD ["/bin/bash"]; its docker/entrypoint.sh runs '
            "the arguments as a command, or vLLM with $VLLM_ARGS when there are none), so what "
            "follows the image must be the command: `vllm serve MODEL ...`, or give "
            "--entrypoint=vllm and `serve MODEL ...`"
        )
    if mentions_vllm(rest):
        raise ReadError(
            f"docker run {image}: what this image's own entrypoint does with its arguments is "
            "not known (only the official vllm/vllm-openai image's, `vllm serve`, is known; "
            "vllm/vllm-tpu runs the command that follows it); give --entrypoint"
        )
    return []


def _runs_program(word: str) -> bool:
    """A first word that names a program the reader follows (vLLM, Python, a shell)."""
    base = _basename(word)
    return base == "vllm" or base in SHELLS or bool(PYTHONS.match(base))


#: The official vLLM images (Docker Hub's `vllm` namespace), whose entrypoint is known.
OFFICIAL_VLLM_IMAGES = frozenset({"docker.io/vllm/vllm-openai", "docker.io/vllm/vllm-tpu"})


#: Official images whose ENTRYPOINT is `vllm serve` (vLLM 0.27.1's docker/Dockerfile:
#: `ENTRYPOINT ["vllm", "serve"]`): what follows the image is appended to it.
ENTRYPOINT_VLLM_SERVE = frozenset({"docker.io/vllm/vllm-openai"})


def image_runs_vllm_serve(image: str) -> bool:
    """An official image whose ENTRYPOINT is `vllm serve`: its arguments are vLLM's."""
    return _image_name(image) in ENTRYPOINT_VLLM_SERVE


def is_vllm_image(image: str) -> bool:
    """An official vLLM image, named by its full reference (registry and namespace): a
    repository elsewhere that is merely called `vllm-openai` is not one."""
    return _image_name(image) in OFFICIAL_VLLM_IMAGES


def _image_name(image: str) -> str:
    """`vllm/vllm-openai:v1` -> `docker.io/vllm/vllm-openai` (registry and repository)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    first, sep, _ = name.partition("/")
    if not sep or not ("." in first or ":" in first or first == "localhost"):
        name = "docker.io/" + name
    for prefix in ("index.docker.io/", "registry-1.docker.io/"):
        if name.startswith(prefix):
            name = "docker.io/" + name[len(prefix) :]
    return name


def split_script(script: str) -> list[list[str]]:
    """A shell script's simple commands, each as its words as written (quotes removed).

    Raises ReadError for what is outside the reader's grammar (:mod:`serving.launch.shell_words`).
    """
    try:
        commands = lex(script)
    except ShellError as exc:
        raise ReadError(str(exc)) from None
    return [[_raw_text(w) for w in c.words] for c in commands]


def _raw_text(word: Word) -> str:
    return "".join(p.text for p in word.parts)


#: A variable whose value the reader does not know (a secret reference, a value unknown at
#: preview): it may be passed on by name, never read into vLLM's arguments.
UNKNOWN = "\x00unknown"
#: Wraps an expansion whose value is not known at preview but stays one word (a double-quoted
#: `"$KEY"` in a script, the kubelet's `$(KEY)` of a declared variable): `\x00$KEY\x00`.
#: Only an option decided harmless whatever its value may hold one (:func:`parse_serve_args`);
#: anywhere else the launch is refused (:func:`holds_unseen_only_in_arguments`).
UNSEEN = "\x00"


def unseen(text: str) -> str:
    """An expansion as written, marked as a value not known at preview."""
    return f"{UNSEEN}{text}{UNSEEN}"


def holds_unseen_only_in_arguments(words: Sequence[str], launches: Sequence[Launch]) -> bool:
    """Every unseen value of `words` reached a launch's vLLM arguments (not its program,
    image, environment or a wrapper's option) as the value of an option decided harmless
    whatever its value (:data:`HARMLESS_OPTIONS`)."""
    given = sum(word.count(UNSEEN) for word in words)
    kept = sum(arg.count(UNSEEN) for launch in launches for arg in launch.argv)
    return given == kept and not any(
        UNSEEN in (launch.image or "")
        or any(UNSEEN in v for v in launch.env.values())
        or parse_serve_args(launch.argv, entry=launch.entry).unseen
        for launch in launches
    )


#: Builtins and keywords that change values or control flow in ways the reader does not
#: follow; each is refused by name.
_REFUSED_WORDS: dict[str, str] = {
    **{k: "a shell keyword (conditionals, loops and functions are not read)" for k in (
        "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
        "esac", "select", "function", "{", "}", "[[", "]]", "!", "coproc")},
    **{k: "a builtin that sets variables the reader does not follow" for k in (
        "declare", "typeset", "local", "let", "read", "mapfile", "readarray", "getopts",
        "shift")},
    **{k: "a builtin that runs code the reader cannot see" for k in (
        "eval", "source", ".", "alias", "trap", "enable", "shopt", "hash",
        "fc", "jobs", "fg", "bg", "disown", "ulimit", "umask")},
}  # fmt: skip
#: Programs a script may run besides vLLM: they start no server and fetch no code.
_HARMLESS = frozenset(
    {"true", "false", ":", "test", "[", "echo", "sleep", "wait", "mkdir", "nvidia-smi", "tee",
     "date", "nproc", "df", "free", "ls", "sync", "cd"}
)  # fmt: skip
#: `docker` subcommands that start nothing.
_DOCKER_HARMLESS = frozenset({"pull", "inspect", "rm", "stop", "kill", "logs", "ps", "images"})


@dataclass
class _Vars:
    """A shell's variables: value (UNKNOWN when not known) and which are exported."""

    values: dict[str, str]
    exported: set[str]

    def environment(self) -> dict[str, str]:
        return {k: v for k, v in self.values.items() if k in self.exported}


def _resolve(
    word: Word, variables: Mapping[str, str], *, strict: bool, allow_unseen: bool = False
) -> str:
    """A word's text after expansion. `strict`: every variable must be known, and an
    unquoted one must not word-split or glob (a glob or empty value is refused too).
    `allow_unseen`: a double-quoted variable whose value is not known becomes an
    :func:`unseen` value (it stays one word)."""
    out: list[str] = []
    for part in word.parts:
        if part.name is None:
            if strict and not part.quoted and part.text in GLOB_CHARS:
                raise ReadError(
                    f"the word {_raw_text(word)!r} holds an unquoted glob ({part.text})"
                )
            out.append(part.text)
            continue
        value = variables.get(part.name)
        if value is None or value == UNKNOWN:
            if strict and allow_unseen and part.quoted:
                out.append(unseen(part.text))
                continue
            if strict:
                quote = (
                    ""
                    if part.quoted
                    else f', double-quoted ("{part.text}") so the shell keeps it one word'
                )
                raise ReadError(
                    f"{part.text} in {_raw_text(word)!r} has no value the reader knows "
                    "(vLLM's arguments must be literal or set earlier in the same script; only "
                    "an option decided harmless whatever its value, such as --api-key, may "
                    f"take a value unknown at preview{quote}; the API key is best given as "
                    "VLLM_API_KEY from a secret)"
                )
            out.append(part.text)
            continue
        if strict and not part.quoted:
            if value == "" or re.search(r"[\s]", value):
                raise ReadError(
                    f"the unquoted {part.text} ({value!r}) is split into words by the shell; "
                    f'quote it ("{part.text}")'
                )
            if any(c in GLOB_CHARS for c in value):
                raise ReadError(f"the unquoted {part.text} ({value!r}) is a glob")
        out.append(value)
    return "".join(out)


def _is_assignment(word: Word) -> bool:
    """`NAME=...` as the shell sees one: the name and the `=` unquoted and literal."""
    head = ""
    for part in word.parts:
        if part.name is not None or part.quoted:
            return False
        head += part.text
        if "=" in head:
            return bool(_ASSIGNMENT.match(head))
    return False


#: Variables the shell itself reads: each changes how the script runs (PS4 is expanded, its
#: command substitutions run, for every command under `set -x`; PROMPT_COMMAND, PS0-PS3 run or
#: print code; SHELLOPTS/BASHOPTS set options; GLOBIGNORE, EXECIGNORE, FUNCNEST, HOME, CDPATH,
#: OLDPWD change expansion, lookup or `cd`; BASH_XTRACEFD, TMOUT ...). An assignment to one
#: is refused, exported or not.
SHELL_VARIABLES = frozenset(
    {"IFS", "PATH", "BASH_ENV", "ENV", "CDPATH", "PS0", "PS1", "PS2", "PS3", "PS4",
     "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE", "EXECIGNORE", "FIGNORE",
     "FUNCNEST", "HOME", "OLDPWD", "PWD", "BASH_XTRACEFD", "TMOUT", "BASH_COMPAT",
     "BASH_LOADABLES_PATH", "POSIXLY_CORRECT", "HOSTFILE", "INPUTRC", "TIMEFORMAT",
     "BASH_ARGV0", "SHELL", "LD_PRELOAD", "LD_LIBRARY_PATH"}
)  # fmt: skip


def _assign(text: str, word: Word, variables: _Vars) -> tuple[str, str]:
    """`NAME=value` (no word splitting or globbing in an assignment)."""
    name = text.partition("=")[0]
    if name in SHELL_VARIABLES:
        raise ReadError(
            f"an assignment to {name}, a variable the shell itself reads: it changes how the "
            "script runs (PS4 runs its command substitutions under `set -x`)"
        )
    rest = Word(_after_equals(word))
    value = _resolve(rest, variables.values, strict=False)
    if any(p.name and variables.values.get(p.name, UNKNOWN) == UNKNOWN for p in rest.parts):
        value = UNKNOWN
    return name, value


def _after_equals(word: Word) -> tuple[Part, ...]:
    parts: list[Part] = []
    seen = False
    for part in word.parts:
        if seen:
            parts.append(part)
        elif part.name is None and "=" in part.text and not part.quoted:
            seen = True
            tail = part.text.split("=", 1)[1]
            if tail:
                parts.append(Part(tail, part.quoted))
        elif part.name is None and not part.quoted:
            continue
    return tuple(parts)


#: Files a script may write (a redirection's or `tee`'s target): the null device, the
#: standard streams, and log files (`NAME.log` directly under /var/log or /tmp). Any other
#: file may be read back by what starts next: a `sitecustomize.py` or `.pth` file Python
#: imports, a config.json in a checkpoint folder, a start-up file of a shell.
_WRITABLE = re.compile(
    r"/dev/(null|stdout|stderr)|/(var/log|tmp)/[A-Za-z0-9_-][A-Za-z0-9._-]*\.log"
)


def _check_write(op: str, target: str, what: str) -> None:
    """Refuse a redirection or `tee` target other than the ones in :data:`_WRITABLE`."""
    if op.endswith("&") and re.fullmatch(r"\d+|-", target):
        return  # `2>&1`, `>&2`, `<&0`, `>&-`: a copy or close of a descriptor
    if op.lstrip("0123456789") == "<":
        if target == "/dev/null":
            return
        raise ReadError(f"{what} reads {target!r} into a command (`{op}`); only /dev/null is read")
    if not _WRITABLE.fullmatch(target):
        raise ReadError(
            f"{what} writes {target!r} (`{op}`), a file what starts next may read back as code "
            "or data (Python's sitecustomize.py or .pth files, a checkpoint's config.json, a "
            "shell's start-up files); a script writes only /dev/null, /dev/stdout, "
            "/dev/stderr and NAME.log files under /var/log or /tmp"
        )


#: `hf download` options a script may give: they choose what is fetched into the Hugging
#: Face cache, never where files land (`--local-dir`, `--cache-dir`, or an abbreviation of
#: them, would write files anywhere: a `vllm/__init__.py` in the folder `python -m` imports
#: from first, a package into site-packages).
_DOWNLOAD_OPTIONS = frozenset(
    {"--revision", "--include", "--exclude", "--quiet", "-q", "--max-workers", "--repo-type"}
)


def _check_download(program: list[str]) -> None:
    for word in program[2:]:
        if word.startswith("-") and word.split("=", 1)[0] not in _DOWNLOAD_OPTIONS:
            raise ReadError(
                f"`{program[0]} download {word}`: a script's download writes only into the "
                "Hugging Face cache (accepted options: "
                f"{', '.join(sorted(_DOWNLOAD_OPTIONS))})"
            )


def _script(script: str, env: Mapping[str, str], depth: int) -> list[Launch]:
    """Every `vllm serve` a script starts, read by the grammar in docs/reader-grammar.md."""
    if depth > 8:
        raise ReadError("commands nested more than 8 deep")
    try:
        commands = lex(script)
    except ShellError as exc:
        raise ReadError(str(exc)) from None
    variables = _Vars(dict(env), set(env))
    found: list[Launch] = []
    writes: list[tuple[str, str]] = []
    ended: str | None = None
    # Each command's pipeline: whether that pipeline is an operand of && / || (so whether it
    # runs depends on another command), and whether it has more than one command (so each
    # runs in a subshell, where `exec` and `exit` end nothing but themselves).
    in_list: list[bool] = []
    in_pipe: list[bool] = []
    start = 0
    for index, command in enumerate(commands):
        if command.end in ("|", "|&"):
            continue
        group = commands[start : index + 1]
        listed = group[0].after in ("&&", "||") or command.end in ("&&", "||")
        in_list += [listed] * len(group)
        in_pipe += [len(group) > 1] * len(group)
        start = index + 1
    for index, command in enumerate(commands):
        shown = " ".join(_raw_text(w) for w in command.words)[:80]
        if ended is not None:
            raise ReadError(f"`{shown}` comes after {ended} and never runs")
        # Targets as the shell expands them now; judged once the whole script is read.
        writes += [
            (op, _resolve(target, variables.values, strict=True))
            for op, target in zip(command.redirections, command.targets, strict=True)
        ]
        if not command.words:
            continue
        texts = [_resolve(w, variables.values, strict=False) for w in command.words]
        first = command.words[0]
        if first.literal is None:
            raise ReadError(f"a command whose name is a variable (`{shown}`)")
        head = texts[0]
        if head in _REFUSED_WORDS:
            raise ReadError(f"`{head}`: {_REFUSED_WORDS[head]}")
        for word in command.words:
            if _raw_text(word).startswith(("IFS=", "PATH=", "BASH_ENV=", "ENV=", "CDPATH=")):
                name = _raw_text(word).partition("=")[0]
                raise ReadError(
                    f"an assignment to {name} changes how the shell splits words, finds "
                    "programs or starts shells"
                )
        if all(_is_assignment(w) for w in command.words):
            for word in command.words:
                name, value = _assign(_raw_text(word), word, variables)
                variables.values[name] = value
            continue
        if head in ("export", "readonly", "unset"):
            _declare(head, command.words[1:], variables)
            continue
        if head == "set":
            _set_options(texts[1:])
            continue
        conditional = in_list[index] or in_pipe[index]
        if head == "exit":
            ended = None if conditional else "`exit`"
            continue
        launches = _command(command, texts, variables, depth)
        if launches and in_list[index]:
            raise ReadError(
                f"`{shown}` is part of an && / || list: whether it runs depends on another "
                "command; start vLLM on a line of its own"
            )
        if head == "exec" and len(texts) > 1 and not conditional and command.end != "&":
            # `exec PROGRAM` replaces the shell; `exec 2>file` (no program) only redirects.
            ended = f"`exec {texts[1]}`"
        found += launches
    # Redirections last, once every command's own constructs were read (so that `read M < f`
    # or `sh < f` is refused by name first).
    for op, target in writes:
        _check_write(op, target, "a redirection")
    return found


def _declare(head: str, words: list[Word], variables: _Vars) -> None:
    for word in words:
        text = _raw_text(word)
        if text.startswith(("-", "+")):
            raise ReadError(f"`{head} {text}`: options of {head} are not read")
        if word.parts and word.parts[0].name is not None:
            raise ReadError(f"`{head} {text}`: a variable name that is itself a variable")
        if text.split("=", 1)[0] in SHELL_VARIABLES:
            raise ReadError(
                f"`{head} {text}`: {text.split('=', 1)[0]} is a variable the shell itself reads "
                "(unset PATH, and no program is found)"
            )
        if head == "unset":
            variables.values.pop(text, None)
            variables.exported.discard(text)
            continue
        if "=" in text:
            name, value = _assign(text, word, variables)
        else:
            name, value = text, variables.values.get(text, UNKNOWN)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ReadError(f"`{head} {text}`: not a variable name")
        variables.values[name] = value
        if head == "export":
            variables.exported.add(name)


#: `set` options the reader follows: none changes whether or how a command runs, or what
#: reaches its environment. Refused among others: `-n` (read, run nothing), `-t` (exit after
#: one command), `-a`/allexport (every assignment is exported), `-k` (assignments anywhere in
#: a command go to its environment), `-T`/`-E` (traps), `-p`, `-m`, `posix`.
SET_FLAGS = frozenset("euxvCfhPB")
SET_LONG = frozenset(
    {"errexit", "nounset", "pipefail", "xtrace", "verbose", "noclobber", "noglob", "hashall",
     "physical", "braceexpand"}
)  # fmt: skip


def _set_options(words: list[str]) -> None:
    i = 0
    while i < len(words):
        word = words[i]
        if not re.fullmatch(r"[-+][a-zA-Z]+", word):
            raise ReadError(f"`set {word}` changes the positional parameters")
        flags = word[1:]
        # `-o NAME` (also at the end of a cluster: `-euo pipefail`) names a long option.
        long = flags.endswith("o")
        for flag in flags[:-1] if long else flags:
            if flag not in SET_FLAGS:
                accepted = f"-{''.join(sorted(SET_FLAGS))}, -o {', -o '.join(sorted(SET_LONG))}"
                raise ReadError(
                    f"`set {word}`: the option -{flag} changes whether or how commands run "
                    f"(accepted: {accepted})"
                )
        if long:
            name = words[i + 1] if i + 1 < len(words) else ""
            if name not in SET_LONG:
                raise ReadError(
                    f"`set {word} {name}`: the option changes whether or how commands run "
                    f"(accepted: -o {', -o '.join(sorted(SET_LONG))})"
                )
        i += 2 if long else 1


def _command(command: Command, texts: list[str], variables: _Vars, depth: int) -> list[Launch]:
    """The launches of one simple command of a script (prefix assignments applied)."""
    env = variables.environment()
    words = list(command.words)
    while words and _is_assignment(words[0]):
        name, value = _assign(_raw_text(words[0]), words[0], variables)
        env[name] = value
        words = words[1:]
    if not words:
        return []
    loose = [_resolve(w, variables.values, strict=False) for w in words]
    if _ASSIGNMENT.match(loose[0]):
        # Quoted or escaped, `NAME=value` is no assignment: the shell runs a program so named.
        raise ReadError(f"a program the reader does not know ({loose[0]!r}, a quoted assignment)")
    program = _strip_prefixes(list(loose), dict(env))
    head = _program(program[0]) if program else ""
    if not program:
        return []
    if head in _REFUSED_WORDS:
        raise ReadError(f"`{head}`: {_REFUSED_WORDS[head]}")
    if head == "tee":
        for arg in program[1:]:
            if arg in ("-a", "--append", "-i", "--ignore-interrupts", "-p"):
                continue
            _check_write(">", arg, "`tee`")
        return []
    if head in _HARMLESS:
        return []
    if head == "printf":
        if any(t.startswith("-v") for t in program[1:]):
            raise ReadError("`printf -v` sets a variable the reader does not follow")
        return []
    if head in ("docker", "podman") and len(program) > 1 and program[1] in _DOCKER_HARMLESS:
        return []
    if head in NON_SERVING_PROGRAMS and program[1:2] == ["download"]:
        _check_download(program)
        return []
    launchers = {"vllm", "env", "docker", "podman", *SHELLS}
    if not (head in launchers or PYTHONS.match(head)):
        raise ReadError(
            f"a program the reader does not know ({program[0]!r}); a script may run vLLM, "
            "`docker run`, and the programs listed in docs/reader-grammar.md"
        )
    try:
        strict = [_resolve(w, variables.values, strict=True) for w in words]
    except ReadError as exc:
        # A double-quoted value unknown at preview may only reach a harmless vLLM option.
        strict = [_resolve(w, variables.values, strict=True, allow_unseen=True) for w in words]
        try:
            launches = _launches(strict, env, image_runs_vllm=False, depth=depth + 1)
        except ReadError:
            raise exc from None
        if not launches or not holds_unseen_only_in_arguments(strict, launches):
            raise exc from None
        return launches
    launches = _launches(strict, env, image_runs_vllm=False, depth=depth + 1)
    if not launches and (PYTHONS.match(head) or head in ("docker", "podman")):
        raise ReadError(
            f"`{shlex.join(program[:3])}` runs a program the reader cannot see into (no "
            "`vllm serve` in it)"
        )
    return launches


def script_launches(script: str, env: Mapping[str, str] | None = None) -> list[Launch]:
    """Every `vllm serve` a startup script starts (directly or through `docker run`)."""
    return _script(script, dict(env or {}), 0)


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
