"""l4-qat-checkpoint: a 24 GB GPU serves Gemma 4 12B only as a QAT checkpoint."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from policies._config import schema, setting_strings
from policies._server import vllm_servers
from serving.models import MODELS, Role

CONFIG = schema(
    {
        "accelerators": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["nvidia-l4"],
            "description": "GPU types (Cloud Run accelerator values) that need a QAT checkpoint.",
        },
        "qatMarkers": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["qat"],
            "description": "Name fragments that mark a checkpoint the catalog does not know as "
            "quantization-aware trained.",
        },
    }
)


def _qat_targets() -> str:
    return ", ".join(sorted(k for k, c in MODELS.items() if c.role is Role.TARGET and c.qat))


def validate_l4_qat_checkpoint(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    accelerators = setting_strings(args, CONFIG, "accelerators")
    markers = [m.lower() for m in setting_strings(args, CONFIG, "qatMarkers")]
    for server in vllm_servers(args.resource_type, args.props):
        if server.accelerator not in accelerators:
            continue
        card = server.card
        ref = server.model_ref or "(none)"
        is_qat = card.qat if card is not None else any(marker in ref.lower() for marker in markers)
        if is_qat:
            continue
        size = f" (~{card.weight_bytes / 1e9:.0f} GB of weights)" if card else ""
        report_violation(
            f"{args.name}: {server.where} serves {ref!r}{size} on {server.accelerator}, which "
            "is not a QAT checkpoint: bf16 weights leave no room for the KV cache on a 24 GB "
            f"GPU and vLLM fails at start-up. Serve a QAT checkpoint instead ({_qat_targets()}; "
            "stack config key 'model').",
            None,
        )


l4_qat_checkpoint = ResourceValidationPolicy(
    name="l4-qat-checkpoint",
    description="vLLM on an NVIDIA L4 serves a quantization-aware-trained (QAT) checkpoint.",
    validate=validate_l4_qat_checkpoint,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=CONFIG,
)
