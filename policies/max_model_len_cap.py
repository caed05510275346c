"""max-model-len-cap: the context an L4 serves is capped (KV cache and cold-start budget)."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies._config import resource_policy, schema, setting_int, setting_strings
from policies._server import vllm_servers

CONFIG = schema(
    {
        "maxModelLen": {
            "type": "integer",
            "minimum": 256,
            "default": 32768,
            "description": "Largest --max-model-len allowed on the listed GPUs.",
        },
        "accelerators": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["nvidia-l4"],
            "description": "GPU types the cap applies to.",
        },
    }
)


def validate_max_model_len_cap(
    args: ResourceValidationArgs, report_violation: ReportViolation
) -> None:
    cap = setting_int(args, CONFIG, "maxModelLen")
    accelerators = setting_strings(args, CONFIG, "accelerators")
    for server in vllm_servers(args.resource_type, args.props):
        if server.accelerator not in accelerators:
            continue
        value, bad = server.max_model_len()
        if bad is not None:
            report_violation(
                f"{args.name}: {server.where} has --max-model-len={bad!r}, which is not a "
                f"number; set an integer of at most {cap}.",
                None,
            )
            continue
        if value is None:
            card = server.card
            context = card.architecture.max_context if card and card.architecture else None
            shown = f"the model's full context ({context} tokens)" if context else "the model's"
            given = server.args.get("max-model-len")
            how = f"has --max-model-len={given}" if given is not None else "sets no --max-model-len"
            report_violation(
                f"{args.name}: {server.where} {how}, so vLLM uses {shown} "
                f"on {server.accelerator}; set --max-model-len to at most {cap} (stack config "
                "key 'maxModelLen').",
                None,
            )
        elif value > cap:
            report_violation(
                f"{args.name}: {server.where} has --max-model-len={value} on "
                f"{server.accelerator}, above the cap of {cap}; lower it to {cap} or less "
                "(stack config key 'maxModelLen'), or raise the policy's 'maxModelLen'.",
                None,
            )


max_model_len_cap = resource_policy(
    "max-model-len-cap",
    "vLLM on an NVIDIA L4 serves at most the configured context length.",
    validate_max_model_len_cap,
    config=CONFIG,
)
