"""Read the `vllm serve` a container or a TPU launch document starts, in the one shape the
package renders, and vLLM's arguments with a real `argparse` parser built from vLLM's own.

Pure: no Pulumi import. docs/accepted-shapes.md is the reference: the one accepted shape
(`["vllm", "serve"]` with an argument list, or the same two lists in the TPU launch document),
every other shape refused by :func:`serve_args` naming it, and the arguments read by a parser
built from the snapshot of vLLM 0.27.1's `vllm serve` parser (`serving/data/vllm-0.27.1.json`,
written by scripts/vllm_contract.py), refusing what argparse refuses, an option given twice
(argparse would keep the last one silently) and spellings the package never renders.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from serving.catalog.models import KV_DTYPE_BYTES

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "vllm-0.27.1.json"
_SERVE: dict[str, dict[str, Any]] = json.loads(SNAPSHOT.read_text())["serve_options"]
#: The model and port vLLM uses when given none (its parser's defaults).
DEFAULT_MODEL = str(_SERVE["--model"]["default"])
DEFAULT_PORT = int(_SERVE["--port"]["default"])
#: The command the package renders, and the shape every launch must have.
SERVE_COMMAND = ("vllm", "serve")
ACCEPTED = (
    'the accepted shape is the command ["vllm", "serve"] with the model and `--option=value` '
    "arguments as a list (docs/accepted-shapes.md)"
)


@dataclass(frozen=True)
class Option:
    """One option string of `vllm serve` (canonical name: the destination with dashes)."""

    name: str
    takes_value: bool


OPTIONS: dict[str, Option] = {
    k: Option(str(v["dest"]).replace("_", "-"), bool(v["takes_value"])) for k, v in _SERVE.items()
}


def _words(text: str) -> list[str]:
    return text.split()


class ReadError(ValueError):
    """A launch outside the accepted shape, or arguments vLLM's parser refuses."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        shown = message if len(message) <= 240 else message[:237] + "..."
        raise ReadError(f"vLLM 0.27.1's parser refuses the arguments: {shown}")


class _Seen(argparse.Namespace):
    """Records every destination set twice: argparse keeps the last value without a word."""

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "_twice", [])

    def __setattr__(self, name: str, value: Any) -> None:
        if name in vars(self) and name not in _APPEND:
            self._twice.append(name)
        super().__setattr__(name, value)


def _parser() -> _Parser:
    parser = _Parser(prog="vllm serve", add_help=False, argument_default=argparse.SUPPRESS)
    parser.add_argument("model_tag", nargs="?")
    for string, spec in _SERVE.items():
        kwargs: dict[str, Any] = {"dest": spec["dest"]}
        if not spec["takes_value"]:
            kwargs.update(action="store_const", const=not spec.get("negation"))
        elif "Append" in str(spec["action"]):
            kwargs.update(action="append")
        else:
            kwargs.update(nargs=spec["nargs"], const=True if spec["nargs"] == "?" else None)
            if spec["choices"]:
                kwargs["choices"] = [str(c) for c in spec["choices"]]
        parser.add_argument(string, **kwargs)
    return parser


_APPEND = frozenset(v["dest"] for v in _SERVE.values() if "Append" in str(v["action"]))
_PARSER = _parser()
_OPTIONAL = frozenset(v["dest"] for v in _SERVE.values() if v["type"] == "_optional_type")

#: Options that bring code, files or models the policies cannot judge into the server.
CODE_OPTIONS = _words(
    "middleware tool-parser-plugin worker-extension-cls worker-cls logits-processors "
    "lora-modules hf-config-path model-loader-extra-config config trust-remote-code "
    "hf-overrides quantization-config model-class-overrides io-processor-plugin "
    "reasoning-parser-plugin kv-transfer-config ec-transfer-config weight-transfer-config "
    "additional-config download-dir allowed-local-media-path trust-request-chat-template "
    "default-mm-loras log-config-file mm-encoder-fp8-scale-path mm-encoder-fp8-scale-save-path "
    "otlp-traces-endpoint tool-server kv-events-config scheduler-cls profiler-config "
    "compilation-config structured-outputs-config num-gpu-blocks-override spec-model "
    "spec-method spec-tokens ssl-keyfile ssl-certfile ssl-ca-certs enable-prompt-embeds "
    "enable-mm-embeds"
)
#: Options after which the server is not the OpenAI HTTP server on `--port` the policies judge
#: (headless, gRPC, a Unix socket, per-rank API servers) or not the one they count (logs
#: prompts, sleeps, LoRA, a KV cache or context the memory policy does not count, ranks
#: started elsewhere): refused when set (a `--no-` negation is accepted).
REFUSED_OPTIONS = _words(
    "headless uds grpc data-parallel-multi-port-external-lb skip-tokenizer-init tokens-only "
    "mm-encoder-only enable-log-requests enable-log-outputs disable-log-stats "
    "enable-sleep-mode allow-credentials disable-hybrid-kv-cache-manager disable-sliding-window "
    "skip-mm-profiling data-parallel-external-lb data-parallel-hybrid-lb data-parallel-rank "
    "data-parallel-start-rank enable-elastic-ep enable-lora"
)
#: Options judged against a fixed set of values (vLLM's spellings that load nothing else).
CHOICE_OPTIONS: dict[str, frozenset[str]] = {
    "tokenizer-mode": frozenset({"auto", "hf", "slow"}),
    "model-impl": frozenset({"auto", "vllm"}),
    "distributed-executor-backend": frozenset({"mp", "uni"}),
    "data-parallel-backend": frozenset({"mp"}),
    "safetensors-load-strategy": frozenset({"eager", "lazy", "prefetch"}),
    "runner": frozenset({"auto", "generate"}),
    "convert": frozenset({"auto", "none"}),
    "kv-cache-dtype": frozenset({"auto", *KV_DTYPE_BYTES}),  # what the memory policy counts
    "kv-offloading-backend": frozenset({"native"}),
    "load-format": frozenset({"auto", "safetensors", "runai_streamer"}),
    "dtype": frozenset({"auto", "bfloat16"}),  # the memory policy counts bf16 weights
}
#: Whole numbers judged by the reader: one server on the resource's own accelerators.
_SIZES = "tensor pipeline data prefill-context decode-context"
INT_OPTIONS: dict[str, tuple[int, int]] = {
    **{f"{n}-parallel-size": (1, 64) for n in _words(_SIZES)},
    "data-parallel-size-local": (1, 64),
    "nnodes": (1, 1),
    "node-rank": (0, 0),
    "api-server-count": (1, 64),
}
#: `--speculative-config` fields the policies read; any other field is refused.
SPECULATIVE_FIELDS = frozenset(
    {"method", "model", "revision", "num_speculative_tokens", "quantization", "max_model_len",
     "draft_tensor_parallel_size", "tensor_parallel_size", "enforce_eager",
     "attention_backend", "moe_backend", "kv_cache_dtype", "prompt_lookup_max",
     "prompt_lookup_min", "disable_padded_drafter_batch", "parallel_drafting",
     "draft_sample_method", "rejection_sample_method", "use_local_argmax_reduction"}
)  # fmt: skip


def serve_args(command: Sequence[str] | None, args: Sequence[str] | None) -> list[str]:
    """vLLM's arguments when `command` + `args` is the accepted shape, else ReadError naming
    the shape found."""
    argv = [*(command or []), *(args or [])]
    if tuple(command or ()) == SERVE_COMMAND and not any("$(" in a for a in argv):
        return list(args or [])
    raise ReadError(f"it runs {shape(command, args)}; {ACCEPTED}")


_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh", "busybox"})
_WRAPPERS = frozenset(
    _words(
        "env sudo doas timeout taskset numactl nohup exec nice stdbuf time command tini "
        "tini-static dumb-init chroot su runuser setsid xargs"
    )
)


def shape(command: Sequence[str] | None, args: Sequence[str] | None) -> str:
    """What a command runs, in words, for the refusal."""
    argv = [*(command or []), *(args or [])]
    if not command:
        return "no command (the image's own entrypoint with these arguments)"
    if any("$(" in a for a in argv):
        return "`$(...)` in its command or arguments (expanded by the platform at start)"
    head, base = argv[0], argv[0].rsplit("/", 1)[-1]
    second = f" {argv[1]}" if len(argv) > 1 else ""
    if base in _SHELLS:
        return f"a shell (`{base}{second}`), whose script is not read"
    if base in _WRAPPERS or "=" in head:
        return f"the wrapper `{head}{second}` in front of the program"
    if re.fullmatch(r"python[0-9.]*", base):
        return f"Python (`{' '.join(argv[:3])}`)"
    if base in ("docker", "podman"):
        return f"`{base}{second}`"
    if base == "vllm" and head != "vllm":
        return f"vllm named by a path ({head!r})"
    if base == "vllm":
        return f"`vllm{second}`, not `vllm serve`"
    if len(argv) > len(command):
        return f"the program {head!r} with arguments after the command"
    return f"the program {head!r}"


def mentions_vllm(tokens: Iterable[str]) -> bool:
    """Words that start vLLM: `vllm serve` (as two words or in a script), its modules."""
    words = list(tokens)
    for index, word in enumerate(words):
        if re.search(r"(^|[\s/;&|'\"(])vllm\s+serve\b|vllm\.entrypoints", word):
            return True
        if word.rsplit("/", 1)[-1] == "vllm" and words[index + 1 : index + 2] == ["serve"]:
            return True
    return False


OFFICIAL_VLLM_IMAGES = frozenset({"docker.io/vllm/vllm-openai", "docker.io/vllm/vllm-tpu"})


def is_vllm_image(image: str) -> bool:
    """An official vLLM image, named by its full reference (registry and namespace)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    first, sep, _ = name.partition("/")
    if not sep or not ("." in first or ":" in first or first == "localhost"):
        name = "docker.io/" + name
    return re.sub(r"^(index|registry-1)\.docker\.io/", "docker.io/", name) in OFFICIAL_VLLM_IMAGES


def parse_serve_args(args: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """`{"model": ..., "option-name": value}` as vLLM's parser reads `args` (values stay the
    strings given; flags True/False; `nargs="+"` a list), and the problems with them.
    Raises ReadError where vLLM's parser itself refuses them."""
    namespace = _PARSER.parse_args(list(args), namespace=_Seen())
    given = {k: v for k, v in vars(namespace).items() if k != "_twice"}
    if namespace._twice:
        twice = ", ".join(f"--{n.replace('_', '-')}" for n in dict.fromkeys(namespace._twice))
        raise ReadError(f"{twice} given twice (vLLM keeps the last one silently); give it once")
    if "model_tag" in given and "model" in given:
        raise ReadError("the model is given twice (positional and --model); give it once")
    options = {
        k.replace("_", "-"): v
        for k, v in given.items()
        if k != "model_tag" and not (k in _OPTIONAL and v in ("", "None"))
    }
    options["model"] = given.get("model_tag") or options.get("model") or DEFAULT_MODEL
    return options, option_problems(options)


def option_problems(options: Mapping[str, Any]) -> list[str]:
    """The values the policies refuse, each naming the option and what is accepted."""
    problems = []
    for name in CODE_OPTIONS + REFUSED_OPTIONS:
        if options.get(name) not in (None, False):
            negation = f" or --no-{name}" if f"--no-{name}" in OPTIONS else ""
            problems.append(
                f"--{name} loads, serves or logs something the policies cannot judge "
                f"(accepted: leaving it out{negation}; docs/accepted-shapes.md)"
            )
    for name, accepted in CHOICE_OPTIONS.items():
        if name in options and options[name] not in accepted:
            problems.append(
                f"--{name} {options[name]!r} is not one the policies judge (accepted: "
                f"{', '.join(sorted(accepted))})"
            )
    for name, (low, high) in INT_OPTIONS.items():
        number = _whole(options[name]) if name in options else low
        if number is None or not low <= number <= high:
            allowed = str(low) if low == high else f"{low} to {high}"
            problems.append(f"--{name} {options[name]!r} (accepted: a whole number, {allowed})")
    size, local = options.get("data-parallel-size", "1"), options.get("data-parallel-size-local")
    if local is not None and _whole(local) != _whole(size):
        problems.append(
            f"--data-parallel-size-local {local!r} with --data-parallel-size {size!r} waits for "
            "ranks started elsewhere (accepted: the two equal)"
        )
    spec = _json(options.get("speculative-config"))
    for key in spec if isinstance(spec, Mapping) else ():
        if key not in SPECULATIVE_FIELDS:
            problems.append(
                f"--speculative-config field {key!r} is not one the policies read (accepted: "
                f"{', '.join(sorted(SPECULATIVE_FIELDS))})"
            )
    tokenizer, model = options.get("tokenizer"), str(options.get("model"))
    if tokenizer is not None and str(tokenizer).rstrip("/") != model.rstrip("/"):
        problems.append(
            f"--tokenizer {tokenizer!r} reads a tokenizer from another path than the served "
            f"model {model!r} (accepted: leaving it out, or the model's own path)"
        )
    return problems


def _json(value: Any) -> Any:
    try:
        return json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        return None


def _whole(value: Any) -> int | None:
    """An `int` option as argparse's `int` reads it, else None."""
    try:
        return int(value) if isinstance(value, str) else None
    except ValueError:
        return None


def device_count(options: Mapping[str, Any]) -> int | None:
    """Devices one server uses on its node (vLLM 0.27.1: tensor x pipeline x prefill-context
    parallel per data-parallel rank, times the local ranks); None when a size is not whole."""
    names = ("tensor-parallel-size", "pipeline-parallel-size", "prefill-context-parallel-size")
    local = options.get("data-parallel-size-local", options.get("data-parallel-size", "1"))
    sizes = [_whole(options.get(n, "1")) for n in names] + [_whole(local)]
    return None if None in sizes else math.prod(s for s in sizes if s is not None)


#: `VLLM_*` variables accounted for (none changes the model, the code or the port); every
#: other `VLLM_*` name is refused (vLLM 0.27.1 reads about 250: plugins, ModelScope, a model
#: redirect, run-time LoRA ...).
ALLOWED_VLLM = frozenset(
    _words(
        "VLLM_API_KEY VLLM_USE_FLASHINFER_SAMPLER VLLM_LOGGING_LEVEL VLLM_LOGGING_PREFIX "
        "VLLM_LOGGING_COLOR VLLM_CONFIGURE_LOGGING VLLM_DISABLE_LOG_LOGO VLLM_LOG_STATS_INTERVAL "
        "VLLM_NO_USAGE_STATS VLLM_DO_NOT_TRACK VLLM_USAGE_SOURCE VLLM_ENGINE_READY_TIMEOUT_S "
        "VLLM_ENGINE_ITERATION_TIMEOUT_S VLLM_HTTP_TIMEOUT_KEEP_ALIVE "
        "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS VLLM_XLA_CHECK_RECOMPILATION "
        # Where compiled artefacts are kept: `compile-cache-keyed` judges where they point.
        "VLLM_CACHE_ROOT VLLM_XLA_CACHE_PATH"
    )
)
#: Variables (and families) of the libraries under vLLM that load code, move caches or
#: redirect downloads: refused, but for the members in ALLOWED_OTHER.
REFUSED_NAMES = frozenset(
    _words(
        "PATH HOME BASH_ENV ENV SHELLOPTS BASHOPTS PS4 PROMPT_COMMAND TMPDIR LOCPATH NLSPATH "
        "HOSTALIASES REQUESTS_CA_BUNDLE CURL_CA_BUNDLE"
    )
)
REFUSED_FAMILIES = tuple(
    _words(
        "LD_ PYTHON HF_ HUGGINGFACE_ HUGGING_FACE_ TRANSFORMERS_ TOKENIZERS_ SAFETENSORS_ "
        "DIFFUSERS_ TORCH PYTORCH_ TRITON_ CUDA_ NCCL_ "
        "NVIDIA_ XDG_ MODELSCOPE_ GLIBC_ MALLOC_ GCONV_ SSL_ "
        "OPENSSL_ RAY_ LMCACHE_ OUTLINES_ XLA_ TPU_ PJRT_ JAX_ HTTP_PROXY HTTPS_PROXY ALL_PROXY "
        "NO_PROXY RUNAI_ S3_ AWS_ AZURE_"
    )
)
ALLOWED_OTHER = frozenset(
    _words(
        "HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_HUB_OFFLINE TRANSFORMERS_OFFLINE "
        "HF_HUB_DISABLE_TELEMETRY HF_HUB_DISABLE_PROGRESS_BARS "
        "HF_HUB_ENABLE_HF_TRANSFER HF_HUB_DOWNLOAD_TIMEOUT "
        "HF_HUB_ETAG_TIMEOUT PYTHONUNBUFFERED PYTHONDONTWRITEBYTECODE PYTHONFAULTHANDLER "
        "PYTHONHASHSEED PYTHONIOENCODING PYTORCH_CUDA_ALLOC_CONF TOKENIZERS_PARALLELISM "
        "MALLOC_TRIM_THRESHOLD_ CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER NCCL_DEBUG"
    )
)


def env_problems(names: Iterable[str]) -> list[str]:
    """One message per variable given to vLLM that the policies cannot judge."""
    problems = []
    for name in sorted(set(names)):
        upper = name.upper()  # Python and curl read proxies in lower case too
        refused = (
            name not in ALLOWED_VLLM
            if name.startswith("VLLM_")
            else name in REFUSED_NAMES
            or (name not in ALLOWED_OTHER and upper.startswith(REFUSED_FAMILIES))
        )
        if refused:
            problems.append(
                f"the environment variable {name} changes what vLLM or the libraries under it "
                "load, cache or download in a way the policies do not follow (accepted: the "
                "names listed in docs/accepted-shapes.md)"
            )
    return problems


#: vLLM's spellings of "the model's own context length" for --max-model-len.
AUTO_LENGTHS = frozenset({"auto", "-1"})


def human_int(value: Any) -> int | None:
    """vLLM's `human_readable_int`: `32768`, `32k` (x1000), `32K`/`32Ki` (x1024), `1.5m`.
    Upper-case suffixes are binary (the larger value), so a cap cannot be slipped under."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if float(value).is_integer() else None
    if not isinstance(value, str):
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(?:([kmgt])|([KMGT])i?)?", value.strip())
    if not match:
        try:
            plain = float(value.strip())
        except ValueError:
            return None
        return int(plain) if plain.is_integer() else None
    digits, decimal, binary = match.groups()
    if decimal:
        return int(float(digits) * 10 ** (3 * "kmgt".index(decimal) + 3))
    if binary:  # vLLM refuses decimals with a binary suffix
        return None if "." in digits else int(digits) * 2 ** (10 * "KMGT".index(binary) + 10)
    return int(float(digits)) if float(digits).is_integer() else None
