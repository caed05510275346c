"""The evidence behind the performance model's priors (pure; reads one package data file).

``serving/data/performance-evidence.json`` holds, each figure with its source and conditions:
the client's front-end latency per platform, the bandwidth efficiency per kernel path (weight
format x accelerator generation x backend), published Gemma 4 MTP acceptance figures and the
published measurements the model is validated against (:mod:`serving.capacity.perf_validation`).
"""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path
from typing import Any

from serving.capacity.perf import Coefficients
from serving.catalog.hardware import HardwareProfile, Platform
from serving.catalog.models import ModelCard, Quantization

#: The evidence the priors come from (front-end latency, efficiency by kernel path, MTP
#: acceptance), each figure with its source: docs/performance-evidence.md renders it.
EVIDENCE_FILE = Path(__file__).resolve().parent.parent / "data" / "performance-evidence.json"


@cache
def evidence() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EVIDENCE_FILE.read_text(encoding="utf-8"))
    return data


def mtp_prior_acceptance() -> float:
    """Per-draft-token acceptance of Gemma 4's MTP drafter until a run measures it: the
    median of the published figures in the evidence file (a few percent to ~80 %; the
    table shows the bounds, nothing and everything accepted)."""
    return float(statistics.median(m["acceptance"] for m in evidence()["mtp_acceptance"]))


def accepted_length(acceptance: float, drafts: int) -> float:
    """Mean tokens a step brings per sequence when each draft token is accepted with
    probability ``acceptance`` given the ones before it were: ``1 + a + a^2 + ... + a^k``."""
    if not 0.0 <= acceptance <= 1.0:
        raise ValueError(f"--mtp-acceptance must be in [0, 1], got {acceptance:g}")
    return 1.0 + sum(acceptance**i for i in range(1, drafts + 1))


def api_server_time() -> tuple[float, float, str]:
    """(seconds a request, seconds a prompt token, source) vLLM's API server spends on each
    request: one process does it for every request, so it caps a replica's rate."""
    entry = evidence()["api_server"]
    return (
        float(entry["seconds_per_request"]),
        float(entry["seconds_per_prompt_token"]),
        str(entry["source"]),
    )


def front_end(platform: str) -> tuple[float, bool, str]:
    """(seconds, measured, source) the client sees on top of the engine on ``platform``, for
    an entry that states its seconds. An entry that says ``derived`` takes them from the
    validation's fit rows, one that says ``stand_in`` from another platform's:
    :func:`serving.capacity.perf_validation.front_end` resolves both."""
    entry = evidence()["front_end"][platform]
    if "derived" in entry or "stand_in" in entry:
        how = entry.get("derived") or f"{entry['stand_in']}'s"
        raise ValueError(
            f"front end of {platform!r} is derived from {how}: "
            "serving.capacity.perf_validation.front_end resolves it"
        )
    return float(entry["seconds"]), bool(entry["measured"]), str(entry["source"])


def kernel_path(
    card: ModelCard, profile: HardwareProfile, weights: str | None = None
) -> tuple[str, str, str]:
    """(weight format, accelerator generation, backend) of a checkpoint on a hardware;
    ``weights`` names the format where the engine serves the checkpoint in another one (a
    validation setup whose vLLM quantised the weights as it loaded them)."""
    if weights is None:
        weights = "w4a16" if card.quantization is Quantization.W4A16_COMPRESSED_TENSORS else "bf16"
    generation = {"l4": "ada", "rtx-pro-6000": "blackwell", "tpu-v6e-1": "tpu-v6e"}.get(
        profile.key, profile.key
    )
    backend = "vllm-tpu" if profile.platform is Platform.TPU else "vllm-cuda"
    return weights, generation, backend


def efficiency_prior(
    card: ModelCard, profile: HardwareProfile, weights: str | None = None
) -> tuple[float, bool, str]:
    """(bandwidth efficiency, measured, source) for the checkpoint's kernel path on this
    hardware (``weights``: see :func:`kernel_path`); a path with no entry says so and takes
    the prior's default."""
    path = kernel_path(card, profile, weights)
    for entry in evidence()["efficiency_priors"]:
        if (entry["weights"], entry["generation"], entry["backend"]) == path:
            return float(entry["bandwidth_efficiency"]), bool(entry["measured"]), entry["source"]
    return (
        Coefficients().bandwidth_efficiency,
        False,
        f"no published measurement of {' x '.join(path)}: the generic prior stands in",
    )
