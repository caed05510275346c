"""Check every rendered `vllm serve` command line and every request body against vLLM itself,
and write the snapshot `serving/data/<package>-<version>.json` that the CI tests and the
policies validate against without vLLM (docs/contracts.md, "With vLLM, by hand"):

    python scripts/vllm_contract.py run --vllm 0.27.1=/work/vllm-0.27.1-venv/bin/python
    python scripts/vllm_contract.py run --vllm 0.27.1=... --write-snapshot
    python scripts/vllm_contract.py cases   # the command lines and bodies, as JSON

`_inside_vllm` is the part run by the vLLM interpreter (JSON on stdin); it imports nothing
from this project."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import io
import json
import subprocess
import sys
import time
import typing
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "serving" / "data"

#: Where each thing is read in vLLM's source (relative to the installed `vllm` package).
SOURCES = {
    "parser": "vllm/entrypoints/openai/cli_args.py (make_arg_parser, validate_parsed_serve_args)",
    "parser_names": "vllm/entrypoints/openai/api_server.py (tool and reasoning parser checks)",
    "scheduler": "vllm/config/scheduler.py (SchedulerConfig.verify_max_model_len)",
    "cache": "vllm/config/cache.py (CacheConfig)",
    "chat": "vllm/entrypoints/openai/chat_completion/protocol.py (ChatCompletionRequest)",
    "completion": "vllm/entrypoints/openai/completion/protocol.py (CompletionRequest)",
    "stream_options": "vllm/entrypoints/openai/engine/protocol.py (StreamOptions)",
    "tokenize": "vllm/entrypoints/serve/tokenize/protocol.py (TokenizeCompletionRequest)",
    "metrics": "vllm/v1/metrics/loggers.py (PrometheusStatLogger)",
    "spec_decode_metrics": "vllm/v1/spec_decode/metrics.py (SpecDecodingProm)",
}


# Project side: the command lines and request bodies this package really produces.


@dataclasses.dataclass(frozen=True)
class CommandCase:
    """One rendered `vllm serve` argument list (after `vllm serve`) and the image it runs in."""

    name: str
    image: str
    argv: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class RequestCase:
    """One request body the benchmark or the health checks send, as captured on the wire."""

    name: str
    path: str
    body: dict[str, Any]


def image_version(image: str) -> tuple[str, str]:
    """(`vllm` or `vllm-tpu`, version) of a `vllm/vllm-openai:vX.Y.Z` / `vllm/vllm-tpu:vX.Y.Z`."""
    name, _, tag = image.partition("@")[0].rpartition(":")
    package = "vllm-tpu" if name.endswith("vllm-tpu") else "vllm"
    return package, tag.removeprefix("v")


def _variants(raw: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The stack as shipped, then one variant per value of every vLLM setting that changes the
    command line: each choice of a Literal field, each boolean flipped, MTP on, replicas."""
    from serving.config.groups import ModelSettings, VllmSettings

    yield "shipped", raw
    for name, info in VllmSettings.model_fields.items():
        key = info.alias or name
        annotation = info.annotation
        if typing.get_origin(annotation) is typing.Literal:
            for value in typing.get_args(annotation):
                yield f"{key}={value}", {**raw, key: value}
        elif annotation is bool:
            for value in (True, False):
                variant = {**raw, key: value}
                if key == "chunkedPrefill" and not value:
                    # vLLM needs max_num_batched_tokens >= max_model_len without chunked prefill.
                    variant["maxNumBatchedTokens"] = max(
                        int(raw.get("maxModelLen", 8192)), int(raw.get("maxNumBatchedTokens", 0))
                    )
                yield f"{key}={value}", variant
    assistant = ModelSettings(model=raw.get("model", ModelSettings().model)).card.assistant
    if assistant:
        for tokens in (1, 3, 5):
            yield (
                f"mtp-{tokens}",
                {
                    **raw,
                    "speculativeMethod": "mtp",
                    "drafter": assistant,
                    "numSpeculativeTokens": tokens,
                },
            )
    yield "bf16-checkpoint", {**raw, "model": "google/gemma-4-12B-it"}
    yield "served-model-name", {**raw, "servedModelName": "gemma-4"}
    sha = "0123456789abcdef0123456789abcdef01234567"
    yield "revisions-pinned", {**raw, "modelRevision": sha, "drafterRevision": sha}
    if "replicas" in raw:
        yield "replicas=3", {**raw, "replicas": 3, "modelRevision": sha}


def tpu_launch_argv(metadata: dict[str, str]) -> list[str]:
    """The arguments after `serve` in a TPU node's launch document (`vllm-launch`)."""
    from serving.render.tpu_startup import LAUNCH_KEY, read_launch

    return list(read_launch(metadata[LAUNCH_KEY])["args"])


def _repository(image: str) -> str:
    return image.partition("@")[0].rpartition(":")[0]


def command_cases(images: Sequence[str] = ()) -> tuple[list[CommandCase], list[str]]:
    """Every command line the shipped stacks and their variants render, and the variants that
    the settings refuse (those never reach vLLM). `images` replaces a stack's image by one of
    the same repository (to check a version before the stack file is re-pinned)."""
    from preview.harness import stack_config
    from serving.capacity.plan import stack_names
    from serving.catalog.hardware import Platform
    from serving.config.checks import SettingsError
    from serving.config.settings import load_settings
    from serving.render.vllm import mounted

    cases: list[CommandCase] = []
    refused: list[str] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for stack in stack_names():
        shipped = stack_config(stack)
        for image in images:
            if _repository(image) == _repository(str(shipped.get("image", ""))):
                shipped["image"] = image
        for variant, raw in _variants(shipped):
            name = f"{stack}/{variant}"
            try:
                settings = load_settings(raw)
            except SettingsError as exc:
                refused.append(f"{name}: {exc}")
                continue
            if settings.deploy_platform == "gke":
                # As serving/render/gke.py renders it for the vLLM Deployment: the bucket mount, the
                # stack's servingPort.
                from serving.render.gke import vllm_command

                argv = list(vllm_command(settings).args)
            elif settings.profile.platform is Platform.TPU:
                # As components/tpu_nodes.py renders it: the bucket's folders copied to the node.
                argv = list(mounted(settings, port=settings.tpu.serving_port).args)
            else:
                # As components/cloud_run_service.py renders it: folders under the bucket mount.
                argv = list(mounted(settings, port=8080).args)
            key = (settings.image, tuple(argv))
            if key in seen:
                continue
            seen.add(key)
            cases.append(CommandCase(name, settings.image, tuple(argv)))
    return cases, refused


@dataclasses.dataclass(frozen=True)
class RefusalCase:
    """A near variant of a shipped stack that the settings refuse because vLLM would: vLLM
    itself must refuse its command line, in the words the settings' message quotes."""

    name: str
    image: str
    argv: tuple[str, ...]
    settings_message: str


def _replace_flags(argv: Sequence[str], flags: dict[str, str | None]) -> tuple[str, ...]:
    """`argv` with each `--name[=value]` of `flags` replaced (None: a bare flag)."""
    names = {f.partition("=")[0] for f in flags}
    kept = [a for a in argv if a.partition("=")[0] not in names]
    added = [f if value is None else f"{f}={value}" for f, value in flags.items()]
    return (*kept, *added)


def refusal_cases(images: Sequence[str] = ()) -> list[RefusalCase]:
    """For every stack: chunked prefill off with fewer batched tokens than max-model-len, and
    fewer batched tokens than max-num-seqs. The settings must refuse both (else this fails)."""
    from preview.harness import stack_config
    from serving.config.checks import SettingsError
    from serving.config.settings import load_settings

    shipped_lines = {
        c.name.split("/")[0]: c for c in command_cases(images)[0] if "/shipped" in c.name
    }
    out: list[RefusalCase] = []
    for stack, case in sorted(shipped_lines.items()):
        raw = stack_config(stack)
        raw["image"] = case.image
        settings = load_settings(raw)
        v = settings.vllm
        near: dict[str, tuple[dict[str, Any], dict[str, str | None]]] = {
            "chunked-prefill-off": (
                {"chunkedPrefill": False, "maxNumBatchedTokens": v.max_model_len - 1},
                {
                    "--no-enable-chunked-prefill": None,
                    "--max-num-batched-tokens": str(v.max_model_len - 1),
                },
            ),
            "batched-below-seqs": (
                {"maxNumSeqs": 1024, "maxNumBatchedTokens": 1023},
                {"--max-num-seqs": "1024", "--max-num-batched-tokens": "1023"},
            ),
        }
        for label, (change, flags) in near.items():
            try:
                load_settings({**raw, **change})
            except SettingsError as exc:
                message = str(exc)
            else:
                raise SystemExit(f"{stack}/{label}: the settings accept {change}; vLLM would not")
            out.append(
                RefusalCase(
                    f"{stack}/{label}", case.image, _replace_flags(case.argv, flags), message
                )
            )
    return out


def _vllm_words(error: str) -> str:
    """vLLM's own message out of a pydantic validation error's text."""
    text = error.split("Value error, ", 1)[-1]
    return text.split(" [type=", 1)[0].strip()


def request_cases() -> list[RequestCase]:
    """The bodies the benchmark and the health checks send, captured from their own code
    through an in-process transport (nothing is retyped here)."""
    import httpx

    from bench.load.hotpath import RequestSpec
    from bench.load.prompts import count_tokens
    from healthchecks.checks import check_chat

    captured: list[tuple[str, dict[str, Any]]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        captured.append((request.url.path, json.loads(request.content)))
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"count": 3, "tokens": [1, 2, 3]})
        return httpx.Response(200, text="data: [DONE]\n\n")

    async def capture(call: Callable[[httpx.AsyncClient], Any]) -> None:
        async with httpx.AsyncClient(
            transport=httpx.MockTransport(handler), base_url="http://127.0.0.1"
        ) as client:
            with contextlib.suppress(Exception):
                await call(client)

    calls: list[tuple[str, Callable[[httpx.AsyncClient], Any]]] = [
        (
            "bench completion (ignore_eos)",
            lambda c: c.post("/v1/completions", content=RequestSpec("m", "hello", 16).encoded_body),
        ),
        (
            "bench completion",
            lambda c: c.post(
                "/v1/completions", content=RequestSpec("m", "hello", 16, False).encoded_body
            ),
        ),
        ("bench /tokenize", lambda c: count_tokens(c, "m", "hello world")),
        ("health chat", lambda c: check_chat(c, "m")),
    ]
    out: list[RequestCase] = []
    for name, call in calls:
        before = len(captured)
        asyncio.run(capture(call))
        if len(captured) == before:
            raise SystemExit(f"{name}: the code sent no request body")
        for path, body in captured[before:]:
            out.append(RequestCase(name, path, body))
    return out


# vLLM side: runs in the vLLM environment (`_inside`), imports nothing from this project.

#: Which request model vLLM validates each path's body with.
REQUEST_MODELS = {
    "/v1/completions": "CompletionRequest",
    "/v1/chat/completions": "ChatCompletionRequest",
    "/tokenize": "TokenizeCompletionRequest",
}


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _inside_vllm(payload: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover - vLLM venv
    import ast
    import importlib.metadata
    import os

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    import vllm
    import vllm.platforms
    from vllm.platforms.cpu import CpuPlatform

    # No GPU here: vLLM cannot infer a device, so pin the CPU platform before the parser is
    # built. Option names and choices do not depend on the platform.
    vllm.platforms._current_platform = CpuPlatform()
    from vllm.config import CacheConfig, SchedulerConfig
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    from vllm.entrypoints.openai.engine.protocol import StreamOptions
    from vllm.entrypoints.serve.tokenize.protocol import (
        TokenizeChatRequest,
        TokenizeCompletionRequest,
    )
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    package_root = Path(vllm.__file__).resolve().parent.parent
    version = importlib.metadata.version(payload["package"])

    def parser() -> Any:
        return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))

    from vllm.config import SpeculativeConfig

    spec_fields = set(SpeculativeConfig.__pydantic_fields__)
    tool_parsers = sorted(ToolParserManager.list_registered())
    reasoning_parsers = sorted(ReasoningParserManager.list_registered())

    def check_command(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
        errors: list[str] = []
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                ns = parser().parse_args(argv)
        except SystemExit:
            return [f"parse_args: {err.getvalue().strip().splitlines()[-1:]}"], {}
        except Exception as exc:
            return [f"parse_args: {type(exc).__name__}: {exc}"], {}
        try:
            validate_parsed_serve_args(ns)
        except Exception as exc:
            errors.append(f"validate_parsed_serve_args: {exc}")
        # EngineArgs builds SpeculativeConfig(**config): an unknown key is a TypeError there.
        spec = ns.speculative_config
        if isinstance(spec, dict):
            unknown = sorted(set(spec) - spec_fields)
            if unknown:
                errors.append(f"--speculative-config: SpeculativeConfig has no field {unknown}")
        # api_server.py's start-up checks of the parser names.
        if ns.enable_auto_tool_choice and ns.tool_call_parser not in tool_parsers:
            errors.append(f"invalid tool call parser: {ns.tool_call_parser}")
        if ns.reasoning_parser and ns.reasoning_parser not in reasoning_parsers:
            errors.append(f"invalid reasoning parser: {ns.reasoning_parser}")

        # The config checks that need no model: scheduler limits and the cache config. Options
        # not given keep the config classes' own defaults; max_model_len comes from the model's
        # config when it is not given, so without it the scheduler check cannot run here.
        def given(**values: Any) -> dict[str, Any]:
            return {k: v for k, v in values.items() if v is not None}

        if ns.max_model_len is None:
            errors.append("--max-model-len not given: SchedulerConfig cannot be checked")
        else:
            try:
                SchedulerConfig(
                    **given(
                        max_num_batched_tokens=ns.max_num_batched_tokens,
                        max_num_seqs=ns.max_num_seqs,
                        enable_chunked_prefill=ns.enable_chunked_prefill,
                        disable_chunked_mm_input=ns.disable_chunked_mm_input,
                    ),
                    max_model_len=ns.max_model_len,
                    is_encoder_decoder=False,
                )
            except Exception as exc:
                errors.append(f"SchedulerConfig: {exc}")
        try:
            CacheConfig(
                **given(
                    gpu_memory_utilization=ns.gpu_memory_utilization,
                    cache_dtype=ns.kv_cache_dtype,
                    enable_prefix_caching=ns.enable_prefix_caching,
                )
            )
        except Exception as exc:
            errors.append(f"CacheConfig: {exc}")
        seen = {k: _jsonable(v) for k, v in vars(ns).items() if k in _INTERESTING}
        return errors, seen

    models = {
        "ChatCompletionRequest": ChatCompletionRequest,
        "CompletionRequest": CompletionRequest,
        "StreamOptions": StreamOptions,
        "TokenizeCompletionRequest": TokenizeCompletionRequest,
        "TokenizeChatRequest": TokenizeChatRequest,
    }

    def field_names(model: Any) -> list[str]:
        names = set()
        for name, info in model.model_fields.items():
            names.add(name)
            if info.alias:
                names.add(info.alias)
        return sorted(names)

    def check_body(path: str, body: dict[str, Any]) -> list[str]:
        model = models[REQUEST_MODELS[path]]
        errors = [f"{path}: field {k!r} is not declared by {model.__name__}" for k in body]
        errors = [e for e, k in zip(errors, body, strict=True) if k not in field_names(model)]
        options = body.get("stream_options")
        if isinstance(options, dict):
            errors += [
                f"{path}: stream_options.{k} is not declared by StreamOptions"
                for k in options
                if k not in field_names(StreamOptions)
            ]
        try:
            model.model_validate(body)
        except Exception as exc:
            errors.append(f"{path}: {model.__name__} refused the body: {exc}")
        return errors

    results = {
        "commands": [
            dict(zip(("errors", "parsed"), check_command(case["argv"]), strict=True))
            for case in payload["commands"]
        ],
        "requests": [check_body(case["path"], case["body"]) for case in payload["requests"]],
        "vllm_version": version,
    }

    # The snapshot: every option string of `vllm serve`.
    options: dict[str, Any] = {}
    for action in parser()._actions:
        if not action.option_strings or action.dest == "help":
            continue
        kind = type(action).__name__
        boolean = kind in ("BooleanOptionalAction", "_StoreTrueAction", "_StoreFalseAction")
        entry = {
            "dest": action.dest,
            "takes_value": not boolean and action.nargs != 0,
            "nargs": action.nargs if isinstance(action.nargs, (int, str)) else None,
            "choices": sorted(str(c) for c in action.choices) if action.choices else None,
            "type": getattr(action.type, "__name__", None) if action.type else None,
            "default": _jsonable(action.default),
            "action": kind,
        }
        for option in action.option_strings:
            options[option] = {**entry, "negation": option.startswith("--no-") and boolean}
    # FlexibleArgumentParser's spellings, checked on the real parser rather than assumed.
    underscore = parser().parse_args(["--max_num_seqs=7"]).max_num_seqs == 7

    def metric_names(rel: str) -> list[dict[str, Any]]:
        tree = ast.parse((package_root / rel).read_text())
        kinds = {
            "_gauge_cls": "gauge",
            "_counter_cls": "counter",
            "_histogram_cls": "histogram",
            "Gauge": "gauge",
            "Counter": "counter",
            "Histogram": "histogram",
        }
        typed: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if fname not in kinds:
                    continue
                for kw in node.keywords:
                    if (
                        kw.arg == "name"
                        and isinstance(kw.value, ast.Constant)
                        and str(kw.value.value).startswith("vllm:")
                    ):
                        typed[str(kw.value.value)] = kinds[fname]
        loose = {
            str(n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and n.value.startswith("vllm:")
            and " " not in n.value
            and "[" not in n.value
        }
        out = []
        for name in sorted(loose | set(typed)):
            kind = typed.get(name) or _LOOSE_KINDS.get(name)
            if kind is None:
                raise SystemExit(f"{rel}: cannot tell the metric type of {name}")
            base = name[: -len("_total")] if kind == "counter" and name.endswith("_total") else name
            exposed = {
                "counter": [f"{base}_total"],
                "gauge": [name],
                "histogram": [f"{name}_bucket", f"{name}_sum", f"{name}_count"],
            }[kind]
            out.append({"name": name, "type": kind, "exposed": exposed, "source": rel})
        return out

    snapshot = {
        "package": payload["package"],
        "version": version,
        "generated": datetime.date.today().isoformat(),
        "generator": "scripts/vllm_contract.py",
        "sources": SOURCES,
        "underscore_options": underscore,
        "serve_options": dict(sorted(options.items())),
        "tool_call_parsers": tool_parsers,
        "speculative_config_fields": sorted(spec_fields),
        "reasoning_parsers": reasoning_parsers,
        "request_models": {name: field_names(model) for name, model in models.items()},
        "request_paths": REQUEST_MODELS,
        "metrics": [
            *metric_names("vllm/v1/metrics/loggers.py"),
            *metric_names("vllm/v1/spec_decode/metrics.py"),
        ],
        "installed": sorted(
            f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()
        ),
    }
    snapshot["config_checks"] = _config_checks(SchedulerConfig, CacheConfig)
    results["snapshot"] = snapshot
    return results


def _config_checks(scheduler: Any, cache: Any) -> dict[str, Any]:  # pragma: no cover
    """vLLM's own refusals for fixed inputs, and its field bounds, for the settings tests to
    compare their messages with (run inside the vLLM environment)."""
    from vllm.config import SpeculativeConfig

    def refusal(**inputs: Any) -> dict[str, Any]:
        try:
            scheduler(**inputs, is_encoder_decoder=False)
        except Exception as exc:
            return {"inputs": inputs, "message": _vllm_words(str(exc))}
        return {"inputs": inputs, "message": None}

    def bounds(cls: Any, name: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for item in cls.__pydantic_fields__[name].metadata:
            for key in ("gt", "ge", "lt", "le"):
                if getattr(item, key, None) is not None:
                    out[key] = getattr(item, key)
        return out

    return {
        "source": SOURCES["scheduler"],
        "chunked_prefill_off": refusal(
            max_num_batched_tokens=4095,
            max_num_seqs=16,
            max_model_len=4096,
            enable_chunked_prefill=False,
        ),
        "batched_below_seqs": refusal(
            max_num_batched_tokens=512, max_num_seqs=513, max_model_len=4096
        ),
        "gpu_memory_utilization": bounds(cache, "gpu_memory_utilization"),
        "num_speculative_tokens": bounds(SpeculativeConfig, "num_speculative_tokens"),
    }


#: Arguments worth echoing back in the report (what vLLM parsed them to).
_INTERESTING = {
    "model_tag",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_chunked_prefill",
    "kv_cache_dtype",
    "speculative_config",
}

#: Metric names built from variables in vLLM's source, with the constructor that builds them
#: (read in the same files: `log_metrics_info` makes a gauge, the spec-decode and diffusion
#: counters come from `counter_specs` passed to `_counter_cls`).
_LOOSE_KINDS = {
    "vllm:cache_config_info": "gauge",
    "vllm:spec_decode_num_drafts": "counter",
    "vllm:spec_decode_num_draft_tokens": "counter",
    "vllm:spec_decode_num_accepted_tokens": "counter",
    "vllm:diffusion_num_denoising_steps": "counter",
    "vllm:diffusion_num_canvas_positions": "counter",
    "vllm:diffusion_num_committed_tokens": "counter",
}


# Driver


def _run_inside(python: str, payload: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [python, str(Path(__file__).resolve()), "_inside"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"the vLLM environment {python} failed (exit {proc.returncode}):\n"
            + proc.stderr[-3000:]
        )
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run(environments: dict[str, str], write_snapshot: bool, images: Sequence[str] = ()) -> int:
    started = time.monotonic()
    commands, refused = command_cases(images)
    requests = request_cases()
    print(f"{len(commands)} command lines, {len(requests)} request bodies", flush=True)
    for line in refused:
        print(f"  (refused by the settings, never rendered) {line.splitlines()[0]} ...")
    by_version: dict[tuple[str, str], list[CommandCase]] = {}
    for case in commands:
        by_version.setdefault(image_version(case.image), []).append(case)
    failures = 0
    refusals = refusal_cases(images)
    for (package, version), cases in sorted(by_version.items()):
        near = [r for r in refusals if image_version(r.image) == (package, version)]
        python = environments.get(f"{package}=={version}")
        if python is None and package == "vllm":
            python = environments.get(version)
        if python is None:
            print(f"FAIL no vLLM environment for {package} {version} ({len(cases)} command lines)")
            failures += len(cases)
            continue
        payload = {
            "package": package,
            "commands": [{"argv": list(c.argv)} for c in cases]
            + [{"argv": list(r.argv)} for r in near],
            # The benchmark and the health checks talk to every stack: check them on each version.
            "requests": [dataclasses.asdict(r) for r in requests],
        }
        print(f"checking {len(cases)} command lines with {package} {version} ({python}) ...")
        t0 = time.monotonic()
        result = _run_inside(python, payload)
        print(f"  vLLM {result['vllm_version']} answered in {time.monotonic() - t0:.1f}s")
        outcomes = result["commands"]
        for case, outcome in zip(cases, outcomes[: len(cases)], strict=True):
            status = "ok  " if not outcome["errors"] else "FAIL"
            print(f"  {status} {case.name}")
            for error in outcome["errors"]:
                print(f"       {error}")
                failures += 1
        for refusal, outcome in zip(near, outcomes[len(cases) :], strict=True):
            words = [_vllm_words(e) for e in outcome["errors"] if e.startswith("SchedulerConfig")]
            quoted = bool(words) and all(w in refusal.settings_message for w in words)
            print(f"  {'ok  ' if quoted else 'FAIL'} {refusal.name}: refused by vLLM and settings")
            if not quoted:
                print(f"       vLLM: {outcome['errors'] or 'accepted it'}")
                print(f"       settings: {refusal.settings_message}")
                failures += 1
        for request, errors in zip(requests, result["requests"], strict=True):
            print(f"  {'ok  ' if not errors else 'FAIL'} {request.name} POST {request.path}")
            for error in errors:
                print(f"       {error}")
                failures += 1
        if write_snapshot:
            DATA.mkdir(parents=True, exist_ok=True)
            target = DATA / f"{package}-{version}.json"
            snapshot = result["snapshot"]
            snapshot["package"] = package
            target.write_text(json.dumps(snapshot, indent=1, sort_keys=False) + "\n")
            print(f"  wrote {target.relative_to(ROOT)}")
    verdict = "FAILED" if failures else "passed"
    print(f"vLLM contract {verdict}: {failures} refusal(s), {time.monotonic() - started:.0f}s")
    return 1 if failures else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python scripts/vllm_contract.py", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="check everything with vLLM itself")
    run_p.add_argument(
        "--vllm",
        action="append",
        default=[],
        metavar="VERSION=PYTHON",
        help="the interpreter of a venv holding that vLLM version (e.g. 0.27.1=/venv/bin/python,"
        " or vllm-tpu==0.28.0=/venv/bin/python for the TPU image); repeat per version",
    )
    run_p.add_argument("--write-snapshot", action="store_true", help="write serving/data/")
    run_p.add_argument(
        "--image",
        action="append",
        default=[],
        help="check the stacks whose image is of this repository with this image instead "
        "(e.g. vllm/vllm-tpu:v0.28.0); repeat per repository",
    )
    sub.add_parser("cases", help="print the command lines and request bodies as JSON")
    sub.add_parser("_inside", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    options = parser.parse_args(argv)
    if options.command == "_inside":
        payload = json.loads(sys.stdin.read())
        print(json.dumps(_inside_vllm(payload)))
        return 0
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    if options.command == "cases":
        commands, refused = command_cases()
        print(
            json.dumps(
                {
                    "commands": [dataclasses.asdict(c) for c in commands],
                    "refused": refused,
                    "requests": [dataclasses.asdict(r) for r in request_cases()],
                },
                indent=1,
            )
        )
        return 0
    environments: dict[str, str] = {}
    for item in options.vllm:
        key, sep, python = item.rpartition("=")
        if not sep or not key:
            parser.error(f"--vllm {item!r}: expected VERSION=PYTHON")
        environments[key] = python
    return run(environments, options.write_snapshot, options.image)


if __name__ == "__main__":
    raise SystemExit(main())
