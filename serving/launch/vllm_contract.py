"""vLLM's own contract at a pinned version, read from a snapshot.

`scripts/vllm_contract.py` runs vLLM's real argument parser, config checks and request models
in a separate environment and writes `serving/data/<package>-<version>.json`: every option
string of `vllm serve` (aliases such as `-tp`, `--no-` negations), which options take no value,
their choices and defaults, the OpenAI request models' field names and the Prometheus metric
names. This module reads those snapshots (no vLLM import) so that tests, policies and the
settings can check an option, a default or a metric name against what that vLLM version
declares.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
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
    def metrics(self) -> list[Mapping[str, Any]]:
        metrics: list[Mapping[str, Any]] = self.data["metrics"]
        return metrics


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
