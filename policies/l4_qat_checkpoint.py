"""l4-qat-checkpoint: a 24 GB GPU serves Gemma 4 12B only as a QAT checkpoint."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting_strings
from policies._server import vllm_servers
from serving.catalog.models import MODELS, Role

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
            "description": "No longer read: a checkpoint is QAT when the catalogue says so for "
            "the checkpoint the served path resolves to, never because its name holds a "
            "marker. Kept so existing configurations still load.",
        },
    }
)


def _qat_targets() -> str:
    return ", ".join(sorted(k for k, c in MODELS.items() if c.role is Role.TARGET and c.qat))


def validate_l4_qat_checkpoint(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    accelerators = setting_strings(args, CONFIG, "accelerators")
    for server in vllm_servers(args.resource_type, args.props):
        if server.accelerator not in accelerators:
            continue
        card = server.card
        ref = server.model_ref or "(none)"
        if card is not None and card.qat:
            continue
        if card is None:
            why = (
                "which does not resolve to a checkpoint this stack's download job produces, or "
                "is loaded another way than the catalogue says (--quantization), so whether "
                "what runs is QAT is not known (the vllm-server-readable policy says why)"
            )
        else:
            why = (
                f"which is {card.repo_id} (~{card.weight_bytes / 1e9:.0f} GB of weights), not a "
                "QAT checkpoint: bf16 weights leave no room for the KV cache on a 24 GB GPU and "
                "vLLM fails at start-up"
            )
        report_violation(
            f"{args.name}: {server.where} serves {ref!r} on {server.accelerator}, {why}. "
            f"Serve a QAT checkpoint instead ({_qat_targets()}; stack config key 'model').",
            None,
        )


l4_qat_checkpoint = resource_policy(
    "l4-qat-checkpoint",
    "vLLM on an NVIDIA L4 serves a quantization-aware-trained (QAT) checkpoint.",
    validate_l4_qat_checkpoint,
    config=CONFIG,
)
