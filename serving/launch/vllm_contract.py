"""vLLM's own contract at a pinned version, read from a snapshot, and a small validator.

`scripts/vllm_contract.py` runs vLLM's real argument parser, config checks and request models
in a separate environment and writes `serving/data/<package>-<version>.json`: every option
string of `vllm serve` (aliases such as `-tp`, `--no-` negations), which options take no value,
their choices and defaults, the OpenAI request models' field names and the Prometheus metric
names. This module reads those snapshots (no vLLM import) so that tests, policies and monitoring
can check a command line, a request body or a metric name against what that vLLM version
declares. It is stricter than argparse in one way: abbreviated option names, which argparse
would accept by prefix, are refused (this package always renders full names).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "data"


class UnknownVersion(LookupError):
    """No snapshot for this vLLM package and version; run scripts/vllm_contract.py."""


@dataclass(frozen=True)
class Snapshot:
    """One vLLM release's contract, as `scripts/vllm_contract.py` read it from vLLM."""

    package: str
    version: str
    generated: str
    data: Mapping[str, Any]

    @property
    def options(self) -> Mapping[str, Mapping[str, Any]]:
        options: Mapping[str, Mapping[str, Any]] = self.data["serve_options"]
        return options

    @property
    def underscore_options(self) -> bool:
        return bool(self.data.get("underscore_options"))

    def request_fields(self, model: str) -> frozenset[str]:
        return frozenset(self.data["request_models"][model])

    @property
    def request_paths(self) -> Mapping[str, str]:
        paths: Mapping[str, str] = self.data["request_paths"]
        return paths

    @property
    def metrics(self) -> list[Mapping[str, Any]]:
        metrics: list[Mapping[str, Any]] = self.data["metrics"]
        return metrics

    def metric_names(self) -> frozenset[str]:
        """Metric names as vLLM declares them (`vllm:time_to_first_token_seconds`)."""
        return frozenset(m["name"] for m in self.metrics)

    def exposed_metric_names(self) -> frozenset[str]:
        """Series names as `/metrics` shows them (counters end in `_total`, histograms have
        `_bucket`, `_sum` and `_count`)."""
        return frozenset(name for m in self.metrics for name in m["exposed"])

    def default(self, option: str) -> Any:
        """vLLM's default for an option (`--max-num-seqs`), None where it has none."""
        return self.options[option]["default"]


def available() -> list[tuple[str, str]]:
    """(package, version) of every snapshot shipped."""
    out = []
    for path in sorted(DATA.glob("vllm*-*.json")):
        package, _, version = path.stem.rpartition("-")
        if package in _PACKAGES and _VERSION.fullmatch(version):
            out.append((package, version))
    return out


#: The snapshots' file names: `<package>-<X.Y.Z>.json`, beside other data files of the domain
#: (the performance evidence) that are not snapshots.
_PACKAGES = ("vllm", "vllm-tpu")
_VERSION = re.compile(r"\d+\.\d+\.\d+")


@cache
def load(package: str, version: str) -> Snapshot:
    path = DATA / f"{package}-{version}.json"
    if not path.exists():
        shipped = ", ".join(f"{p} {v}" for p, v in available()) or "none"
        raise UnknownVersion(
            f"no vLLM contract snapshot for {package} {version} (shipped: {shipped}); run "
            "scripts/vllm_contract.py with that version to write one"
        )
    data = json.loads(path.read_text())
    return Snapshot(data["package"], data["version"], data["generated"], data)


def image_release(image: str) -> tuple[str, str] | None:
    """(`vllm` or `vllm-tpu`, X.Y.Z) for an official image tag (`vllm/vllm-openai:v0.27.1`,
    `vllm/vllm-tpu:v0.27.0`); None for a digest-only or a non-vLLM image."""
    name, _, tag = image.partition("@")[0].rpartition(":")
    if not name or not tag.startswith("v"):
        return None
    repository = name.rsplit("/", 1)[-1]
    if repository == "vllm-openai":
        return "vllm", tag[1:]
    if repository == "vllm-tpu":
        return "vllm-tpu", tag[1:]
    return None


def for_image(image: str) -> Snapshot:
    release = image_release(image)
    if release is None:
        raise UnknownVersion(f"image {image!r} names no official vLLM release tag")
    return load(*release)


def _canonical(option: str, snapshot: Snapshot) -> str:
    if option.startswith("--") and snapshot.underscore_options:
        return "--" + option[2:].replace("_", "-")
    return option


def _looks_like_option(token: str) -> bool:
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False  # a negative number is a value


def _type_error(option: str, value: str, kind: str | None) -> str | None:
    converters: dict[str, type] = {"int": int, "float": float}
    convert = converters.get(kind or "")
    if convert is None:
        return None
    try:
        convert(value)
    except ValueError:
        return f"{option}: {value!r} is not a valid {kind}"
    return None


def _speculative_keys(value: str, snapshot: Snapshot) -> list[str]:
    """vLLM builds `SpeculativeConfig(**config)` from `--speculative-config`: unknown keys fail."""
    fields = snapshot.data.get("speculative_config_fields")
    try:
        config = json.loads(value)
    except json.JSONDecodeError as exc:
        return [f"--speculative-config is not JSON ({exc.msg})"]
    if not isinstance(config, dict):
        return ["--speculative-config is not a JSON object"]
    if fields is None:
        return []
    unknown = sorted(set(config) - set(fields))
    return [f"--speculative-config: SpeculativeConfig has no field {k!r}" for k in unknown]


def check_argv(argv: Sequence[str], snapshot: Snapshot) -> list[str]:
    """Errors vLLM's parser would raise for `argv` (the arguments after `vllm serve`): unknown
    option, missing value, value given to a boolean, choice not allowed, wrong number type,
    a `--speculative-config` key SpeculativeConfig does not have, more than one positional.
    Empty when the snapshot accepts every argument."""
    errors: list[str] = []
    tokens = list(argv)
    positionals = 0
    where = f"vLLM {snapshot.package} {snapshot.version}"
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not _looks_like_option(token):
            positionals += 1
            if positionals > 1:
                errors.append(f"unrecognized argument {token!r} ({where} takes one model)")
            continue
        name, eq, inline = token.partition("=")
        option = _canonical(name, snapshot)
        spec = snapshot.options.get(option)
        if spec is None:
            errors.append(f"unknown option {name!r} ({where} has no such option)")
            if eq == "" and i < len(tokens) and not _looks_like_option(tokens[i]):
                i += 1  # skip its value so that it is not read as the model
            continue
        if not spec["takes_value"]:
            if eq:
                errors.append(f"{name} takes no value ({where}), got {inline!r}")
            continue
        values: list[str]
        if eq:
            values = [inline]
        else:
            values = []
            many = spec.get("nargs") in ("+", "*")
            while i < len(tokens) and not _looks_like_option(tokens[i]):
                values.append(tokens[i])
                i += 1
                if not many:
                    break
            if not values:
                errors.append(f"{name} needs a value ({where})")
                continue
        if spec["dest"] == "speculative_config":
            errors += [f"{e} ({where})" for e in _speculative_keys(values[0], snapshot)]
        choices = spec.get("choices")
        for value in values:
            if choices is not None and value not in choices:
                errors.append(
                    f"{name}: invalid choice {value!r} ({where} allows: {', '.join(choices)})"
                )
            problem = _type_error(name, value, spec.get("type"))
            if problem:
                errors.append(f"{problem} ({where})")
    return errors


def check_body(path: str, body: Mapping[str, Any], snapshot: Snapshot) -> list[str]:
    """Fields of a request body that vLLM's request model for `path` does not declare
    (vLLM accepts and silently ignores them), including inside `stream_options`."""
    model = snapshot.request_paths.get(path)
    if model is None:
        return [f"{path}: no request model known for this path in vLLM {snapshot.version}"]
    fields = snapshot.request_fields(model)
    errors = [
        f"{path}: field {key!r} is not declared by vLLM {snapshot.version}'s {model}"
        for key in body
        if key not in fields
    ]
    options = body.get("stream_options")
    if isinstance(options, Mapping):
        stream_fields = snapshot.request_fields("StreamOptions")
        errors += [
            f"{path}: stream_options.{key} is not declared by vLLM {snapshot.version}'s "
            "StreamOptions"
            for key in options
            if key not in stream_fields
        ]
    return errors
